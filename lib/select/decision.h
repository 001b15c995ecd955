/* decision.json: everything this pod decided.  Its one writer and its one
 * strict reader, side by side; the modules that contribute hand over their
 * structs (lib/select gathers them), none of them builds JSON of its own. */
#ifndef NP_SELECT_DECISION_H
#define NP_SELECT_DECISION_H

#include <jansson.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#include "agree/agree.h"
#include "exchange/exchange.h"
#include "jobs/jobs.h"
#include "nic/nic.h"
#include "outputs/outputs.h"
#include "policy/policy.h"
#include "smoke/smoke.h"
#include "util/err.h"

struct select_decision {
	bool peers_k8s;
	const char *source; /* "node", "snapshot" or "replay" */
	const struct policy *policy;
	const struct nic_list *nics;
	const struct policy_ranking *ranking;
	size_t chosen; /* index into nics->v */
	const struct outputs_choice *choice;
	const struct outputs_env *env;
	const struct smoke_report *smoke;
	const struct jobs_env_warnings *env_warnings; /* settings that would override the outputs */
	const struct exchange_result *agreement; /* NULL: decided alone */
};

/* The decision.json tree; NULL when out of memory. */
json_t *select_decision_json(const struct select_decision *d);

/* discover --json and decision.json's "candidates": every interface with
 * its verdict.  The interface's own members come from nic/snapshot.c, the
 * one writer (beside its reader) of a `discover --json` interface; the
 * verdict's are added here. */
json_t *select_decision_candidates(const struct nic_list *l, const struct policy_ranking *rk);
/* The same one interface at a time (fn gets each object and drops it). */
int select_discover_each(const struct nic_list *l, const struct policy_ranking *rk,
			 int (*fn)(json_t *obj, void *ud), void *ud);

/* Parts of the tree, for their tests. */
json_t *select_decision_policy_json(const struct policy *p);
/* The verdict as members of obj ("usable", "score", "reasons", "address"). */
void select_decision_verdict_json(const struct policy_verdict *v, const struct nic *n, json_t *obj);
/* "agreement"."decision", the gatherer's view of the job. */
json_t *select_decision_agree_json(const struct agree_decision *d);
/* "smoke" (new reference; NULL when out of memory). */
json_t *select_decision_smoke_json(const struct smoke_report *s);

/* What a later command (`nicpick smoke --out-dir DIR`) needs from a
 * finished DIR/decision.json: the environment nicpick wrote, this pod's
 * interface, its rank, and the slowest agreed link. */
#define SELECT_DECISION_VARS_MAX 16
struct select_decision_read {
	size_t n_vars;
	char key[SELECT_DECISION_VARS_MAX][64];
	char value[SELECT_DECISION_VARS_MAX][1024];
	char ifname[IFNAMSIZ];
	char ib_hca[512]; /* without NCCL_IB_HCA's leading '=' */
	int rank, world;
	char comm_id[80];
	/* "agreement"."min_mbps" when the job agreed (the slowest link of the
	 * agreed network, as `select` judged the smoke test), else this
	 * pod's own link; -1 unknown. */
	long min_mbps;
};
/* Strict for every key it reads; NP_EUSAGE naming the file and the key. */
int select_decision_load(const char *dir, struct select_decision_read *out, np_error *err);

#endif
