/* One kubeconfig file into struct kc_file (kubeconfig_file.h), with the
 * fields client-go reads (k8s.io/client-go/tools/clientcmd/api/v1,
 * types.go): clusters, users (exec credential plugins included: exec.c
 * runs them), contexts and current-context.  An entry that uses something
 * unsupported is recorded, not refused: kubeconfig.c fails only when the
 * chosen context uses it, as a kubectl that lacks a plugin only fails for
 * it. */
#include "k8s/kubeconfig_file.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "util/cleanup.h"

#define KC_FILE_MAX (4 << 20)     /* a kubeconfig larger than this is refused */
#define KC_V1 "client.authentication.k8s.io/v1"
#define KC_V1BETA1 "client.authentication.k8s.io/v1beta1"

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

void kc_file_free(struct kc_file *f)
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

int kc_file_load(const char *path, struct kc_file *f, np_error *err)
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
