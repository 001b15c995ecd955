/* The files the training container reads: nccl.env, nccl.conf and
 * decision.json, written as one set (write.c says how) and only once the
 * whole decision is known. */
#ifndef NP_OUTPUTS_H
#define NP_OUTPUTS_H

#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* One variable NCCL, Gloo or TensorPipe reads. */
struct outputs_var {
	const char *key;
	char value[512];
};

#define OUTPUTS_VARS_MAX 16

/* "20261201T145000Z-1a2b3c4d": the decision's time (UTC) and 32 random bits. */
#define OUTPUTS_ID_MAX 40

struct outputs_env {
	size_t n;
	struct outputs_var vars[OUTPUTS_VARS_MAX];
	/* The decision these variables belong to, written into each of the
	 * three files ("" : outputs_write makes one). */
	char decision_id[OUTPUTS_ID_MAX];
};

/* A new decision id. */
void outputs_new_id(char id[OUTPUTS_ID_MAX]);

/* What was chosen on this node; several interfaces (rails) are allowed. */
struct outputs_choice {
	size_t n_ifaces;
	const char *ifaces[8]; /* exact names, first is the primary */
	int family;            /* AF_INET or AF_INET6 */
	const char *ib_hca;    /* "mlx5_0:1,mlx5_1:1" or NULL: no RDMA */
	int gid_index;         /* RoCE v2 GID index, -1 none */
};

/* The variables for a choice, in a fixed order:
 * NCCL_SOCKET_IFNAME (=name[,name...]: NCCL's '=' applies to the whole
 * list), GLOO_SOCKET_IFNAME (name[,name...]), TP_SOCKET_IFNAME (the first
 * name), NCCL_SOCKET_FAMILY (AF_INET/AF_INET6; left out for AF_UNSPEC),
 * then NCCL_IB_HCA (=hca:port,...) and NCCL_IB_GID_INDEX where set.
 * A name NCCL's list syntax cannot carry (empty, or containing ',' or ':')
 * is refused with NP_EUSAGE naming the interface. */
int outputs_env_from_choice(const struct outputs_choice *c, struct outputs_env *env, np_error *err);

/* POSIX sh single quoting: 'it'\''s'.  Returns a malloc'd string. */
char *outputs_sh_quote(const char *s);

/* Render the files' contents (malloc'd, NUL-terminated).
 * nccl.env: a "# written by nicpick VERSION" line, a "# decision ID" line
 * when env->decision_id is set, then `export KEY='value'` lines; NULL only
 * when out of memory.
 * nccl.conf: the NCCL_* variables as KEY=VALUE lines, which NCCL reads via
 * NCCL_CONF_FILE (param.cc setEnvFile): a line starting with '#' is a
 * comment, only the trailing '\n' is stripped, no quotes, no trimming, the
 * value is cut at 1023 bytes, and a variable already in the environment
 * wins over the file.  A value NCCL would read differently (control
 * characters, 1024 bytes or more) is refused with NP_EUSAGE.  The same
 * "# decision ID" line as nccl.env's follows the header. */
char *outputs_render_env(const struct outputs_env *env);
int outputs_render_conf(const struct outputs_env *env, char **out, np_error *err);
/* decision.json: pretty-printed, keys in insertion order, trailing newline. */
char *outputs_render_json(const json_t *decision);

/* The out-dir and the directories in it: 0755 whatever the umask (the
 * training container may run as another user). */
#define OUTPUTS_DIR_MODE 0755

/* The directories a run made for its out-dir (outputs_mkdir_p,
 * outputs_made_add), so that a run that fails can take them back
 * (outputs_unmake) instead of leaving an empty out-dir, as if a result
 * were on its way.  Each is a prefix of path, outermost first, with its
 * identity: what is found there later must be the same directory. */
#define OUTPUTS_MADE_MAX 16
struct outputs_made {
	char path[PATH_MAX]; /* the longest recorded */
	size_t n;
	struct outputs_made_dir {
		size_t len; /* path[0..len) */
		dev_t dev;
		ino_t ino;
	} dir[OUTPUTS_MADE_MAX];
};

/* mkdir -p: every missing component of dir, mode 0755 whatever the umask
 * (the training container may run as another user); those it made are
 * added to made (may be NULL). */
int outputs_mkdir_p(const char *dir, struct outputs_made *made, np_error *err);
/* Record path, a directory this run has just made (made may be NULL).  One
 * that is not below the last one recorded, or past OUTPUTS_MADE_MAX, is
 * not recorded: it stays. */
void outputs_made_add(struct outputs_made *made, const char *path);
/* Remove what made records, innermost first, each only while it is empty
 * and still the directory that was made; a directory with anything in it
 * stays, and so do those above it.  Nothing is followed: the directory
 * above the outermost is opened by its path (the user's, which existed),
 * each one below by its name with O_NOFOLLOW.  Best effort. */
void outputs_unmake(const struct outputs_made *made);
/* Remove NAME (relative to the directory dfd, or a path with AT_FDCWD), a
 * directory of files that nicpick made: its entries, then itself.  A NAME
 * that is a symbolic link, or not a directory, is left alone, and nothing
 * is followed out of it: the out-dir is shared with the training
 * container.  Best effort. */
void outputs_remove_flat_dir(int dfd, const char *name);
/* Write nccl.env, nccl.conf and decision.json into dir (created with mode
 * 0755 if missing, like mkdir -p; files are 0644) as one set:
 *   DIR/decision-ID/{nccl.env,nccl.conf,decision.json}  the set, ID = env->decision_id
 *                                                       (a new one when "")
 *   DIR/current -> decision-ID                          replaced by one rename
 *   DIR/nccl.env -> current/nccl.env (and the other two) made once
 * decision.json gets "decision_id" after "version"; nccl.env and nccl.conf
 * a "# decision ID" line.  A reader of the documented paths sees a whole
 * set, the old one until the rename and the new one after it, also when
 * the run is killed at any point; sets other than the one in force (older
 * ones, a killed run's) are removed.  Writers to one directory take turns
 * on an flock of DIR/.nicpick.lock (refused after 10 s, or at deadline_ms,
 * a CLOCK_MONOTONIC time in ms, if that comes first; 0: none).  A directory an
 * earlier nicpick filled with plain files is adopted as the set in force
 * first (hard links).  On failure the set in force is unchanged, and a
 * directory that had none is left as it was: without the links, and
 * without the lock file if this call made it (the directories made for
 * dir are added to made, may be NULL, for outputs_unmake).  Errors name
 * the path and the OS error: "cannot write /x/decision-ID/nccl.env:
 * Permission denied". */
int outputs_write(const char *dir, const struct outputs_env *env, const json_t *decision,
		  int64_t deadline_ms, struct outputs_made *made, np_error *err);

#endif
