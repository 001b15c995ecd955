/* lib/k8s against the project's test API server (tools/kubeapi).
 *
 * tests/integration/test_k8s_client.py starts the server and runs this binary
 * with NICPICK_TEST_API, NICPICK_TEST_CA, NICPICK_TEST_TOKEN_FILE,
 * NICPICK_TEST_ADMIN_TOKEN_FILE, NICPICK_TEST_NS and (optionally)
 * NICPICK_TEST_CASE, a cmocka filter naming one test.  Faults, RBAC and
 * tokens are set through the server's /_admin endpoint from here, so each
 * test is self-contained.  Run without that environment, it skips and says
 * why.  It lives apart from tests/unit because it needs the server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "k8s/k8s.h"
/* The client's internals, for the watch buffer's limit (curl called
 * directly here: the admin endpoint is not the API under test). */
#define K8S_CURL_DIRECT
#include "k8s/k8s_priv.h"

static struct {
	const char *api, *ca, *token_file, *ns;
	char admin_token[256];
	char tmp[64];
} E;

/* ---- the admin endpoint (plain libcurl; not part of the API under test) */

static size_t sink(char *p, size_t size, size_t nmemb, void *ud)
{
	FILE *f = ud;
	return fwrite(p, size, nmemb, f);
}

static json_t *admin(const char *method, const char *op, json_t *payload)
{
	char url[512], auth[320];
	snprintf(url, sizeof(url), "%s/_admin/%s", E.api, op);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", E.admin_token);
	char *body = payload ? json_dumps(payload, JSON_COMPACT) : NULL;
	json_decref(payload);
	char *resp = NULL;
	size_t resp_len = 0;
	FILE *mem = open_memstream(&resp, &resp_len);
	CURL *e = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, auth);
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CAINFO, E.ca);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 20L);
	if (body)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, mem);
	CURLcode cc = curl_easy_perform(e);
	long code = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	fclose(mem);
	free(body);
	if (cc != CURLE_OK || code != 200)
		fail_msg("admin %s %s: curl %d, HTTP %ld: %s", method, op, cc, code, resp);
	json_t *out = json_loads(resp, 0, NULL);
	free(resp);
	assert_non_null(out);
	return out;
}

static void admin_do(const char *method, const char *op, json_t *payload)
{
	json_decref(admin(method, op, payload));
}

static void set_faults(json_t *faults)
{
	admin_do("POST", "faults", json_pack("{s:o, s:b}", "faults", faults, "replace", 1));
}

static void seed_pod(const char *name, const char *app, const char *role)
{
	json_t *pod = json_pack("{s:{s:s, s:s, s:{s:s, s:s}}, s:{s:[{s:s, s:s}], s:s}}",
				"metadata", "name", name, "namespace", E.ns, "labels", "app", app,
				"role", role, "spec", "containers", "name", "main", "image",
				"busybox", "nodeName", "node-1");
	admin_do("POST", "seed", json_pack("{s:[o]}", "pods", pod));
}

/* A change made by "someone else" (not through the client under test). */
static void admin_patch_pod(const char *name, const char *key, const char *value)
{
	admin_do("POST", "objects",
		 json_pack("{s:s, s:s, s:s, s:s, s:{s:{s:{s:s}}}}", "op", "patch", "resource",
			   "pods", "namespace", E.ns, "name", name, "patch", "metadata",
			   "annotations", key, value));
}

static int reset_server(void **state)
{
	admin_do("DELETE", "faults", NULL);
	admin_do("POST", "rbac", json_pack("{s:[], s:n}", "deny", "allow"));
	admin_do("POST", "config", json_pack("{s:f, s:b}", "bookmark_interval", 1.0, "http2", 1));
	return 0;
}

static struct k8s_client *client(double timeout, const char *token_file)
{
	struct k8s_config_overrides ov = { .api_server = E.api, .ca_file = E.ca,
					   .token_file = token_file ? token_file : E.token_file,
					   .namespace = E.ns, .pod_name = "live-a",
					   .sa_dir = "/nonexistent" };
	struct k8s_config cfg;
	np_error err = { 0 };
	if (k8s_config_load(&cfg, &ov, &err) < 0)
		fail_msg("config: %s", err.msg);
	struct k8s_client *c = NULL;
	if (k8s_client_new(&c, &cfg, &err) < 0)
		fail_msg("client: %s", err.msg);
	k8s_config_free(&cfg);
	k8s_client_set_timeout(c, timeout);
	return c;
}

static const char *anno(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(
		json_object_get(json_object_get(obj, "metadata"), "annotations"), key));
}

