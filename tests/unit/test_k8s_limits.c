/* What an answer of the API server may be, and what parsing it may take
 * (lib/k8s/k8s_priv.h, K8S_MAX_OBJECT and the rest; util/jsonmem.h): a
 * body of many tiny values (`[{},{},...]`) takes jansson some 90 times
 * its size, so bytes alone do not bound memory.  The client is run against
 * a plain HTTP server in this process that answers as a hostile or broken
 * one would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "k8s/k8s_priv.h"
#include "util/arena.h"
#include "util/jsonmem.h"

/* ---- documents ---------------------------------------------------------- */

/* A Pod whose "x" holds n empty objects: 3 bytes each on the wire. */
static char *bomb(size_t bytes, size_t *len)
{
	static const char head[] = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\","
				   "\"namespace\":\"ns\",\"uid\":\"u1\"},\"x\":[";
	size_t n = (bytes - sizeof(head) - 8) / 3;
	char *b = malloc(sizeof(head) + n * 3 + 8);
	assert_non_null(b);
	size_t o = sizeof(head) - 1;
	memcpy(b, head, o);
	for (size_t i = 0; i < n; i++, o += 3)
		memcpy(b + o, "{},", 3);
	memcpy(b + o, "0]}", 4);
	*len = o + 3;
	return b;
}

/* A pod as a real cluster has it: labels, annotations, two containers with
 * their environment, status, and managedFields (the densest part: an
 * object per field). */
static json_t *real_pod(int i)
{
	json_t *env = json_array(), *fields = json_object();
	for (int k = 0; k < 40; k++) {
		char name[32], val[64], key[64];
		snprintf(name, sizeof(name), "TRAIN_SETTING_%02d", k);
		snprintf(val, sizeof(val), "value-%d-of-the-setting-%d", k, i);
		json_array_append_new(env, json_pack("{s:s,s:s}", "name", name, "value", val));
		snprintf(key, sizeof(key), "k:{\"name\":\"%s\"}", name);
		json_object_set_new(fields, key, json_pack("{s:{},s:{},s:{}}", ".", "f:name", "f:value"));
	}
	char name[32];
	snprintf(name, sizeof(name), "train-worker-%d", i);
	json_t *c = json_pack("{s:s,s:s,s:[s,s],s:o,s:{s:{s:s}},s:s,s:s}", "name", "train", "image",
			      "nvcr.io/nvidia/pytorch:24.05-py3", "args", "--nproc-per-node=8", "train.py",
			      "env", env, "resources", "limits", "nvidia.com/gpu", "8",
			      "terminationMessagePath", "/dev/termination-log", "imagePullPolicy",
			      "IfNotPresent");
	json_t *mf = json_pack("[{s:s,s:s,s:s,s:{s:{s:{s:{s:o}}}}}]", "manager", "kube-controller-manager",
			       "operation", "Update", "fieldsType", "FieldsV1", "fieldsV1", "f:spec",
			       "f:containers", "k:{\"name\":\"train\"}", "f:env", fields);
	json_t *pod = json_pack(
		"{s:s,s:s,s:{s:s,s:s,s:s,s:{s:s,s:s},s:{s:s},s:o},s:{s:[o],s:s},s:{s:s,s:s,s:[{s:s,s:s},{s:s,s:s}]}}",
		"kind", "Pod", "apiVersion", "v1", "metadata", "name", name, "namespace", "team-a", "uid",
		"0b7b5f2e-1c0b-4c8e-9a7e-1f2d3c4b5a69", "labels", "batch.kubernetes.io/job-name", "train",
		"batch.kubernetes.io/job-completion-index", "17", "annotations", "nicpick.io/report",
		"{\"v\":1,\"pod\":\"train-worker-17\"}", "managedFields", mf, "spec", "containers", c,
		"nodeName", "gpu-node-0017", "status", "phase", "Running", "podIP", "10.1.2.3",
		"conditions", "type", "Ready", "status", "True", "type", "PodScheduled", "status", "True");
	assert_non_null(pod);
	return pod;
}

