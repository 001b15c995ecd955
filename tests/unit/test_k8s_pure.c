/* lib/k8s without a network: config, paths, retry timing, error text, the
 * watch line splitter, the Event body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "k8s/k8s_priv.h"

static char tmpdir[64];

static void write_file(const char *dir, const char *name, const char *content)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

static int setup_sa(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/k8s-unit-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	write_file(tmpdir, "token", "tok-1\n");
	write_file(tmpdir, "ca.crt", "not really a cert\n");
	write_file(tmpdir, "namespace", "  team-a\n");
	unsetenv("POD_NAME");
	unsetenv("POD_NAMESPACE");
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	return 0;
}

static int teardown_sa(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_server_url_brackets_ipv6(void **state)
{
	char *u = k8s_server_url("10.96.0.1", "443");
	assert_string_equal(u, "https://10.96.0.1:443");
	free(u);
	u = k8s_server_url("fd00::1", "6443");
	assert_string_equal(u, "https://[fd00::1]:6443");
	free(u);
	u = k8s_server_url("[fd00::1]", "");
	assert_string_equal(u, "https://[fd00::1]:443");
	free(u);
	assert_null(k8s_server_url("", "443"));
}

static void test_config_in_cluster_ipv6(void **state)
{
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	setenv("POD_NAME", "job-w-0", 1);
	struct k8s_config_overrides ov = { .sa_dir = tmpdir };
	struct k8s_config cfg;
	np_error err = { 0 };
	assert_int_equal(k8s_config_load(&cfg, &ov, &err), 0);
	assert_string_equal(cfg.server, "https://[fd00:10:96::1]:443");
	assert_string_equal(cfg.namespace, "team-a"); /* trimmed, from the file */
	assert_string_equal(cfg.pod_name, "job-w-0");
	assert_non_null(strstr(cfg.token_file, "/token"));
	assert_non_null(strstr(cfg.ca_file, "/ca.crt"));
	assert_false(cfg.insecure_skip_tls_verify);
	/* the pod's own token: P-256's key share, no post-quantum group */
	assert_string_equal(cfg.tls_groups, K8S_TLS_GROUPS_POD);
	struct k8s_config copy = { 0 };
	assert_true(k8s_config_copy(&copy, &cfg));
	assert_ptr_equal(copy.tls_groups, cfg.tls_groups);
	k8s_config_free(&copy);
	k8s_config_free(&cfg);

	/* the downward API wins over the service-account file */
	setenv("POD_NAMESPACE", "team-b", 1);
	assert_int_equal(k8s_config_load(&cfg, &ov, &err), 0);
	assert_string_equal(cfg.namespace, "team-b");
	k8s_config_free(&cfg);
	unsetenv("POD_NAMESPACE");
	unsetenv("POD_NAME");
}

static void test_config_overrides_win(void **state)
{
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	char tok[128];
	snprintf(tok, sizeof(tok), "%s/token", tmpdir);
	struct k8s_config_overrides ov = { .sa_dir = "/nonexistent",
					   .api_server = "127.0.0.1:8443/",
					   .ca_file = "/nonexistent/ca",
					   .token_file = tok,
					   .namespace = "ns1",
					   .pod_name = "p1",
					   .insecure_skip_tls_verify = true };
	struct k8s_config cfg;
	np_error err = { 0 };
	assert_int_equal(k8s_config_load(&cfg, &ov, &err), 0);
	assert_string_equal(cfg.server, "https://127.0.0.1:8443");
	assert_null(cfg.ca_file); /* missing CA tolerated only when insecure */
	assert_true(cfg.insecure_skip_tls_verify);
	assert_string_equal(cfg.namespace, "ns1");
	assert_string_equal(cfg.pod_name, "p1");
	k8s_config_free(&cfg);

	ov.insecure_skip_tls_verify = false;
	assert_int_equal(k8s_config_load(&cfg, &ov, &err), -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "CA file /nonexistent/ca"));
	assert_non_null(strstr(err.msg, "--ca-file"));
	k8s_config_free(&cfg);
	unsetenv("KUBERNETES_SERVICE_HOST");
}