static const char *meta(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

/* ---- get / patch / list / job / event */

static void test_get_patch_list_with_selectors(void **state)
{
	seed_pod("sel-a", "sel", "worker");
	seed_pod("sel-b", "sel", "master");
	seed_pod("sel-c", "other", "worker");
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	json_t *pod = NULL;
	assert_int_equal(k8s_get_pod(c, E.ns, "sel-a", &pod, &err), 0);
	assert_string_equal(meta(pod, "name"), "sel-a");
	json_decref(pod);

	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "nicpick.io/report",
				  "{\"ifaces\":[\"eth0\"]}");
	assert_int_equal(k8s_patch_pod(c, E.ns, "sel-a", patch, &pod, &err), 0);
	assert_string_equal(anno(pod, "nicpick.io/report"), "{\"ifaces\":[\"eth0\"]}");
	json_decref(pod);
	json_decref(patch);
	assert_int_equal(k8s_get_pod(c, E.ns, "sel-a", &pod, &err), 0);
	assert_string_equal(anno(pod, "nicpick.io/report"), "{\"ifaces\":[\"eth0\"]}");
	assert_string_equal(meta(pod, "name"), "sel-a");
	json_decref(pod);

	static const struct {
		const char *lsel, *fsel;
		size_t n;
	} cases[] = {
		{ "app=sel", NULL, 2 },
		{ "app=sel,role=worker", NULL, 1 },
		{ "app in (sel, other),role!=master", NULL, 2 },
		{ "app=sel", "metadata.name=sel-b", 1 },
		{ "app=nothing", NULL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *list = NULL;
		assert_int_equal(k8s_list_pods(c, E.ns, cases[i].lsel, cases[i].fsel, &list, &err),
				 0);
		assert_int_equal(json_array_size(json_object_get(list, "items")), cases[i].n);
		assert_non_null(meta(list, "resourceVersion"));
		json_decref(list);
	}
	/* a missing pod is an error with the Status text */
	assert_int_equal(k8s_get_pod(c, E.ns, "no-such-pod", &pod, &err), -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "HTTP 404 NotFound: pods \"no-such-pod\" not found"));

	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_int_equal(st.requests, 9);
	assert_int_equal(st.retries, 0);
	assert_int_equal(st.connects, 1); /* one keep-alive connection for all */
	assert_true(st.bytes_sent > 9 * 100 && st.bytes_received > st.bytes_sent);
	k8s_client_free(c);
}

static void test_get_job_completions(void **state)
{
	json_t *job = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i, s:i}}", "apiVersion", "batch/v1",
				"kind", "Job", "metadata", "name", "train", "namespace", E.ns,
				"spec", "completions", 4, "parallelism", 4);
	admin_do("POST", "seed", json_pack("{s:[o]}", "objects", job));
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	json_t *got = NULL;
	assert_int_equal(k8s_get_job(c, E.ns, "train", &got, &err), 0);
	assert_int_equal(k8s_job_completions(got), 4);
	json_decref(got);
	k8s_client_free(c);
}

static void test_create_event_on_pod(void **state)
{
	seed_pod("ev-a", "ev", "worker");
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	json_t *pod = NULL;
	assert_int_equal(k8s_get_pod(c, E.ns, "ev-a", &pod, &err), 0);
	if (k8s_create_event(c, E.ns, pod, "NetworkChosen", "NCCL_SOCKET_IFNAME==eth1",
			     "Normal", &err) < 0)
		fail_msg("%s", err.msg);
	json_t *list = NULL;
	char path[256];
	snprintf(path, sizeof(path),
		 "/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name%%3Dev-a", E.ns);
	if (k8s_get(c, path, &list, &err) < 0)
		fail_msg("%s", err.msg);
	json_t *items = json_object_get(list, "items");
	assert_int_equal(json_array_size(items), 1);
	json_t *ev = json_array_get(items, 0);
	assert_string_equal(json_string_value(json_object_get(ev, "reason")), "NetworkChosen");
	assert_string_equal(json_string_value(json_object_get(ev, "type")), "Normal");
	json_t *inv = json_object_get(ev, "involvedObject");
	assert_string_equal(json_string_value(json_object_get(inv, "uid")), meta(pod, "uid"));
	assert_string_equal(json_string_value(json_object_get(ev, "reportingInstance")), "live-a");
	json_decref(list);
	json_decref(pod);
	k8s_client_free(c);
}

/* ---- watch */

struct wctx {
	int relists, modified, bookmarks, errors;
	char rv0[32];
	char bm_rv[32];
	int step;
	char seen[8][32]; /* annotation "step" values in MODIFIED order */
	int nseen;
	struct k8s_client *other;
	const char *patch_name; /* cb_modified: the pod to patch */
	size_t expect_items;
};

static void record_step(struct wctx *w, json_t *obj)
{
	const char *s = anno(obj, "step");
	if (s && w->nseen < 8)
		snprintf(w->seen[w->nseen++], sizeof(w->seen[0]), "%s", s);
}

/* RELIST → the test itself patches a pod through a second client. */
static int cb_modified(enum k8s_watch_type t, json_t *obj, void *ud)
{
	struct wctx *w = ud;
	if (t == K8S_WATCH_RELIST) {
		w->relists++;
		assert_int_equal(json_array_size(json_object_get(obj, "items")), w->expect_items);
		json_t *p = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "step", "1");
		np_error err = { 0 };
		int rc = k8s_patch_pod(w->other, E.ns, w->patch_name, p, NULL, &err);
		json_decref(p);
		if (rc < 0)
			fail_msg("%s", err.msg);
		return 0;
	}
	if (t == K8S_WATCH_MODIFIED) {
		w->modified++;
		assert_string_equal(meta(obj, "name"), w->patch_name);
		record_step(w, obj);
		return 1;
	}
	return 0;
}

