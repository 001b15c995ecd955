/* nicpick's side of the smoke test: find nicpick-smoke, run it with an
 * explicit environment under the deadline, read its one result message. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "smoke/smoke.h"
#include "util/clock.h"
#include "util/testhook.h"
#include "util/cancel.h"

#define COMPANION "nicpick-smoke"
#define GRACE_MS 5000 /* after the deadline, before the companion is killed */

static bool executable(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int smoke_find_companion(const char *explicit_path, const char *self_exe, const char *path_env,
			 char *out, size_t len, np_error *err)
{
	if (explicit_path && *explicit_path) {
		if (!executable(explicit_path))
			return np_error_set(err, NP_ESMOKE, 0,
					    "NICPICK_SMOKE_BIN=%s is not an executable file", explicit_path);
		snprintf(out, len, "%s", explicit_path);
		return 0;
	}
	if (self_exe && *self_exe) {
		const char *slash = strrchr(self_exe, '/');
		if (slash) {
			snprintf(out, len, "%.*s/%s", (int)(slash - self_exe), self_exe, COMPANION);
			if (executable(out))
				return 0;
		}
	}
	for (const char *p = path_env; p && *p;) {
		const char *colon = strchr(p, ':');
		int n = colon ? (int)(colon - p) : (int)strlen(p);
		if (n > 0) {
			snprintf(out, len, "%.*s/%s", n, p, COMPANION);
			if (executable(out))
				return 0;
		}
		p = colon ? colon + 1 : NULL;
	}
	out[0] = '\0';
	return np_error_set(err, NP_ESMOKE, 0,
			    "%s not found beside nicpick or on PATH (set NICPICK_SMOKE_BIN)", COMPANION);
}

static bool key_is(const char *entry, const char *key)
{
	size_t n = strlen(key);
	return strncmp(entry, key, n) == 0 && entry[n] == '=';
}

int smoke_debug_file(char *buf, size_t len, const char *dir, const char *name)
{
	size_t o = 0;
	for (const char *p = dir; *p; p++) {
		if (o + 2 >= len)
			return -1;
		if (*p == '%')
			buf[o++] = '%';
		buf[o++] = *p;
	}
	int n = snprintf(buf + o, len - o, "/%s.%%h.%%p", name);
	return n < 0 || (size_t)n >= len - o ? -1 : 0;
}

/* The companion's environment: the base, less every variable nicpick sets,
 * plus nicpick's outputs and the debug settings its log check needs. */
static char **build_env(const struct smoke_opts *o, np_error *err)
{
	char *own[96][2]; /* the debug settings, NCCL_COMM_ID, the delivery and the container's */
	size_t n_own = 0;
	char debug_file[2 * SMOKE_PATH_MAX + 32];
	if (o->log_dir && smoke_debug_file(debug_file, sizeof(debug_file), o->log_dir, "nccl-debug") < 0) {
		np_error_set(err, NP_ESMOKE, ENAMETOOLONG, "the log directory %s", o->log_dir);
		return NULL;
	}
	static char k_comm[] = "NCCL_COMM_ID", k_dbg[] = "NCCL_DEBUG", k_sub[] = "NCCL_DEBUG_SUBSYS",
		    k_file[] = "NCCL_DEBUG_FILE", v_info[] = "INFO",
		    v_sub[] = "INIT,BOOTSTRAP,NET,ENV";
	if (o->comm_id)
		own[n_own][0] = k_comm, own[n_own++][1] = (char *)o->comm_id;
	if (o->log_dir) {
		own[n_own][0] = k_dbg, own[n_own++][1] = v_info;
		/* Without BOOTSTRAP, NCCL 2.23 and later hide the bootstrap line. */
		own[n_own][0] = k_sub, own[n_own++][1] = v_sub;
		own[n_own][0] = k_file, own[n_own++][1] = debug_file;
	}
	for (size_t i = 0; o->vars && o->vars[i] && o->vars[i + 1] && n_own < 96; i += 2) {
		own[n_own][0] = (char *)o->vars[i];
		own[n_own++][1] = (char *)o->vars[i + 1];
	}

	size_t n_base = 0;
	while (o->base_env && o->base_env[n_base])
		n_base++;
	char **env = calloc(n_base + n_own + 1, sizeof(char *));
	if (!env) {
		np_error_set(err, NP_EINTERNAL, ENOMEM, "building the smoke environment");
		return NULL;
	}
	size_t n = 0;
	for (size_t i = 0; i < n_base; i++) {
		bool ours = false;
		for (size_t j = 0; j < n_own && !ours; j++)
			ours = key_is(o->base_env[i], own[j][0]);
		for (size_t j = 0; o->unset && o->unset[j] && !ours; j++)
			ours = key_is(o->base_env[i], o->unset[j]);
		if (!ours && !(env[n++] = strdup(o->base_env[i])))
			goto oom;
	}
	for (size_t j = 0; j < n_own; j++)
		if (asprintf(&env[n++], "%s=%s", own[j][0], own[j][1]) < 0) {
			env[n - 1] = NULL;
			goto oom;
		}
	return env;
oom:
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	free(env);
	np_error_set(err, NP_EINTERNAL, ENOMEM, "building the smoke environment");
	return NULL;
}

static void free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

int smoke_spawn(const struct smoke_opts *o, bool info_only, struct smoke_result *r, np_error *err)
{
	memset(r, 0, sizeof(*r));
	int64_t left = np_left_ms(o->deadline_ms);
	if (left <= 0)
		return np_error_set(err, NP_ESMOKE, ETIMEDOUT,
				    "no time left for the smoke test (raise --timeout)");
	char a_rank[16], a_world[16], a_bytes[32], a_gpu[16], a_ms[32], a_parent[16];
	snprintf(a_parent, sizeof(a_parent), "%d", (int)getpid());
	snprintf(a_rank, sizeof(a_rank), "%d", o->rank);
	snprintf(a_world, sizeof(a_world), "%d", o->world);
	snprintf(a_bytes, sizeof(a_bytes), "%ld", o->max_bytes);
	snprintf(a_gpu, sizeof(a_gpu), "%d", o->gpu);
	snprintf(a_ms, sizeof(a_ms), "%lld", (long long)left);
	char *argv_run[] = { (char *)COMPANION, (char *)"run", (char *)"--rank", a_rank,
			     (char *)"--world", a_world, (char *)"--bytes", a_bytes,
			     (char *)"--gpu", a_gpu, (char *)"--timeout-ms", a_ms, (char *)"--parent",
			     a_parent, NULL, NULL, NULL, NULL };
	size_t na = 14;
	if (o->label && *o->label) {
		argv_run[na++] = (char *)"--label";
		argv_run[na++] = (char *)o->label;
	}
	if (o->no_links)
		argv_run[na++] = (char *)"--no-links";
	char *argv_info[] = { (char *)COMPANION, (char *)"info", (char *)"--gpu", a_gpu,
			      (char *)"--parent", a_parent, NULL };

	char **env = build_env(o, err);
	if (!env)
		return -1;
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		free_env(env);
		return np_error_set(err, NP_EINTERNAL, errno, "pipe");
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	/* Its own process group: a kill at the deadline reaches whatever
	 * NCCL or the driver started too. */
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&at, 0);
	pid_t pid;
	int rc = posix_spawn(&pid, o->companion, &fa, &at, info_only ? argv_info : argv_run, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	free_env(env);
	close(pfd[1]);
	if (rc != 0) {
		close(pfd[0]);
		return np_error_set(err, NP_ESMOKE, rc, "cannot run %s", o->companion);
	}
	np_test_point(info_only ? "mid-smoke-info" : "mid-smoke");

	char buf[SMOKE_RESULT_MAX_BYTES + 1];
	size_t len = 0;
	bool killed = false, eof = false, too_big = false;
	int64_t kill_at = o->deadline_ms + GRACE_MS;
	int stopped = 0;
	while (!eof) {
		int64_t wait = kill_at - np_now_ms();
		if ((stopped = np_cancelled(o->cancel)) != 0 || wait <= 0) {
			kill(-pid, SIGKILL);
			killed = true;
			break;
		}
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		int pr = poll(&p, 1, wait > 1000 ? 1000 : (int)wait);
		if (pr < 0 && errno != EINTR)
			break;
		if (pr <= 0)
			continue;
		char chunk[4096];
		ssize_t got = read(pfd[0], chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			eof = true;
			break;
		}
		size_t take = (size_t)got;
		if (len + take > SMOKE_RESULT_MAX_BYTES) {
			too_big = true;
			take = SMOKE_RESULT_MAX_BYTES - len;
		}
		memcpy(buf + len, chunk, take);
		len += take;
	}
	close(pfd[0]);
	/* The companion closes stdout only by exiting; give it the rest of
	 * the grace period, then kill the group. */
	int status = 0;
	/* Reap it as it exits: a pidfd is readable then (Linux 5.3); without
	 * one, look every 20 ms. */
#ifdef SYS_pidfd_open
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#else
	int pidfd = -1;
#endif
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid || (w < 0 && errno != EINTR))
			break;
		if (np_now_ms() >= kill_at && !killed) {
			kill(-pid, SIGKILL);
			killed = true;
		}
		int64_t nap = killed ? 1000 : kill_at - np_now_ms();
		struct pollfd pp = { .fd = pidfd, .events = POLLIN };
		if (pidfd >= 0 && poll(&pp, 1, nap > 1000 ? 1000 : nap < 0 ? 0 : (int)nap) >= 0)
			continue;
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (stopped)
		return np_error_cancelled(err, stopped, info_only ? "looking for the GPU" : "the smoke all-reduce ran");
	if (killed)
		return np_error_set(err, NP_ESMOKE, ETIMEDOUT,
				    "the smoke test did not end by the deadline and was killed (%s %s)",
				    info_only ? "looking for the GPU" : "rank", info_only ? "" : a_rank);
	if (too_big)
		return np_error_set(err, NP_ESMOKE, 0, "nicpick-smoke printed more than %d bytes",
				    SMOKE_RESULT_MAX_BYTES);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		len--;
	if (len == 0) {
		if (WIFSIGNALED(status))
			return np_error_set(err, NP_ESMOKE, 0, "nicpick-smoke died of signal %d (%s)",
					    WTERMSIG(status), strsignal(WTERMSIG(status)));
		return np_error_set(err, NP_ESMOKE, 0, "nicpick-smoke exited %d without a result",
				    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	return smoke_result_parse(buf, len, r, err);
}
