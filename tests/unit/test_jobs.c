/* Job kinds, members and gatherer from real pods' labels; the owning job's
 * size against --expect; settings in the pod that override the outputs.
 *
 * Each label set is the one the controller writes; the comment above it
 * names the file of the controller's source it comes from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/jobs.h"
#include "outputs/outputs.h"

static json_t *load(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	if (!j)
		fail_msg("bad test JSON: %s at %d: %s", je.text, je.position, text);
	return j;
}

/* The rule for a pod given as JSON; returns the jobs_rule status. */
static int rule_of(const char *pod_json, struct jobs_rule *r, np_error *err)
{
	json_t *pod = load(pod_json);
	struct jobs_pod p;
	int ret = jobs_pod_parse(pod, &p, err) < 0 ? -1 : jobs_rule(&p, r, err);
	jobs_pod_free(&p);
	json_decref(pod);
	return ret;
}

/* Does a selector of key=value terms match a pod's labels? (What the API
 * server does with it; the tests use it to say who is a member.) */
static bool matches(const char *selector, const char *pod_json)
{
	json_t *pod = load(pod_json);
	json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
	char buf[JOBS_SELECTOR_MAX], *save = NULL;
	bool ok = true;
	snprintf(buf, sizeof(buf), "%s", selector);
	for (char *t = strtok_r(buf, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		assert_non_null(eq);
		*eq = '\0';
		const char *v = json_string_value(json_object_get(labels, t));
		ok = v && strcmp(v, eq + 1) == 0;
	}
	json_decref(pod);
	return ok;
}

/* --- batch/v1 Indexed Job ------------------------------------------------
 * kubernetes: staging/src/k8s.io/api/batch/v1/types.go (JobNameLabel,
 * ControllerUidLabel, the unprefixed legacy pair) and
 * pkg/controller/job/indexed_job_utils.go (addCompletionIndexLabel uses
 * batch.kubernetes.io/job-completion-index as the label key). */
#define BATCH_POD(idx)                                                                        \
	"{\"metadata\": {\"name\": \"train-" idx "-x7k2p\", \"labels\": {"                   \
	"\"batch.kubernetes.io/controller-uid\": \"5c1a9d1e-0b1f-4d0e-9a53-2f0c3b7d9e11\","   \
	"\"batch.kubernetes.io/job-name\": \"train\","                                        \
	"\"controller-uid\": \"5c1a9d1e-0b1f-4d0e-9a53-2f0c3b7d9e11\","                       \
	"\"job-name\": \"train\","                                                            \
	"\"batch.kubernetes.io/job-completion-index\": \"" idx "\"},"                         \
	"\"ownerReferences\": [{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\", "            \
	"\"name\": \"train\", \"controller\": true}]}}"

static void indexed_job_gathers_at_completion_index_0(void **state)
{
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of(BATCH_POD("2"), &r, &err), 0);
	assert_int_equal(r.kind, JOBS_KIND_BATCH);
	assert_string_equal(r.job, "train");
	assert_string_equal(r.selector, "batch.kubernetes.io/job-name=train");
	assert_string_equal(r.leader_selector,
			    "batch.kubernetes.io/job-name=train,batch.kubernetes.io/job-completion-index=0");
	assert_true(matches(r.leader_selector, BATCH_POD("0")));
	assert_false(matches(r.leader_selector, BATCH_POD("2")));
	assert_true(matches(r.selector, BATCH_POD("3")));
}

static void non_indexed_job_is_refused_with_the_fix(void **state)
{
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of("{\"metadata\": {\"name\": \"p\", \"labels\": {"
				 "\"batch.kubernetes.io/job-name\": \"train\", \"job-name\": \"train\"}}}",
				 &r, &err),
			 -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "completionMode: Indexed"));
}

/* --- PyTorchJob ------------------------------------------------------------
 * kubeflow/common pkg/apis/common/v1/constants.go (job-name, replica-type,
 * replica-index, job-role, operator-name); training-operator
 * pkg/controller.v1/pytorch/envvar.go (setPodEnv: MASTER_ADDR=<job>-master-0
 * in every container only when the job has a Master) and
 * pkg/controller.v1/pytorch/pytorchjob_controller.go (IsMasterRole: v1.7
 * marks only the Master with job-role=master; kubeflow/training-operator
 * pull request #1969, "isMaster fix", in v1.8, also marks worker 0 of a job
 * without a Master). */
