/* A follower: one watch, for the whole exchange, on two objects only: this
 * pod (where the gatherer writes its part of each round) and the gatherer's
 * pod (where a round ends, in one write for the whole job).  Its API traffic
 * is the same in a job of 8 pods or 8,000.  The probe runs inside the watch
 * callback, on the other connection, so the watch is never torn down and
 * opened again. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "exchange/exchange_priv.h"
#include "util/clock.h"

static const char *jstr(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
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

/* The label selector of this pod and the gatherer: the job's selector plus,
 * for each of the gatherer's terms, "key in (its value, ours)".  At most a
 * handful of pods match it, whatever the size of the job. */
static char *pair_selector(struct ex *x, np_error *err)
{
	char buf[1024], *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f) {
		np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		return NULL;
	}
	fputs(x->sel, f);
	snprintf(buf, sizeof(buf), "%s", x->leader_sel);
	char *save = NULL;
	bool ok = true;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq || eq[1] == '=' || strchr(t, '!') || strchr(t, ' ') || strchr(t, '(')) {
			ok = false;
			break;
		}
		*eq = '\0';
		const char *mine = ex_label(x->pod, t);
		if (mine && strcmp(mine, eq + 1) != 0)
			fprintf(f, ",%s in (%s,%s)", t, eq + 1, mine);
		else
			fprintf(f, ",%s=%s", t, eq + 1);
	}
	if (fclose(f) != 0 || !ok) {
		free(out);
		np_error_set(err, NP_EUSAGE, 0,
			     "--leader-selector '%s': only key=value terms, comma-separated, are supported",
			     x->leader_sel);
		return NULL;
	}
	return out;
}

static void fail(struct ex *x, const np_error *e)
{
	x->err = *e;
	x->failed = true;
}

/* A new part from the gatherer on this pod's own object. */
static void take_assignment(struct ex *x, json_t *pod)
{
	const char *a = ex_annotation(pod, EXCHANGE_ANN_ASSIGN);
	json_t *as = a ? json_loads(a, JSON_REJECT_DUPLICATES, NULL) : NULL;
	const char *leader = json_string_value(json_object_get(as, "leader"));
	int epoch = (int)json_integer_value(json_object_get(as, "epoch"));
	if (!json_is_object(as) || !leader || epoch <= 0 || (x->assign && json_equal(as, x->assign))) {
		json_decref(as); /* nothing new, or not written by nicpick */
		return;
	}
	json_decref(x->assign);
	x->assign = as;
	snprintf(x->leader_uid, sizeof(x->leader_uid), "%s", leader);
	x->epoch = epoch;
}

/* Listen, probe the ring neighbour on each trial address, publish it. */
static int probe_now(struct ex *x, const char *state, np_error *err)
{
	const char *addrs[EX_SERVERS_MAX], *ifs[EX_SERVERS_MAX], *nexts[EX_SERVERS_MAX];
	size_t n = ex_assignment_trials(x->assign, addrs, ifs, nexts);
	for (size_t i = 0; i < n; i++)
		if (check_own(x, ifs[i], addrs[i], err) < 0)
			return -1;
	long bytes = strcmp(state, "measure") == 0 ? x->o->probe_throughput_bytes : 0;
	json_t *pr = ex_probe_round(x, x->epoch, n, addrs, ifs, nexts, bytes, err);
	if (!pr)
		return -1;
	char *s = json_dumps(pr, JSON_COMPACT);
	json_decref(pr);
	int r = s ? ex_patch_annotations(x, x->name, json_pack("{s:s}", EXCHANGE_ANN_PROBE, s), err)
		  : np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	free(s);
	if (r == 0) {
		x->probed_epoch = x->epoch;
		snprintf(x->probed_leader, sizeof(x->probed_leader), "%s", x->leader_uid);
	}
	return r;
}

/* The gatherer's pod says the round this pod was handed is in `state`. */
static bool round_is(struct ex *x, const char *state)
{
	const char *leader = json_string_value(json_object_get(x->round, "leader"));
	int epoch = (int)json_integer_value(json_object_get(x->round, "epoch"));
	return leader && strcmp(leader, x->leader_uid) == 0 && strcmp(x->round_uid, x->leader_uid) == 0 &&
	       epoch == x->epoch && strcmp(jstr(x->round, "state"), state) == 0;
}

/* Act on what is known now; returns 1 to end the watch. */
static int step(struct ex *x)
{
	np_error e = { 0 };
	if (!x->assign)
		return 0;
	const char *state = jstr(x->assign, "state");
	if (strcmp(state, "failed") == 0) {
		np_error_set(&e, NP_ENOCOMMON, 0, "%s", jstr(x->assign, "reason"));
		fail(x, &e);
		return 1;
	}
	bool probed = x->probed_epoch == x->epoch && strcmp(x->probed_leader, x->leader_uid) == 0;
	/* A container restarted after its round ended (same pod, same part)
	 * takes the result as it stands: its neighbours have finished and
	 * stopped listening. */
	if (!probed && round_is(x, "final") && strcmp(state, "probe") == 0) {
		x->done = true;
		return 1;
	}
	if (!probed && (strcmp(state, "probe") == 0 || strcmp(state, "measure") == 0)) {
		if (probe_now(x, state, &e) < 0) {
			fail(x, &e);
			return 1;
		}
		probed = true;
	}
	/* The round ends on the gatherer's pod, for the incarnation that
	 * handed out this part. */
	if (!probed)
		return 0;
	if (round_is(x, "failed")) {
		np_error_set(&e, NP_ENOCOMMON, 0, "%s", jstr(x->round, "reason"));
		fail(x, &e);
		return 1;
	}
	if (!round_is(x, "final"))
		return 0;
	x->done = true;
	return 1;
}

