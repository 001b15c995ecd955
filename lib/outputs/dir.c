/* The out-dir itself: made like mkdir -p, and taken back by a run that
 * failed, as far as that run made it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outputs/outputs.h"

int outputs_mkdir_p(const char *dir, struct outputs_made *made, np_error *err)
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
		if (mkdir(buf, OUTPUTS_DIR_MODE) == 0) {
			outputs_made_add(made, buf);
			if (chmod(buf, OUTPUTS_DIR_MODE) < 0)
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

void outputs_made_add(struct outputs_made *made, const char *path)
{
	size_t len = strlen(path);
	if (!made || made->n >= OUTPUTS_MADE_MAX || len >= sizeof(made->path))
		return;
	if (made->n) {
		size_t last = made->dir[made->n - 1].len;
		if (len <= last || strncmp(path, made->path, last) != 0 || path[last] != '/')
			return;
	}
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	memcpy(made->path, path, len + 1);
	made->dir[made->n++] = (struct outputs_made_dir){ .len = len, .dev = st.st_dev,
							  .ino = st.st_ino };
}

void outputs_unmake(const struct outputs_made *made)
{
	if (!made || !made->n)
		return;
	/* Each one's name: its last component, cut out of a copy of path. */
	char buf[PATH_MAX];
	size_t start[OUTPUTS_MADE_MAX];
	memcpy(buf, made->path, sizeof(buf));
	for (size_t i = 0; i < made->n; i++) {
		size_t s = made->dir[i].len;
		while (s > 0 && buf[s - 1] != '/')
			s--;
		start[i] = s;
	}
	for (size_t i = 0; i < made->n; i++)
		buf[made->dir[i].len] = '\0';
	char above[PATH_MAX];
	snprintf(above, sizeof(above), "%.*s", (int)start[0], made->path);
	int fd[OUTPUTS_MADE_MAX + 1];
	fd[0] = open(above[0] ? above : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd[0] < 0)
		return;
	size_t k = 0; /* opened: fd[1..k] are made->dir[0..k) */
	while (k < made->n) {
		int f = openat(fd[k], buf + start[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (f >= 0 && fstat(f, &st) == 0 && st.st_dev == made->dir[k].dev &&
		    st.st_ino == made->dir[k].ino) {
			fd[++k] = f;
			continue;
		}
		if (f >= 0)
			close(f);
		break;
	}
	/* Innermost first: rmdir refuses one that is not empty. */
	bool removing = true;
	for (; k > 0; k--) {
		close(fd[k]);
		if (removing && unlinkat(fd[k - 1], buf + start[k - 1], AT_REMOVEDIR) < 0)
			removing = false;
	}
	close(fd[0]);
}
