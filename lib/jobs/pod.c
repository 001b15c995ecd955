/* The pod's own object, parsed once: job labels, owner, containers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/jobs.h"
#include "util/jsonread.h"

/* Label keys, as the controllers spell them. */
#define L_BATCH_JOB "batch.kubernetes.io/job-name"
#define L_BATCH_INDEX "batch.kubernetes.io/job-completion-index"
#define L_PT_JOB "training.kubeflow.org/job-name"
#define L_PT_TYPE "training.kubeflow.org/replica-type"
#define L_PT_INDEX "training.kubeflow.org/replica-index"
#define L_PT_ROLE "training.kubeflow.org/job-role"
#define L_JS_NAME "jobset.sigs.k8s.io/jobset-name"
#define L_JS_RJOB "jobset.sigs.k8s.io/replicatedjob-name"
#define L_JS_INDEX "jobset.sigs.k8s.io/job-index"
#define L_JS_GLOBAL "jobset.sigs.k8s.io/job-global-index"
#define L_JS_RESTART "jobset.sigs.k8s.io/restart-attempt"

static int copy_label(const json_t *labels, const char *key, char *dst, size_t len, np_error *err)
{
	const json_t *v = json_object_get(labels, key);
	dst[0] = '\0';
	if (!v)
		return 0;
	const char *s = np_json_cstr(v);
	if (!s || strlen(s) >= len)
		return np_error_set(err, NP_EUSAGE, 0, "label %s of this pod is not a valid value", key);
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

static int index_label(const json_t *labels, const char *key, int *out, np_error *err)
{
	*out = -1;
	const json_t *v = json_object_get(labels, key);
	if (!v)
		return 0;
	const char *s = np_json_cstr(v);
	char *end;
	errno = 0;
	long n = s && *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
	if (n < 0 || errno || *end || n > 1000000000)
		return np_error_set(err, NP_EUSAGE, 0, "label %s='%s' of this pod is not an index", key,
				    s ? s : "(not a string)");
	*out = (int)n;
	return 0;
}

static int copy_str(const json_t *v, char *dst, size_t len)
{
	const char *s = np_json_cstr(v);
	if (!s || strlen(s) >= len)
		return -1;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

/* The shell command lines of a container: does it source nccl.env? */
static bool mentions_nccl_env(const json_t *c)
{
	static const char *const keys[] = { "command", "args" };
	for (size_t k = 0; k < 2; k++) {
		const json_t *arr = json_object_get(c, keys[k]), *s;
		size_t i;
		json_array_foreach(arr, i, s) {
			const char *t = np_json_cstr(s);
			if (t && strstr(t, "nccl.env"))
				return true;
		}
	}
	return false;
}

static int parse_container(const json_t *c, bool init, struct jobs_container *out, np_error *err)
{
	out->init = init;
	if (copy_str(json_object_get(c, "name"), out->name, sizeof(out->name)) < 0)
		return np_error_set(err, NP_EUSAGE, 0, "a container of this pod has no valid name");
	out->sources_nccl_env = mentions_nccl_env(c);
	const json_t *env = json_object_get(c, "env"), *e;
	size_t n = json_array_size(env), i;
	out->env = calloc(n ? n : 1, sizeof(*out->env));
	if (!out->env)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	json_array_foreach(env, i, e) {
		struct jobs_env tmp = { 0 };
		const json_t *v = json_object_get(e, "value");
		if (copy_str(json_object_get(e, "name"), tmp.name, sizeof(tmp.name)) < 0)
			continue; /* longer than any variable checked here */
		if (v && copy_str(v, tmp.value, sizeof(tmp.value)) < 0)
			continue;
		tmp.from_ref = !v && json_object_get(e, "valueFrom");
		/* A later definition of the same name wins, as in Kubernetes. */
		size_t j = 0;
		while (j < out->n_env && strcmp(out->env[j].name, tmp.name) != 0)
			j++;
		out->env[j] = tmp;
		if (j == out->n_env)
			out->n_env++;
	}
	const json_t *from = json_object_get(c, "envFrom"), *f;
	json_array_foreach(from, i, f) {
		if (out->n_env_from == JOBS_ENV_FROM_MAX)
			break;
		const json_t *cm = json_object_get(f, "configMapRef"), *sec = json_object_get(f, "secretRef");
		const char *name = json_string_value(json_object_get(cm ? cm : sec, "name"));
		const char *prefix = json_string_value(json_object_get(f, "prefix"));
		if (!cm && !sec)
			continue;
		snprintf(out->env_from[out->n_env_from++], sizeof(out->env_from[0]), "%s %.*s%s%.*s",
			 cm ? "configMap" : "secret", JOBS_VALUE_MAX - 1, name ? name : "?",
			 prefix && *prefix ? " prefix " : "", 16, prefix && *prefix ? prefix : "");
	}
	const json_t *mounts = json_object_get(c, "volumeMounts"), *m;
	n = json_array_size(mounts);
	out->mounts = calloc(n ? n : 1, sizeof(*out->mounts));
	if (!out->mounts)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	json_array_foreach(mounts, i, m) {
		struct jobs_mount *dst = &out->mounts[out->n_mounts];
		if (copy_str(json_object_get(m, "name"), dst->volume, sizeof(dst->volume)) < 0 ||
		    copy_str(json_object_get(m, "mountPath"), dst->path, sizeof(dst->path)) < 0)
			continue;
		const char *sub = np_json_cstr(json_object_get(m, "subPath"));
		dst->has_sub_path = (sub && *sub) || json_object_get(m, "subPathExpr");
		out->n_mounts++;
	}
	return 0;
}

/* The training operator sets MASTER_ADDR=<job>-master-0 in every container
 * of every pod when, and only when, the PyTorchJob has a Master
 * (pkg/controller.v1/pytorch/envvar.go, setPodEnv). */
static bool has_master_env(const struct jobs_pod *p)
{
	char want[JOBS_VALUE_MAX + 16];
	snprintf(want, sizeof(want), "%s-master-0", p->pt_job);
	for (size_t i = 0; i < p->n_containers; i++)
		for (size_t j = 0; j < p->containers[i].n_env; j++)
			if (strcmp(p->containers[i].env[j].name, "MASTER_ADDR") == 0 &&
			    strcmp(p->containers[i].env[j].value, want) == 0)
				return true;
	return false;
}

int jobs_pod_parse(const json_t *pod, struct jobs_pod *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	out->completion_index = out->pt_index = out->job_index = out->global_index = -1;
	const json_t *md = json_object_get(pod, "metadata");
	if (!json_is_object(pod) || !json_is_object(md))
		return np_error_set(err, NP_EUSAGE, 0, "this pod's object has no metadata");
	if (copy_str(json_object_get(md, "name"), out->name, sizeof(out->name)) < 0)
		return np_error_set(err, NP_EUSAGE, 0, "this pod's object has no valid name");
	const json_t *l = json_object_get(md, "labels");
	if (l && !json_is_object(l))
		return np_error_set(err, NP_EUSAGE, 0, "this pod's labels are not an object");
	char role[JOBS_VALUE_MAX];
	if (copy_label(l, L_BATCH_JOB, out->batch_job, sizeof(out->batch_job), err) < 0 ||
	    index_label(l, L_BATCH_INDEX, &out->completion_index, err) < 0 ||
	    copy_label(l, L_PT_JOB, out->pt_job, sizeof(out->pt_job), err) < 0 ||
	    copy_label(l, L_PT_TYPE, out->pt_type, sizeof(out->pt_type), err) < 0 ||
	    index_label(l, L_PT_INDEX, &out->pt_index, err) < 0 ||
	    copy_label(l, L_PT_ROLE, role, sizeof(role), err) < 0 ||
	    copy_label(l, L_JS_NAME, out->jobset, sizeof(out->jobset), err) < 0 ||
	    copy_label(l, L_JS_RJOB, out->rjob, sizeof(out->rjob), err) < 0 ||
	    index_label(l, L_JS_INDEX, &out->job_index, err) < 0 ||
	    index_label(l, L_JS_GLOBAL, &out->global_index, err) < 0 ||
	    copy_label(l, L_JS_RESTART, out->restart_attempt, sizeof(out->restart_attempt), err) < 0)
		return -1;
	out->pt_role_master = strcmp(role, "master") == 0;

	const json_t *owners = json_object_get(md, "ownerReferences"), *o;
	size_t i;
	json_array_foreach(owners, i, o) {
		if (!json_is_true(json_object_get(o, "controller")) && json_array_size(owners) > 1)
			continue;
		if (copy_str(json_object_get(o, "kind"), out->owner_kind, sizeof(out->owner_kind)) < 0 ||
		    copy_str(json_object_get(o, "name"), out->owner_name, sizeof(out->owner_name)) < 0)
			out->owner_kind[0] = out->owner_name[0] = '\0';
		break;
	}

	const json_t *spec = json_object_get(pod, "spec");
	const json_t *lists[2] = { json_object_get(spec, "initContainers"),
				   json_object_get(spec, "containers") };
	size_t n = json_array_size(lists[0]) + json_array_size(lists[1]);
	out->containers = calloc(n ? n : 1, sizeof(*out->containers));
	if (!out->containers)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	for (size_t k = 0; k < 2; k++) {
		const json_t *c;
		json_array_foreach(lists[k], i, c) {
			if (parse_container(c, k == 0, &out->containers[out->n_containers++], err) < 0)
				return -1;
		}
	}
	out->pt_master_env = out->pt_job[0] && has_master_env(out);
	return 0;
}

void jobs_pod_free(struct jobs_pod *p)
{
	for (size_t i = 0; p->containers && i < p->n_containers; i++) {
		free(p->containers[i].env);
		free(p->containers[i].mounts);
	}
	free(p->containers);
	p->containers = NULL;
	p->n_containers = 0;
}
