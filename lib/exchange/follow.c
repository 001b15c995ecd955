/* A follower: one watch, for the whole exchange, on two objects only: this
 * pod (where the gatherer writes its part of each round) and the gatherer's
 * pod (where a round ends, in one write for the whole job).  Its API traffic
 * is the same in a job of 8 pods or 8,000.  The probe runs beside the
 * watch, never inside its callback (follower_side: between events, on
 * the other connection), so the watch is never torn down and opened
 * again, and whatever the gatherer writes while this pod probes a silent
 * peer (the round's end, the job's failure) reaches it at once. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "exchange/exchange_priv.h"
#include "util/clock.h"
#include "util/testhook.h"

/* The assignment names an interface and address this pod reported. */
static int check_own(struct ex *x, const struct exchange_part *p, np_error *err)
{
	unsigned char want[16], have[16];
	int fam = strchr(p->addr, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(fam, p->addr, want) != 1)
		return np_error_set(err, NP_EK8S, 0, "bad assignment: address '%s'", p->addr);
	for (size_t i = 0; i < x->mine.n; i++) {
		const struct agree_cand *c = &x->mine.c[i];
		if (c->family != fam || strcmp(c->ifname, p->ifname) != 0)
			continue;
		if (inet_pton(fam, c->addr_text, have) == 1 && memcmp(want, have, fam == AF_INET ? 4 : 16) == 0)
			return 0;
	}
	return np_error_set(err, NP_EK8S, 0,
			    "the gatherer assigned %s %s to this pod, which this pod did not report "
			    "(its interfaces changed, or the gatherer is wrong)",
			    p->ifname, p->addr);
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

/* The round on the gatherer's pod is the one this pod's part belongs to:
 * the same incarnation of the gatherer, the same epoch. */
static bool round_is(const struct follow_state *s, enum exchange_state state)
{
	return s->has_round && s->round.state == state && strcmp(s->round.leader, s->assign.leader) == 0 &&
	       strcmp(s->round_uid, s->assign.leader) == 0 && s->round.epoch == s->assign.epoch;
}

static int failure(const char *from, int status, const char *reason, np_error *err)
{
	return np_error_set(err, status, 0, "%s", reason[0] ? reason : from);
}

enum follow_action follow_next(const struct follow_state *s, np_error *err)
{
	/* A job the gatherer refused before any round (too many pods): every
	 * pod learns it from the gatherer's pod, with or without a part. */
	if (s->has_round && s->round.state == EXCHANGE_FAILED && strcmp(s->round.leader, s->round_uid) == 0 &&
	    (!s->has_assign || strcmp(s->assign.leader, s->round.leader) != 0 ||
	     s->round.epoch >= s->assign.epoch)) {
		failure("the gatherer failed", s->round.status, s->round.reason, err);
		return FOLLOW_FAIL;
	}
	if (!s->has_assign)
		return FOLLOW_WAIT;
	const struct exchange_assignment *a = &s->assign;
	if (a->state == EXCHANGE_FAILED) {
		failure("the gatherer failed", a->status, a->reason, err);
		return FOLLOW_FAIL;
	}
	bool probed = s->probed_epoch == a->epoch && strcmp(s->probed_leader, a->leader) == 0 &&
		      strcmp(s->probed_token, a->token) == 0;
	/* A container restarted after its round ended (same pod, same part)
	 * takes the result as it stands: its neighbours have finished and
	 * stopped listening. */
	if (!probed && round_is(s, EXCHANGE_FINAL) && a->state == EXCHANGE_PROBE)
		return FOLLOW_DONE;
	/* The gatherer that handed out this part is gone (deleted, or
	 * replaced by a newer pod): its round ends with it, and the one that
	 * replaces it hands out rounds of its own. */
	if (!probed && (!s->leader_seen || strcmp(s->round_uid, a->leader) != 0))
		return FOLLOW_WAIT;
	if (!probed)
		return FOLLOW_PROBE;
	/* The round ends on the gatherer's pod, for the incarnation that
	 * handed out this part. */
	return round_is(s, EXCHANGE_FINAL) ? FOLLOW_DONE : FOLLOW_WAIT;
}

void follow_waiting_text(const struct follow_state *s, const char *leader_sel, char *buf, size_t len)
{
	char prog[700] = "";
	if (s->has_progress)
		exchange_progress_text(&s->progress, prog, sizeof(prog));
	if (!s->leader_seen)
		snprintf(buf, len, "the gatherer (%s), which does not exist: the gatherer pod itself is missing",
			 leader_sel);
	else if (!s->has_progress)
		snprintf(buf, len, "the gatherer %s, which has published no progress (its nicpick has not "
			 "started, or cannot reach the API server)", s->leader_pod);
	else if (!s->has_assign)
		snprintf(buf, len, "the gatherer %s: %s", s->leader_pod, prog);
	else if (s->probed_epoch == s->assign.epoch && strcmp(s->probed_leader, s->assign.leader) == 0)
		snprintf(buf, len, "the gatherer %s: probed round %d; %s", s->leader_pod, s->assign.epoch, prog);
	else
		snprintf(buf, len, "the gatherer %s: round %d (%s); %s", s->leader_pod, s->assign.epoch,
			 exchange_state_name(s->assign.state), prog);
}

/* Start the probe of this pod's part: listen, and probe the ring
 * neighbour on each part beside the watch (follower_side). */
static int probe_start(struct ex *x, np_error *err)
{
	const struct exchange_assignment *a = &x->f.assign;
	for (size_t i = 0; i < a->n_parts; i++)
		if (check_own(x, &a->parts[i], err) < 0)
			return -1;
	long bytes = a->state == EXCHANGE_MEASURE ? x->o->probe_throughput_bytes : 0;
	return ex_probing_start(x, a->leader, a->epoch, a->token, a->parts, a->n_parts, bytes, &x->probing,
				err);
}

/* The probe is over: publish what it found, and the part is probed. */
static int probe_publish(struct ex *x, np_error *err)
{
	const struct exchange_assignment *a = &x->f.assign;
	char *json = NULL;
	if (!ex_probing_is(x->probing, a->leader, a->epoch, a->token)) {
		ex_probing_stop(x); /* the part changed meanwhile: step() starts it */
		return 0;
	}
	int r = ex_probing_result(x->probing, NULL, &json, err);
	ex_probing_stop(x);
	if (r == 0)
		r = ex_annotate_self(x, EXCHANGE_ANN_PROBE, json, err);
	free(json);
	if (r < 0)
		return -1;
	np_test_point("after-probe");
	x->f.probed_epoch = a->epoch;
	snprintf(x->f.probed_leader, sizeof(x->f.probed_leader), "%s", a->leader);
	snprintf(x->f.probed_token, sizeof(x->f.probed_token), "%s", a->token);
	return 0;
}

/* Act on what is known now, without blocking: a probe under way goes on
 * only while it is still what this pod has to do.  Returns 1 to end the
 * watch. */
static int step(struct ex *x)
{
	np_error e = { 0 };
	enum follow_action act = follow_next(&x->f, &e);
	const struct exchange_assignment *a = &x->f.assign;
	if (x->probing && (act != FOLLOW_PROBE || !ex_probing_is(x->probing, a->leader, a->epoch, a->token))) {
		static const char *const why[] = {
			[FOLLOW_WAIT] = "the gatherer that handed it out is gone",
			[FOLLOW_PROBE] = "the gatherer handed out another part",
			[FOLLOW_DONE] = "the round is final",
			[FOLLOW_FAIL] = "the job failed",
		};
		ex_log(x, EXCHANGE_INFO, "probe stopped before its end: %s", why[act]);
		ex_probing_stop(x);
	}
	switch (act) {
	case FOLLOW_WAIT:
		return 0;
	case FOLLOW_DONE:
		x->done = true;
		return 1;
	case FOLLOW_FAIL:
		ex_fail(x, &e);
		return 1;
	case FOLLOW_PROBE:
		if (!x->probing && probe_start(x, &e) < 0) {
			ex_fail(x, &e);
			return 1;
		}
		return 0;
	}
	return 0;
}

/* Beside the watch, between its events: the probe, until it is over;
 * then it is published and acted on as an event is. */
static int follower_side(void *ud, struct np_wait *w)
{
	struct ex *x = ud;
	np_wait_none(w);
	if (!x->probing || x->relisting)
		return 0;
	np_error e = { 0 };
	int r = ex_probing_step(x, x->probing, w, &e);
	if (r == 0)
		return 0;
	if (r < 0 || probe_publish(x, &e) < 0)
		ex_fail(x, &e);
	if (x->failed || step(x)) {
		x->stop = true;
		return 1;
	}
	return 0;
}

/* A message on a pod that this pod cannot read ends the exchange. */
static bool unreadable(struct ex *x, np_error *e, const char *key, const char *pod)
{
	np_error_wrap(e, "%s on pod %s", key, pod);
	ex_fail(x, e);
	return false;
}

static np_error *nul_error(np_error *e)
{
	np_error_set(e, NP_EK8S, 0, "has a NUL character");
	return e;
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
			ex_fail(x, &e);
			return;
		}
		const char *a = ex_annotation(pod, EXCHANGE_ANN_ASSIGN);
		np_error e = { 0 };
		if (!a && ex_annotation_nul(pod, EXCHANGE_ANN_ASSIGN))
			x->f.has_assign = unreadable(x, nul_error(&e), EXCHANGE_ANN_ASSIGN, name);
		else if (a && exchange_assignment_parse(a, strlen(a), &x->f.assign, &e) < 0)
			x->f.has_assign = unreadable(x, &e, EXCHANGE_ANN_ASSIGN, name);
		else if (a)
			x->f.has_assign = true;
	} else if (ex_pod_matches(pod, x->leader_sel)) {
		struct follow_state *s = &x->f;
		/* A pod being deleted (graceful deletion: a MODIFIED event with
		 * deletionTimestamp, its annotations still writable) gathers no
		 * more: its replacement does.  Only the gatherer this pod
		 * follows going away is news. */
		bool gone = type == K8S_WATCH_DELETED || ex_meta(pod, "deletionTimestamp");
		const char *created = ex_meta(pod, "creationTimestamp") ? ex_meta(pod, "creationTimestamp") : "";
		if (s->leader_seen && strcmp(s->round_uid, uid) != 0) {
			/* Two live pods match: the newest gathers, as the gatherer
			 * counts one pod per job index (members.c). */
			int c = strcmp(created, s->leader_created);
			if (gone || c < 0 || (c == 0 && strcmp(name, s->leader_pod) < 0))
				return;
		}
		snprintf(s->leader_created, sizeof(s->leader_created), "%s", created);
		s->has_round = s->has_progress = false;
		s->leader_seen = !gone;
		snprintf(s->leader_pod, sizeof(s->leader_pod), "%s", name);
		snprintf(s->round_uid, sizeof(s->round_uid), "%s", uid);
		if (!s->leader_seen)
			return;
		const char *rd = ex_annotation(pod, EXCHANGE_ANN_ROUND);
		const char *pg = ex_annotation(pod, EXCHANGE_ANN_PROGRESS);
		np_error e = { 0 };
		if (!rd && ex_annotation_nul(pod, EXCHANGE_ANN_ROUND))
			s->has_round = unreadable(x, nul_error(&e), EXCHANGE_ANN_ROUND, name);
		else if (rd && exchange_round_parse(rd, strlen(rd), &s->round, &e) < 0)
			s->has_round = unreadable(x, &e, EXCHANGE_ANN_ROUND, name);
		else
			s->has_round = rd != NULL;
		if (!pg && ex_annotation_nul(pod, EXCHANGE_ANN_PROGRESS))
			s->has_progress = unreadable(x, nul_error(&e), EXCHANGE_ANN_PROGRESS, name);
		else if (pg && exchange_progress_parse(pg, strlen(pg), &s->progress, &e) < 0)
			s->has_progress = unreadable(x, &e, EXCHANGE_ANN_PROGRESS, name);
		else
			s->has_progress = pg != NULL;
	}
}

