/* kubeconfig as kubectl reads it (exec credential plugins: exec.c).
 *
 * The loading and merge rules follow client-go's
 * tools/clientcmd/loader.go (kubernetes/client-go, ClientConfigLoadingRules.Load):
 * "A missing ExplicitPath file produces an error. Empty filenames or other
 * missing files are ignored. [...] The first file to set a particular map key
 * wins and map key's value is never changed. [...] if two files specify a
 * "red-user", only values from the first file's red-user are used. [...]
 * Relative paths inside of the .kubeconfig files are resolved against the
 * .kubeconfig file's parent folder."
 *
 * Each file is parsed once into a struct kc_file (kubeconfig_file.c); an
 * entry that uses something unsupported is only an error when the chosen
 * context uses it, as a kubectl that lacks a plugin only fails for it. */
#include "k8s/kubeconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s/kubeconfig_file.h"
#include "util/cleanup.h"

static int nomem(np_error *err)
{
	return np_error_set(err, NP_EINTERNAL, ENOMEM, "kubeconfig");
}

/* Standard base64 (RFC 4648 section 4, padded), what Go's encoding/json
 * uses for a []byte such as certificate-authority-data; line breaks are
 * skipped as Go's decoder skips them.  No library nicpick links has one. */
static int b64_decode(const char *in, char **out, size_t *outlen)
{
	size_t n = strlen(in);
	char *buf = malloc(n / 4 * 3 + 4);
	if (!buf)
		return -1;
	unsigned acc = 0, bits = 0, pad = 0;
	size_t len = 0, chars = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)in[i];
		int v;
		if (ch == '\r' || ch == '\n')
			continue;
		chars++;
		if (ch == '=') {
			pad++;
			continue;
		}
		if (pad)
			goto bad; /* data after padding */
		if (ch >= 'A' && ch <= 'Z')
			v = ch - 'A';
		else if (ch >= 'a' && ch <= 'z')
			v = ch - 'a' + 26;
		else if (ch >= '0' && ch <= '9')
			v = ch - '0' + 52;
		else if (ch == '+')
			v = 62;
		else if (ch == '/')
			v = 63;
		else
			goto bad;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[len++] = (char)((acc >> bits) & 0xff);
		}
	}
	if (chars % 4 || pad > 2 || (pad && bits == 0) || (acc & ((1u << bits) - 1)))
		goto bad;
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;
bad:
	free(buf);
	return 1;
}

/* --- merging and resolving ------------------------------------------- */

struct kc_merged {
	struct kc_file *files;
	size_t nfiles;
};

static void merged_free(struct kc_merged *m)
{
	for (size_t i = 0; i < m->nfiles; i++)
		kc_file_free(&m->files[i]);
	free(m->files);
}

/* First file to set the key wins: search the files in order. */
#define FIND(m, list, count, key, fileout)                                               \
	({                                                                                  \
		__typeof__((m)->files[0].list) found_ = NULL;                              \
		for (size_t fi_ = 0; fi_ < (m)->nfiles && !found_; fi_++)                 \
			for (size_t i_ = 0; i_ < (m)->files[fi_].count && !found_; i_++)   \
				if (!strcmp((m)->files[fi_].list[i_].name, key)) {         \
					found_ = &(m)->files[fi_].list[i_];                \
					*(fileout) = &(m)->files[fi_];                     \
				}                                                           \
		found_;                                                                     \
	})

static int add_file(struct kc_merged *m, const char *path, bool must_exist, np_error *err)
{
	struct kc_file *nf = realloc(m->files, (m->nfiles + 1) * sizeof(*nf));
	if (!nf)
		return nomem(err);
	m->files = nf;
	int rc = kc_file_load(path, &m->files[m->nfiles], err);
	if (rc == 1) {
		kc_file_free(&m->files[m->nfiles]);
		if (must_exist)
			return np_error_set(err, NP_EUSAGE, ENOENT, "kubeconfig %s", path);
		return 0;
	}
	m->nfiles++; /* freed by merged_free also when it failed half-way */
	return rc;
}

static int load_all(struct kc_merged *m, const char *explicit_path, np_error *err)
{
	if (explicit_path && *explicit_path)
		return add_file(m, explicit_path, true, err);
	const char *env = getenv("KUBECONFIG");
	if (env && *env) {
		cleanup_free char *list = strdup(env);
		if (!list)
			return nomem(err);
		char *save = NULL;
		for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
			bool seen = false; /* client-go drops duplicates of one path */
			for (size_t i = 0; i < m->nfiles; i++)
				seen |= !strcmp(m->files[i].path, p);
			if (!seen && add_file(m, p, false, err) < 0)
				return -1;
		}
		return 0;
	}
	const char *home = getenv("HOME");
	if (!home || !*home)
		return np_error_set(err, NP_EUSAGE, 0,
				    "no kubeconfig: HOME and KUBECONFIG are unset (give --kubeconfig)");
	cleanup_free char *path = NULL;
	if (asprintf(&path, "%s/.kube/config", home) < 0) {
		path = NULL;
		return nomem(err);
	}
	return add_file(m, path, false, err);
}