static char *dump(json_t *j, size_t *len)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	assert_non_null(s);
	*len = strlen(s);
	return s;
}

/* ---- the budget --------------------------------------------------------- */

static void test_a_budget_refuses_what_amplifies_and_frees_it(void **state)
{
	size_t len;
	char *b = bomb(1u << 20, &len);
	bool over = false;
	size_t used = 0;
	json_error_t je;
	json_t *j = np_json_loadb_budget(b, len, 0, 8u << 20, &je, &over, &used);
	assert_null(j);
	assert_true(over);
	assert_true(used <= 8u << 20);
	/* Outside a budgeted parse, and with a budget it fits, it parses:
	 * 1 MiB of it takes jansson over 64 MiB. */
	j = json_loadb(b, len, 0, &je);
	assert_non_null(j);
	json_decref(j);
	j = np_json_loadb_budget(b, len, 0, SIZE_MAX / 2, &je, &over, &used);
	assert_non_null(j);
	assert_false(over);
	assert_true(used > 64u << 20);
	json_decref(j);
	/* The client's own: refused, said why. */
	j = k8s_json_parse(b, len, K8S_PARSE_MAX, &je, &over);
	assert_null(j);
	assert_true(over);
	free(b);
}

static void test_real_pods_and_pages_fit_their_budget(void **state)
{
	size_t len, used = 0;
	bool over = true;
	json_error_t je;
	char *s = dump(real_pod(17), &len);
	json_t *j = np_json_loadb_budget(s, len, JSON_ALLOW_NUL, k8s_parse_budget(len, K8S_PARSE_MAX),
					 &je, &over, &used);
	assert_non_null(j);
	assert_false(over);
	/* well inside: the factor is for the densest real answers */
	assert_true(used < len * K8S_PARSE_FACTOR / 2);
	assert_true(len < K8S_MAX_LIST_ITEM);
	json_decref(j);
	free(s);

	/* A page of 200 of them, as the gatherer reads it. */
	json_t *items = json_array();
	for (int i = 0; i < 200; i++)
		json_array_append_new(items, real_pod(i));
	s = dump(json_pack("{s:s,s:{s:s},s:o}", "kind", "PodList", "metadata", "resourceVersion", "7",
			   "items", items),
		 &len);
	assert_true(len <= k8s_page_max(200));
	j = k8s_json_parse(s, len, K8S_PARSE_MAX, &je, &over);
	assert_non_null(j);
	assert_false(over);
	assert_int_equal(json_array_size(json_object_get(j, "items")), 200);
	json_decref(j);
	free(s);
}

struct racer {
	const char *buf;
	size_t len;
	pthread_barrier_t *go;
	bool parsed, over;
};

static void *budgeted(void *ud)
{
	struct racer *r = ud;
	pthread_barrier_wait(r->go);
	json_t *j = np_json_loadb_budget(r->buf, r->len, 0, 4u << 20, NULL, &r->over, NULL);
	r->parsed = j != NULL;
	json_decref(j);
	return NULL;
}

/* A budget is the parsing thread's own: another thread's parse at the
 * same time is not counted, nor refused. */
static void test_a_budget_is_per_thread(void **state)
{
	size_t len;
	char *b = bomb(1u << 20, &len);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, 2);
	struct racer r = { b, len, &go, false, false };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, budgeted, &r), 0);
	pthread_barrier_wait(&go);
	json_t *j = json_loadb(b, len, 0, NULL);
	pthread_join(t, NULL);
	assert_non_null(j);
	json_decref(j);
	assert_false(r.parsed);
	assert_true(r.over);
	pthread_barrier_destroy(&go);
	free(b);
}

/* `discover --json`'s arena replaces jansson's functions for a while and
 * puts back those it found, the budget's counter among them. */
static void test_the_arena_leaves_the_budget_installed(void **state)
{
	np_json_arena_begin();
	json_t *o = json_pack("{s:i}", "a", 1);
	assert_non_null(o);
	np_json_arena_end();
	size_t len;
	char *b = bomb(1u << 20, &len);
	bool over = false;
	assert_null(np_json_loadb_budget(b, len, 0, 1u << 20, NULL, &over, NULL));
	assert_true(over);
	free(b);
}