#define PT_POD(name, type, idx, role, env)                                                    \
	"{\"metadata\": {\"name\": \"" name "\", \"labels\": {"                               \
	"\"training.kubeflow.org/operator-name\": \"pytorchjob-controller\","                 \
	"\"training.kubeflow.org/job-name\": \"pt\","                                         \
	"\"training.kubeflow.org/replica-type\": \"" type "\","                               \
	"\"training.kubeflow.org/replica-index\": \"" idx "\"" role "},"                      \
	"\"ownerReferences\": [{\"apiVersion\": \"kubeflow.org/v1\", \"kind\": \"PyTorchJob\", " \
	"\"name\": \"pt\", \"controller\": true}]},"                                          \
	"\"spec\": {\"initContainers\": [{\"name\": \"nicpick\"}],"                           \
	"\"containers\": [{\"name\": \"pytorch\", \"env\": [" env "]}]}}"
#define ROLE_MASTER ", \"training.kubeflow.org/job-role\": \"master\""
#define MASTER_ENV                                                                            \
	"{\"name\": \"PYTHONUNBUFFERED\", \"value\": \"0\"},"                                 \
	"{\"name\": \"MASTER_PORT\", \"value\": \"23456\"},"                                  \
	"{\"name\": \"MASTER_ADDR\", \"value\": \"pt-master-0\"},"                            \
	"{\"name\": \"WORLD_SIZE\", \"value\": \"4\"}, {\"name\": \"RANK\", \"value\": \"2\"}"
/* pkg/controller.v1/pytorch/elastic.go: the rendezvous goes to worker 0. */
#define ELASTIC_ENV                                                                           \
	"{\"name\": \"PYTHONUNBUFFERED\", \"value\": \"0\"},"                                 \
	"{\"name\": \"PET_RDZV_ENDPOINT\", \"value\": \"pt-worker-0:23456\"},"                \
	"{\"name\": \"PET_RDZV_BACKEND\", \"value\": \"c10d\"},"                              \
	"{\"name\": \"PET_NNODES\", \"value\": \"2:4\"}"

static void pytorchjob_with_master_gathers_at_master_0(void **state)
{
	const char *master = PT_POD("pt-master-0", "master", "0", ROLE_MASTER, MASTER_ENV);
	const char *worker = PT_POD("pt-worker-1", "worker", "1", "", MASTER_ENV);
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of(worker, &r, &err), 0);
	assert_int_equal(r.kind, JOBS_KIND_PYTORCH_MASTER);
	assert_string_equal(r.selector, "training.kubeflow.org/job-name=pt");
	assert_string_equal(r.leader_selector,
			    "training.kubeflow.org/job-name=pt,training.kubeflow.org/replica-type=master,"
			    "training.kubeflow.org/replica-index=0");
	assert_true(matches(r.leader_selector, master));
	assert_true(matches(r.selector, master));
	/* The master itself says the same. */
	struct jobs_rule m;
	assert_int_equal(rule_of(master, &m, &err), 0);
	assert_string_equal(m.leader_selector, r.leader_selector);
	/* Worker 0 of a job with a Master does not gather. */
	assert_false(matches(r.leader_selector, PT_POD("pt-worker-0", "worker", "0", "", MASTER_ENV)));
}

static void elastic_pytorchjob_v1_7_gathers_at_worker_0(void **state)
{
	/* v1.7: no pod carries job-role, and no MASTER_ADDR without a Master. */
	const char *w0 = PT_POD("pt-worker-0", "worker", "0", "", ELASTIC_ENV);
	const char *w3 = PT_POD("pt-worker-3", "worker", "3", "", ELASTIC_ENV);
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of(w3, &r, &err), 0);
	assert_int_equal(r.kind, JOBS_KIND_PYTORCH_WORKERS);
	assert_string_equal(r.leader_selector,
			    "training.kubeflow.org/job-name=pt,training.kubeflow.org/replica-type=worker,"
			    "training.kubeflow.org/replica-index=0");
	assert_true(matches(r.leader_selector, w0));
	assert_false(matches(r.leader_selector, w3));
	assert_string_equal(r.gatherer, "worker 0");
}

static void elastic_pytorchjob_v1_8_marks_worker_0_master_and_it_gathers(void **state)
{
	/* v1.8+: worker 0 of a Workers-only job carries job-role=master. */
	const char *w0 = PT_POD("pt-worker-0", "worker", "0", ROLE_MASTER, ELASTIC_ENV);
	const char *w1 = PT_POD("pt-worker-1", "worker", "1", "", ELASTIC_ENV);
	struct jobs_rule r0, r1;
	np_error err = { 0 };
	assert_int_equal(rule_of(w0, &r0, &err), 0);
	assert_int_equal(rule_of(w1, &r1, &err), 0);
	assert_int_equal(r0.kind, JOBS_KIND_PYTORCH_WORKERS);
	assert_int_equal(r1.kind, JOBS_KIND_PYTORCH_WORKERS);
	assert_string_equal(r0.leader_selector, r1.leader_selector);
	assert_true(matches(r1.leader_selector, w0));
}

