/* Internals of lib/k8s shared between its files and its unit tests.
 * Nothing outside lib/k8s and tests/unit/test_k8s_*.c includes this. */
#ifndef NP_K8S_PRIV_H
#define NP_K8S_PRIV_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "k8s/k8s.h"
#include "k8s/kubeconfig.h"

/* Every answer without metadata.managedFields, which nicpick never reads:
 * Accept's drop=metadata.managedFields (KEP-5958).  kube-apiserver honours
 * it from v1.38 with the ManagedFieldsOptOut feature gate (alpha, off by
 * default; kubernetes/kubernetes#139561): GET, LIST, WATCH and the answers
 * to writes leave the field out, the stored object keeps it.  Without the
 * gate, and before v1.38, "drop" is a media type parameter negotiation does
 * not know, which it ignores (apiserver/pkg/endpoints/handlers/negotiation/
 * negotiate.go, acceptMediaTypeOptions: Unrecognized): the answer is the
 * same as without it. */
#define K8S_DROP ";drop=metadata.managedFields"
#define K8S_ACCEPT_JSON "application/json" K8S_DROP
/* client-go/metadata/metadata.go, JSON only (nicpick speaks no protobuf),
 * each clause without managedFields (K8S_DROP).  kube-apiserver renders
 * the answer to any verb this way: GET, LIST and WATCH, and the answers
 * to PATCH and POST (handlers/patch.go and create.go negotiate the output
 * media type and transformResponseObject renders the object as asked). */
#define K8S_ACCEPT_META_LIST \
	"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1" K8S_DROP "," K8S_ACCEPT_JSON
#define K8S_ACCEPT_META "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1" K8S_DROP "," K8S_ACCEPT_JSON

/* libcurl, loaded on first use (curl.c).  The macros below route every
 * curl call in lib/k8s through the table. */
struct k8s_curl_api {
	bool loaded;
	__typeof__(&curl_global_init) global_init;
	__typeof__(&curl_global_cleanup) global_cleanup;
	__typeof__(&curl_easy_init) easy_init;
	__typeof__(&curl_easy_cleanup) easy_cleanup;
	__typeof__(&curl_easy_reset) easy_reset;
	__typeof__(&curl_easy_perform) easy_perform;
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	__typeof__(&curl_easy_strerror) easy_strerror;
	__typeof__(&curl_easy_escape) easy_escape;
	__typeof__(&curl_free) free;
	__typeof__(&curl_slist_append) slist_append;
	__typeof__(&curl_slist_free_all) slist_free_all;
	__typeof__(&curl_url) url;
	__typeof__(&curl_url_cleanup) url_cleanup;
	__typeof__(&curl_url_get) url_get;
	__typeof__(&curl_url_set) url_set;
	__typeof__(&curl_share_init) share_init;
	__typeof__(&curl_share_cleanup) share_cleanup;
	CURLSHcode (*share_setopt)(CURLSH *, CURLSHoption, ...);
	__typeof__(&curl_easy_pause) easy_pause;
	__typeof__(&curl_version_info) version_info;
	__typeof__(&curl_multi_init) multi_init;
	__typeof__(&curl_multi_cleanup) multi_cleanup;
	CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
	__typeof__(&curl_multi_add_handle) multi_add_handle;
	__typeof__(&curl_multi_remove_handle) multi_remove_handle;
	__typeof__(&curl_multi_perform) multi_perform;
	__typeof__(&curl_multi_poll) multi_poll;
	__typeof__(&curl_multi_info_read) multi_info_read;
	__typeof__(&curl_multi_strerror) multi_strerror;
};
extern struct k8s_curl_api k8s_curl;
/* Load libcurl once; every entry point that uses curl calls this first. */
int k8s_curl_load(np_error *err);

