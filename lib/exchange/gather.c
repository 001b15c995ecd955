/* The gatherer: watches the job's pods, decides when every report is in,
 * hands each pod its part, runs the probe rounds and declares the result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/gather_priv.h"
#include "util/clock.h"
#include "util/jsonread.h"
#include "util/text.h"

static bool member_done(const struct gather *g, const struct member *m)
{
	return g->phase == PH_GATHER ? m->has_report : m->has_probe && m->probe.epoch == g->epoch;
}

/* From the counts alone: O(1) per watch event. */
bool gather_ready(struct gather *g, const char *self)
{
	size_t n = gather_selected(g);
	if (g->phase == PH_GATHER)
		return (int)n == g->expect && g->n_reported == n;
	/* The gatherer's own part is on its pod only once its own patch came
	 * back through the watch: it does not wait for that. */
	const struct member *me = gather_member(g, self, false);
	bool me_missing = me && me->selected && me->assigned_epoch != g->epoch;
	size_t unassigned = g->n_unassigned - (me_missing ? 1 : 0);
	if (unassigned > 0) {
		g->need_assign = true;
		return true;
	}
	return g->n_probed == n;
}

/* The missing pods shown are the first ones by index, as a person counts
 * them (job-w-2 before job-w-10: strverscmp compares digit runs as
 * numbers), not the API's text order: p->missing stays sorted, a name
 * past the last shown one is only counted. */
static void add_missing(struct exchange_progress *p, const char *name)
{
	size_t at = p->n_missing;
	while (at > 0 && strverscmp(name, p->missing[at - 1]) < 0)
		at--;
	if (at >= EXCHANGE_MISSING_SHOWN)
		return;
	size_t n = p->n_missing < EXCHANGE_MISSING_SHOWN ? p->n_missing : EXCHANGE_MISSING_SHOWN - 1;
	memmove(p->missing[at + 1], p->missing[at], (n - at) * sizeof(p->missing[0]));
	snprintf(p->missing[at], sizeof(p->missing[0]), "%s", name);
	if (p->n_missing < EXCHANGE_MISSING_SHOWN)
		p->n_missing++;
}

void gather_progress(struct gather *g, const char *leader_uid, const char *leader_pod,
		     struct exchange_progress *p)
{
	const char *refused_by = NULL;
	memset(p, 0, sizeof(*p));
	snprintf(p->leader, sizeof(p->leader), "%s", leader_uid);
	snprintf(p->leader_pod, sizeof(p->leader_pod), "%s", leader_pod);
	p->phase = g->phase == PH_GATHER ? EXCHANGE_GATHERING : EXCHANGE_PROBING;
	p->round = g->epoch;
	p->expect = g->expect;
	p->created = (int)gather_selected(g);
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		if (!m->selected)
			continue;
		if (member_done(g, m)) {
			p->done++;
			continue;
		}
		add_missing(p, m->name);
		const char *why = gather_member_why(m);
		if (why[0] && (!refused_by || strverscmp(m->name, refused_by) < 0)) {
			char r[sizeof(p->refused) + 256];
			snprintf(r, sizeof(r), "%s: %.250s", m->name, why);
			np_text_clean(p->refused, sizeof(p->refused), r, NP_TEXT_SPACE);
			refused_by = m->name;
		}
		p->missing_total++;
	}
	snprintf(p->probe, sizeof(p->probe), "%s", g->probe_status);
}

int gather_check_count(struct gather *g, np_error *err)
{
	int n = (int)gather_selected(g);
	if (n <= g->expect)
		return 0;
	return np_error_set(err, NP_EK8S, 0,
			    "%d pods of the job exist, but NICPICK_EXPECT (--expect) is %d: set it to the "
			    "job's size",
			    n, g->expect);
}

static void gather_tick_publish(struct ex *x, bool log);

