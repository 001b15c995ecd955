/* `nicpick status JOB` (also `kubectl nicpick status JOB`): a training
 * job's network at a glance, from what nicpick wrote on the job's pods
 * (the annotations of lib/exchange/message.h and the agreement's report)
 * and the pods' Events.
 *
 * JOB is mapped to its pods as the agreement maps a pod to its job
 * (lib/jobs): the pods carrying the kind's job label with JOB's name
 * (batch.kubernetes.io/job-name, training.kubeflow.org/job-name,
 * jobset.sigs.k8s.io/jobset-name: a TrainJob's pods are its JobSet's), and
 * of them the members of the one selector that jobs_rule gives those pods
 * (a JobSet's replicated job that runs nicpick, its latest restart
 * attempt).  It needs get/list/watch on pods and list on events.
 *
 * Nothing here prints: the text and the JSON are returned, and --watch
 * hands each new view to a callback. */
#ifndef NP_STATUS_H
#define NP_STATUS_H

#include <jansson.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#include "agree/agree.h"
#include "exchange/message.h"
#include "jobs/jobs.h"
#include "util/err.h"

struct k8s_client;

/* --kind */
enum status_kind {
	STATUS_KIND_ANY, /* whichever kind has pods of that name */
	STATUS_KIND_JOB,
	STATUS_KIND_PYTORCHJOB,
	STATUS_KIND_JOBSET,
	STATUS_KIND_TRAINJOB,
};
/* "Job", "PyTorchJob", "JobSet", "TrainJob" (case-insensitive); -1 none. */
int status_kind_parse(const char *s);
const char *status_kind_name(enum status_kind k);

/* What nicpick is doing on one pod, in the order a pod goes through. */
enum status_pod_state {
	STATUS_POD_PENDING,  /* not running yet (scheduling, pulling) */
	STATUS_POD_STARTING, /* running, no report yet */
	STATUS_POD_REPORTED, /* waiting for the gatherer's decision */
	STATUS_POD_PROBING,  /* has its part, probing its ring neighbour */
	STATUS_POD_PROBED,   /* probed, waiting for the round's end */
	STATUS_POD_PROVING,  /* the round is final: smoke test, outputs */
	STATUS_POD_DONE,     /* decided, outputs written */
	STATUS_POD_FAILED,   /* nicpick failed on this pod */
};
const char *status_pod_state_name(enum status_pod_state s);

enum status_job_state { STATUS_WAITING, STATUS_DECIDED, STATUS_FAILED };
const char *status_job_state_name(enum status_job_state s);

#define STATUS_TEXT_MAX 1024
#define STATUS_WARN_MAX 4

struct status_pod {
	char name[AGREE_NAME_MAX];
	char node[AGREE_NAME_MAX];  /* "" not scheduled */
	char phase[32];             /* the Pod's status.phase */
	enum status_pod_state state;
	bool gatherer;
	int round;                  /* of its assignment, 0 none */
	char network[AGREE_NET_TEXT_MAX];
	char ifname[IFNAMSIZ];
	char addr[AGREE_ADDR_TEXT_MAX];
	char next_pod[AGREE_NAME_MAX];
	int rank;                   /* -1 none */
	bool has_probe;             /* a probe of its current round */
	bool probe_ok;
	double probe_mbps;
	char probe_detail[EXCHANGE_DETAIL_MAX];
	bool has_outcome;
	struct exchange_outcome outcome;
	/* What the smoke test's ring-link verdict names this pod: the slow
	 * node (both its ring links slow), or one end of a lone slow link. */
	enum { STATUS_SUSPECT_NONE, STATUS_SUSPECT_NODE, STATUS_SUSPECT_LINK_END } suspect;
	int nccl;                   /* from its report (or the smoke test), 0 unknown */
	int exit_code;              /* the nicpick init container's, -1 unknown */
	char detail[STATUS_TEXT_MAX]; /* what it waits for, or why it failed */
	size_t n_warn;
	char warn[STATUS_WARN_MAX][EXCHANGE_DETAIL_MAX * 2];
};

struct status_job {
	char name[JOBS_VALUE_MAX];
	char namespace[JOBS_VALUE_MAX];
	enum status_kind kind;
	char kind_text[64];          /* "Indexed Job", "JobSet", ... (lib/jobs) */
	char selector[JOBS_SELECTOR_MAX];
	enum status_job_state state;
	int exit_code;               /* what `nicpick status` exits with */
	int expect;                  /* pods the job should have, 0 unknown */
	char gatherer[AGREE_NAME_MAX];
	int round;
	char network[AGREE_NET_TEXT_MAX];
	char smoke[16];              /* passed / failed / skipped, "" not yet */
	bool has_busbw;
	double busbw;                /* GB/s, the lowest of the pods' */
	char suspect[EXCHANGE_DETAIL_MAX * 2];
	char versions[AGREE_VERSIONS_TEXT_MAX];
	char smoke_skip[AGREE_VERSIONS_TEXT_MAX];
	char waiting[STATUS_TEXT_MAX]; /* what the job waits for ("" decided) */
	char reason[STATUS_TEXT_MAX];  /* failed: why */
	size_t n_pods;
	struct status_pod *pods;       /* sorted by name */
};

/* Pure: the job's view from the pods (a JSON array of Pod objects, those
 * of the kind's label) and the namespace's Events (an array, or NULL).
 * Free with status_job_free, also after a failure. */
int status_build(const json_t *pods, const json_t *events, const char *ns, const char *job,
		 enum status_kind kind, struct status_job *out, np_error *err);
void status_job_free(struct status_job *j);

/* Find the kind (when STATUS_KIND_ANY) and read the view: NP_EUSAGE when
 * JOB names pods of more than one kind (pass --kind), NP_EK8S for an API
 * error, a 403 naming the verb and resource that the user lacks. */
int status_read(struct k8s_client *k, const char *ns, const char *job, enum status_kind kind,
		struct status_job *out, np_error *err);

/* Follow the job's pods until it is decided or failed: each view that
 * differs from the last one goes to cb (return nonzero to stop early). */
typedef int (*status_view_cb)(const struct status_job *j, void *ud);
int status_watch(struct k8s_client *k, const char *ns, const char *job, enum status_kind kind,
		 status_view_cb cb, void *ud, np_error *err);

/* The job line and the pods' table (wide: more columns), or the JSON
 * document (its fields are documented in the README).  malloc'd, NULL on
 * ENOMEM. */
char *status_text(const struct status_job *j, bool wide);
char *status_json(const struct status_job *j);

#endif
