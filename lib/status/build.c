/* The job's view, from its pods' objects and the namespace's Events: pure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "status/status.h"
#include "util/text.h"

static const char *const kind_names[] = {
	[STATUS_KIND_ANY] = "any",	  [STATUS_KIND_JOB] = "Job",
	[STATUS_KIND_PYTORCHJOB] = "PyTorchJob", [STATUS_KIND_JOBSET] = "JobSet",
	[STATUS_KIND_TRAINJOB] = "TrainJob",
};

int status_kind_parse(const char *s)
{
	for (size_t i = STATUS_KIND_JOB; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
		if (strcasecmp(s, kind_names[i]) == 0)
			return (int)i;
	return -1;
}

const char *status_kind_name(enum status_kind k)
{
	return (size_t)k < sizeof(kind_names) / sizeof(kind_names[0]) ? kind_names[k] : "?";
}

static const char *const pod_state_names[] = {
	[STATUS_POD_PENDING] = "pending", [STATUS_POD_STARTING] = "starting",
	[STATUS_POD_REPORTED] = "reported", [STATUS_POD_PROBING] = "probing",
	[STATUS_POD_PROBED] = "probed",	  [STATUS_POD_PROVING] = "proving",
	[STATUS_POD_DONE] = "done",	  [STATUS_POD_FAILED] = "failed",
};

const char *status_pod_state_name(enum status_pod_state s)
{
	return (size_t)s < sizeof(pod_state_names) / sizeof(pod_state_names[0]) ? pod_state_names[s] : "?";
}

const char *status_job_state_name(enum status_job_state s)
{
	return s == STATUS_DECIDED ? "decided" : s == STATUS_FAILED ? "failed" : "waiting";
}

/* ---- one pod ---- */

static const char *ann(const json_t *pod, const char *key)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), key));
}

static const char *pstr(const json_t *o, const char *a, const char *b)
{
	return json_string_value(json_object_get(json_object_get(o, a), b));
}

static void add_warn(struct status_pod *p, const char *pre, const char *a)
{
	if (p->n_warn >= STATUS_WARN_MAX)
		return;
	char buf[sizeof(p->warn[0])];
	snprintf(buf, sizeof(buf), "%s%s", pre, a);
	np_text_clean(p->warn[p->n_warn++], sizeof(p->warn[0]), buf, NP_TEXT_SPACE);
}

/* The nicpick init container's exit code, -1 when it has not ended. */
static int init_exit(const json_t *pod)
{
	const json_t *st = json_object_get(json_object_get(pod, "status"), "initContainerStatuses");
	size_t i;
	const json_t *c;
	json_array_foreach(st, i, c)
	{
		const char *name = json_string_value(json_object_get(c, "name"));
		const json_t *t = json_object_get(json_object_get(c, "state"), "terminated");
		if (name && strcmp(name, "nicpick") == 0 && json_is_object(t) &&
		    json_is_integer(json_object_get(t, "exitCode")))
			return (int)json_integer_value(json_object_get(t, "exitCode"));
	}
	return -1;
}

struct pod_msgs {
	bool has_report, has_assign, has_probe, has_round, has_progress;
	struct agree_report report;
	struct exchange_assignment assign;
	struct exchange_probe probe;
	struct exchange_round round;
	struct exchange_progress progress;
};

/* Read what nicpick wrote on the pod; an unreadable message becomes a
 * warning of that pod, never a failure of the view. */
static void read_msgs(const json_t *pod, struct status_pod *p, struct pod_msgs *m)
{
	np_error e = { 0 };
	const char *s;
	if ((s = ann(pod, EXCHANGE_ANN_REPORT))) {
		if (agree_report_parse(s, strlen(s), &m->report, &e) == 0)
			m->has_report = true;
		else
			add_warn(p, "", e.msg);
	}
	if ((s = ann(pod, EXCHANGE_ANN_ASSIGN))) {
		if (exchange_assignment_parse(s, strlen(s), &m->assign, &e) == 0)
			m->has_assign = true;
		else
			add_warn(p, "", e.msg);
	}
	if ((s = ann(pod, EXCHANGE_ANN_PROBE))) {
		if (exchange_probe_parse(s, strlen(s), &m->probe, &e) == 0)
			m->has_probe = true;
		else
			add_warn(p, "", e.msg);
	}
	if ((s = ann(pod, EXCHANGE_ANN_ROUND))) {
		if (exchange_round_parse(s, strlen(s), &m->round, &e) == 0)
			m->has_round = true;
		else
			add_warn(p, "", e.msg);
	}
	if ((s = ann(pod, EXCHANGE_ANN_PROGRESS))) {
		if (exchange_progress_parse(s, strlen(s), &m->progress, &e) == 0)
			m->has_progress = true;
		else
			add_warn(p, "", e.msg);
	}
	if ((s = ann(pod, EXCHANGE_ANN_OUTCOME))) {
		if (exchange_outcome_parse(s, strlen(s), &p->outcome, &e) == 0)
			p->has_outcome = true;
		else
			add_warn(p, "", e.msg);
	}
}