static void pytorch_pod_without_replica_index_is_refused(void **state)
{
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of("{\"metadata\": {\"name\": \"p\", \"labels\": {"
				 "\"training.kubeflow.org/job-name\": \"pt\","
				 "\"training.kubeflow.org/replica-type\": \"worker\"}}}",
				 &r, &err),
			 -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "--leader-selector"));
}

/* --- JobSet ------------------------------------------------------------------
 * kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go (the keys) and
 * pkg/controllers/jobset_controller.go (labelAndAnnotateObject;
 * globalJobIndex sums the replicas of every earlier replicated job), plus the
 * batch labels of the Job it creates (Indexed by default). */
#define JS_POD(js, rjob, reps, jidx, gidx, cidx)                                              \
	"{\"metadata\": {\"name\": \"" js "-" rjob "-" jidx "-" cidx "-abcde\", \"labels\": {"   \
	"\"jobset.sigs.k8s.io/jobset-name\": \"" js "\","                                     \
	"\"jobset.sigs.k8s.io/replicatedjob-name\": \"" rjob "\","                            \
	"\"jobset.sigs.k8s.io/restart-attempt\": \"0\","                                      \
	"\"jobset.sigs.k8s.io/replicatedjob-replicas\": \"" reps "\","                        \
	"\"jobset.sigs.k8s.io/global-replicas\": \"3\","                                      \
	"\"jobset.sigs.k8s.io/job-index\": \"" jidx "\","                                     \
	"\"jobset.sigs.k8s.io/job-global-index\": \"" gidx "\","                              \
	"\"jobset.sigs.k8s.io/job-key\": \"8f2c1e0b6b2d4c\","                                 \
	"\"batch.kubernetes.io/job-name\": \"" js "-" rjob "-" jidx "\","                     \
	"\"job-name\": \"" js "-" rjob "-" jidx "\","                                         \
	"\"batch.kubernetes.io/job-completion-index\": \"" cidx "\"},"                        \
	"\"ownerReferences\": [{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\", "            \
	"\"name\": \"" js "-" rjob "-" jidx "\", \"controller\": true}]}}"

static void jobset_one_replicated_job_gathers_at_job_0_index_0(void **state)
{
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of(JS_POD("pytorch", "workers", "1", "0", "0", "3"), &r, &err), 0);
	assert_int_equal(r.kind, JOBS_KIND_JOBSET);
	assert_string_equal(r.job, "pytorch");
	assert_string_equal(r.selector,
			    "jobset.sigs.k8s.io/jobset-name=pytorch,jobset.sigs.k8s.io/replicatedjob-name=workers,"
			    "jobset.sigs.k8s.io/restart-attempt=0");
	assert_true(matches(r.leader_selector, JS_POD("pytorch", "workers", "1", "0", "0", "0")));
	assert_false(matches(r.leader_selector, JS_POD("pytorch", "workers", "1", "0", "0", "3")));
}

static void jobset_several_replicated_jobs_keep_to_their_own(void **state)
{
	/* driver (1 replica, global index 0), then workers (2 replicas,
	 * global indexes 1 and 2). */
	const char *driver = JS_POD("js", "driver", "1", "0", "0", "0");
	const char *w_1_0 = JS_POD("js", "workers", "2", "1", "2", "0");
	const char *w_0_0 = JS_POD("js", "workers", "2", "0", "1", "0");
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of(w_1_0, &r, &err), 0);
	assert_true(matches(r.selector, w_0_0));
	assert_false(matches(r.selector, driver));
	assert_true(matches(r.leader_selector, w_0_0));
	assert_false(matches(r.leader_selector, w_1_0));
	assert_false(matches(r.leader_selector, driver));
	assert_null(strstr(r.leader_selector, "job-global-index"));
}

/* --- Trainer v2 TrainJob -----------------------------------------------------
 * kubeflow/trainer pkg/runtime/framework/plugins/jobset/jobset.go (Build: a
 * JobSet of the TrainJob's name, owned by it) and builder.go (the trainer's
 * replicated job gets replicas 1, parallelism = completions = numNodes); the
 * runtime manifests/base/runtimes/torchtune/llama3_2/llama3_2_1B.yaml puts
 * dataset-initializer and model-initializer before node, so node's first pod
 * has job-global-index 2. */
