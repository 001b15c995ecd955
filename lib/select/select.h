/* The `select` flow on one node: discover (or load a snapshot), rank, choose,
 * build decision.json and write the outputs.  Nothing is written unless the
 * decision is complete. */
#ifndef NP_SELECT_H
#define NP_SELECT_H

#include <jansson.h>
#include <stdbool.h>

#include "exchange/exchange.h"
#include "jobs/jobs.h"
#include "k8s/k8s.h"
#include "nic/nic.h"
#include "outputs/outputs.h"
#include "policy/policy.h"
#include "smoke/smoke.h"
#include "util/err.h"

struct select_opts {
	struct nic_source src;
	const char *snapshot;   /* decide from a saved `discover --json` */
	const char *out_dir;    /* NULL: decide but write nothing */
	struct policy policy;
	const char *smoke_mode; /* "off", "auto", "required" */
	int smoke_port;         /* NCCL_COMM_ID port on rank 0's agreed address */
	long smoke_bytes;       /* the largest all-reduce (0: SMOKE_DEFAULT_BYTES) */
	int smoke_timeout_s;    /* the smoke step's own bound, within the deadline */
	double min_busbw;       /* GB/s; 0: a default from the agreed link speed */
	bool slow_link_fail;    /* --slow-link fail: a slow node named by the
				 * ring links fails the step (default: warn) */
	bool nccl_debug;        /* keep NCCL's log in the out-dir, and make
				 * training log the same way */
	/* Where nicpick-smoke is and what it starts from (cmd fills these;
	 * lib reads no environment of its own). */
	const char *smoke_bin;  /* NICPICK_SMOKE_BIN */
	const char *self_exe;   /* this program's path */
	const char *path_env;   /* PATH */
	char *const *base_env;  /* the environment the companion inherits */
	bool peers_k8s;         /* agree through the Kubernetes API */
	bool strict_env;        /* a pod setting that overrides the outputs fails */
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
	struct smoke_report smoke;
	/* peers_k8s: settings in this pod that override the outputs */
	struct jobs_env_warnings env_warnings;
};

/* Who this pod is in the smoke all-reduce. */
struct select_smoke_plan {
	int rank, world;
	const char *comm_id;   /* NCCL_COMM_ID: rank 0's agreed address and port */
	const char *root_pod;  /* rank 0's pod, "" unknown */
	const char *ifname;    /* this pod's agreed interface */
	const char *ib_hca;    /* NCCL_IB_HCA without '=', or NULL */
	long min_mbps;         /* the agreed network's slowest link, -1 unknown */
	/* Job-wide: the pods where the smoke test cannot run ("job-w-2:
	 * no-gpu"), from the gatherer; "" or NULL: decide on this pod alone. */
	const char *job_skip;
	const char *here; /* ... and why not on this pod, "" or NULL: it can */
	/* This pod, its node and its agreed address, as the other ranks
	 * name it in the link verdict ("job-w-2 (node node-c, 10.9.0.3)"). */
	const char *label;
};

/* Run (or skip) the smoke all-reduce with env; fills rep.  0 when it
 * passed or was skipped, -1 with NP_ESMOKE when it failed or is required
 * and cannot run. */
int select_smoke(const struct select_opts *o, const struct select_smoke_plan *p,
		 const struct outputs_env *env, struct smoke_report *rep, np_error *err);
/* What the smoke test would use on this pod (nicpick-smoke info), for its
 * report: NCCL, CUDA and GPU, or why it cannot run ("no-gpu", ...), with
 * the details in why ("" when it can).  Returns false (why says why) when
 * the companion gave no answer. */
bool select_smoke_info(const struct select_opts *o, struct agree_gpu *g, char *why, size_t len);
/* NCCL_COMM_ID's syntax: "10.9.0.1:29418", "[fd00::1]:29418". */
void select_comm_id(const char *addr, int port, char *buf, size_t len);

/* Gather the node's interfaces (discovery or snapshot) and rank them. */
int select_gather(const struct select_opts *o, struct select_result *r, np_error *err);
/* The whole flow; on NP_ENOIFACE `r` still holds every verdict. */
int select_run(const struct select_opts *o, struct select_result *r, np_error *err);
void select_result_free(struct select_result *r);

/* `discover --json`: every interface with its verdict, one at a time (fn
 * gets each object and drops it). */
int select_discover_each(const struct nic_list *l, const struct policy_ranking *rk,
			 int (*fn)(json_t *obj, void *ud), void *ud);
/* The human table: one row per interface with its verdict (malloc'd). */
char *select_render_table(const struct nic_list *l, const struct policy_ranking *rk);

#endif
