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
 * Each file is parsed once (libyaml's document API) into the structs below;
 * an entry that uses something unsupported is only an error when the chosen
 * context uses it, as a kubectl that lacks a plugin only fails for it. */
#include "k8s/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "util/cleanup.h"

#define KC_FILE_MAX (4 << 20)     /* a kubeconfig larger than this is refused */
#define KC_V1 "client.authentication.k8s.io/v1"
#define KC_V1BETA1 "client.authentication.k8s.io/v1beta1"

struct kc_cluster {
	char *name, *server, *ca_file, *ca_data, *tls_server_name;
	bool insecure;
	char *unsupported; /* the first unsupported field, as an error message */
};

struct kc_user {
	char *name, *token, *token_file, *cert_file, *cert_data, *key_file, *key_data;
	struct k8s_exec *exec;
	char *unsupported;
};

struct kc_context {
	char *name, *cluster, *user, *namespace;
};

struct kc_file {
	char *path, *dir;
	char *current_context;
	struct kc_cluster *clusters;
	struct kc_user *users;
	struct kc_context *contexts;
	size_t nclusters, nusers, ncontexts;
};

/* --- small helpers ---------------------------------------------------- */

static int nomem(np_error *err)
{
	return np_error_set(err, NP_EINTERNAL, ENOMEM, "kubeconfig");
}


static int strv_push(char ***v, size_t *n, char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(**v));
	if (!nv) {
		free(s);
		return -1;
	}
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}


static void free_file(struct kc_file *f)
{
	for (size_t i = 0; i < f->nclusters; i++) {
		struct kc_cluster *c = &f->clusters[i];
		free(c->name), free(c->server), free(c->ca_file), free(c->ca_data);
		free(c->tls_server_name), free(c->unsupported);
	}
	for (size_t i = 0; i < f->nusers; i++) {
		struct kc_user *u = &f->users[i];
		free(u->name), free(u->token), free(u->token_file), free(u->cert_file);
		free(u->cert_data), free(u->key_file), free(u->key_data), free(u->unsupported);
		k8s_exec_free(u->exec);
	}
	for (size_t i = 0; i < f->ncontexts; i++) {
		struct kc_context *c = &f->contexts[i];
		free(c->name), free(c->cluster), free(c->user), free(c->namespace);
	}
	free(f->clusters), free(f->users), free(f->contexts);
	free(f->path), free(f->dir), free(f->current_context);
	memset(f, 0, sizeof(*f));
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

/* --- YAML into structs ------------------------------------------------ */

struct kc_parse {
	yaml_document_t *doc;
	const char *path;
	np_error *err;
};

static int bad(struct kc_parse *p, const char *what)
{
	return np_error_set(p->err, NP_EUSAGE, 0, "kubeconfig %s: %s", p->path, what);
}

static bool scalar_is_null(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = (const char *)n->data.scalar.value;
	return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
	       !strcmp(v, "NULL");
}

/* A string field: NULL/empty stays unset, anything but a scalar is an error. */
static int get_str(struct kc_parse *p, yaml_node_t *n, const char *field, char **out)
{
	if (scalar_is_null(n))
		return 0;
	if (n->type != YAML_SCALAR_NODE) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s must be a string", field);
		return bad(p, msg);
	}
	free(*out);
	*out = strndup((const char *)n->data.scalar.value, n->data.scalar.length);
	if (!*out)
		return nomem(p->err);
	if (!**out) {
		free(*out);
		*out = NULL;
	}
	return 0;
}

static int get_bool(struct kc_parse *p, yaml_node_t *n, const char *field, bool *out)
{
	static const char *const yes[] = { "true", "True", "TRUE" };
	static const char *const no[] = { "false", "False", "FALSE" };
	if (scalar_is_null(n)) {
		*out = false;
		return 0;
	}
	if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		const char *v = (const char *)n->data.scalar.value;
		for (size_t i = 0; i < 3; i++) {
			if (!strcmp(v, yes[i]) || !strcmp(v, no[i])) {
				*out = !strcmp(v, yes[i]);
				return 0;
			}
		}
	}
	char msg[256];
	snprintf(msg, sizeof(msg), "%s must be true or false", field);
	return bad(p, msg);
}

static const char *key_of(yaml_document_t *doc, yaml_node_pair_t *pair)
{
	yaml_node_t *k = yaml_document_get_node(doc, pair->key);
	return k && k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "";
}