static void test_watch_sees_modified_after_patch(void **state)
{
	seed_pod("w-a", "w", "worker");
	seed_pod("w-b", "w", "worker");
	seed_pod("w-c", "not-w", "worker");
	struct wctx w = { .other = client(10, NULL), .patch_name = "w-a", .expect_items = 2 };
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	if (k8s_watch_pods(c, E.ns, "app=w", NULL, NULL, cb_modified, &w, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(w.relists, 1);
	assert_int_equal(w.modified, 1);
	assert_string_equal(w.seen[0], "1");
	k8s_client_free(c);
	k8s_client_free(w.other);
}

/* Bookmarks advance the resourceVersion: a change outside the selector moves
 * the server's RV, a BOOKMARK carries it, and the reconnect resumes there. */
static int cb_bookmarks(enum k8s_watch_type t, json_t *obj, void *ud)
{
	struct wctx *w = ud;
	if (t == K8S_WATCH_RELIST) {
		w->relists++;
		snprintf(w->rv0, sizeof(w->rv0), "%s", meta(obj, "resourceVersion"));
		admin_patch_pod("bm-other", "touched", "yes");
		return 0;
	}
	if (t == K8S_WATCH_BOOKMARK) {
		const char *rv = meta(obj, "resourceVersion");
		assert_non_null(rv);
		if (strtoull(rv, NULL, 10) > strtoull(w->rv0, NULL, 10)) {
			snprintf(w->bm_rv, sizeof(w->bm_rv), "%s", rv);
			w->bookmarks++;
		}
		return w->bookmarks >= 2;
	}
	w->errors++;
	return 0;
}

static void test_watch_bookmarks_advance_resource_version(void **state)
{
	seed_pod("bm-a", "bm", "worker");
	seed_pod("bm-other", "bm-other", "worker");
	admin_do("POST", "config", json_pack("{s:f}", "bookmark_interval", 0.2));
	/* the first watch connection is cut after one event: the client must
	 * come back from the bookmark's resourceVersion, not the list's */
	set_faults(json_pack("[{s:s, s:i, s:i, s:s}]", "kind", "drop_watch", "after_events", 1,
			     "count", 1, "namespace", E.ns));
	admin_do("DELETE", "requests", NULL);
	struct wctx w = { 0 };
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	if (k8s_watch_pods(c, E.ns, "app=bm", NULL, NULL, cb_bookmarks, &w, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(w.relists, 1);
	assert_int_equal(w.errors, 0);
	assert_int_equal(w.bookmarks, 2);

	json_t *log = admin("GET", "requests", NULL);
	int watches = 0;
	char want0[64], want1[64];
	snprintf(want0, sizeof(want0), "resourceVersion=%s&", w.rv0);
	snprintf(want1, sizeof(want1), "resourceVersion=%llu&",
		 strtoull(w.rv0, NULL, 10) + 1);
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(log, "requests"), i, r)
	{
		const char *verb = json_string_value(json_object_get(r, "verb"));
		const char *q = json_string_value(json_object_get(r, "query"));
		if (!verb || strcmp(verb, "watch"))
			continue;
		assert_non_null(strstr(q, "allowWatchBookmarks=true"));
		if (watches == 0)
			assert_non_null(strstr(q, want0));
		else if (watches == 1)
			assert_non_null(strstr(q, want1)); /* from the bookmark */
		watches++;
	}
	assert_int_equal(watches, 2);
	json_decref(log);
	k8s_client_free(c);
}

/* The connection drops in the middle of an event: nothing may be lost. */
static int cb_drop(enum k8s_watch_type t, json_t *obj, void *ud)
{
	struct wctx *w = ud;
	if (t == K8S_WATCH_RELIST) {
		w->relists++;
		admin_patch_pod("dr-a", "step", "1");
		return 0;
	}
	if (t == K8S_WATCH_MODIFIED) {
		w->modified++;
		record_step(w, obj);
		if (!strcmp(anno(obj, "step"), "1")) {
			/* the server cuts the stream halfway through this one */
			admin_patch_pod("dr-a", "step", "2");
			return 0;
		}
		return 1;
	}
	return 0;
}

static void test_watch_dropped_resumes_without_losing_events(void **state)
{
	seed_pod("dr-a", "dr", "worker");
	set_faults(json_pack("[{s:s, s:i, s:b, s:i, s:s}]", "kind", "drop_watch", "after_events",
			     1, "partial", 1, "count", 1, "namespace", E.ns));
	/* short bookmarks: kubeapi.py holds back the backlog until the first wake */
	admin_do("POST", "config", json_pack("{s:f}", "bookmark_interval", 0.2));
	struct wctx w = { 0 };
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	if (k8s_watch_pods(c, E.ns, "app=dr", NULL, NULL, cb_drop, &w, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(w.relists, 1); /* resumed, not re-listed */
	assert_int_equal(w.nseen, 2);
	assert_string_equal(w.seen[0], "1");
	assert_string_equal(w.seen[1], "2");
	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_true(st.retries >= 1);
	k8s_client_free(c);
}

/* 410: re-list (RELIST replaces the consumer's view), then carry on. */
static int cb_expired(enum k8s_watch_type t, json_t *obj, void *ud)
{
	struct wctx *w = ud;
	if (t == K8S_WATCH_RELIST) {
		w->relists++;
		assert_int_equal(json_array_size(json_object_get(obj, "items")), 1);
		admin_patch_pod("ex-a", "step", "after-relist");
		return 0;
	}
	if (t == K8S_WATCH_MODIFIED) {
		record_step(w, obj);
		return 1;
	}
	return 0;
}

static void test_watch_410_relists_and_continues(void **state)
{
	seed_pod("ex-a", "ex", "worker");
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	json_t *list = NULL;
	assert_int_equal(k8s_list_pods(c, E.ns, "app=ex", NULL, &list, &err), 0);
	char rv[32];
	snprintf(rv, sizeof(rv), "%s", meta(list, "resourceVersion"));
	json_decref(list);
	set_faults(json_pack("[{s:s, s:i}]", "kind", "expire_watch", "count", 1));
	struct wctx w = { 0 };
	if (k8s_watch_pods(c, E.ns, "app=ex", NULL, rv, cb_expired, &w, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(w.relists, 1); /* only because of the 410 */
	assert_int_equal(w.nseen, 1);
	assert_string_equal(w.seen[0], "after-relist");
	k8s_client_free(c);
}

/* ---- twins (k8s_client_new_twin): a watch's callback writes through the
 * watch's twin; the events its own writes cause keep arriving on the watch
 * meanwhile, and both go over one connection when the server speaks h2
 * (two over HTTP/1.1). */
struct twinctx {
	struct k8s_client *twin;
	int patches, ticks, tick_patches;
	char seen[8][32];
	int nseen;
	const char *stop_at; /* the "step" value that ends the watch */
	np_error err;
};

static int twin_patch(struct twinctx *t, const char *pod, const char *step)
{
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "step", step);
	int r = k8s_patch_pod(t->twin, E.ns, pod, patch, NULL, &t->err);
	json_decref(patch);
	return r;
}

static int cb_twin(enum k8s_watch_type type, json_t *obj, void *ud)
{
	struct twinctx *t = ud;
	if (type == K8S_WATCH_RELIST) {
		if (twin_patch(t, "tw-a", "1") < 0)
			return -1;
		t->patches++;
		return 0;
	}
	if (type != K8S_WATCH_MODIFIED)
		return 0;
	const char *s = anno(obj, "step");
	if (s && t->nseen < 8)
		snprintf(t->seen[t->nseen++], sizeof(t->seen[0]), "%s", s);
	if (s && !strcmp(s, "1")) {
		/* Four writes from inside the callback of an open watch, each a
		 * request on the twin while the watch's stream is received. */
		for (int i = 2; i <= 5; i++) {
			char step[8];
			snprintf(step, sizeof(step), "%d", i);
			if (twin_patch(t, "tw-a", step) < 0)
				return -1;
			t->patches++;
		}
	}
	return s && !strcmp(s, t->stop_at);
}

static void twin_tick(void *ud)
{
	struct twinctx *t = ud;
	/* A tick's request drives the watch's multi too (the gatherer
	 * publishes its progress from its tick). */
	t->ticks++;
	if (t->tick_patches < 1 && twin_patch(t, "tw-a", "tick") == 0)
		t->tick_patches++;
}

/* buf_max: the watch buffer's limit (0: the default).  Returns how often
 * the watch was paused. */
static uint64_t twins_run(long want_connects, size_t buf_max)
{
	seed_pod("tw-a", "tw", "worker");
	struct k8s_client *c = client(20, NULL);
	struct twinctx t = { .stop_at = "tick" };
	np_error err = { 0 };
	struct k8s_limiter *lim = NULL;
	if (k8s_limiter_new(&lim, 5, 10, &err) < 0)
		fail_msg("%s", err.msg);
	k8s_client_set_limiter(c, lim);
	if (k8s_client_new_twin(&t.twin, c, &err) < 0)
		fail_msg("twin: %s", err.msg);
	k8s_client_set_tick(c, 300, twin_tick, &t);
	c->watch_buf_max = buf_max;
	if (k8s_watch_pods(c, E.ns, "app=tw", NULL, NULL, cb_twin, &t, &err) != 0)
		fail_msg("%s (%s)", err.msg, t.err.msg);
	assert_int_equal(t.patches, 5);
	assert_int_equal(t.tick_patches, 1);
	/* every event of the callback's own writes, in order, then the tick's */
	assert_int_equal(t.nseen, 6);
	for (int i = 0; i < 5; i++) {
		char step[8];
		snprintf(step, sizeof(step), "%d", i + 1);
		assert_string_equal(t.seen[i], step);
	}
	assert_string_equal(t.seen[5], "tick");
	struct k8s_stats a, b;
	k8s_client_stats(c, &a);
	k8s_client_stats(t.twin, &b);
	assert_int_equal(a.watches, 1);
	assert_int_equal(b.requests, 6);
	assert_int_equal(a.connects + b.connects, want_connects);
	uint64_t before = b.connects, pauses = c->watch_pauses;
	k8s_client_free(c); /* either twin may go first: the other keeps the pool */
	json_t *pod = NULL;
	if (k8s_get_pod(t.twin, E.ns, "tw-a", &pod, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(anno(pod, "step"), "tick");
	json_decref(pod);
	k8s_client_stats(t.twin, &b);
	assert_int_equal(b.connects, before); /* a connection of the pool, still open */
	k8s_client_free(t.twin);
	k8s_limiter_free(lim);
	return pauses;
}

static void test_twins_share_one_h2_connection_with_a_watch_that_writes(void **state)
{
	/* A buffer of 256 bytes: the events the callback's writes cause do
	 * not fit while it runs.  An h2 stream is paused only with libcurl
	 * 8.14.0 or later (k8s_curl_h2_pause_ok); the system libcurl of the
	 * dynamic build (7.88) keeps taking them instead, which does not
	 * hold up the twin's requests on the same connection. */
	uint64_t pauses = twins_run(1, 256);
	if (!k8s_curl_h2_pause_ok())
		assert_int_equal(pauses, 0);
}

static void test_twins_over_http1_keep_a_connection_each(void **state)
{
	/* HTTP/1.1: the watch has a connection of its own, which is paused
	 * (not read) while its buffer is full, and resumed once drained;
	 * nothing is lost or reordered. */
	admin_do("POST", "config", json_pack("{s:b}", "http2", 0));
	uint64_t pauses = twins_run(2, 256);
	assert_true(pauses >= 1);
}

static void test_watch_retries_5xx(void **state)
{
	seed_pod("w5-a", "w5", "worker");
	seed_pod("w5-b", "w5", "worker");
	set_faults(json_pack("[{s:s, s:i, s:s, s:i}]", "kind", "error", "code", 503, "verb",
			     "watch", "count", 2));
	seed_pod("w5-c", "w5", "master");
	struct wctx w = { .other = client(10, NULL), .patch_name = "w5-a", .expect_items = 1 };
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	if (k8s_watch_pods(c, E.ns, "app=w5,role=worker", "metadata.name!=w5-b", NULL,
			   cb_modified, &w, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(w.modified, 1);
	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_int_equal(st.retries, 2);
	k8s_client_free(c);
	k8s_client_free(w.other);
}

static int cb_never(enum k8s_watch_type t, json_t *obj, void *ud)
{
	return 0;
}

/* Side work beside a watch (k8s_watch_opts.side): it waits on a pipe and a
 * time, never inside the callback.  When its time is due it changes a pod;
 * the callback, seeing that event, writes to the pipe; the side, woken by
 * the pipe, stops the watch.  With fail_first, the first watch connection
 * fails, and the side's time falls in the wait before the next one. */
struct sidectx {
	const char *pod;
	int pipe[2];
	int64_t due;
	bool patched, seen, in_cb;
	unsigned calls, reentered;
};

static int cb_side(enum k8s_watch_type t, json_t *obj, void *ud)
{
	struct sidectx *s = ud;
	const char *step = anno(obj, "step");
	if (t == K8S_WATCH_MODIFIED && step && !strcmp(step, "side") && !s->seen) {
		s->seen = true;
		s->in_cb = true;
		assert_int_equal(write(s->pipe[1], "x", 1), 1);
		s->in_cb = false;
	}
	return 0;
}

static int side_work(void *ud, struct np_wait *w)
{
	struct sidectx *s = ud;
	s->calls++;
	s->reentered += s->in_cb;
	char b;
	if (read(s->pipe[0], &b, 1) == 1)
		return 1;
	if (!s->patched && k8s_mono_ms() >= s->due) {
		admin_patch_pod(s->pod, "step", "side");
		s->patched = true;
	}
	*w = (struct np_wait){ .fd = s->pipe[0], .events = POLLIN, .until_ms = s->patched ? 0 : s->due };
	return 0;
}

static void side_run(const char *app, int fail_first)
{
	char pod[32];
	snprintf(pod, sizeof(pod), "%s-a", app);
	seed_pod(pod, app, "worker");
	if (fail_first)
		set_faults(json_pack("[{s:s, s:i, s:s, s:i}]", "kind", "error", "code", 503, "verb", "watch",
				     "count", 1));
	admin_do("POST", "config", json_pack("{s:f}", "bookmark_interval", 0.2));
	struct sidectx s = { .pod = pod, .due = k8s_mono_ms() + 300 };
	assert_int_equal(pipe2(s.pipe, O_NONBLOCK | O_CLOEXEC), 0);
	struct k8s_client *c = client(10, NULL);
	struct k8s_watch_opts o = { .side = side_work };
	np_error err = { 0 };
	int64_t t0 = k8s_mono_ms();
	char sel[32];
	snprintf(sel, sizeof(sel), "app=%s", app);
	if (k8s_watch_pods_opt(c, E.ns, sel, NULL, NULL, &o, cb_side, &s, &err) != 0)
		fail_msg("%s", err.msg);
	int64_t took = k8s_mono_ms() - t0;
	assert_true(s.patched && s.seen);
	assert_int_equal(s.reentered, 0);
	/* it waited for its pipe and its time, not in a loop */
	assert_true(s.calls < 100);
	assert_true(took < 3000);
	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_int_equal(st.watches, fail_first ? 2 : 1);
	k8s_client_free(c);
	close(s.pipe[0]);
	close(s.pipe[1]);
}

static void test_watch_side_work_runs_beside_the_stream(void **state)
{
	side_run("sd", 0);
}

static void test_watch_side_work_runs_while_the_watch_waits_to_reconnect(void **state)
{
	side_run("sw", 1);
}

static void test_watch_stops_at_deadline(void **state)
{
	seed_pod("dl-a", "dl", "worker");
	struct k8s_client *c = client(1.5, NULL);
	np_error err = { 0 };
	int64_t t0 = k8s_mono_ms();
	assert_int_equal(k8s_watch_pods(c, E.ns, "app=dl", NULL, NULL, cb_never, NULL, &err), -1);
	int64_t el = k8s_mono_ms() - t0;
	assert_true(el >= 1400 && el < 2500);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "deadline exceeded while watching"));
	k8s_client_free(c);
}

/* ---- retries, errors, tokens, deadline */

static void test_500_three_times_then_success(void **state)
{
	seed_pod("r5-a", "r5", "worker");
	set_faults(json_pack("[{s:s, s:i, s:s, s:i}]", "kind", "error", "code", 500, "name",
			     "r5-a", "count", 3));
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	json_t *pod = NULL;
	if (k8s_get_pod(c, E.ns, "r5-a", &pod, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(pod);
	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_int_equal(st.requests, 4);
	assert_int_equal(st.retries, 3);
	assert_int_equal(st.connects, 1); /* a Status error keeps the connection */
	k8s_client_free(c);
}

static void test_connection_reset_is_retried(void **state)
{
	seed_pod("rs-a", "rs", "worker");
	set_faults(json_pack("[{s:s, s:s, s:i}]", "kind", "reset", "name", "rs-a", "count", 2));
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	json_t *pod = NULL;
	if (k8s_get_pod(c, E.ns, "rs-a", &pod, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(pod);
	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_int_equal(st.retries, 2);
	k8s_client_free(c);
}

static void test_429_honours_retry_after(void **state)
{
	seed_pod("ra-a", "ra", "worker");
	set_faults(json_pack("[{s:s, s:i, s:i, s:s, s:i}]", "kind", "error", "code", 429,
			     "retry_after", 2, "name", "ra-a", "count", 1));
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	json_t *pod = NULL;
	int64_t t0 = k8s_mono_ms();
	if (k8s_get_pod(c, E.ns, "ra-a", &pod, &err) < 0)
		fail_msg("%s", err.msg);
	int64_t el = k8s_mono_ms() - t0;
	json_decref(pod);
	assert_true(el >= 2000);
	assert_true(el < 4000);
	k8s_client_free(c);

	/* a Retry-After beyond the deadline fails at the deadline, saying so */
	set_faults(json_pack("[{s:s, s:i, s:i, s:s, s:i}]", "kind", "error", "code", 429,
			     "retry_after", 30, "name", "ra-a", "count", 1));
	c = client(3, NULL);
	t0 = k8s_mono_ms();
	assert_int_equal(k8s_get_pod(c, E.ns, "ra-a", &pod, &err), -1);
	el = k8s_mono_ms() - t0;
	assert_true(el >= 2900 && el < 3500);
	assert_non_null(strstr(err.msg, "deadline exceeded while waiting 30000 ms to retry"));
	assert_non_null(strstr(err.msg, "TooManyRequests"));
	k8s_client_free(c);
}

static void test_403_names_the_missing_rule(void **state)
{
	seed_pod("rb-a", "rb", "worker");
	admin_do("POST", "rbac",
		 json_pack("{s:[{s:[s], s:[s]}], s:n}", "deny", "verbs", "patch", "resources",
			   "pods", "allow"));
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "a", "b");
	assert_int_equal(k8s_patch_pod(c, E.ns, "rb-a", patch, NULL, &err), -1);
	json_decref(patch);
	assert_int_equal(err.status, NP_EK8S);
	char want[256];
	snprintf(want, sizeof(want),
		 "forbidden: the Role needs \"patch\" on \"pods\" in namespace \"%s\" (pods "
		 "\"rb-a\" is forbidden: User \"",
		 E.ns);
	if (strncmp(err.msg, want, strlen(want)))
		fail_msg("got: %s", err.msg);
	assert_non_null(strstr(err.msg, "cannot patch resource \"pods\""));
	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_int_equal(st.requests, 1); /* 403 is not retried */
	k8s_client_free(c);
}

static void write_token(const char *path, const char *tok)
{
	char tmp[160];
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	FILE *f = fopen(tmp, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", tok);
	fclose(f);
	assert_int_equal(rename(tmp, path), 0); /* as the kubelet swaps it */
}

static void test_wrong_token_is_401_with_file_name(void **state)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/wrong-token", E.tmp);
	write_token(path, "not-a-valid-token");
	struct k8s_client *c = client(10, path);
	np_error err = { 0 };
	json_t *pod = NULL;
	assert_int_equal(k8s_get(c, "/api/v1/namespaces/default/pods", &pod, &err), -1);
	assert_int_equal(err.status, NP_EK8S);
	char want[256];
	snprintf(want, sizeof(want), "unauthorized: the API server rejected the token from %s",
		 path);
	if (strncmp(err.msg, want, strlen(want)))
		fail_msg("got: %s", err.msg);
	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_int_equal(st.requests, 2); /* one re-read and retry */
	k8s_client_free(c);
}

static void set_tokens(const char *add, const char *remove)
{
	admin_do("POST", "tokens",
		 json_pack("{s:{s:s}, s:[s]}", "tokens", add, "system:serviceaccount:t:rot",
			   "remove", remove));
}

static void test_rotated_token_file_is_used(void **state)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/rot-token", E.tmp);
	set_tokens("rot-token-AAAA", "none");
	write_token(path, "rot-token-AAAA");
	struct k8s_client *c = client(10, path);
	np_error err = { 0 };
	json_t *out = NULL;
	const char *p = "/api/v1/namespaces/default/pods";
	assert_int_equal(k8s_get(c, p, &out, &err), 0);
	json_decref(out);

	/* rotation: new file on disk, the old token revoked */
	write_token(path, "rot-token-BBBB");
	set_tokens("rot-token-BBBB", "rot-token-AAAA");
	if (k8s_get(c, p, &out, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(out);
	struct k8s_stats st;
	k8s_client_stats(c, &st);
	assert_int_equal(st.requests, 2); /* noticed from the file, no 401 */

	/* rewritten in place with mtime restored: only the 401 can tell */
	struct stat before;
	assert_int_equal(stat(path, &before), 0);
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "rot-token-CCCC\n", 15, 0), 15);
	struct timespec ts[2] = { before.st_atim, before.st_mtim };
	assert_int_equal(futimens(fd, ts), 0);
	close(fd);
	set_tokens("rot-token-CCCC", "rot-token-BBBB");
	if (k8s_get(c, p, &out, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(out);
	k8s_client_stats(c, &st);
	assert_int_equal(st.requests, 4); /* 401, re-read, success */
	k8s_client_free(c);
}

static void test_deadline_beats_slow_server(void **state)
{
	seed_pod("sl-a", "sl", "worker");
	set_faults(json_pack("[{s:s, s:i, s:s, s:i}]", "kind", "delay", "ms", 10000, "name",
			     "sl-a", "count", 1));
	struct k8s_client *c = client(1, NULL);
	np_error err = { 0 };
	json_t *pod = NULL;
	int64_t t0 = k8s_mono_ms();
	assert_int_equal(k8s_get_pod(c, E.ns, "sl-a", &pod, &err), -1);
	int64_t el = k8s_mono_ms() - t0;
	printf("deadline 1 s, slow server: failed after %lld ms: %s\n", (long long)el, err.msg);
	assert_true(el >= 900 && el < 1500);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "deadline exceeded while GET"));
	k8s_client_free(c);
}

static void test_tls_is_verified(void **state)
{
	/* a CA that did not sign the server: must fail, not fall back */
	char ca[128];
	snprintf(ca, sizeof(ca), "%s/other-ca.crt", E.tmp);
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/other.key -out %s "
		 "-days 1 -subj /CN=other >/dev/null 2>&1",
		 E.tmp, ca);
	assert_int_equal(system(cmd), 0);
	struct k8s_config_overrides ov = { .api_server = E.api, .ca_file = ca,
					   .token_file = E.token_file, .namespace = E.ns };
	struct k8s_config cfg;
	np_error err = { 0 };
	assert_int_equal(k8s_config_load(&cfg, &ov, &err), 0);
	struct k8s_client *c = NULL;
	assert_int_equal(k8s_client_new(&c, &cfg, &err), 0);
	k8s_client_set_timeout(c, 5);
	json_t *out = NULL;
	assert_int_equal(k8s_get(c, "/api/v1/namespaces/default/pods", &out, &err), -1);
	assert_non_null(strstr(err.msg, "certificate"));
	k8s_client_free(c);
	k8s_config_free(&cfg);
}

/* ---- paged lists (limit/continue), as client-go's pager reads them ---- */

struct pages {
	int pages, restarts, items;
	char names[16][32];
	bool compact_after_first;
};

static int on_page(json_t *list, void *ud)
{
	struct pages *p = ud;
	json_t *it;
	size_t i;
	p->pages++;
	json_array_foreach(json_object_get(list, "items"), i, it) {
		if (p->items < 16)
			snprintf(p->names[p->items], sizeof(p->names[0]), "%s", meta(it, "name"));
		p->items++;
	}
	if (p->compact_after_first && p->pages == 1) {
		/* Others write, then the history is compacted: the first page's
		 * snapshot is gone and its continue token gets 410. */
		seed_pod("pg-other", "not-pg", "worker");
		admin_do("POST", "compact", json_object());
	}
	return 0;
}

static void on_restart(void *ud)
{
	struct pages *p = ud;
	p->restarts++;
	p->items = 0;
	p->compact_after_first = false;
}

static void test_list_pages_deliver_every_pod_once(void **state)
{
	const char *names[] = { "pg-a", "pg-b", "pg-c", "pg-d", "pg-e", "pg-f", "pg-g" };
	for (size_t i = 0; i < 7; i++)
		seed_pod(names[i], "pg", "worker");
	struct k8s_client *c = client(10, NULL);
	struct pages p = { 0 };
	np_error err = { 0 };
	char *rv = NULL;
	if (k8s_list_pods_paged(c, E.ns, "app=pg", NULL, 3, on_page, on_restart, &p, &rv, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(p.pages, 3); /* 3 + 3 + 1 */
	assert_int_equal(p.items, 7);
	assert_int_equal(p.restarts, 0);
	for (size_t i = 0; i < 7; i++)
		assert_string_equal(p.names[i], names[i]);
	assert_non_null(rv);
	assert_true(rv[0] != '\0');
	free(rv);
	k8s_client_free(c);
}

static void test_list_expired_continue_lists_again_from_the_start(void **state)
{
	const char *names[] = { "pe-a", "pe-b", "pe-c", "pe-d", "pe-e" };
	for (size_t i = 0; i < 5; i++)
		seed_pod(names[i], "pe", "worker");
	struct k8s_client *c = client(10, NULL);
	struct pages p = { .compact_after_first = true };
	np_error err = { 0 };
	char *rv = NULL;
	if (k8s_list_pods_paged(c, E.ns, "app=pe", NULL, 2, on_page, on_restart, &p, &rv, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(p.restarts, 1);
	assert_int_equal(p.items, 5); /* counted again from the first page */
	for (size_t i = 0; i < 5; i++)
		assert_string_equal(p.names[i], names[i]);
	free(rv);
	k8s_client_free(c);
}

/* A metadata-only watch (PartialObjectMetadata through Accept, as
 * client-go's metadata client asks): the list and the events carry the
 * pods' metadata, annotations included, and no spec or status. */
static int cb_meta(enum k8s_watch_type t, json_t *obj, void *ud)
{
	struct wctx *w = ud;
	if (t == K8S_WATCH_RELIST) {
		w->relists++;
		json_t *items = json_object_get(obj, "items");
		assert_int_equal(json_array_size(items), 1);
		json_t *it = json_array_get(items, 0);
		assert_string_equal(meta(it, "name"), "md-a");
		assert_null(json_object_get(it, "spec"));
		assert_null(json_object_get(it, "status"));
		admin_patch_pod("md-a", "step", "1");
		return 0;
	}
	if (t == K8S_WATCH_MODIFIED) {
		assert_string_equal(json_string_value(json_object_get(obj, "kind")), "PartialObjectMetadata");
		assert_null(json_object_get(obj, "spec"));
		record_step(w, obj);
		return 1;
	}
	return 0;
}

static void test_watch_metadata_only_carries_metadata_and_annotations(void **state)
{
	seed_pod("md-a", "md", "worker");
	struct wctx w = { 0 };
	struct k8s_client *c = client(10, NULL);
	np_error err = { 0 };
	struct k8s_watch_opts o = { .metadata_only = true };
	if (k8s_watch_pods_opt(c, E.ns, "app=md", NULL, NULL, &o, cb_meta, &w, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(w.relists, 1);
	assert_int_equal(w.nseen, 1);
	assert_string_equal(w.seen[0], "1");
	k8s_client_free(c);
}

int main(void)
{
	const char *missing = NULL;
	E.api = getenv("NICPICK_TEST_API");
	E.ca = getenv("NICPICK_TEST_CA");
	E.token_file = getenv("NICPICK_TEST_TOKEN_FILE");
	const char *admin_file = getenv("NICPICK_TEST_ADMIN_TOKEN_FILE");
	E.ns = getenv("NICPICK_TEST_NS") ? getenv("NICPICK_TEST_NS") : "nicpick-test";
	if (!E.api)
		missing = "NICPICK_TEST_API";
	else if (!E.ca)
		missing = "NICPICK_TEST_CA";
	else if (!E.token_file)
		missing = "NICPICK_TEST_TOKEN_FILE";
	else if (!admin_file)
		missing = "NICPICK_TEST_ADMIN_TOKEN_FILE";
	if (missing) {
		printf("[  SKIPPED ] k8s_live: %s is unset; these tests need the test API server: "
		       "run them with `%s -m pytest tests/integration/test_k8s_client.py`\n",
		       missing, "/usr/bin/python3");
		return 0;
	}
	FILE *f = fopen(admin_file, "r");
	if (!f || !fgets(E.admin_token, sizeof(E.admin_token), f)) {
		printf("cannot read %s\n", admin_file);
		return 1;
	}
	fclose(f);
	E.admin_token[strcspn(E.admin_token, "\r\n")] = '\0';
	snprintf(E.tmp, sizeof(E.tmp), "/tmp/k8s-live-XXXXXX");
	if (!mkdtemp(E.tmp))
		return 1;
	if (getenv("NICPICK_TEST_CASE"))
		cmocka_set_test_filter(getenv("NICPICK_TEST_CASE"));

	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_get_patch_list_with_selectors, reset_server),
		cmocka_unit_test_setup(test_get_job_completions, reset_server),
		cmocka_unit_test_setup(test_create_event_on_pod, reset_server),
		cmocka_unit_test_setup(test_list_pages_deliver_every_pod_once, reset_server),
		cmocka_unit_test_setup(test_list_expired_continue_lists_again_from_the_start, reset_server),
		cmocka_unit_test_setup(test_watch_sees_modified_after_patch, reset_server),
		cmocka_unit_test_setup(test_watch_metadata_only_carries_metadata_and_annotations, reset_server),
		cmocka_unit_test_setup(test_watch_bookmarks_advance_resource_version, reset_server),
		cmocka_unit_test_setup(test_watch_dropped_resumes_without_losing_events,
				       reset_server),
		cmocka_unit_test_setup(test_watch_410_relists_and_continues, reset_server),
		cmocka_unit_test_setup(test_twins_share_one_h2_connection_with_a_watch_that_writes,
				       reset_server),
		cmocka_unit_test_setup(test_twins_over_http1_keep_a_connection_each, reset_server),
		cmocka_unit_test_setup(test_watch_retries_5xx, reset_server),
		cmocka_unit_test_setup(test_watch_stops_at_deadline, reset_server),
		cmocka_unit_test_setup(test_watch_side_work_runs_beside_the_stream, reset_server),
		cmocka_unit_test_setup(test_watch_side_work_runs_while_the_watch_waits_to_reconnect,
				       reset_server),
		cmocka_unit_test_setup(test_500_three_times_then_success, reset_server),
		cmocka_unit_test_setup(test_connection_reset_is_retried, reset_server),
		cmocka_unit_test_setup(test_429_honours_retry_after, reset_server),
		cmocka_unit_test_setup(test_403_names_the_missing_rule, reset_server),
		cmocka_unit_test_setup(test_wrong_token_is_401_with_file_name, reset_server),
		cmocka_unit_test_setup(test_rotated_token_file_is_used, reset_server),
		cmocka_unit_test_setup(test_deadline_beats_slow_server, reset_server),
		cmocka_unit_test_setup(test_tls_is_verified, reset_server),
	};
	int rc = cmocka_run_group_tests_name("k8s_live", tests, NULL, reset_server);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", E.tmp);
	if (system(cmd) != 0)
		rc = rc ? rc : 1;
	return rc;
}
