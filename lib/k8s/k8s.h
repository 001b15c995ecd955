/* A minimal Kubernetes API client: in-cluster config, get / list / merge
 * patch / watch of pods, Jobs, and core/v1 Events.  libcurl + jansson.
 *
 * Every call is bounded by the client's one deadline; retries (429 with
 * Retry-After, 5xx, dropped connections, timeouts) happen inside the calls.
 * Errors carry status NP_EK8S and the API server's Status reason and message. */
#ifndef NP_K8S_H
#define NP_K8S_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"
#include "k8s/tls_groups.h"
#include "util/wait.h"

#define K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct k8s_exec;

struct k8s_config {
	char *server;     /* "https://host:port", no trailing slash */
	char *ca_file;    /* NULL with insecure_skip_tls_verify, ca_pem, or a kubeconfig naming no CA */
	char *token_file; /* NULL: send no Authorization header */
	char *namespace;  /* the pod's namespace (always set after load) */
	char *pod_name;   /* NULL when unknown */
	bool insecure_skip_tls_verify;
	/* From a kubeconfig (k8s/kubeconfig.h); NULL when unset. */
	char *token;                              /* a fixed bearer token */
	char *ca_pem, *client_cert_pem, *client_key_pem; /* PEM data */
	char *client_cert_file, *client_key_file; /* PEM files */
	char *tls_server_name;                    /* verified and sent as SNI instead of the host */
	struct k8s_exec *exec;                    /* credential plugin, run when needed */
	/* The key exchange groups offered, the first with a key share
	 * (OpenSSL's list syntax; used only when libcurl's TLS library is
	 * OpenSSL); NULL: the TLS library's own, X25519MLKEM768 first on
	 * OpenSSL 3.5.  A static string, never freed. */
	const char *tls_groups;
};

/* Command-line overrides; NULL / false fields fall back to the pod's
 * environment.  sa_dir replaces K8S_SA_DIR (tests, offline replay). */
struct k8s_config_overrides {
	const char *api_server;
	const char *ca_file;
	const char *token_file;
	const char *namespace;
	const char *pod_name;
	const char *sa_dir;
	bool insecure_skip_tls_verify;
};

/* Fill *cfg from overrides, then KUBERNETES_SERVICE_HOST/PORT, POD_NAME,
 * POD_NAMESPACE and the service-account directory.  Free with
 * k8s_config_free() (also after a failure). */
int k8s_config_load(struct k8s_config *cfg, const struct k8s_config_overrides *ov,
		    np_error *err);
void k8s_config_free(struct k8s_config *cfg);

struct k8s_client;

struct k8s_stats {
	uint64_t requests;       /* HTTP requests sent, retries included */
	uint64_t retries;        /* of which were retries */
	uint64_t bytes_sent;     /* request headers + bodies */
	uint64_t bytes_received; /* response headers + bodies */
	uint64_t connects;       /* new connections (keep-alive reuses one) */
	uint64_t watches;        /* watch connections opened */
	uint64_t throttled_ms;   /* time waited for the rate limiter */
};

/* The client keeps its own copy of cfg. */
int k8s_client_new(struct k8s_client **out, const struct k8s_config *cfg, np_error *err);
void k8s_client_free(struct k8s_client *c);
/* A second client of like's configuration: the same request limiter, and
 * TLS sessions and DNS answers shared with like (a process's connections
 * then cost one full TLS handshake, not one each).  Free it before the
 * limiter like uses. */
int k8s_client_new_like(struct k8s_client **out, struct k8s_client *like, np_error *err);
/* A twin of sib: like k8s_client_new_like, and its transfers and sib's go
 * over one pool of connections.  Both then ask for HTTP/2 (ALPN h2, then
 * http/1.1) and curl multiplexes their requests and watches over ONE
 * connection when the server offers h2, as client-go does; an HTTP/1.1
 * server gets one connection per transfer under way (two).  A watch's
 * callback may make requests on the twin: the watch's stream is still
 * received meanwhile.  Twins must be used from one thread (no locks
 * between them); a client that another thread uses is made with
 * k8s_client_new_like.  Either may be freed first (the pool goes with the
 * last), unless the twin still draws on sib's own limiter (as with
 * k8s_client_new_like).  A libcurl without HTTP/2 keeps HTTP/1.1. */
int k8s_client_new_twin(struct k8s_client **out, struct k8s_client *sib, np_error *err);

/* Monotonic clock in milliseconds, the time base of deadlines. */
int64_t k8s_mono_ms(void);
/* Absolute deadline (k8s_mono_ms() base) for everything the client does;
 * 0 means none.  k8s_client_set_timeout() sets it to now + seconds. */
void k8s_client_set_deadline(struct k8s_client *c, int64_t deadline_ms);
void k8s_client_set_timeout(struct k8s_client *c, double seconds);