static int gather_cb(enum k8s_watch_type type, json_t *obj, void *ud)
{
	struct ex *x = ud;
	struct gather *g = x->g;
	ex_note_rv(x, type, obj);
	if (type == K8S_WATCH_BOOKMARK)
		return 0;
	if (type == K8S_WATCH_RELIST) {
		gather_members_relist(g);
		json_t *items = json_object_get(obj, "items"), *it;
		size_t i;
		json_array_foreach(items, i, it)
			gather_member_update(g, x->uid, it);
		json_array_foreach(items, i, it) /* with every member known */
			ex_rival_see(x, it);
	} else if (type == K8S_WATCH_RELIST_BEGIN) {
		gather_members_relist(g);
		/* This pod first, as last read: the rival check of each page's
		 * pods compares their job index with this pod's. */
		if (x->pod)
			gather_member_update(g, x->uid, x->pod);
		g->relisting = true;
		return 0;
	} else if (type == K8S_WATCH_DELETED) {
		gather_member_gone(g, ex_meta(obj, "name"), ex_meta(obj, "uid"));
	} else if (type != K8S_WATCH_RELIST_END) {
		gather_member_update(g, x->uid, obj);
		ex_rival_see(x, obj);
	}
	if (type == K8S_WATCH_RELIST_END)
		g->relisting = false;
	if (g->relisting)
		return 0; /* the rest of the list is still to come */
	np_error e = { 0 };
	if (x->has_rival) {
		ex_fail(x, &x->rival);
		x->stop = true;
		return 1;
	}
	if (gather_check_count(g, &e) < 0) {
		ex_fail(x, &e);
		x->stop = true;
		return 1;
	}
	bool ready = gather_ready(g, x->name);
	/* After the first list the followers learn where it stands at once,
	 * not at the first tick; when every report is in already, they learn
	 * of the round instead, a moment later (each write on this pod is an
	 * event on every follower's watch). */
	if ((type == K8S_WATCH_RELIST || type == K8S_WATCH_RELIST_END) && !g->published[0] && !ready)
		gather_tick_publish(x, false);
	if (ready) {
		x->stop = true;
		return 1;
	}
	return 0;
}

/* What the gatherer waits for: in the log (at each progress line), and the
 * same on this pod for the followers (only when it changed: each write
 * reaches every follower). */
static void gather_tick_publish(struct ex *x, bool log)
{
	struct gather *g = x->g;
	struct exchange_progress p;
	char text[1024];
	gather_progress(g, x->uid, x->name, &p);
	exchange_progress_text(&p, text, sizeof(text));
	if (log)
		ex_log(x, EXCHANGE_INFO, "%s", text);
	if (strcmp(text, g->published) == 0)
		return;
	np_error e = { 0 };
	if (gather_set_progress(x, &e) < 0)
		ex_log(x, EXCHANGE_WARN, "cannot publish the progress: %s", e.msg);
	else
		snprintf(g->published, sizeof(g->published), "%s", text);
}

static void gather_tick(struct ex *x)
{
	/* A re-list under way has not yet seen every pod again: what it has
	 * seen so far is no progress to log, nor to write for the followers. */
	if (x->g->relisting) {
		ex_log(x, EXCHANGE_INFO, "waiting for the API server's list of the job's pods (%s)%s",
		       x->sel, x->probing ? "; the probe goes on meanwhile" : "");
		return;
	}
	gather_tick_publish(x, true);
}

/* Deadline message naming who never showed up. */
static int deadline_error(struct ex *x, np_error *err)
{
	struct exchange_progress p;
	char text[1024];
	gather_progress(x->g, x->uid, x->name, &p);
	exchange_progress_text(&p, text, sizeof(text));
	return np_error_set(err, NP_EK8S, 0, "deadline reached: %s", text);
}

int gather_watch(struct ex *x, np_error *err)
{
	if (ex_watch(x, x->sel, EX_UNFINISHED, gather_cb, gather_tick, err) == 0)
		return 0;
	return !x->failed && ex_past_deadline(x) ? deadline_error(x, err) : -1;
}

/* The selected members' reports, as the decision reads them (a pinned
 * member's are stored pinned: gather_member_pin). */