static void test_config_outside_pod_says_why(void **state)
{
	struct k8s_config_overrides ov = { .sa_dir = tmpdir };
	struct k8s_config cfg;
	np_error err = { 0 };
	assert_int_equal(k8s_config_load(&cfg, &ov, &err), -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_HOST is unset"));
	assert_non_null(strstr(err.msg, "--api-server"));
	k8s_config_free(&cfg);

	/* in a pod without a mounted token */
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	char ca[128];
	snprintf(ca, sizeof(ca), "%s/ca.crt", tmpdir);
	struct k8s_config_overrides ov2 = { .sa_dir = "/nonexistent", .ca_file = ca };
	assert_int_equal(k8s_config_load(&cfg, &ov2, &err), -1);
	assert_non_null(strstr(err.msg, "automountServiceAccountToken"));
	k8s_config_free(&cfg);
	unsetenv("KUBERNETES_SERVICE_HOST");
}

static void test_paths_escape_selectors(void **state)
{
	char *p = k8s_object_path("/api/v1", "ns", "pods", NULL);
	assert_string_equal(p, "/api/v1/namespaces/ns/pods");
	assert_int_equal(k8s_query_add(&p, "labelSelector",
				       "app=x,tier in (a,b),!gpu"), 0);
	assert_int_equal(k8s_query_add(&p, "fieldSelector", "status.phase!=Failed"), 0);
	assert_string_equal(p, "/api/v1/namespaces/ns/pods"
			       "?labelSelector=app%3Dx%2Ctier%20in%20%28a%2Cb%29%2C%21gpu"
			       "&fieldSelector=status.phase%21%3DFailed");
	free(p);
	p = k8s_object_path("/apis/batch/v1", "ns", "jobs", "train");
	assert_string_equal(p, "/apis/batch/v1/namespaces/ns/jobs/train");
	free(p);
	p = k8s_object_path("/api/v1", NULL, "nodes", "a/b");
	assert_string_equal(p, "/api/v1/nodes/a%2Fb");
	free(p);
}

static void test_retry_after_header_then_status(void **state)
{
	json_t *st = json_pack("{s:s, s:i, s:{s:i}}", "kind", "Status", "code", 429, "details",
			       "retryAfterSeconds", 5);
	assert_int_equal(k8s_retry_after_ms(3, st), 3000);  /* the header wins */
	assert_int_equal(k8s_retry_after_ms(0, st), 5000);  /* else the Status */
	assert_int_equal(k8s_retry_after_ms(0, NULL), -1);  /* else backoff */
	assert_int_equal(k8s_retry_after_ms(999999, NULL), 3600000); /* capped */
	json_decref(st);
}

static void test_backoff_full_jitter_bounds(void **state)
{
	static const uint32_t rnds[] = { 0, 1, 99, 100, 101, 2000, 2001, 123456789, UINT32_MAX };
	for (unsigned a = 0; a < 40; a++) {
		long ceil = 100L << (a < 5 ? a : 5);
		if (ceil > 2000)
			ceil = 2000;
		for (size_t i = 0; i < sizeof(rnds) / sizeof(rnds[0]); i++) {
			long d = k8s_backoff_ms(a, 100, 2000, rnds[i]);
			assert_true(d >= 0 && d <= ceil);
		}
		/* the whole [0, ceil] range is reachable */
		assert_int_equal(k8s_backoff_ms(a, 100, 2000, (uint32_t)ceil), ceil);
		assert_int_equal(k8s_backoff_ms(a, 100, 2000, 0), 0);
	}
	assert_int_equal(k8s_backoff_ms(0, 100, 2000, 100), 100);
	assert_int_equal(k8s_backoff_ms(1, 100, 2000, 200), 200);
	assert_int_equal(k8s_backoff_ms(1, 100, 2000, 201), 0);
}

/* client-go's defaults: 10 at once, then one every 200 ms. */
static void test_bucket_burst_then_rate(void **state)
{
	struct k8s_bucket b;
	k8s_bucket_init(&b, 5.0, 10);
	int64_t t = 1000;
	for (int i = 0; i < 10; i++)
		assert_int_equal(k8s_bucket_take(&b, t), 0);
	/* the 11th waits for its token; the 12th behind it */
	assert_int_equal(k8s_bucket_take(&b, t), 200);
	assert_int_equal(k8s_bucket_take(&b, t), 400);
	/* a caller that waited as told gets no further wait */
	t += 400;
	assert_int_equal(k8s_bucket_take(&b, t), 200);
	/* idle time refills, never above the burst */
	t += 100000;
	for (int i = 0; i < 10; i++)
		assert_int_equal(k8s_bucket_take(&b, t), 0);
	assert_true(k8s_bucket_take(&b, t) > 0);
}

/* Over any long stretch, at most qps * seconds + burst tokens go out. */
static void test_bucket_sustained_rate(void **state)
{
	struct k8s_bucket b;
	k8s_bucket_init(&b, 5.0, 10);
	int64_t t = 1, granted = 0;
	for (int64_t step = 0; step < 60000; step += 7) {
		if (k8s_bucket_take(&b, t + step) == 0)
			granted++;
		else
			b.tokens += 1.0; /* the caller gave up: not reserved */
	}
	assert_true(granted <= 5 * 60 + 10);
	assert_true(granted >= 5 * 60);
	/* 0.2/s, burst 3: the watch openings */
	k8s_bucket_init(&b, 0.2, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(k8s_bucket_take(&b, 5), 0);
	assert_int_equal(k8s_bucket_take(&b, 5), 5000);
}

/* client-go's reflector: 800 ms doubling to the cap, jitter up to 2x. */
static void test_watch_backoff_grows_with_jitter(void **state)
{
	assert_int_equal(k8s_backoff_jitter_ms(0, 800, 10000, 0), 800);
	assert_int_equal(k8s_backoff_jitter_ms(0, 800, 10000, 800), 1600);
	assert_int_equal(k8s_backoff_jitter_ms(1, 800, 10000, 0), 1600);
	assert_int_equal(k8s_backoff_jitter_ms(3, 800, 10000, 0), 6400);
	for (unsigned a = 4; a < 40; a++) {
		long d = k8s_backoff_jitter_ms(a, 800, 10000, UINT32_MAX);
		assert_true(d >= 10000 && d <= 20000);
		assert_int_equal(k8s_backoff_jitter_ms(a, 800, 10000, 0), 10000);
	}
}

static void test_rbac_from_request(void **state)
{
	struct k8s_rbac r;
	assert_int_equal(k8s_rbac_from_request("PATCH", "/api/v1/namespaces/ns/pods/p", &r), 0);
	assert_string_equal(r.verb, "patch");
	assert_string_equal(r.resource, "pods");
	assert_string_equal(r.ns, "ns");
	assert_string_equal(r.name, "p");
	assert_string_equal(r.group, "");
	assert_int_equal(k8s_rbac_from_request(
				 "GET", "/api/v1/namespaces/ns/pods?watch=1&labelSelector=a", &r),
			 0);
	assert_string_equal(r.verb, "watch");
	assert_int_equal(k8s_rbac_from_request("GET", "/api/v1/namespaces/ns/pods?limit=5", &r),
			 0);
	assert_string_equal(r.verb, "list");
	assert_int_equal(k8s_rbac_from_request("GET", "/apis/batch/v1/namespaces/ns/jobs/j", &r),
			 0);
	assert_string_equal(r.verb, "get");
	assert_string_equal(r.group, "batch");
	assert_string_equal(r.resource, "jobs");
	assert_int_equal(k8s_rbac_from_request("PATCH", "/api/v1/namespaces/n/pods/p/status", &r),
			 0);
	assert_string_equal(r.resource, "pods/status");
	assert_int_equal(k8s_rbac_from_request("POST", "/api/v1/namespaces/n/events", &r), 0);
	assert_string_equal(r.verb, "create");
	assert_string_equal(r.resource, "events");
	assert_int_equal(k8s_rbac_from_request("GET", "/healthz", &r), -1);
}

static void test_status_403_names_missing_rule(void **state)
{
	const char *body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
			   "\"message\":\"pods \\\"p\\\" is forbidden: User \\\"system:"
			   "serviceaccount:ns:default\\\" cannot patch resource \\\"pods\\\" in "
			   "API group \\\"\\\" in the namespace \\\"ns\\\"\",\"reason\":"
			   "\"Forbidden\",\"code\":403}";
	np_error err = { 0 };
	assert_int_equal(k8s_status_error(&err, "PATCH", "/api/v1/namespaces/ns/pods/p", 403,
					  body, strlen(body), "/t"),
			 -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_string_equal(err.msg,
			    "forbidden: the Role needs \"patch\" on \"pods\" in namespace \"ns\" "
			    "(pods \"p\" is forbidden: User \"system:serviceaccount:ns:default\" "
			    "cannot patch resource \"pods\" in API group \"\" in the namespace "
			    "\"ns\")");

	const char *jb = "{\"kind\":\"Status\",\"message\":\"nope\",\"reason\":\"Forbidden\"}";
	k8s_status_error(&err, "GET", "/apis/batch/v1/namespaces/ns/jobs/j", 403, jb,
			 strlen(jb), NULL);
	assert_string_equal(err.msg, "forbidden: the Role needs \"get\" on \"jobs\" in API "
				     "group \"batch\" in namespace \"ns\" (nope)");
}

/* kube-apiserver runs a request without credentials as system:anonymous
 * and answers 403 (the text is its Forbidden Status): no Role rule helps. */
static void test_status_403_of_an_anonymous_request(void **state)
{
	const char *body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
			   "\"message\":\"pods \\\"p\\\" is forbidden: User \\\"system:anonymous\\\" "
			   "cannot get resource \\\"pods\\\" in API group \\\"\\\" in the namespace "
			   "\\\"ns\\\"\",\"reason\":\"Forbidden\",\"code\":403}";
	np_error err = { 0 };
	assert_int_equal(k8s_status_error(&err, "GET", "/api/v1/namespaces/ns/pods/p", 403, body,
					  strlen(body), NULL),
			 -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "without credentials it accepted (it ran as system:anonymous)"));
	assert_non_null(strstr(err.msg, "no token was sent"));
	assert_null(strstr(err.msg, "the Role needs"));
	k8s_status_error(&err, "GET", "/api/v1/namespaces/ns/pods/p", 403, body, strlen(body), "/t");
	assert_non_null(strstr(err.msg, "check the token file"));
}

static void test_status_other_errors(void **state)
{
	const char *body = "{\"kind\":\"Status\",\"message\":\"pods \\\"x\\\" not found\","
			   "\"reason\":\"NotFound\",\"code\":404}";
	np_error err = { 0 };
	k8s_status_error(&err, "GET", "/api/v1/namespaces/ns/pods/x", 404, body, strlen(body),
			 NULL);
	assert_int_equal(err.status, NP_EK8S);
	assert_string_equal(err.msg,
			    "GET /api/v1/namespaces/ns/pods/x: HTTP 404 NotFound: pods \"x\" not found");

	const char *u = "{\"kind\":\"Status\",\"message\":\"Unauthorized\",\"reason\":"
			"\"Unauthorized\",\"code\":401}";
	k8s_status_error(&err, "GET", "/api/v1/namespaces/ns/pods/x", 401, u, strlen(u),
			 "/var/run/tok");
	assert_string_equal(err.msg, "unauthorized: the API server rejected the token from "
				     "/var/run/tok (HTTP 401 Unauthorized: Unauthorized)");

	const char *html = "<html>\n<b>Bad\tGateway</b></html>\n";
	k8s_status_error(&err, "GET", "/api/v1/x", 502, html, strlen(html), NULL);
	assert_string_equal(err.msg, "GET /api/v1/x: HTTP 502: <html> <b>Bad Gateway</b></html>");
	k8s_status_error(&err, "GET", "/api/v1/x", 500, NULL, 0, NULL);
	assert_string_equal(err.msg, "GET /api/v1/x: HTTP 500: (empty response)");
}

struct lines {
	char got[16][64];
	int n;
	int stop_at; /* return 1 at this line index; -1 never */
};

static int collect_line(const char *line, size_t len, void *ud)
{
	struct lines *l = ud;
	assert_true(l->n < 16 && len < 64);
	memcpy(l->got[l->n], line, len);
	l->got[l->n][len] = '\0';
	return l->n++ == l->stop_at;
}

static void test_linebuf_any_chunk_boundaries(void **state)
{
	const char *stream = "{\"type\":\"ADDED\"}\n\n{\"type\":\"MODIFIED\"}\r\n"
			     "{\"type\":\"BOOKMARK\"}\n{\"partial\":";
	const char *want[] = { "{\"type\":\"ADDED\"}", "{\"type\":\"MODIFIED\"}",
			       "{\"type\":\"BOOKMARK\"}" };
	size_t n = strlen(stream);
	/* every pair of cut points: split mid-line, several lines per chunk */
	for (size_t a = 0; a <= n; a++) {
		for (size_t b = a; b <= n; b++) {
			struct k8s_linebuf lb = { .max_line = 1024 };
			struct lines l = { .stop_at = -1 };
			assert_int_equal(k8s_linebuf_feed(&lb, stream, a, collect_line, &l), 0);
			assert_int_equal(k8s_linebuf_feed(&lb, stream + a, b - a, collect_line, &l),
					 0);
			assert_int_equal(k8s_linebuf_feed(&lb, stream + b, n - b, collect_line, &l),
					 0);
			assert_int_equal(l.n, 3);
			for (int i = 0; i < 3; i++)
				assert_string_equal(l.got[i], want[i]);
			assert_int_equal(lb.pending.len, strlen("{\"partial\":"));
			k8s_linebuf_free(&lb);
		}
	}
	/* one byte at a time */
	struct k8s_linebuf lb = { .max_line = 1024 };
	struct lines l = { .stop_at = -1 };
	for (size_t i = 0; i < n; i++)
		assert_int_equal(k8s_linebuf_feed(&lb, stream + i, 1, collect_line, &l), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.got[1], want[1]);
	k8s_linebuf_free(&lb);
}

static void test_linebuf_stop_and_overflow(void **state)
{
	struct k8s_linebuf lb = { .max_line = 8 };
	struct lines l = { .stop_at = 0 };
	assert_int_equal(k8s_linebuf_feed(&lb, "ab\ncd\n", 6, collect_line, &l), 1);
	assert_int_equal(l.n, 1); /* stopped after the first line */
	assert_int_equal(k8s_linebuf_feed(&lb, "0123", 4, collect_line, &l), 0);
	assert_int_equal(k8s_linebuf_feed(&lb, "45678", 5, collect_line, &l),
			 K8S_LINEBUF_OVERFLOW);
	k8s_linebuf_free(&lb);
}

static void test_event_body_shape(void **state)
{
	json_t *pod = json_pack("{s:{s:s, s:s, s:s}, s:{s:s}}", "metadata", "name", "job-w-0",
				"namespace", "ns", "uid", "1234-abcd", "spec", "nodeName", "n1");
	char longmsg[1500];
	memset(longmsg, 'x', sizeof(longmsg) - 1);
	longmsg[sizeof(longmsg) - 1] = '\0';
	longmsg[1023] = (char)0xc3; /* a 2-byte UTF-8 sequence across the limit */
	longmsg[1024] = (char)0xa9;
	struct timespec now = { .tv_sec = 1700000000, .tv_nsec = 5000 };
	json_t *ev = k8s_event_build(pod, "ns", "NetworkChosen", longmsg, "Normal", "job-w-0",
				     &now);
	assert_non_null(ev);
	json_t *inv = json_object_get(ev, "involvedObject");
	assert_string_equal(json_string_value(json_object_get(inv, "kind")), "Pod");
	assert_string_equal(json_string_value(json_object_get(inv, "apiVersion")), "v1");
	assert_string_equal(json_string_value(json_object_get(inv, "uid")), "1234-abcd");
	assert_string_equal(json_string_value(json_object_get(inv, "namespace")), "ns");
	assert_string_equal(json_string_value(json_object_get(ev, "eventTime")),
			    "2023-11-14T22:13:20.000005Z");
	assert_string_equal(json_string_value(json_object_get(ev, "firstTimestamp")),
			    "2023-11-14T22:13:20Z");
	assert_string_equal(json_string_value(json_object_get(ev, "reportingComponent")),
			    "nicpick");
	assert_string_equal(json_string_value(json_object_get(ev, "reportingInstance")),
			    "job-w-0");
	assert_string_equal(json_string_value(json_object_get(ev, "action")), "NetworkChosen");
	json_t *src = json_object_get(ev, "source");
	assert_string_equal(json_string_value(json_object_get(src, "component")), "nicpick");
	assert_string_equal(json_string_value(json_object_get(src, "host")), "n1");
	assert_int_equal(strlen(json_string_value(json_object_get(ev, "message"))), 1023);
	const char *name = json_string_value(
		json_object_get(json_object_get(ev, "metadata"), "name"));
	assert_true(!strncmp(name, "job-w-0.", 8));
	json_decref(ev);
	json_t *anon = json_object();
	assert_null(k8s_event_build(anon, "ns", "R", "m", "Normal", NULL, &now));
	json_decref(anon);
	json_decref(pod);
}

static void test_job_completions(void **state)
{
	json_t *job = json_pack("{s:{s:i}}", "spec", "completions", 8);
	assert_int_equal(k8s_job_completions(job), 8);
	json_decref(job);
	job = json_pack("{s:{s:n}}", "spec", "completions");
	assert_int_equal(k8s_job_completions(job), -1);
	json_decref(job);
}

static void test_token_reread_on_change(void **state)
{
	char tok[128];
	snprintf(tok, sizeof(tok), "%s/token", tmpdir);
	struct k8s_config cfg = { .server = "https://127.0.0.1:1", .token_file = tok,
				  .namespace = "ns" };
	struct k8s_client *c = NULL;
	np_error err = { 0 };
	write_file(tmpdir, "token", "tok-1\n");
	assert_int_equal(k8s_client_new(&c, &cfg, &err), 0);
	assert_int_equal(k8s_token_refresh(c, false, &err), 0);
	assert_string_equal(c->token, "tok-1");
	/* atomic replace, as the kubelet does: new inode */
	char tmp[160];
	snprintf(tmp, sizeof(tmp), "%s/token.new", tmpdir);
	FILE *f = fopen(tmp, "w");
	fputs("tok-2", f);
	fclose(f);
	assert_int_equal(rename(tmp, tok), 0);
	assert_int_equal(k8s_token_refresh(c, false, &err), 0);
	assert_string_equal(c->token, "tok-2");
	write_file(tmpdir, "token", "\n");
	assert_int_equal(k8s_token_refresh(c, true, &err), -1);
	assert_non_null(strstr(err.msg, "empty or malformed"));
	assert_string_equal(c->token, "tok-2"); /* the old one stays */
	k8s_client_free(c);
	write_file(tmpdir, "token", "tok-1\n");
}

struct late_writer {
	char path[160];
	const char *text;
};

static void *write_late(void *ud)
{
	const struct late_writer *w = ud;
	struct timespec ts = { 0, 150 * 1000000L };
	nanosleep(&ts, NULL);
	FILE *f = fopen(w->path, "w"); /* in place: same inode, as `>` does */
	if (f) {
		fputs(w->text, f);
		fclose(f);
	}
	return NULL;
}

/* A token file rewritten in place is empty for a moment: that read is
 * retried until the new token is there, not fatal (issue 14). */
static void test_token_rewritten_in_place_is_read_again(void **state)
{
	char tok[128];
	snprintf(tok, sizeof(tok), "%s/token", tmpdir);
	struct k8s_config cfg = { .server = "https://127.0.0.1:1", .token_file = tok,
				  .namespace = "ns" };
	struct k8s_client *c = NULL;
	np_error err = { 0 };
	write_file(tmpdir, "token", "tok-1\n");
	assert_int_equal(k8s_client_new(&c, &cfg, &err), 0);
	k8s_client_set_timeout(c, 10);
	assert_int_equal(k8s_token_refresh(c, false, &err), 0);
	assert_string_equal(c->token, "tok-1");
	FILE *f = fopen(tok, "w"); /* truncated: the writer has not written yet */
	assert_non_null(f);
	fclose(f);
	struct late_writer w = { .text = "tok-2\n" };
	snprintf(w.path, sizeof(w.path), "%s", tok);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, write_late, &w), 0);
	int rc = k8s_token_refresh(c, true, &err);
	pthread_join(t, NULL);
	if (rc < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(c->token, "tok-2");

	/* Still empty at the deadline: an error that says so, in time. */
	f = fopen(tok, "w");
	fclose(f);
	k8s_client_set_timeout(c, 0.3);
	int64_t t0 = k8s_mono_ms();
	assert_int_equal(k8s_token_refresh(c, true, &err), -1);
	assert_true(k8s_mono_ms() - t0 < 600);
	assert_non_null(strstr(err.msg, "empty or malformed"));
	assert_string_equal(c->token, "tok-2");
	k8s_client_free(c);
	write_file(tmpdir, "token", "tok-1\n");
}

/* What a failed transfer says: a name that did not resolve names DNS, a
 * handshake the server refused is not retried (issue 14).  The texts are
 * curl's: lib/vtls/mbedtls.c failf("ssl_handshake returned: (-0x%04X) %s")
 * with mbedTLS's error strings, OpenSSL's "error:0A00042E:SSL
 * routines::tlsv1 alert protocol version", lib/hostip.c's "Could not
 * resolve host" and lib/asyn-thread.c's "Resolving timed out after". */
static void test_xfer_explain_names_dns_and_a_refused_handshake(void **state)
{
	static const struct {
		CURLcode cc;
		const char *text;
		bool refused;
		const char *starts;
	} cases[] = {
		{ CURLE_SSL_CONNECT_ERROR,
		  "ssl_handshake returned: (-0x7780) SSL - A fatal alert message was received from our peer",
		  true, "the API server refused the TLS handshake (ssl_handshake returned" },
		{ CURLE_SSL_CONNECT_ERROR,
		  "OpenSSL/3.0.17: error:0A00042E:SSL routines::tlsv1 alert protocol version", true,
		  "the API server refused the TLS handshake" },
		{ CURLE_SSL_CONNECT_ERROR,
		  "ssl_handshake returned: (-0x0050) NET - Connection was reset by peer", false,
		  "ssl_handshake returned" },
		{ CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: kubernetes.default.svc", false,
		  "DNS: Could not resolve host: kubernetes.default.svc" },
		{ CURLE_OPERATION_TIMEDOUT, "Resolving timed out after 2000 milliseconds", false,
		  "DNS: Resolving timed out after 2000 milliseconds" },
		{ CURLE_OPERATION_TIMEDOUT, "Operation timed out after 2000 milliseconds with 0 bytes received",
		  false, "Operation timed out" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct k8s_xfer x = { .cc = cases[i].cc };
		snprintf(x.errbuf, sizeof(x.errbuf), "%s", cases[i].text);
		k8s_xfer_explain(&x);
		assert_int_equal(x.tls_refused, cases[i].refused);
		if (strncmp(x.errbuf, cases[i].starts, strlen(cases[i].starts)) != 0)
			fail_msg("case %zu: %s", i, x.errbuf);
		if (cases[i].refused)
			assert_non_null(strstr(x.errbuf, "retrying cannot change"));
	}
}

static void test_deadline_wait_stops_at_deadline(void **state)
{
	struct k8s_config cfg = { .server = "https://127.0.0.1:1", .namespace = "ns" };
	struct k8s_client *c = NULL;
	np_error err = { 0 };
	assert_int_equal(k8s_client_new(&c, &cfg, &err), 0);
	k8s_client_set_timeout(c, 0.2);
	int64_t t0 = k8s_mono_ms();
	assert_int_equal(k8s_wait(c, 5000, "waiting for Godot", &err), -1);
	int64_t el = k8s_mono_ms() - t0;
	assert_true(el >= 190 && el < 300);
	assert_int_equal(err.status, NP_EK8S);
	assert_string_equal(err.msg, "deadline exceeded while waiting for Godot");
	assert_int_equal(k8s_wait(c, 10, "after the deadline", &err), -1);
	k8s_client_set_timeout(c, 5);
	assert_int_equal(k8s_wait(c, 10, "short", &err), 0);
	k8s_client_free(c);
}

/* Idle work (k8s_client_set_idle) goes on while the client waits: at the
 * times it asks for and when its fd is ready, and the wait still lasts
 * as long as it was asked to. */
struct idle_probe {
	int calls, fd, got;
	int64_t step_ms;
};

static void idle_work(void *ud, struct np_wait *w)
{
	struct idle_probe *p = ud;
	p->calls++;
	char b;
	if (read(p->fd, &b, 1) == 1)
		p->got++;
	*w = (struct np_wait){ .fd = p->fd, .events = POLLIN, .until_ms = np_now_ms() + p->step_ms };
}

static void test_idle_work_goes_on_while_the_client_waits(void **state)
{
	struct k8s_config cfg = { .server = "https://127.0.0.1:1", .namespace = "ns" };
	struct k8s_client *c = NULL;
	np_error err = { 0 };
	assert_int_equal(k8s_client_new(&c, &cfg, &err), 0);
	k8s_client_set_timeout(c, 5);
	int pfd[2];
	assert_int_equal(pipe2(pfd, O_NONBLOCK), 0);
	assert_int_equal(write(pfd[1], "abc", 3), 3);
	struct idle_probe p = { .fd = pfd[0], .step_ms = 20 };
	k8s_client_set_idle(c, idle_work, &p);
	int64_t t0 = k8s_mono_ms();
	assert_int_equal(k8s_wait(c, 200, "a back-off", &err), 0);
	int64_t el = k8s_mono_ms() - t0;
	assert_true(el >= 195 && el < 300);
	assert_int_equal(p.got, 3);	    /* the fd's readiness woke it */
	assert_true(p.calls >= 3 + 5);	    /* and so did its times, every 20 ms */
	assert_true(p.calls <= 3 + 200 / 20 + 2);
	/* Off again: the wait runs without it. */
	k8s_client_set_idle(c, NULL, NULL);
	p.calls = 0;
	assert_int_equal(k8s_wait(c, 50, "a back-off", &err), 0);
	assert_int_equal(p.calls, 0);
	close(pfd[0]);
	close(pfd[1]);
	k8s_client_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_url_brackets_ipv6),
		cmocka_unit_test(test_config_in_cluster_ipv6),
		cmocka_unit_test(test_config_overrides_win),
		cmocka_unit_test(test_config_outside_pod_says_why),
		cmocka_unit_test(test_paths_escape_selectors),
		cmocka_unit_test(test_retry_after_header_then_status),
		cmocka_unit_test(test_backoff_full_jitter_bounds),
		cmocka_unit_test(test_bucket_burst_then_rate),
		cmocka_unit_test(test_bucket_sustained_rate),
		cmocka_unit_test(test_watch_backoff_grows_with_jitter),
		cmocka_unit_test(test_rbac_from_request),
		cmocka_unit_test(test_status_403_names_missing_rule),
		cmocka_unit_test(test_status_403_of_an_anonymous_request),
		cmocka_unit_test(test_status_other_errors),
		cmocka_unit_test(test_linebuf_any_chunk_boundaries),
		cmocka_unit_test(test_linebuf_stop_and_overflow),
		cmocka_unit_test(test_event_body_shape),
		cmocka_unit_test(test_job_completions),
		cmocka_unit_test(test_token_reread_on_change),
		cmocka_unit_test(test_token_rewritten_in_place_is_read_again),
		cmocka_unit_test(test_xfer_explain_names_dns_and_a_refused_handshake),
		cmocka_unit_test(test_deadline_wait_stops_at_deadline),
		cmocka_unit_test(test_idle_work_goes_on_while_the_client_waits),
	};
	return cmocka_run_group_tests_name("k8s_pure", tests, setup_sa, teardown_sa);
}