#ifndef K8S_CURL_DIRECT
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init(...) k8s_curl.global_init(__VA_ARGS__)
#define curl_global_cleanup(...) k8s_curl.global_cleanup(__VA_ARGS__)
#define curl_easy_init(...) k8s_curl.easy_init(__VA_ARGS__)
#define curl_easy_cleanup(...) k8s_curl.easy_cleanup(__VA_ARGS__)
#define curl_easy_reset(...) k8s_curl.easy_reset(__VA_ARGS__)
#define curl_easy_perform(...) k8s_curl.easy_perform(__VA_ARGS__)
#define curl_easy_setopt(...) k8s_curl.easy_setopt(__VA_ARGS__)
#define curl_easy_getinfo(...) k8s_curl.easy_getinfo(__VA_ARGS__)
#define curl_easy_strerror(...) k8s_curl.easy_strerror(__VA_ARGS__)
#define curl_easy_escape(...) k8s_curl.easy_escape(__VA_ARGS__)
#define curl_free(...) k8s_curl.free(__VA_ARGS__)
#define curl_slist_append(...) k8s_curl.slist_append(__VA_ARGS__)
#define curl_slist_free_all(...) k8s_curl.slist_free_all(__VA_ARGS__)
#define curl_url(...) k8s_curl.url(__VA_ARGS__)
#define curl_url_cleanup(...) k8s_curl.url_cleanup(__VA_ARGS__)
#define curl_url_get(...) k8s_curl.url_get(__VA_ARGS__)
#define curl_url_set(...) k8s_curl.url_set(__VA_ARGS__)
#undef curl_share_setopt
#define curl_share_init(...) k8s_curl.share_init(__VA_ARGS__)
#define curl_share_cleanup(...) k8s_curl.share_cleanup(__VA_ARGS__)
#define curl_share_setopt(...) k8s_curl.share_setopt(__VA_ARGS__)
#undef curl_multi_setopt
#define curl_easy_pause(...) k8s_curl.easy_pause(__VA_ARGS__)
#define curl_version_info(...) k8s_curl.version_info(__VA_ARGS__)
#define curl_multi_init(...) k8s_curl.multi_init(__VA_ARGS__)
#define curl_multi_cleanup(...) k8s_curl.multi_cleanup(__VA_ARGS__)
#define curl_multi_setopt(...) k8s_curl.multi_setopt(__VA_ARGS__)
#define curl_multi_add_handle(...) k8s_curl.multi_add_handle(__VA_ARGS__)
#define curl_multi_remove_handle(...) k8s_curl.multi_remove_handle(__VA_ARGS__)
#define curl_multi_perform(...) k8s_curl.multi_perform(__VA_ARGS__)
#define curl_multi_poll(...) k8s_curl.multi_poll(__VA_ARGS__)
#define curl_multi_info_read(...) k8s_curl.multi_info_read(__VA_ARGS__)
#define curl_multi_strerror(...) k8s_curl.multi_strerror(__VA_ARGS__)
#endif

#define K8S_BACKOFF_BASE_MS 100
#define K8S_BACKOFF_CAP_MS 2000
/* A watch that failed reopens after 800 ms, doubling, each wait jittered
 * up to twice as long: client-go's reflector (tools/cache/reflector.go,
 * NewExponentialBackoffManager(800ms, 30s, 2min, 2.0, 1.0)).  The cap is
 * 10 s, not 30 s: nicpick's whole run has a 300 s timeout by default. */
#define K8S_WATCH_BACKOFF_BASE_MS 800
#define K8S_WATCH_BACKOFF_CAP_MS 10000
/* Requests: client-go's defaults (rest/config.go DefaultQPS, DefaultBurst). */
#define K8S_DEFAULT_QPS 5.0
#define K8S_DEFAULT_BURST 10
/* New watch connections, whatever ended the last one: at most one every
 * 5 s, after a burst of 3 (a gatherer opens one per phase of a round). */
#define K8S_WATCH_OPEN_QPS 0.2
#define K8S_WATCH_OPEN_BURST 3
#define K8S_REQUEST_CAP_MS 30000 /* one non-watch request */
#define K8S_CONNECT_CAP_MS 10000
#define K8S_WATCH_CAP_S 300      /* timeoutSeconds of one watch request */
#define K8S_MAX_ATTEMPTS_NO_DEADLINE 8

