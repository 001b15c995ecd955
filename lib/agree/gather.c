/* The gatherer: watches the job's pods, decides when every report is in,
 * hands each pod its part, runs the probe rounds and declares the result. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree/exchange_priv.h"
#include "util/clock.h"

struct member {
	char name[AGREE_NAME_MAX];
	char uid[AGREE_UID_MAX];
	char key[AGREE_NAME_MAX]; /* job index: earlier attempts share it */
	char created[40];
	bool live;
	bool has_report;
	char report_why[256]; /* why the report was refused */
	struct agree_report *rep;
	int assigned_epoch; /* epoch of the assignment on the object */
	int probe_epoch;
	json_t *probe;
	bool selected; /* the member counted for its key */
};

enum phase { PH_GATHER, PH_PROBE };
#define PUBLISH_CONNS_MAX 8

struct gather {
	struct member *m;
	size_t n, cap;
	enum phase phase;
	int epoch;
	int expect;
	bool need_assign; /* a pod restarted and lost its assignment */
	struct k8s_client *pool[PUBLISH_CONNS_MAX]; /* publish_round's connections */
	json_t *assign_of; /* pod name -> assignment object of this round */
};

static const char *index_labels[] = {
	"training.kubeflow.org/replica-type", "training.kubeflow.org/replica-index",
	"jobset.sigs.k8s.io/job-global-index", "batch.kubernetes.io/job-completion-index",
};

static struct member *member_get(struct gather *g, const char *name, bool create)
{
	for (size_t i = 0; i < g->n; i++)
		if (strcmp(g->m[i].name, name) == 0)
			return &g->m[i];
	if (!create)
		return NULL;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		struct member *m = realloc(g->m, cap * sizeof(*m));
		if (!m)
			return NULL;
		g->m = m;
		g->cap = cap;
	}
	struct member *m = &g->m[g->n++];
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	return m;
}

static void member_reset(struct member *m)
{
	free(m->rep);
	json_decref(m->probe);
	char name[AGREE_NAME_MAX];
	memcpy(name, m->name, sizeof(name));
	memset(m, 0, sizeof(*m));
	memcpy(m->name, name, sizeof(name));
}

/* Fold one Pod object into the member table. */
static void member_update(struct ex *x, json_t *pod)
{
	struct gather *g = x->g;
	const char *name = ex_meta(pod, "name"), *uid = ex_meta(pod, "uid");
	if (!name || !uid)
		return;
	struct member *m = member_get(g, name, true);
	if (!m)
		return;
	if (strcmp(m->uid, uid) != 0) {
		/* A new incarnation: nothing of the old one counts. */
		member_reset(m);
		snprintf(m->uid, sizeof(m->uid), "%s", uid);
	}
	const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
	m->live = !json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") &&
		  !(phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0));
	const char *created = ex_meta(pod, "creationTimestamp");
	snprintf(m->created, sizeof(m->created), "%s", created ? created : "");
	size_t off = 0;
	m->key[0] = '\0';
	for (size_t i = 0; i < sizeof(index_labels) / sizeof(index_labels[0]); i++) {
		const char *v = ex_label(pod, index_labels[i]);
		if (v)
			off += (size_t)snprintf(m->key + off, sizeof(m->key) - off, "%s/", v);
		if (off >= sizeof(m->key))
			break;
	}
	if (!m->key[0])
		snprintf(m->key, sizeof(m->key), "%s", name);

	const char *rep = ex_annotation(pod, EXCHANGE_ANN_REPORT);
	m->has_report = false;
	m->report_why[0] = '\0';
	if (rep) {
		if (!m->rep)
			m->rep = malloc(sizeof(*m->rep));
		np_error e = { 0 };
		if (!m->rep) {
			snprintf(m->report_why, sizeof(m->report_why), "out of memory");
		} else if (agree_report_parse(rep, strlen(rep), m->rep, &e) < 0) {
			snprintf(m->report_why, sizeof(m->report_why), "%.250s", e.msg);
		} else if (strcmp(m->rep->pod, name) != 0 || strcmp(m->rep->uid, uid) != 0) {
			snprintf(m->report_why, sizeof(m->report_why),
				 "report was written by an earlier incarnation of the pod");
		} else {
			m->has_report = true;
		}
	}
	const char *a = ex_annotation(pod, EXCHANGE_ANN_ASSIGN);
	m->assigned_epoch = 0;
	if (a) {
		json_t *as = json_loads(a, 0, NULL);
		const char *lu = json_string_value(json_object_get(as, "leader"));
		if (lu && strcmp(lu, x->uid) == 0)
			m->assigned_epoch = (int)json_integer_value(json_object_get(as, "epoch"));
		json_decref(as);
	}
	const char *p = ex_annotation(pod, EXCHANGE_ANN_PROBE);
	if (p) {
		json_t *pr = json_loads(p, 0, NULL);
		const char *lu = json_string_value(json_object_get(pr, "leader"));
		if (lu && strcmp(lu, x->uid) == 0 && json_is_array(json_object_get(pr, "ok"))) {
			json_decref(m->probe);
			m->probe = pr;
			m->probe_epoch = (int)json_integer_value(json_object_get(pr, "epoch"));
		} else {
			json_decref(pr);
		}
	}
}