static void trainjob_with_initializers_gathers_in_node_not_at_global_index_0(void **state)
{
	const char *dataset = JS_POD("ft", "dataset-initializer", "1", "0", "0", "0");
	const char *model = JS_POD("ft", "model-initializer", "1", "0", "1", "0");
	const char *node0 = JS_POD("ft", "node", "1", "0", "2", "0");
	const char *node1 = JS_POD("ft", "node", "1", "0", "2", "1");
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of(node1, &r, &err), 0);
	assert_int_equal(r.kind, JOBS_KIND_JOBSET);
	assert_true(matches(r.leader_selector, node0));
	assert_false(matches(r.leader_selector, dataset));
	assert_false(matches(r.selector, dataset));
	assert_false(matches(r.selector, model));
	assert_true(matches(r.selector, node0));
	assert_string_equal(r.gatherer, "job-index 0, completion index 0 of replicated job node");
}

/* manifests/base/runtimes/mpi_distributed.yaml and deepspeed_distributed.yaml
 * of v2.0-v2.2: the launcher replicated job comes before node. */
static void trainjob_with_launcher_first_gathers_in_node(void **state)
{
	const char *launcher = JS_POD("ds", "launcher", "1", "0", "0", "0");
	const char *node0 = JS_POD("ds", "node", "1", "0", "1", "0");
	const char *node2 = JS_POD("ds", "node", "1", "0", "1", "2");
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of(node2, &r, &err), 0);
	assert_true(matches(r.leader_selector, node0));
	assert_false(matches(r.leader_selector, launcher));
	assert_false(matches(r.selector, launcher));
}

static void pod_without_job_labels_names_the_flags(void **state)
{
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of("{\"metadata\": {\"name\": \"p\", \"labels\": {\"app\": \"x\"}}}", &r, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "--selector"));
}

static void index_label_that_is_no_number_is_refused(void **state)
{
	struct jobs_rule r;
	np_error err = { 0 };
	assert_int_equal(rule_of("{\"metadata\": {\"name\": \"p\", \"labels\": {"
				 "\"batch.kubernetes.io/job-name\": \"t\","
				 "\"batch.kubernetes.io/job-completion-index\": \"0x1\"}}}",
				 &r, &err),
			 -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "job-completion-index"));
}

/* --- the owning job's size ------------------------------------------------ */

static void job_completions_contradicting_expect_names_both(void **state)
{
	json_t *job = load("{\"metadata\": {\"name\": \"train\"}, \"spec\": {\"completions\": 4, "
			   "\"parallelism\": 4, \"completionMode\": \"Indexed\"}}");
	struct jobs_size s;
	np_error err = { 0 };
	assert_int_equal(jobs_size_from_batch_job(job, &s, &err), 0);
	assert_int_equal(s.pods, 4);
	assert_int_equal(jobs_size_check(4, &s, &err), 0);
	assert_int_equal(jobs_size_check(3, &s, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "NICPICK_EXPECT"));
	assert_non_null(strstr(err.msg, "is 3 but Job train (spec.completions) has 4 pods"));
	json_decref(job);
}

/* kubeflow/training-operator examples/pytorch/simple.yaml: Master 1 + Worker 1. */
static void pytorchjob_size_is_master_plus_workers(void **state)
{
	json_t *pj = load("{\"metadata\": {\"name\": \"pytorch-simple\"}, \"spec\": {\"pytorchReplicaSpecs\": {"
			  "\"Master\": {\"replicas\": 1, \"restartPolicy\": \"OnFailure\"},"
			  "\"Worker\": {\"replicas\": 3, \"restartPolicy\": \"OnFailure\"}}}}");
	struct jobs_size s;
	np_error err = { 0 };
	assert_int_equal(jobs_size_from_pytorchjob(pj, &s, &err), 0);
	assert_int_equal(s.pods, 4);
	assert_non_null(strstr(s.what, "Master 1"));
	assert_non_null(strstr(s.what, "Worker 3"));
	json_decref(pj);
}

