/* Internals shared by exchange.c (the entry point), plumbing.c, follow.c
 * and gather.c. */
#ifndef NP_EXCHANGE_PRIV_H
#define NP_EXCHANGE_PRIV_H

#include "exchange/exchange.h"
#include "exchange/message.h"

#define EX_SERVERS_MAX EXCHANGE_PARTS_MAX
#define EX_PROBE_WINDOW_MS 20000 /* how long a probe waits for its peer */
/* The field selector of every watch and list of the job's pods: those that
 * have not finished.  A pod that ends (Succeeded or Failed, which it never
 * leaves; during its init containers it is Pending) stops matching, and the
 * API server's watch sends it as DELETED (convertToWatchEvent in
 * kube-apiserver's storage/cacher/cache_watcher.go: an object that stops
 * passing the filter is a Deleted event of its last state); a list leaves
 * it out.  A Job keeps a failed pod beside the one that replaces it, and a
 * finished pod is no member of the job, nor its gatherer. */
#define EX_UNFINISHED "status.phase!=Succeeded,status.phase!=Failed"

struct probe_server;
struct gather;
struct ex_probing;

/* What a follower knows: its part of the round (from its own pod) and the
 * round's state and progress (from the gatherer's pod). */
struct follow_state {
	bool has_assign;
	struct exchange_assignment assign;
	bool leader_seen;	       /* the gatherer's pod exists */
	char leader_pod[AGREE_NAME_MAX];
	char round_uid[AGREE_UID_MAX]; /* the gatherer pod's uid */
	char leader_created[40];       /* its creationTimestamp */
	bool has_round;
	struct exchange_round round;
	bool has_progress;
	struct exchange_progress progress;
	int probed_epoch; /* the round this pod has probed for */
	char probed_leader[AGREE_UID_MAX];
	/* ... and its token: a gatherer whose container restarted hands out
	 * the same round again with a new token, which must be probed again */
	char probed_token[PROBE_TOKEN_MAX];
};

enum follow_action { FOLLOW_WAIT, FOLLOW_PROBE, FOLLOW_DONE, FOLLOW_FAIL };

/* What to do next (pure); FOLLOW_FAIL sets *err with the gatherer's status
 * and reason. */
enum follow_action follow_next(const struct follow_state *s, np_error *err);
/* What the follower waits for, for its log lines and its deadline message. */
void follow_waiting_text(const struct follow_state *s, const char *leader_sel, char *buf, size_t len);

struct ex {
	const struct exchange_opts *o;
	struct k8s_client *k; /* requests */
	struct k8s_client *w; /* the watch (one curl handle each, TLS sessions shared) */
	struct k8s_limiter *lim; /* both connections' requests: 5/s, burst 10 */
	json_t *pod;
	const char *name, *ns;
	char uid[AGREE_UID_MAX];
	const char *sel, *leader_sel;
	bool leader;
	struct agree_report mine;
	char rv[64];
	/* > 0: the watch lists in pages of this many pods (every watch:
	 * K8S_LIST_PAGE), so that no answer is a whole job's list: each page
	 * is bounded by its limit (lib/k8s, k8s_page_max). */
	size_t list_page;
	bool watch_meta;  /* the watch asks for the pods' metadata only */
	int (*watch_side)(void *ud, struct np_wait *w); /* k8s_watch_opts.side, ud x */
	bool stop;   /* the watch callback asked to act */
	bool failed; /* ... or failed, with err */
	np_error err;
	/* follower */
	struct follow_state f;
	bool relisting; /* between RELIST_BEGIN and RELIST_END: the view is partial */
	bool done; /* the round this pod probed is final */
	struct ex_probing *probing; /* this pod's probe of its part, under way */
	struct probe_server *servers[EX_SERVERS_MAX]; /* one per part, NULL: none */
	char server_key[EX_SERVERS_MAX][2 * AGREE_ADDR_TEXT_MAX + 96]; /* what it listens for */
	char server_why[EX_SERVERS_MAX][EXCHANGE_DETAIL_MAX]; /* why not listening */
	size_t n_servers;
	/* gatherer */
	struct gather *g;
	char why[EXCHANGE_DETAIL_MAX]; /* why this pod gathers (its claim) */
	bool by_rule;     /* the gatherer's selector came from lib/jobs' rule */
	bool terminating; /* this pod is being deleted */
	bool superseded;  /* a newer pod has this pod's job index, and gathers */
	bool has_rival;   /* another pod of the job gathers too */
	np_error rival;   /* ... naming both */
};