static int build_reports(struct gather *g, struct agree_view **out, size_t *n)
{
	size_t k = 0;
	struct agree_view *r = malloc(sizeof(*r) * (g->n ? g->n : 1));
	if (!r)
		return -1;
	for (size_t i = 0; i < g->n; i++)
		if (g->m[i].selected && g->m[i].has_report)
			r[k++] = g->m[i].rep;
	*out = r;
	*n = k;
	return 0;
}

int gather_decide(struct ex *x, struct agree_options *opt, struct agree_decision *d, np_error *err)
{
	struct agree_view *reps;
	size_t n;
	if (build_reports(x->g, &reps, &n) < 0) {
		memset(d, 0, sizeof(*d));
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	}
	int r = agree_decide_views(reps, n, opt, d, err);
	free(reps);
	return r;
}

/* The pods' NCCL, CUDA and GPU compared, before any probe: a warning for
 * every pod, or with --require-same-versions the job's failure (NP_ESMOKE,
 * before any all-reduce). */
static int compare_versions(struct ex *x, np_error *err)
{
	struct gather *g = x->g;
	struct agree_view *reps;
	size_t n;
	if (build_reports(g, &reps, &n) < 0)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	struct agree_versions v;
	agree_versions_compare_views(reps, n, &v);
	free(reps);
	g->versions = v;
	if (v.warning[0] && x->o->require_same_versions)
		return np_error_set(err, NP_ESMOKE, 0, "--require-same-versions: the job's pods differ: %s",
				    v.warning);
	return 0; /* every pod logs what its assignment carries */
}

/* A network that failed its probe, in the warning every pod gets with its
 * next assignment (and so in its log, its Event and its decision.json). */
static void note_failure(struct gather *g, const char *net, const char *what, const char *why)
{
	size_t len = strlen(g->warning);
	char line[sizeof(g->warning)];
	/* "the preferred network X" first, then "then Y" for each later one. */
	if (len)
		snprintf(line, sizeof(line), "; then %s failed its %s (%s)", net, what, why);
	else
		snprintf(line, sizeof(line), "the preferred network %s failed its %s (%s)", net, what, why);
	np_text_clean(g->warning + len, sizeof(g->warning) - len, line, NP_TEXT_SPACE);
}

/* What failed on the round's part t, "pod: why; ..." ("" when every pod passed). */
static void failures(const struct gather *g, size_t t, char *why, size_t len)
{
	size_t off = 0;
	why[0] = '\0';
	for (size_t i = 0; i < g->n; i++) {
		const struct member *m = &g->m[i];
		if (!m->selected || (t < m->probe.n && m->probe.ok[t]))
			continue;
		const char *d = gather_probe_detail(m, t);
		if (!d[0])
			d = "probe failed";
		if (off < len)
			off += (size_t)snprintf(why + off, len - off, "%s%s: %s", off ? "; " : "", m->name, d);
	}
}

static void clear_parts(struct gather *g)
{
	for (size_t i = 0; i < g->n; i++)
		g->m[i].n_parts = 0;
}