static void jobset_size_is_replicas_times_pods_of_that_replicated_job(void **state)
{
	/* As the trainer builds it from the torchtune runtime with numNodes 4. */
	json_t *js = load("{\"metadata\": {\"name\": \"ft\", \"ownerReferences\": [{\"kind\": \"TrainJob\", "
			  "\"name\": \"ft\"}]}, \"spec\": {\"replicatedJobs\": ["
			  "{\"name\": \"dataset-initializer\", \"replicas\": 1, \"template\": {\"spec\": {}}},"
			  "{\"name\": \"model-initializer\", \"replicas\": 1, \"template\": {\"spec\": {}}},"
			  "{\"name\": \"node\", \"replicas\": 1, \"template\": {\"spec\": "
			  "{\"parallelism\": 4, \"completions\": 4}}},"
			  "{\"name\": \"wide\", \"replicas\": 2, \"template\": {\"spec\": "
			  "{\"parallelism\": 3, \"completions\": 2}}}]}}");
	struct jobs_size s;
	np_error err = { 0 };
	assert_int_equal(jobs_size_from_jobset(js, "node", &s, &err), 0);
	assert_int_equal(s.pods, 4);
	assert_int_equal(jobs_size_from_jobset(js, "dataset-initializer", &s, &err), 0);
	assert_int_equal(s.pods, 1);
	assert_int_equal(jobs_size_from_jobset(js, "wide", &s, &err), 0);
	assert_int_equal(s.pods, 4); /* 2 Jobs x min(parallelism 3, completions 2) */
	assert_int_equal(jobs_size_from_jobset(js, "nope", &s, &err), -1);
	json_decref(js);
}

static void trainjob_num_nodes_when_set(void **state)
{
	json_t *tj = load("{\"metadata\": {\"name\": \"ft\"}, \"spec\": {\"runtimeRef\": "
			  "{\"name\": \"torchtune-llama3.2-1b\"}, \"trainer\": {\"numNodes\": 2}}}");
	json_t *tj0 = load("{\"metadata\": {\"name\": \"ft\"}, \"spec\": {\"runtimeRef\": "
			   "{\"name\": \"torch-distributed\"}}}");
	struct jobs_size s;
	np_error err = { 0 };
	assert_int_equal(jobs_size_from_trainjob(tj, &s, &err), 0);
	assert_int_equal(s.pods, 2);
	assert_int_equal(jobs_size_check(3, &s, &err), -1);
	assert_non_null(strstr(err.msg, "TrainJob ft (spec.trainer.numNodes) has 2 pods"));
	assert_int_equal(jobs_size_from_trainjob(tj0, &s, &err), 0);
	assert_int_equal(s.pods, -1); /* the runtime decides: nothing to check */
	assert_int_equal(jobs_size_check(3, &s, &err), 0);
	json_decref(tj);
	json_decref(tj0);
}

static void malformed_count_is_refused(void **state)
{
	json_t *job = load("{\"metadata\": {\"name\": \"t\"}, \"spec\": {\"completions\": \"4\"}}");
	struct jobs_size s;
	np_error err = { 0 };
	assert_int_equal(jobs_size_from_batch_job(job, &s, &err), -1);
	json_decref(job);
}

/* --- settings that override the outputs ------------------------------------ */

static struct jobs_vars our_env(bool rdma)
{
	struct jobs_vars e = { 0 };
	static const char *const k[] = { "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
					  "NCCL_SOCKET_FAMILY", "NCCL_IB_HCA" };
	static const char *const v[] = { "=ens3f0", "ens3f0", "ens3f0", "AF_INET", "=mlx5_0:1" };
	for (size_t i = 0; i < (rdma ? 5u : 4u); i++) {
		e.v[e.n].key = k[i];
		e.v[e.n].value = v[i];
		e.n++;
	}
	return e;
}

static void envcheck(const char *containers, bool rdma, struct jobs_env_warnings *w)
{
	char buf[4096];
	snprintf(buf, sizeof(buf),
		 "{\"metadata\": {\"name\": \"p\"}, \"spec\": {\"initContainers\": [{\"name\": \"nicpick\", "
		 "\"env\": [{\"name\": \"NCCL_SOCKET_IFNAME\", \"value\": \"\"}], "
		 "\"volumeMounts\": [{\"name\": \"nicpick\", \"mountPath\": \"/nicpick\"}]}], "
		 "\"containers\": [%s], \"volumes\": [{\"name\": \"nicpick\", \"emptyDir\": {}}]}}",
		 containers);
	json_t *pod = load(buf);
	struct jobs_pod p;
	np_error err = { 0 };
	assert_int_equal(jobs_pod_parse(pod, &p, &err), 0);
	struct jobs_vars e = our_env(rdma);
	jobs_envcheck(&p, &e, "/nicpick", w);
	jobs_pod_free(&p);
	json_decref(pod);
}

#define TRAIN(env, extra)                                                                     \
	"{\"name\": \"train\", \"command\": [\"torchrun\", \"train.py\"], \"env\": [" env "]," \
	"\"volumeMounts\": [{\"name\": \"nicpick\", \"mountPath\": \"/nicpick-ro\", \"readOnly\": true}]" extra "}"