/* Pick, per job index, the newest live pod: a pod of an earlier attempt
 * must not count.  Returns the number selected. */
static size_t select_members(struct gather *g)
{
	size_t n = 0;
	for (size_t i = 0; i < g->n; i++)
		g->m[i].selected = false;
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		if (!m->live)
			continue;
		struct member *best = m;
		for (size_t j = 0; j < g->n; j++) {
			struct member *o = &g->m[j];
			if (o->live && strcmp(o->key, m->key) == 0 &&
			    (strcmp(o->created, best->created) > 0 ||
			     (strcmp(o->created, best->created) == 0 && strcmp(o->name, best->name) > 0)))
				best = o;
		}
		if (best == m) {
			m->selected = true;
			n++;
		}
	}
	return n;
}

static bool ready(struct ex *x)
{
	struct gather *g = x->g;
	size_t n = select_members(g);
	if (g->phase == PH_GATHER) {
		if ((int)n != g->expect)
			return false;
		for (size_t i = 0; i < g->n; i++)
			if (g->m[i].selected && !g->m[i].has_report)
				return false;
		return true;
	}
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		if (!m->selected)
			continue;
		if (m->assigned_epoch != g->epoch && strcmp(m->name, x->name) != 0) {
			g->need_assign = true;
			return true;
		}
		if (m->probe_epoch != g->epoch)
			return false;
	}
	return true;
}

static int gather_cb(enum k8s_watch_type type, json_t *obj, void *ud)
{
	struct ex *x = ud;
	ex_note_rv(x, type, obj);
	if (type == K8S_WATCH_BOOKMARK)
		return 0;
	if (type == K8S_WATCH_RELIST) {
		for (size_t i = 0; i < x->g->n; i++)
			x->g->m[i].live = false;
		json_t *items = json_object_get(obj, "items"), *it;
		size_t i;
		json_array_foreach(items, i, it)
			member_update(x, it);
	} else if (type == K8S_WATCH_DELETED) {
		struct member *m = member_get(x->g, ex_meta(obj, "name") ? ex_meta(obj, "name") : "", false);
		const char *uid = ex_meta(obj, "uid");
		if (m && uid && strcmp(m->uid, uid) == 0)
			m->live = false;
	} else {
		member_update(x, obj);
	}
	if (ready(x)) {
		x->stop = true;
		return 1;
	}
	return 0;
}

