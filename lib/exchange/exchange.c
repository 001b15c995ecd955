/* The exchange's entry point: this pod's report, then the gatherer's side
 * (gather.c) or the follower's (follow.c), over the plumbing in plumbing.c. */
#include "exchange/exchange.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange_priv.h"
#include "jobs/jobs.h"
#include "probe/probe.h"
#include "util/cancel.h"
#include "util/testhook.h"
#include "util/jsonread.h"
#include "util/text.h"

/* Give each candidate the gateway its interface reaches, a default route's
 * first: pods in different subnets can only agree on a routed fabric, and
 * only through candidates that have one. */
static int add_gateways(struct agree_report *r, const struct nic_list *nics, np_error *err)
{
	struct probe_gateway *gw = NULL;
	size_t n = 0;
	if (probe_route_gateways(&gw, &n, err) < 0)
		return -1;
	for (size_t i = 0; i < r->n; i++) {
		struct agree_cand *c = &r->c[i];
		const struct nic *nc = nic_list_find_name(nics, c->ifname);
		const struct probe_gateway *best = NULL;
		for (size_t k = 0; nc && k < n; k++)
			if (gw[k].ifindex == nc->ifindex && gw[k].family == c->family &&
			    (!best || gw[k].dst.len < best->dst.len))
				best = &gw[k];
		if (!best)
			continue;
		c->has_gw = true;
		memcpy(c->gw, best->addr, sizeof(c->gw));
		inet_ntop(c->family, c->gw, c->gw_text, sizeof(c->gw_text));
	}
	free(gw);
	return 0;
}

/* Where this pod has several candidates on one subnet (two ports, or two
 * macvlans, on one network), say which one the kernel routes the subnet
 * through: the agreement must assign that one, since the traffic leaves
 * through it whatever NCCL is told. */
static void add_subnet_routes(struct agree_report *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct agree_cand *c = &r->c[i];
		struct np_prefix pfx = { .family = c->family, .len = c->prefixlen };
		memcpy(pfx.bytes, c->addr, 16);
		np_prefix_mask(pfx.family, pfx.bytes, pfx.len);
		bool shared = false;
		for (size_t k = 0; k < r->n && !shared; k++)
			shared = k != i && r->c[k].family == c->family && r->c[k].prefixlen == c->prefixlen &&
				 np_prefix_contains(&pfx, c->family, r->c[k].addr);
		char dev[IFNAMSIZ];
		np_error e = { 0 };
		if (shared && probe_route_subnet_dev(&pfx, dev, sizeof(dev), &e) == 0)
			c->route = strcmp(dev, c->ifname) == 0 ? AGREE_ROUTE_USED : AGREE_ROUTE_UNUSED;
	}
}

/* How this pod's training container gets the variables. */
static int train_of(struct ex *x, const struct exchange_opts *o, struct exchange_result *res,
		    np_error *err)
{
	struct jobs_pod p;
	int ret = jobs_pod_parse(x->pod, &p, err);
	if (ret == 0)
		ret = jobs_train_find(&p, o->out_dir, o->train_names, o->n_train_names, &res->train, err);
	jobs_pod_free(&p);
	return ret;
}