static int follower_cb(enum k8s_watch_type type, json_t *obj, void *ud)
{
	struct ex *x = ud;
	ex_note_rv(x, type, obj);
	if (type == K8S_WATCH_BOOKMARK)
		return 0;
	if (type == K8S_WATCH_RELIST || type == K8S_WATCH_RELIST_BEGIN) {
		/* a re-list replaces what was known of the gatherer */
		x->f.leader_seen = x->f.has_round = x->f.has_progress = false;
	}
	if (type == K8S_WATCH_RELIST) {
		json_t *items = json_object_get(obj, "items"), *it;
		size_t i;
		json_array_foreach(items, i, it)
			see(x, K8S_WATCH_ADDED, it);
	} else if (type == K8S_WATCH_RELIST_BEGIN) {
		x->relisting = true;
		return 0;
	} else if (type == K8S_WATCH_RELIST_END) {
		x->relisting = false;
	} else {
		see(x, type, obj);
	}
	if (x->relisting)
		return 0; /* the rest of the list is still to come */
	if (x->failed || step(x)) {
		x->stop = true;
		return 1;
	}
	return 0;
}

static void follower_tick(struct ex *x)
{
	if (x->relisting) {
		/* what was known of the gatherer is being read again */
		ex_log(x, EXCHANGE_INFO, "waiting for the API server's list of the pods (%s)%s",
		       x->leader_sel, x->probing ? "; the probe goes on meanwhile" : "");
		return;
	}
	char buf[1024];
	follow_waiting_text(&x->f, x->leader_sel, buf, sizeof(buf));
	ex_log(x, EXCHANGE_INFO, "waiting for %s", buf);
}