static void gather_tick(struct ex *x)
{
	struct gather *g = x->g;
	size_t n = select_members(g), have = 0;
	char missing[600] = "";
	size_t off = 0, shown = 0;
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		if (!m->selected)
			continue;
		bool done = g->phase == PH_GATHER ? m->has_report : m->probe_epoch == g->epoch;
		if (done) {
			have++;
			continue;
		}
		if (shown++ < 8 && off < sizeof(missing))
			off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%s%s%s",
						off ? ", " : "", m->name, m->report_why[0] ? " (" : "",
						m->report_why[0] ? m->report_why : "");
		if (m->report_why[0] && off < sizeof(missing))
			off += (size_t)snprintf(missing + off, sizeof(missing) - off, ")");
	}
	if (g->phase == PH_GATHER)
		ex_log(x, EXCHANGE_INFO, "%zu/%d pods reported; missing: %s%s%s", have, g->expect,
		       missing[0] ? missing : "",
		       (int)n < g->expect ? (missing[0] ? "; " : "") : "",
		       (int)n < g->expect ? "pods not created yet" : "");
	else
		ex_log(x, EXCHANGE_INFO, "round %d: %zu/%zu pods probed; waiting for: %s", g->epoch, have,
		       n, missing);
}

/* Deadline message naming who never showed up. */
static int deadline_error(struct ex *x, np_error *err)
{
	struct gather *g = x->g;
	char who[600] = "";
	size_t off = 0, n = select_members(g);
	for (size_t i = 0; i < g->n && off < sizeof(who); i++) {
		struct member *m = &g->m[i];
		bool done = g->phase == PH_GATHER ? m->has_report : m->probe_epoch == g->epoch;
		if (m->selected && !done)
			off += (size_t)snprintf(who + off, sizeof(who) - off, "%s%s", off ? ", " : "", m->name);
	}
	if (g->phase == PH_GATHER && (int)n < g->expect)
		snprintf(who + off, off < sizeof(who) ? sizeof(who) - off : 0, "%s%d pod(s) never created",
			 off ? "; " : "", g->expect - (int)n);
	return np_error_set(err, NP_EK8S, 0, "deadline reached: %s %s",
			    g->phase == PH_GATHER ? "no report from" : "no probe result from", who);
}

/* Tell every pod its part of the round (or the failure). */
/* Handing out parts costs one PATCH per pod: on a large job they go out
 * over a few connections at once, each with its own client. */
#define PUBLISH_CONNS PUBLISH_CONNS_MAX

struct publish_job {
	struct ex *x;
	struct k8s_client *k;
	char **names, **patches;
	size_t first, n, step;
	np_error err;
	int ret;
};

static void *publish_worker(void *arg)
{
	struct publish_job *j = arg;
	for (size_t i = j->first; i < j->n && j->ret == 0; i += j->step) {
		json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", EXCHANGE_ANN_ASSIGN,
					  j->patches[i]);
		j->ret = patch ? k8s_patch_pod(j->k, j->x->ns, j->names[i], patch, NULL, &j->err)
			       : np_error_set(&j->err, NP_EINTERNAL, 0, "out of memory");
		json_decref(patch);
		if (j->ret < 0)
			np_error_wrap(&j->err, "cannot annotate pod %s", j->names[i]);
	}
	return NULL;
}

