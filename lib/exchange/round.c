/* The gatherer's probe round: it hands every pod its part, probes its own
 * beside its watch, and waits for every other pod's result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/gather_priv.h"
#include "probe/probe.h"
#include "util/testhook.h"

/* The gatherer's own probe runs beside its watch (gather_side), as a
 * follower's does: while it waits for a neighbour that does not answer
 * (up to EX_PROBE_WINDOW_MS) the gatherer goes on reading the pods' events,
 * counting their results and noticing a pod replaced meanwhile.  Its
 * result is not written on its pod at once: each write there is an event
 * on every follower's watch, so it goes with the next write the gatherer
 * makes there anyway (publish.c: the round's end, or a progress line while
 * it waits).  No reader needs it sooner: the decision takes it from here,
 * and a follower waits for the round, not for this. */
static int own_probe_start(struct ex *x, long bytes, np_error *err)
{
	struct gather *g = x->g;
	const struct member *me = gather_member(g, x->name, false);
	if (!me)
		return np_error_set(err, NP_EINTERNAL, 0, "the gatherer %s is not a member", x->name);
	ex_probing_stop(x);
	return ex_probing_start(x, x->uid, g->epoch, g->token, me->parts, me->n_parts, bytes, &x->probing,
				err);
}

/* The own probe is over: its result is this member's. */
static int own_probe_done(struct ex *x, np_error *err)
{
	struct gather *g = x->g;
	struct exchange_probe *pr = malloc(sizeof(*pr));
	if (!pr)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	char *json = NULL;
	int r = ex_probing_result(x->probing, pr, &json, err);
	ex_probing_stop(x);
	struct member *me = r == 0 ? gather_member(g, x->name, false) : NULL;
	if (r == 0 && !me)
		r = np_error_set(err, NP_EINTERNAL, 0, "the gatherer %s is not a member", x->name);
	if (r == 0) {
		gather_member_set_probe(g, me, pr);
		free(g->probe_unsent);
		g->probe_unsent = json;
		json = NULL;
		np_test_point("after-probe");
	}
	free(json);
	free(pr);
	return r;
}

/* Beside the watch, between its events: the own probe, until it is over;
 * then the round may be complete, as after an event. */
static int gather_side(void *ud, struct np_wait *w)
{
	struct ex *x = ud;
	np_wait_none(w);
	if (!x->probing)
		return 0;
	np_error e = { 0 };
	int r = ex_probing_step(x, x->probing, w, &e);
	if (r == 0)
		return 0;
	if (r < 0 || own_probe_done(x, &e) < 0) {
		ex_fail(x, &e);
		x->stop = true;
		return 1;
	}
	if (!x->g->relisting && gather_ready(x->g, x->name)) {
		x->stop = true;
		return 1;
	}
	return 0;
}

/* A member of the round without parts: a pod recreated (member_reset) or
 * new since the decision; NULL if none. */
static const struct member *replaced(const struct gather *g, const char *self)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct member *m = &g->m[i];
		if (m->selected && m->n_parts == 0 && m->assigned_epoch != g->epoch &&
		    strcmp(m->name, self) != 0)
			return m;
	}
	return NULL;
}

/* 0: every pod probed the round; 1: the round is void (a pod replaced). */
static int wait_probes(struct ex *x, np_error *err)
{
	x->g->phase = PH_PROBE;
	x->watch_side = gather_side;
	int r = 0;
	for (;;) {
		x->g->need_assign = false;
		if ((r = gather_watch(x, err)) < 0 || !x->g->need_assign)
			break;
		/* A pod recreated since the decision (a new uid), or a new pod
		 * in the place of one (a new name, the same job index, as the
		 * Job controller replaces a pod of an Indexed Job): its parts
		 * were the old pod's, and its report may differ (another node,
		 * other addresses), so the round is void.  Gather its report
		 * and decide again. */
		const struct member *m = replaced(x->g, x->name);
		if (m) {
			ex_log(x, EXCHANGE_WARN,
			       "round %d: pod %s (uid %s) is not the pod the round was decided with; "
			       "deciding again",
			       x->g->epoch, m->name, m->uid ? m->uid : "unknown");
			r = 1;
			break;
		}
		/* Its part is not on the pod (an assignment that did not land,
		 * or was overwritten): hand it out again. */
		if ((r = gather_publish_round(x, NULL, true, err)) < 0)
			break;
	}
	x->watch_side = NULL;
	return r;
}

/* Hand out a round and probe it: every pod's part, the round's state,
 * this pod's own probe, then every other pod's result.  1: the round is
 * void and must be decided again (wait_probes). */
int gather_run_round(struct ex *x, enum exchange_state state, long bytes, np_error *err)
{
	struct gather *g = x->g;
	g->state = state;
	/* A token per round: a probe of an earlier round, or by anyone who did
	 * not read this round's assignment, does not count.  But the first
	 * round a restarted gatherer hands out, when every pod's part is the
	 * one it handed out last (numbered after it: gather_next_epoch),
	 * keeps that round's token: the pods still probing it are not turned
	 * away, and a probe of those very parts is as good for this round.
	 * Any other round gets a new one. */
	bool same = false;
	if (g->resume_token[0]) {
		same = probe_token_ok(g->resume_token) &&
		       gather_round_unchanged(x, g->resume_epoch, g->resume_token);
		if (same)
			snprintf(g->token, sizeof(g->token), "%s", g->resume_token);
		ex_log(x, EXCHANGE_INFO, "round %d: %s round %d, handed out before this pod restarted", g->epoch,
		       same ? "the same parts and probe token as" : "a new probe token: the parts differ from",
		       g->resume_epoch);
		g->resume_token[0] = '\0';
	}
	if (!same && probe_token_new(g->token, err) < 0)
		return -1;
	const struct member *me = gather_member(x->g, x->name, false);
	if (me) /* listening before any pod has its part to probe this one */
		ex_probe_listen(x, x->g->token, me->parts, me->n_parts, bytes);
	if (gather_publish_round(x, NULL, false, err) < 0)
		return -1;
	np_test_point("after-parts");
	int r = gather_set_round(x, state, NULL, true, err) < 0 || own_probe_start(x, bytes, err) < 0
			? -1
			: wait_probes(x, err);
	ex_probing_stop(x);
	return r;
}