int exchange_run(const struct exchange_opts *o, const struct nic_list *nics,
		 const struct policy_ranking *ranking, struct exchange_result *res, np_error *err)
{
	memset(res, 0, sizeof(*res));
	struct ex *x = calloc(1, sizeof(*x));
	if (!x)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	x->o = o;
	int ret = -1;
	char *sel = NULL, *lsel = NULL, *report = NULL, *claim_json = NULL;

	if (!o->k8s->pod_name) {
		np_error_set(err, NP_EUSAGE, 0,
			     "this pod's name is unknown: set POD_NAME from the downward API or pass --pod-name");
		goto out;
	}
	x->name = o->k8s->pod_name;
	x->ns = o->k8s->namespace;
	/* One rate limit for the process's requests, client-go's default. */
	if (k8s_limiter_new(&x->lim, EXCHANGE_QPS, EXCHANGE_BURST, err) < 0 ||
	    k8s_client_new(&x->k, o->k8s, err) < 0)
		goto out;
	k8s_client_set_limiter(x->k, x->lim);
	k8s_client_set_cancel(x->k, o->cancel);
	k8s_client_set_deadline(x->k, o->deadline_ms);
	/* The watch's client: x->k's twin, so that the process's requests and
	 * its watch share one connection (HTTP/2 streams), as client-go's do. */
	if (k8s_client_new_twin(&x->w, x->k, err) < 0)
		goto out;
	k8s_client_set_cancel(x->w, o->cancel);
	if (k8s_get_pod(x->k, x->ns, x->name, &x->pod, err) < 0) {
		np_error_wrap(err, "cannot read this pod");
		goto out;
	}
	snprintf(x->uid, sizeof(x->uid), "%s", ex_meta(x->pod, "uid") ? ex_meta(x->pod, "uid") : "");
	if ((!o->selector || !o->leader_selector) && exchange_selectors(x->pod, &sel, &lsel, err) < 0)
		goto out;
	x->sel = o->selector ? o->selector : sel;
	x->leader_sel = o->leader_selector ? o->leader_selector : lsel;
	if (!ex_pod_has_labels(x->pod, x->leader_sel)) {
		np_error_set(err, NP_EUSAGE, 0,
			     "this pod has no label to tell which pod gathers (%s): run the job with "
			     "completionMode: Indexed, or pass --leader-selector",
			     x->leader_sel);
		goto out;
	}
	x->leader = ex_pod_matches(x->pod, x->leader_sel);
	if (x->leader) /* its own writes of a round: progress, round state, probe */
		k8s_limiter_add_burst(x->lim, EXCHANGE_GATHERER_EXTRA_BURST);
	x->by_rule = !o->leader_selector;
	if (o->leader_selector)
		snprintf(x->why, sizeof(x->why), "it matches --leader-selector %s", o->leader_selector);
	else
		exchange_gatherer_why(x->pod, x->why, sizeof(x->why));
	/* --expect against the owning job's spec: read once for the job, by
	 * the gatherer, not by each of its N pods (1 or 2 GETs of a large
	 * object each).  A gatherer that refuses the count fails its round on
	 * its own pod (exchange_publish_result), and every follower exits with
	 * its reason and status as soon as its watch shows it.  With
	 * --selector the user defines the job; its owner's spec may not. */
	if (x->leader) {
		char spec_note[700];
		int checked = jobs_check_pod_expect(x->k, x->ns, x->pod, o->selector ? 0 : o->expect,
						    spec_note, sizeof(spec_note), err);
		if (checked < 0)
			goto out;
		if (spec_note[0]) /* a check skipped is a warning, never silent */
			ex_log(x, checked > 0 ? EXCHANGE_WARN : EXCHANGE_INFO, "%s", spec_note);
	}

	const char *node = np_json_cstr(json_object_get(json_object_get(x->pod, "spec"), "nodeName"));
	if (agree_report_from_nics(x->name, x->uid, node ? node : "", nics, ranking, &x->mine, err) < 0)
		goto out;
	if (o->local_routes && add_gateways(&x->mine, nics, err) < 0)
		goto out;
	if (o->local_routes)
		add_subnet_routes(&x->mine);
	if (train_of(x, o, res, err) < 0)
		goto out;
	const struct agree_gpu *gpu = o->gpu_wait ? o->gpu_wait(o->gpu_ud) : NULL;
	if (gpu) {
		x->mine.gpu = *gpu;
		if (res->train.delivery == JOBS_DELIVERY_FILE) {
			snprintf(x->mine.gpu.delivery, sizeof(x->mine.gpu.delivery), "file");
			np_text_clean(x->mine.gpu.nccl_env, sizeof(x->mine.gpu.nccl_env), res->train.env_path,
				      NP_TEXT_ASCII);
		}
	}
	if (agree_report_to_json(&x->mine, &report, err) < 0)
		goto out;
	if (x->mine.n == 0) {
		np_error_set(err, NP_ENOIFACE, 0, "this pod has no usable interface to report");
		goto out;
	}
	/* A restarted gatherer resumes from the round it published (ex_gather
	 * reads it from x->pod): a final round stands, any other is void and
	 * goes, so that no follower takes an old failure for a new one; its
	 * progress goes in any case.  Its claim goes with its report, so that
	 * no pod reads the one without the other; a follower drops a claim an
	 * earlier run of its container may have left. */
	struct exchange_claim claim = { 0 };
	snprintf(claim.leader, sizeof(claim.leader), "%s", x->uid);
	snprintf(claim.pod, sizeof(claim.pod), "%s", x->name);
	snprintf(claim.why, sizeof(claim.why), "%s", x->why);
	if (x->leader && exchange_claim_to_json(&claim, &claim_json, err) < 0)
		goto out;
	json_t *ann = !x->leader ? json_pack("{s:s, s:n}", EXCHANGE_ANN_REPORT, report, EXCHANGE_ANN_GATHERER)
		      : ex_round_final(x) ? json_pack("{s:s, s:n, s:s}", EXCHANGE_ANN_REPORT, report,
						      EXCHANGE_ANN_PROGRESS, EXCHANGE_ANN_GATHERER, claim_json)
					  : json_pack("{s:s, s:n, s:n, s:s}", EXCHANGE_ANN_REPORT, report,
						      EXCHANGE_ANN_ROUND, EXCHANGE_ANN_PROGRESS,
						      EXCHANGE_ANN_GATHERER, claim_json);
	np_test_point("before-report");
	if (ex_patch_annotations(x, x->name, ann, err) < 0)
		goto out;
	np_test_point("after-report");
	ex_log(x, EXCHANGE_INFO, "published %zu candidate(s); %s", x->mine.n,
	       x->leader ? "this pod gathers the job's reports" : "waiting for the gatherer");

	res->leader = x->leader;
	ret = x->leader ? ex_gather(x, res, err) : ex_follow(x, res, err);
	if (ret == 0)
		snprintf(res->probe_detail, sizeof(res->probe_detail), "ring probe passed");
out:
	ex_probe_servers_stop(x);
	if (x->pod)
		res->pod = json_incref(x->pod);
	if (x->k) {
		struct k8s_stats a, b = { 0 };
		k8s_client_stats(x->k, &a);
		if (x->w)
			k8s_client_stats(x->w, &b);
		res->stats.requests = a.requests + b.requests;
		res->stats.retries = a.retries + b.retries;
		res->stats.bytes_sent = a.bytes_sent + b.bytes_sent;
		res->stats.bytes_received = a.bytes_received + b.bytes_received;
		res->stats.connects = a.connects + b.connects;
		res->stats.watches = a.watches + b.watches;
		res->stats.throttled_ms = a.throttled_ms + b.throttled_ms;
		ex_gather_stats(x, &res->stats);
	}
	/* The result annotation and Event go over the same connection. */
	k8s_client_free(x->w);
	ex_gather_free(x); /* its connections share x->k's limiter and sessions */
	res->client = x->k;
	res->limiter = x->lim;
	json_decref(x->pod);
	free(x);
	free(sel);
	free(lsel);
	free(report);
	free(claim_json);
	return ret;
}

