/* The exchange: shared plumbing, the follower, and the entry point.  The
 * gatherer's side is in gather.c. */
#include "agree/exchange.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agree/exchange_priv.h"
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

/* The assignment names an interface and address this pod reported. */
static int check_own(struct ex *x, const char *ifname, const char *addr, np_error *err)
{
	unsigned char want[16], have[16];
	int fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(fam, addr, want) != 1)
		return np_error_set(err, NP_EK8S, 0, "bad assignment: address '%s'", addr);
	for (size_t i = 0; i < x->mine.n; i++) {
		const struct agree_cand *c = &x->mine.c[i];
		if (c->family != fam || strcmp(c->ifname, ifname) != 0)
			continue;
		if (inet_pton(fam, c->addr_text, have) == 1 && memcmp(want, have, fam == AF_INET ? 4 : 16) == 0)
			return 0;
	}
	return np_error_set(err, NP_EK8S, 0,
			    "the gatherer assigned %s %s to this pod, which this pod did not report "
			    "(its interfaces changed, or the gatherer is wrong)",
			    ifname, addr);
}

/* --- follower ------------------------------------------------------------ */

static int follower_cb(enum k8s_watch_type type, json_t *obj, void *ud)
{
	struct ex *x = ud;
	ex_note_rv(x, type, obj);
	if (type == K8S_WATCH_RELIST) {
		json_t *items = json_object_get(obj, "items");
		obj = json_array_size(items) ? json_array_get(items, 0) : NULL;
	}
	if (!obj || type == K8S_WATCH_BOOKMARK)
		return 0;
	if (type == K8S_WATCH_DELETED) {
		np_error_set(&x->err, NP_EK8S, 0, "this pod was deleted while it waited");
		x->failed = true;
		return 1;
	}
	const char *uid = ex_meta(obj, "uid");
	if (uid && strcmp(uid, x->uid) != 0)
		return 0; /* an earlier incarnation of this pod's name */
	const char *a = ex_annotation(obj, EXCHANGE_ANN_ASSIGN);
	if (!a)
		return 0;
	json_error_t jerr;
	json_t *as = json_loads(a, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(as)) {
		json_decref(as);
		return 0; /* ignore a value this nicpick did not write */
	}
	int epoch = (int)json_integer_value(json_object_get(as, "epoch"));
	const char *leader = json_string_value(json_object_get(as, "leader"));
	if (!leader || epoch <= 0) {
		json_decref(as);
		return 0;
	}
	if (x->assign && strcmp(leader, x->leader_uid) == 0 && epoch == x->epoch &&
	    json_equal(as, x->assign)) {
		json_decref(as);
		return 0; /* nothing new */
	}
	json_decref(x->assign);
	x->assign = as;
	snprintf(x->leader_uid, sizeof(x->leader_uid), "%s", leader);
	x->epoch = epoch;
	x->stop = true;
	return 1;
}