void ex_log(struct ex *x, enum exchange_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* An annotation's, a metadata field's, a label's text; NULL when absent
 * or not a string, or when it has a NUL (the API allows one; nicpick
 * never writes one): such a value is refused, never read shorter. */
const char *ex_annotation(const json_t *pod, const char *key);
/* The annotation is there and has a NUL: say so where it is refused. */
bool ex_annotation_nul(const json_t *pod, const char *key);
const char *ex_meta(const json_t *obj, const char *key);
const char *ex_label(const json_t *pod, const char *key);
/* Merge-patch these annotations (the reference is stolen). */
int ex_patch_annotations(struct ex *x, const char *pod, json_t *annotations, np_error *err);
/* Write one message (JSON text) as an annotation of this pod. */
int ex_annotate_self(struct ex *x, const char *key, const char *json, np_error *err);
/* The exchange has failed with e: its watch callbacks stop on x->failed,
 * and ex_watch returns e. */
void ex_fail(struct ex *x, const np_error *e);
/* The exchange's deadline has come (an error now is because of it). */
bool ex_past_deadline(const struct ex *x);
int ex_watch(struct ex *x, const char *label_sel, const char *field_sel, k8s_watch_cb cb,
	     void (*tick)(struct ex *), np_error *err);
void ex_note_rv(struct ex *x, enum k8s_watch_type type, json_t *obj);
/* probing.c: this pod's probe round.  Listen on each part's address and
 * probe the ring neighbour on each, without blocking: ex_probing_step
 * goes as far as it can and sets *w to what it waits for; 1 when every
 * part is probed.  The parts are copied. */
int ex_probing_start(struct ex *x, const char *leader_uid, int epoch, const char *token,
		     const struct exchange_part *parts, size_t n, long bytes, struct ex_probing **out,
		     np_error *err);
int ex_probing_step(struct ex *x, struct ex_probing *p, struct np_wait *w, np_error *err);
/* The watch client's idle work (k8s_client_set_idle): x's probe goes on
 * while a re-list or a retry waits on the API server; what it finds is
 * acted on by the watch's side work once the list is whole.  A probe that
 * cannot go on fails the exchange (ex_fail). */
void ex_probing_idle(void *ud, struct np_wait *w);
/* It probes the round of this gatherer, epoch and token. */
bool ex_probing_is(const struct ex_probing *p, const char *leader_uid, int epoch, const char *token);
/* What a finished round found: `out` (NULL: not wanted), and *json the
 * same as its message (nicpick.io/probe, the caller frees it). */
int ex_probing_result(const struct ex_probing *p, struct exchange_probe *out, char **json, np_error *err);
/* Stops its probe under way, if any. */
void ex_probing_free(struct ex_probing *p);
/* This pod's probe (x->probing) stopped and gone; none is fine. */
void ex_probing_stop(struct ex *x);
void ex_probe_servers_stop(struct ex *x);
/* This pod's rails in the result, from the parts of its final round: the
 * first rail also in the result's own fields. */
void ex_result_rails(struct exchange_result *res, const struct exchange_part *parts, size_t n);
/* Listen on each part's address for the round's token (kept when already
 * listening so): the gatherer does it before it hands out the round, so
 * that no pod's first probe of it finds nobody listening. */
void ex_probe_listen(struct ex *x, const char *token, const struct exchange_part *parts, size_t n,
		     long bytes);
/* The gatherer's labels (key=value terms) match this pod. */
bool ex_pod_matches(const json_t *pod, const char *selector);
/* Every key the selector names is a label of this pod (values may differ). */
bool ex_pod_has_labels(const json_t *pod, const char *selector);

int ex_follow(struct ex *x, struct exchange_result *res, np_error *err);

/* claim.c: note a second gatherer in a pod of the job (x->has_rival,
 * x->rival), or this pod being deleted (x->terminating). */
void ex_rival_see(struct ex *x, const json_t *pod);

int ex_gather(struct ex *x, struct exchange_result *res, np_error *err);
/* The round this incarnation of the gatherer published last, from its pod
 * as read at the start: false when there is none (or another's). */
bool ex_published_round(const struct ex *x, struct exchange_round *out);
/* ... and it was final. */
bool ex_round_final(const struct ex *x);
void ex_gather_free(struct ex *x);
/* Add the traffic of the gatherer's extra connections to *acc. */
void ex_gather_stats(struct ex *x, struct k8s_stats *acc);

#endif
