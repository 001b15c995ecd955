/* The output set: nccl.env, nccl.conf and decision.json change together.
 *
 * Each decision gets a directory of its own, DIR/decision-ID, holding the
 * three files; DIR/current is a symlink to the one in force, replaced with
 * one rename(2); DIR/nccl.env, DIR/nccl.conf and DIR/decision.json are
 * symlinks to current/NAME, made once.  A reader opening a documented path
 * therefore reads a whole file of a whole set, and a kill at any point
 * leaves either the old set or the new one in force (the rename of
 * `current` is the one moment it changes).  All of it is done holding an
 * flock(2) on DIR/.nicpick.lock: two runs on one directory take turns
 * instead of removing each other's files.  The symlinks are relative, so
 * the set reads the same wherever the volume is mounted.
 *
 * Nothing is fsync'ed.  The readers are the pod's own containers, which
 * see the page cache; what a sync would add is the set surviving a power
 * loss, and a node that comes back runs the pod's init containers again in
 * a new sandbox, so nicpick writes a new set before any container reads
 * one (a set a crash left half on disk is removed like any old set).  The
 * kubelet's own atomic writer for ConfigMap, Secret and projected volumes,
 * the same timestamped directory and one symlink rename, syncs nothing
 * either (pkg/volume/util/atomic_writer.go, writePayloadToDir).  The five
 * syncs cost a follower 0.2-0.4 ms of CPU on the VM's ext4 (issue 15's budget
 * is 5 ms) and, on a node's busy disk, journal commits on the job's path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "outputs/outputs.h"
#include "util/atomic.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/testhook.h"

#define OUT_FILE_MODE 0644
#define LOCK_NAME ".nicpick.lock"
#define CURRENT "current"
#define CURRENT_TMP ".current.new"
#define SET_PREFIX "decision-"
/* A directory written by nicpick before the output set existed: its files
 * become a set of their own before the first swap (see adopt_flat). */
#define FLAT_ID "earlier"
/* Another run holds the lock only while it writes three small files. */
#define LOCK_WAIT_MS 10000
#define LOCK_POLL_MS 10

struct out_file {
	const char *name;
	char *data;
	size_t len;
	char path[PATH_MAX]; /* final path */
};

static const char *const set_names[] = { "nccl.env", "nccl.conf", "decision.json" };
#define N_SET (sizeof(set_names) / sizeof(set_names[0]))

static int join(char *buf, size_t size, const char *dir, const char *name, np_error *err)
{
	if (np_path_join(buf, size, dir, name) < 0)
		return np_error_set(err, NP_EINTERNAL, ENAMETOOLONG, "cannot write %s/%s", dir, name);
	return 0;
}

void outputs_new_id(char id[OUTPUTS_ID_MAX])
{
	time_t now = time(NULL);
	struct tm tm;
	unsigned int rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		rnd = (unsigned int)ts.tv_nsec ^ (unsigned int)getpid() << 16;
	}
	gmtime_r(&now, &tm);
	size_t n = strftime(id, OUTPUTS_ID_MAX, "%Y%m%dT%H%M%SZ", &tm);
	snprintf(id + n, OUTPUTS_ID_MAX - n, "-%08x", rnd);
}

/* The lock file, opened; *created when this call made it.  Read-only:
 * flock needs no more, and a lock file another user made stays usable. */
static int open_lock(int dfd, bool *created)
{
	for (int tries = 0;; tries++) {
		int fd = openat(dfd, LOCK_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0 || errno != ENOENT) {
			*created = false;
			return fd;
		}
		fd = openat(dfd, LOCK_NAME, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			    OUT_FILE_MODE);
		if (fd >= 0 || errno != EEXIST || tries >= 8) {
			*created = fd >= 0;
			return fd;
		}
		/* another run made it between the two opens: open theirs */
	}
}

/* Whether fd is still the file DIR/.nicpick.lock names: a run that made
 * the lock and failed before any set was in force removes it again
 * (undo_first), so one that waited on the removed file takes the lock
 * anew. */
