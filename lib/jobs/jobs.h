/* Which kind of training job a pod belongs to, which pods run nicpick with
 * it, and which of them gathers — from the pod's own object, parsed once.
 *
 * The controllers label their pods as follows (the unit tests carry label
 * sets taken from each controller's source):
 *   batch/v1 Indexed Job   batch.kubernetes.io/job-name, job-completion-index
 *   PyTorchJob             training.kubeflow.org/job-name, replica-type,
 *                          replica-index, job-role=master on the Master
 *                          (v1.8+: on worker 0 when there is no Master)
 *   JobSet                 jobset.sigs.k8s.io/jobset-name, replicatedjob-name,
 *                          job-index, plus the batch labels of its Job
 *   TrainJob (Trainer v2)  a JobSet of the TrainJob's name: its pods carry
 *                          JobSet labels only, so the rule is the JobSet's;
 *                          only the JobSet's ownerReferences tell them apart.
 *
 * Also here: the owning job's size, checked against --expect (size.c), and
 * the training containers' settings that would override nicpick's outputs
 * (envcheck.c). */
#ifndef NP_JOBS_H
#define NP_JOBS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

struct k8s_client;

#define JOBS_LABEL_KEY_MAX 64
#define JOBS_VALUE_MAX 254 /* object names; label values are at most 63 */
#define JOBS_SELECTOR_MAX 1024

enum jobs_kind {
	JOBS_KIND_NONE,            /* none of the known labels */
	JOBS_KIND_BATCH,           /* batch/v1 Job */
	JOBS_KIND_PYTORCH_MASTER,  /* PyTorchJob with a Master replica */
	JOBS_KIND_PYTORCH_WORKERS, /* PyTorchJob of Workers only (elastic) */
	JOBS_KIND_JOBSET,          /* JobSet, a TrainJob's included */
};

/* One environment variable of a container, the last definition winning as
 * in Kubernetes.  from_ref: set through valueFrom, value unknown here. */
struct jobs_env {
	char name[64];
	char value[1024];
	bool from_ref;
};

struct jobs_mount {
	char volume[JOBS_VALUE_MAX];
	char path[1024];
	bool has_sub_path;
};

#define JOBS_ENV_FROM_MAX 8

struct jobs_container {
	char name[JOBS_VALUE_MAX];
	bool init; /* an init container */
	bool sources_nccl_env; /* its command line mentions nccl.env */
	struct jobs_env *env;
	size_t n_env;
	/* envFrom: "configMap NAME", "secret NAME" (with " prefix P"): values
	 * nicpick cannot see */
	size_t n_env_from;
	char env_from[JOBS_ENV_FROM_MAX][JOBS_VALUE_MAX + 32];
	struct jobs_mount *mounts;
	size_t n_mounts;
};

/* What nicpick needs of its own Pod object.  Strings are "" and indexes
 * -1 when the label is absent. */
struct jobs_pod {
	char name[JOBS_VALUE_MAX];
	/* batch/v1 Job */
	char batch_job[JOBS_VALUE_MAX];
	int completion_index;
	/* PyTorchJob */
	char pt_job[JOBS_VALUE_MAX];
	char pt_type[JOBS_VALUE_MAX]; /* "master", "worker" */
	int pt_index;
	bool pt_role_master;          /* training.kubeflow.org/job-role=master */
	bool pt_master_env;           /* a container has MASTER_ADDR=<job>-master-0 */
	/* JobSet */
	char jobset[JOBS_VALUE_MAX];
	char rjob[JOBS_VALUE_MAX];    /* replicatedjob-name */
	int job_index;
	int global_index;
	char restart_attempt[JOBS_VALUE_MAX];
	/* the controller owning the pod */
	char owner_kind[JOBS_VALUE_MAX];
	char owner_name[JOBS_VALUE_MAX];
	struct jobs_container *containers;
	size_t n_containers;
};

/* Parse the pod once.  NP_EUSAGE for a malformed object or label (an index
 * that is not a number).  Free with jobs_pod_free (also after a failure). */
int jobs_pod_parse(const json_t *pod, struct jobs_pod *out, np_error *err);
void jobs_pod_free(struct jobs_pod *p);

/* The job, its members and its gatherer. */
struct jobs_rule {
	enum jobs_kind kind;
	char job[JOBS_VALUE_MAX];                /* the job's name */
	char selector[JOBS_SELECTOR_MAX];        /* every pod that runs nicpick */
	char leader_selector[JOBS_SELECTOR_MAX]; /* exactly one of them */
	char gatherer[256];                      /* the rule in words, for logs */
};

/* Pure.  NP_EUSAGE when the pod carries none of the known labels, or when
 * its job has no deterministic gatherer (a non-indexed Job of several pods),
 * with a message that says which flag to pass. */
int jobs_rule(const struct jobs_pod *p, struct jobs_rule *r, np_error *err);
const char *jobs_kind_name(enum jobs_kind k);

/* --- the owning job's size (size.c) ---------------------------------- */

/* How many pods of this job run nicpick, by the job's spec. */
struct jobs_size {
	int pods;          /* -1: the spec does not say */
	char what[512];    /* "Job train: spec.completions 4" */
};

