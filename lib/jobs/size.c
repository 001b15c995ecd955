/* The owning job's size by its spec, checked against --expect at start: a
 * wrong count is a misconfiguration to report at once, not after the whole
 * timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/jobs.h"
#include "k8s/k8s.h"
#include "util/jsonread.h"

/* An integer field that may be absent (def) but must otherwise be >= 0. */
static int int_field(const json_t *obj, const char *key, long def, long *out, const char *what,
		     np_error *err)
{
	const json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v)) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
		return np_error_set(err, NP_EK8S, 0, "%s: %s is not a count", what, key);
	*out = (long)json_integer_value(v);
	return 0;
}

static const char *obj_name(const json_t *o)
{
	const char *n = np_json_cstr(json_object_get(json_object_get(o, "metadata"), "name"));
	return n ? n : "?";
}

int jobs_size_from_batch_job(const json_t *job, struct jobs_size *out, np_error *err)
{
	long c;
	out->pods = -1;
	if (int_field(json_object_get(job, "spec"), "completions", -1, &c, "Job", err) < 0)
		return -1;
	out->pods = (int)c;
	snprintf(out->what, sizeof(out->what), "Job %s (spec.completions)", obj_name(job));
	return 0;
}

int jobs_size_from_pytorchjob(const json_t *pj, struct jobs_size *out, np_error *err)
{
	out->pods = -1;
	const json_t *specs = json_object_get(json_object_get(pj, "spec"), "pytorchReplicaSpecs"), *rs;
	const char *type;
	if (!json_is_object(specs) || json_object_size(specs) == 0)
		return 0;
	long total = 0;
	size_t off = 0;
	off += (size_t)snprintf(out->what, sizeof(out->what), "PyTorchJob %s (", obj_name(pj));
	json_object_foreach((json_t *)specs, type, rs) {
		long n;
		/* The operator's defaulting sets replicas to 1 when absent. */
		if (int_field(rs, "replicas", 1, &n, "PyTorchJob", err) < 0)
			return -1;
		total += n;
		if (off < sizeof(out->what))
			off += (size_t)snprintf(out->what + off, sizeof(out->what) - off, "%s%s %ld",
						total == n ? "" : " + ", type, n);
	}
	if (off < sizeof(out->what))
		snprintf(out->what + off, sizeof(out->what) - off, ")");
	out->pods = (int)total;
	return 0;
}

int jobs_size_from_jobset(const json_t *js, const char *rjob, struct jobs_size *out, np_error *err)
{
	out->pods = -1;
	const json_t *rjs = json_object_get(json_object_get(js, "spec"), "replicatedJobs"), *r;
	size_t i;
	json_array_foreach(rjs, i, r) {
		const char *name = np_json_cstr(json_object_get(r, "name"));
		if (!name || strcmp(name, rjob) != 0)
			continue;
		const json_t *spec = json_object_get(json_object_get(r, "template"), "spec");
		long replicas, par, comp;
		if (int_field(r, "replicas", 1, &replicas, "JobSet", err) < 0 ||
		    int_field(spec, "parallelism", 1, &par, "JobSet", err) < 0 ||
		    int_field(spec, "completions", -1, &comp, "JobSet", err) < 0)
			return -1;
		/* Pods that run at once per Job: parallelism, capped by completions. */
		long per = comp >= 0 && comp < par ? comp : par;
		out->pods = (int)(replicas * per);
		snprintf(out->what, sizeof(out->what),
			 "JobSet %s (replicated job %s: %ld replicas x %ld pods)", obj_name(js), rjob,
			 replicas, per);
		return 0;
	}
	return np_error_set(err, NP_EK8S, 0, "JobSet %s has no replicated job %s", obj_name(js), rjob);
}

int jobs_size_from_trainjob(const json_t *tj, struct jobs_size *out, np_error *err)
{
	long n;
	out->pods = -1;
	if (int_field(json_object_get(json_object_get(tj, "spec"), "trainer"), "numNodes", -1, &n,
		      "TrainJob", err) < 0)
		return -1;
	out->pods = (int)n; /* absent: the runtime's numNodes, which the JobSet carries */
	snprintf(out->what, sizeof(out->what), "TrainJob %s (spec.trainer.numNodes)", obj_name(tj));
	return 0;
}

int jobs_size_check(int expect, const struct jobs_size *s, np_error *err)
{
	if (expect <= 0 || s->pods < 0 || s->pods == expect)
		return 0;
	return np_error_set(err, NP_EUSAGE, 0,
			    "NICPICK_EXPECT (or --expect) is %d but %s has %d pods: set it to %d",
			    expect, s->what, s->pods, s->pods);
}

/* GET one object; 1 when the Role forbids it or it does not exist (the
 * check is then skipped and `note` says why). */
static int get_optional(struct k8s_client *k, const char *path, const char *what, json_t **out,
			char *note, size_t note_len, np_error *err)
{
	*out = NULL;
	if (k8s_get(k, path, out, err) == 0)
		return 0;
	long http = k8s_client_last_http(k);
	if (http != 403 && http != 404)
		return np_error_wrap(err, "cannot read %s to check --expect", what);
	/* A 403 is said as the server said it: an anonymous request (no
	 * usable token) reads very differently from a Role without the rule. */
	if (http == 403 && strstr(err->msg, "system:anonymous"))
		snprintf(note, note_len, "--expect not checked against %s: the request reached the API "
			 "server without credentials it accepted, as system:anonymous (%.300s)", what, err->msg);
	else if (http == 403)
		snprintf(note, note_len, "--expect not checked against %s: the Role does not allow "
			 "reading it (%.300s)", what, err->msg);
	else
		snprintf(note, note_len, "--expect not checked against %s: it does not exist", what);
	np_error_clear(err);
	return 1;
}