/* A path from a file, resolved against that file's directory unless it is
 * absolute (client-go's ResolvePaths: no "~" expansion either). */
static int resolve_path(const struct kc_file *f, const char *p, char **out, np_error *err)
{
	if (asprintf(out, "%s%s%s", p[0] == '/' ? "" : f->dir, p[0] == '/' ? "" : "/", p) < 0) {
		*out = NULL;
		return nomem(err);
	}
	return 0;
}

static int decode_data(const struct kc_file *f, const char *what, const char *b64, char **out,
		       np_error *err)
{
	size_t len;
	int rc = b64_decode(b64, out, &len);
	if (rc < 0)
		return nomem(err);
	if (rc > 0 || memchr(*out, '\0', len)) {
		if (rc == 0) {
			free(*out);
			*out = NULL;
		}
		return np_error_set(err, NP_EUSAGE, 0, "kubeconfig %s: %s is not base64 of a PEM file",
				    f->path, what);
	}
	return 0;
}

static int set_cluster(struct k8s_config *cfg, const struct kc_file *f,
		       const struct kc_cluster *c, np_error *err)
{
	if (c->unsupported)
		return np_error_set(err, NP_EUSAGE, 0, "kubeconfig %s: %s", f->path, c->unsupported);
	if (!c->server)
		return np_error_set(err, NP_EUSAGE, 0, "kubeconfig %s: cluster \"%s\" has no server",
				    f->path, c->name);
	if (strncmp(c->server, "https://", 8) && strncmp(c->server, "http://", 7))
		return np_error_set(err, NP_EUSAGE, 0,
				    "kubeconfig %s: cluster \"%s\": server %s is not an http(s) URL",
				    f->path, c->name, c->server);
	if (!(cfg->server = strdup(c->server)))
		return nomem(err);
	size_t len = strlen(cfg->server);
	while (len > 0 && cfg->server[len - 1] == '/')
		cfg->server[--len] = '\0';
	/* client-go: the data field wins over the file. */
	if (c->ca_data) {
		if (decode_data(f, "certificate-authority-data", c->ca_data, &cfg->ca_pem, err) < 0)
			return -1;
	} else if (c->ca_file) {
		if (resolve_path(f, c->ca_file, &cfg->ca_file, err) < 0)
			return -1;
		if (access(cfg->ca_file, R_OK) < 0)
			return np_error_set(err, NP_EUSAGE, errno,
					    "kubeconfig %s: cluster \"%s\": certificate-authority %s",
					    f->path, c->name, cfg->ca_file);
	}
	if (c->insecure && (c->ca_data || c->ca_file))
		return np_error_set(err, NP_EUSAGE, 0,
				    "kubeconfig %s: cluster \"%s\": insecure-skip-tls-verify and a "
				    "certificate-authority exclude each other",
				    f->path, c->name);
	cfg->insecure_skip_tls_verify = c->insecure;
	if (c->tls_server_name && !(cfg->tls_server_name = strdup(c->tls_server_name)))
		return nomem(err);
	return 0;
}

static int set_pair(const struct kc_file *f, const char *what, const char *file, const char *data,
		    char **file_out, char **pem_out, np_error *err)
{
	if (data)
		return decode_data(f, what, data, pem_out, err);
	if (!file)
		return 0;
	if (resolve_path(f, file, file_out, err) < 0)
		return -1;
	if (access(*file_out, R_OK) < 0)
		return np_error_set(err, NP_EUSAGE, errno, "kubeconfig %s: %s %s", f->path, what,
				    *file_out);
	return 0;
}

bool k8s_pem_key_encrypted(const char *pem)
{
	return strstr(pem, "-----BEGIN ENCRYPTED PRIVATE KEY-----") ||
	       strstr(pem, "\nProc-Type: 4,ENCRYPTED");
}

/* The client key, from its data or the head of its file (a key's PEM
 * block and headers come first; 64 KiB holds any key nicpick can use),
 * must not be encrypted. */
static int key_readable(const struct kc_file *f, const struct kc_user *u, const char *file,
			const char *pem, np_error *err)
{
	char head[64 << 10];
	if (!pem && !file)
		return 0;
	if (!pem) {
		cleanup_fclose FILE *fp = fopen(file, "re");
		size_t n = fp ? fread(head, 1, sizeof(head) - 1, fp) : 0;
		if (!fp || ferror(fp))
			return np_error_set(err, NP_EUSAGE, fp ? EIO : errno, "kubeconfig %s: client-key %s",
					    f->path, file);
		head[n] = '\0';
		pem = head;
	}
	if (k8s_pem_key_encrypted(pem))
		return np_error_set(err, NP_EUSAGE, 0,
				    "kubeconfig %s: user \"%s\": %s is an encrypted key; kubectl "
				    "and nicpick read only unencrypted ones, as openssl pkey writes "
				    "them",
				    f->path, u->name, file ? file : "client-key-data");
	return 0;
}

