/* In-cluster configuration and the service-account token. */
#include "k8s/k8s_priv.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

#define K8S_SMALL_FILE_MAX (64 * 1024)

char *k8s_server_url(const char *host, const char *port)
{
	char *url = NULL;
	if (!host || !*host)
		return NULL;
	if (!port || !*port)
		port = "443";
	/* An IPv6 literal needs brackets in a URL; the service host is bare. */
	bool v6 = strchr(host, ':') && host[0] != '[';
	if (asprintf(&url, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0)
		return NULL;
	return url;
}

/* Read a small text file and strip surrounding whitespace. */
/* The file's text without leading and trailing white space; *raw gets the
 * number of bytes read (NULL: not wanted). */
static int read_trimmed(const char *path, char **out, size_t *raw, np_error *err)
{
	errno = 0;
	cleanup_fclose FILE *f = fopen(path, "re");
	if (!f)
		return np_error_set(err, NP_EK8S, errno, "cannot read %s", path);
	char *buf = malloc(K8S_SMALL_FILE_MAX + 1);
	if (!buf)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "reading %s", path);
	size_t n = fread(buf, 1, K8S_SMALL_FILE_MAX + 1, f);
	if (ferror(f)) {
		int e = errno ? errno : EIO; /* EISDIR: a directory opens, then fails to read */
		free(buf);
		return np_error_set(err, NP_EK8S, e, "cannot read %s", path);
	}
	if (n > K8S_SMALL_FILE_MAX) {
		free(buf);
		return np_error_set(err, NP_EK8S, 0, "%s is larger than %d bytes", path,
				    K8S_SMALL_FILE_MAX);
	}
	buf[n] = '\0';
	if (raw)
		*raw = n;
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	size_t start = 0;
	while (start < n && isspace((unsigned char)buf[start]))
		start++;
	memmove(buf, buf + start, n - start + 1);
	*out = buf;
	return 0;
}

static int dup_into(char **dst, const char *src, np_error *err)
{
	*dst = strdup(src);
	if (!*dst)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "k8s config");
	return 0;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static int load_server(struct k8s_config *cfg, const struct k8s_config_overrides *ov,
		       np_error *err)
{
	if (ov->api_server && *ov->api_server) {
		const char *s = ov->api_server;
		bool has_scheme = !strncmp(s, "https://", 8) || !strncmp(s, "http://", 7);
		if (asprintf(&cfg->server, "%s%s", has_scheme ? "" : "https://", s) < 0) {
			cfg->server = NULL;
			return np_error_set(err, NP_EINTERNAL, ENOMEM, "k8s config");
		}
		size_t len = strlen(cfg->server);
		while (len > 0 && cfg->server[len - 1] == '/')
			cfg->server[--len] = '\0';
		return 0;
	}
	const char *host = env_nonempty("KUBERNETES_SERVICE_HOST");
	if (!host)
		return np_error_set(err, NP_EK8S, 0,
				    "not running in a pod (KUBERNETES_SERVICE_HOST is unset) "
				    "and no --api-server given");
	cfg->server = k8s_server_url(host, env_nonempty("KUBERNETES_SERVICE_PORT"));
	if (!cfg->server)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "k8s config");
	return 0;
}

static int sa_path(char **out, const char *sa_dir, const char *file, np_error *err)
{
	if (asprintf(out, "%s/%s", sa_dir, file) < 0) {
		*out = NULL;
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "k8s config");
	}
	return 0;
}