/* Call tick(ud) about every interval_ms while a request or watch is under
 * way, so that a caller blocked in a long watch can still say what it waits
 * for.  tick NULL turns it off. */
void k8s_client_set_tick(struct k8s_client *c, int interval_ms, void (*tick)(void *ud), void *ud);
/* Call idle(ud, w) while a request of c's (a re-list's pages too) or a
 * wait between its retries is under way: between curl's steps, and again
 * when what it set in w (an fd's readiness, a time) comes, so that work
 * that never blocks (a probe) goes on while the API server is slow.  It
 * must not use the client.  A watch's own side work (k8s_watch_opts.side)
 * runs instead of it while the watch's connection is open.  NULL: none. */
void k8s_client_set_idle(struct k8s_client *c, void (*idle)(void *ud, struct np_wait *w), void *ud);
/* Once *cancel is non-zero (a signal's number, set by cmd/), what the
 * client does ends within about a second with "stopped by SIGTERM while
 * ..." (util/cancel.h).  NULL: never. */
void k8s_client_set_cancel(struct k8s_client *c, const volatile sig_atomic_t *cancel);

/* Rate limits.  Every client waits for a token before each request
 * (retries and watches included): by default its own bucket of
 * 5 requests/s sustained, burst 10, as client-go's.  A limiter shared by
 * several clients bounds them together (a process's connections); set it
 * before the first request and free it after its clients. */
struct k8s_limiter;
int k8s_limiter_new(struct k8s_limiter **out, double qps, int burst, np_error *err);
void k8s_limiter_free(struct k8s_limiter *l);
/* Raise the burst (and the tokens there now) by extra. */
void k8s_limiter_add_burst(struct k8s_limiter *l, int extra);
/* NULL: the client's own default bucket again. */
void k8s_client_set_limiter(struct k8s_client *c, struct k8s_limiter *l);

void k8s_client_stats(const struct k8s_client *c, struct k8s_stats *st);
/* The HTTP status of the last response to a request (not a watch), 0 when
 * none came: lets a caller treat a 403 or 404 as an answer, not a failure. */
long k8s_client_last_http(const struct k8s_client *c);
const struct k8s_config *k8s_client_config(const struct k8s_client *c);

/* path is absolute ("/api/v1/namespaces/ns/pods/p"), query string included.
 * *out receives the decoded JSON response (caller json_decref's it). */
int k8s_get(struct k8s_client *c, const char *path, json_t **out, np_error *err);
/* Content-Type application/merge-patch+json (RFC 7386).  out may be NULL. */
int k8s_patch_merge(struct k8s_client *c, const char *path, const json_t *patch,
		    json_t **out, np_error *err);
/* POST a new object to a collection path.  out may be NULL. */
int k8s_create(struct k8s_client *c, const char *path, const json_t *obj, json_t **out,
	       np_error *err);

int k8s_get_pod(struct k8s_client *c, const char *ns, const char *name, json_t **pod,
		np_error *err);
int k8s_patch_pod(struct k8s_client *c, const char *ns, const char *name,
		  const json_t *patch, json_t **pod, np_error *err);
/* The pods of one page of a list (limit), when the caller names no other:
 * client-go's pager's (kubernetes/kubernetes@04791b49, staging/src/
 * k8s.io/client-go/tools/pager/pager.go, defaultPageSize 500).  Every
 * paged list of nicpick's asks for this many. */
#define K8S_LIST_PAGE 500

/* Selectors may be NULL; *list is the PodList (items + metadata.resourceVersion). */
int k8s_list_pods(struct k8s_client *c, const char *ns, const char *label_selector,
		  const char *field_selector, json_t **list, np_error *err);
/* batch/v1 Job; k8s_job_completions() is spec.completions or -1 when unset. */
int k8s_get_job(struct k8s_client *c, const char *ns, const char *name, json_t **job,
		np_error *err);
int k8s_job_completions(const json_t *job);

/* What a watch callback receives.  RELIST carries a whole PodList: the
 * consumer must REPLACE its view with list.items (objects may have been
 * deleted while the watch was gone).  It comes first when the watch starts
 * without a resourceVersion, and again after 410 Gone/Expired. */
enum k8s_watch_type {
	K8S_WATCH_ADDED,
	K8S_WATCH_MODIFIED,
	K8S_WATCH_DELETED,
	K8S_WATCH_BOOKMARK, /* object has only metadata.resourceVersion */
	K8S_WATCH_RELIST,
	/* A paged re-list (k8s_watch_opts.page_limit): BEGIN (object {}) means
	 * the consumer drops its view; every item of the list follows as
	 * ADDED, then END (object: the list's metadata).  After a 410 on an
	 * expired continue token BEGIN comes again. */
	K8S_WATCH_RELIST_BEGIN,
	K8S_WATCH_RELIST_END,
};

