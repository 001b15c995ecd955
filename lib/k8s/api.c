/* Paths and the typed calls: get, merge patch, create, list, Job. */
#include "k8s/k8s_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/jsonread.h"

static char *escape(const char *s)
{
	/* Since curl 7.82 the handle argument is unused. */
	if (k8s_curl_load(NULL) < 0)
		return NULL;
	return curl_easy_escape(NULL, s, 0);
}

char *k8s_object_path(const char *prefix, const char *ns, const char *resource,
		      const char *name)
{
	char *ens = ns ? escape(ns) : NULL;
	char *ename = name ? escape(name) : NULL;
	char *path = NULL;
	if ((!ns || ens) && (!name || ename)) {
		if (asprintf(&path, "%s%s%s/%s%s%s", prefix, ns ? "/namespaces/" : "",
			     ns ? ens : "", resource, name ? "/" : "", name ? ename : "") < 0)
			path = NULL;
	}
	curl_free(ens);
	curl_free(ename);
	return path;
}

int k8s_query_add(char **path, const char *key, const char *value)
{
	char *ev = escape(value);
	if (!ev)
		return -1;
	char *np = NULL;
	int n = asprintf(&np, "%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', key, ev);
	curl_free(ev);
	if (n < 0)
		return -1;
	free(*path);
	*path = np;
	return 0;
}

int k8s_get(struct k8s_client *c, const char *path, json_t **out, np_error *err)
{
	return k8s_request(c, "GET", path, NULL, NULL, NULL, out, err);
}

int k8s_patch_merge(struct k8s_client *c, const char *path, const json_t *patch,
		    json_t **out, np_error *err)
{
	return k8s_request(c, "PATCH", path, patch, "application/merge-patch+json", NULL, out, err);
}

int k8s_create(struct k8s_client *c, const char *path, const json_t *obj, json_t **out,
	       np_error *err)
{
	return k8s_request(c, "POST", path, obj, "application/json", NULL, out, err);
}

static int nomem(np_error *err)
{
	return np_error_set(err, NP_EINTERNAL, ENOMEM, "building request path");
}

/* What the API answered for pod `name` must be that pod: every caller
 * reads metadata.name, uid and labels, and a body of another shape must be
 * an API error, not "this pod has no labels". */
static int check_pod(const char *verb, const char *name, json_t **pod, np_error *err)
{
	const json_t *md = json_object_get(*pod, "metadata");
	const char *n = np_json_cstr(json_object_get(md, "name"));
	const char *uid = np_json_cstr(json_object_get(md, "uid"));
	if (json_is_object(*pod) && json_is_object(md) && n && !strcmp(n, name) && uid && *uid)
		return 0;
	json_decref(*pod);
	*pod = NULL;
	return np_error_set(err, NP_EK8S, 0,
			    "%s pod %.253s: the API server answered with something that is not that "
			    "pod (no metadata with its name and uid)",
			    verb, name);
}

int k8s_get_pod(struct k8s_client *c, const char *ns, const char *name, json_t **pod,
		np_error *err)
{
	cleanup_free char *path = k8s_object_path("/api/v1", ns, "pods", name);
	if (!path)
		return nomem(err);
	if (k8s_get(c, path, pod, err) < 0)
		return -1;
	return check_pod("GET", name, pod, err);
}

int k8s_patch_pod(struct k8s_client *c, const char *ns, const char *name,
		  const json_t *patch, json_t **pod, np_error *err)
{
	cleanup_free char *path = k8s_object_path("/api/v1", ns, "pods", name);
	if (!path)
		return nomem(err);
	if (k8s_patch_merge(c, path, patch, pod, err) < 0)
		return -1;
	return pod ? check_pod("PATCH", name, pod, err) : 0;
}

int k8s_list_pods(struct k8s_client *c, const char *ns, const char *label_selector,
		  const char *field_selector, json_t **list, np_error *err)
{
	return k8s_list_pods_as(c, ns, label_selector, field_selector, NULL, list, err);
}

int k8s_list_pods_as(struct k8s_client *c, const char *ns, const char *label_selector,
		     const char *field_selector, const char *accept, json_t **list, np_error *err)
{
	cleanup_free char *path = k8s_object_path("/api/v1", ns, "pods", NULL);
	if (!path || (label_selector && *label_selector &&
		      k8s_query_add(&path, "labelSelector", label_selector) < 0) ||
	    (field_selector && *field_selector &&
	     k8s_query_add(&path, "fieldSelector", field_selector) < 0))
		return nomem(err);
	/* No limit: the whole list in one answer (a watch without page_limit;
	 * nicpick itself lists in pages). */
	static const struct k8s_answer_limits al = { K8S_MAX_LIST, SIZE_MAX, "a list in one answer" };
	if (k8s_request_as(c, "GET", path, NULL, NULL, accept, &al, list, err) < 0)
		return -1;
	if (!json_is_array(json_object_get(*list, "items"))) {
		json_decref(*list);
		*list = NULL;
		return np_error_set(err, NP_EK8S, 0, "GET %s: response is not a list", path);
	}
	return 0;
}

int k8s_list_pods_paged(struct k8s_client *c, const char *ns, const char *label_selector,
			const char *field_selector, size_t limit, int (*page)(json_t *list, void *ud),
			void (*restart)(void *ud), void *ud, char **rv, np_error *err)
{
	return k8s_list_pods_paged_as(c, ns, label_selector, field_selector, NULL, limit, page,
				      restart, ud, rv, err);
}

int k8s_list_pods_paged_as(struct k8s_client *c, const char *ns, const char *label_selector,
			   const char *field_selector, const char *accept, size_t limit,
			   int (*page)(json_t *list, void *ud), void (*restart)(void *ud), void *ud,
			   char **rv, np_error *err)
{
	const struct k8s_list_query q = { .prefix = "/api/v1", .resource = "pods", .ns = ns,
					  .label_selector = label_selector,
					  .field_selector = field_selector, .limit = limit };
	return k8s_list_paged_as(c, &q, accept, page, restart, ud, rv, err);
}

int k8s_list_paged(struct k8s_client *c, const struct k8s_list_query *q,
		   int (*page)(json_t *list, void *ud), void (*restart)(void *ud), void *ud,
		   char **rv, np_error *err)
{
	return k8s_list_paged_as(c, q, NULL, page, restart, ud, rv, err);
}

/* "n pods", "1 pod": the resource's plural, as its path names it. */
static void count_of(char *buf, size_t len, size_t n, const char *resource)
{
	int l = (int)strlen(resource);
	if (n == 1 && l > 1 && resource[l - 1] == 's')
		l--;
	snprintf(buf, len, "%zu %.*s", n, l, resource);
}

/* The client's page hint for lists of this resource, reset for another. */
static struct k8s_page_hint *page_hint(struct k8s_client *c, const char *resource)
{
	struct k8s_page_hint *h = &c->page_hint;
	if (strcmp(h->resource, resource) != 0) {
		*h = (struct k8s_page_hint){ 0 };
		snprintf(h->resource, sizeof(h->resource), "%s", resource);
	}
	return h;
}

/* The items a page is asked for: as many as wanted, unless a page of
 * that many was refused (ceiling) or the last page's items show that
 * they would not fit the parse's ceiling (fit). */
static size_t page_size(const struct k8s_page_hint *h, size_t want)
{
	size_t n = want;
	if (h->ceiling && h->ceiling < n)
		n = h->ceiling;
	if (h->fit && h->fit < n)
		n = h->fit;
	return n;
}

int k8s_list_paged_as(struct k8s_client *c, const struct k8s_list_query *q, const char *accept,
		      int (*page)(json_t *list, void *ud), void (*restart)(void *ud), void *ud,
		      char **rv, np_error *err)
{
	char lim[24], count[96], pages[112], *cont = NULL;
	unsigned expired = 0;
	int rc = 0;
	const size_t want = q->limit ? q->limit : K8S_LIST_PAGE;
	struct k8s_page_hint *h = page_hint(c, q->resource);
	size_t n = page_size(h, want);
	if (rv)
		*rv = NULL;
	for (;;) {
		snprintf(lim, sizeof(lim), "%zu", n);
		count_of(count, sizeof(count), n, q->resource);
		snprintf(pages, sizeof(pages), "a page of %s", count);
		struct k8s_answer_limits al = { k8s_page_max(n), K8S_PARSE_MAX, pages };
		cleanup_free char *path = k8s_object_path(q->prefix, q->ns, q->resource, NULL);
		if (!path || k8s_query_add(&path, "limit", lim) < 0 ||
		    (cont && k8s_query_add(&path, "continue", cont) < 0) ||
		    (q->label_selector && *q->label_selector &&
		     k8s_query_add(&path, "labelSelector", q->label_selector) < 0) ||
		    (q->field_selector && *q->field_selector &&
		     k8s_query_add(&path, "fieldSelector", q->field_selector) < 0)) {
			rc = nomem(err);
			break;
		}
		json_t *list = NULL;
		if (k8s_request_as(c, "GET", path, NULL, NULL, accept, &al, &list, err) < 0) {
			/* Too large to read or to parse: the same page again, for
			 * half as many items (a continue token holds its place
			 * whatever the limit), and the rest of the list so.  A
			 * page of one item is bounded as one object is. */
			if (c->last_oversize && n > 1) {
				n /= 2;
				h->ceiling = n;
				*err = (np_error){ 0 };
				continue;
			}
			/* The snapshot of the first page is gone (compacted): what
			 * was read is void, list again from the start. */
			if (cont && k8s_client_last_http(c) == 410) {
				free(cont);
				cont = NULL;
				if (restart)
					restart(ud);
				char what[160];
				snprintf(what, sizeof(what),
					 "listing %s in %s again after an expired continue token",
					 q->resource, q->ns ? q->ns : "all namespaces");
				long d = k8s_backoff_ms(expired++, K8S_BACKOFF_BASE_MS, K8S_BACKOFF_CAP_MS, k8s_rand(c));
				if (k8s_wait(c, d, what, err) < 0) {
					rc = -1;
					break;
				}
				*err = (np_error){ 0 };
				continue;
			}
			rc = -1;
			break;
		}
		size_t used = c->last_parse_used;
		json_t *items = json_object_get(list, "items");
		if (!json_is_array(items)) {
			json_decref(list);
			rc = np_error_set(err, NP_EK8S, 0, "GET %s: response is not a list", path);
			break;
		}
		/* The API returns at most limit items (a list without a
		 * resourceVersion is served as asked); a page bounds its
		 * consumer's work by that too, not only its bytes. */
		if (json_array_size(items) > n) {
			char got[96];
			count_of(got, sizeof(got), json_array_size(items), q->resource);
			json_decref(list);
			rc = np_error_set(err, NP_EK8S, 0,
					  "GET %s: the answer has %s, more than the %zu asked for: "
					  "refused",
					  path, got, n);
			break;
		}
		json_t *md = json_object_get(list, "metadata");
		const char *r = json_string_value(json_object_get(md, "resourceVersion"));
		const char *next = json_string_value(json_object_get(md, "continue"));
		if (rv && !cont && r) {
			free(*rv);
			*rv = strdup(r);
		}
		free(cont);
		cont = next && *next ? strdup(next) : NULL;
		/* The next page, and the next list, asked for as many as this
		 * page's items show would fit: the pods of a job are alike, and
		 * a page that does not fit all the same is asked again for
		 * half as many, as above. */
		if (json_array_size(items) && used) {
			h->fit = k8s_page_fit(SIZE_MAX, json_array_size(items), used);
			n = page_size(h, want);
		}
		rc = page(list, ud);
		json_decref(list);
		if (rc || !cont)
			break;
	}
	free(cont);
	return rc;
}

int k8s_get_job(struct k8s_client *c, const char *ns, const char *name, json_t **job,
		np_error *err)
{
	cleanup_free char *path = k8s_object_path("/apis/batch/v1", ns, "jobs", name);
	if (!path)
		return nomem(err);
	return k8s_get(c, path, job, err);
}

int k8s_job_completions(const json_t *job)
{
	json_t *v = json_object_get(json_object_get(job, "spec"), "completions");
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 1000000)
		return -1;
	return (int)json_integer_value(v);
}
