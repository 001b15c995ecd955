/* Internals of the gatherer, shared by gather.c (the rounds), members.c
 * (who is in the job) and publish.c (handing out each pod's part). */
#ifndef NP_GATHER_PRIV_H
#define NP_GATHER_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "exchange/exchange_priv.h"

#define PUBLISH_CONNS_MAX 8

/* What the gatherer keeps of a pod's probe result (of this gatherer): a
 * trial per part (a rail of a probe round, a tied network of a measure
 * round).  The texts, which only failed trials have, share one allocation:
 * for each trial k < n its detail, NUL, its route_if, NUL; NULL when no
 * trial has any (gather_probe_detail, gather_probe_route_if read them). */
struct member_probe {
	int epoch;
	size_t n;
	bool ok[EXCHANGE_PARTS_MAX];
	double mbps[EXCHANGE_PARTS_MAX];
	char *text;
};

/* A pinned member: on net, its report is read with ifname as the
 * interface the kernel routes (gather_member_pin). */
struct member_pin {
	char ifname[IFNAMSIZ];
	struct np_prefix net;
};

/* One pod of the job.  Everything is sized by what the pod has: a job of
 * 16,384 pods keeps about 2 KB a pod. */
struct member {
	char *name;
	char *uid;
	char *key; /* job index: earlier attempts share it */
	char created[32];
	bool live;
	bool has_report;
	char *why;	 /* why the report was refused; NULL: none */
	char *probe_why; /* why the probe result was refused; NULL: none */
	struct agree_view rep; /* valid when has_report; storage in rep_mem */
	void *rep_mem;
	uint64_t rep_hash, as_hash, pr_hash; /* annotation texts last read */
	int assigned_epoch; /* epoch of the assignment on the object */
	bool has_probe;
	struct member_probe probe; /* of this gatherer, epoch probe.epoch */
	bool selected; /* the member counted for its key */
	size_t next_same_key; /* the next member with this key; SIZE_MAX: none */
	size_t n_parts; /* this pod's parts of the current round */
	struct exchange_part *parts;
	/* The pod's own probe found that the kernel routes a network through
	 * another of its interfaces: its report is read with that one as the
	 * routed one (NULL: not pinned; few pods ever are). */
	struct member_pin *pin;
};

enum phase { PH_GATHER, PH_PROBE };

/* An open-addressing index of strings to member positions (never shrinks:
 * members are never removed). */
struct member_index {
	uint32_t *slot; /* position + 1; 0: empty */
	size_t cap;	/* a power of two, or 0 */
	size_t used;
};

/* The pods of one job index (a key), chained through next_same_key. */
struct member_group {
	char *key;
	size_t head; /* first member; SIZE_MAX: none */
};

struct gather {
	struct member *m;
	size_t n, cap;
	struct member_group *groups;
	size_t n_groups, cap_groups;
	struct member_index by_name, by_key; /* positions in m and in groups */
	/* Counts kept as members change: of the selected members, how many
	 * reported, probed in this epoch, and lack this epoch's part. */
	size_t n_selected, n_reported, n_probed, n_unassigned;
	int counted_epoch;
	enum phase counted_phase;
	enum phase phase;
	enum exchange_state state; /* of the round handed out: probe or measure */
	int epoch;
	int expect;
	int n_pods; /* pods in the round's decision */
	char probe_status[EXCHANGE_DETAIL_MAX];
	char token[PROBE_TOKEN_MAX]; /* the round's probe token */
	/* What an earlier run of this gatherer's container (same pod, same
	 * uid) handed out last, from its own assignment: the first round this
	 * run hands out, when every pod's part is the same as in that one,
	 * gets the same token, so that the pods still probing it are not
	 * turned away (run_round; "" once that round is out). */
	int resume_epoch;
	char resume_token[PROBE_TOKEN_MAX];
	char warning[EXCHANGE_REASON_MAX]; /* networks that failed their probe */
	char published[1024]; /* the progress last written on the gatherer's pod */
	/* This pod's own probe result of the round (its nicpick.io/probe), until
	 * a write on its pod carries it (own_probe in gather.c); else NULL. */
	char *probe_unsent;
	bool need_assign; /* a pod restarted and lost its assignment */
	bool relisting;	  /* between RELIST_BEGIN and RELIST_END: the view is partial */
	/* A restarted gatherer whose last round was final (resume()): this
	 * pod's parts as it handed them out, one per rail. */
	bool resume_final, resume_routed;
	size_t n_final;
	struct exchange_part final_parts[EXCHANGE_RAILS_MAX];
	struct agree_versions versions; /* of the reports last decided on */
	struct k8s_client *pool[PUBLISH_CONNS_MAX]; /* publish_round's connections */
	struct k8s_limiter *assign_lim; /* their budget (publish.c) */
};

