/* The pieces of an atomic, durable file write (lib/install): a temporary
 * beside the final file, filled, fsync'ed and closed; the caller renames
 * its temporaries once all are complete, then syncs the directory.  The
 * output set needs no sync (lib/outputs/write.c says why). */
#ifndef NP_ATOMIC_H
#define NP_ATOMIC_H

#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

/* "DIR/NAME", DIR's trailing slashes dropped.  -1 when it does not fit. */
int np_path_join(char *buf, size_t size, const char *dir, const char *name);

/* Write all of data (EINTR retried); -1 with errno set. */
int np_write_all(int fd, const void *data, size_t len);

/* A temporary DIR/.NAME.XXXXXX with mode (mkstemp makes 0600 whatever the
 * caller needs), filled by fill(fd, ud) (0, or -1 with errno set),
 * fsync'ed and closed; its path goes to tmp.  On failure nothing is left,
 * tmp is "", and the error reads "cannot write SHOWN: reason". */
int np_temp_file(const char *dir, const char *name, mode_t mode, int (*fill)(int fd, void *ud),
		 void *ud, const char *shown, char *tmp, size_t tmplen, np_error *err);

/* fsync the directory, so that renames into it are durable. */
int np_fsync_dir(const char *dir, np_error *err);

#endif
