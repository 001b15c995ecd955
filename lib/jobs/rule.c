/* The job kind, its members and its gatherer: a pure function of the pod.
 *
 * The gatherer must be a pod that runs nicpick, found from labels alone, and
 * the same for every pod of the job:
 *   Indexed Job        completion index 0;
 *   PyTorchJob         master 0 if the job has a Master, else worker 0 (the
 *                      operator marks neither in v1.7, and worker 0 with
 *                      job-role=master since v1.8, so the role label alone
 *                      cannot tell; the replica labels can);
 *   JobSet / TrainJob  job-index 0, completion index 0 of this pod's own
 *                      replicated job.  Not job-global-index 0: that counts
 *                      the replicas of every earlier replicated job, so in a
 *                      TrainJob whose runtime puts initializers or a launcher
 *                      before `node`, it is a pod that never runs nicpick. */
#include <stdio.h>
#include <string.h>

#include "jobs/jobs.h"

const char *jobs_kind_name(enum jobs_kind k)
{
	switch (k) {
	case JOBS_KIND_BATCH:
		return "Indexed Job";
	case JOBS_KIND_PYTORCH_MASTER:
		return "PyTorchJob with a Master";
	case JOBS_KIND_PYTORCH_WORKERS:
		return "PyTorchJob of Workers only";
	case JOBS_KIND_JOBSET:
		return "JobSet";
	case JOBS_KIND_NONE:
		break;
	}
	return "unknown";
}

static int fits(int w, size_t len, np_error *err)
{
	if (w < 0 || (size_t)w >= len)
		return np_error_set(err, NP_EUSAGE, 0, "this pod's job labels are too long for a selector");
	return 0;
}

static int jobset_rule(const struct jobs_pod *p, struct jobs_rule *r, np_error *err)
{
	if (!p->rjob[0] || p->job_index < 0)
		return np_error_set(err, NP_EUSAGE, 0,
				    "pod %s has jobset.sigs.k8s.io/jobset-name but no replicatedjob-name "
				    "or job-index: pass --selector and --leader-selector",
				    p->name);
	r->kind = JOBS_KIND_JOBSET;
	snprintf(r->job, sizeof(r->job), "%s", p->jobset);
	int w = snprintf(r->selector, sizeof(r->selector),
			 "jobset.sigs.k8s.io/jobset-name=%s,jobset.sigs.k8s.io/replicatedjob-name=%s%s%s",
			 p->jobset, p->rjob, p->restart_attempt[0] ? ",jobset.sigs.k8s.io/restart-attempt=" : "",
			 p->restart_attempt);
	if (fits(w, sizeof(r->selector), err) < 0)
		return -1;
	/* JobSet makes its Jobs Indexed unless told otherwise; a NonIndexed
	 * Job has no completion index, and then job-index 0 is its one pod. */
	bool indexed = p->completion_index >= 0;
	w = snprintf(r->leader_selector, sizeof(r->leader_selector), "%s,jobset.sigs.k8s.io/job-index=0%s",
		     r->selector, indexed ? ",batch.kubernetes.io/job-completion-index=0" : "");
	if (fits(w, sizeof(r->leader_selector), err) < 0)
		return -1;
	snprintf(r->gatherer, sizeof(r->gatherer),
		 "job-index 0%s of replicated job %s", indexed ? ", completion index 0" : "", p->rjob);
	return 0;
}

static int pytorch_rule(const struct jobs_pod *p, struct jobs_rule *r, np_error *err)
{
	bool master = strcmp(p->pt_type, "master") == 0, worker = strcmp(p->pt_type, "worker") == 0;
	if ((!master && !worker) || p->pt_index < 0)
		return np_error_set(err, NP_EUSAGE, 0,
				    "pod %s of PyTorchJob %s has replica-type '%s' and no usable "
				    "replica-index: pass --selector and --leader-selector",
				    p->name, p->pt_job, p->pt_type);
	/* A worker marked master (v1.8+) says the job has no Master. */
	bool has_master = master || (p->pt_master_env && !(worker && p->pt_role_master));
	r->kind = has_master ? JOBS_KIND_PYTORCH_MASTER : JOBS_KIND_PYTORCH_WORKERS;
	snprintf(r->job, sizeof(r->job), "%s", p->pt_job);
	int w = snprintf(r->selector, sizeof(r->selector), "training.kubeflow.org/job-name=%s", p->pt_job);
	if (fits(w, sizeof(r->selector), err) < 0)
		return -1;
	const char *type = has_master ? "master" : "worker";
	w = snprintf(r->leader_selector, sizeof(r->leader_selector),
		     "%s,training.kubeflow.org/replica-type=%s,training.kubeflow.org/replica-index=0",
		     r->selector, type);
	if (fits(w, sizeof(r->leader_selector), err) < 0)
		return -1;
	snprintf(r->gatherer, sizeof(r->gatherer), "%s 0", type);
	return 0;
}

static int batch_rule(const struct jobs_pod *p, struct jobs_rule *r, np_error *err)
{
	if (p->completion_index < 0)
		return np_error_set(err, NP_EUSAGE, 0,
				    "Job %s is not Indexed, so no pod can be told to gather: run it with "
				    "completionMode: Indexed, or pass --leader-selector",
				    p->batch_job);
	r->kind = JOBS_KIND_BATCH;
	snprintf(r->job, sizeof(r->job), "%s", p->batch_job);
	int w = snprintf(r->selector, sizeof(r->selector), "batch.kubernetes.io/job-name=%s", p->batch_job);
	if (fits(w, sizeof(r->selector), err) < 0)
		return -1;
	w = snprintf(r->leader_selector, sizeof(r->leader_selector),
		     "%s,batch.kubernetes.io/job-completion-index=0", r->selector);
	if (fits(w, sizeof(r->leader_selector), err) < 0)
		return -1;
	snprintf(r->gatherer, sizeof(r->gatherer), "completion index 0");
	return 0;
}

int jobs_rule(const struct jobs_pod *p, struct jobs_rule *r, np_error *err)
{
	memset(r, 0, sizeof(*r));
	/* A JobSet's pods also carry their Job's batch labels: JobSet first. */
	if (p->jobset[0])
		return jobset_rule(p, r, err);
	if (p->pt_job[0])
		return pytorch_rule(p, r, err);
	if (p->batch_job[0])
		return batch_rule(p, r, err);
	return np_error_set(err, NP_EUSAGE, 0,
			    "this pod carries none of the job labels (training.kubeflow.org/job-name, "
			    "jobset.sigs.k8s.io/jobset-name, batch.kubernetes.io/job-name): pass "
			    "--selector and --leader-selector");
}