/* Tell every pod its part of the round (or the failure). */
static int publish_round(struct ex *x, const char *state, const char *reason, np_error *err)
{
	struct gather *g = x->g;
	char **names = calloc(g->n + 1, sizeof(*names)), **patches = calloc(g->n + 1, sizeof(*patches));
	size_t n = 0;
	int ret = -1;
	if (!names || !patches) {
		np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		if (!m->selected)
			continue;
		json_t *as = json_object_get(g->assign_of, m->name);
		json_t *a = as ? json_deep_copy(as) : json_object();
		json_object_set_new(a, "leader", json_string(x->uid));
		json_object_set_new(a, "leader_pod", json_string(x->name));
		json_object_set_new(a, "epoch", json_integer(g->epoch));
		json_object_set_new(a, "state", json_string(state));
		if (reason)
			json_object_set_new(a, "reason", json_string(reason));
		names[n] = m->name;
		patches[n] = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(a);
		if (!patches[n++]) {
			np_error_set(err, NP_EINTERNAL, 0, "out of memory");
			goto out;
		}
	}
	size_t conns = n < 32 ? 1 : PUBLISH_CONNS;
	struct publish_job jobs[PUBLISH_CONNS];
	pthread_t threads[PUBLISH_CONNS];
	bool started[PUBLISH_CONNS] = { false };
	for (size_t c = 0; c < conns; c++) {
		if (!g->pool[c] && k8s_client_new(&g->pool[c], x->o->k8s, err) < 0)
			goto out;
		k8s_client_set_deadline(g->pool[c], x->o->deadline_ms);
		jobs[c] = (struct publish_job){ .x = x, .k = g->pool[c], .names = names, .patches = patches,
						.first = c, .n = n, .step = conns };
	}
	for (size_t c = 1; c < conns; c++)
		started[c] = pthread_create(&threads[c], NULL, publish_worker, &jobs[c]) == 0;
	publish_worker(&jobs[0]);
	for (size_t c = 1; c < conns; c++) {
		if (started[c])
			pthread_join(threads[c], NULL);
		else
			publish_worker(&jobs[c]); /* no thread: do its share here */
	}
	ret = 0;
	for (size_t c = 0; c < conns && ret == 0; c++)
		if (jobs[c].ret < 0) {
			*err = jobs[c].err;
			ret = -1;
		}
	if (ret == 0)
		for (size_t i = 0; i < g->n; i++)
			if (g->m[i].selected)
				g->m[i].assigned_epoch = g->epoch;
out:
	for (size_t i = 0; patches && i < n; i++)
		free(patches[i]);
	free(patches);
	free(names);
	return ret;
}

/* The round's state on the gatherer's own pod, where every follower that
 * has probed is waiting: one write ends the round for the whole job. */
static int set_round(struct ex *x, const char *state, const char *reason, np_error *err)
{
	json_t *rd = json_pack("{s:s, s:i, s:s}", "leader", x->uid, "epoch", x->g->epoch, "state", state);
	if (reason)
		json_object_set_new(rd, "reason", json_string(reason));
	char *s = json_dumps(rd, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(rd);
	int r = s ? ex_patch_annotations(x, x->name, json_pack("{s:s}", EXCHANGE_ANN_ROUND, s), err)
		  : np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	free(s);
	return r;
}

/* Assignments of one rail: this pod's interface and address, and the ring
 * neighbour (pods sorted by name) it must reach. */
static void rail_assign(struct gather *g, const struct agree_rail *rail, json_t *trials_of)
{
	size_t n = rail->n_assign;
	for (size_t i = 0; i < n; i++) {
		const struct agree_assign *a = &rail->assign[i], *nx = &rail->assign[(i + 1) % n];
		json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "net", rail->net.text, "if",
				      a->ifname, "addr", a->addr, "next_pod", n > 1 ? nx->pod : "",
				      "next_addr", n > 1 ? nx->addr : "", "n", (int)n);
		if (trials_of) {
			json_t *arr = json_object_get(trials_of, a->pod);
			if (!arr) {
				arr = json_array();
				json_object_set_new(trials_of, a->pod, arr);
			}
			json_array_append_new(arr, t);
		} else {
			json_object_set_new(g->assign_of, a->pod, t);
		}
	}
}

static int build_reports(struct gather *g, struct agree_report **out, size_t *n)
{
	size_t k = 0;
	struct agree_report *r = malloc(sizeof(*r) * (g->n ? g->n : 1));
	if (!r)
		return -1;
	for (size_t i = 0; i < g->n; i++)
		if (g->m[i].selected)
			r[k++] = *g->m[i].rep;
	*out = r;
	*n = k;
	return 0;
}