/* ---- the job's members ---- */

struct cand {
	const json_t *pod;
	struct jobs_pod jp;
	struct jobs_rule rule;
	bool ok;
};

static bool kind_matches(enum status_kind want, enum jobs_kind got)
{
	switch (want) {
	case STATUS_KIND_JOB:
		return got == JOBS_KIND_BATCH;
	case STATUS_KIND_PYTORCHJOB:
		return got == JOBS_KIND_PYTORCH_MASTER || got == JOBS_KIND_PYTORCH_WORKERS;
	case STATUS_KIND_JOBSET:
	case STATUS_KIND_TRAINJOB:
		return got == JOBS_KIND_JOBSET;
	case STATUS_KIND_ANY:
		return got != JOBS_KIND_NONE;
	}
	return false;
}

/* The gatherer by the labels, as jobs_rule's leader selector picks it. */
static bool is_gatherer(const struct cand *c)
{
	const struct jobs_pod *p = &c->jp;
	switch (c->rule.kind) {
	case JOBS_KIND_BATCH:
		return p->completion_index == 0;
	case JOBS_KIND_PYTORCH_MASTER:
		return strcmp(p->pt_type, "master") == 0 && p->pt_index == 0;
	case JOBS_KIND_PYTORCH_WORKERS:
		return strcmp(p->pt_type, "worker") == 0 && p->pt_index == 0;
	case JOBS_KIND_JOBSET:
		return p->job_index == 0 && p->completion_index <= 0;
	case JOBS_KIND_NONE:
		break;
	}
	return false;
}

/* A pod that runs nicpick: it reported, or it has an init container of
 * nicpick's (the examples name it nicpick or nicpick-install). */
static bool runs_nicpick(const struct cand *c)
{
	if (ann(c->pod, EXCHANGE_ANN_REPORT))
		return true;
	for (size_t i = 0; i < c->jp.n_containers; i++)
		if (c->jp.containers[i].init && strncmp(c->jp.containers[i].name, "nicpick", 7) == 0)
			return true;
	return false;
}

/* Of the selectors the pods give, the one of the replicated job that runs
 * nicpick, at its latest restart attempt (the pods of an earlier one may
 * still be terminating), the most pods on a tie. */
static const char *pick_selector(const struct cand *c, size_t n)
{
	const char *best = NULL;
	long best_runs = -1, best_attempt = -1, best_n = -1;
	for (size_t i = 0; i < n; i++) {
		if (!c[i].ok)
			continue;
		long runs = 0, cnt = 0;
		for (size_t j = 0; j < n; j++)
			if (c[j].ok && strcmp(c[j].rule.selector, c[i].rule.selector) == 0) {
				cnt++;
				runs |= runs_nicpick(&c[j]);
			}
		long attempt = atol(c[i].jp.restart_attempt);
		if (runs > best_runs || (runs == best_runs && (attempt > best_attempt ||
							     (attempt == best_attempt && cnt > best_n)))) {
			best = c[i].rule.selector;
			best_runs = runs;
			best_n = cnt;
			best_attempt = attempt;
		}
	}
	return best;
}

