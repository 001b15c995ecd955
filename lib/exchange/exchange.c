/* The exchange: shared plumbing, the follower, and the entry point.  The
 * gatherer's side is in gather.c. */
#include "exchange/exchange.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "exchange/exchange_priv.h"
#include "jobs/jobs.h"
#include "probe/probe.h"
#include "util/clock.h"
#include "util/testhook.h"

void ex_log(struct ex *x, enum exchange_log_level lvl, const char *fmt, ...)
{
	if (!x->o->log)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	x->o->log(x->o->log_ud, lvl, msg);
}

const char *ex_annotation(const json_t *pod, const char *key)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), key));
}

const char *ex_meta(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

const char *ex_label(const json_t *pod, const char *key)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"), key));
}

int ex_patch_annotations(struct ex *x, const char *pod, json_t *annotations, np_error *err)
{
	json_t *patch = json_pack("{s:{s:o}}", "metadata", "annotations", annotations);
	int r = k8s_patch_pod(x->k, x->ns, pod, patch, NULL, err);
	json_decref(patch);
	if (r < 0)
		return np_error_wrap(err, "cannot annotate pod %s", pod);
	return 0;
}

int ex_annotate_self(struct ex *x, const char *key, const char *json, np_error *err)
{
	json_t *a = json_object();
	if (!a || json_object_set_new(a, key, json_string(json)) < 0) {
		json_decref(a);
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	}
	return ex_patch_annotations(x, x->name, a, err);
}

/* The API client's timers may fire a little before the clock reaches the
 * deadline: what ends that close to it ended because of it. */
#define EX_DEADLINE_SLACK_MS 250

bool ex_past_deadline(const struct ex *x)
{
	return np_now_ms() + EX_DEADLINE_SLACK_MS >= x->o->deadline_ms;
}

struct tick_ctx {
	struct ex *x;
	void (*tick)(struct ex *);
};

static void on_tick(void *ud)
{
	struct tick_ctx *t = ud;
	t->tick(t->x);
}

/* One watch until the callback asks to act, an error, or the deadline; the
 * client's progress ticks say every log_interval_ms what it waits for, so
 * the connection stays open however long the wait (a follower's traffic
 * must not grow with the time the job takes to gather). */
int ex_watch(struct ex *x, const char *label_sel, const char *field_sel, k8s_watch_cb cb,
	     void (*tick)(struct ex *), np_error *err)
{
	if (x->failed)
		return -1;
	if (np_now_ms() >= x->o->deadline_ms)
		return np_error_set(err, NP_EK8S, 0, "deadline reached");
	struct tick_ctx t = { .x = x, .tick = tick };
	k8s_client_set_deadline(x->w, x->o->deadline_ms);
	k8s_client_set_tick(x->w, x->o->log_interval_ms, tick ? on_tick : NULL, &t);
	x->stop = false;
	struct k8s_watch_opts wo = { .page_limit = x->list_page };
	int r = k8s_watch_pods_opt(x->w, x->ns, label_sel, field_sel, x->rv[0] ? x->rv : NULL, &wo, cb, x,
				   err);
	k8s_client_set_tick(x->w, 0, NULL, NULL);
	if (x->failed) {
		*err = x->err;
		return -1;
	}
	if (x->stop)
		return 0;
	return r < 0 ? -1 : np_error_set(err, NP_EK8S, 0, "the watch ended early");
}

/* Keep the newest resourceVersion seen, so that a resumed watch loses nothing. */
void ex_note_rv(struct ex *x, enum k8s_watch_type type, json_t *obj)
{
	const char *rv = ex_meta(obj, "resourceVersion");
	if (rv && strlen(rv) < sizeof(x->rv))
		snprintf(x->rv, sizeof(x->rv), "%s", rv);
	(void)type;
}

/* --- the probe round, the same on every pod ----------------------------- */

void ex_probe_servers_stop(struct ex *x)
{
	for (size_t i = 0; i < x->n_servers; i++)
		probe_server_stop(x->servers[i]);
	x->n_servers = 0;
}

/* Listen on each address this pod has in the round, then probe the ring
 * neighbour on each and check the route. */