/* The gatherer runs its own probes inline, as a follower would. */
static int own_probe(struct ex *x, long bytes, np_error *err)
{
	struct gather *g = x->g;
	json_t *trials = json_object_get(json_object_get(g->assign_of, x->name), "trials");
	json_t *one = json_object_get(g->assign_of, x->name);
	const char *addrs[EX_SERVERS_MAX], *ifs[EX_SERVERS_MAX], *nexts[EX_SERVERS_MAX];
	size_t n = 0;
	if (json_is_array(trials)) {
		for (; n < json_array_size(trials) && n < EX_SERVERS_MAX; n++) {
			json_t *t = json_array_get(trials, n);
			addrs[n] = json_string_value(json_object_get(t, "addr"));
			ifs[n] = json_string_value(json_object_get(t, "if"));
			nexts[n] = json_string_value(json_object_get(t, "next_addr"));
		}
	} else {
		addrs[0] = json_string_value(json_object_get(one, "addr"));
		ifs[0] = json_string_value(json_object_get(one, "if"));
		nexts[0] = json_string_value(json_object_get(one, "next_addr"));
		n = 1;
	}
	json_t *pr = ex_probe_round(x, g->epoch, n, addrs, ifs, nexts, bytes, err);
	if (!pr)
		return -1;
	char *s = json_dumps(pr, JSON_COMPACT);
	struct member *me = member_get(g, x->name, false);
	if (me) {
		json_decref(me->probe);
		me->probe = pr;
		me->probe_epoch = g->epoch;
	} else {
		json_decref(pr);
	}
	int r = ex_patch_annotations(x, x->name, json_pack("{s:s}", EXCHANGE_ANN_PROBE, s ? s : "{}"), err);
	free(s);
	return r;
}

static int wait_probes(struct ex *x, np_error *err)
{
	x->g->phase = PH_PROBE;
	for (;;) {
		x->g->need_assign = false;
		if (ex_watch(x, x->sel, NULL, gather_cb, gather_tick, err) < 0)
			return np_now_ms() >= x->o->deadline_ms ? deadline_error(x, err) : -1;
		if (!x->g->need_assign)
			return 0;
		/* A pod restarted: hand the new incarnation its part again. */
		json_t *a = json_object_get(x->g->assign_of, x->name);
		const char *state = json_object_get(a, "trials") ? "measure" : "probe";
		if (publish_round(x, state, NULL, err) < 0)
			return -1;
	}
}

static int decide(struct ex *x, struct agree_options *opt, struct agree_decision *d, np_error *err)
{
	struct agree_report *reps;
	size_t n;
	if (build_reports(x->g, &reps, &n) < 0)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	int r = agree_decide(reps, n, opt, d, err);
	free(reps);
	return r;
}

static json_t *decision_json(const struct agree_decision *d)
{
	char *s = NULL;
	np_error e = { 0 };
	if (agree_decision_to_json(d, &s, &e) < 0)
		return NULL;
	json_t *j = json_loads(s, 0, NULL);
	free(s);
	return j;
}