#define FOREACH_PAIR(doc, map, pair)                                                   \
	for (yaml_node_pair_t *pair = (map)->data.mapping.pairs.start;                \
	     pair < (map)->data.mapping.pairs.top; pair++)
#define FOREACH_ITEM(doc, seq, item)                                                   \
	for (yaml_node_item_t *item = (seq)->data.sequence.items.start;               \
	     item < (seq)->data.sequence.items.top; item++)

static int want_map(struct kc_parse *p, yaml_node_t *n, const char *field)
{
	if (n && n->type == YAML_MAPPING_NODE)
		return 0;
	char msg[256];
	snprintf(msg, sizeof(msg), "%s must be a mapping", field);
	return bad(p, msg);
}

/* An unsupported field: remembered on the entry, an error only if used. */
static int unsupported(char **slot, const char *kind, const char *name, const char *field,
		       const char *why, np_error *err)
{
	if (*slot)
		return 0;
	if (asprintf(slot, "%s \"%s\": %s is not supported%s%s", kind, name ? name : "", field,
		     why ? ": " : "", why ? why : "") < 0) {
		*slot = NULL;
		return nomem(err);
	}
	return 0;
}

static int parse_cluster(struct kc_parse *p, yaml_node_t *m, struct kc_cluster *c)
{
	if (want_map(p, m, "clusters[].cluster") < 0)
		return -1;
	FOREACH_PAIR(p->doc, m, pair) {
		const char *k = key_of(p->doc, pair);
		yaml_node_t *v = yaml_document_get_node(p->doc, pair->value);
		int rc = 0;
		if (!strcmp(k, "server"))
			rc = get_str(p, v, "clusters[].cluster.server", &c->server);
		else if (!strcmp(k, "certificate-authority"))
			rc = get_str(p, v, "clusters[].cluster.certificate-authority", &c->ca_file);
		else if (!strcmp(k, "certificate-authority-data"))
			rc = get_str(p, v, "clusters[].cluster.certificate-authority-data", &c->ca_data);
		else if (!strcmp(k, "tls-server-name"))
			rc = get_str(p, v, "clusters[].cluster.tls-server-name", &c->tls_server_name);
		else if (!strcmp(k, "insecure-skip-tls-verify"))
			rc = get_bool(p, v, "clusters[].cluster.insecure-skip-tls-verify", &c->insecure);
		else if (!strcmp(k, "proxy-url") && !scalar_is_null(v))
			rc = unsupported(&c->unsupported, "cluster", c->name, "proxy-url",
					 "set HTTPS_PROXY instead, which nicpick honours", p->err);
		/* extensions, disable-compression and unknown fields: ignored, as
		 * client-go ignores fields it does not know. */
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int parse_exec(struct kc_parse *p, yaml_node_t *m, struct kc_user *u)
{
	if (want_map(p, m, "users[].user.exec") < 0)
		return -1;
	struct k8s_exec *x = u->exec = calloc(1, sizeof(*x));
	if (!x || !(x->args = calloc(1, sizeof(char *))) || !(x->env = calloc(1, sizeof(char *))))
		return nomem(p->err);
	size_t nargs = 0, nenv = 0;
	cleanup_free char *mode = NULL;
	bool cluster_info = false;
	FOREACH_PAIR(p->doc, m, pair) {
		const char *k = key_of(p->doc, pair);
		yaml_node_t *v = yaml_document_get_node(p->doc, pair->value);
		int rc = 0;
		if (!strcmp(k, "apiVersion"))
			rc = get_str(p, v, "users[].user.exec.apiVersion", &x->api_version);
		else if (!strcmp(k, "command"))
			rc = get_str(p, v, "users[].user.exec.command", &x->command);
		else if (!strcmp(k, "installHint"))
			rc = get_str(p, v, "users[].user.exec.installHint", &x->install_hint);
		else if (!strcmp(k, "interactiveMode"))
			rc = get_str(p, v, "users[].user.exec.interactiveMode", &mode);
		else if (!strcmp(k, "provideClusterInfo"))
			rc = get_bool(p, v, "users[].user.exec.provideClusterInfo", &cluster_info);
		else if (!strcmp(k, "args") && !scalar_is_null(v)) {
			if (v->type != YAML_SEQUENCE_NODE)
				return bad(p, "users[].user.exec.args must be a list of strings");
			FOREACH_ITEM(p->doc, v, it) {
				yaml_node_t *a = yaml_document_get_node(p->doc, *it);
				if (a->type != YAML_SCALAR_NODE)
					return bad(p, "users[].user.exec.args must be a list of strings");
				char *s = strndup((const char *)a->data.scalar.value,
						  a->data.scalar.length);
				if (!s || strv_push(&x->args, &nargs, s) < 0)
					return nomem(p->err);
			}
		} else if (!strcmp(k, "env") && !scalar_is_null(v)) {
			if (v->type != YAML_SEQUENCE_NODE)
				return bad(p, "users[].user.exec.env must be a list of {name, value}");
			FOREACH_ITEM(p->doc, v, it) {
				yaml_node_t *e = yaml_document_get_node(p->doc, *it);
				if (want_map(p, e, "users[].user.exec.env[]") < 0)
					return -1;
				cleanup_free char *name = NULL, *value = NULL;
				FOREACH_PAIR(p->doc, e, ep) {
					const char *ek = key_of(p->doc, ep);
					yaml_node_t *ev = yaml_document_get_node(p->doc, ep->value);
					if (!strcmp(ek, "name") &&
					    get_str(p, ev, "users[].user.exec.env[].name", &name) < 0)
						return -1;
					if (!strcmp(ek, "value") &&
					    get_str(p, ev, "users[].user.exec.env[].value", &value) < 0)
						return -1;
				}
				if (!name || strchr(name, '='))
					return bad(p, "users[].user.exec.env[].name must be a variable name");
				char *s = NULL;
				if (asprintf(&s, "%s=%s", name, value ? value : "") < 0 ||
				    strv_push(&x->env, &nenv, s) < 0)
					return nomem(p->err);
			}
		}
		if (rc < 0)
			return -1;
	}
	if (!x->command)
		return bad(p, "users[].user.exec.command is required");
	if (!x->api_version || (strcmp(x->api_version, KC_V1) && strcmp(x->api_version, KC_V1BETA1)))
		return unsupported(&u->unsupported, "user", u->name, "exec.apiVersion",
				   x->api_version ? "nicpick speaks " KC_V1 " and " KC_V1BETA1
						  : "it is required (" KC_V1 ")",
				   p->err);
	/* client-go: v1 requires interactiveMode, v1beta1 defaults to IfAvailable.
	 * nicpick has no terminal for the plugin: Never and IfAvailable run it
	 * without one, Always cannot run. */
	if (!mode && !strcmp(x->api_version, KC_V1))
		return bad(p, "users[].user.exec.interactiveMode is required with " KC_V1
			      " (Never or IfAvailable)");
	if (mode && !strcmp(mode, "Always"))
		return unsupported(&u->unsupported, "user", u->name, "exec.interactiveMode: Always",
				   "nicpick gives the plugin no terminal (use Never or IfAvailable)",
				   p->err);
	if (mode && strcmp(mode, "Never") && strcmp(mode, "IfAvailable"))
		return bad(p, "users[].user.exec.interactiveMode must be Never, IfAvailable or Always");
	if (cluster_info)
		return unsupported(&u->unsupported, "user", u->name, "exec.provideClusterInfo",
				   NULL, p->err);
	return 0;
}

static int parse_user(struct kc_parse *p, yaml_node_t *m, struct kc_user *u)
{
	static const struct {
		const char *field, *why;
	} unsup[] = {
		{ "auth-provider", "use the provider's exec credential plugin "
				   "(gke-gcloud-auth-plugin, kubelogin)" },
		{ "username", "basic authentication: use a token, a client certificate or an exec plugin" },
		{ "password", "basic authentication: use a token, a client certificate or an exec plugin" },
		{ "as", "impersonation" },
		{ "as-uid", "impersonation" },
		{ "as-groups", "impersonation" },
		{ "as-user-extra", "impersonation" },
	};
	if (want_map(p, m, "users[].user") < 0)
		return -1;
	FOREACH_PAIR(p->doc, m, pair) {
		const char *k = key_of(p->doc, pair);
		yaml_node_t *v = yaml_document_get_node(p->doc, pair->value);
		int rc = 0;
		if (!strcmp(k, "token"))
			rc = get_str(p, v, "users[].user.token", &u->token);
		else if (!strcmp(k, "tokenFile"))
			rc = get_str(p, v, "users[].user.tokenFile", &u->token_file);
		else if (!strcmp(k, "client-certificate"))
			rc = get_str(p, v, "users[].user.client-certificate", &u->cert_file);
		else if (!strcmp(k, "client-certificate-data"))
			rc = get_str(p, v, "users[].user.client-certificate-data", &u->cert_data);
		else if (!strcmp(k, "client-key"))
			rc = get_str(p, v, "users[].user.client-key", &u->key_file);
		else if (!strcmp(k, "client-key-data"))
			rc = get_str(p, v, "users[].user.client-key-data", &u->key_data);
		else if (!strcmp(k, "exec")) {
			if (!scalar_is_null(v))
				rc = parse_exec(p, v, u);
		} else {
			for (size_t i = 0; i < sizeof(unsup) / sizeof(unsup[0]); i++)
				if (!strcmp(k, unsup[i].field) && !scalar_is_null(v) &&
				    !(v->type == YAML_SEQUENCE_NODE &&
				      v->data.sequence.items.top == v->data.sequence.items.start) &&
				    !(v->type == YAML_MAPPING_NODE &&
				      v->data.mapping.pairs.top == v->data.mapping.pairs.start))
					rc = unsupported(&u->unsupported, "user", u->name,
							 unsup[i].field, unsup[i].why, p->err);
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int parse_context(struct kc_parse *p, yaml_node_t *m, struct kc_context *c)
{
	if (want_map(p, m, "contexts[].context") < 0)
		return -1;
	FOREACH_PAIR(p->doc, m, pair) {
		const char *k = key_of(p->doc, pair);
		yaml_node_t *v = yaml_document_get_node(p->doc, pair->value);
		int rc = 0;
		if (!strcmp(k, "cluster"))
			rc = get_str(p, v, "contexts[].context.cluster", &c->cluster);
		else if (!strcmp(k, "user"))
			rc = get_str(p, v, "contexts[].context.user", &c->user);
		else if (!strcmp(k, "namespace"))
			rc = get_str(p, v, "contexts[].context.namespace", &c->namespace);
		if (rc < 0)
			return -1;
	}
	return 0;
}

enum kc_list { KC_CLUSTERS, KC_USERS, KC_CONTEXTS };

/* One of the three named lists: [{name: N, <inner>: {...}}, ...]. */
static int parse_list(struct kc_parse *p, struct kc_file *f, yaml_node_t *seq, enum kc_list which)
{
	static const char *const list[] = { "clusters", "users", "contexts" };
	static const char *const inner[] = { "cluster", "user", "context" };
	char msg[128];
	if (scalar_is_null(seq))
		return 0;
	if ((which == KC_CLUSTERS && f->clusters) || (which == KC_USERS && f->users) ||
	    (which == KC_CONTEXTS && f->contexts)) {
		snprintf(msg, sizeof(msg), "%s appears twice", list[which]);
		return bad(p, msg);
	}
	if (seq->type != YAML_SEQUENCE_NODE) {
		snprintf(msg, sizeof(msg), "%s must be a list", list[which]);
		return bad(p, msg);
	}
	size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	void *arr = NULL;
	if (which == KC_CLUSTERS)
		arr = f->clusters = calloc(n + 1, sizeof(*f->clusters));
	else if (which == KC_USERS)
		arr = f->users = calloc(n + 1, sizeof(*f->users));
	else
		arr = f->contexts = calloc(n + 1, sizeof(*f->contexts));
	if (!arr)
		return nomem(p->err);
	FOREACH_ITEM(p->doc, seq, it) {
		yaml_node_t *e = yaml_document_get_node(p->doc, *it);
		snprintf(msg, sizeof(msg), "%s[]", list[which]);
		if (want_map(p, e, msg) < 0)
			return -1;
		char *name = NULL;
		yaml_node_t *body = NULL;
		FOREACH_PAIR(p->doc, e, pair) {
			const char *k = key_of(p->doc, pair);
			yaml_node_t *v = yaml_document_get_node(p->doc, pair->value);
			snprintf(msg, sizeof(msg), "%s[].name", list[which]);
			if (!strcmp(k, "name") && get_str(p, v, msg, &name) < 0)
				return -1;
			if (!strcmp(k, inner[which]))
				body = v;
		}
		if (!name) {
			snprintf(msg, sizeof(msg), "an entry of %s has no name", list[which]);
			return bad(p, msg);
		}
		int rc = 0;
		snprintf(msg, sizeof(msg), "%s \"%s\" has no %s", inner[which], name, inner[which]);
		if (which == KC_CLUSTERS) {
			struct kc_cluster *c = &f->clusters[f->nclusters++];
			c->name = name;
			rc = body ? parse_cluster(p, body, c) : bad(p, msg);
		} else if (which == KC_USERS) {
			struct kc_user *u = &f->users[f->nusers++];
			u->name = name;
			/* a user with no fields at all is allowed (no credentials) */
			rc = body && !scalar_is_null(body) ? parse_user(p, body, u) : 0;
		} else {
			struct kc_context *c = &f->contexts[f->ncontexts++];
			c->name = name;
			rc = body ? parse_context(p, body, c) : bad(p, msg);
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int parse_doc(struct kc_parse *p, struct kc_file *f)
{
	yaml_node_t *root = yaml_document_get_root_node(p->doc);
	if (!root || scalar_is_null(root))
		return 0; /* an empty file is an empty config, as for client-go */
	if (root->type != YAML_MAPPING_NODE)
		return bad(p, "not a kubeconfig (the document is not a mapping)");
	FOREACH_PAIR(p->doc, root, pair) {
		const char *k = key_of(p->doc, pair);
		yaml_node_t *v = yaml_document_get_node(p->doc, pair->value);
		int rc = 0;
		if (!strcmp(k, "current-context"))
			rc = get_str(p, v, "current-context", &f->current_context);
		else if (!strcmp(k, "clusters"))
			rc = parse_list(p, f, v, KC_CLUSTERS);
		else if (!strcmp(k, "users"))
			rc = parse_list(p, f, v, KC_USERS);
		else if (!strcmp(k, "contexts"))
			rc = parse_list(p, f, v, KC_CONTEXTS);
		else if (!strcmp(k, "kind") && v->type == YAML_SCALAR_NODE &&
			 !scalar_is_null(v) && strcmp((const char *)v->data.scalar.value, "Config"))
			rc = bad(p, "kind is not Config");
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Read and parse one file.  Returns 1 when it does not exist. */
static int load_file(const char *path, struct kc_file *f, np_error *err)
{
	memset(f, 0, sizeof(*f));
	cleanup_fclose FILE *fp = fopen(path, "re");
	if (!fp) {
		if (errno == ENOENT)
			return 1;
		return np_error_set(err, NP_EUSAGE, errno, "kubeconfig %s", path);
	}
	char *buf = malloc(KC_FILE_MAX + 1);
	if (!buf)
		return nomem(err);
	size_t n = fread(buf, 1, KC_FILE_MAX + 1, fp);
	if (ferror(fp) || n > KC_FILE_MAX) {
		free(buf);
		return np_error_set(err, NP_EUSAGE, ferror(fp) ? EIO : 0,
				    "kubeconfig %s: %s", path,
				    ferror(fp) ? "cannot read" : "larger than 4 MiB");
	}
	f->path = strdup(path);
	char *tmp = strdup(path);
	f->dir = tmp ? strdup(dirname(tmp)) : NULL;
	free(tmp);
	if (!f->path || !f->dir) {
		free(buf);
		return nomem(err);
	}

	yaml_parser_t parser;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&parser)) {
		free(buf);
		return nomem(err);
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, n);
	int rc = 0;
	if (!yaml_parser_load(&parser, &doc)) {
		rc = np_error_set(err, NP_EUSAGE, 0, "kubeconfig %s: line %zu: %s%s%s", path,
				  parser.problem_mark.line + 1,
				  parser.problem ? parser.problem : "invalid YAML",
				  parser.context ? " " : "", parser.context ? parser.context : "");
	} else {
		struct kc_parse p = { .doc = &doc, .path = path, .err = err };
		rc = parse_doc(&p, f);
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&parser);
	free(buf);
	return rc;
}

/* --- merging and resolving ------------------------------------------- */

struct kc_merged {
	struct kc_file *files;
	size_t nfiles;
};

static void merged_free(struct kc_merged *m)
{
	for (size_t i = 0; i < m->nfiles; i++)
		free_file(&m->files[i]);
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
	int rc = load_file(path, &m->files[m->nfiles], err);
	if (rc == 1) {
		free_file(&m->files[m->nfiles]);
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