static int load_files(struct k8s_config *cfg, const struct k8s_config_overrides *ov,
		      const char *sa_dir, np_error *err)
{
	/* CA: required unless the lab-only insecure flag was given. */
	if (ov->ca_file) {
		if (dup_into(&cfg->ca_file, ov->ca_file, err) < 0)
			return -1;
	} else {
		if (sa_path(&cfg->ca_file, sa_dir, "ca.crt", err) < 0)
			return -1;
	}
	if (access(cfg->ca_file, R_OK) < 0) {
		if (!cfg->insecure_skip_tls_verify)
			return np_error_set(err, NP_EK8S, errno,
					    "CA file %s (give --ca-file)", cfg->ca_file);
		free(cfg->ca_file);
		cfg->ca_file = NULL;
	}

	/* Token: an explicit file must exist; the default one may be absent
	 * only when talking to an explicitly given server. */
	if (ov->token_file) {
		if (dup_into(&cfg->token_file, ov->token_file, err) < 0)
			return -1;
		if (access(cfg->token_file, R_OK) < 0)
			return np_error_set(err, NP_EK8S, errno, "token file %s",
					    cfg->token_file);
	} else {
		if (sa_path(&cfg->token_file, sa_dir, "token", err) < 0)
			return -1;
		if (access(cfg->token_file, R_OK) < 0) {
			if (!ov->api_server)
				return np_error_set(err, NP_EK8S, errno,
						    "service-account token %s (is "
						    "automountServiceAccountToken off?)",
						    cfg->token_file);
			free(cfg->token_file);
			cfg->token_file = NULL;
		}
	}
	return 0;
}

static int load_identity(struct k8s_config *cfg, const struct k8s_config_overrides *ov,
			 const char *sa_dir, np_error *err)
{
	const char *ns = ov->namespace ? ov->namespace : env_nonempty("POD_NAMESPACE");
	if (ns) {
		if (dup_into(&cfg->namespace, ns, err) < 0)
			return -1;
	} else {
		cleanup_free char *path = NULL;
		if (sa_path(&path, sa_dir, "namespace", err) < 0)
			return -1;
		np_error ignored = { 0 };
		if (read_trimmed(path, &cfg->namespace, NULL, &ignored) < 0 || !*cfg->namespace) {
			free(cfg->namespace);
			cfg->namespace = NULL;
			return np_error_set(err, NP_EK8S, 0,
					    "namespace unknown: set POD_NAMESPACE (downward API) "
					    "or give --namespace");
		}
	}
	const char *pod = ov->pod_name ? ov->pod_name : env_nonempty("POD_NAME");
	if (pod && dup_into(&cfg->pod_name, pod, err) < 0)
		return -1;
	return 0;
}

int k8s_config_load(struct k8s_config *cfg, const struct k8s_config_overrides *ov,
		    np_error *err)
{
	static const struct k8s_config_overrides none;
	memset(cfg, 0, sizeof(*cfg));
	if (!ov)
		ov = &none;
	const char *sa_dir = ov->sa_dir ? ov->sa_dir : K8S_SA_DIR;
	cfg->insecure_skip_tls_verify = ov->insecure_skip_tls_verify;

	if (load_server(cfg, ov, err) < 0 || load_files(cfg, ov, sa_dir, err) < 0 ||
	    load_identity(cfg, ov, sa_dir, err) < 0)
		return np_error_wrap(err, "kubernetes config");
	cfg->tls_groups = K8S_TLS_GROUPS_POD;
	return 0;
}

void k8s_config_free(struct k8s_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->server);
	free(cfg->ca_file);
	free(cfg->token_file);
	free(cfg->namespace);
	free(cfg->pod_name);
	free(cfg->token);
	free(cfg->ca_pem);
	free(cfg->client_cert_pem);
	free(cfg->client_key_pem);
	free(cfg->client_cert_file);
	free(cfg->client_key_file);
	free(cfg->tls_server_name);
	k8s_exec_free(cfg->exec);
	memset(cfg, 0, sizeof(*cfg));
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