/* What one answer may be, by kind, and what parsing it may take.  A cap
 * on bytes alone does not bound memory: jansson makes each value of
 * `[{},{},...]` an object of some 90 times its 3 bytes.
 *
 * One object (a Pod, a Job, a PyTorchJob...: the answer to its GET, PATCH
 * or POST).  etcd refuses a request larger than 1.5 MiB unless its
 * --max-request-bytes says otherwise (etcd.io/docs/v3.5/dev-guide/limit,
 * "Request size limit"), so no stored object is larger; kube-apiserver
 * takes the same object as a JSON body of up to twice that
 * (kubernetes/kubernetes, staging/src/k8s.io/apiserver/pkg/server/config.go,
 * MaxRequestBodyBytes = 3 MiB: "A request body might be encoded in json,
 * and is converted to proto when persisted in etcd, so we allow 2x").
 * 4 MiB leaves room over that for what the server adds (managedFields,
 * status).  A watch event is one object in an envelope. */
#define K8S_MAX_OBJECT (4u << 20)
#define K8S_MAX_LINE (K8S_MAX_OBJECT + 4096u)
/* An answer that is not 2xx: only its Status' reason and message are read,
 * from this much at most; the rest is not received (the transfer ends). */
#define K8S_MAX_STATUS (64u << 10)
/* A page of a list, `limit` pods at most: on average this much a pod, as
 * a bound (a real pod is 5-15 KB, tools/kubeapi/realism.py; nicpick's
 * annotations on it a few KB more, each at most 16 KiB,
 * EXCHANGE_MSG_MAX_BYTES), and never less than K8S_MAX_OBJECT (one
 * large pod) nor more than K8S_MAX_LIST (k8s_page_max).  K8S_LIST_PAGE
 * (500) pods, the pages nicpick asks for: 31.25 MiB. */
#define K8S_MAX_LIST_ITEM (64u << 10)
/* A list in one answer, without a limit (k8s_list_pods; every list of
 * nicpick's own is paged). */
#define K8S_MAX_LIST (64u << 20)
/* The parse of an answer of len bytes may allocate K8S_PARSE_FACTOR * len
 * + K8S_PARSE_SLACK, as malloc charges it (util/jsonmem.h), and never more
 * than K8S_PARSE_MAX but for a list in one answer.  Measured with jansson
 * 2.14: a real pod takes 9-13 times its JSON, its managedFields alone 22
 * times, `[{},{},...]` 90.  A page that needs more is asked again for half
 * as many pods (api.c). */
#define K8S_PARSE_FACTOR 32u
#define K8S_PARSE_SLACK (1u << 20)
#define K8S_PARSE_MAX (64u << 20)

/* The bounds of one request's answer (k8s_request_as). */
struct k8s_answer_limits {
	size_t max_body;  /* bytes of a 2xx answer */
	size_t max_parse; /* the parse's ceiling: K8S_PARSE_MAX, SIZE_MAX for none */
	const char *what; /* "one object", "a page of 500 pods": for the error */
};
/* A page of `limit` pods (limit 0: K8S_LIST_PAGE). */
size_t k8s_page_max(size_t limit);
/* How many items of the kind a page of `items` took `used` bytes to parse
 * fit in three quarters of K8S_PARSE_MAX (the rest for items larger than
 * those measured), as a page is asked for (at least 1, at most `limit`);
 * `limit` when nothing was measured. */
size_t k8s_page_fit(size_t limit, size_t items, size_t used);
/* What the parse of len bytes may allocate, at most max_parse. */
size_t k8s_parse_budget(size_t len, size_t max_parse);
/* JSON from the API server (NUL allowed: np_json_cstr) under that budget;
 * NULL with *over (may be NULL) true when the budget refused it. */
json_t *k8s_json_parse(const char *buf, size_t len, size_t max_parse, json_error_t *jerr,
		       bool *over);
/* The same, and *used (may be NULL) gets what the parse allocated. */
json_t *k8s_json_parse_used(const char *buf, size_t len, size_t max_parse, json_error_t *jerr,
			    bool *over, size_t *used);