void exchange_result_free(struct exchange_result *res)
{
	agree_decision_free(&res->decision);
	json_decref(res->pod);
	res->pod = NULL;
	k8s_client_free(res->client);
	res->client = NULL;
	k8s_limiter_free(res->limiter);
	res->limiter = NULL;
}

/* A failed gatherer's round: its followers end with its reason.  Added to
 * ann unless the round on the pod already ended (final, or failed with a
 * job-wide reason the gatherer decided). */
static void add_failed_round(const struct exchange_opts *o, const struct exchange_result *res,
			     const json_t *pod, int status, const char *message, json_t *ann)
{
	char *sel = NULL, *lsel = NULL;
	np_error e = { 0 };
	const char *leader_sel = o->leader_selector;
	if (!leader_sel && exchange_selectors(pod, &sel, &lsel, &e) == 0)
		leader_sel = lsel;
	const char *name = ex_meta(pod, "name"), *uid = ex_meta(pod, "uid");
	if (!leader_sel || !name || !uid || !ex_pod_matches(pod, leader_sel))
		goto out;
	struct exchange_round cur;
	const char *rd = ex_annotation(pod, EXCHANGE_ANN_ROUND);
	bool mine = rd && exchange_round_parse(rd, strlen(rd), &cur, &e) == 0 &&
		    strcmp(cur.leader, uid) == 0;
	/* A round that ended stands: its followers are past it (a failure
	 * after it, such as the smoke test's, is every pod's own), and one
	 * that failed keeps its job-wide reason. */
	if (mine && (cur.state == EXCHANGE_FAILED || cur.state == EXCHANGE_FINAL))
		goto out;
	/* Newer than any part handed out: a round's parts are written before
	 * the round itself, so they may be one epoch ahead of it. */
	/* A follower takes the round's status as its own: one of nicpick's
	 * (a gatherer stopped by a signal, 128 + N, fails its followers with 1). */
	struct exchange_round r = { .state = EXCHANGE_FAILED,
				    .status = status > 0 && status <= NP_ESMOKE ? status : NP_EINTERNAL };
	r.epoch = (mine && cur.epoch > res->epoch ? cur.epoch : res->epoch) + 1;
	snprintf(r.leader, sizeof(r.leader), "%s", uid);
	snprintf(r.reason, sizeof(r.reason), "the gatherer %s failed: %s (exit %d)", name, message,
		 status);
	char *json = NULL;
	if (exchange_round_to_json(&r, &json, &e) == 0)
		json_object_set_new(ann, EXCHANGE_ANN_ROUND, json_string(json));
	free(json);
out:
	free(sel);
	free(lsel);
}