static void see(struct ex *x, enum k8s_watch_type type, json_t *pod)
{
	const char *name = ex_meta(pod, "name"), *uid = ex_meta(pod, "uid");
	if (!name || !uid)
		return;
	if (strcmp(name, x->name) == 0) {
		if (strcmp(uid, x->uid) != 0)
			return; /* an earlier incarnation of this pod's name */
		if (type == K8S_WATCH_DELETED) {
			np_error e = { 0 };
			np_error_set(&e, NP_EK8S, 0, "this pod was deleted while it waited");
			fail(x, &e);
			return;
		}
		take_assignment(x, pod);
	} else if (ex_pod_matches(pod, x->leader_sel)) {
		json_decref(x->round);
		x->round = NULL;
		x->round_uid[0] = '\0';
		if (type == K8S_WATCH_DELETED)
			return;
		const char *a = ex_annotation(pod, EXCHANGE_ANN_ROUND);
		x->round = a ? json_loads(a, 0, NULL) : NULL;
		snprintf(x->round_uid, sizeof(x->round_uid), "%s", uid);
	}
}

static int follower_cb(enum k8s_watch_type type, json_t *obj, void *ud)
{
	struct ex *x = ud;
	ex_note_rv(x, type, obj);
	if (type == K8S_WATCH_BOOKMARK)
		return 0;
	if (type == K8S_WATCH_RELIST) {
		json_t *items = json_object_get(obj, "items"), *it;
		size_t i;
		json_decref(x->round); /* a re-list replaces what was known */
		x->round = NULL;
		x->round_uid[0] = '\0';
		json_array_foreach(items, i, it)
			see(x, K8S_WATCH_ADDED, it);
	} else {
		see(x, type, obj);
	}
	if (x->failed || step(x)) {
		x->stop = true;
		return 1;
	}
	return 0;
}

static void follower_tick(struct ex *x)
{
	ex_log(x, EXCHANGE_INFO, "waiting for the gatherer (%s): %s", x->leader_sel,
	       !x->assign ? "no part of a round yet"
	       : x->probed_epoch == x->epoch ? "probed; waiting for the round to end"
					     : jstr(x->assign, "state"));
}

int ex_follow(struct ex *x, struct exchange_result *res, np_error *err)
{
	char *sel = pair_selector(x, err);
	if (!sel)
		return -1;
	int r = ex_watch(x, sel, NULL, follower_cb, follower_tick, err);
	free(sel);
	if (r < 0) {
		if (!x->failed && np_now_ms() >= x->o->deadline_ms)
			np_error_set(err, NP_EK8S, 0,
				     "deadline reached waiting for the gatherer (%s)%s; its log says why",
				     x->leader_sel, x->assign ? ", which handed out a part" : "");
		return -1;
	}
	if (!x->done)
		return np_error_set(err, NP_EK8S, 0, "the exchange ended without a result");
	if (check_own(x, jstr(x->assign, "if"), jstr(x->assign, "addr"), err) < 0)
		return -1;
	snprintf(res->network, sizeof(res->network), "%s", jstr(x->assign, "net"));
	snprintf(res->ifname, sizeof(res->ifname), "%s", jstr(x->assign, "if"));
	snprintf(res->addr, sizeof(res->addr), "%s", jstr(x->assign, "addr"));
	snprintf(res->next_pod, sizeof(res->next_pod), "%s", jstr(x->assign, "next_pod"));
	snprintf(res->next_addr, sizeof(res->next_addr), "%s", jstr(x->assign, "next_addr"));
	res->family = strchr(res->addr, ':') ? AF_INET6 : AF_INET;
	res->epoch = x->epoch;
	res->n_pods = (size_t)json_integer_value(json_object_get(x->assign, "n"));
	json_t *rank = json_object_get(x->assign, "rank"), *world = json_object_get(x->assign, "world");
	json_t *mbps = json_object_get(x->assign, "min_mbps");
	if (!json_is_integer(rank) || !json_is_integer(world) || !json_is_integer(mbps) ||
	    json_integer_value(world) != (json_int_t)res->n_pods || json_integer_value(rank) <= 0 ||
	    json_integer_value(rank) >= json_integer_value(world))
		return np_error_set(err, NP_EK8S, 0, "bad assignment: no valid rank of %zu pods", res->n_pods);
	unsigned char root[16];
	const char *root_addr = jstr(x->assign, "root");
	int fam = strchr(root_addr, ':') ? AF_INET6 : AF_INET;
	if (strlen(root_addr) >= sizeof(res->root_addr) || inet_pton(fam, root_addr, root) != 1)
		return np_error_set(err, NP_EK8S, 0, "bad assignment: root address '%s'", root_addr);
	res->rank = (int)json_integer_value(rank);
	res->world = (int)json_integer_value(world);
	snprintf(res->root_addr, sizeof(res->root_addr), "%s", root_addr);
	res->min_mbps = (long)json_integer_value(mbps);
	return 0;
}
