/* The exchange's entry point: this pod's report, then the gatherer's side
 * (gather.c) or the follower's (follow.c), over the plumbing in plumbing.c. */
#include "exchange/exchange.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange_priv.h"
#include "jobs/jobs.h"
#include "probe/probe.h"
#include "util/testhook.h"

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

int exchange_run(const struct exchange_opts *o, const struct nic_list *nics,
		 const struct policy_ranking *ranking, struct exchange_result *res, np_error *err)
{
	memset(res, 0, sizeof(*res));
	struct ex *x = calloc(1, sizeof(*x));
	if (!x)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	x->o = o;
	int ret = -1;
	char *sel = NULL, *lsel = NULL, *report = NULL;

	if (!o->k8s->pod_name) {
		np_error_set(err, NP_EUSAGE, 0,
			     "this pod's name is unknown: set POD_NAME from the downward API or pass --pod-name");
		goto out;
	}
	x->name = o->k8s->pod_name;
	x->ns = o->k8s->namespace;
	if (k8s_client_new(&x->k, o->k8s, err) < 0 || k8s_client_new(&x->w, o->k8s, err) < 0)
		goto out;
	k8s_client_set_deadline(x->k, o->deadline_ms);
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
	/* With --selector the user defines the job; its owner's spec may not. */
	char spec_note[700];
	if (jobs_check_pod_expect(x->k, x->ns, x->pod, o->selector ? 0 : o->expect, spec_note,
				  sizeof(spec_note), err) < 0)
		goto out;
	if (spec_note[0])
		ex_log(x, EXCHANGE_INFO, "%s", spec_note);

	const char *node = json_string_value(json_object_get(json_object_get(x->pod, "spec"), "nodeName"));
	if (agree_report_from_nics(x->name, x->uid, node ? node : "", nics, ranking, &x->mine, err) < 0)
		goto out;
	if (o->local_routes && add_gateways(&x->mine, nics, err) < 0)
		goto out;
	if (o->local_routes)
		add_subnet_routes(&x->mine);
	if (o->gpu)
		x->mine.gpu = *o->gpu;
	if (agree_report_to_json(&x->mine, &report, err) < 0)
		goto out;
	if (x->mine.n == 0) {
		np_error_set(err, NP_ENOIFACE, 0, "this pod has no usable interface to report");
		goto out;
	}
	/* A restarted gatherer resumes from the round it published (ex_gather
	 * reads it from x->pod): a final round stands, any other is void and
	 * goes, so that no follower takes an old failure for a new one; its
	 * progress goes in any case. */
	json_t *ann = !x->leader ? json_pack("{s:s}", EXCHANGE_ANN_REPORT, report)
		      : ex_round_final(x) ? json_pack("{s:s, s:n}", EXCHANGE_ANN_REPORT, report,
						      EXCHANGE_ANN_PROGRESS)
					  : json_pack("{s:s, s:n, s:n}", EXCHANGE_ANN_REPORT, report,
						      EXCHANGE_ANN_ROUND, EXCHANGE_ANN_PROGRESS);
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
		ex_gather_stats(x, &res->stats);
	}
	/* The result annotation and Event need a client after this returns. */
	k8s_client_free(x->w);
	k8s_client_free(x->k);
	json_decref(x->pod);
	ex_gather_free(x);
	free(x);
	free(sel);
	free(lsel);
	free(report);
	return ret;
}

void exchange_result_free(struct exchange_result *res)
{
	agree_decision_free(&res->decision);
	json_decref(res->pod);
	res->pod = NULL;
}

int exchange_publish_result(const struct exchange_opts *o, const struct exchange_result *res,
			    bool ok, const char *message, const char *outcome, np_error *err)
{
	struct k8s_client *k;
	if (!res->pod || k8s_client_new(&k, o->k8s, err) < 0)
		return -1;
	k8s_client_set_deadline(k, o->deadline_ms);
	const char *name = ex_meta(res->pod, "name");
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", EXCHANGE_ANN_RESULT, message);
	if (patch && outcome)
		json_object_set_new(json_object_get(json_object_get(patch, "metadata"), "annotations"),
				    EXCHANGE_ANN_OUTCOME, json_string(outcome));
	int r = patch ? k8s_patch_pod(k, o->k8s->namespace, name, patch, NULL, err)
		      : np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	json_decref(patch);
	/* A job that left a network that failed its probe says so as a
	 * Warning, so that it shows among the pod's warnings. */
	if (r == 0)
		r = k8s_create_event(k, o->k8s->namespace, res->pod,
				     ok ? "NetworkSelected" : "NetworkSelectionFailed", message,
				     ok && !res->probe_warning[0] ? "Normal" : "Warning", err);
	k8s_client_free(k);
	return r;
}