/* members.c */
struct member *gather_member(struct gather *g, const char *name, bool create);
/* Fold one Pod object into the member table; the gatherer is leader_uid.
 * O(1) amortised, plus the pod's earlier attempts. */
void gather_member_update(struct gather *g, const char *leader_uid, json_t *pod);
/* The pod is gone (a DELETED event of this uid). */
void gather_member_gone(struct gather *g, const char *name, const char *uid);
/* A re-list begins: every member is gone until the list says otherwise. */
void gather_members_relist(struct gather *g);
/* Set a member's fields the way an update would, keeping the counts (the
 * setters are how anything but gather_member_update changes a member). */
void gather_member_set(struct gather *g, struct member *m, bool live, const char *key,
		       const char *created);
void gather_member_set_report(struct gather *g, struct member *m, const struct agree_report *r);
void gather_member_set_probe(struct gather *g, struct member *m, const struct exchange_probe *p);
void gather_member_set_assigned(struct gather *g, struct member *m, int epoch);
void gather_member_set_why(struct member *m, const char *why);
const char *gather_member_why(const struct member *m);
/* Trial k of the member's probe result: its detail and the interface its
 * route leaves through ("" when none or passed). */
const char *gather_probe_detail(const struct member *m, size_t k);
const char *gather_probe_route_if(const struct member *m, size_t k);
/* Read the member's report, now and whenever it changes, with ifname as
 * the routed interface on net; -1 out of memory. */
int gather_member_pin(struct member *m, const char *ifname, const struct np_prefix *net);
/* The hash the member table keeps of an annotation's text (as_hash...). */
uint64_t gather_text_hash(const char *s);
/* The counts again from the table: after the epoch or phase changed. */
void gather_recount(struct gather *g);
/* How many members count (the newest live pod of each job index). */
size_t gather_selected(struct gather *g);
/* The number of a new round: after g->epoch, and after every round of
 * this gatherer that a pod's part or probe result shows up to
 * GATHER_EPOCH_SLACK ahead of it (members.c says why).  O(N). */
#define GATHER_EPOCH_SLACK 64
int gather_next_epoch(const struct gather *g);
void gather_free_members(struct gather *g);

/* gather.c, pure: the member table is all they read. */
/* Every report is in (gathering) or every probe result (probing); a pod
 * that lost its assignment sets g->need_assign and is ready too.  O(1). */
bool gather_ready(struct gather *g, const char *self);
/* What the gatherer waits for. */
void gather_progress(struct gather *g, const char *leader_uid, const char *leader_pod,
		     struct exchange_progress *p);
/* More of the job's pods exist than expected: NP_EK8S naming the count. */
int gather_check_count(struct gather *g, np_error *err);

/* publish.c */
/* Tell every selected pod but the gatherer its part of the round (or the
 * failure, with err's status and message when failure is given);
 * only_missing: only the pods without this epoch's part (a pod restarted).
 * The gatherer's own part goes with the round's state: gather_set_round. */
int gather_publish_round(struct ex *x, const np_error *failure, bool only_missing, np_error *err);
/* Every selected pod carries already the part gather_publish_round would
 * hand it now, as a part of round epoch with token (the same text). */
bool gather_round_unchanged(struct ex *x, int epoch, const char *token);
/* The round's state on the gatherer's own pod; own_part: with the
 * gatherer's own part of the round (or of the failure), in one write. */
int gather_set_round(struct ex *x, enum exchange_state state, const np_error *failure, bool own_part,
		     np_error *err);
/* What the gatherer waits for, on its own pod. */
int gather_set_progress(struct ex *x, np_error *err);
/* Each pod's part of one rail: the only one, or one more (a measure round). */
int gather_rail_assign(struct ex *x, const struct agree_rail *rail, bool append, np_error *err);

/* gather.c: decide on the reports gathered so far (d zeroed when it
 * fails); this pod's part of the final round into res (d moves into it). */
int gather_decide(struct ex *x, struct agree_options *opt, struct agree_decision *d, np_error *err);
void gather_fill_result(struct ex *x, struct agree_decision *d, struct exchange_result *res);

/* gather.c: watch the job's pods until the phase's wait is over (0), the
 * watch fails or the deadline comes (-1, err says which). */
int gather_watch(struct ex *x, np_error *err);

/* round.c: hand out a round of `state` (bytes a part to send in a
 * throughput round) and probe it: 0 every pod probed it, 1 the round is
 * void (a pod was replaced since the decision: decide again), -1 error. */
int gather_run_round(struct ex *x, enum exchange_state state, long bytes, np_error *err);

/* resume.c: a restarted gatherer container (same pod, same uid) goes on
 * from the round it published (gather_resume, at the start); a final
 * round that it finds stands if the same reports decide it again
 * (gather_resume_final: 1 it stands, 0 a new round follows, -1 error). */
void gather_resume(struct ex *x);
int gather_resume_final(struct ex *x, const struct agree_options *opt, struct exchange_result *res,
			np_error *err);

#endif
