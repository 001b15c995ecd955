/* decision.json: everything this pod decided, built here and only here,
 * from the structs the flow produced (lib/select hands them over). */
#ifndef NP_OUTPUTS_DECISION_H
#define NP_OUTPUTS_DECISION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "exchange/exchange.h"
#include "jobs/jobs.h"
#include "nic/nic.h"
#include "outputs/outputs.h"
#include "policy/policy.h"
#include "smoke/smoke.h"

struct outputs_decision {
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
json_t *outputs_decision_json(const struct outputs_decision *d);

/* discover --json and decision.json's "candidates": every interface with
 * its verdict. */
json_t *outputs_candidates_json(const struct nic_list *l, const struct policy_ranking *rk);

#endif