static void empty_socket_ifname_is_a_warning_nccl_ignores_it(void **state)
{
	struct jobs_env_warnings w;
	envcheck(TRAIN("{\"name\": \"NCCL_SOCKET_IFNAME\", \"value\": \"\"}", ""), false, &w);
	assert_int_equal(w.n, 1); /* the init container's own empty value is not training's */
	assert_string_equal(w.v[0].container, "train");
	assert_string_equal(w.v[0].var, "NCCL_SOCKET_IFNAME");
	assert_non_null(strstr(w.v[0].why, "one character or less"));
	char line[1024];
	jobs_env_warning_text(&w.v[0], line, sizeof(line));
	assert_non_null(strstr(line, "container train sets NCCL_SOCKET_IFNAME=''"));
	assert_non_null(strstr(line, "nicpick wrote '=ens3f0'"));

	envcheck(TRAIN("{\"name\": \"NCCL_SOCKET_IFNAME\", \"value\": \"e\"}", ""), false, &w);
	assert_int_equal(w.n, 1);
}

/* ProcessGroupGloo::Options::create_default reads GLOO_SOCKET_IFNAME only
 * when it is longer than one character (pytorch,
 * torch/csrc/distributed/c10d/ProcessGroupGloo.cpp). */
static void one_character_gloo_ifname_is_a_warning_gloo_ignores_it(void **state)
{
	struct jobs_env_warnings w;
	envcheck(TRAIN("{\"name\": \"GLOO_SOCKET_IFNAME\", \"value\": \"e\"}", ""), false, &w);
	assert_int_equal(w.n, 1);
	assert_string_equal(w.v[0].var, "GLOO_SOCKET_IFNAME");
	assert_string_equal(w.v[0].why,
			    "Gloo ignores a value of one character or less and uses the address the hostname resolves to");
	envcheck(TRAIN("{\"name\": \"GLOO_SOCKET_IFNAME\", \"value\": \"\"}", ""), false, &w);
	assert_int_equal(w.n, 1);
	assert_string_equal(w.v[0].want, "ens3f0");
	/* sourcing nccl.env sets nicpick's value after it: no warning */
	envcheck("{\"name\": \"train\", \"command\": [\"sh\", \"-c\", \". /nicpick/nccl.env && torchrun t.py\"], "
		 "\"env\": [{\"name\": \"GLOO_SOCKET_IFNAME\", \"value\": \"e\"}]}", false, &w);
	assert_int_equal(w.n, 0);
}

static struct jobs_train train_of(const char *containers, const char *const *names, size_t n_names,
				  int want_rc)
{
	char buf[4096];
	snprintf(buf, sizeof(buf),
		 "{\"metadata\": {\"name\": \"job-w-3\"}, \"spec\": {\"initContainers\": [{\"name\": \"nicpick\", "
		 "\"volumeMounts\": [{\"name\": \"nicpick\", \"mountPath\": \"/nicpick\"}]}], "
		 "\"containers\": [%s], \"volumes\": [{\"name\": \"nicpick\", \"emptyDir\": {}}]}}",
		 containers);
	json_t *pod = load(buf);
	struct jobs_pod p;
	np_error err = { 0 };
	assert_int_equal(jobs_pod_parse(pod, &p, &err), 0);
	struct jobs_train t;
	assert_int_equal(jobs_train_find(&p, "/nicpick", names, n_names, &t, &err), want_rc);
	if (want_rc < 0) {
		assert_int_equal(err.status, NP_EUSAGE);
		assert_non_null(strstr(err.msg, "--train-container"));
	}
	jobs_pod_free(&p);
	json_decref(pod);
	return t;
}

/* The recommended file-only pattern: NCCL_CONF_FILE, no nccl.env. */
static void conf_file_without_sourcing_is_file_delivery(void **state)
{
	struct jobs_train t = train_of(
		"{\"name\": \"sidecar\"},"
		"{\"name\": \"train\", \"command\": [\"torchrun\", \"t.py\"], \"env\": ["
		"{\"name\": \"NCCL_CONF_FILE\", \"value\": \"/n/nccl.conf\"},"
		"{\"name\": \"NCCL_SOCKET_NTHREADS\", \"value\": \"4\"},"
		"{\"name\": \"NCCL_DEBUG\", \"value\": \"\"},"
		"{\"name\": \"NCCL_IB_HCA\", \"valueFrom\": {\"configMapKeyRef\": {\"name\": \"c\", \"key\": \"k\"}}},"
		"{\"name\": \"HOME\", \"value\": \"/root\"}],"
		"\"envFrom\": [{\"configMapRef\": {\"name\": \"nccl-settings\"}}],"
		"\"volumeMounts\": [{\"name\": \"nicpick\", \"mountPath\": \"/n\"}]}",
		NULL, 0, 0);
	assert_int_equal(t.delivery, JOBS_DELIVERY_FILE);
	assert_string_equal(t.container, "train"); /* the sidecar mounts nothing */
	assert_string_equal(t.conf_path, "/n/nccl.conf");
	assert_string_equal(t.env_path, "/n/nccl.env");
	assert_int_equal(t.n_vars, 2); /* the literal NCCL_* values; an empty one stays */
	assert_string_equal(t.vars[0].name, "NCCL_SOCKET_NTHREADS");
	assert_string_equal(t.vars[1].name, "NCCL_DEBUG");
	assert_string_equal(t.vars[1].value, "");
	assert_int_equal(t.n_unknown, 2);
	assert_string_equal(t.unknown[0], "NCCL_IB_HCA (valueFrom)");
	assert_string_equal(t.unknown[1], "envFrom configMap nccl-settings");
}