/* "4 MiB", "64 KiB", "31.2 MiB" */
const char *k8s_size_text(size_t n, char *buf, size_t len);

/* limit.c: a token bucket (pure, for tests) and a lockable one. */
struct k8s_bucket {
	double qps; /* <= 0: unlimited */
	double tokens;
	int burst;
	int64_t last_ms;
};
void k8s_bucket_init(struct k8s_bucket *b, double qps, int burst);
/* Take one token at now_ms; the ms to wait before using it (0: now). */
long k8s_bucket_take(struct k8s_bucket *b, int64_t now_ms);
struct k8s_limiter {
	pthread_mutex_t mu;
	struct k8s_bucket b;
};
/* d = min(cap, base * 2^attempt), then uniform in [d, 2d]. */
long k8s_backoff_jitter_ms(unsigned attempt, long base_ms, long cap_ms, uint32_t rnd);

/* A growable byte buffer, always NUL-terminated when data != NULL. */
struct k8s_buf {
	char *data;
	size_t len, cap;
};
int k8s_buf_append(struct k8s_buf *b, const char *p, size_t n);
/* n more bytes of an answer that is not 2xx, kept up to K8S_MAX_STATUS
 * (enough for its Status' message).  n when all were kept; 0 when the rest
 * is not needed, with *cut set: the write callback returns 0 to end the
 * transfer, and k8s_perform takes the answer as whole. */
size_t k8s_status_body_append(struct k8s_buf *b, const char *p, size_t n, bool *cut);
void k8s_buf_free(struct k8s_buf *b);

/* What a process's clients share (k8s_client_new_like): TLS sessions, so
 * that a second connection resumes the first one's session instead of a
 * full handshake and certificate verification, and the DNS cache. */
struct k8s_share {
	CURLSH *sh;
	pthread_mutex_t mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t refmu;
	int refs;
};

/* The transfers of a client and its twins (k8s_client_new_twin): one
 * curl multi handle, so one pool of connections, over which curl
 * multiplexes their requests and watches as HTTP/2 streams when the
 * server offers h2 by ALPN (client-go's one connection a process), and
 * keeps two connections to an HTTP/1.1 server.  Twins are driven by one
 * thread only: no lock between them. */
struct k8s_multi {
	CURLM *m;
	int refs;
	long http_version; /* of the last response (CURLINFO_HTTP_VERSION), 0: none yet */
};

struct k8s_client {
	CURL *curl;
	struct k8s_share *share; /* NULL: none */
	struct k8s_multi *multi; /* its own, or shared with its twins */
	bool twin;               /* one of twins: HTTP/2 where offered */
	/* the end of this client's transfer, as the multi reported it (also
	 * while a twin's transfer drove the multi) */
	bool done;
	CURLcode result;
	struct k8s_config cfg;
	int64_t deadline_ms; /* 0: none */
	uint32_t rng;
	struct k8s_stats stats;
	/* the token as last read, and what the file looked like then */
	char *token;
	struct timespec token_mtime;
	ino_t token_ino;
	off_t token_size;
	char *reporting_instance; /* Events: who reports */
	/* called every tick_ms while a transfer runs (k8s_client_set_tick) */
	void (*tick)(void *ud);
	void *tick_ud;
	int64_t tick_ms, next_tick;
	/* the caller's work beside a request or a wait (k8s_client_set_idle) */
	void (*idle)(void *ud, struct np_wait *w);
	void *idle_ud;
	/* the run's cancellation (util/cancel.h): a transfer or a back-off
	 * under way ends within about a second */
	const volatile sig_atomic_t *cancel;
	long last_http; /* status of the last response, 0 when none came */
	/* The last request failed because its answer was too large to read
	 * or to parse (k8s_answer_limits): a page is then asked again smaller. */
	bool last_oversize;
	/* The memory the last 2xx answer's parse allocated (0: not parsed). */
	size_t last_parse_used;
	/* How many items a page of this client's lists is asked for
	 * (k8s_list_paged_as): the fewest that a refused page's half and the
	 * last page's measure allow (k8s_page_fit), for the resource they
	 * were learned of; a re-list starts there instead of at a page that
	 * would be refused again. */
	struct k8s_page_hint {
		char resource[32];
		size_t ceiling; /* half of the last refused page; 0: none refused */
		size_t fit;	/* what the last page's items' parse allows; 0: unknown */
	} page_hint;
	struct k8s_exec_cred cred; /* from cfg.exec, until it expires or a 401 */
	/* tls_server_name: the URL names it, curl connects to the server's
	 * host (CONNECT_TO), and Host: stays the server's, as client-go does */
	char *base_url;
	struct curl_slist *connect_to;
	char *host_header;
	/* the watch's buffer (k8s_wbuf): its limit (0: K8S_WBUF_MAX; the
	 * tests set less) and how often a watch of this client was paused */
	size_t watch_buf_max;
	uint64_t watch_pauses;
	/* rate limits: requests (lim: own_lim or one shared by the process's
	 * clients) and this client's new watches */
	struct k8s_limiter own_lim;
	struct k8s_limiter *lim;
	struct k8s_bucket watch_opens;
};

