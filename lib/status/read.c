/* Reading the job's pods and Events from the API, once or following them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/k8s.h"
#include "status/status.h"
#include "util/cleanup.h"

/* The label each kind's controller puts on its pods with the job's name. */
static const char *kind_label(enum status_kind k)
{
	switch (k) {
	case STATUS_KIND_JOB:
		return "batch.kubernetes.io/job-name";
	case STATUS_KIND_PYTORCHJOB:
		return "training.kubeflow.org/job-name";
	case STATUS_KIND_JOBSET:
	case STATUS_KIND_TRAINJOB:
		return "jobset.sigs.k8s.io/jobset-name";
	case STATUS_KIND_ANY:
		break;
	}
	return NULL;
}

static int selector_of(enum status_kind k, const char *job, char *buf, size_t len, np_error *err)
{
	int w = snprintf(buf, len, "%s=%s", kind_label(k), job);
	if (w < 0 || (size_t)w >= len)
		return np_error_set(err, NP_EUSAGE, 0, "job name '%.64s...' is too long", job);
	return 0;
}

/* An API error, with what to grant when it is a 403 (the client's
 * message names the verb and resource that were refused). */
static int api_error(np_error *err)
{
	if (strncmp(err->msg, "forbidden:", 10) == 0) {
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof(err->msg) - n,
			 "; nicpick status needs get, list and watch on pods and list on events: "
			 "deploy/rbac-status.yaml is that Role");
	}
	return -1;
}

/* A list's items, gathered page by page, as every list of nicpick's:
 * each answer, and what parsing it takes, is bounded by its limit
 * (lib/k8s, k8s_page_max), whatever the job's size or the server's
 * answer.  With `pods` (an object keyed by pod name), only the Events
 * about those pods are kept: a busy namespace holds thousands of Events
 * about other objects, each page of which is dropped once read, so what
 * is kept is bounded by the job, not by the namespace. */
struct pages {
	const json_t *pods; /* NULL: keep every item */
	json_t *items;
	np_error *err;
};

static bool about_pods(const json_t *event, const json_t *pods)
{
	const json_t *io = json_object_get(event, "involvedObject");
	const char *kind = json_string_value(json_object_get(io, "kind"));
	const char *name = json_string_value(json_object_get(io, "name"));
	return kind && strcmp(kind, "Pod") == 0 && name && json_object_get(pods, name);
}

static int add_page(json_t *list, void *ud)
{
	struct pages *p = ud;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(list, "items"), i, e)
	{
		if (p->pods && !about_pods(e, p->pods))
			continue;
		if (json_array_append(p->items, e) < 0)
			return np_error_set(p->err, NP_EINTERNAL, 0, "out of memory");
	}
	return 0;
}

static void drop_pages(void *ud)
{
	json_array_clear(((struct pages *)ud)->items);
}

static int list_paged(struct k8s_client *k, const struct k8s_list_query *q, const json_t *pods,
		      json_t **items, np_error *err)
{
	struct pages p = { .pods = pods, .items = json_array(), .err = err };
	if (!p.items)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	if (k8s_list_paged(k, q, add_page, drop_pages, &p, NULL, err) < 0) {
		json_decref(p.items);
		return api_error(err);
	}
	*items = p.items;
	return 0;
}

/* The view reads each pod's spec and status too: whole objects, not their
 * metadata only. */
static int list_pods(struct k8s_client *k, const char *ns, const char *sel, json_t **items,
		     np_error *err)
{
	const struct k8s_list_query q = { .prefix = "/api/v1", .resource = "pods", .ns = ns,
					  .label_selector = sel, .limit = K8S_LIST_PAGE };
	return list_paged(k, &q, NULL, items, err);
}

/* The Events about the pods in `pods`.  core/v1 Events select on
 * involvedObject.kind (kubernetes/kubernetes@00b2d95c,
 * pkg/registry/core/event/strategy.go, ToSelectableFields). */
static int list_events(struct k8s_client *k, const char *ns, const json_t *pods, json_t **items,
		       np_error *err)
{
	const struct k8s_list_query q = { .prefix = "/api/v1", .resource = "events", .ns = ns,
					  .field_selector = "involvedObject.kind=Pod",
					  .limit = K8S_LIST_PAGE };
	return list_paged(k, &q, pods, items, err);
}

