/* Exec credential plugins, as client-go's
 * plugin/pkg/client/auth/exec/exec.go runs them: KUBERNETES_EXEC_INFO
 * carries the ExecCredential input, v1 requires interactiveMode, v1beta1
 * defaults to IfAvailable, and a credential is used until
 * expirationTimestamp or a 401.  kubeconfig_file.c reads the plugin's entry;
 * this runs it and reads what it printed. */
#include "k8s/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "util/cleanup.h"
#include "util/clock.h"

extern char **environ;

#define KC_EXEC_OUT_MAX (1 << 20) /* what an exec plugin may print */

static int nomem(np_error *err)
{
	return np_error_set(err, NP_EINTERNAL, ENOMEM, "kubeconfig");
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static char **dup_strv(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **out = calloc(n + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (!(out[i] = strdup(v[i]))) {
			free_strv(out);
			return NULL;
		}
	}
	return out;
}

void k8s_exec_free(struct k8s_exec *x)
{
	if (!x)
		return;
	free(x->api_version);
	free(x->command);
	free_strv(x->args);
	free_strv(x->env);
	free(x->install_hint);
	free(x);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct k8s_exec *k8s_exec_dup(const struct k8s_exec *x)
{
	struct k8s_exec *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->api_version = dup_or_null(x->api_version);
	d->command = dup_or_null(x->command);
	d->args = dup_strv(x->args);
	d->env = dup_strv(x->env);
	d->install_hint = dup_or_null(x->install_hint);
	if ((x->api_version && !d->api_version) || (x->command && !d->command) || !d->args ||
	    !d->env || (x->install_hint && !d->install_hint)) {
		k8s_exec_free(d);
		return NULL;
	}
	return d;
}

void k8s_exec_cred_free(struct k8s_exec_cred *c)
{
	if (!c)
		return;
	free(c->token);
	free(c->cert_pem);
	free(c->key_pem);
	memset(c, 0, sizeof(*c));
}

bool k8s_exec_cred_expired(const struct k8s_exec_cred *c, time_t now)
{
	return c->expiry && now >= c->expiry;
}

/* RFC 3339, as metav1.Time writes it ("2026-12-01T14:40:17Z", offsets and
 * fractions allowed). */
static int parse_rfc3339(const char *s, time_t *out)
{
	struct tm tm = { 0 };
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
		int hh, mm;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
			return -1;
		off = (p[0] == '-' ? -1 : 1) * (hh * 3600L + mm * 60L);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	*out = timegm(&tm) - off;
	return 0;
}

static int take_str(json_t *obj, const char *key, char **out)
{
	const char *v = json_string_value(json_object_get(obj, key));
	if (!v || !*v)
		return 0;
	return (*out = strdup(v)) ? 0 : -1;
}

int k8s_exec_cred_parse(const char *json, size_t len, const char *api_version,
			struct k8s_exec_cred *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	json_error_t jerr;
	json_t *doc = json_loadb(json, len, 0, &jerr);
	int rc = -1;
	if (!doc || !json_is_object(doc)) {
		np_error_set(err, NP_EK8S, 0, "printed no ExecCredential (%s)",
			     doc ? "not a JSON object" : jerr.text);
		goto out;
	}
	const char *kind = json_string_value(json_object_get(doc, "kind"));
	const char *av = json_string_value(json_object_get(doc, "apiVersion"));
	if (!kind || strcmp(kind, "ExecCredential")) {
		np_error_set(err, NP_EK8S, 0, "printed kind %s, not ExecCredential",
			     kind ? kind : "(none)");
		goto out;
	}
	if (!av || strcmp(av, api_version)) {
		np_error_set(err, NP_EK8S, 0, "printed apiVersion %s, the kubeconfig asks for %s",
			     av ? av : "(none)", api_version);
		goto out;
	}
	json_t *st = json_object_get(doc, "status");
	if (!json_is_object(st)) {
		np_error_set(err, NP_EK8S, 0, "its ExecCredential has no status");
		goto out;
	}
	if (take_str(st, "token", &out->token) < 0 ||
	    take_str(st, "clientCertificateData", &out->cert_pem) < 0 ||
	    take_str(st, "clientKeyData", &out->key_pem) < 0) {
		nomem(err);
		goto out;
	}
	if (!out->cert_pem != !out->key_pem) {
		np_error_set(err, NP_EK8S, 0, "its ExecCredential has status.%s without status.%s",
			     out->cert_pem ? "clientCertificateData" : "clientKeyData",
			     out->cert_pem ? "clientKeyData" : "clientCertificateData");
		goto out;
	}
	if (out->key_pem && k8s_pem_key_encrypted(out->key_pem)) {
		np_error_set(err, NP_EK8S, 0,
			     "its ExecCredential's status.clientKeyData is an encrypted key; kubectl "
			     "and nicpick read only unencrypted ones");
		goto out;
	}
	if (!out->token && !out->cert_pem) {
		np_error_set(err, NP_EK8S, 0,
			     "its ExecCredential has neither status.token nor "
			     "status.clientCertificateData");
		goto out;
	}
	json_t *exp = json_object_get(st, "expirationTimestamp");
	if (exp && !json_is_null(exp)) {
		if (!json_is_string(exp) || parse_rfc3339(json_string_value(exp), &out->expiry) < 0) {
			np_error_set(err, NP_EK8S, 0,
				     "its status.expirationTimestamp is not an RFC 3339 time");
			goto out;
		}
		if (!out->expiry)
			out->expiry = 1; /* the epoch itself: long expired, still set */
	}
	rc = 0;
out:
	json_decref(doc);
	if (rc < 0)
		k8s_exec_cred_free(out);
	return rc;
}

static int exec_fail(const struct k8s_exec *x, np_error *err, int sys_errno, const char *what)
{
	/* installHint says how to get the plugin: shown as kubectl shows it. */
	return np_error_set(err, NP_EK8S, sys_errno, "exec plugin %s: %s%s%s%s", x->command, what,
			    x->install_hint ? " (" : "", x->install_hint ? x->install_hint : "",
			    x->install_hint ? ")" : "");
}

int k8s_exec_run(const struct k8s_exec *x, int64_t timeout_ms, struct k8s_exec_cred *out,
		 np_error *err)
{
	memset(out, 0, sizeof(*out));
	/* argv and envp: nicpick's environment, the kubeconfig's env on top,
	 * and KUBERNETES_EXEC_INFO as client-go sets it. */
	size_t nargs = 0, nenv = 0, nbase = 0;
	while (x->args && x->args[nargs])
		nargs++;
	while (x->env && x->env[nenv])
		nenv++;
	while (environ && environ[nbase])
		nbase++;
	cleanup_free char **argv = calloc(nargs + 2, sizeof(*argv));
	cleanup_free char **envp = calloc(nbase + nenv + 2, sizeof(*envp));
	cleanup_free char *info = NULL;
	if (!argv || !envp ||
	    asprintf(&info, "KUBERNETES_EXEC_INFO={\"kind\":\"ExecCredential\",\"apiVersion\":\"%s\","
			    "\"spec\":{\"interactive\":false}}",
		     x->api_version) < 0) {
		info = NULL;
		return nomem(err);
	}
	argv[0] = x->command;
	for (size_t i = 0; i < nargs; i++)
		argv[i + 1] = x->args[i];
	size_t ne = 0;
	for (size_t i = 0; i < nbase; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t klen = eq ? (size_t)(eq - environ[i]) + 1 : strlen(environ[i]);
		bool overridden = !strncmp(environ[i], "KUBERNETES_EXEC_INFO=", klen);
		for (size_t j = 0; j < nenv && !overridden; j++)
			overridden = !strncmp(environ[i], x->env[j], klen);
		if (!overridden)
			envp[ne++] = environ[i];
	}
	for (size_t j = 0; j < nenv; j++)
		envp[ne++] = x->env[j];
	envp[ne++] = info;

	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return exec_fail(x, err, errno, "pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	pid_t pid;
	int src = posix_spawnp(&pid, x->command, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (src != 0) {
		close(pipefd[0]);
		char what[160];
		snprintf(what, sizeof(what), "cannot run it: %s", strerror(src));
		return exec_fail(x, err, 0, what);
	}
	struct {
		char *data;
		size_t len;
	} buf = { 0 }; /* what the plugin printed */
	bool too_big = false, timed_out = false;
	char chunk[4096];
	int64_t end = timeout_ms > 0 ? np_now_ms() + timeout_ms : 0;
	for (;;) {
		struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
		int64_t left = end ? end - np_now_ms() : -1;
		if (end && left <= 0) {
			timed_out = true;
			kill(pid, SIGKILL);
			break;
		}
		int pr = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0)
			continue; /* the deadline check above ends it */
		ssize_t r = read(pipefd[0], chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (buf.len + (size_t)r > KC_EXEC_OUT_MAX) {
			too_big = true;
			continue; /* drain, so that the plugin can exit */
		}
		char *nb = realloc(buf.data, buf.len + (size_t)r + 1);
		if (!nb) {
			too_big = true;
			continue;
		}
		buf.data = nb;
		memcpy(buf.data + buf.len, chunk, (size_t)r);
		buf.len += (size_t)r;
	}
	close(pipefd[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int rc;
	if (timed_out) {
		char what[96];
		snprintf(what, sizeof(what), "printed no credential within %lld ms",
			 (long long)timeout_ms);
		rc = exec_fail(x, err, 0, what);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !buf.len) {
		rc = exec_fail(x, err, 0, "command not found");
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char what[64];
		if (WIFEXITED(status))
			snprintf(what, sizeof(what), "exited %d", WEXITSTATUS(status));
		else
			snprintf(what, sizeof(what), "killed by signal %d", WTERMSIG(status));
		rc = exec_fail(x, err, 0, what);
	} else if (too_big) {
		rc = exec_fail(x, err, 0, "printed more than 1 MiB");
	} else {
		rc = k8s_exec_cred_parse(buf.data ? buf.data : "", buf.len, x->api_version, out, err);
		if (rc < 0)
			np_error_wrap(err, "exec plugin %s", x->command);
	}
	free(buf.data);
	return rc;
}