/* Wait for a token of l (bounded by c's deadline). */
int k8s_limit_wait(struct k8s_client *c, struct k8s_limiter *l, const char *what, np_error *err);

/* One HTTP attempt.  With write_fn NULL the body is collected into resp. */
struct k8s_xfer {
	const char *method;
	const char *path;
	const char *body;
	size_t body_len;
	const char *content_type;
	/* The Accept header's value for this transfer; NULL: K8S_ACCEPT_JSON. */
	const char *accept;
	long cap_ms; /* per-request timeout cap; 0: K8S_REQUEST_CAP_MS */
	size_t (*write_fn)(char *p, size_t size, size_t nmemb, void *ud);
	void *write_ud;
	/* Without write_fn: the most a 2xx answer may be (0: K8S_MAX_OBJECT);
	 * any other answer is kept up to K8S_MAX_STATUS. */
	size_t max_body;
	CURL *easy; /* the handle while it runs (the write callback asks it the status) */
	/* results */
	CURLcode cc;
	long http;
	curl_off_t retry_after; /* seconds from the Retry-After header, 0 if none */
	bool deadline_hit;
	/* The server refused the TLS handshake (a fatal alert, no common
	 * version): every attempt would fail the same way. */
	bool tls_refused;
	/* A 2xx answer larger than max_body: refused, not read further. */
	bool oversize;
	/* An error's body cut at K8S_MAX_STATUS: the answer is complete
	 * enough for its message, though curl reports a write error. */
	bool status_cut;
	/* curl's text, then (k8s_perform) what it means: "DNS: ..." for a
	 * name that did not resolve in time, the refusal explained. */
	char errbuf[CURL_ERROR_SIZE + 256];
	struct k8s_buf resp;
	/* Called between curl_multi_perform calls while the transfer runs,
	 * never from inside curl: the watch delivers its events from there,
	 * and what its callback does (requests on a twin) drives the same
	 * multi.  Non-zero ends the transfer. */
	int (*pump)(void *ud);
	void *pump_ud;
	/* What pump's caller waits for besides the transfer, as pump last
	 * set it (none after k8s_xfer_reset). */
	struct np_wait pump_wait;
};

/* config.c */
char *k8s_server_url(const char *host, const char *port);
/* Re-read the token file when forced or when its mtime/inode/size changed. */
int k8s_token_refresh(struct k8s_client *c, bool force, np_error *err);
/* false when out of memory (dst is then still safe to free) */
bool k8s_config_copy(struct k8s_config *dst, const struct k8s_config *src);

/* client.c */
int64_t k8s_remaining_ms(const struct k8s_client *c); /* INT64_MAX: no deadline */
uint32_t k8s_rand(struct k8s_client *c);

/* http.c */
int k8s_perform(struct k8s_client *c, struct k8s_xfer *x, np_error *err);
void k8s_xfer_reset(struct k8s_xfer *x);