int exchange_publish_result(const struct exchange_opts *o, const struct exchange_result *res,
			    int status, const char *message, const char *outcome, np_error *err)
{
	const char *name = res->pod ? ex_meta(res->pod, "name") : o->k8s->pod_name;
	if (!name)
		return np_error_set(err, NP_EUSAGE, 0, "this pod's name is unknown");
	/* The exchange's connection where there is one (one TLS handshake a
	 * process), else a client of its own; also after a stop, since the
	 * exchange's client gives up its requests once the run is stopped. */
	struct k8s_client *k = np_cancelled(o->cancel) ? NULL : res->client, *own = NULL;
	if (!k) {
		if (k8s_client_new(&own, o->k8s, err) < 0)
			return -1;
		k = own;
	}
	k8s_client_set_deadline(k, o->deadline_ms);
	/* A success names the pod the exchange read; a failure reads it again
	 * (it may have failed before the exchange read it, and a gatherer's
	 * failed round depends on the round the pod carries now). */
	json_t *pod = NULL;
	int r = status == NP_OK && res->pod ? 0 : k8s_get_pod(k, o->k8s->namespace, name, &pod, err);
	const json_t *subject = pod ? pod : res->pod;
	json_t *ann = r == 0 ? json_pack("{s:s}", EXCHANGE_ANN_RESULT, message) : NULL;
	if (r == 0 && !ann)
		r = np_error_set(err, NP_EINTERNAL, ENOMEM, "result annotation");
	if (r == 0 && outcome)
		json_object_set_new(ann, EXCHANGE_ANN_OUTCOME, json_string(outcome));
	if (r == 0 && status != NP_OK)
		add_failed_round(o, res, pod, status, message, ann);
	if (r == 0) {
		json_t *patch = json_pack("{s:{s:o}}", "metadata", "annotations", ann);
		r = patch ? k8s_patch_pod(k, o->k8s->namespace, name, patch, NULL, err)
			  : np_error_set(err, NP_EINTERNAL, ENOMEM, "result annotation");
		json_decref(patch);
	}
	/* A job that left a network that failed its probe says so as a
	 * Warning, so that it shows among the pod's warnings. */
	if (r == 0)
		r = k8s_create_event(k, o->k8s->namespace, subject,
				     status == NP_OK ? "NetworkSelected" : "NetworkSelectionFailed", message,
				     status == NP_OK && !res->probe_warning[0] ? "Normal" : "Warning", err);
	json_decref(pod);
	k8s_client_free(own);
	return r;
}