static bool lock_current(int dfd, int fd)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && fstatat(dfd, LOCK_NAME, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The lock that makes writers to one directory take turns.  Bounded: a
 * holder that never lets go is refused with a line naming the lock. */
static int take_lock(int dfd, const char *dir, int64_t deadline_ms, bool *created, np_error *err)
{
	int64_t until = np_now_ms() + LOCK_WAIT_MS;
	bool cut = deadline_ms > 0 && deadline_ms < until;
	if (cut)
		until = deadline_ms;
	int fd = open_lock(dfd, created);
	if (fd < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot write %s/%s", dir, LOCK_NAME);
	for (;;) {
		int e;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (lock_current(dfd, fd))
				return fd;
			/* Removed or replaced meanwhile: the file there now, at
			 * once, within the same bound (a file replaced over and
			 * over must not keep this loop going). */
			close(fd);
			fd = open_lock(dfd, created);
			if (fd < 0)
				return np_error_set(err, NP_EINTERNAL, errno, "cannot write %s/%s", dir,
						    LOCK_NAME);
			if (np_now_ms() < until)
				continue;
			e = EWOULDBLOCK;
		} else {
			e = errno;
		}
		if (e != EWOULDBLOCK && e != EINTR) {
			close(fd);
			return np_error_set(err, NP_EINTERNAL, e, "cannot lock %s/%s", dir, LOCK_NAME);
		}
		if (np_now_ms() >= until) {
			close(fd);
			if (cut)
				return np_error_set(err, NP_EINTERNAL, 0,
						    "cannot write %s: another nicpick holds %s/%s and the deadline "
						    "came first; run one nicpick per output directory",
						    dir, dir, LOCK_NAME);
			return np_error_set(err, NP_EINTERNAL, 0,
					    "cannot write %s: another nicpick has held %s/%s for %d s; "
					    "run one nicpick per output directory",
					    dir, dir, LOCK_NAME, LOCK_WAIT_MS / 1000);
		}
		struct timespec ts = { 0, LOCK_POLL_MS * 1000000L };
		if (nanosleep(&ts, NULL) < 0 && errno == EINTR) {
			/* A signal: the caller's cancellation says what next. */
			close(fd);
			return np_error_set(err, NP_EINTERNAL, EINTR, "waiting for %s/%s", dir, LOCK_NAME);
		}
	}
}

/* A set directory holds no subdirectories; a stale set is only clutter. */
void outputs_remove_flat_dir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Every set but `keep` (a name, "" none), and what a killed run left: the
 * staged `current` link and the earlier layout's temporaries. */
static void remove_stale(int dfd, const char *keep)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d); /* the dup shares dfd's offset, which an earlier pass left at the end */
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (!strncmp(n, SET_PREFIX, strlen(SET_PREFIX)) && strcmp(n, keep) != 0) {
			outputs_remove_flat_dir(dfd, n);
			continue;
		}
		if (!strcmp(n, CURRENT_TMP)) {
			unlinkat(dfd, n, 0);
			continue;
		}
		for (size_t i = 0; i < N_SET; i++) {
			size_t nl = strlen(set_names[i]);
			if (n[0] == '.' && !strncmp(n + 1, set_names[i], nl) && n[1 + nl] == '.' &&
			    (strlen(n + 2 + nl) == 6 || !strcmp(n + 2 + nl, "link")))
				unlinkat(dfd, n, 0);
		}
	}
	closedir(d);
}