/* The latest Event about each pod: a Warning over a Normal one. */
static void pod_events(const json_t *events, struct status_job *j, char (*ev)[STATUS_TEXT_MAX],
		       bool *warning)
{
	char (*when)[40] = calloc(j->n_pods, sizeof(*when));
	if (!when)
		return;
	size_t i;
	const json_t *e;
	json_array_foreach(events, i, e)
	{
		const json_t *io = json_object_get(e, "involvedObject");
		const char *kind = json_string_value(json_object_get(io, "kind"));
		const char *name = json_string_value(json_object_get(io, "name"));
		if (!kind || strcmp(kind, "Pod") != 0 || !name)
			continue;
		const char *type = json_string_value(json_object_get(e, "type"));
		const char *reason = json_string_value(json_object_get(e, "reason"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		const char *t = json_string_value(json_object_get(e, "lastTimestamp"));
		if (!t)
			t = json_string_value(json_object_get(e, "eventTime"));
		if (!t)
			t = "";
		bool warn = type && strcmp(type, "Warning") == 0;
		for (size_t k = 0; k < j->n_pods; k++) {
			if (strcmp(j->pods[k].name, name) != 0)
				continue;
			if ((warn && !warning[k]) || (warn == warning[k] && strcmp(t, when[k]) >= 0)) {
				char buf[STATUS_TEXT_MAX];
				snprintf(buf, sizeof(buf), "%s: %s", reason ? reason : "?", msg ? msg : "");
				np_text_clean(ev[k], STATUS_TEXT_MAX, buf, NP_TEXT_SPACE);
				snprintf(when[k], sizeof(when[k]), "%s", t);
				warning[k] = warn;
			}
		}
	}
	free(when);
}

struct gpu_key {
	int nccl, driver, runtime;
	char model[AGREE_GPU_MODEL_MAX];
};

static bool same_gpu(const struct agree_gpu *a, const struct gpu_key *b)
{
	return a->nccl == b->nccl && a->driver == b->driver && a->runtime == b->runtime &&
	       strcmp(a->model, b->model) == 0;
}

/* What one pod does, from its messages and the gatherer's. */
static void pod_state(struct status_pod *p, const struct pod_msgs *m, const struct pod_msgs *g)
{
	if (p->has_outcome) {
		p->state = p->outcome.ok ? STATUS_POD_DONE : STATUS_POD_FAILED;
		if (!p->outcome.ok)
			snprintf(p->detail, sizeof(p->detail), "%s", p->outcome.reason);
		return;
	}
	if (p->exit_code > 0) {
		p->state = STATUS_POD_FAILED;
		snprintf(p->detail, sizeof(p->detail), "nicpick exited %d", p->exit_code);
		return;
	}
	if (m->has_assign && m->assign.state == EXCHANGE_FAILED) {
		p->state = STATUS_POD_FAILED;
		snprintf(p->detail, sizeof(p->detail), "%s", m->assign.reason);
		return;
	}
	if (m->has_assign) {
		bool probed = m->has_probe && m->probe.epoch == m->assign.epoch;
		bool final = g && g->has_round && g->round.epoch == m->assign.epoch &&
			     g->round.state == EXCHANGE_FINAL;
		p->state = final ? STATUS_POD_PROVING : probed ? STATUS_POD_PROBED : STATUS_POD_PROBING;
		return;
	}
	if (m->has_report) {
		p->state = STATUS_POD_REPORTED;
		return;
	}
	p->state = strcmp(p->phase, "Pending") == 0 || !p->phase[0] ? STATUS_POD_PENDING
								    : STATUS_POD_STARTING;
}

static void fill_pod(const struct cand *c, struct status_pod *p, struct pod_msgs *m)
{
	snprintf(p->name, sizeof(p->name), "%s", c->jp.name);
	const char *node = pstr(c->pod, "spec", "nodeName");
	const char *phase = pstr(c->pod, "status", "phase");
	snprintf(p->node, sizeof(p->node), "%s", node ? node : "");
	snprintf(p->phase, sizeof(p->phase), "%s", phase ? phase : "");
	p->gatherer = is_gatherer(c);
	p->rank = -1;
	p->exit_code = init_exit(c->pod);
	read_msgs(c->pod, p, m);
	if (m->has_assign && m->assign.state != EXCHANGE_FAILED && m->assign.n_parts) {
		const struct exchange_part *pt = &m->assign.parts[0];
		p->round = m->assign.epoch;
		snprintf(p->network, sizeof(p->network), "%s", pt->net);
		snprintf(p->ifname, sizeof(p->ifname), "%s", pt->ifname);
		snprintf(p->addr, sizeof(p->addr), "%s", pt->addr);
		snprintf(p->next_pod, sizeof(p->next_pod), "%s", pt->next_pod);
		p->rank = pt->rank;
	} else if (m->has_assign) {
		p->round = m->assign.epoch;
	}
	if (m->has_probe && m->has_assign && m->probe.epoch == m->assign.epoch && m->probe.n) {
		p->has_probe = true;
		p->probe_ok = true;
		for (size_t i = 0; i < m->probe.n; i++)
			p->probe_ok &= m->probe.t[i].ok;
		p->probe_mbps = m->probe.t[0].mbps;
		snprintf(p->probe_detail, sizeof(p->probe_detail), "%s", m->probe.t[0].detail);
	}
	p->nccl = m->has_report && m->report.gpu.has ? m->report.gpu.nccl : 0;
	if (!p->nccl && p->has_outcome)
		p->nccl = p->outcome.nccl;
	if (m->has_report && m->report.gpu.has && m->report.gpu.smoke[0])
		add_warn(p, "no smoke test here: ", m->report.gpu.smoke);
	if (p->has_outcome && p->outcome.warning[0])
		add_warn(p, "", p->outcome.warning);
}

/* Before the gatherer's own account is there (or while it lags a round
 * behind), the pods' states say the same in the same words: how many are
 * past `done_at`, and which are not, by name. */
static void own_account(struct status_job *j, enum exchange_phase phase, enum status_pod_state done_at)
{
	struct exchange_progress p = { .phase = phase, .round = j->round };
	p.expect = p.created = (int)j->n_pods;
	for (size_t i = 0; i < j->n_pods; i++) {
		if (j->pods[i].state >= done_at) {
			p.done++;
			continue;
		}
		if (p.n_missing < EXCHANGE_MISSING_SHOWN)
			snprintf(p.missing[p.n_missing++], sizeof(p.missing[0]), "%s", j->pods[i].name);
		p.missing_total++;
	}
	exchange_progress_text(&p, j->waiting, sizeof(j->waiting));
}

/* The job line: its state, and what it waits for or why it failed. */
static void job_summary(struct status_job *j, const struct pod_msgs *msgs, const struct pod_msgs *g,
			const char (*ev)[STATUS_TEXT_MAX])
{
	size_t done = 0, failed_at = j->n_pods;
	for (size_t i = 0; i < j->n_pods; i++) {
		const struct status_pod *p = &j->pods[i];
		done += p->state == STATUS_POD_DONE;
		/* 4 and 6 say the most about the job: the first pod with one. */
		if (p->state == STATUS_POD_FAILED &&
		    (failed_at == j->n_pods ||
		     ((p->outcome.status == NP_ENOCOMMON || p->outcome.status == NP_ESMOKE) &&
		      j->pods[failed_at].outcome.status != NP_ENOCOMMON &&
		      j->pods[failed_at].outcome.status != NP_ESMOKE)))
			failed_at = i;
	}
	if (g && g->has_progress && g->progress.expect > 0)
		j->expect = g->progress.expect;
	for (size_t i = 0; i < j->n_pods && !j->expect; i++)
		if (msgs[i].has_assign && msgs[i].assign.n_pods > 0)
			j->expect = msgs[i].assign.n_pods;

	if (g && g->has_round && g->round.state == EXCHANGE_FAILED) {
		j->state = STATUS_FAILED;
		j->exit_code = g->round.status;
		snprintf(j->reason, sizeof(j->reason), "%s", g->round.reason);
	} else if (failed_at < j->n_pods) {
		const struct status_pod *p = &j->pods[failed_at];
		j->state = STATUS_FAILED;
		j->exit_code = p->has_outcome ? p->outcome.status : p->exit_code > 0 ? p->exit_code : NP_EK8S;
		snprintf(j->reason, sizeof(j->reason), "%s: %s", p->name, p->detail);
	} else if (j->n_pods && done == j->n_pods && (!j->expect || (size_t)j->expect <= done)) {
		j->state = STATUS_DECIDED;
		j->exit_code = 0;
	} else {
		j->state = STATUS_WAITING;
		j->exit_code = NP_EK8S;
	}
	/* A failure for another reason than the network or the smoke test
	 * (a deadline, the API, a usage error) reads as "not proven": 5. */
	if (j->state == STATUS_FAILED && j->exit_code != NP_ENOIFACE && j->exit_code != NP_ENOCOMMON &&
	    j->exit_code != NP_ESMOKE)
		j->exit_code = NP_EK8S;

	if (j->state != STATUS_WAITING)
		return;
	if (!j->n_pods) {
		snprintf(j->waiting, sizeof(j->waiting), "no pods of %s %s in namespace %s yet",
			 status_kind_name(j->kind == STATUS_KIND_ANY ? STATUS_KIND_JOB : j->kind), j->name,
			 j->namespace);
		return;
	}
	for (size_t i = 0; i < j->n_pods; i++)
		if (j->pods[i].state == STATUS_POD_PENDING) {
			snprintf(j->waiting, sizeof(j->waiting), "pod %s is %s%s%s", j->pods[i].name,
				 j->pods[i].phase[0] ? j->pods[i].phase : "not started",
				 ev[i][0] ? ": " : "", ev[i]);
			return;
		}
	/* The gatherer's own account, while it is about the current round
	 * (it is rewritten as it goes, so it can lag a step behind). */
	if (g && g->has_progress &&
	    (g->progress.phase == EXCHANGE_PROBING ? g->progress.round == j->round : j->round == 0)) {
		exchange_progress_text(&g->progress, j->waiting, sizeof(j->waiting));
		return;
	}
	size_t reported = 0, probed = 0, proving = 0, n = j->n_pods;
	for (size_t i = 0; i < n; i++) {
		reported += j->pods[i].state >= STATUS_POD_REPORTED;
		probed += j->pods[i].state >= STATUS_POD_PROBED;
		proving += j->pods[i].state == STATUS_POD_PROVING;
	}
	size_t want = j->expect > 0 ? (size_t)j->expect : n;
	if (n < want)
		snprintf(j->waiting, sizeof(j->waiting), "%zu of %zu pods created", n, want);
	else if (reported < n)
		own_account(j, EXCHANGE_GATHERING, STATUS_POD_REPORTED);
	else if (probed < n)
		own_account(j, EXCHANGE_PROBING, STATUS_POD_PROBED);
	else
		snprintf(j->waiting, sizeof(j->waiting),
			 "round %d final: the smoke test and the outputs on %zu of %zu pods", j->round,
			 proving, n);
}

int status_build(const json_t *pods, const json_t *events, const char *ns, const char *job,
		 enum status_kind kind, struct status_job *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", job);
	snprintf(out->namespace, sizeof(out->namespace), "%s", ns);
	out->kind = kind;
	size_t n = json_array_size(pods);
	struct cand *c = calloc(n + 1, sizeof(*c));
	struct pod_msgs *msgs = calloc(n + 1, sizeof(*msgs));
	char (*ev)[STATUS_TEXT_MAX] = calloc(n + 1, sizeof(*ev));
	bool *evw = calloc(n + 1, sizeof(*evw));
	int ret = -1;
	if (!c || !msgs || !ev || !evw) {
		np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		np_error e = { 0 };
		c[i].pod = json_array_get(pods, i);
		c[i].ok = jobs_pod_parse(c[i].pod, &c[i].jp, &e) == 0 &&
			  jobs_rule(&c[i].jp, &c[i].rule, &e) == 0 && kind_matches(kind, c[i].rule.kind) &&
			  strcmp(c[i].rule.job, job) == 0;
	}
	const char *sel = pick_selector(c, n);
	out->pods = calloc(n + 1, sizeof(*out->pods));
	if (!out->pods) {
		np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		goto out;
	}
	if (sel)
		snprintf(out->selector, sizeof(out->selector), "%s", sel);
	/* members, then sorted by name with their messages alongside */
	struct cand *mem = calloc(n + 1, sizeof(*mem));
	if (!mem) {
		np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		goto out;
	}
	size_t m = 0;
	for (size_t i = 0; sel && i < n; i++)
		if (c[i].ok && strcmp(c[i].rule.selector, sel) == 0) {
			if (!out->kind_text[0])
				snprintf(out->kind_text, sizeof(out->kind_text), "%s",
					 jobs_kind_name(c[i].rule.kind));
			mem[m++] = c[i];
		}
	/* sort members by name (insertion: jobs are small next to a list) */
	for (size_t i = 1; i < m; i++)
		for (size_t k = i; k > 0 && strcmp(mem[k - 1].jp.name, mem[k].jp.name) > 0; k--) {
			struct cand t = mem[k];
			mem[k] = mem[k - 1];
			mem[k - 1] = t;
		}
	out->n_pods = m;
	for (size_t i = 0; i < m; i++)
		fill_pod(&mem[i], &out->pods[i], &msgs[i]);
	free(mem);

	const struct pod_msgs *g = NULL;
	for (size_t i = 0; i < m; i++)
		if (out->pods[i].gatherer) {
			g = &msgs[i];
			snprintf(out->gatherer, sizeof(out->gatherer), "%s", out->pods[i].name);
		}
	if (events)
		pod_events(events, out, ev, evw);

	/* The job-wide fields: the latest round any pod was given. */
	for (size_t i = 0; i < m; i++) {
		const struct exchange_assignment *a = &msgs[i].assign;
		if (!msgs[i].has_assign || a->epoch < out->round)
			continue;
		out->round = a->epoch;
		if (a->state != EXCHANGE_FAILED && a->n_parts)
			snprintf(out->network, sizeof(out->network), "%s", a->parts[0].net);
		snprintf(out->versions, sizeof(out->versions), "%s", a->versions);
		snprintf(out->smoke_skip, sizeof(out->smoke_skip), "%s", a->smoke_skip);
	}
	if (g && g->has_round && g->round.epoch > out->round)
		out->round = g->round.epoch;

	/* Per pod: the state, the suspect, pending pods' events, versions. */
	struct gpu_key maj = { 0 };
	size_t maj_n = 0;
	for (size_t i = 0; i < m; i++) {
		if (!msgs[i].has_report || !msgs[i].report.gpu.has)
			continue;
		size_t cnt = 0;
		for (size_t k = 0; k < m; k++)
			if (msgs[k].has_report && msgs[k].report.gpu.has) {
				struct gpu_key key = { .nccl = msgs[i].report.gpu.nccl,
						       .driver = msgs[i].report.gpu.driver,
						       .runtime = msgs[i].report.gpu.runtime };
				snprintf(key.model, sizeof(key.model), "%s", msgs[i].report.gpu.model);
				cnt += same_gpu(&msgs[k].report.gpu, &key);
			}
		if (cnt > maj_n) {
			maj_n = cnt;
			maj = (struct gpu_key){ .nccl = msgs[i].report.gpu.nccl,
						.driver = msgs[i].report.gpu.driver,
						.runtime = msgs[i].report.gpu.runtime };
			snprintf(maj.model, sizeof(maj.model), "%s", msgs[i].report.gpu.model);
		}
	}
	const struct exchange_outcome *named = NULL; /* whose verdict names the pods */
	for (size_t i = 0; i < m; i++) {
		struct status_pod *p = &out->pods[i];
		pod_state(p, &msgs[i], g);
		if (p->state == STATUS_POD_PENDING || p->state == STATUS_POD_STARTING)
			snprintf(p->detail, sizeof(p->detail), "%s", ev[i]);
		if (maj_n && msgs[i].has_report && msgs[i].report.gpu.has && out->versions[0] &&
		    !same_gpu(&msgs[i].report.gpu, &maj))
			add_warn(p, "", "NCCL, CUDA or GPU differ from the job's other pods");
		if (p->has_outcome) {
			const struct exchange_outcome *o = &p->outcome;
			if (!out->smoke[0] || o->smoke == EXCHANGE_SMOKE_FAILED)
				snprintf(out->smoke, sizeof(out->smoke), "%s", exchange_smoke_name(o->smoke));
			if (o->has_busbw && (!out->has_busbw || o->busbw < out->busbw)) {
				out->has_busbw = true;
				out->busbw = o->busbw;
			}
			/* the gatherer's names the pods and nodes: it wins */
			if (o->suspect[0] && (p->gatherer || !out->suspect[0])) {
				snprintf(out->suspect, sizeof(out->suspect), "%s", o->suspect);
				named = o;
			}
		}
	}
	for (size_t i = 0; named && i < m; i++) {
		int r = out->pods[i].rank;
		for (size_t k = 0; r >= 0 && k < named->n_slow_nodes; k++)
			if (named->slow_nodes[k] == r)
				out->pods[i].suspect = STATUS_SUSPECT_NODE;
		for (size_t k = 0; r >= 0 && k < named->n_slow_link_ends; k++)
			if (named->slow_link_ends[k] == r && out->pods[i].suspect == STATUS_SUSPECT_NONE)
				out->pods[i].suspect = STATUS_SUSPECT_LINK_END;
	}
	job_summary(out, msgs, g, (const char (*)[STATUS_TEXT_MAX])ev);
	ret = 0;
out:
	for (size_t i = 0; c && i < n; i++)
		jobs_pod_free(&c[i].jp);
	free(c);
	free(msgs);
	free(ev);
	free(evw);
	return ret;
}

void status_job_free(struct status_job *j)
{
	free(j->pods);
	j->pods = NULL;
	j->n_pods = 0;
}