int ex_follow(struct ex *x, struct exchange_result *res, np_error *err)
{
	char *sel = pair_selector(x, err);
	if (!sel)
		return -1;
	/* see() reads names, uids, labels and annotations only: a real pod
	 * object is 5-15 KB, its metadata a fraction of it. */
	x->watch_meta = true;
	/* Its list is of two pods or so; paged all the same, so that an
	 * answer to it is bounded as a page is. */
	x->list_page = K8S_LIST_PAGE;
	x->relisting = false;
	x->watch_side = follower_side;
	int r = ex_watch(x, sel, EX_UNFINISHED, follower_cb, follower_tick, err);
	x->watch_side = NULL;
	ex_probing_stop(x);
	free(sel);
	if (r < 0) {
		if (!x->failed && ex_past_deadline(x)) {
			char buf[1024];
			follow_waiting_text(&x->f, x->leader_sel, buf, sizeof(buf));
			np_error_set(err, NP_EK8S, 0, "deadline reached waiting for %s", buf);
		}
		return -1;
	}
	if (!x->done)
		return np_error_set(err, NP_EK8S, 0, "the exchange ended without a result");
	const struct exchange_assignment *a = &x->f.assign;
	/* The final round is a probe round: one part per rail. */
	if (a->state != EXCHANGE_PROBE || a->n_parts < 1 || a->n_parts > EXCHANGE_RAILS_MAX)
		return np_error_set(err, NP_EK8S, 0, "the final round is a %s round of %zu parts",
				    exchange_state_name(a->state), a->n_parts);
	for (size_t i = 0; i < a->n_parts; i++)
		if (check_own(x, &a->parts[i], err) < 0)
			return -1;
	ex_result_rails(res, a->parts, a->n_parts);
	res->epoch = a->epoch;
	res->n_pods = (size_t)a->n_pods;
	snprintf(res->root_pod, sizeof(res->root_pod), "%s", a->leader_pod);
	snprintf(res->versions, sizeof(res->versions), "%s", a->versions);
	snprintf(res->smoke_skip, sizeof(res->smoke_skip), "%s", a->smoke_skip);
	snprintf(res->probe_warning, sizeof(res->probe_warning), "%s", a->warning);
	snprintf(res->floor, sizeof(res->floor), "%s", a->floor);
	return 0;
}
