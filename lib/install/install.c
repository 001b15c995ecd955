/* Copies of nicpick's own files into a shared volume, atomically: all
 * temporaries first, then the renames, so a reader never sees a partial
 * executable. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "install/install.h"
#include "util/atomic.h"
#include "util/cleanup.h"

#define INSTALL_MODE 0755

struct copy {
	char src[PATH_MAX]; /* a link: its target, relative to DIR */
	const char *name;
	bool link;
	char tmp[PATH_MAX]; /* "" once renamed or removed */
};

static int copy_fd(int in, int out)
{
	char buf[1 << 16];
	for (;;) {
		ssize_t r = read(in, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return (int)r;
		for (char *p = buf; r > 0;) {
			ssize_t w = write(out, p, (size_t)r);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -1;
			p += w;
			r -= w;
		}
	}
}

static int fill_copy(int fd, void *ud)
{
	return copy_fd(*(const int *)ud, fd);
}

/* A symbolic link DIR/.NAME.<n> to c->src, for the rename into place. */
static int link_temp(const char *dir, struct copy *c, np_error *err)
{
	for (unsigned n = 0; n < 100; n++) {
		char base[NAME_MAX];
		snprintf(base, sizeof(base), ".%s.%ld.%u", c->name, (long)getpid(), n);
		if (np_path_join(c->tmp, sizeof(c->tmp), dir, base) < 0) {
			c->tmp[0] = '\0';
			return np_error_set(err, NP_EUSAGE, ENAMETOOLONG, "cannot install into %s", dir);
		}
		if (symlink(c->src, c->tmp) == 0)
			return 0;
		if (errno != EEXIST) {
			int e = errno;
			c->tmp[0] = '\0';
			return np_error_set(err, NP_EINTERNAL, e, "cannot write %s/%s", dir, c->name);
		}
	}
	c->tmp[0] = '\0';
	return np_error_set(err, NP_EINTERNAL, EEXIST, "cannot write %s/%s", dir, c->name);
}

/* c->src into a temporary DIR/.NAME.XXXXXX, 0755, fsync'ed and closed. */
static int write_temp(const char *dir, struct copy *c, np_error *err)
{
	char base[NAME_MAX], dst[PATH_MAX];
	snprintf(base, sizeof(base), ".%s.XXXXXX", c->name);
	if (np_path_join(dst, sizeof(dst), dir, c->name) < 0 ||
	    np_path_join(c->tmp, sizeof(c->tmp), dir, base) < 0) {
		c->tmp[0] = '\0';
		return np_error_set(err, NP_EUSAGE, ENAMETOOLONG, "cannot install into %s", dir);
	}
	cleanup_close int in = open(c->src, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		c->tmp[0] = '\0';
		return np_error_set(err, NP_EINTERNAL, errno, "cannot read %s", c->src);
	}
	return np_temp_file(dir, c->name, INSTALL_MODE, fill_copy, &in, dst, c->tmp, sizeof(c->tmp),
			    err);
}

int install_self(const char *self, const char *dir, struct install_result *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!dir || !*dir)
		return np_error_set(err, NP_EUSAGE, 0, "install: no directory given");
	struct stat st;
	if (stat(dir, &st) < 0)
		return np_error_set(err, NP_EUSAGE, errno, "install: directory %s", dir);
	if (!S_ISDIR(st.st_mode))
		return np_error_set(err, NP_EUSAGE, ENOTDIR, "install: directory %s", dir);

	struct copy copies[INSTALL_MAX_FILES] = { { .name = "nicpick" }, { .name = INSTALL_SMOKE_NAME },
						  { .name = INSTALL_PLUGIN_NAME, .link = true } };
	if (!realpath(self, copies[0].src))
		return np_error_set(err, NP_EINTERNAL, errno, "install: cannot find this program (%s)", self);
	/* The companion is looked up beside the real file, not beside a link. */
	int n = 1;
	char *slash = strrchr(copies[0].src, '/');
	if (slash && snprintf(copies[1].src, sizeof(copies[1].src), "%.*s/%s", (int)(slash - copies[0].src),
			      copies[0].src, INSTALL_SMOKE_NAME) < (int)sizeof(copies[1].src) &&
	    stat(copies[1].src, &st) == 0 && S_ISREG(st.st_mode))
		n = 2;
	/* kubectl's plugin name, the same program (main.c answers to both) */
	copies[n] = copies[2];
	snprintf(copies[n].src, sizeof(copies[n].src), "nicpick");
	n++;

	int i;
	for (i = 0; i < n; i++)
		if ((copies[i].link ? link_temp(dir, &copies[i], err) : write_temp(dir, &copies[i], err)) < 0)
			goto fail;
	for (i = 0; i < n; i++) {
		char *dst = out->paths[i];
		np_path_join(dst, sizeof(out->paths[i]), dir, copies[i].name); /* fits: write_temp checked */
		if (lstat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
			np_error_set(err, NP_EINTERNAL, EISDIR, "cannot write %s", dst);
			goto fail;
		}
	}
	for (i = 0; i < n; i++) {
		if (rename(copies[i].tmp, out->paths[i]) < 0) {
			np_error_set(err, NP_EINTERNAL, errno, "cannot write %s", out->paths[i]);
			goto fail;
		}
		copies[i].tmp[0] = '\0';
	}
	out->n = n;
	return np_fsync_dir(dir, err);
fail:
	for (i = 0; i < n; i++)
		if (copies[i].tmp[0])
			unlink(copies[i].tmp);
	memset(out, 0, sizeof(*out));
	return -1;
}