static int check_path(struct k8s_client *k, const char *path, const char *what, int expect,
		      int (*size)(const json_t *, struct jobs_size *, np_error *), json_t **keep,
		      char *note, size_t note_len, np_error *err)
{
	json_t *obj;
	int r = get_optional(k, path, what, &obj, note, note_len, err);
	if (r != 0)
		return r < 0 ? -1 : 1;
	struct jobs_size s;
	r = size(obj, &s, err) < 0 || jobs_size_check(expect, &s, err) < 0 ? -1 : 0;
	if (r == 0)
		snprintf(note, note_len, "--expect %d agrees with %s", expect, s.what);
	if (keep && r == 0)
		*keep = obj;
	else
		json_decref(obj);
	return r;
}

static int check_expect(struct k8s_client *k, const char *ns, const struct jobs_pod *p,
			const struct jobs_rule *r, int expect, char *note, size_t note_len,
			np_error *err)
{
	char path[1024], what[600];
	note[0] = '\0';
	if (expect <= 0)
		return 0;
	switch (r->kind) {
	case JOBS_KIND_BATCH:
		snprintf(path, sizeof(path), "/apis/batch/v1/namespaces/%s/jobs/%s", ns, r->job);
		snprintf(what, sizeof(what), "Job %s", r->job);
		return check_path(k, path, what, expect, jobs_size_from_batch_job, NULL, note, note_len,
				  err);
	case JOBS_KIND_PYTORCH_MASTER:
	case JOBS_KIND_PYTORCH_WORKERS:
		snprintf(path, sizeof(path), "/apis/kubeflow.org/v1/namespaces/%s/pytorchjobs/%s", ns,
			 r->job);
		snprintf(what, sizeof(what), "PyTorchJob %s", r->job);
		return check_path(k, path, what, expect, jobs_size_from_pytorchjob, NULL, note,
				  note_len, err);
	case JOBS_KIND_JOBSET: {
		json_t *js = NULL, *tj = NULL;
		struct jobs_size s;
		snprintf(path, sizeof(path), "/apis/jobset.x-k8s.io/v1alpha2/namespaces/%s/jobsets/%s",
			 ns, r->job);
		snprintf(what, sizeof(what), "JobSet %s", r->job);
		int rc = get_optional(k, path, what, &js, note, note_len, err);
		if (rc != 0)
			return rc;
		if (jobs_size_from_jobset(js, p->rjob, &s, err) < 0 || jobs_size_check(expect, &s, err) < 0) {
			json_decref(js);
			return -1;
		}
		snprintf(note, note_len, "--expect %d agrees with %s", expect, s.what);
		/* A TrainJob's JobSet has the TrainJob's name and is owned by it. */
		const json_t *owners = json_object_get(json_object_get(js, "metadata"), "ownerReferences"), *o;
		size_t i;
		const char *tname = NULL;
		json_array_foreach(owners, i, o) {
			const char *kind = np_json_cstr(json_object_get(o, "kind"));
			if (kind && strcmp(kind, "TrainJob") == 0)
				tname = np_json_cstr(json_object_get(o, "name"));
		}
		if (tname) {
			snprintf(path, sizeof(path),
				 "/apis/trainer.kubeflow.org/v1alpha1/namespaces/%s/trainjobs/%s", ns, tname);
			snprintf(what, sizeof(what), "TrainJob %s", tname);
			char tnote[512];
			rc = get_optional(k, path, what, &tj, tnote, sizeof(tnote), err);
			if (rc < 0) {
				json_decref(js);
				return -1;
			}
			if (rc == 0 && (jobs_size_from_trainjob(tj, &s, err) < 0 ||
					jobs_size_check(expect, &s, err) < 0))
				rc = -1;
			else if (rc == 0 && s.pods >= 0)
				snprintf(note, note_len, "--expect %d agrees with %s", expect, s.what);
			else if (rc == 1) /* the JobSet agreed; say what was not read */
				snprintf(note + strlen(note), note_len - strlen(note), "; %s", tnote);
		}
		json_decref(tj);
		json_decref(js);
		return rc;
	}
	case JOBS_KIND_NONE:
		break;
	}
	return 0;
}

int jobs_check_pod_expect(struct k8s_client *k, const char *ns, const json_t *pod, int expect,
			  char *note, size_t note_len, np_error *err)
{
	struct jobs_pod p;
	struct jobs_rule r;
	note[0] = '\0';
	if (expect <= 0)
		return 0;
	np_error e = { 0 };
	if (jobs_pod_parse(pod, &p, &e) < 0 || jobs_rule(&p, &r, &e) < 0) {
		/* --selector given for a pod of no known kind: nothing to read. */
		snprintf(note, note_len, "--expect not checked against a job's spec: %s", e.msg);
		jobs_pod_free(&p);
		return 0;
	}
	int ret = check_expect(k, ns, &p, &r, expect, note, note_len, err);
	jobs_pod_free(&p);
	return ret;
}
