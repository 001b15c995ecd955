/* The `select` flow on one node: discover (or load a snapshot), rank, choose,
 * build decision.json and write the outputs.  Nothing is written unless the
 * decision is complete. */
#ifndef NP_SELECT_H
#define NP_SELECT_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "exchange/exchange.h"
#include "jobs/jobs.h"
#include "k8s/k8s.h"
#include "nic/nic.h"
#include "outputs/outputs.h"
#include "policy/policy.h"
#include "select/decision.h"
#include "smoke/smoke.h"
#include "util/err.h"

/* What every stage is given explicitly: when to stop, and where to say
 * what it does. */
struct select_ctx {
	int64_t deadline_ms; /* np_now_ms() clock */
	/* Set by cmd/'s signal handler to the signal's number (NULL: none);
	 * the run then ends within about a second (util/cancel.h). */
	const volatile sig_atomic_t *cancel;
	void (*log)(void *ud, enum exchange_log_level level, const char *msg); /* may be NULL */
	void *log_ud;
	/* The directories the run made for the out-dir, taken back if it
	 * fails (lib/outputs, outputs_unmake); NULL: not recorded.
	 * select_run records into its own. */
	struct outputs_made *made;
};

/* --smoke, parsed once in cmd/. */
enum select_smoke_mode {
	SELECT_SMOKE_AUTO,     /* run it where it can run, else skip and say why */
	SELECT_SMOKE_OFF,
	SELECT_SMOKE_REQUIRED, /* cannot run is a failure */
};

/* The smoke step's own options. */
struct select_smoke_opts {
	enum select_smoke_mode mode;
	int port;         /* NCCL_COMM_ID port on rank 0's agreed address */
	long bytes;       /* the largest all-reduce (0: SMOKE_DEFAULT_BYTES) */
	int timeout_s;    /* the smoke step's own bound, within the deadline */
	double min_busbw; /* GB/s; 0: a default from the agreed link speed */
	bool slow_link_fail; /* --slow-link fail: a slow node the ring links
			      * name fails the step (default: a warning) */
	bool no_links;    /* busbw only, no ring link timing (the --tune
			   * sweep's runs: the smoke step judged the links) */
	/* --train-container NAME...: the containers whose delivery the proof
	 * reproduces (none: those that mount the out-dir) */
	const char *train_names[JOBS_TRAIN_NAMES_MAX];
	size_t n_train_names;
	bool nccl_debug;  /* keep NCCL's log in the out-dir, and make
			   * training log the same way */
	/* Where nicpick-smoke is and what it starts from (cmd fills these;
	 * lib reads no environment of its own). */
	const char *smoke_bin;  /* NICPICK_SMOKE_BIN */
	const char *self_exe;   /* this program's path */
	const char *path_env;   /* PATH */
	char *const *base_env;  /* the environment the companion inherits */
};

/* --tune: a sweep of NCCL's socket transport settings after the smoke
 * step (lib/select/tune.c). */
enum select_tune_mode { SELECT_TUNE_OFF, SELECT_TUNE_ON };

struct select_tune_opts {
	enum select_tune_mode mode;
	int budget_s; /* --tune-budget: the sweep plans runs to fit (0: the default) */
	long bytes;   /* the representative all-reduce (0: SELECT_TUNE_BYTES, or the
		       * smoke step's size when smaller) */
};
/* The longest out-dir: every path nicpick makes under it (the smoke
 * step's ".nicpick-smoke.XXXXXX/nccl.conf", NCCL_DEBUG_FILE's
 * "nccl-debug/train.%h.%p") must fit SMOKE_PATH_MAX and the outputs'
 * 512-byte values. */
#define SELECT_OUT_DIR_MAX 400

#define SELECT_TUNE_DEFAULT_BUDGET_S 15
/* What one run of the sweep is planned to take: a process, its CUDA
 * context and NCCL's init (about a second on an H200 over sockets), 1, 8
 * and 64 MiB checked and timed, teardown. */
#define SELECT_TUNE_RUN_MS 2500
/* The representative all-reduce: a DDP bucket-sized message and more;
 * --smoke-bytes when smaller. */
#define SELECT_TUNE_BYTES (64L << 20)

/* One configuration: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, both
 * 0 for NCCL's own defaults (neither variable set). */
struct select_tune_conf {
	int nthreads, nsocks;
};
/* NCCL's limits (src/transport/net_socket.cc, 2.28.3: MAX_THREADS 16,
 * MAX_SOCKETS 64 for threads x sockets). */
#define SELECT_TUNE_THREADS_MAX 16
#define SELECT_TUNE_SOCKETS_MAX 64
#define SELECT_TUNE_RUNS_MAX 16

struct select_tune_row {
	struct select_tune_conf c;
	bool ok;       /* ran and gave exact sums */
	double busbw;  /* GB/s at the representative size, the ranks' mean */
	long ms;       /* the run, start to verdict */
	char why[160]; /* !ok: why */
};

enum select_tune_status {
	SELECT_TUNE_NOT_RUN,  /* --tune off: nothing written */
	SELECT_TUNE_SKIPPED,  /* reason says why */
	SELECT_TUNE_DEFAULTS, /* measured; NCCL's defaults stand (never worse) */
	SELECT_TUNE_TUNED,    /* best is written to the outputs */
};