static void sourcing_nccl_env_is_env_delivery_and_names_pick_the_container(void **state)
{
	const char *both =
		"{\"name\": \"a\", \"command\": [\"sh\", \"-c\", \". /n/nccl.env; torchrun t.py\"], "
		"\"env\": [{\"name\": \"NCCL_CONF_FILE\", \"value\": \"/n/nccl.conf\"}],"
		"\"volumeMounts\": [{\"name\": \"nicpick\", \"mountPath\": \"/n\"}]},"
		"{\"name\": \"b\", \"env\": [{\"name\": \"NCCL_CONF_FILE\", \"value\": \"/n/nccl.conf\"}],"
		"\"volumeMounts\": [{\"name\": \"nicpick\", \"mountPath\": \"/n\"}]}";
	struct jobs_train t = train_of(both, NULL, 0, 0);
	assert_int_equal(t.delivery, JOBS_DELIVERY_ENV);
	assert_string_equal(t.container, "a");
	if (!strstr(t.why, "container b gets them another way (file): the proof tests a's"))
		fail_msg("%s", t.why);
	const char *b[] = { "b" };
	t = train_of(both, b, 1, 0);
	assert_int_equal(t.delivery, JOBS_DELIVERY_FILE);
	const char *none[] = { "nope" };
	train_of(both, none, 1, -1);
}

static void no_visible_delivery_is_tested_through_the_environment(void **state)
{
	struct jobs_train t = train_of("{\"name\": \"train\"}", NULL, 0, 0);
	assert_int_equal(t.delivery, JOBS_DELIVERY_UNSEEN);
	assert_string_equal(t.container, "");
	assert_non_null(strstr(t.why, "--train-container"));
	/* NCCL_CONF_FILE elsewhere: not nicpick's file */
	t = train_of("{\"name\": \"train\", \"env\": [{\"name\": \"NCCL_CONF_FILE\", \"value\": \"/etc/nccl.conf\"}],"
		     "\"volumeMounts\": [{\"name\": \"nicpick\", \"mountPath\": \"/n\"}]}",
		     NULL, 0, 0);
	assert_int_equal(t.delivery, JOBS_DELIVERY_UNSEEN);
	assert_string_equal(t.container, "train");
}

static void other_values_win_over_nccl_conf(void **state)
{
	struct jobs_env_warnings w;
	envcheck(TRAIN("{\"name\": \"NCCL_SOCKET_IFNAME\", \"value\": \"eth0\"},"
		       "{\"name\": \"GLOO_SOCKET_IFNAME\", \"value\": \"eth0\"},"
		       "{\"name\": \"NCCL_SOCKET_FAMILY\", \"value\": \"AF_INET6\"},"
		       "{\"name\": \"NCCL_IB_HCA\", \"value\": \"mlx5\"}",
		       ""),
		 false, &w);
	assert_int_equal(w.n, 4);
	assert_string_equal(w.v[0].var, "NCCL_SOCKET_IFNAME");
	assert_non_null(strstr(w.v[0].why, "wins over nccl.conf"));
	assert_string_equal(w.v[1].var, "GLOO_SOCKET_IFNAME");
	assert_string_equal(w.v[2].var, "NCCL_SOCKET_FAMILY");
	assert_string_equal(w.v[3].var, "NCCL_IB_HCA");
	assert_non_null(strstr(w.v[3].why, "no RDMA port"));
}

static void same_values_and_a_later_definition_are_fine(void **state)
{
	struct jobs_env_warnings w;
	/* Kubernetes keeps the last of two definitions of a name. */
	envcheck(TRAIN("{\"name\": \"NCCL_SOCKET_IFNAME\", \"value\": \"eth0\"},"
		       "{\"name\": \"NCCL_SOCKET_IFNAME\", \"value\": \"=ens3f0\"},"
		       "{\"name\": \"NCCL_IB_HCA\", \"value\": \"=mlx5_0:1\"},"
		       "{\"name\": \"NCCL_CONF_FILE\", \"value\": \"/nicpick-ro/nccl.conf\"}",
		       ""),
		 true, &w);
	assert_int_equal(w.n, 0);
}

