/* The job-wide exchange over the Kubernetes API.
 *
 * Every pod publishes its report as an annotation on its own Pod object.
 * One pod, chosen deterministically from labels (index 0 of the job), is the
 * gatherer: it watches the job's pods, decides once every report is in, and
 * writes each pod's part of the decision (its interface, address, and the
 * ring neighbour to probe) onto that pod's own object.  A follower only ever
 * reads its own Pod object, so its API traffic does not grow with the job.
 * Pods probe their ring neighbour and publish the result, then watch the
 * gatherer's pod, where the gatherer declares the round final (one write
 * for the whole job), or removes the network, decides again and hands out
 * new parts. */
#ifndef NP_EXCHANGE_H
#define NP_EXCHANGE_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "agree/agree.h"
#include "jobs/jobs.h"
#include "k8s/k8s.h"
#include "nic/nic.h"
#include "policy/policy.h"
#include "util/err.h"

#define EXCHANGE_ANN_REPORT "nicpick.io/report"
#define EXCHANGE_ANN_ASSIGN "nicpick.io/assignment"
#define EXCHANGE_ANN_PROBE "nicpick.io/probe"
#define EXCHANGE_ANN_RESULT "nicpick.io/result"
/* Beside it, the same outcome as a message (message.h). */
#define EXCHANGE_ANN_OUTCOME "nicpick.io/outcome"
/* On the gatherer's own pod: the state of the current round. */
#define EXCHANGE_ANN_ROUND "nicpick.io/round"
/* On the gatherer's own pod: what it waits for (followers show it). */
#define EXCHANGE_ANN_PROGRESS "nicpick.io/progress"
/* On a pod that gathers: its claim, so that a second gatherer notices. */
#define EXCHANGE_ANN_GATHERER "nicpick.io/gatherer"

enum exchange_log_level { EXCHANGE_INFO, EXCHANGE_WARN };

/* Each pod's requests (its two connections together): client-go's default
 * rate limit (kubernetes/client-go rest/config.go DefaultQPS, DefaultBurst).
 * The gatherer's assignments have their own budget (publish.c). */
#define EXCHANGE_QPS 5.0
#define EXCHANGE_BURST 10
/* The gatherer's own requests (not its assignments) start with 10 more:
 * a round costs it about 14 requests of its own in all, and the first
 * round should not wait for tokens. */
#define EXCHANGE_GATHERER_EXTRA_BURST 10

struct exchange_opts {
	struct k8s_config *k8s;      /* API server, credentials, namespace, pod */
	const char *selector;        /* the job's pods; NULL: from own labels */
	const char *leader_selector; /* the gatherer; NULL: from own labels */
	int expect;                  /* pods in the job; 0: from the Job object */
	int64_t deadline_ms;         /* CLOCK_MONOTONIC; nothing waits past it */
	int probe_port;
	long probe_throughput_bytes; /* > 0: measure to rank tied networks */
	struct agree_options agree;  /* --family / --cidr */
	int log_interval_ms;         /* progress lines while waiting */
	bool local_routes;           /* the interfaces are this node's: report the
				      * gateways of its routing table (a routed
				      * fabric needs them) */
	/* What the smoke test would use here, for the report: gpu_wait(gpu_ud)
	 * gives it (NULL: none), called once, just before the report is built,
	 * so that the caller can look it up while the exchange reaches the API
	 * server.  No gpu_wait: none. */
	const struct agree_gpu *(*gpu_wait)(void *ud);
	void *gpu_ud;
	/* The training containers (lib/jobs/train.c): where nicpick writes
	 * and which containers --train-container names; their delivery goes
	 * into the report (the gatherer checks the job's NCCL floor). */
	const char *out_dir;
	const char *const *train_names;
	size_t n_train_names;
	bool require_same_versions;  /* gatherer: pods whose NCCL, CUDA or GPU
				      * differ fail the job (NP_ESMOKE) */
	bool strict;		     /* gatherer: the preferred network failing its
				      * probe fails the job (NP_ENOCOMMON) instead
				      * of a fallback to the next one */
	void (*log)(void *ud, enum exchange_log_level level, const char *msg);
	void *log_ud;
	const volatile sig_atomic_t *cancel; /* select_ctx's */
};