static void test_the_limits(void **state)
{
	assert_int_equal(np_json_budget_charge(1), 32);
	assert_int_equal(np_json_budget_charge(24), 32);
	assert_int_equal(np_json_budget_charge(25), 48);
	assert_int_equal(K8S_MAX_OBJECT, 4u << 20);
	assert_int_equal(K8S_MAX_LINE, (4u << 20) + 4096);
	assert_int_equal(k8s_page_max(1), K8S_MAX_OBJECT);
	assert_int_equal(k8s_page_max(64), K8S_MAX_OBJECT);
	assert_int_equal(k8s_page_max(500), 500u * (64u << 10));
	assert_int_equal(k8s_page_max(0), k8s_page_max(500));
	assert_int_equal(k8s_page_max(1u << 20), K8S_MAX_LIST);
	assert_int_equal(k8s_parse_budget(0, K8S_PARSE_MAX), 1u << 20);
	assert_int_equal(k8s_parse_budget(1u << 20, K8S_PARSE_MAX), 33u << 20);
	assert_int_equal(k8s_parse_budget(4u << 20, K8S_PARSE_MAX), K8S_PARSE_MAX);
	assert_int_equal(k8s_parse_budget(64u << 20, SIZE_MAX), (size_t)(2049u) << 20);
	assert_int_equal(k8s_parse_budget(SIZE_MAX / 4, SIZE_MAX), SIZE_MAX);
	char t[32];
	assert_string_equal(k8s_size_text(4u << 20, t, sizeof(t)), "4 MiB");
	assert_string_equal(k8s_size_text(64u << 10, t, sizeof(t)), "64 KiB");
	assert_string_equal(k8s_size_text(500u * (64u << 10), t, sizeof(t)), "31.2 MiB");
}

static void test_a_watch_event_that_amplifies_is_refused(void **state)
{
	size_t len;
	char *b = bomb(3u << 20, &len);
	char *line = malloc(len + 64);
	int n = snprintf(line, len + 64, "{\"type\":\"MODIFIED\",\"object\":%s}", b);
	struct k8s_watch_event e;
	assert_int_equal(k8s_watch_event_decode(line, (size_t)n, &e), K8S_EVENT_MALFORMED);
	assert_true(e.oversize);
	assert_non_null(strstr(e.why, "of memory to parse"));
	json_decref(e.ev);
	char *s = dump(real_pod(3), &len);
	n = snprintf(line, len + 64, "{\"type\":\"MODIFIED\",\"object\":%s}", s);
	assert_int_equal(k8s_watch_event_decode(line, (size_t)n, &e), K8S_EVENT_TYPED);
	assert_false(e.oversize);
	json_decref(e.ev);
	free(s);
	free(line);
	free(b);
}

/* ---- the client against a server that answers as told ------------------- */

struct server {
	int fd, port;
	pthread_t t;
	volatile bool stop;
	/* answer(s, request line, n-th request) */
	void (*answer)(struct server *s, int conn, const char *line, int nth);
	int requests;
	char lines[16][512];
	size_t sent;
};

static void put(struct server *s, int conn, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = send(conn, c, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		s->sent += (size_t)w;
		c += w;
		n -= (size_t)w;
	}
}

static void head(struct server *s, int conn, const char *status, size_t len)
{
	char h[256];
	int n = snprintf(h, sizeof(h),
			 "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, len);
	put(s, conn, h, (size_t)n);
}

static void *serve(void *ud)
{
	struct server *s = ud;
	while (!s->stop) {
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		int conn = accept(s->fd, NULL, NULL);
		if (conn < 0)
			continue;
		char req[8192];
		size_t got = 0;
		while (got < sizeof(req) - 1) {
			ssize_t r = recv(conn, req + got, sizeof(req) - 1 - got, 0);
			if (r <= 0)
				break;
			got += (size_t)r;
			req[got] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		req[got] = '\0';
		char *eol = strstr(req, "\r\n");
		if (eol)
			*eol = '\0';
		int nth = s->requests++;
		if (nth < 16)
			snprintf(s->lines[nth], sizeof(s->lines[nth]), "%s", req);
		s->answer(s, conn, req, nth);
		close(conn);
	}
	return NULL;
}

static struct server *server_start(void (*answer)(struct server *, int, const char *, int))
{
	struct server *s = calloc(1, sizeof(*s));
	s->answer = answer;
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->fd, 16), 0);
	getsockname(s->fd, (struct sockaddr *)&sa, &sl);
	s->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&s->t, NULL, serve, s), 0);
	return s;
}

