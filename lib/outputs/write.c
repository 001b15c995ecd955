/* Atomic writes: every file goes to a temporary in the same directory, is
 * fsync'ed, and is renamed into place only when all of them are complete. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outputs/outputs.h"
#include "util/atomic.h"
#include "util/cleanup.h"
#include "util/testhook.h"

#define OUT_FILE_MODE 0644
#define OUT_DIR_MODE 0755

struct out_file {
	const char *name;
	char *data;
	size_t len;
	char path[PATH_MAX]; /* final path */
	char tmp[PATH_MAX];  /* temporary, "" once renamed or removed */
};

static int join(char *buf, size_t size, const char *dir, const char *name, np_error *err)
{
	if (np_path_join(buf, size, dir, name) < 0)
		return np_error_set(err, NP_EINTERNAL, ENAMETOOLONG, "cannot write %s/%s", dir, name);
	return 0;
}

int outputs_mkdir_p(const char *dir, np_error *err)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return np_error_set(err, NP_EINTERNAL, ENAMETOOLONG, "cannot create directory %s", dir);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		/* Created ones get 0755 whatever the umask: the training
		 * container may run as another user. */
		if (mkdir(buf, OUT_DIR_MODE) == 0) {
			if (chmod(buf, OUT_DIR_MODE) < 0)
				return np_error_set(err, NP_EINTERNAL, errno,
						    "cannot create directory %s", buf);
		} else if (errno != EEXIST) {
			return np_error_set(err, NP_EINTERNAL, errno, "cannot create directory %s", buf);
		}
		*p = saved;
		if (!saved)
			break;
	}
	struct stat st;
	if (stat(dir, &st) < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot create directory %s", dir);
	if (!S_ISDIR(st.st_mode))
		return np_error_set(err, NP_EINTERNAL, ENOTDIR, "cannot create directory %s", dir);
	return 0;
}

static void remove_temp(struct out_file *f)
{
	if (f->tmp[0])
		unlink(f->tmp);
	f->tmp[0] = '\0';
}

static int fill_data(int fd, void *ud)
{
	const struct out_file *f = ud;
	return np_write_all(fd, f->data, f->len);
}

/* Write f->data to a temporary DIR/.NAME.XXXXXX, mode 0644 (the training
 * container may run as another user), fsync'ed and closed. */
static int write_temp(const char *dir, struct out_file *f, np_error *err)
{
	if (join(f->path, sizeof(f->path), dir, f->name, err) < 0)
		return -1;
	return np_temp_file(dir, f->name, OUT_FILE_MODE, fill_data, f, f->path, f->tmp,
			    sizeof(f->tmp), err);
}

/* A run killed between writing and renaming (SIGKILL, the node going
 * away) leaves its temporaries DIR/.NAME.XXXXXX behind; the next run
 * removes them, so that only whole files stay. */
static void remove_stale_temps(const char *dir, const struct out_file *files, size_t n)
{
	cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(dup(fd)) : NULL;
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		for (size_t i = 0; i < n; i++) {
			size_t nl = strlen(files[i].name);
			if (e->d_name[0] == '.' && !strncmp(e->d_name + 1, files[i].name, nl) &&
			    e->d_name[1 + nl] == '.' && strlen(e->d_name + 2 + nl) == 6)
				unlinkat(fd, e->d_name, 0);
		}
	}
	closedir(d);
}

/* Temporaries for all files first, then the renames: a failure before the
 * first rename leaves the directory as it was. */
static int write_files(const char *dir, struct out_file *files, size_t n, np_error *err)
{
	if (!dir || !*dir)
		return np_error_set(err, NP_EUSAGE, 0, "no output directory given");
	if (outputs_mkdir_p(dir, err) < 0)
		return -1;
	remove_stale_temps(dir, files, n);
	size_t i;
	for (i = 0; i < n; i++)
		if (write_temp(dir, &files[i], err) < 0)
			goto fail;
	/* The one rename failure we can foresee: a directory in the way.
	 * Checked before the first rename so no file is replaced. */
	for (i = 0; i < n; i++) {
		struct stat st;
		if (lstat(files[i].path, &st) == 0 && S_ISDIR(st.st_mode)) {
			np_error_set(err, NP_EINTERNAL, EISDIR, "cannot write %s", files[i].path);
			goto fail;
		}
	}
	for (i = 0; i < n; i++) {
		if (rename(files[i].tmp, files[i].path) < 0) {
			np_error_set(err, NP_EINTERNAL, errno, "cannot write %s", files[i].path);
			goto fail;
		}
		files[i].tmp[0] = '\0';
		if (i == 0)
			np_test_point("mid-outputs");
	}
	return np_fsync_dir(dir, err);
fail:
	for (i = 0; i < n; i++)
		remove_temp(&files[i]);
	return -1;
}

int outputs_write_file_atomic(const char *dir, const char *name, const char *data, size_t len,
			      np_error *err)
{
	struct out_file f = {.name = name, .data = (char *)data, .len = len};
	return write_files(dir, &f, 1, err);
}

int outputs_write(const char *dir, const struct outputs_env *env, const json_t *decision,
		  np_error *err)
{
	if (!decision)
		return np_error_set(err, NP_EINTERNAL, 0, "no decision to write");
	cleanup_free char *env_text = outputs_render_env(env);
	cleanup_free char *conf_text = NULL;
	cleanup_free char *json_text = outputs_render_json(decision);
	if (!env_text || !json_text)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "rendering outputs");
	if (outputs_render_conf(env, &conf_text, err) < 0)
		return -1;

	struct out_file files[] = {
		{.name = "nccl.env", .data = env_text, .len = strlen(env_text)},
		{.name = "nccl.conf", .data = conf_text, .len = strlen(conf_text)},
		{.name = "decision.json", .data = json_text, .len = strlen(json_text)},
	};
	return write_files(dir, files, sizeof(files) / sizeof(files[0]), err);
}
