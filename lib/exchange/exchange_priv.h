/* Internals shared by exchange.c (plumbing, follower) and gather.c. */
#ifndef NP_EXCHANGE_PRIV_H
#define NP_EXCHANGE_PRIV_H

#include "exchange/exchange.h"

#define EX_SERVERS_MAX 4
#define EX_PROBE_WINDOW_MS 20000 /* how long a probe waits for its peer */

struct probe_server;
struct gather;

struct ex {
	const struct exchange_opts *o;
	struct k8s_client *k; /* requests */
	struct k8s_client *w; /* the watch (one curl handle each) */
	json_t *pod;
	const char *name, *ns;
	char uid[AGREE_UID_MAX];
	const char *sel, *leader_sel;
	bool leader;
	struct agree_report mine;
	char rv[64];
	bool stop;   /* the watch callback asked to act */
	bool failed; /* ... or failed, with err */
	np_error err;
	/* follower */
	json_t *assign;
	char leader_uid[AGREE_UID_MAX];
	int epoch;
	int probed_epoch; /* the round this pod has probed for */
	char probed_leader[AGREE_UID_MAX];
	json_t *round;    /* the gatherer pod's round annotation, as last seen */
	char round_uid[AGREE_UID_MAX]; /* ... and that pod's uid */
	bool done;        /* the round this pod probed is final */
	struct probe_server *servers[EX_SERVERS_MAX];
	size_t n_servers;
	/* gatherer */
	struct gather *g;
};

void ex_log(struct ex *x, enum exchange_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *ex_annotation(const json_t *pod, const char *key);
const char *ex_meta(const json_t *obj, const char *key);
const char *ex_label(const json_t *pod, const char *key);
/* Merge-patch these annotations (the reference is stolen). */
int ex_patch_annotations(struct ex *x, const char *pod, json_t *annotations, np_error *err);
int ex_watch(struct ex *x, const char *label_sel, const char *field_sel, k8s_watch_cb cb,
	     void (*tick)(struct ex *), np_error *err);
void ex_note_rv(struct ex *x, enum k8s_watch_type type, json_t *obj);
json_t *ex_probe_round(struct ex *x, int epoch, size_t n, const char *const *addrs,
		       const char *const *ifnames, const char *const *next_addrs, long bytes,
		       np_error *err);
void ex_probe_servers_stop(struct ex *x);
size_t ex_assignment_trials(const json_t *assign, const char **addrs, const char **ifs,
			    const char **nexts);
/* The gatherer's labels (key=value terms) match this pod. */
bool ex_pod_matches(const json_t *pod, const char *selector);

int ex_follow(struct ex *x, struct exchange_result *res, np_error *err);

int ex_gather(struct ex *x, struct exchange_result *res, np_error *err);
void ex_gather_free(struct ex *x);
/* Add the traffic of the gatherer's extra connections to *acc. */
void ex_gather_stats(struct ex *x, struct k8s_stats *acc);

#endif
