/* nccl.env through the real /bin/sh: every input forks a shell that sources
 * the file and prints the variables back.  About a thousand inputs a second
 * at best; fuzz_env checks the same property in process, far faster, with
 * a reader of the subset of sh that nicpick writes. */
#include "fuzz.h"

#include <errno.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env_model.h"

static char path[] = "/tmp/nicpick-fuzz-envsh.XXXXXX";
static int fd = -1;

static void cleanup(void)
{
	if (fd >= 0)
		unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fuzz_choice fc;
	static struct outputs_env env;
	np_error err = { 0 };

	if (fd < 0) {
		fd = mkstemp(path);
		if (fd < 0)
			abort();
		atexit(cleanup);
	}
	if (!fuzz_choice_from(data, size, &fc) || outputs_env_from_choice(&fc.c, &env, &err) < 0)
		return 0;
	char *sh = outputs_render_env(&env);
	FUZZ_CHECK(sh, "render_env failed");
	size_t len = strlen(sh);
	FUZZ_CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, sh, len, 0) == (ssize_t)len, "write");
	free(sh);

	/* Each variable, then a NUL, in the order written. */
	char script[2048] = ". \"$1\" || exit 9; printf '%s\\0'";
	for (size_t i = 0; i < env.n; i++)
		snprintf(script + strlen(script), sizeof(script) - strlen(script), " \"$%s\"",
			 env.vars[i].key);
	int p[2];
	FUZZ_CHECK(pipe(p) == 0, "pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	char *argv[] = { "sh", "-c", script, "sh", path, NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", "LC_ALL=C", NULL };
	pid_t pid;
	FUZZ_CHECK(posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, envp) == 0, "spawn");
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	static char out[65536];
	size_t o = 0;
	ssize_t r;
	while ((r = read(p[0], out + o, sizeof(out) - 1 - o)) > 0 || (r < 0 && errno == EINTR))
		o += r > 0 ? (size_t)r : 0;
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	FUZZ_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sh failed (status %d)", st);
	const char *q = out;
	for (size_t i = 0; i < env.n; i++) {
		size_t l = strnlen(q, (size_t)(out + o - q));
		FUZZ_CHECK(q + l < out + o && l == strlen(env.vars[i].value) &&
				   !memcmp(q, env.vars[i].value, l),
			   "%s: sh reads '%.*s', meant '%s'", env.vars[i].key, (int)l, q,
			   env.vars[i].value);
		q += l + 1;
	}
	FUZZ_CHECK(q == out + o, "sh printed more than the variables");
	return 0;
}
