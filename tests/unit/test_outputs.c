/* nccl.env / nccl.conf / decision.json: exact values, shell quoting that
 * survives /bin/sh, NCCL's conf syntax, and all-or-nothing writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "outputs/outputs.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int setup_tmpdir(void **state)
{
	char *dir = strdup("/tmp/np-outputs-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	*state = dir;
	return 0;
}

static json_t *kept[8];
static size_t n_kept;

static int teardown_tmpdir(void **state)
{
	while (n_kept)
		json_decref(kept[--n_kept]);
	nftw(*state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(*state);
	return 0;
}

static const char *value_of(const struct outputs_env *env, const char *key)
{
	for (size_t i = 0; i < env->n; i++)
		if (strcmp(env->vars[i].key, key) == 0)
			return env->vars[i].value;
	return NULL;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n = getdelim(&buf, &cap, '\0', f);
	fclose(f);
	if (n < 0) {
		free(buf);
		return strdup("");
	}
	return buf;
}

static void spit(const char *path, const char *data)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(data, f);
	assert_int_equal(fclose(f), 0);
}

/* Names in dir, sorted and joined with ' '. */
static void list_dir(const char *dir, char *out, size_t len)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	assert_true(n >= 0);
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..")) {
			if (out[0])
				strncat(out, " ", len - strlen(out) - 1);
			strncat(out, ents[i]->d_name, len - strlen(out) - 1);
		}
		free(ents[i]);
	}
	free(ents);
}

static void test_env_single_interface(void **state)
{
	struct outputs_choice c = {.n_ifaces = 1, .ifaces = {"eth1"}, .family = AF_INET, .gid_index = -1};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	assert_int_equal(env.n, 4);
	assert_string_equal(env.vars[0].key, "NCCL_SOCKET_IFNAME");
	assert_string_equal(env.vars[0].value, "=eth1");
	assert_string_equal(env.vars[1].key, "GLOO_SOCKET_IFNAME");
	assert_string_equal(env.vars[1].value, "eth1");
	assert_string_equal(env.vars[2].key, "TP_SOCKET_IFNAME");
	assert_string_equal(env.vars[2].value, "eth1");
	assert_string_equal(env.vars[3].key, "NCCL_SOCKET_FAMILY");
	assert_string_equal(env.vars[3].value, "AF_INET");
	assert_null(value_of(&env, "NCCL_IB_HCA"));
	assert_null(value_of(&env, "NCCL_IB_GID_INDEX"));
}

static void test_env_several_interfaces_and_rdma(void **state)
{
	struct outputs_choice c = {.n_ifaces = 2,
				   .ifaces = {"eth1", "eth2"},
				   .family = AF_INET6,
				   .ib_hca = "mlx5_0:1,mlx5_1:1",
				   .gid_index = 3};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	assert_int_equal(env.n, 6);
	/* NCCL's '=' covers the whole list; "=eth1,=eth2" would never match eth2. */
	assert_string_equal(value_of(&env, "NCCL_SOCKET_IFNAME"), "=eth1,eth2");
	assert_string_equal(value_of(&env, "GLOO_SOCKET_IFNAME"), "eth1,eth2");
	assert_string_equal(value_of(&env, "TP_SOCKET_IFNAME"), "eth1");
	assert_string_equal(value_of(&env, "NCCL_SOCKET_FAMILY"), "AF_INET6");
	assert_string_equal(env.vars[4].key, "NCCL_IB_HCA");
	assert_string_equal(env.vars[4].value, "=mlx5_0:1,mlx5_1:1");
	assert_string_equal(env.vars[5].key, "NCCL_IB_GID_INDEX");
	assert_string_equal(env.vars[5].value, "3");

	c.ib_hca = "=mlx5_2:1";
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	assert_string_equal(value_of(&env, "NCCL_IB_HCA"), "=mlx5_2:1");
}

