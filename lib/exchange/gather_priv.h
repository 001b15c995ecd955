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
	int probe_epoch;
	json_t *probe;
	bool selected; /* the member counted for its key */
};

enum phase { PH_GATHER, PH_PROBE };

struct gather {
	struct member *m;
	size_t n, cap;
	enum phase phase;
	int epoch;
	int expect;
	bool need_assign; /* a pod restarted and lost its assignment */
	struct k8s_client *pool[PUBLISH_CONNS_MAX]; /* publish_round's connections */
	json_t *assign_of; /* pod name -> assignment object of this round */
};

/* members.c */
struct member *gather_member(struct gather *g, const char *name, bool create);
/* Fold one Pod object into the member table. */
void gather_member_update(struct ex *x, json_t *pod);
/* Pick, per job index, the newest live pod; returns how many. */
size_t gather_select_members(struct gather *g);

/* publish.c */
/* Tell every selected pod its part of the round (or the failure). */
int gather_publish_round(struct ex *x, const char *state, const char *reason, np_error *err);
/* The round's state on the gatherer's own pod. */
int gather_set_round(struct ex *x, const char *state, const char *reason, np_error *err);
/* Each pod's part of one rail; into trials_of (pod -> array) when given. */
int gather_rail_assign(struct ex *x, const struct agree_rail *rail, json_t *trials_of, np_error *err);

#endif