const char *k8s_watch_type_name(enum k8s_watch_type type);

/* Return 0 to continue, 1 to stop the watch (k8s_watch_pods returns 0),
 * negative on error (k8s_watch_pods returns it; set err via ud if wanted,
 * otherwise a generic message is used).  object is borrowed. */
typedef int (*k8s_watch_cb)(enum k8s_watch_type type, json_t *object, void *ud);

/* Watch pods until the callback stops it, an error, or the deadline.
 * resource_version NULL or "": list first (RELIST), then watch from there.
 * Bookmarks are requested; reconnects resume from the latest resourceVersion
 * seen (bookmarks included), with backoff after failures. */
int k8s_watch_pods(struct k8s_client *c, const char *ns, const char *label_selector,
		   const char *field_selector, const char *resource_version, k8s_watch_cb cb,
		   void *ud, np_error *err);

struct k8s_watch_opts {
	/* > 0: list in pages of this many pods (limit/continue), delivered as
	 * RELIST_BEGIN, ADDED..., RELIST_END: a job's list is never in one
	 * buffer.  0: one RELIST with the whole list. */
	size_t page_limit;
	/* Only the pods' metadata (name, uid, labels, annotations, ...):
	 * PartialObjectMetadata through the Accept header, as client-go's
	 * metadata client asks (kubernetes/kubernetes@04791b49,
	 * staging/src/k8s.io/client-go/metadata/metadata.go, client.List and
	 * client.Watch), with application/json after it for a server that
	 * does not offer it.  For a consumer that reads nothing else. */
	bool metadata_only;
	/* Work its consumer does beside the watch, never inside the callback
	 * (a follower's probe of a peer): between events, and while the
	 * watch waits to open its next connection, side(ud) does what it
	 * can without blocking and sets *w to what it waits for next, which
	 * the watch then waits for along with its stream.  It returns as the
	 * callback does: 0 to go on, 1 to stop, negative on error.  It may
	 * make requests on the watch's twin.  NULL: none. */
	int (*side)(void *ud, struct np_wait *w);
};
int k8s_watch_pods_opt(struct k8s_client *c, const char *ns, const char *label_selector,
		       const char *field_selector, const char *resource_version,
		       const struct k8s_watch_opts *opts, k8s_watch_cb cb, void *ud, np_error *err);

/* List pods page by page (limit/continue), as client-go's pager does
 * (kubernetes/kubernetes@04791b49, staging/src/k8s.io/client-go/tools/
 * pager/pager.go; continue requests carry no resourceVersion), limit
 * pods a page (0: K8S_LIST_PAGE).  page(list, ud) gets each PodList page (borrowed) and
 * returns 0 to go on, non-zero to stop (returned).  A 410 on an expired
 * continue token starts the list again from the first page, calling
 * restart(ud) first (the pages before it are void), after a short backoff:
 * the pager's ListPager.List falls back to one full list there
 * (FullListIfExpired), which is what paging is here to avoid.  *rv
 * (malloc'd, may be NULL) gets the list's resourceVersion, the first
 * page's: every page of one list is served from its snapshot.  A page too
 * large to read or to parse (k8s_page_max, K8S_PARSE_MAX) is asked again,
 * and the rest of the list, for half as many pods; a page of one that is
 * still too large fails the list, and so does a page of more pods than
 * asked for. */
int k8s_list_pods_paged(struct k8s_client *c, const char *ns, const char *label_selector,
			const char *field_selector, size_t limit, int (*page)(json_t *list, void *ud),
			void (*restart)(void *ud), void *ud, char **rv, np_error *err);

/* Any namespaced list (ns NULL: all namespaces) read as
 * k8s_list_pods_paged reads pods, with the same bounds on each page, the
 * same halving of a page too large and the same start again after an
 * expired continue token: k8s_list_pods_paged is this for "pods". */
struct k8s_list_query {
	const char *prefix;   /* the group version's path: "/api/v1", "/apis/batch/v1" */
	const char *resource; /* its plural: "pods", "events" */
	const char *ns;
	const char *label_selector, *field_selector; /* NULL or "": none */
	size_t limit;                                 /* items a page; 0: K8S_LIST_PAGE */
};
int k8s_list_paged(struct k8s_client *c, const struct k8s_list_query *q,
		   int (*page)(json_t *list, void *ud), void (*restart)(void *ud), void *ud,
		   char **rv, np_error *err);

/* core/v1 Event about a pod (involvedObject from the pod's metadata).
 * type is "Normal" or "Warning"; message is truncated to 1024 bytes. */
int k8s_create_event(struct k8s_client *c, const char *ns, const json_t *pod,
		     const char *reason, const char *message, const char *type,
		     np_error *err);

#endif