bool k8s_config_copy(struct k8s_config *dst, const struct k8s_config *src)
{
	dst->server = dup_or_null(src->server);
	dst->ca_file = dup_or_null(src->ca_file);
	dst->token_file = dup_or_null(src->token_file);
	dst->namespace = dup_or_null(src->namespace);
	dst->pod_name = dup_or_null(src->pod_name);
	dst->insecure_skip_tls_verify = src->insecure_skip_tls_verify;
	dst->token = dup_or_null(src->token);
	dst->ca_pem = dup_or_null(src->ca_pem);
	dst->client_cert_pem = dup_or_null(src->client_cert_pem);
	dst->client_key_pem = dup_or_null(src->client_key_pem);
	dst->client_cert_file = dup_or_null(src->client_cert_file);
	dst->client_key_file = dup_or_null(src->client_key_file);
	dst->tls_server_name = dup_or_null(src->tls_server_name);
	dst->tls_groups = src->tls_groups;
	dst->exec = src->exec ? k8s_exec_dup(src->exec) : NULL;
	return (!src->token || dst->token) && (!src->ca_pem || dst->ca_pem) &&
	       (!src->client_cert_pem || dst->client_cert_pem) &&
	       (!src->client_key_pem || dst->client_key_pem) &&
	       (!src->client_cert_file || dst->client_cert_file) &&
	       (!src->client_key_file || dst->client_key_file) &&
	       (!src->tls_server_name || dst->tls_server_name) && (!src->exec || dst->exec);
}

/* An exec plugin's credential is kept until it expires or a 401 forces a
 * new one (client-go's exec.go). */
static int exec_refresh(struct k8s_client *c, bool force, np_error *err)
{
	bool have = c->cred.token || c->cred.cert_pem;
	if (have && !force && !k8s_exec_cred_expired(&c->cred, time(NULL)))
		return 0;
	/* the plugin runs within the client's deadline (none: a minute) */
	int64_t left = k8s_remaining_ms(c);
	struct k8s_exec_cred cred;
	if (k8s_exec_run(c->cfg.exec, left == INT64_MAX ? 60000 : left > 0 ? left : 1, &cred, err) < 0)
		return -1;
	k8s_exec_cred_free(&c->cred);
	c->cred = cred;
	return 0;
}

/* A token file rewritten in place (not the kubelet's atomic swap, but a
 * sidecar or an operator's `>`) can be read while it is empty or half
 * written.  A read counts only when the file did not change while it was
 * read (same inode, size and mtime before and after, every byte of it
 * read); else it is read again, for at most this long and never past the
 * deadline. */
#define TOKEN_SETTLE_MS 1000
#define TOKEN_RETRY_MS 20

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

int k8s_token_refresh(struct k8s_client *c, bool force, np_error *err)
{
	if (c->cfg.exec)
		return exec_refresh(c, force, err);
	if (!c->cfg.token_file)
		return 0;
	for (int waited = 0;; waited += TOKEN_RETRY_MS) {
		struct stat st, after;
		/* stat() follows the projected volume's ..data symlink, so a
		 * rotation shows up as a new inode even when mtime and size
		 * look the same. */
		if (stat(c->cfg.token_file, &st) < 0)
			return np_error_set(err, NP_EK8S, errno, "token file %s", c->cfg.token_file);
		if (!force && c->token && st.st_ino == c->token_ino && st.st_size == c->token_size &&
		    st.st_mtim.tv_sec == c->token_mtime.tv_sec &&
		    st.st_mtim.tv_nsec == c->token_mtime.tv_nsec)
			return 0;
		char *tok = NULL;
		size_t raw = 0;
		if (read_trimmed(c->cfg.token_file, &tok, &raw, err) < 0)
			return -1;
		bool settled = stat(c->cfg.token_file, &after) == 0 && same_file(&st, &after) &&
			       (off_t)raw == st.st_size;
		if (settled && *tok && !strpbrk(tok, "\r\n")) {
			free(c->token);
			c->token = tok;
			c->token_ino = st.st_ino;
			c->token_size = st.st_size;
			c->token_mtime = st.st_mtim;
			return 0;
		}
		bool malformed = settled && *tok;
		free(tok);
		if (malformed)
			return np_error_set(err, NP_EK8S, 0, "token file %s is malformed: more than one line",
					    c->cfg.token_file);
		if (waited >= TOKEN_SETTLE_MS || k8s_remaining_ms(c) <= TOKEN_RETRY_MS)
			return np_error_set(err, NP_EK8S, 0,
					    "token file %s is empty or malformed (read again for %d ms: "
					    "still %s)",
					    c->cfg.token_file, waited,
					    settled ? "empty" : "changing while read");
		struct timespec ts = { 0, TOKEN_RETRY_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
}