static void server_stop(struct server *s)
{
	s->stop = true;
	pthread_join(s->t, NULL);
	close(s->fd);
	free(s);
}

static struct k8s_client *client_of(struct server *s)
{
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", s->port);
	struct k8s_config cfg = { .server = url, .namespace = "ns" };
	struct k8s_client *c = NULL;
	np_error err = { 0 };
	assert_int_equal(k8s_client_new(&c, &cfg, &err), 0);
	k8s_client_set_timeout(c, 20);
	return c;
}

static void send_bomb(struct server *s, int conn, const char *status, size_t bytes)
{
	size_t len;
	char *b = bomb(bytes, &len);
	head(s, conn, status, len);
	put(s, conn, b, len);
	free(b);
}

static void send_pod(struct server *s, int conn)
{
	size_t len;
	json_t *pod = real_pod(0);
	json_object_set_new(json_object_get(pod, "metadata"), "name", json_string("p"));
	char *b = dump(pod, &len);
	head(s, conn, "200 OK", len);
	put(s, conn, b, len);
	free(b);
}

static void answer_5mib(struct server *s, int conn, const char *line, int nth)
{
	/* said by its Content-Length, then sent as spaces */
	head(s, conn, "200 OK", 5u << 20);
	static char sp[1u << 16];
	memset(sp, ' ', sizeof(sp));
	for (size_t i = 0; i < (5u << 20) / sizeof(sp); i++)
		put(s, conn, sp, sizeof(sp));
}

static void answer_5mib_no_length(struct server *s, int conn, const char *line, int nth)
{
	static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
				"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"";
	put(s, conn, h, sizeof(h) - 1);
	static char sp[1u << 16];
	memset(sp, 'a', sizeof(sp));
	for (size_t i = 0; i < (5u << 20) / sizeof(sp); i++)
		put(s, conn, sp, sizeof(sp));
}

static void answer_bomb(struct server *s, int conn, const char *line, int nth)
{
	send_bomb(s, conn, "200 OK", 3u << 20);
}

/* The GET of the pod against a server that answers with `answer`:
 * refused at the first answer (not retried), exit 5's status; the error. */
static np_error get_pod_refused(void (*answer)(struct server *, int, const char *, int))
{
	struct server *s = server_start(answer);
	struct k8s_client *c = client_of(s);
	json_t *pod = NULL;
	np_error err = { 0 };
	assert_int_equal(k8s_get_pod(c, "ns", "p", &pod, &err), -1);
	assert_null(pod);
	assert_int_equal(err.status, NP_EK8S);
	assert_int_equal(s->requests, 1); /* not retried */
	k8s_client_free(c);
	server_stop(s);
	return err;
}

static void test_an_object_larger_than_an_object_can_be_is_refused(void **state)
{
	void (*answers[])(struct server *, int, const char *, int) = { answer_5mib,
								      answer_5mib_no_length };
	for (size_t i = 0; i < 2; i++)
		assert_string_equal(get_pod_refused(answers[i]).msg,
				    "GET /api/v1/namespaces/ns/pods/p: the answer is larger "
				    "than 4 MiB, the most one object can be: refused without "
				    "reading the rest");
}

static void test_an_object_that_amplifies_is_refused(void **state)
{
	np_error err = get_pod_refused(answer_bomb);
	assert_non_null(strstr(err.msg, "GET /api/v1/namespaces/ns/pods/p: the answer, 3.0 MiB of "
					"JSON, would take more than 64 MiB of memory to parse"));
	assert_null(strchr(err.msg, '\n'));
}