static int probe_parts(struct ex *x, const struct exchange_part *parts, size_t n, long bytes,
		       struct exchange_probe *out, np_error *err)
{
	/* This pod holds its part of a decision and is about to probe. */
	np_test_point("after-decision");
	ex_probe_servers_stop(x);
	bool listening[EX_SERVERS_MAX] = { false };
	for (size_t i = 0; i < n && i < EX_SERVERS_MAX; i++) {
		struct probe_server *s;
		struct exchange_trial *t = &out->t[i];
		np_error lerr = { 0 };
		if (probe_server_start(parts[i].addr, x->o->probe_port, &s, &lerr) < 0) {
			t->ok = false;
			exchange_text_copy(t->detail, sizeof(t->detail), lerr.msg);
			continue;
		}
		listening[i] = true;
		x->servers[x->n_servers++] = s;
	}
	for (size_t i = 0; i < n && i < EX_SERVERS_MAX; i++) {
		const struct exchange_part *p = &parts[i];
		struct exchange_trial *t = &out->t[i];
		out->n = i + 1;
		if (!listening[i])
			continue; /* could not even listen */
		char why[512] = "";
		t->ok = true;
		if (p->next_addr[0]) {
			char dev[IFNAMSIZ] = "";
			np_error rerr = { 0 };
			if (probe_route_dev(p->next_addr, dev, sizeof(dev), &rerr) < 0) {
				t->ok = false;
				snprintf(why, sizeof(why), "%s", rerr.msg);
			} else if (strcmp(dev, p->ifname) != 0) {
				t->ok = false;
				snprintf(why, sizeof(why), "the route to %s leaves through %s, not %s",
					 p->next_addr, dev, p->ifname);
			}
			if (t->ok) {
				struct probe_result pr;
				/* Leave the gatherer time to react within the deadline. */
				int64_t pd = np_now_ms() + EX_PROBE_WINDOW_MS;
				if (pd > x->o->deadline_ms)
					pd = x->o->deadline_ms;
				if (probe_peer(p->addr, p->next_addr, x->o->probe_port, pd, bytes, &pr, err) < 0)
					return -1;
				t->ok = pr.connected && pr.source_ok;
				t->mbps = pr.mbps;
				snprintf(why, sizeof(why), "%s", pr.detail);
			}
		}
		exchange_text_copy(t->detail, sizeof(t->detail), why);
		ex_log(x, t->ok ? EXCHANGE_INFO : EXCHANGE_WARN, "probe %s -> %s on %s: %s%s%s", p->addr,
		       p->next_addr[0] ? p->next_addr : "(alone)", p->ifname, t->ok ? "ok" : "FAILED",
		       why[0] ? ": " : "", why);
	}
	return 0;
}

int ex_probe_round(struct ex *x, const char *leader_uid, int epoch, const struct exchange_part *parts,
		   size_t n, long bytes, struct exchange_probe *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->leader, sizeof(out->leader), "%s", leader_uid);
	out->epoch = epoch;
	char *s = NULL;
	if (probe_parts(x, parts, n, bytes, out, err) < 0 || exchange_probe_to_json(out, &s, err) < 0)
		return -1;
	int r = ex_annotate_self(x, EXCHANGE_ANN_PROBE, s, err);
	free(s);
	if (r == 0)
		np_test_point("after-probe");
	return r;
}

/* --- entry --------------------------------------------------------------- */

/* Walk the key=value terms of a selector against a pod's labels: each key
 * must be a label, and with `values` carry the term's value. */
static bool labels_match(const json_t *pod, const char *selector, bool values)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", selector);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq && values)
			return false;
		if (eq)
			*eq = '\0';
		const char *v = ex_label(pod, t);
		if (!v || (values && strcmp(v, eq + 1) != 0))
			return false;
	}
	return true;
}

bool ex_pod_matches(const json_t *pod, const char *selector)
{
	return labels_match(pod, selector, true);
}

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

/* Every key the selector names is a label of this pod (values may differ). */
static bool labels_present(const json_t *pod, const char *selector)
{
	return labels_match(pod, selector, false);
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
	if (!labels_present(x->pod, x->leader_sel)) {
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
			    bool ok, const char *message, np_error *err)
{
	struct k8s_client *k;
	if (!res->pod || k8s_client_new(&k, o->k8s, err) < 0)
		return -1;
	k8s_client_set_deadline(k, o->deadline_ms);
	const char *name = ex_meta(res->pod, "name");
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", EXCHANGE_ANN_RESULT, message);
	int r = k8s_patch_pod(k, o->k8s->namespace, name, patch, NULL, err);
	json_decref(patch);
	if (r == 0)
		r = k8s_create_event(k, o->k8s->namespace, res->pod,
				     ok ? "NetworkSelected" : "NetworkSelectionFailed", message,
				     ok ? "Normal" : "Warning", err);
	k8s_client_free(k);
	return r;
}