static int set_user(struct k8s_config *cfg, const struct kc_file *f, const struct kc_user *u,
		    np_error *err)
{
	if (u->unsupported)
		return np_error_set(err, NP_EUSAGE, 0, "kubeconfig %s: %s", f->path, u->unsupported);
	if (set_pair(f, "client-certificate", u->cert_file, u->cert_data, &cfg->client_cert_file,
		     &cfg->client_cert_pem, err) < 0 ||
	    set_pair(f, "client-key", u->key_file, u->key_data, &cfg->client_key_file,
		     &cfg->client_key_pem, err) < 0)
		return -1;
	if (key_readable(f, u, cfg->client_key_file, cfg->client_key_pem, err) < 0)
		return -1;
	bool cert = cfg->client_cert_file || cfg->client_cert_pem;
	bool key = cfg->client_key_file || cfg->client_key_pem;
	if (cert != key)
		return np_error_set(err, NP_EUSAGE, 0,
				    "kubeconfig %s: user \"%s\": %s without %s", f->path, u->name,
				    cert ? "client-certificate" : "client-key",
				    cert ? "client-key" : "client-certificate");
	/* rest.Config: "The last successfully read value [of the token file]
	 * takes precedence over BearerToken". */
	if (u->token_file) {
		if (resolve_path(f, u->token_file, &cfg->token_file, err) < 0)
			return -1;
		if (access(cfg->token_file, R_OK) < 0)
			return np_error_set(err, NP_EUSAGE, errno, "kubeconfig %s: tokenFile %s",
					    f->path, cfg->token_file);
	} else if (u->token && !(cfg->token = strdup(u->token))) {
		return nomem(err);
	}
	if (u->exec) {
		if (!(cfg->exec = k8s_exec_dup(u->exec)))
			return nomem(err);
		/* A command with a '/' is relative to the kubeconfig; a bare name
		 * is looked up in PATH (client-go's ResolveLocalPaths). */
		if (strchr(u->exec->command, '/') && u->exec->command[0] != '/') {
			free(cfg->exec->command);
			if (resolve_path(f, u->exec->command, &cfg->exec->command, err) < 0)
				return -1;
		}
	}
	return 0;
}

int k8s_kubeconfig_load(struct k8s_config *cfg, const struct k8s_kubeconfig_opts *opts,
			np_error *err)
{
	static const struct k8s_kubeconfig_opts none;
	memset(cfg, 0, sizeof(*cfg));
	if (!opts)
		opts = &none;
	struct kc_merged m = { 0 };
	int rc = -1;
	if (load_all(&m, opts->path, err) < 0)
		goto out;

	const char *ctx_name = opts->context && *opts->context ? opts->context : NULL;
	for (size_t i = 0; i < m.nfiles && !ctx_name; i++)
		ctx_name = m.files[i].current_context;
	if (!ctx_name) {
		np_error_set(err, NP_EUSAGE, 0,
			     m.nfiles ? "kubeconfig: no current-context is set (give --context)"
				      : "no kubeconfig found (give --kubeconfig or set KUBECONFIG)");
		goto out;
	}
	struct kc_file *cf = NULL, *uf = NULL, *xf = NULL;
	struct kc_context *ctx = FIND(&m, contexts, ncontexts, ctx_name, &xf);
	if (!ctx) {
		np_error_set(err, NP_EUSAGE, 0, "kubeconfig: context \"%s\" does not exist", ctx_name);
		goto out;
	}
	if (!ctx->cluster) {
		np_error_set(err, NP_EUSAGE, 0, "kubeconfig %s: context \"%s\" names no cluster",
			     xf->path, ctx_name);
		goto out;
	}
	struct kc_cluster *cl = FIND(&m, clusters, nclusters, ctx->cluster, &cf);
	if (!cl) {
		np_error_set(err, NP_EUSAGE, 0,
			     "kubeconfig: cluster \"%s\" (of context \"%s\") does not exist",
			     ctx->cluster, ctx_name);
		goto out;
	}
	if (set_cluster(cfg, cf, cl, err) < 0)
		goto out;
	if (ctx->user) {
		struct kc_user *u = FIND(&m, users, nusers, ctx->user, &uf);
		if (!u) {
			np_error_set(err, NP_EUSAGE, 0,
				     "kubeconfig: user \"%s\" (of context \"%s\") does not exist",
				     ctx->user, ctx_name);
			goto out;
		}
		if (set_user(cfg, uf, u, err) < 0)
			goto out;
	}
	const char *ns = opts->namespace && *opts->namespace ? opts->namespace
			 : ctx->namespace                  ? ctx->namespace
							   : "default";
	if (!(cfg->namespace = strdup(ns))) {
		nomem(err);
		goto out;
	}
	rc = 0;
out:
	merged_free(&m);
	return rc;
}