static const char *jstr(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static void fill_from_assign(struct ex *x, struct exchange_result *res)
{
	snprintf(res->network, sizeof(res->network), "%s", jstr(x->assign, "net"));
	snprintf(res->ifname, sizeof(res->ifname), "%s", jstr(x->assign, "if"));
	snprintf(res->addr, sizeof(res->addr), "%s", jstr(x->assign, "addr"));
	snprintf(res->next_pod, sizeof(res->next_pod), "%s", jstr(x->assign, "next_pod"));
	snprintf(res->next_addr, sizeof(res->next_addr), "%s", jstr(x->assign, "next_addr"));
	res->family = strchr(res->addr, ':') ? AF_INET6 : AF_INET;
	res->epoch = x->epoch;
	res->n_pods = (size_t)json_integer_value(json_object_get(x->assign, "n"));
}

static int round_cb(enum k8s_watch_type type, json_t *obj, void *ud)
{
	struct ex *x = ud;
	ex_note_rv(x, type, obj);
	if (type == K8S_WATCH_RELIST) {
		json_t *items = json_object_get(obj, "items");
		obj = json_array_size(items) ? json_array_get(items, 0) : NULL;
	}
	if (!obj || type == K8S_WATCH_BOOKMARK)
		return 0;
	const char *uid = ex_meta(obj, "uid");
	if (type == K8S_WATCH_DELETED || !uid || strcmp(uid, x->leader_uid) != 0) {
		/* The gatherer restarted: its new incarnation starts over and
		 * hands this pod a new part on its own object. */
		x->round_state = 'n';
		x->stop = true;
		return 1;
	}
	const char *a = ex_annotation(obj, EXCHANGE_ANN_ROUND);
	json_t *rd = a ? json_loads(a, 0, NULL) : NULL;
	const char *leader = json_string_value(json_object_get(rd, "leader"));
	const char *state = json_string_value(json_object_get(rd, "state"));
	int epoch = (int)json_integer_value(json_object_get(rd, "epoch"));
	char st = 0;
	if (leader && state && strcmp(leader, x->leader_uid) == 0) {
		if (epoch > x->epoch)
			st = 'n';
		else if (epoch == x->epoch && strcmp(state, "final") == 0)
			st = 'f';
		else if (epoch == x->epoch && strcmp(state, "failed") == 0)
			st = 'x';
	}
	if (st == 'x')
		np_error_set(&x->err, NP_ENOCOMMON, 0, "%s", jstr(rd, "reason"));
	json_decref(rd);
	if (!st)
		return 0;
	x->round_state = st;
	x->stop = true;
	return 1;
}

/* After its probe, a follower waits on the gatherer's pod: the round ends
 * there for the whole job in one write.  Returns 0 when the round is final
 * (res filled), 1 when a new round began, -1 on error. */
static int wait_round(struct ex *x, const char *leader_pod, struct exchange_result *res, np_error *err)
{
	char field[300];
	snprintf(field, sizeof(field), "metadata.name=%s", leader_pod);
	x->rv[0] = '\0'; /* another object: start from a fresh list */
	x->round_state = 0;
	int r = ex_watch(x, NULL, field, round_cb, ex_follower_tick, err);
	x->rv[0] = '\0';
	if (r < 0) {
		if (np_now_ms() >= x->o->deadline_ms)
			np_error_set(err, NP_EK8S, 0,
				     "deadline reached waiting for the gatherer %s to end round %d",
				     leader_pod, x->epoch);
		return -1;
	}
	if (x->round_state == 'x') {
		*err = x->err;
		return -1;
	}
	if (x->round_state != 'f')
		return 1;
	if (check_own(x, jstr(x->assign, "if"), jstr(x->assign, "addr"), err) < 0)
		return -1;
	fill_from_assign(x, res);
	return 0;
}

static int follow(struct ex *x, struct exchange_result *res, np_error *err)
{
	char field[300];
	snprintf(field, sizeof(field), "metadata.name=%s", x->name);
	int probed_epoch = 0;
	char probed_leader[AGREE_UID_MAX] = "";
	for (;;) {
		if (ex_watch(x, NULL, field, follower_cb, ex_follower_tick, err) < 0) {
			if (err->status == NP_EK8S && np_now_ms() >= x->o->deadline_ms)
				np_error_set(err, NP_EK8S, 0,
					     "deadline reached waiting for the gatherer (%s); its log says why",
					     x->leader_sel);
			return -1;
		}
		const char *state = jstr(x->assign, "state");
		if (strcmp(state, "failed") == 0)
			return np_error_set(err, NP_ENOCOMMON, 0, "%s", jstr(x->assign, "reason"));
		if (strcmp(state, "final") == 0) {
			if (check_own(x, jstr(x->assign, "if"), jstr(x->assign, "addr"), err) < 0)
				return -1;
			fill_from_assign(x, res);
			return 0;
		}
		if (strcmp(state, "probe") != 0 && strcmp(state, "measure") != 0)
			continue;
		if (probed_epoch == x->epoch && strcmp(probed_leader, x->leader_uid) == 0)
			continue;
		/* probe: one trial; measure: several, with a throughput figure. */
		const char *addrs[EX_SERVERS_MAX], *ifs[EX_SERVERS_MAX], *nexts[EX_SERVERS_MAX];
		size_t n = 0;
		json_t *trials = json_object_get(x->assign, "trials");
		if (json_is_array(trials)) {
			for (size_t i = 0; i < json_array_size(trials) && n < EX_SERVERS_MAX; i++, n++) {
				json_t *t = json_array_get(trials, i);
				addrs[n] = jstr(t, "addr");
				ifs[n] = jstr(t, "if");
				nexts[n] = jstr(t, "next_addr");
			}
		} else {
			addrs[0] = jstr(x->assign, "addr");
			ifs[0] = jstr(x->assign, "if");
			nexts[0] = jstr(x->assign, "next_addr");
			n = 1;
		}
		for (size_t i = 0; i < n; i++)
			if (check_own(x, ifs[i], addrs[i], err) < 0)
				return -1;
		long bytes = strcmp(state, "measure") == 0 ? x->o->probe_throughput_bytes : 0;
		json_t *pr = ex_probe_round(x, x->epoch, n, addrs, ifs, nexts, bytes, err);
		if (!pr)
			return -1;
		char *s = json_dumps(pr, JSON_COMPACT);
		json_decref(pr);
		int r = ex_patch_annotations(x, x->name, json_pack("{s:s}", EXCHANGE_ANN_PROBE, s), err);
		free(s);
		if (r < 0)
			return -1;
		probed_epoch = x->epoch;
		snprintf(probed_leader, sizeof(probed_leader), "%s", x->leader_uid);
		int r2 = wait_round(x, jstr(x->assign, "leader_pod"), res, err);
		if (r2 <= 0)
			return r2;
		/* A new round: back to this pod's own object for its new part. */
	}
}

void ex_follower_tick(struct ex *x)
{
	ex_log(x, EXCHANGE_INFO, "waiting for the gatherer (%s): %s", x->leader_sel,
	       x->assign ? jstr(x->assign, "state") : "no assignment yet");
}

/* --- entry --------------------------------------------------------------- */

static bool pod_matches(const json_t *pod, const char *selector)
{
	/* The leader selector is a comma list of key=value terms. */
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", selector);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq)
			return false;
		*eq = '\0';
		const char *v = ex_label(pod, t);
		if (!v || strcmp(v, eq + 1) != 0)
			return false;
	}
	return true;
}

/* Every key the selector names is a label of this pod (values may differ). */
static bool labels_present(const json_t *pod, const char *selector)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", selector);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (eq)
			*eq = '\0';
		if (!ex_label(pod, t))
			return false;
	}
	return true;
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
	x->leader = pod_matches(x->pod, x->leader_sel);

	const char *node = json_string_value(json_object_get(json_object_get(x->pod, "spec"), "nodeName"));
	if (agree_report_from_nics(x->name, x->uid, node ? node : "", nics, ranking, &x->mine, err) < 0)
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
	ret = x->leader ? ex_gather(x, res, err) : follow(x, res, err);
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