static void test_env_refuses_names_nccl_cannot_carry(void **state)
{
	struct {
		const char *name;
		const char *why;
	} bad[] = {{"a,b", "contains ','"}, {"eth0:1", "contains ':'"}, {"", "empty"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct outputs_choice c = {.n_ifaces = 2,
					   .ifaces = {"eth1", bad[i].name},
					   .family = AF_INET,
					   .gid_index = -1};
		struct outputs_env env;
		np_error err = {0};
		assert_int_equal(outputs_env_from_choice(&c, &env, &err), -1);
		assert_int_equal(err.status, NP_EUSAGE);
		assert_non_null(strstr(err.msg, bad[i].why));
		if (*bad[i].name) {
			char want[64];
			snprintf(want, sizeof(want), "interface '%s'", bad[i].name);
			assert_non_null(strstr(err.msg, want));
		}
		assert_null(strchr(err.msg, '\n'));
	}
}

static void test_sh_quote(void **state)
{
	char *q = outputs_sh_quote("it's");
	assert_string_equal(q, "'it'\\''s'");
	free(q);
	q = outputs_sh_quote("");
	assert_string_equal(q, "''");
	free(q);
	q = outputs_sh_quote("$(x) `y` \"z\" \\");
	assert_string_equal(q, "'$(x) `y` \"z\" \\'");
	free(q);
}

static void test_render_env_text(void **state)
{
	struct outputs_choice c = {.n_ifaces = 1, .ifaces = {"eth1"}, .family = AF_INET, .gid_index = -1};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	char *text = outputs_render_env(&env);
	assert_non_null(text);
	assert_true(strncmp(text, "# written by nicpick ", 21) == 0);
	assert_non_null(strstr(text, "\nexport NCCL_SOCKET_IFNAME='=eth1'\n"
				     "export GLOO_SOCKET_IFNAME='eth1'\n"
				     "export TP_SOCKET_IFNAME='eth1'\n"
				     "export NCCL_SOCKET_FAMILY='AF_INET'\n"));
	free(text);
}

/* Run `sh -c SCRIPT sh ARG` in dir; stdout into out. Returns exit status. */
static int run_sh(const char *dir, const char *script, const char *arg, char *out, size_t len)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		if (chdir(dir) < 0)
			_exit(126);
		execl("/bin/sh", "sh", "-c", script, "sh", arg, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t got = 0;
	ssize_t n;
	while ((n = read(fds[0], out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fds[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_env_round_trips_through_sh(void **state)
{
	const char *dir = *state;
	char canary[128];
	snprintf(canary, sizeof(canary), "/tmp/np-pwned-%d", (int)getpid());
	char touch_abs[160];
	snprintf(touch_abs, sizeof(touch_abs), "$(touch %s)", canary);
	/* Harmless payloads only: a quoting bug must not be able to do damage. */
	const char *values[] = {
		"$(touch PWNED)", touch_abs, "`touch PWNED`", "a;touch PWNED", "it's", "'",
		"''", "'\\''", "\"q\"", "back\\slash", "*", "a b  c", "$HOME", "${IFS}",
		"'; touch PWNED; '", "!x", "a\nb", "=eth1", "eth0|touch PWNED", "&",
	};
	char path[256];
	snprintf(path, sizeof(path), "%s/nccl.env", dir);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		struct outputs_env env = {.n = 1};
		env.vars[0].key = "NCCL_SOCKET_IFNAME";
		snprintf(env.vars[0].value, sizeof(env.vars[0].value), "%s", values[i]);
		char *text = outputs_render_env(&env);
		assert_non_null(text);
		spit(path, text);
		free(text);
		char out[1024];
		int rc = run_sh(dir, ". \"$1\"; printf %s \"$NCCL_SOCKET_IFNAME\"", path, out,
				sizeof(out));
		assert_int_equal(rc, 0);
		if (strcmp(out, values[i]) != 0)
			fail_msg("value '%s' came back as '%s'", values[i], out);
		char names[256];
		list_dir(dir, names, sizeof(names));
		assert_string_equal(names, "nccl.env");
		assert_int_equal(access(canary, F_OK), -1);
	}
	/* Interface names through the whole path: choice -> env -> sh. */
	const char *names[] = {"$(touch PWNED)", "`touch X`", "a;b", "it's", "a b"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct outputs_choice c = {.n_ifaces = 1, .ifaces = {names[i]}, .family = AF_INET,
					   .gid_index = -1};
		struct outputs_env env;
		np_error err = {0};
		assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
		char *text = outputs_render_env(&env);
		spit(path, text);
		free(text);
		char out[1024];
		assert_int_equal(run_sh(dir, ". \"$1\"; printf '%s|%s|%s' \"$NCCL_SOCKET_IFNAME\" "
					     "\"$GLOO_SOCKET_IFNAME\" \"$TP_SOCKET_IFNAME\"",
					path, out, sizeof(out)),
				 0);
		char want[128];
		snprintf(want, sizeof(want), "=%s|%s|%s", names[i], names[i], names[i]);
		assert_string_equal(out, want);
		char ls[256];
		list_dir(dir, ls, sizeof(ls));
		assert_string_equal(ls, "nccl.env");
	}
}

/* NCCL's conf parser (param.cc setEnvFile), restated to check what NCCL
 * would read from our text: '#' at column 0 is a comment, the trailing
 * '\n' is stripped, the key ends at the first '=', the rest is the value. */
static const char *nccl_conf_lookup(const char *text, const char *key, char *val, size_t len)
{
	const char *line = text;
	while (*line) {
		const char *end = strchr(line, '\n');
		size_t l = end ? (size_t)(end - line) : strlen(line);
		if (line[0] != '#') {
			const char *eq = memchr(line, '=', l);
			if (eq && (size_t)(eq - line) == strlen(key) &&
			    strncmp(line, key, strlen(key)) == 0) {
				size_t vl = l - (size_t)(eq + 1 - line);
				snprintf(val, len, "%.*s", (int)vl, eq + 1);
				return val;
			}
		}
		line += end ? l + 1 : l;
	}
	return NULL;
}

static void test_conf_text_is_what_nccl_reads(void **state)
{
	struct outputs_choice c = {.n_ifaces = 2,
				   .ifaces = {"eth1", "eth2"},
				   .family = AF_INET,
				   .ib_hca = "mlx5_0:1",
				   .gid_index = 3};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	char *text;
	assert_int_equal(outputs_render_conf(&env, &text, &err), 0);
	const char *body = strstr(text, "\nNCCL_");
	assert_non_null(body);
	assert_string_equal(body + 1, "NCCL_SOCKET_IFNAME==eth1,eth2\n"
				      "NCCL_SOCKET_FAMILY=AF_INET\n"
				      "NCCL_IB_HCA==mlx5_0:1\n"
				      "NCCL_IB_GID_INDEX=3\n");
	/* Every line before the variables is a comment to NCCL. */
	for (const char *l = text; l < body + 1; l = strchr(l, '\n') + 1)
		assert_int_equal(l[0], '#');
	/* ... also to NCCL before 2.26.2, which skips a '#' line only when it
	 * holds no '=' (v2.26.2-1 src/misc/param.cc setEnvFile gained
	 * `if (line[0] == '#') continue;`; earlier ones split any line at its
	 * first '=' and setenv the parts). */
	for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
		const char *end = strchr(l, '\n');
		if (l[0] == '#' && memchr(l, '=', (size_t)(end - l)))
			fail_msg("a comment line holds '=', which NCCL < 2.26.2 reads as a variable: %.*s",
				 (int)(end - l), l);
	}
	char val[1100];
	assert_string_equal(nccl_conf_lookup(text, "NCCL_SOCKET_IFNAME", val, sizeof(val)), "=eth1,eth2");
	assert_null(nccl_conf_lookup(text, "GLOO_SOCKET_IFNAME", val, sizeof(val)));
	free(text);

	/* Values NCCL reads verbatim: no trimming, '#' inside is no comment. */
	const char *verbatim[] = {" lead", "trail ", "a #b", "x=y", "'q'"};
	for (size_t i = 0; i < sizeof(verbatim) / sizeof(verbatim[0]); i++) {
		struct outputs_env e = {.n = 1};
		e.vars[0].key = "NCCL_DEBUG";
		snprintf(e.vars[0].value, sizeof(e.vars[0].value), "%s", verbatim[i]);
		assert_int_equal(outputs_render_conf(&e, &text, &err), 0);
		assert_string_equal(nccl_conf_lookup(text, "NCCL_DEBUG", val, sizeof(val)), verbatim[i]);
		free(text);
	}
}

static void test_conf_refuses_values_nccl_would_misread(void **state)
{
	const char *bad[] = {"eth0\nNCCL_NET=Socket", "eth0\r", "a\tb"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct outputs_env e = {.n = 1};
		e.vars[0].key = "NCCL_SOCKET_IFNAME";
		snprintf(e.vars[0].value, sizeof(e.vars[0].value), "%s", bad[i]);
		char *text = (char *)0x1;
		np_error err = {0};
		assert_int_equal(outputs_render_conf(&e, &text, &err), -1);
		assert_null(text);
		assert_int_equal(err.status, NP_EUSAGE);
		assert_non_null(strstr(err.msg, "NCCL_SOCKET_IFNAME cannot be written to nccl.conf"));
	}
}

static json_t *sample_decision(void)
{
	json_t *d = json_object();
	json_object_set_new(d, "version", json_integer(1));
	json_object_set_new(d, "chosen", json_string("eth1"));
	json_object_set_new(d, "alpha", json_true());
	return d;
}

/* The decision id each of the three files names, through the documented
 * paths; all three must agree.  Returns a static buffer. */
static const char *id_of_set(const char *dir)
{
	static char id[3][64];
	const char *files[] = {"nccl.env", "nccl.conf", "decision.json"};
	const char *marks[] = {"\n# decision ", "\n# decision ", "\"decision_id\": \""};
	for (size_t i = 0; i < 3; i++) {
		char p[300];
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		char *text = slurp(p);
		assert_non_null(text);
		char *m = strstr(text, marks[i]);
		if (!m)
			fail_msg("%s names no decision:\n%s", p, text);
		m += strlen(marks[i]);
		size_t n = strcspn(m, "\n\"");
		assert_true(n > 0 && n < sizeof(id[i]));
		memcpy(id[i], m, n);
		id[i][n] = '\0';
		free(text);
	}
	assert_string_equal(id[0], id[1]);
	assert_string_equal(id[0], id[2]);
	return id[0];
}

static void assert_link(const char *dir, const char *name, const char *want)
{
	char p[300], have[128];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	ssize_t n = readlink(p, have, sizeof(have) - 1);
	if (n < 0)
		fail_msg("%s is not a symlink: %s", p, strerror(errno));
	have[n] = '\0';
	assert_string_equal(have, want);
}

/* A sample decision freed by the test's teardown. */
static json_t *sample_decision_kept(void)
{
	assert_true(n_kept < sizeof(kept) / sizeof(kept[0]));
	return kept[n_kept++] = sample_decision();
}

static void test_write_creates_all_three(void **state)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/a/b/out", (char *)*state);
	struct outputs_choice c = {.n_ifaces = 1, .ifaces = {"eth1"}, .family = AF_INET, .gid_index = -1};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	json_t *d = sample_decision();
	mode_t old = umask(077);
	int rc = outputs_write(dir, &env, d, 0, NULL, &err);
	umask(old);
	if (rc < 0)
		fail_msg("%s", err.msg);
	json_decref(d);

	/* The set in its own directory, `current` naming it, and the
	 * documented paths through `current`. */
	char id[64], set[80], names[512], want[512];
	snprintf(id, sizeof(id), "%s", id_of_set(dir));
	snprintf(set, sizeof(set), "decision-%s", id);
	list_dir(dir, names, sizeof(names));
	snprintf(want, sizeof(want), ".nicpick.lock current %s decision.json nccl.conf nccl.env", set);
	assert_string_equal(names, want);
	assert_link(dir, "current", set);
	assert_link(dir, "nccl.env", "current/nccl.env");
	assert_link(dir, "nccl.conf", "current/nccl.conf");
	assert_link(dir, "decision.json", "current/decision.json");

	const char *files[] = {"nccl.env", "nccl.conf", "decision.json"};
	for (size_t i = 0; i < 3; i++) {
		char p[300];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0644);
	}
	struct stat st;
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	char p[300];
	snprintf(p, sizeof(p), "%s/%s", dir, set);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);

	snprintf(p, sizeof(p), "%s/decision.json", dir);
	char *json = slurp(p);
	char wjson[256];
	snprintf(wjson, sizeof(wjson),
		 "{\n  \"version\": 1,\n  \"decision_id\": \"%s\",\n  \"chosen\": \"eth1\",\n  \"alpha\": true\n}\n",
		 id);
	assert_string_equal(json, wjson);
	free(json);
	snprintf(p, sizeof(p), "%s/nccl.env", dir);
	char *text = slurp(p);
	assert_non_null(strstr(text, "export NCCL_SOCKET_IFNAME='=eth1'\n"));
	free(text);

	/* A second write replaces the set; the old set's directory goes. */
	c.ifaces[0] = "eth2";
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	d = sample_decision();
	assert_int_equal(outputs_write(dir, &env, d, 0, NULL, &err), 0);
	json_decref(d);
	char id2[64];
	snprintf(id2, sizeof(id2), "%s", id_of_set(dir));
	assert_string_not_equal(id, id2);
	list_dir(dir, names, sizeof(names));
	snprintf(want, sizeof(want), ".nicpick.lock current decision-%s decision.json nccl.conf nccl.env",
		 id2);
	assert_string_equal(names, want);
	text = slurp(p);
	assert_non_null(strstr(text, "export NCCL_SOCKET_IFNAME='=eth2'\n"));
	free(text);

	/* A killed run's half-written set is removed by the next run. */
	char stale[300];
	snprintf(stale, sizeof(stale), "%s/decision-19700101T000000Z-00000000", dir);
	assert_int_equal(mkdir(stale, 0755), 0);
	snprintf(p, sizeof(p), "%s/nccl.env", stale);
	spit(p, "half\n");
	assert_int_equal(outputs_write(dir, &env, sample_decision_kept(), 0, NULL, &err), 0);
	char id3[64];
	snprintf(id3, sizeof(id3), "%s", id_of_set(dir));
	list_dir(dir, names, sizeof(names));
	snprintf(want, sizeof(want), ".nicpick.lock current decision-%s decision.json nccl.conf nccl.env",
		 id3);
	assert_string_equal(names, want);
}

/* A run that made the lock file and failed with no set in force removes
 * it again.  A writer that was waiting on that file takes the lock anew
 * on the file now there, so it never writes beside the run that holds
 * the new one.  Here the test is the run that fails (lock A, removed)
 * and the one that comes next (lock C, held 300 ms); the writer is a
 * child process. */
static void test_a_removed_lock_file_is_taken_anew(void **state)
{
	const char *dir = *state;
	char lock[300], cur[300];
	snprintf(lock, sizeof(lock), "%s/.nicpick.lock", dir);
	snprintf(cur, sizeof(cur), "%s/current", dir);
	int a = open(lock, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(a >= 0);
	assert_int_equal(flock(a, LOCK_EX), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(a); /* the lock is the parent's open file, not this copy's */
		struct outputs_choice c = {.n_ifaces = 1, .ifaces = {"eth1"}, .family = AF_INET,
					   .gid_index = -1};
		struct outputs_env env;
		np_error err = {0};
		if (outputs_env_from_choice(&c, &env, &err) < 0)
			_exit(2);
		_exit(outputs_write(dir, &env, sample_decision_kept(), 0, NULL, &err) == 0 ? 0 : 1);
	}
	struct timespec ms100 = { 0, 100 * 1000000L };
	nanosleep(&ms100, NULL); /* the child is waiting on A */
	assert_int_equal(unlink(lock), 0);
	int c = open(lock, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(c >= 0);
	assert_int_equal(flock(c, LOCK_EX), 0);
	close(a);
	for (int i = 0; i < 3; i++)
		nanosleep(&ms100, NULL);
	int st;
	assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* still waiting, now on C */
	struct stat sb;
	assert_int_equal(lstat(cur, &sb), -1);
	close(c);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(lstat(cur, &sb), 0);
}

/* A caller's id is the one written. */
static void test_write_uses_the_given_id(void **state)
{
	struct outputs_choice c = {.n_ifaces = 1, .ifaces = {"eth1"}, .family = AF_INET, .gid_index = -1};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	snprintf(env.decision_id, sizeof(env.decision_id), "given-1");
	assert_int_equal(outputs_write(*state, &env, sample_decision_kept(), 0, NULL, &err), 0);
	assert_string_equal(id_of_set(*state), "given-1");
	assert_link(*state, "current", "decision-given-1");
}

/* What a power loss can leave without syncs: `current` pointing at a set
 * whose files are empty or missing, or at no directory at all.  The next
 * run (the init container, run again in the new sandbox) puts a whole set
 * in force and removes what was left. */
static void test_write_replaces_a_set_a_crash_left_unwritten(void **state)
{
	const char *dir = *state;
	char p[300];
	snprintf(p, sizeof(p), "%s/decision-cut", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/decision-cut/nccl.env", dir);
	spit(p, "");
	snprintf(p, sizeof(p), "%s/current", dir);
	assert_int_equal(symlink("decision-cut", p), 0);
	snprintf(p, sizeof(p), "%s/nccl.env", dir);
	assert_int_equal(symlink("current/nccl.env", p), 0);

	struct outputs_choice c = {.n_ifaces = 1, .ifaces = {"eth1"}, .family = AF_INET, .gid_index = -1};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	snprintf(env.decision_id, sizeof(env.decision_id), "next-1");
	assert_int_equal(outputs_write(dir, &env, sample_decision_kept(), 0, NULL, &err), 0);
	assert_link(dir, "current", "decision-next-1");
	char names[256];
	list_dir(dir, names, sizeof(names));
	assert_string_equal(names, ".nicpick.lock current decision-next-1 decision.json nccl.conf nccl.env");
	snprintf(p, sizeof(p), "%s/nccl.env", dir);
	char *text = slurp(p);
	assert_non_null(strstr(text, "export NCCL_SOCKET_IFNAME='=eth1'\n"));
	free(text);

	/* `current` naming a directory that never reached the disk. */
	snprintf(p, sizeof(p), "%s/current", dir);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink("decision-gone", p), 0);
	snprintf(env.decision_id, sizeof(env.decision_id), "next-2");
	assert_int_equal(outputs_write(dir, &env, sample_decision_kept(), 0, NULL, &err), 0);
	assert_link(dir, "current", "decision-next-2");
	list_dir(dir, names, sizeof(names));
	assert_string_equal(names, ".nicpick.lock current decision-next-2 decision.json nccl.conf nccl.env");
}

static void test_write_under_regular_file_fails_cleanly(void **state)
{
	char file[256], dir[300];
	snprintf(file, sizeof(file), "%s/plain", (char *)*state);
	spit(file, "x");
	snprintf(dir, sizeof(dir), "%s/sub", file);
	struct outputs_choice c = {.n_ifaces = 1, .ifaces = {"eth1"}, .family = AF_INET, .gid_index = -1};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);
	json_t *d = sample_decision();
	assert_int_equal(outputs_write(dir, &env, d, 0, NULL, &err), -1);
	json_decref(d);
	assert_int_equal(err.status, NP_EINTERNAL);
	assert_int_equal(err.sys_errno, ENOTDIR);
	assert_non_null(strstr(err.msg, dir));
	assert_non_null(strstr(err.msg, "Not a directory"));

	/* The out dir itself being a regular file. */
	np_error_clear(&err);
	d = sample_decision();
	assert_int_equal(outputs_write(file, &env, d, 0, NULL, &err), -1);
	json_decref(d);
	assert_non_null(strstr(err.msg, file));
	char names[256];
	list_dir(*state, names, sizeof(names));
	assert_string_equal(names, "plain");
}

static void test_failed_write_leaves_old_files_and_no_temps(void **state)
{
	const char *dir = *state;
	char env_path[300], conf_path[300];
	snprintf(env_path, sizeof(env_path), "%s/nccl.env", dir);
	snprintf(conf_path, sizeof(conf_path), "%s/nccl.conf", dir);
	spit(env_path, "old env\n");
	spit(conf_path, "old conf\n");
	struct outputs_choice c = {.n_ifaces = 1, .ifaces = {"eth1"}, .family = AF_INET, .gid_index = -1};
	struct outputs_env env;
	np_error err = {0};
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), 0);

	/* 1. The last file cannot be written (file size limit): the temps
	 * of the first two are already complete and must be removed. */
	json_t *big = sample_decision();
	char filler[4096];
	memset(filler, 'x', sizeof(filler) - 1);
	filler[sizeof(filler) - 1] = '\0';
	json_object_set_new(big, "filler", json_string(filler));
	struct rlimit old, lim;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 2048;
	void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	int rc = outputs_write(dir, &env, big, 0, NULL, &err);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, prev);
	json_decref(big);
	assert_int_equal(rc, -1);
	assert_int_equal(err.status, NP_EINTERNAL);
	assert_non_null(strstr(err.msg, "decision.json"));
	assert_non_null(strstr(err.msg, "cannot write "));
	char names[256];
	/* No set was in force, so the lock file this run made went too: the
	 * directory is as the run found it. */
	list_dir(dir, names, sizeof(names));
	assert_string_equal(names, "nccl.conf nccl.env");
	char *text = slurp(env_path);
	assert_string_equal(text, "old env\n");
	free(text);

	/* 2. A directory where a file must go: refused before any rename. */
	char json_path[300];
	snprintf(json_path, sizeof(json_path), "%s/decision.json", dir);
	assert_int_equal(mkdir(json_path, 0755), 0);
	np_error_clear(&err);
	json_t *d = sample_decision();
	assert_int_equal(outputs_write(dir, &env, d, 0, NULL, &err), -1);
	json_decref(d);
	assert_int_equal(err.sys_errno, EISDIR);
	list_dir(dir, names, sizeof(names));
	assert_string_equal(names, "decision.json nccl.conf nccl.env");
	text = slurp(env_path);
	assert_string_equal(text, "old env\n");
	free(text);
	text = slurp(conf_path);
	assert_string_equal(text, "old conf\n");
	free(text);
	rmdir(json_path);

	/* 3. A value nccl.conf cannot carry: nothing is written at all. */
	struct outputs_env bad = env;
	snprintf(bad.vars[0].value, sizeof(bad.vars[0].value), "=eth1\nNCCL_NET=IB");
	np_error_clear(&err);
	d = sample_decision();
	assert_int_equal(outputs_write(dir, &bad, d, 0, NULL, &err), -1);
	json_decref(d);
	assert_int_equal(err.status, NP_EUSAGE);
	list_dir(dir, names, sizeof(names));
	assert_string_equal(names, "nccl.conf nccl.env");
	text = slurp(env_path);
	assert_string_equal(text, "old env\n");
	free(text);

	/* 4. Then a write that succeeds: the earlier plain files become
	 * links to the new set, and nothing of the old stays. */
	np_error_clear(&err);
	assert_int_equal(outputs_write(dir, &env, sample_decision_kept(), 0, NULL, &err), 0);
	const char *id = id_of_set(dir);
	char want[256];
	snprintf(want, sizeof(want), ".nicpick.lock current decision-%s decision.json nccl.conf nccl.env", id);
	list_dir(dir, names, sizeof(names));
	assert_string_equal(names, want);
	assert_link(dir, "nccl.env", "current/nccl.env");
	text = slurp(env_path);
	assert_non_null(strstr(text, "export NCCL_SOCKET_IFNAME='=eth1'\n"));
	free(text);
}

