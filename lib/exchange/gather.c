/* The gatherer: watches the job's pods, decides when every report is in,
 * hands each pod its part, runs the probe rounds and declares the result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/gather_priv.h"
#include "util/clock.h"


static bool ready(struct ex *x)
{
	struct gather *g = x->g;
	size_t n = gather_select_members(g);
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
			gather_member_update(x, it);
	} else if (type == K8S_WATCH_DELETED) {
		struct member *m = gather_member(x->g, ex_meta(obj, "name") ? ex_meta(obj, "name") : "", false);
		const char *uid = ex_meta(obj, "uid");
		if (m && uid && strcmp(m->uid, uid) == 0)
			m->live = false;
	} else {
		gather_member_update(x, obj);
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
	size_t n = gather_select_members(g), have = 0;
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
	size_t off = 0, n = gather_select_members(g);
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
	const char *addrs[EX_SERVERS_MAX], *ifs[EX_SERVERS_MAX], *nexts[EX_SERVERS_MAX];
	size_t n = ex_assignment_trials(json_object_get(g->assign_of, x->name), addrs, ifs, nexts);
	json_t *pr = ex_probe_round(x, g->epoch, n, addrs, ifs, nexts, bytes, err);
	if (!pr)
		return -1;
	char *s = json_dumps(pr, JSON_COMPACT);
	struct member *me = gather_member(g, x->name, false);
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
		if (gather_publish_round(x, state, NULL, err) < 0)
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
		int r = gather_rail_assign(x, &d1.rails[0], trials_of, err);
		agree_decision_free(&d1);
		if (r < 0) {
			json_decref(trials_of);
			return -1;
		}
	}
	json_object_clear(g->assign_of);
	const char *pod;
	json_t *arr;
	json_object_foreach(trials_of, pod, arr)
		json_object_set_new(g->assign_of, pod, json_pack("{s:O, s:i}", "trials", arr, "n", (int)d->n_pods));
	json_decref(trials_of);
	g->epoch++;
	ex_log(x, EXCHANGE_INFO, "round %d: measuring throughput on %zu tied networks", g->epoch, nt);
	if (gather_publish_round(x, "measure", NULL, err) < 0 || gather_set_round(x, "measure", NULL, err) < 0 ||
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

static int fill_result(struct ex *x, const struct agree_decision *d, struct exchange_result *res,
		       np_error *err)
{
	const struct agree_rail *rail = &d->rails[0];
	struct agree_rank rk;
	if (agree_rail_rank(rail, x->name, x->name, &rk, err) < 0)
		return -1;
	res->rank = rk.rank;
	res->world = rk.world;
	snprintf(res->root_addr, sizeof(res->root_addr), "%s", rk.root_addr);
	res->min_mbps = rk.min_mbps;
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
	return 0;
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
			if (gather_publish_round(x, "failed", keep.msg, err) == 0)
				gather_set_round(x, "failed", keep.msg, err);
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
		if (gather_rail_assign(x, &d.rails[0], NULL, err) < 0) {
			agree_decision_free(&d);
			return -1;
		}
		g->epoch++;
		ex_log(x, EXCHANGE_INFO, "round %d: %zu pods on %s%s; probing the ring", g->epoch, d.n_pods,
		       d.rails[0].net.text, d.routed ? " (routed)" : "");
		if (gather_publish_round(x, "probe", NULL, err) < 0 || gather_set_round(x, "probe", NULL, err) < 0 ||
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
			int r = fill_result(x, &d, res, err);
			agree_decision_free(&d);
			return r < 0 ? -1 : gather_set_round(x, "final", NULL, err);
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