/* retry.c */
/* Full jitter: uniform in [0, min(cap, base * 2^attempt)]. */
long k8s_backoff_ms(unsigned attempt, long base_ms, long cap_ms, uint32_t rnd);
/* Wait before a retry: Retry-After header seconds, else the Status'
 * details.retryAfterSeconds, else -1 (use backoff). */
long k8s_retry_after_ms(curl_off_t header_s, const json_t *status);
/* Sleep ms; when that would end past the deadline, sleep until the deadline
 * and fail with "deadline exceeded while WHAT". */
int k8s_wait(struct k8s_client *c, long ms, const char *what, np_error *err);
/* k8s_wait, which also ends when also is ready or due: 1 then, 0 when ms
 * passed.  also NULL: k8s_wait. */
int k8s_wait_also(struct k8s_client *c, long ms, const char *what, const struct np_wait *also,
		  np_error *err);
bool k8s_curl_retryable(CURLcode cc);

/* curl.c */
/* libcurl speaks HTTP/2 (built with nghttp2): twins then ask for h2. */
bool k8s_curl_has_http2(void);
/* libcurl's TLS library is OpenSSL (the release build's, or the
 * system's), which reads K8S_TLS_GROUPS_POD's list syntax. */
bool k8s_curl_is_openssl(void);
/* An HTTP/2 stream may be paused and resumed safely: libcurl 8.14.0 and
 * later.  Up to 8.0.1 one stream's data waiting to be read held the whole
 * connection (lib/http2.c of 7.88.1, pause_stream_id: a paused watch would
 * stall its twin's requests); 8.1.0 gave each stream its own buffer and
 * window, but until 8.14.0 a stream resumed kept a window of 0 and stalled
 * (curl/curl#16955, fixed by 5fbd78eb2d "http2: fix stream window size
 * after unpausing"). */
bool k8s_curl_h2_pause_ok(void);

/* http.c: what a failed transfer's curl text means, for the error line: sets
 * x->tls_refused and rewrites x->errbuf (also for the tests). */
void k8s_xfer_explain(struct k8s_xfer *x);
/* One request with its retries.  accept: the Accept header's value; NULL
 * asks for what the caller reads: the whole object (K8S_ACCEPT_JSON) when
 * out takes the answer, its metadata only (K8S_ACCEPT_META) when nothing
 * reads it. */
int k8s_request(struct k8s_client *c, const char *method, const char *path,
		const json_t *body, const char *content_type, const char *accept, json_t **out,
		np_error *err);
/* The same with the bounds of its answer given (NULL: as k8s_request
 * takes them: one object for a request that names one of the API's
 * objects or writes one, else a list in one answer). */
int k8s_request_as(struct k8s_client *c, const char *method, const char *path,
		   const json_t *body, const char *content_type, const char *accept,
		   const struct k8s_answer_limits *lim, json_t **out, np_error *err);

/* api.c: k8s_list_pods, k8s_list_pods_paged and k8s_list_paged with the Accept header's
 * value for each list request (NULL: K8S_ACCEPT_JSON); a metadata-only
 * watch lists with K8S_ACCEPT_META_LIST. */
int k8s_list_pods_as(struct k8s_client *c, const char *ns, const char *label_selector,
		     const char *field_selector, const char *accept, json_t **list, np_error *err);
int k8s_list_pods_paged_as(struct k8s_client *c, const char *ns, const char *label_selector,
			   const char *field_selector, const char *accept, size_t limit,
			   int (*page)(json_t *list, void *ud), void (*restart)(void *ud), void *ud,
			   char **rv, np_error *err);
int k8s_list_paged_as(struct k8s_client *c, const struct k8s_list_query *q, const char *accept,
		      int (*page)(json_t *list, void *ud), void (*restart)(void *ud), void *ud,
		      char **rv, np_error *err);