/* DIR/a/b/out made for a run: taken back, and only what was made. */
static void make_out(const char *dir, char *out, size_t len, struct outputs_made *made)
{
	snprintf(out, len, "%s/a/b/out", dir);
	memset(made, 0, sizeof(*made));
	np_error err = { 0 };
	assert_int_equal(outputs_mkdir_p(out, made, &err), 0);
	assert_int_equal(made->n, 3);
}

static bool exists(const char *dir, const char *rel)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0;
}

static void test_unmake_takes_back_what_the_run_made(void **state)
{
	const char *dir = *state;
	char out[512], p[512];
	struct outputs_made made;
	make_out(dir, out, sizeof(out), &made);
	/* and its --nccl-debug directory */
	snprintf(p, sizeof(p), "%s/nccl-debug", out);
	assert_int_equal(mkdir(p, 0755), 0);
	outputs_made_add(&made, p);
	assert_int_equal(made.n, 4);
	/* one not below the last is not recorded: it stays */
	snprintf(p, sizeof(p), "%s/elsewhere", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	outputs_made_add(&made, p);
	assert_int_equal(made.n, 4);
	outputs_unmake(&made);
	assert_false(exists(dir, "a"));
	assert_true(exists(dir, "elsewhere"));
	/* what was there before stays: DIR itself, and an out-dir that was */
	assert_true(exists(dir, "."));
	snprintf(out, sizeof(out), "%s/mine", dir);
	assert_int_equal(mkdir(out, 0755), 0);
	memset(&made, 0, sizeof(made));
	np_error err = { 0 };
	assert_int_equal(outputs_mkdir_p(out, &made, &err), 0);
	assert_int_equal(made.n, 0);
	outputs_unmake(&made);
	assert_true(exists(dir, "mine"));
}

static void test_unmake_leaves_what_is_not_empty_and_what_was_replaced(void **state)
{
	const char *dir = *state;
	char out[512], p[512], q[512];
	struct outputs_made made;
	/* a file in the out-dir: it and every directory above it stay */
	make_out(dir, out, sizeof(out), &made);
	snprintf(p, sizeof(p), "%s/nccl.env", out);
	close(open(p, O_WRONLY | O_CREAT, 0644));
	outputs_unmake(&made);
	assert_true(exists(dir, "a/b/out/nccl.env"));
	/* another directory where one was made (made while that one was
	 * there: another inode): it stays, so do those above it */
	assert_int_equal(unlink(p), 0);
	assert_int_equal(rmdir(out), 0);
	snprintf(p, sizeof(p), "%s/a/other", dir);
	snprintf(q, sizeof(q), "%s/a/b", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(rmdir(q), 0);
	assert_int_equal(rename(p, q), 0);
	outputs_unmake(&made);
	assert_true(exists(dir, "a/b"));
	/* a link in place of a made directory, to an empty one elsewhere:
	 * neither is removed, nor is anything followed out of DIR */
	assert_int_equal(rmdir(q), 0);
	snprintf(p, sizeof(p), "%s/victim", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(symlink(p, q), 0);
	outputs_unmake(&made);
	assert_true(exists(dir, "victim"));
	assert_true(exists(dir, "a/b"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_tmpdir, teardown_tmpdir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_single_interface),
		cmocka_unit_test(test_env_several_interfaces_and_rdma),
		cmocka_unit_test(test_env_refuses_names_nccl_cannot_carry),
		cmocka_unit_test(test_sh_quote),
		cmocka_unit_test(test_render_env_text),
		T(test_env_round_trips_through_sh),
		cmocka_unit_test(test_conf_text_is_what_nccl_reads),
		cmocka_unit_test(test_conf_refuses_values_nccl_would_misread),
		T(test_write_creates_all_three),
		T(test_write_uses_the_given_id),
		T(test_write_replaces_a_set_a_crash_left_unwritten),
		T(test_write_under_regular_file_fails_cleanly),
		T(test_failed_write_leaves_old_files_and_no_temps),
		T(test_a_removed_lock_file_is_taken_anew),
		T(test_unmake_takes_back_what_the_run_made),
		T(test_unmake_leaves_what_is_not_empty_and_what_was_replaced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