/* Among tied top networks, which one has the best worst-case throughput?
 * 1: the round was void (a pod replaced), to be measured again. */
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
	clear_parts(g);
	for (size_t t = 0; t < nt; t++) {
		struct agree_options o1 = *opt;
		o1.has_cidr = true;
		o1.cidr = trial[t].pfx;
		struct agree_decision d1;
		int r = gather_decide(x, &o1, &d1, err);
		if (r == 0)
			r = gather_rail_assign(x, &d1.rails[0], true, err);
		agree_decision_free(&d1);
		if (r < 0)
			return -1;
	}
	g->n_pods = (int)d->n_pods;
	g->epoch = gather_next_epoch(g);
	snprintf(g->probe_status, sizeof(g->probe_status), "round %d: measuring throughput on %zu tied networks",
		 g->epoch, nt);
	ex_log(x, EXCHANGE_INFO, "%s", g->probe_status);
	int void_round = gather_run_round(x, EXCHANGE_MEASURE, x->o->probe_throughput_bytes, err);
	if (void_round != 0)
		return void_round;
	/* Worst case per network over the pods; a failed trial disqualifies it. */
	double best = -1;
	size_t best_i = 0;
	for (size_t t = 0; t < nt; t++) {
		double worst = -1;
		for (size_t i = 0; i < g->n; i++) {
			const struct member *m = &g->m[i];
			if (!m->selected)
				continue;
			double v = t < m->probe.n && m->probe.ok[t] ? m->probe.mbps[t] : 0;
			if (worst < 0 || v < worst)
				worst = v;
		}
		ex_log(x, EXCHANGE_INFO, "network %s: worst ring throughput %.0f Mb/s", trial[t].text, worst);
		char why[700];
		failures(g, t, why, sizeof(why));
		if (why[0]) {
			ex_log(x, EXCHANGE_WARN, "network %s failed its throughput probe (%s)", trial[t].text, why);
			note_failure(g, trial[t].text, "throughput probe", why);
			/* trial 0 is the network the job would have taken untested */
			if (t == 0 && x->o->strict)
				return np_error_set(err, NP_ENOCOMMON, 0,
						    "--strict: the preferred network %s failed its probe: %s",
						    trial[t].text, why);
		}
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

/* This pod's part of the final round; the decision moves into res. */
void gather_fill_result(struct ex *x, struct agree_decision *d, struct exchange_result *res)
{
	const struct member *me = gather_member(x->g, x->name, false);
	ex_result_rails(res, me->parts, me->n_parts);
	res->family = d->rails[0].net.pfx.family;
	snprintf(res->root_pod, sizeof(res->root_pod), "%s", x->name);
	np_text_clean(res->versions, sizeof(res->versions), x->g->versions.warning, NP_TEXT_SPACE);
	np_text_clean(res->smoke_skip, sizeof(res->smoke_skip), x->g->versions.unavailable, NP_TEXT_SPACE);
	np_text_clean(res->probe_warning, sizeof(res->probe_warning), x->g->warning, NP_TEXT_SPACE);
	np_text_clean(res->floor, sizeof(res->floor), x->g->versions.floor, NP_TEXT_SPACE);
	res->n_pods = d->n_pods;
	res->epoch = x->g->epoch;
	res->decision = *d;
	res->has_decision = true;
	memset(d, 0, sizeof(*d));
}

/* Tell every pod (and the round) that the job failed, with err's reason. */
static int publish_failure(struct ex *x, np_error *err)
{
	np_error keep = *err, perr = { 0 };
	x->g->epoch = gather_next_epoch(x->g);
	clear_parts(x->g);
	if (gather_publish_round(x, &keep, false, &perr) < 0 || gather_set_round(x, EXCHANGE_FAILED, &keep, true, &perr) < 0)
		ex_log(x, EXCHANGE_WARN, "cannot tell the other pods: %s", perr.msg);
	*err = keep;
	return -1;
}

static int count_pods(struct ex *x, np_error *err)
{
	struct gather *g = x->g;
	g->expect = x->o->expect;
	if (g->expect > 0)
		return 0;
	/* A batch Job says how many pods it runs; other kinds must be told. */
	json_t *owners = json_object_get(json_object_get(x->pod, "metadata"), "ownerReferences"), *ow;
	size_t i;
	json_array_foreach(owners, i, ow) {
		const char *kind = np_json_cstr(json_object_get(ow, "kind"));
		const char *jname = np_json_cstr(json_object_get(ow, "name"));
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
	return 0;
}

/* Gather, decide, probe; until a network passes or none is left. */
static int rounds(struct ex *x, struct exchange_result *res, np_error *err)
{
	struct gather *g = x->g;
	struct agree_options opt = x->o->agree;
	/* One part per rail in an assignment. */
	if (opt.max_rails == AGREE_RAILS_AUTO || opt.max_rails > EXCHANGE_RAILS_MAX)
		opt.max_rails = EXCHANGE_RAILS_MAX;
	bool measured = x->o->probe_throughput_bytes <= 0;
	/* Networks on which a pod was moved to the interface its route uses. */
	struct np_prefix route_tried[AGREE_EXCLUDED_MAX];
	size_t n_route_tried = 0;
	for (;;) {
		g->phase = PH_GATHER;
		/* After a failed probe every report is in already: decide again
		 * at once rather than wait for a change that may never come. */
		if (!gather_ready(g, x->name) && gather_watch(x, err) < 0)
			return -1;
		if (compare_versions(x, err) < 0)
			return publish_failure(x, err);
		if (g->resume_final) {
			int r = gather_resume_final(x, &opt, res, err);
			if (r != 0)
				return r < 0 ? -1 : 0;
		}

		struct agree_decision d;
		if (gather_decide(x, &opt, &d, err) < 0) {
			res->decision = d; /* the per-pod table says why */
			res->has_decision = true;
			return publish_failure(x, err);
		}
		g->n_pods = (int)d.n_pods;
		/* Rails are used together, not measured against each other. */
		if (!measured && d.n_rails > 1)
			measured = true;
		if (!measured) {
			measured = true;
			int r = measure(x, &opt, &d, err);
			agree_decision_free(&d);
			if (r < 0)
				return err->status == NP_ENOCOMMON ? publish_failure(x, err) : -1;
			measured = r == 0;
			continue;
		}
		/* Every rail in one round: a part of each for every pod. */
		size_t nr = d.n_rails < EXCHANGE_RAILS_MAX ? d.n_rails : EXCHANGE_RAILS_MAX;
		int r = 0;
		char nets[EXCHANGE_RAILS_MAX * (AGREE_NET_TEXT_MAX + 2)] = "";
		for (size_t k = 0; k < nr && r == 0; k++) {
			r = gather_rail_assign(x, &d.rails[k], k > 0, err);
			snprintf(nets + strlen(nets), sizeof(nets) - strlen(nets), "%s%s", k ? ", " : "",
				 d.rails[k].net.text);
		}
		g->epoch = gather_next_epoch(g);
		snprintf(g->probe_status, sizeof(g->probe_status), "round %d: probing the ring on %s%s", g->epoch,
			 nets, d.routed ? " (routed)" : "");
		ex_log(x, EXCHANGE_INFO, "round %d: %zu pods on %s%s%s; probing the ring", g->epoch, d.n_pods,
		       nets, d.routed ? " (routed)" : "", nr > 1 ? " (rails)" : "");
		if (r == 0)
			r = gather_run_round(x, EXCHANGE_PROBE, 0, err);
		if (r != 0) {
			agree_decision_free(&d);
			if (r < 0)
				return -1;
			continue; /* a pod was replaced: its report, then decide again */
		}
		/* Every ring link of every rail must have passed; otherwise drop
		 * the networks that failed and decide again. */
		char why[700] = "";
		size_t off = 0, n_failed = 0;
		bool failed_rail[EXCHANGE_RAILS_MAX] = { false };
		for (size_t k = 0; k < nr; k++) {
			for (size_t i = 0; i < g->n; i++) {
				const struct member *m = &g->m[i];
				if (!m->selected || (m->probe.n > k && m->probe.ok[k]))
					continue;
				failed_rail[k] = true;
				const char *detail = gather_probe_detail(m, k);
				if (off < sizeof(why))
					off += (size_t)snprintf(why + off, sizeof(why) - off, "%s%s: %s",
								off ? "; " : "", m->name,
								detail[0] ? detail : "probe failed");
			}
			n_failed += failed_rail[k];
		}
		if (!n_failed) {
			gather_fill_result(x, &d, res);
			return gather_set_round(x, EXCHANGE_FINAL, NULL, false, err);
		}
		snprintf(g->probe_status, sizeof(g->probe_status), "round %d: %s failed the probe (%.180s)",
			 g->epoch, nets, why);
		/* Failed only because a pod's route leaves through another of its
		 * interfaces on the same network: try that one, once per network,
		 * before the network is given up (one network; rails drop a rail). */
		bool route_only = nr == 1 && !d.routed && n_route_tried < AGREE_EXCLUDED_MAX;
		for (size_t i = 0; i < n_route_tried && route_only; i++)
			route_only = !np_prefix_equal(&route_tried[i], &d.rails[0].net.pfx);
		for (size_t i = 0; i < g->n && route_only; i++) {
			const struct member *m = &g->m[i];
			if (m->selected && !(m->probe.n > 0 && m->probe.ok[0]))
				route_only = gather_probe_route_if(m, 0)[0] != '\0';
		}
		if (route_only) {
			route_tried[n_route_tried++] = d.rails[0].net.pfx;
			for (size_t i = 0; i < g->n; i++) {
				struct member *m = &g->m[i];
				if (!m->selected || (m->probe.n > 0 && m->probe.ok[0]))
					continue;
				const char *rif = gather_probe_route_if(m, 0);
				if (gather_member_pin(m, rif, &d.rails[0].net.pfx) < 0) {
					agree_decision_free(&d);
					return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
				}
				ex_log(x, EXCHANGE_WARN, "round %d: %s routes %s through %s: trying that interface",
				       g->epoch, m->name, d.rails[0].net.text, rif);
			}
			agree_decision_free(&d);
			continue;
		}
		note_failure(g, nets, "probe", why);
		if (x->o->strict) {
			np_error_set(err, NP_ENOCOMMON, 0, "--strict: the preferred network %s failed its probe: %s",
				     nets, why);
			agree_decision_free(&d);
			return publish_failure(x, err);
		}
		for (size_t k = 0; k < nr; k++) {
			if (!failed_rail[k])
				continue;
			/* A routed rail is no network that exclusion can name:
			 * without this, the same routed decision came back every
			 * round until the deadline. */
			if (d.routed)
				opt.no_routed = true;
			else if (opt.n_excluded < AGREE_EXCLUDED_MAX)
				opt.excluded[opt.n_excluded++] = d.rails[k].net;
		}
		ex_log(x, EXCHANGE_WARN, "round %d: network %s failed the probe (%s); deciding again without it",
		       g->epoch, nr > 1 ? "of the rails" : d.rails[0].net.text, why);
		agree_decision_free(&d);
	}
}

int ex_gather(struct ex *x, struct exchange_result *res, np_error *err)
{
	struct gather *g = calloc(1, sizeof(*g));
	if (!g)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	x->g = g;
	x->list_page = K8S_LIST_PAGE;
	/* The pods' metadata only: a member is read from its names, uid,
	 * labels, annotations and deletionTimestamp, and whether it has
	 * finished, which the watch's field selector tells (EX_UNFINISHED).
	 * A real pod's spec and status are about half of its bytes, and the
	 * gatherer reads every pod about four times. */
	x->watch_meta = true;
	if (count_pods(x, err) < 0)
		return -1;
	gather_resume(x);
	ex_log(x, EXCHANGE_INFO, "gathering reports of %d pods (%s)", g->expect, x->sel);
	if (rounds(x, res, err) == 0)
		return 0;
	/* Too many pods, or two gatherers: a misconfiguration every pod must
	 * hear of at once.  A gatherer being deleted tells no one: the pod
	 * that replaces it gathers. */
	if (x->failed && !x->terminating && !x->superseded &&
	    (x->has_rival || gather_check_count(g, &(np_error){ 0 }) < 0))
		return publish_failure(x, err);
	return -1;
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
		acc->connects += st.connects;
		acc->throttled_ms += st.throttled_ms;
	}
}

void ex_gather_free(struct ex *x)
{
	struct gather *g = x->g;
	if (!g)
		return;
	gather_free_members(g);
	for (size_t c = 0; c < PUBLISH_CONNS_MAX; c++)
		k8s_client_free(g->pool[c]);
	k8s_limiter_free(g->assign_lim);
	free(g->probe_unsent);
	free(g);
	x->g = NULL;
}
