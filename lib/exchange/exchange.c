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
#include "probe/probe.h"
#include "util/clock.h"

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
	int r = k8s_watch_pods(x->w, x->ns, label_sel, field_sel, x->rv[0] ? x->rv : NULL, cb, x, err);
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

/* The addresses this pod probes from in a round, the interfaces they sit
 * on and the ring neighbour's address on each: one trial in a probe round,
 * several ("trials") in a throughput round.  Missing values are "". */
size_t ex_assignment_trials(const json_t *assign, const char **addrs, const char **ifs,
			    const char **nexts)
{
	const json_t *trials = json_object_get(assign, "trials");
	size_t n = json_is_array(trials) ? json_array_size(trials) : 1;
	if (n > EX_SERVERS_MAX)
		n = EX_SERVERS_MAX;
	for (size_t i = 0; i < n; i++) {
		const json_t *t = json_is_array(trials) ? json_array_get(trials, i) : assign;
		const char *a = json_string_value(json_object_get(t, "addr"));
		const char *f = json_string_value(json_object_get(t, "if"));
		const char *x = json_string_value(json_object_get(t, "next_addr"));
		addrs[i] = a ? a : "";
		ifs[i] = f ? f : "";
		nexts[i] = x ? x : "";
	}
	return n;
}

/* Listen on each address this pod has in the round, then probe the ring
 * neighbour on each and check the route; the result goes into `out`
 * (a JSON object the caller publishes). */
json_t *ex_probe_round(struct ex *x, int epoch, size_t n, const char *const *addrs,
		       const char *const *ifnames, const char *const *next_addrs, long bytes,
		       np_error *err)
{
	ex_probe_servers_stop(x);
	json_t *ok = json_array(), *mbps = json_array(), *detail = json_array();
	for (size_t i = 0; i < n && i < EX_SERVERS_MAX; i++) {
		struct probe_server *s;
		if (probe_server_start(addrs[i], x->o->probe_port, &s, err) < 0) {
			json_array_append_new(ok, json_false());
			json_array_append_new(mbps, json_real(0));
			json_array_append_new(detail, json_string(err->msg));
			np_error_clear(err);
			continue;
		}
		x->servers[x->n_servers++] = s;
	}
	for (size_t i = 0; i < n && i < EX_SERVERS_MAX; i++) {
		if (json_array_size(ok) > i)
			continue; /* could not even listen */
		char why[512] = "";
		double rate = 0;
		bool good = true;
		if (next_addrs[i] && next_addrs[i][0]) {
			char dev[IFNAMSIZ] = "";
			np_error rerr = { 0 };
			if (probe_route_dev(next_addrs[i], dev, sizeof(dev), &rerr) < 0) {
				good = false;
				snprintf(why, sizeof(why), "%s", rerr.msg);
			} else if (strcmp(dev, ifnames[i]) != 0) {
				good = false;
				snprintf(why, sizeof(why), "the route to %s leaves through %s, not %s",
					 next_addrs[i], dev, ifnames[i]);
			}
			if (good) {
				struct probe_result pr;
				/* Leave the gatherer time to react within the deadline. */
				int64_t pd = np_now_ms() + EX_PROBE_WINDOW_MS;
				if (pd > x->o->deadline_ms)
					pd = x->o->deadline_ms;
				if (probe_peer(addrs[i], next_addrs[i], x->o->probe_port, pd, bytes, &pr,
					       err) < 0)
					goto fail;
				good = pr.connected && pr.source_ok;
				rate = pr.mbps;
				snprintf(why, sizeof(why), "%s", pr.detail);
			}
		}
		json_array_append_new(ok, json_boolean(good));
		json_array_append_new(mbps, json_real(rate));
		json_array_append_new(detail, json_string(why));
		ex_log(x, good ? EXCHANGE_INFO : EXCHANGE_WARN, "probe %s -> %s on %s: %s%s%s",
		       addrs[i], next_addrs[i] && next_addrs[i][0] ? next_addrs[i] : "(alone)",
		       ifnames[i], good ? "ok" : "FAILED", why[0] ? ": " : "", why);
	}
	return json_pack("{s:s, s:i, s:o, s:o, s:o}", "leader", x->leader_uid, "epoch", epoch, "ok",
			 ok, "mbps", mbps, "detail", detail);
fail:
	json_decref(ok);
	json_decref(mbps);
	json_decref(detail);
	return NULL;
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
			    (!best || gw[k].dst_len < best->dst_len))
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

	const char *node = json_string_value(json_object_get(json_object_get(x->pod, "spec"), "nodeName"));
	if (agree_report_from_nics(x->name, x->uid, node ? node : "", nics, ranking, &x->mine, err) < 0)
		goto out;
	if (o->local_routes && add_gateways(&x->mine, nics, err) < 0)
		goto out;
	if (agree_report_to_json(&x->mine, &report, err) < 0)
		goto out;
	if (x->mine.n == 0) {
		np_error_set(err, NP_ENOIFACE, 0, "this pod has no usable interface to report");
		goto out;
	}
	if (ex_patch_annotations(x, x->name, json_pack("{s:s}", EXCHANGE_ANN_REPORT, report), err) < 0)
		goto out;
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
	json_decref(x->assign);
	json_decref(x->round);
	ex_gather_free(x);
	free(x);
	free(sel);
	free(lsel);
	free(report);
	return ret;
}

void exchange_result_free(struct exchange_result *res)
{
	json_decref(res->decision);
	json_decref(res->pod);
	res->decision = res->pod = NULL;
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