static void sourcing_nccl_env_overrides_the_container_env(void **state)
{
	struct jobs_env_warnings w;
	envcheck("{\"name\": \"train\", \"command\": [\"/bin/sh\", \"-c\", "
		 "\". /nicpick-ro/nccl.env && exec torchrun train.py\"], \"env\": ["
		 "{\"name\": \"NCCL_SOCKET_IFNAME\", \"value\": \"eth0\"},"
		 "{\"name\": \"NCCL_IB_HCA\", \"value\": \"mlx5\"}]}",
		 false, &w);
	/* nccl.env sets NCCL_SOCKET_IFNAME, but no NCCL_IB_HCA to override with. */
	assert_int_equal(w.n, 1);
	assert_string_equal(w.v[0].var, "NCCL_IB_HCA");
}

static void conf_file_elsewhere_or_not_mounted(void **state)
{
	struct jobs_env_warnings w;
	envcheck(TRAIN("{\"name\": \"NCCL_CONF_FILE\", \"value\": \"/etc/nccl.conf\"}", ""), false, &w);
	assert_int_equal(w.n, 1);
	assert_string_equal(w.v[0].want, "/nicpick-ro/nccl.conf");
	envcheck("{\"name\": \"train\", \"env\": [{\"name\": \"NCCL_CONF_FILE\", \"value\": \"/nicpick/nccl.conf\"}]}",
		 false, &w);
	assert_int_equal(w.n, 1);
	assert_non_null(strstr(w.v[0].why, "does not mount volume nicpick"));
}

static void value_from_a_reference_cannot_be_checked(void **state)
{
	struct jobs_env_warnings w;
	envcheck(TRAIN("{\"name\": \"NCCL_SOCKET_IFNAME\", \"valueFrom\": {\"configMapKeyRef\": "
		       "{\"name\": \"net\", \"key\": \"ifname\"}}}",
		       ""),
		 false, &w);
	assert_int_equal(w.n, 1);
	assert_non_null(strstr(w.v[0].why, "valueFrom"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(indexed_job_gathers_at_completion_index_0),
		cmocka_unit_test(non_indexed_job_is_refused_with_the_fix),
		cmocka_unit_test(pytorchjob_with_master_gathers_at_master_0),
		cmocka_unit_test(elastic_pytorchjob_v1_7_gathers_at_worker_0),
		cmocka_unit_test(elastic_pytorchjob_v1_8_marks_worker_0_master_and_it_gathers),
		cmocka_unit_test(pytorch_pod_without_replica_index_is_refused),
		cmocka_unit_test(jobset_one_replicated_job_gathers_at_job_0_index_0),
		cmocka_unit_test(jobset_several_replicated_jobs_keep_to_their_own),
		cmocka_unit_test(trainjob_with_initializers_gathers_in_node_not_at_global_index_0),
		cmocka_unit_test(trainjob_with_launcher_first_gathers_in_node),
		cmocka_unit_test(pod_without_job_labels_names_the_flags),
		cmocka_unit_test(index_label_that_is_no_number_is_refused),
		cmocka_unit_test(job_completions_contradicting_expect_names_both),
		cmocka_unit_test(pytorchjob_size_is_master_plus_workers),
		cmocka_unit_test(jobset_size_is_replicas_times_pods_of_that_replicated_job),
		cmocka_unit_test(trainjob_num_nodes_when_set),
		cmocka_unit_test(malformed_count_is_refused),
		cmocka_unit_test(empty_socket_ifname_is_a_warning_nccl_ignores_it),
		cmocka_unit_test(one_character_gloo_ifname_is_a_warning_gloo_ignores_it),
		cmocka_unit_test(conf_file_without_sourcing_is_file_delivery),
		cmocka_unit_test(sourcing_nccl_env_is_env_delivery_and_names_pick_the_container),
		cmocka_unit_test(no_visible_delivery_is_tested_through_the_environment),
		cmocka_unit_test(other_values_win_over_nccl_conf),
		cmocka_unit_test(same_values_and_a_later_definition_are_fine),
		cmocka_unit_test(sourcing_nccl_env_overrides_the_container_env),
		cmocka_unit_test(conf_file_elsewhere_or_not_mounted),
		cmocka_unit_test(value_from_a_reference_cannot_be_checked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