/* This pod's part of one agreed network (a rail). */
#define EXCHANGE_RAILS_MAX 4 /* the parts of one assignment */
struct exchange_rail {
	char network[AGREE_NET_TEXT_MAX];
	char ifname[IFNAMSIZ];
	char addr[AGREE_ADDR_TEXT_MAX];
	char next_pod[AGREE_NAME_MAX];
	char next_addr[AGREE_ADDR_TEXT_MAX];
	char root_addr[AGREE_ADDR_TEXT_MAX]; /* rank 0's address on it */
};

/* This pod's part of the agreed network: the first rail's in the fields
 * below, every rail (the first included) in rails[]. */
struct exchange_result {
	bool leader;
	int epoch;
	size_t n_pods;
	char network[AGREE_NET_TEXT_MAX];
	char ifname[IFNAMSIZ];
	char addr[AGREE_ADDR_TEXT_MAX];
	int family;
	char next_pod[AGREE_NAME_MAX]; /* ring neighbour probed ("" when alone) */
	char next_addr[AGREE_ADDR_TEXT_MAX];
	char probe_detail[256];
	double probe_mbps;
	/* The smoke test's ranks (agree_rail_rank): the gatherer is 0. */
	int rank;
	int world;
	char root_addr[AGREE_ADDR_TEXT_MAX];
	char root_pod[AGREE_NAME_MAX]; /* the gatherer, rank 0 */
	long min_mbps; /* the rail's worst-case speed */
	size_t n_rails; /* >= 1 on success */
	struct exchange_rail rails[EXCHANGE_RAILS_MAX];
	/* Job-wide (agree_versions_compare): pods whose versions differ from
	 * the majority, and pods where the smoke test cannot run; "" none. */
	char versions[AGREE_VERSIONS_TEXT_MAX];
	char smoke_skip[AGREE_VERSIONS_TEXT_MAX];
	/* Job-wide: the networks that failed their probe before this one was
	 * agreed, and why; "" when the first choice passed. */
	char probe_warning[1024];
	/* Job-wide: pods whose NCCL ignores the nccl.conf their training
	 * reads (agree_versions.floor); "" none. */
	char floor[AGREE_VERSIONS_TEXT_MAX];
	struct jobs_train train; /* this pod's training container */
	bool has_decision;  /* the gatherer's full decision; followers have none */
	struct agree_decision decision;
	json_t *pod;        /* this pod's object as last read */
	struct k8s_stats stats; /* API traffic of this pod, both connections */
	/* The exchange's connection and the process's rate limit, kept for
	 * exchange_publish_result (no new connection, no new handshake). */
	struct k8s_client *client;
	struct k8s_limiter *limiter;
};

/* The label selectors that define the job and its gatherer, from the pod's
 * own labels.  NP_EUSAGE when the pod carries none of the known labels. */
int exchange_selectors(const json_t *pod, char **selector, char **leader_selector, np_error *err);
/* Why this pod gathers by the rule (lib/jobs), for its claim: "worker 0 of
 * a PyTorchJob of Workers only (no MASTER_ADDR in its containers)". */
void exchange_gatherer_why(const json_t *pod, char *buf, size_t len);

int exchange_run(const struct exchange_opts *o, const struct nic_list *nics,
		 const struct policy_ranking *ranking, struct exchange_result *res, np_error *err);
void exchange_result_free(struct exchange_result *res);

/* The end of the run, on this pod: the result annotation (message, the
 * one line), the outcome annotation (outcome: exchange_outcome_to_json's,
 * or NULL) and an Event, NetworkSelected (status NP_OK, after the outputs
 * are written; type Warning when res->probe_warning is set) or
 * NetworkSelectionFailed (status: the exit status).  The pod is read again
 * (also when res->pod is NULL: a run that failed before the exchange read
 * it, by o->k8s->pod_name).  A gatherer that failed also marks its round
 * failed, unless it already ended, with "the gatherer POD failed: MESSAGE
 * (exit N)": its followers read that and exit at once with its status and
 * reason instead of waiting out their deadline. */
int exchange_publish_result(const struct exchange_opts *o, const struct exchange_result *res,
			    int status, const char *message, const char *outcome, np_error *err);

#endif