struct select_tune {
	enum select_tune_status status;
	char reason[512];
	long bytes;
	int budget_s;
	int64_t ms; /* the whole sweep */
	size_t n;
	struct select_tune_row rows[SELECT_TUNE_RUNS_MAX];
	double defaults, spread; /* GB/s: the better defaults run, |first - last| */
	double margin;           /* what the best had to beat the defaults by */
	int best;                /* index into rows, -1 none */
};

/* The sweep's plan: NCCL's defaults first and last (their difference is
 * the run-to-run spread), in between the configurations most likely to
 * help first, as many as the budget fits at SELECT_TUNE_RUN_MS a run.
 * Every pod computes the same plan from the same options.  Returns the
 * number of runs, 0 when fewer than 3 fit. */
size_t select_tune_plan(int budget_s, struct select_tune_conf *out, size_t max);
/* The verdict from the measured rows (pure): best, defaults, spread,
 * margin, status TUNED or DEFAULTS, and the reason. */
void select_tune_verdict(struct select_tune *t);
struct select_smoke_plan;
/* Run the sweep after a passed smoke step (p, env and smoke as the smoke
 * step had them); skip it with the reason over NET/IB, alone, or when the
 * smoke test did not run.  A run that fails ends the sweep with nothing
 * tuned.  With TUNED, the two variables are added to env.  Returns -1
 * only on an internal error. */
int select_tune_run(const struct select_tune_opts *t, const struct select_smoke_opts *o,
		    const struct select_ctx *cx, const char *out_dir, const struct select_smoke_plan *p,
		    struct outputs_env *env, const struct smoke_report *smoke, struct select_tune *out,
		    np_error *err);
/* "tune" in decision.json (NULL for SELECT_TUNE_NOT_RUN). */
json_t *select_tune_json(const struct select_tune *t);
/* "4 x 4: 9.61 GB/s, NCCL's defaults 2.66 GB/s ..." for the log. */
void select_tune_text(const struct select_tune *t, char *buf, size_t len);

/* The whole flow's options, one struct per stage. */
struct select_opts {
	struct select_ctx ctx;
	/* discover: the node, a replay, or a saved `discover --json` */
	struct nic_source src;
	const char *snapshot;
	/* rank */
	struct policy policy;
	/* agree: only with peers_k8s; the exchange's k8s, deadline and log
	 * are filled in by select_run */
	bool peers_k8s;
	struct k8s_config_overrides k8s;
	struct exchange_opts ex;
	/* smoke */
	struct select_smoke_opts smoke;
	struct select_tune_opts tune;
	/* write */
	const char *out_dir; /* NULL: decide but write nothing; at most SELECT_OUT_DIR_MAX bytes */
	bool strict_env;     /* a pod setting that overrides the outputs fails */
};

struct select_result {
	struct nic_list nics;
	struct policy_ranking ranking;
	json_t *decision; /* decision.json, NULL before a choice exists */
	int chosen;       /* index into nics.v, -1 none */
	bool agreed;      /* peers_k8s: the exchange ran */
	struct exchange_result ex;
	struct smoke_report smoke;
	struct select_tune tune;
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
	/* How the training container gets the variables (NULL: not known,
	 * tested through the environment). */
	const struct jobs_train *train;
	/* Job-wide: pods whose NCCL ignores the nccl.conf their training
	 * reads (agree_versions.floor); "" or NULL none. */
	const char *floor;
};

/* `nicpick smoke` alone: the plan and the environment, from a finished
 * out-dir (decision.json, strictly read) or from the ranks given
 * (NCCL's settings are then the environment's own: env is empty). */
struct select_smoke_alone {
	struct select_smoke_plan plan;
	struct outputs_env env;
	struct select_decision_read decision;
	char ifname[IFNAMSIZ + 1];
};
/* NP_EUSAGE for a malformed comm_id.  env_ifname: NCCL_SOCKET_IFNAME. */
int select_smoke_alone_args(int rank, int world, const char *comm_id, const char *iface,
			    const char *env_ifname, struct select_smoke_alone *s, np_error *err);
int select_smoke_alone_outdir(const char *dir, struct select_smoke_alone *s, np_error *err);

/* Run (or skip) the smoke all-reduce with env, its logs under out_dir
 * (made with its parents); fills rep.  0 when it
 * passed or was skipped, -1 with NP_ESMOKE when it failed or is required
 * and cannot run. */
int select_smoke(const struct select_smoke_opts *o, const struct select_ctx *cx, const char *out_dir,
		 const struct select_smoke_plan *p, const struct outputs_env *env,
		 struct smoke_report *rep, np_error *err);
/* What the smoke test would use on this pod (nicpick-smoke info), for its
 * report: NCCL, CUDA and GPU, or why it cannot run ("no-gpu", ...), with
 * the details in why ("" when it can).  Returns false (why says why) when
 * the companion gave no answer. */
bool select_smoke_info(const struct select_smoke_opts *o, const struct select_ctx *cx, struct agree_gpu *g,
		       char *why, size_t len);
/* NCCL_COMM_ID's syntax: "10.9.0.1:29418", "[fd00::1]:29418". */
void select_comm_id(const char *addr, int port, char *buf, size_t len);

/* Gather the node's interfaces (discovery or snapshot) and rank them. */
int select_gather(const struct select_opts *o, struct select_result *r, np_error *err);
/* The whole flow; on NP_ENOIFACE `r` still holds every verdict. */
int select_run(const struct select_opts *o, struct select_result *r, np_error *err);
void select_result_free(struct select_result *r);

/* The human table: one row per interface with its verdict (malloc'd). */
char *select_render_table(const struct nic_list *l, const struct policy_ranking *rk);

#endif