/* Among tied top networks, which one has the best worst-case throughput? */
static int measure(struct ex *x, struct agree_options *opt, const struct agree_decision *d,
		   np_error *err)
{
	struct gather *g = x->g;
	struct agree_network trial[EX_SERVERS_MAX];
	size_t nt = 0;
	for (size_t i = 0; i < d->n_nets && nt < EX_SERVERS_MAX; i++)
		if (d->nets[i].eligible && d->nets[i].min_mbps == d->nets[0].min_mbps)
			trial[nt++] = d->nets[i].net;
	if (nt < 2)
		return 0;
	json_t *trials_of = json_object();
	for (size_t t = 0; t < nt; t++) {
		struct agree_options o1 = *opt;
		o1.has_cidr = true;
		o1.cidr = trial[t];
		struct agree_decision d1;
		if (decide(x, &o1, &d1, err) < 0) {
			agree_decision_free(&d1);
			json_decref(trials_of);
			return -1;
		}
		rail_assign(g, &d1.rails[0], trials_of);
		agree_decision_free(&d1);
	}
	json_object_clear(g->assign_of);
	const char *pod;
	json_t *arr;
	json_object_foreach(trials_of, pod, arr)
		json_object_set_new(g->assign_of, pod, json_pack("{s:O, s:i}", "trials", arr, "n", (int)d->n_pods));
	json_decref(trials_of);
	g->epoch++;
	ex_log(x, EXCHANGE_INFO, "round %d: measuring throughput on %zu tied networks", g->epoch, nt);
	if (publish_round(x, "measure", NULL, err) < 0 || set_round(x, "measure", NULL, err) < 0 ||
	    own_probe(x, x->o->probe_throughput_bytes, err) < 0 || wait_probes(x, err) < 0)
		return -1;
	/* Worst case per network over the pods; a failed trial disqualifies it. */
	double best = -1;
	size_t best_i = 0;
	for (size_t t = 0; t < nt; t++) {
		double worst = -1;
		for (size_t i = 0; i < g->n; i++) {
			if (!g->m[i].selected)
				continue;
			json_t *ok = json_array_get(json_object_get(g->m[i].probe, "ok"), t);
			double v = json_number_value(json_array_get(json_object_get(g->m[i].probe, "mbps"), t));
			if (!json_is_true(ok))
				v = 0;
			if (worst < 0 || v < worst)
				worst = v;
		}
		ex_log(x, EXCHANGE_INFO, "network %s: worst ring throughput %.0f Mb/s", trial[t].text, worst);
		if (worst > best) {
			best = worst;
			best_i = t;
		}
	}
	for (size_t t = 0; t < nt && opt->n_excluded < AGREE_EXCLUDED_MAX; t++)
		if (t != best_i)
			opt->excluded[opt->n_excluded++] = trial[t];
	return 0;
}

static void fill_result(struct ex *x, const struct agree_decision *d, struct exchange_result *res)
{
	const struct agree_rail *rail = &d->rails[0];
	for (size_t i = 0; i < rail->n_assign; i++) {
		const struct agree_assign *a = &rail->assign[i];
		if (strcmp(a->pod, x->name) != 0)
			continue;
		const struct agree_assign *nx = &rail->assign[(i + 1) % rail->n_assign];
		snprintf(res->ifname, sizeof(res->ifname), "%s", a->ifname);
		snprintf(res->addr, sizeof(res->addr), "%s", a->addr);
		res->family = a->family;
		if (rail->n_assign > 1) {
			snprintf(res->next_pod, sizeof(res->next_pod), "%s", nx->pod);
			snprintf(res->next_addr, sizeof(res->next_addr), "%s", nx->addr);
		}
	}
	snprintf(res->network, sizeof(res->network), "%s", rail->net.text);
	res->n_pods = d->n_pods;
	res->epoch = x->g->epoch;
	res->decision = decision_json(d);
}

