/* Internals of the gatherer, shared by gather.c (the rounds), members.c
 * (who is in the job) and publish.c (handing out each pod's part). */
#ifndef NP_GATHER_PRIV_H
#define NP_GATHER_PRIV_H

#include <stdbool.h>

#include "exchange/exchange_priv.h"

#define PUBLISH_CONNS_MAX 8

struct member {
	char name[AGREE_NAME_MAX];
	char uid[AGREE_UID_MAX];
	char key[AGREE_NAME_MAX]; /* job index: earlier attempts share it */
	char created[40];
	bool live;
	bool has_report;
	char report_why[256]; /* why the report was refused */
	struct agree_report *rep;
	int assigned_epoch; /* epoch of the assignment on the object */
	bool has_probe;
	struct exchange_probe probe; /* of this gatherer, epoch probe.epoch */
	bool selected; /* the member counted for its key */
	size_t n_parts; /* this pod's parts of the current round */
	struct exchange_part parts[EXCHANGE_PARTS_MAX];
	/* The pod's own probe found that the kernel routes pin_net through
	 * pin_if: its report is read with that interface as the routed one. */
	bool pinned;
	char pin_if[IFNAMSIZ];
	struct np_prefix pin_net;
};

enum phase { PH_GATHER, PH_PROBE };

struct gather {
	struct member *m;
	size_t n, cap;
	enum phase phase;
	enum exchange_state state; /* of the round handed out: probe or measure */
	int epoch;
	int expect;
	int n_pods; /* pods in the round's decision */
	char probe_status[EXCHANGE_DETAIL_MAX];
	char token[PROBE_TOKEN_MAX]; /* the round's probe token */
	/* What an earlier run of this gatherer's container (same pod, same
	 * uid) handed out last, from its own assignment: handing out that round
	 * again, it gives the same token, so that the pods still probing it
	 * are not turned away. */
	int resume_epoch;
	char resume_token[PROBE_TOKEN_MAX];
	char warning[EXCHANGE_REASON_MAX]; /* networks that failed their probe */
	char published[1024]; /* the progress last written on the gatherer's pod */
	bool need_assign; /* a pod restarted and lost its assignment */
	struct agree_versions versions; /* of the reports last decided on */
	struct k8s_client *pool[PUBLISH_CONNS_MAX]; /* publish_round's connections */
	struct k8s_limiter *assign_lim; /* their budget (publish.c) */
};

/* members.c */
struct member *gather_member(struct gather *g, const char *name, bool create);
/* Fold one Pod object into the member table; the gatherer is leader_uid. */
void gather_member_update(struct gather *g, const char *leader_uid, json_t *pod);
/* Pick, per job index, the newest live pod; returns how many. */
size_t gather_select_members(struct gather *g);
void gather_free_members(struct gather *g);

/* gather.c, pure: the member table is all they read. */
/* Every report is in (gathering) or every probe result (probing); a pod
 * that lost its assignment sets g->need_assign and is ready too. */
bool gather_ready(struct gather *g, const char *self);
/* What the gatherer waits for. */
void gather_progress(struct gather *g, const char *leader_uid, const char *leader_pod,
		     struct exchange_progress *p);
/* More of the job's pods exist than expected: NP_EK8S naming the count. */
int gather_check_count(struct gather *g, np_error *err);

/* publish.c */
/* Tell every selected pod its part of the round (or the failure, with
 * err's status and message when failure is given). */
int gather_publish_round(struct ex *x, const np_error *failure, np_error *err);
/* The round's state on the gatherer's own pod. */
int gather_set_round(struct ex *x, enum exchange_state state, const np_error *failure, np_error *err);
/* What the gatherer waits for, on its own pod. */
int gather_set_progress(struct ex *x, np_error *err);
/* Each pod's part of one rail: the only one, or one more (a measure round). */
int gather_rail_assign(struct ex *x, const struct agree_rail *rail, bool append, np_error *err);

#endif