/* The set `current` names ("" none). */
static int current_set(int dfd, const char *dir, char *buf, size_t size, np_error *err)
{
	buf[0] = '\0';
	struct stat st;
	if (fstatat(dfd, CURRENT, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return np_error_set(err, NP_EINTERNAL, errno, "cannot read %s/%s", dir, CURRENT);
	}
	if (!S_ISLNK(st.st_mode))
		return np_error_set(err, NP_EINTERNAL, EEXIST,
				    "cannot write %s/%s: something other than nicpick's link is there",
				    dir, CURRENT);
	ssize_t n = readlinkat(dfd, CURRENT, buf, size - 1);
	if (n < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot read %s/%s", dir, CURRENT);
	buf[n] = '\0';
	return 0;
}

/* The three files into the new set's directory, each whole. */
static int write_set(int dfd, const char *dir, const char *set, const struct out_file *files,
		     np_error *err)
{
	if (mkdirat(dfd, set, OUTPUTS_DIR_MODE) < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot create directory %s/%s", dir, set);
	cleanup_close int sfd = openat(dfd, set, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0 || fchmod(sfd, OUTPUTS_DIR_MODE) < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot create directory %s/%s", dir, set);
	for (size_t i = 0; i < N_SET; i++) {
		int fd = openat(sfd, files[i].name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				OUT_FILE_MODE);
		int e = fd < 0 ? errno : 0;
		if (!e && (fchmod(fd, OUT_FILE_MODE) < 0 ||
			   np_write_all(fd, files[i].data, files[i].len) < 0))
			e = errno;
		if (fd >= 0 && close(fd) < 0 && !e)
			e = errno;
		if (e)
			return np_error_set(err, NP_EINTERNAL, e, "cannot write %s", files[i].path);
		if (i == 0)
			np_test_point("mid-outputs");
	}
	return 0;
}

/* A directory that an earlier nicpick filled with plain files: they
 * become the set in force first (hard links, so nothing changes for a
 * reader), so that replacing them with the links below never shows a
 * reader a file of the new set beside one of the old. */
static int adopt_flat(int dfd, const char *dir, bool *flat, np_error *err)
{
	char set[sizeof(SET_PREFIX) + sizeof(FLAT_ID)];
	snprintf(set, sizeof(set), "%s%s", SET_PREFIX, FLAT_ID);
	*flat = false;
	for (size_t i = 0; i < N_SET; i++) {
		struct stat st;
		if (fstatat(dfd, set_names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			*flat = true;
	}
	if (!*flat)
		return 0;
	outputs_remove_flat_dir(dfd, set);
	if (mkdirat(dfd, set, OUTPUTS_DIR_MODE) < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot create directory %s/%s", dir, set);
	cleanup_close int sfd = openat(dfd, set, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot create directory %s/%s", dir, set);
	for (size_t i = 0; i < N_SET; i++) {
		struct stat st;
		if (fstatat(dfd, set_names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (linkat(dfd, set_names[i], sfd, set_names[i], 0) < 0)
			return np_error_set(err, NP_EINTERNAL, errno, "cannot keep %s/%s", dir,
					    set_names[i]);
	}
	if (symlinkat(set, dfd, CURRENT_TMP) < 0 || renameat(dfd, CURRENT_TMP, dfd, CURRENT) < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot write %s/%s", dir, CURRENT);
	return 0;
}

/* Whether DIR/NAME is the link to current/NAME (want gets that target):
 * 1 it is, 0 something else is there, -1 nothing can be read there (errno
 * says why: ENOENT when there is nothing). */
static int is_set_link(int dfd, const char *name, char want[64])
{
	char have[64];
	snprintf(want, 64, "%s/%s", CURRENT, name);
	ssize_t n = readlinkat(dfd, name, have, sizeof(have) - 1);
	if (n < 0)
		return errno == EINVAL ? 0 : -1; /* EINVAL: not a link */
	have[n] = '\0';
	return strcmp(have, want) == 0;
}

/* DIR/NAME -> current/NAME for each file, made once; a plain file of the
 * earlier layout (already adopted) is replaced by its link in one rename. */
static int make_links(int dfd, const char *dir, np_error *err)
{
	for (size_t i = 0; i < N_SET; i++) {
		char want[64], tmp[64];
		int r = is_set_link(dfd, set_names[i], want);
		if (r > 0)
			continue;
		if (r < 0 && errno == ENOENT) {
			if (symlinkat(want, dfd, set_names[i]) == 0)
				continue;
			return np_error_set(err, NP_EINTERNAL, errno, "cannot write %s/%s", dir,
					    set_names[i]);
		}
		snprintf(tmp, sizeof(tmp), ".%s.link", set_names[i]);
		unlinkat(dfd, tmp, 0);
		if (symlinkat(want, dfd, tmp) < 0 || renameat(dfd, tmp, dfd, set_names[i]) < 0) {
			int e = errno;
			unlinkat(dfd, tmp, 0);
			return np_error_set(err, NP_EINTERNAL, e, "cannot write %s/%s", dir, set_names[i]);
		}
	}
	return 0;
}

/* A failed write where no set was in force before, and none is now (a
 * full disk, most often): the links it made point nowhere, and the lock
 * file, if this run made it, is all that would be left of it.  Both go,
 * under the lock, so that the directory is as the run found it (and one
 * that the run made can be removed, lib/outputs/dir.c). */
static void undo_first(int dfd, bool lock_created)
{
	struct stat st;
	if (fstatat(dfd, CURRENT, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		return;
	for (size_t i = 0; i < N_SET; i++) {
		char want[64];
		if (is_set_link(dfd, set_names[i], want) > 0)
			unlinkat(dfd, set_names[i], 0);
	}
	if (lock_created)
		unlinkat(dfd, LOCK_NAME, 0);
}

/* A directory where one of the documented paths must go: refused before
 * anything changes. */
static int check_names(int dfd, const char *dir, np_error *err)
{
	for (size_t i = 0; i < N_SET; i++) {
		struct stat st;
		if (fstatat(dfd, set_names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
			return np_error_set(err, NP_EINTERNAL, EISDIR, "cannot write %s/%s", dir,
					    set_names[i]);
	}
	return 0;
}

/* Under the lock: stage the new set, then make it the one in force. */
static int write_locked(int dfd, const char *dir, const char *id, const struct out_file *files,
			np_error *err)
{
	char cur[NAME_MAX + 1], set[NAME_MAX + 1];
	if (current_set(dfd, dir, cur, sizeof(cur), err) < 0 || check_names(dfd, dir, err) < 0)
		return -1;
	remove_stale(dfd, cur);
	snprintf(set, sizeof(set), "%s%s", SET_PREFIX, id);
	if (write_set(dfd, dir, set, files, err) < 0) {
		outputs_remove_flat_dir(dfd, set);
		return -1;
	}
	np_test_point("outputs-written");
	bool flat = false;
	if ((!cur[0] && adopt_flat(dfd, dir, &flat, err) < 0) || make_links(dfd, dir, err) < 0) {
		outputs_remove_flat_dir(dfd, set);
		return -1;
	}
	np_test_point("outputs-linked");
	/* The one moment the set in force changes. */
	unlinkat(dfd, CURRENT_TMP, 0);
	if (symlinkat(set, dfd, CURRENT_TMP) < 0 || renameat(dfd, CURRENT_TMP, dfd, CURRENT) < 0) {
		int e = errno;
		unlinkat(dfd, CURRENT_TMP, 0);
		outputs_remove_flat_dir(dfd, set);
		return np_error_set(err, NP_EINTERNAL, e, "cannot write %s/%s", dir, CURRENT);
	}
	np_test_point("outputs-swapped");
	remove_stale(dfd, set);
	return 0;
}

/* decision.json with "decision_id" after "version" (first when there is
 * no "version"): the one id that the three files share. */
static char *render_json_with_id(const json_t *decision, const char *id)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	const char *key;
	json_t *val;
	bool placed = false;
	if (!json_object_get(decision, "version")) {
		json_object_set_new(o, "decision_id", json_string(id));
		placed = true;
	}
	json_object_foreach((json_t *)decision, key, val) {
		if (!strcmp(key, "decision_id"))
			continue;
		json_object_set(o, key, val);
		if (!placed && !strcmp(key, "version")) {
			json_object_set_new(o, "decision_id", json_string(id));
			placed = true;
		}
	}
	char *s = outputs_render_json(o);
	json_decref(o);
	return s;
}

int outputs_write(const char *dir, const struct outputs_env *env, const json_t *decision,
		  int64_t deadline_ms, struct outputs_made *made, np_error *err)
{
	if (!dir || !*dir)
		return np_error_set(err, NP_EUSAGE, 0, "no output directory given");
	if (!decision || !json_is_object(decision))
		return np_error_set(err, NP_EINTERNAL, 0, "no decision to write");
	struct outputs_env e = *env;
	if (!e.decision_id[0])
		outputs_new_id(e.decision_id);
	cleanup_free char *env_text = outputs_render_env(&e);
	cleanup_free char *conf_text = NULL;
	cleanup_free char *json_text = render_json_with_id(decision, e.decision_id);
	if (!env_text || !json_text)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "rendering outputs");
	if (outputs_render_conf(&e, &conf_text, err) < 0)
		return -1;

	if (outputs_mkdir_p(dir, made, err) < 0)
		return -1;
	struct out_file files[N_SET] = {
		{ .name = set_names[0], .data = env_text, .len = strlen(env_text) },
		{ .name = set_names[1], .data = conf_text, .len = strlen(conf_text) },
		{ .name = set_names[2], .data = json_text, .len = strlen(json_text) },
	};
	/* Errors name the file where it is written: DIR/decision-ID/NAME. */
	char set[NAME_MAX + 1], set_dir[PATH_MAX];
	snprintf(set, sizeof(set), "%s%s", SET_PREFIX, e.decision_id);
	if (join(set_dir, sizeof(set_dir), dir, set, err) < 0)
		return -1;
	for (size_t i = 0; i < N_SET; i++)
		if (join(files[i].path, sizeof(files[i].path), set_dir, files[i].name, err) < 0)
			return -1;
	cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot write %s", dir);
	bool lock_created = false;
	cleanup_close int lock = take_lock(dfd, dir, deadline_ms, &lock_created, err);
	if (lock < 0)
		return -1;
	if (write_locked(dfd, dir, e.decision_id, files, err) < 0) {
		undo_first(dfd, lock_created);
		return -1;
	}
	return 0;
}