/* Pure readers, one per kind: the object as the API returns it. */
int jobs_size_from_batch_job(const json_t *job, struct jobs_size *out, np_error *err);
int jobs_size_from_pytorchjob(const json_t *pj, struct jobs_size *out, np_error *err);
/* The replicated job rjob: replicas x min(parallelism, completions). */
int jobs_size_from_jobset(const json_t *js, const char *rjob, struct jobs_size *out, np_error *err);
int jobs_size_from_trainjob(const json_t *tj, struct jobs_size *out, np_error *err);

/* Pure: NP_EUSAGE naming NICPICK_EXPECT, expect and the spec's count when
 * they differ; 0 when they agree or the spec does not say. */
int jobs_size_check(int expect, const struct jobs_size *s, np_error *err);

/* Read the owning job's spec (Job, PyTorchJob, JobSet and the TrainJob
 * owning it) and check expect against it; `note` says what was checked.  A
 * 403 or 404 only skips that object: it returns 1 and `note` says why (the
 * server's own words for a 403, anonymous or not).  Other API errors
 * fail (NP_EK8S).  A pod of no known kind (--selector given) is not checked. */
int jobs_check_pod_expect(struct k8s_client *k, const char *ns, const json_t *pod, int expect,
			  char *note, size_t note_len, np_error *err);

/* --- settings that override nicpick's outputs (envcheck.c) ------------ */

struct jobs_env_warning {
	char container[JOBS_VALUE_MAX];
	char var[32];
	char value[256]; /* as set in the pod ("" when from valueFrom) */
	char want[512];  /* what nicpick wrote, or where nccl.conf is */
	char why[256];
};

struct jobs_env_warnings {
	size_t n;
	struct jobs_env_warning v[32];
};

/* The variables nicpick's outputs set, as the check compares them (the
 * caller hands them over from its outputs; pointers into its storage). */
#define JOBS_VARS_MAX 32
struct jobs_vars {
	size_t n;
	struct {
		const char *key, *value;
	} v[JOBS_VARS_MAX];
};

/* Pure.  For each main container: NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME,
 * NCCL_SOCKET_FAMILY and NCCL_IB_HCA set to something other than what env
 * holds (a container that sources nccl.env gets nicpick's values for the
 * variables nccl.env sets), and NCCL_CONF_FILE pointing anywhere but at the
 * nccl.conf in out_dir's volume. */
void jobs_envcheck(const struct jobs_pod *p, const struct jobs_vars *env, const char *out_dir,
		   struct jobs_env_warnings *w);
/* The same from the pod's object, once the outputs are known.  With strict,
 * any warning fails with NP_EUSAGE (a pod spec that defeats the outputs is
 * a configuration error, like a bad flag). */
int jobs_envcheck_pod(const json_t *pod, const struct jobs_vars *env, const char *out_dir,
		      bool strict, struct jobs_env_warnings *w, np_error *err);
/* --- how the training containers get nicpick's variables (train.c) --- */

enum jobs_delivery {
	JOBS_DELIVERY_UNSEEN, /* no training container shows how: tested as env */
	JOBS_DELIVERY_ENV,    /* its command sources nccl.env */
	JOBS_DELIVERY_FILE,   /* NCCL_CONF_FILE names nicpick's nccl.conf, and
			       * the command does not source nccl.env */
};
const char *jobs_delivery_name(enum jobs_delivery d); /* "unseen", "env", "file" */

#define JOBS_TRAIN_VARS_MAX 32
#define JOBS_TRAIN_UNKNOWN_MAX 16
#define JOBS_TRAIN_NAMES_MAX 8

/* The training container whose delivery the smoke test reproduces. */
struct jobs_train {
	enum jobs_delivery delivery;
	char container[JOBS_VALUE_MAX]; /* "" when none was found */
	char why[512];                  /* how nicpick knows, in words */
	char conf_path[1024];           /* file: NCCL_CONF_FILE as it sets it */
	char env_path[1040];            /* where it sees nccl.env ("" unknown) */
	/* its literal NCCL_*, GLOO_* and TP_* values, as NCCL will see them:
	 * they win over nccl.conf, and an empty value stays set */
	size_t n_vars;
	struct jobs_env vars[JOBS_TRAIN_VARS_MAX];
	/* what it sets that nicpick cannot see: "NCCL_IB_HCA (valueFrom)",
	 * "envFrom configMap nccl-settings" */
	size_t n_unknown;
	char unknown[JOBS_TRAIN_UNKNOWN_MAX][JOBS_VALUE_MAX + 48];
};

/* Pure.  The training containers are those named in names (n_names > 0;
 * a name the pod lacks is NP_EUSAGE), else the main containers that mount
 * the volume an init container writes out_dir to.  The first of them is
 * the one tested; the others are named in why when they differ. */
int jobs_train_find(const struct jobs_pod *p, const char *out_dir, const char *const *names,
		    size_t n_names, struct jobs_train *t, np_error *err);

/* "container train sets NCCL_SOCKET_IFNAME='' (...)": one line. */
void jobs_env_warning_text(const struct jobs_env_warning *w, char *buf, size_t len);

#endif