/* A 503 whose body would amplify: only its first K8S_MAX_STATUS bytes are
 * read, it is retried, and the next answer is taken. */
static void answer_503_then_pod(struct server *s, int conn, const char *line, int nth)
{
	if (nth == 0)
		send_bomb(s, conn, "503 Service Unavailable", 8u << 20);
	else
		send_pod(s, conn);
}

static void test_an_error_body_is_read_only_as_far_as_its_message(void **state)
{
	struct server *s = server_start(answer_503_then_pod);
	struct k8s_client *c = client_of(s);
	json_t *pod = NULL;
	np_error err = { 0 };
	if (k8s_get_pod(c, "ns", "p", &pod, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(json_string_value(json_object_get(json_object_get(pod, "metadata"), "name")),
			    "p");
	json_decref(pod);
	assert_int_equal(s->requests, 2);
	assert_true(s->sent < (8u << 20)); /* the 503's body was not all read */
	k8s_client_free(c);
	server_stop(s);
}

static int query_int(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	return p ? atoi(p + strlen(key)) : -1;
}

/* A PodList page of n real pods, with that continue token ("": the last). */
static void send_pods(struct server *s, int conn, int n, const char *cont)
{
	json_t *items = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(items, real_pod(i));
	size_t len;
	char *b = dump(json_pack("{s:s,s:{s:s,s:s},s:o}", "kind", "PodList", "metadata",
				 "resourceVersion", "7", "continue", cont, "items", items),
		       &len);
	head(s, conn, "200 OK", len);
	put(s, conn, b, len);
	free(b);
}

/* limit=500: too large to parse; 250: too large by its Content-Length;
 * 125: a page of pods, continued, and the rest at 125. */
static void answer_pages(struct server *s, int conn, const char *line, int nth)
{
	int limit = query_int(line, "limit=");
	bool cont = strstr(line, "continue=c1") != NULL;
	if (limit == 500) {
		send_bomb(s, conn, "200 OK", 2u << 20);
	} else if (limit == 250) {
		head(s, conn, "200 OK", 20u << 20);
		static char sp[1u << 16];
		memset(sp, ' ', sizeof(sp));
		for (size_t i = 0; i < (20u << 20) / sizeof(sp); i++)
			put(s, conn, sp, sizeof(sp));
	} else {
		send_pods(s, conn, 3, cont ? "" : "c1");
	}
}

static int count_page(json_t *list, void *ud)
{
	*(size_t *)ud += json_array_size(json_object_get(list, "items"));
	return 0;
}

/* The pods of namespace ns, limit a page, counted into *items (from 0). */
static int list_counted(struct k8s_client *c, size_t limit, size_t *items, np_error *err)
{
	*items = 0;
	*err = (np_error){ 0 };
	return k8s_list_pods_paged(c, "ns", NULL, NULL, limit, count_page, NULL, items, NULL, err);
}

static void test_a_page_too_large_is_asked_again_for_half_as_many(void **state)
{
	struct server *s = server_start(answer_pages);
	struct k8s_client *c = client_of(s);
	np_error err = { 0 };
	size_t items = 0;
	char *rv = NULL;
	if (k8s_list_pods_paged(c, "ns", "app=x", NULL, 500, count_page, NULL, &items, &rv, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(items, 6);
	assert_string_equal(rv, "7");
	free(rv);
	assert_int_equal(s->requests, 4);
	int want[] = { 500, 250, 125, 125 };
	for (int i = 0; i < 4; i++)
		assert_int_equal(query_int(s->lines[i], "limit="), want[i]);
	assert_null(strstr(s->lines[2], "continue="));
	assert_non_null(strstr(s->lines[3], "continue=c1"));
	k8s_client_free(c);
	server_stop(s);
}

static void answer_bomb_pages(struct server *s, int conn, const char *line, int nth)
{
	send_bomb(s, conn, "200 OK", 3u << 20);
}

static void test_a_page_of_one_pod_too_large_is_an_error(void **state)
{
	struct server *s = server_start(answer_bomb_pages);
	struct k8s_client *c = client_of(s);
	np_error err;
	size_t items;
	assert_int_equal(list_counted(c, 500, &items, &err), -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "?limit=1: the answer"));
	assert_non_null(strstr(err.msg, "would take more than 64 MiB of memory to parse"));
	int want[] = { 500, 250, 125, 62, 31, 15, 7, 3, 1 };
	assert_int_equal(s->requests, 9);
	for (int i = 0; i < 9; i++)
		assert_int_equal(query_int(s->lines[i], "limit="), want[i]);
	assert_int_equal(items, 0);
	k8s_client_free(c);
	server_stop(s);
}

/* limit=500: too large to parse; fewer: three pods, the list's end. */
static void answer_500_refused(struct server *s, int conn, const char *line, int nth)
{
	if (query_int(line, "limit=") >= 500)
		send_bomb(s, conn, "200 OK", 2u << 20);
	else
		send_pods(s, conn, 3, "");
}

/* A page refused for its size is not asked for again: the next list of
 * the same client starts at the half that was taken. */
static void test_a_list_after_a_refused_page_starts_at_the_half_taken(void **state)
{
	struct server *s = server_start(answer_500_refused);
	struct k8s_client *c = client_of(s);
	np_error err;
	size_t items;
	for (int round = 0; round < 2; round++) {
		if (list_counted(c, 500, &items, &err) != 0)
			fail_msg("%s", err.msg);
		assert_int_equal(items, 3);
	}
	int want[] = { 500, 250, 250 };
	assert_int_equal(s->requests, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(query_int(s->lines[i], "limit="), want[i]);
	k8s_client_free(c);
	server_stop(s);
}

/* A page of n pods, each a real pod carrying 4,000 empty objects (about
 * 12 KB more on the wire, and a megabyte or so to parse), continued by
 * cont ("": the last page). */
static char *fat_page(int n, const char *cont, size_t *len)
{
	json_t *items = json_array();
	for (int i = 0; i < n; i++) {
		json_t *pod = real_pod(i), *x = json_array();
		for (int k = 0; k < 4000; k++)
			json_array_append_new(x, json_object());
		json_object_set_new(pod, "x", x);
		json_array_append_new(items, pod);
	}
	return dump(json_pack("{s:s,s:{s:s,s:s},s:o}", "kind", "PodList", "metadata",
			      "resourceVersion", "7", "continue", cont, "items", items),
		    len);
}

/* Two such pods a page (fewer if fewer are asked), three pages: c1, c2,
 * then the end; every list starts again at c1. */
static void answer_fat_pages(struct server *s, int conn, const char *line, int nth)
{
	int limit = query_int(line, "limit=");
	const char *cont = strstr(line, "continue=c2") ? "" : strstr(line, "continue=c1") ? "c2" : "c1";
	size_t len;
	char *b = fat_page(limit < 2 ? limit : 2, cont, &len);
	head(s, conn, "200 OK", len);
	put(s, conn, b, len);
	free(b);
}

static void test_pages_are_asked_for_as_many_items_as_fit(void **state)
{
	/* What the first page's two pods take to parse, as the client
	 * measures it: the pages after it are asked for as many as fit in
	 * three quarters of the parse's ceiling. */
	size_t len, used = 0;
	bool over = false;
	json_error_t je;
	char *b = fat_page(2, "c1", &len);
	json_t *j = k8s_json_parse_used(b, len, K8S_PARSE_MAX, &je, &over, &used);
	assert_non_null(j);
	json_decref(j);
	free(b);
	int fit = (int)k8s_page_fit(500, 2, used);
	/* a page of 500 of them would not parse within the ceiling */
	assert_true(used / 2 * 500 > K8S_PARSE_MAX);
	assert_true(fit >= 2 && fit < 250);

	struct server *s = server_start(answer_fat_pages);
	struct k8s_client *c = client_of(s);
	np_error err;
	size_t items;
	if (list_counted(c, 500, &items, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(items, 6);
	if (list_counted(c, 500, &items, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(items, 6);
	int want[] = { 500, fit, fit, fit, fit, fit };
	assert_int_equal(s->requests, 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(query_int(s->lines[i], "limit="), want[i]);
	k8s_client_free(c);
	server_stop(s);
}

static void test_the_page_fit(void **state)
{
	assert_int_equal(k8s_page_fit(500, 0, 0), 500);	       /* nothing measured */
	assert_int_equal(k8s_page_fit(500, 10, 0), 500);
	assert_int_equal(k8s_page_fit(500, 10, 10u << 20), 48); /* 1 MiB each: 48 in 48 MiB */
	assert_int_equal(k8s_page_fit(20, 10, 10u << 20), 20);  /* never more than asked */
	assert_int_equal(k8s_page_fit(500, 1, 100u << 20), 1);  /* at least one */
	assert_int_equal(k8s_page_fit(500, 100, 100u * 4096), 500);
	assert_int_equal(k8s_page_fit(SIZE_MAX, 3, (3u << 20) + 1), 47); /* each rounded up */
}

/* Whatever the limit, three pods: a server that does not page. */
static void answer_three_pods(struct server *s, int conn, const char *line, int nth)
{
	send_pods(s, conn, 3, "");
}

static void test_a_page_of_more_pods_than_asked_is_an_error(void **state)
{
	struct server *s = server_start(answer_three_pods);
	struct k8s_client *c = client_of(s);
	np_error err;
	size_t items;
	assert_int_equal(list_counted(c, 2, &items, &err), -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "?limit=2: the answer has 3 pods, more than the 2 asked for"));
	assert_int_equal(s->requests, 1);
	assert_int_equal(items, 0);
	/* as many as asked: the page is taken */
	if (list_counted(c, 3, &items, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(items, 3);
	k8s_client_free(c);
	server_stop(s);
}

static void answer_403_bomb(struct server *s, int conn, const char *line, int nth)
{
	send_bomb(s, conn, "403 Forbidden", 8u << 20);
}

static int never(enum k8s_watch_type type, json_t *obj, void *ud)
{
	return -1;
}

/* A watch refused with a large body: its message from the first 64 KiB,
 * the rest not received. */
static void test_a_watch_reads_an_error_body_only_as_far_as_its_message(void **state)
{
	struct server *s = server_start(answer_403_bomb);
	struct k8s_client *c = client_of(s);
	np_error err = { 0 };
	assert_int_equal(k8s_watch_pods(c, "ns", NULL, NULL, "5", never, NULL, &err), -1);
	assert_int_equal(err.status, NP_EK8S);
	assert_non_null(strstr(err.msg, "forbidden: the Role needs \"watch\" on \"pods\""));
	assert_int_equal(s->requests, 1);
	assert_true(s->sent < (8u << 20));
	k8s_client_free(c);
	server_stop(s);
}

int main(void)
{
	/* as cmd/nicpick/main.c does */
	np_json_budget_install();
	assert_true(np_json_budget_installed());
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_budget_refuses_what_amplifies_and_frees_it),
		cmocka_unit_test(test_real_pods_and_pages_fit_their_budget),
		cmocka_unit_test(test_a_budget_is_per_thread),
		cmocka_unit_test(test_the_arena_leaves_the_budget_installed),
		cmocka_unit_test(test_the_limits),
		cmocka_unit_test(test_a_watch_event_that_amplifies_is_refused),
		cmocka_unit_test(test_an_object_larger_than_an_object_can_be_is_refused),
		cmocka_unit_test(test_an_object_that_amplifies_is_refused),
		cmocka_unit_test(test_an_error_body_is_read_only_as_far_as_its_message),
		cmocka_unit_test(test_a_page_too_large_is_asked_again_for_half_as_many),
		cmocka_unit_test(test_a_page_of_one_pod_too_large_is_an_error),
		cmocka_unit_test(test_a_page_of_more_pods_than_asked_is_an_error),
		cmocka_unit_test(test_a_list_after_a_refused_page_starts_at_the_half_taken),
		cmocka_unit_test(test_pages_are_asked_for_as_many_items_as_fit),
		cmocka_unit_test(test_the_page_fit),
		cmocka_unit_test(test_a_watch_reads_an_error_body_only_as_far_as_its_message),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
