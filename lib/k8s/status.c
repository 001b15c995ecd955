/* Failed responses → error messages a user can act on. */
#include "k8s/k8s_priv.h"
#include "util/jsonread.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static void copy_seg(char *dst, size_t cap, const char *s, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, s, len);
	dst[len] = '\0';
}

static bool query_is_watch(const char *q)
{
	while (q && *q) {
		if (!strncmp(q, "watch=1", 7) || !strncmp(q, "watch=true", 10))
			return true;
		q = strchr(q, '&');
		if (q)
			q++;
	}
	return false;
}

int k8s_rbac_from_request(const char *method, const char *path, struct k8s_rbac *r)
{
	memset(r, 0, sizeof(*r));
	const char *q = strchr(path, '?');
	size_t plen = q ? (size_t)(q - path) : strlen(path);

	/* Split "/api/v1/namespaces/NS/pods/NAME/status" into segments. */
	const char *seg[8];
	size_t seglen[8];
	size_t n = 0;
	for (size_t i = 0; i < plen && n < 8;) {
		while (i < plen && path[i] == '/')
			i++;
		if (i >= plen)
			break;
		size_t start = i;
		while (i < plen && path[i] != '/')
			i++;
		seg[n] = path + start;
		seglen[n++] = i - start;
	}
	size_t i;
	if (n >= 2 && seglen[0] == 3 && !strncmp(seg[0], "api", 3)) {
		i = 2;
	} else if (n >= 3 && seglen[0] == 4 && !strncmp(seg[0], "apis", 4)) {
		copy_seg(r->group, sizeof(r->group), seg[1], seglen[1]);
		i = 3;
	} else {
		return -1;
	}
	if (n >= i + 3 && seglen[i] == 10 && !strncmp(seg[i], "namespaces", 10)) {
		copy_seg(r->ns, sizeof(r->ns), seg[i + 1], seglen[i + 1]);
		i += 2;
	}
	if (i >= n)
		return -1;
	copy_seg(r->resource, sizeof(r->resource), seg[i], seglen[i]);
	if (i + 1 < n)
		copy_seg(r->name, sizeof(r->name), seg[i + 1], seglen[i + 1]);
	if (i + 2 < n) {
		size_t l = strlen(r->resource);
		snprintf(r->resource + l, sizeof(r->resource) - l, "/%.*s", (int)seglen[i + 2],
			 seg[i + 2]);
	}

	const char *verb;
	bool named = r->name[0] != '\0';
	if (!strcmp(method, "GET"))
		verb = named ? "get" : query_is_watch(q ? q + 1 : NULL) ? "watch" : "list";
	else if (!strcmp(method, "PATCH"))
		verb = "patch";
	else if (!strcmp(method, "PUT"))
		verb = "update";
	else if (!strcmp(method, "POST"))
		verb = "create";
	else if (!strcmp(method, "DELETE"))
		verb = named ? "delete" : "deletecollection";
	else
		return -1;
	snprintf(r->verb, sizeof(r->verb), "%s", verb);
	return 0;
}

/* A non-JSON body (a proxy's HTML page, say): a short printable excerpt. */
static void excerpt(char *dst, size_t cap, const char *body, size_t len)
{
	size_t j = 0;
	for (size_t i = 0; i < len && j + 1 < cap && j < 200; i++) {
		unsigned char ch = (unsigned char)body[i];
		dst[j++] = isprint(ch) ? (char)ch : ' ';
	}
	dst[j] = '\0';
	while (j > 0 && dst[j - 1] == ' ')
		dst[--j] = '\0';
}

int k8s_status_error(np_error *err, const char *method, const char *path, long http,
		     const char *body, size_t body_len, const char *token_file)
{
	json_t *st = body ? k8s_json_parse(body, body_len, K8S_PARSE_MAX, NULL, NULL) : NULL;
	const char *reason = np_json_cstr(json_object_get(st, "reason"));
	const char *message = np_json_cstr(json_object_get(st, "message"));
	char raw[256] = "";
	if (!message) {
		excerpt(raw, sizeof(raw), body ? body : "", body ? body_len : 0);
		message = raw[0] ? raw : "(empty response)";
	}
	if (!reason)
		reason = "";

	struct k8s_rbac r;
	/* The real API server maps a request without credentials to
	 * system:anonymous and answers 403, not 401
	 * (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/authentication/
	 * request/anonymous): no Role rule will help that. */
	if (http == 403 && strstr(message, "system:anonymous")) {
		np_error_set(err, NP_EK8S, 0,
			     "forbidden: the request reached the API server without credentials it "
			     "accepted (it ran as system:anonymous): %s",
			     token_file ? "check the token file" : "no token was sent (give --token-file)");
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof(err->msg) - n, " (%s)", message);
	} else if (http == 403 && k8s_rbac_from_request(method, path, &r) == 0) {
		char group[96] = "";
		char where[160] = "";
		if (r.group[0])
			snprintf(group, sizeof(group), " in API group \"%s\"", r.group);
		if (r.ns[0])
			snprintf(where, sizeof(where), " in namespace \"%s\"", r.ns);
		np_error_set(err, NP_EK8S, 0, "forbidden: the %s needs \"%s\" on \"%s\"%s%s (%s)",
			     r.ns[0] ? "Role" : "ClusterRole", r.verb, r.resource, group, where,
			     message);
	} else if (http == 401) {
		if (token_file)
			np_error_set(err, NP_EK8S, 0,
				     "unauthorized: the API server rejected the token from %s "
				     "(HTTP 401 %s: %s)",
				     token_file, reason, message);
		else
			np_error_set(err, NP_EK8S, 0,
				     "unauthorized: no token was sent (give --token-file) "
				     "(HTTP 401 %s: %s)",
				     reason, message);
	} else {
		np_error_set(err, NP_EK8S, 0, "%s %s: HTTP %ld%s%s: %s", method, path, http,
			     reason[0] ? " " : "", reason, message);
	}
	json_decref(st);
	return -1;
}
