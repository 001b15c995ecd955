/* What envcheck.c and train.c share. */
#ifndef NP_JOBS_PRIV_H
#define NP_JOBS_PRIV_H

#include "jobs/jobs.h"

/* Where container c sees out_dir/nccl.conf: through the volume an init
 * container mounts out_dir from (*volume).  0: found, 1: out_dir is in no
 * volume (the path cannot be known), -1: c does not mount that volume. */
int jobs_conf_path(const struct jobs_pod *p, const struct jobs_container *c, const char *out_dir,
		   char *buf, size_t len, const char **volume);

#endif