int ex_gather(struct ex *x, struct exchange_result *res, np_error *err)
{
	struct gather *g = calloc(1, sizeof(*g));
	if (!g)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	x->g = g;
	g->assign_of = json_object();
	snprintf(x->leader_uid, sizeof(x->leader_uid), "%s", x->uid);
	g->expect = x->o->expect;
	if (g->expect <= 0) {
		/* A batch Job says how many pods it runs; other kinds must be told. */
		json_t *owners = json_object_get(json_object_get(x->pod, "metadata"), "ownerReferences"), *ow;
		size_t i;
		json_array_foreach(owners, i, ow) {
			const char *kind = json_string_value(json_object_get(ow, "kind"));
			const char *jname = json_string_value(json_object_get(ow, "name"));
			json_t *job = NULL;
			if (!kind || strcmp(kind, "Job") != 0 || !jname)
				continue;
			if (k8s_get_job(x->k, x->ns, jname, &job, err) < 0)
				return np_error_wrap(err, "cannot read Job %s to count its pods (pass --expect)", jname);
			g->expect = k8s_job_completions(job);
			json_decref(job);
		}
		if (g->expect <= 0)
			return np_error_set(err, NP_EUSAGE, 0,
					    "cannot tell how many pods the job has: pass --expect N or set NICPICK_EXPECT");
	}
	ex_log(x, EXCHANGE_INFO, "gathering reports of %d pods (%s)", g->expect, x->sel);

	struct agree_options opt = x->o->agree;
	bool measured = x->o->probe_throughput_bytes <= 0;
	for (;;) {
		g->phase = PH_GATHER;
		/* After a failed probe every report is in already: decide again
		 * at once rather than wait for a change that may never come. */
		if (!ready(x) && ex_watch(x, x->sel, NULL, gather_cb, gather_tick, err) < 0)
			return np_now_ms() >= x->o->deadline_ms ? deadline_error(x, err) : -1;

		struct agree_decision d;
		if (decide(x, &opt, &d, err) < 0) {
			np_error keep = *err;
			res->decision = decision_json(&d);
			agree_decision_free(&d);
			g->epoch++;
			json_object_clear(g->assign_of);
			if (publish_round(x, "failed", keep.msg, err) == 0)
				set_round(x, "failed", keep.msg, err);
			*err = keep;
			return -1;
		}
		if (!measured) {
			measured = true;
			int r = measure(x, &opt, &d, err);
			agree_decision_free(&d);
			if (r < 0)
				return -1;
			continue;
		}
		json_object_clear(g->assign_of);
		rail_assign(g, &d.rails[0], NULL);
		g->epoch++;
		ex_log(x, EXCHANGE_INFO, "round %d: %zu pods on %s%s; probing the ring", g->epoch, d.n_pods,
		       d.rails[0].net.text, d.routed ? " (routed)" : "");
		if (publish_round(x, "probe", NULL, err) < 0 || set_round(x, "probe", NULL, err) < 0 ||
		    own_probe(x, 0, err) < 0 || wait_probes(x, err) < 0) {
			agree_decision_free(&d);
			return -1;
		}
		/* Every ring link must have passed; otherwise drop the network. */
		char why[700] = "";
		size_t off = 0;
		for (size_t i = 0; i < g->n; i++) {
			struct member *m = &g->m[i];
			if (!m->selected || json_is_true(json_array_get(json_object_get(m->probe, "ok"), 0)))
				continue;
			const char *dt = json_string_value(json_array_get(json_object_get(m->probe, "detail"), 0));
			if (off < sizeof(why))
				off += (size_t)snprintf(why + off, sizeof(why) - off, "%s%s: %s", off ? "; " : "",
							m->name, dt ? dt : "probe failed");
		}
		if (!why[0]) {
			fill_result(x, &d, res);
			agree_decision_free(&d);
			return set_round(x, "final", NULL, err);
		}
		ex_log(x, EXCHANGE_WARN, "round %d: network %s failed the probe (%s); deciding again without it",
		       g->epoch, d.rails[0].net.text, why);
		if (opt.n_excluded < AGREE_EXCLUDED_MAX)
			opt.excluded[opt.n_excluded++] = d.rails[0].net;
		agree_decision_free(&d);
	}
}

void ex_gather_stats(struct ex *x, struct k8s_stats *acc)
{
	for (size_t c = 0; x->g && c < PUBLISH_CONNS_MAX; c++) {
		struct k8s_stats st;
		if (!x->g->pool[c])
			continue;
		k8s_client_stats(x->g->pool[c], &st);
		acc->requests += st.requests;
		acc->retries += st.retries;
		acc->bytes_sent += st.bytes_sent;
		acc->bytes_received += st.bytes_received;
	}
}

void ex_gather_free(struct ex *x)
{
	struct gather *g = x->g;
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++) {
		free(g->m[i].rep);
		json_decref(g->m[i].probe);
	}
	free(g->m);
	json_decref(g->assign_of);
	for (size_t c = 0; c < PUBLISH_CONNS_MAX; c++)
		k8s_client_free(g->pool[c]);
	free(g);
	x->g = NULL;
}
