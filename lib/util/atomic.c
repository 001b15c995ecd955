#include "util/atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

int np_path_join(char *buf, size_t size, const char *dir, const char *name)
{
	size_t dlen = strlen(dir);
	while (dlen > 1 && dir[dlen - 1] == '/')
		dlen--;
	int n = snprintf(buf, size, "%.*s%s%s", (int)dlen, dir, dir[dlen - 1] == '/' ? "" : "/", name);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

int np_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int np_temp_file(const char *dir, const char *name, mode_t mode, int (*fill)(int fd, void *ud),
		 void *ud, const char *shown, char *tmp, size_t tmplen, np_error *err)
{
	char base[NAME_MAX + 1];
	if ((size_t)snprintf(base, sizeof(base), ".%s.XXXXXX", name) >= sizeof(base) ||
	    np_path_join(tmp, tmplen, dir, base) < 0) {
		tmp[0] = '\0';
		return np_error_set(err, NP_EINTERNAL, ENAMETOOLONG, "cannot write %s", shown);
	}
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		tmp[0] = '\0';
		return np_error_set(err, NP_EINTERNAL, e, "cannot write %s", shown);
	}
	int e = 0;
	if (fchmod(fd, mode) < 0 || fill(fd, ud) < 0 || fsync(fd) < 0)
		e = errno;
	if (close(fd) < 0 && !e)
		e = errno;
	if (e) {
		unlink(tmp);
		tmp[0] = '\0';
		return np_error_set(err, NP_EINTERNAL, e, "cannot write %s", shown);
	}
	return 0;
}

int np_fsync_dir(const char *dir, np_error *err)
{
	cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return np_error_set(err, NP_EINTERNAL, errno, "cannot sync directory %s", dir);
	return 0;
}