/* status.c: who needs which RBAC rule for a request */
struct k8s_rbac {
	char verb[24];
	char group[64];
	char resource[96]; /* "pods" or "pods/status" */
	char ns[128];
	char name[256];
};
int k8s_rbac_from_request(const char *method, const char *path, struct k8s_rbac *r);
/* Turn a failed response into err (NP_EK8S): Status reason and message,
 * the RBAC rule for 403, the token file for 401. */
int k8s_status_error(np_error *err, const char *method, const char *path, long http,
		     const char *body, size_t body_len, const char *token_file);

/* api.c: paths.  Each piece is URL-escaped. */
char *k8s_object_path(const char *prefix, const char *ns, const char *resource,
		      const char *name);
int k8s_query_add(char **path, const char *key, const char *value);

/* watch.c: newline-delimited stream splitter.  The callback sees each
 * non-empty line without its "\n" (or "\r\n"); its non-zero return stops
 * feeding and is returned. */
#define K8S_LINEBUF_OVERFLOW (-1001)
#define K8S_LINEBUF_NOMEM (-1002)
typedef int (*k8s_line_fn)(const char *line, size_t len, void *ud);
struct k8s_linebuf {
	struct k8s_buf pending;
	size_t max_line;
};
int k8s_linebuf_feed(struct k8s_linebuf *lb, const char *data, size_t n, k8s_line_fn fn,
		     void *ud);
void k8s_linebuf_free(struct k8s_linebuf *lb);

/* The bytes a watch received and has not yet delivered: curl's write
 * callback only appends to it (k8s_wbuf_take), the watch's loop between
 * curl_multi_perform calls feeds it to the line splitter.  Above max
 * unprocessed bytes the transfer is paused (CURL_WRITEFUNC_PAUSE) where
 * pausing is safe, and resumed once drained; where it is not (HTTP/2 on
 * libcurl < 8.14.0, k8s_curl_h2_pause_ok) up to hard_max, then the watch
 * is given up and resumed from the last event delivered. */
#define K8S_WBUF_MAX (1u << 20)
#define K8S_WBUF_HARD_MAX (64u << 20)
struct k8s_wbuf {
	struct k8s_buf raw, spare;
	size_t max, hard_max;
	bool paused;
};
enum { K8S_WBUF_TAKEN, K8S_WBUF_PAUSE, K8S_WBUF_FULL };
/* What the write callback does with n bytes: take them, ask curl to pause
 * (can_pause: the transfer may be paused safely; nothing is taken), or
 * refuse them (full beyond hard_max, or out of memory). */
int k8s_wbuf_take(struct k8s_wbuf *b, const char *p, size_t n, bool can_pause);
/* Hand the unprocessed bytes to fn (k8s_linebuf_feed's signature) until
 * none are left or fn returns non-zero (returned); bytes that arrive
 * while fn runs (a callback that drives the multi) are handed on too.
 * resume(ud) is called to unpause a paused transfer once drained, and may
 * itself add bytes. */
int k8s_wbuf_drain(struct k8s_wbuf *b, int (*fn)(const char *p, size_t n, void *ud),
		   void (*resume)(void *ud), void *ud);
void k8s_wbuf_free(struct k8s_wbuf *b);

/* One line of a watch stream, decoded (pure; fuzzed with the splitter).
 * ev is the parsed line (json_decref it, also on error), object borrowed
 * from it; why says what is wrong with a malformed line. */
enum { K8S_EVENT_MALFORMED = -1, K8S_EVENT_TYPED, K8S_EVENT_ERROR, K8S_EVENT_UNKNOWN };
struct k8s_watch_event {
	json_t *ev;
	json_t *object;
	enum k8s_watch_type type; /* K8S_EVENT_TYPED */
	bool oversize; /* malformed because its parse would take more than K8S_PARSE_MAX */
	char why[160];
};
int k8s_watch_event_decode(const char *line, size_t len, struct k8s_watch_event *out);

/* events.c: the Event body (pure, for tests).  now is the wall clock. */
json_t *k8s_event_build(const json_t *pod, const char *ns, const char *reason,
			const char *message, const char *type, const char *instance,
			const struct timespec *now);

#endif