/* The pods of a list, keyed by name. */
static json_t *by_name(const json_t *items)
{
	json_t *o = json_object();
	size_t i;
	json_t *pod;
	json_array_foreach(items, i, pod)
	{
		const char *name =
			json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
		if (o && name && json_object_set(o, name, pod) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* Which kind names pods JOB: the one given, else the one kind whose
 * label carries that name and whose pods the agreement's rule maps to it. */
static int find_kind(struct k8s_client *k, const char *ns, const char *job, enum status_kind *kind,
		     json_t **items, np_error *err)
{
	char sel[JOBS_SELECTOR_MAX];
	if (*kind != STATUS_KIND_ANY) {
		if (selector_of(*kind, job, sel, sizeof(sel), err) < 0)
			return -1;
		return list_pods(k, ns, sel, items, err);
	}
	static const enum status_kind kinds[] = { STATUS_KIND_JOB, STATUS_KIND_PYTORCHJOB,
						  STATUS_KIND_JOBSET };
	enum status_kind found[3];
	json_t *got[3] = { NULL, NULL, NULL };
	size_t n = 0;
	int ret = -1;
	for (size_t i = 0; i < 3; i++) {
		json_t *it = NULL;
		if (selector_of(kinds[i], job, sel, sizeof(sel), err) < 0 ||
		    list_pods(k, ns, sel, &it, err) < 0)
			goto out;
		/* a JobSet's Jobs label their pods with the Job's name too: they
		 * belong to the JobSet, as the rule says */
		struct status_job v;
		np_error e = { 0 };
		if (status_build(it, NULL, ns, job, kinds[i], &v, &e) == 0 && v.n_pods) {
			found[n] = kinds[i];
			got[n++] = it;
		} else {
			json_decref(it);
		}
		status_job_free(&v);
	}
	if (n > 1) {
		np_error_set(err, NP_EUSAGE, 0, "%s names pods of a %s and a %s in namespace %s: pass --kind",
			     job, status_kind_name(found[0]), status_kind_name(found[1]), ns);
		goto out;
	}
	*kind = n ? found[0] : STATUS_KIND_ANY;
	*items = n ? json_incref(got[0]) : json_array();
	ret = 0;
out:
	for (size_t i = 0; i < n; i++)
		json_decref(got[i]);
	return ret;
}

int status_read(struct k8s_client *k, const char *ns, const char *job, enum status_kind kind,
		struct status_job *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	json_t *items = NULL, *events = NULL, *pods = NULL;
	int ret = -1;
	if (find_kind(k, ns, job, &kind, &items, err) < 0)
		goto out;
	if (json_array_size(items)) {
		if (!(pods = by_name(items))) {
			np_error_set(err, NP_EINTERNAL, 0, "out of memory");
			goto out;
		}
		if (list_events(k, ns, pods, &events, err) < 0)
			goto out;
	}
	ret = status_build(items, events, ns, job, kind, out, err);
out:
	json_decref(pods);
	json_decref(items);
	json_decref(events);
	return ret;
}

/* ---- --watch ---- */

struct follow {
	struct k8s_client *k;
	const char *ns, *job;
	enum status_kind kind;
	json_t *pods; /* name -> Pod */
	json_t *events;
	int64_t events_at;
	char *last;   /* the last view handed out, as JSON */
	status_view_cb cb;
	void *ud;
	np_error *err;
	bool done;
	bool relisting; /* a paged re-list is under way: the view is partial */
};

#define EVENTS_EVERY_MS 2000

static int show(struct follow *f)
{
	int64_t now = k8s_mono_ms();
	if (!f->events || now - f->events_at >= EVENTS_EVERY_MS) {
		json_t *ev = NULL;
		if (list_events(f->k, f->ns, f->pods, &ev, f->err) < 0)
			return -1;
		json_decref(f->events);
		f->events = ev;
		f->events_at = now;
	}
	json_t *arr = json_array();
	const char *name;
	json_t *pod;
	json_object_foreach(f->pods, name, pod)
		json_array_append(arr, pod);
	struct status_job v;
	int ret = arr ? status_build(arr, f->events, f->ns, f->job, f->kind, &v, f->err)
		      : np_error_set(f->err, NP_EINTERNAL, 0, "out of memory");
	json_decref(arr);
	if (ret < 0) {
		status_job_free(&v);
		return -1;
	}
	char *now_json = status_json(&v);
	if (now_json && (!f->last || strcmp(now_json, f->last) != 0)) {
		free(f->last);
		f->last = now_json;
		now_json = NULL;
		if (f->cb(&v, f->ud))
			f->done = true;
	}
	free(now_json);
	if (v.state != STATUS_WAITING)
		f->done = true;
	status_job_free(&v);
	return 0;
}

static int on_event(enum k8s_watch_type type, json_t *obj, void *ud)
{
	struct follow *f = ud;
	const char *name;
	switch (type) {
	case K8S_WATCH_RELIST: /* only a watch that lists in one answer sends it */
		return 0;
	case K8S_WATCH_RELIST_BEGIN: /* the pods follow as ADDED, page by page */
		json_object_clear(f->pods);
		f->relisting = true;
		return 0;
	case K8S_WATCH_RELIST_END:
		f->relisting = false;
		break;
	case K8S_WATCH_ADDED:
	case K8S_WATCH_MODIFIED:
		if ((name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"))))
			json_object_set(f->pods, name, obj);
		break;
	case K8S_WATCH_DELETED:
		if ((name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"))))
			json_object_del(f->pods, name);
		break;
	case K8S_WATCH_BOOKMARK:
		return 0;
	}
	if (f->relisting)
		return 0;
	if (show(f) < 0)
		return -1;
	return f->done ? 1 : 0;
}

int status_watch(struct k8s_client *k, const char *ns, const char *job, enum status_kind kind,
		 status_view_cb cb, void *ud, np_error *err)
{
	/* The first view decides the kind; a job with no pods yet is watched
	 * as the kind asked for, or as a Job. */
	struct status_job v;
	if (status_read(k, ns, job, kind, &v, err) < 0) {
		status_job_free(&v);
		return -1;
	}
	enum status_kind use = v.kind != STATUS_KIND_ANY ? v.kind : STATUS_KIND_JOB;
	status_job_free(&v);
	char sel[JOBS_SELECTOR_MAX];
	if (selector_of(use, job, sel, sizeof(sel), err) < 0)
		return -1;
	struct follow f = { .k = k, .ns = ns, .job = job, .kind = use, .pods = json_object(),
			    .cb = cb, .ud = ud, .err = err };
	if (!f.pods)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	/* Its lists are paged as status_read's are. */
	struct k8s_watch_opts wo = { .page_limit = K8S_LIST_PAGE };
	int ret = k8s_watch_pods_opt(k, ns, sel, NULL, NULL, &wo, on_event, &f, err);
	if (ret < 0 && !err->msg[0])
		np_error_set(err, NP_EK8S, 0, "watching the pods of %s failed", job);
	if (ret < 0)
		api_error(err);
	json_decref(f.pods);
	json_decref(f.events);
	free(f.last);
	return ret;
}
