/* The `select` flow on one node: discover (or load a snapshot), rank, choose,
 * build decision.json and write the outputs.  Nothing is written unless the
 * decision is complete. */
#ifndef NP_SELECT_H
#define NP_SELECT_H

#include <jansson.h>
#include <stdbool.h>

#include "exchange/exchange.h"
#include "k8s/k8s.h"
#include "nic/nic.h"
#include "policy/policy.h"
#include "util/err.h"

struct select_opts {
	struct nic_source src;
	const char *snapshot;   /* decide from a saved `discover --json` */
	const char *out_dir;    /* NULL: decide but write nothing */
	struct policy policy;
	const char *smoke_mode; /* "off", "auto", "required" */
	bool peers_k8s;         /* agree through the Kubernetes API */
	struct k8s_config_overrides k8s;
	struct exchange_opts ex; /* k8s is filled in by select_run */
};

struct select_result {
	struct nic_list nics;
	struct policy_ranking ranking;
	json_t *decision; /* decision.json, NULL before a choice exists */
	int chosen;       /* index into nics.v, -1 none */
	bool agreed;      /* peers_k8s: the exchange ran */
	struct exchange_result ex;
};

/* Gather the node's interfaces (discovery or snapshot) and rank them. */
int select_gather(const struct select_opts *o, struct select_result *r, np_error *err);
/* The whole flow; on NP_ENOIFACE `r` still holds every verdict. */
int select_run(const struct select_opts *o, struct select_result *r, np_error *err);
void select_result_free(struct select_result *r);

/* `discover --json`: every interface with its verdict. */
json_t *select_discover_json(const struct nic_list *l, const struct policy_ranking *rk);
/* The same, one interface at a time (fn gets each object and drops it). */
int select_discover_each(const struct nic_list *l, const struct policy_ranking *rk,
			 int (*fn)(json_t *obj, void *ud), void *ud);
/* The human table: one row per interface with its verdict (malloc'd). */
char *select_render_table(const struct nic_list *l, const struct policy_ranking *rk);

#endif
