/* Handing each pod its part of a round, and the round's state. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/gather_priv.h"
#include "util/text.h"

/* Handing out parts costs one PATCH per pod: on a large job they go out
 * over a few connections at once, each with its own client.  Their budget,
 * apart from the pod's own 5 requests/s: a burst of one write per pod of
 * the job (a whole round at once), refilled at one write per pod per
 * PUBLISH_REFILL_S (so a pod that restarts again and again, which makes
 * the gatherer hand every pod its part again, costs at most that). */
#define PUBLISH_CONNS PUBLISH_CONNS_MAX
#define PUBLISH_REFILL_S 5.0

static int assign_budget(struct ex *x, np_error *err)
{
	struct gather *g = x->g;
	if (g->assign_lim)
		return 0;
	int pods = g->expect > 10 ? g->expect : 10;
	double qps = pods / PUBLISH_REFILL_S > EXCHANGE_QPS ? pods / PUBLISH_REFILL_S : EXCHANGE_QPS;
	return k8s_limiter_new(&g->assign_lim, qps, pods, err);
}

struct publish_job {
	struct ex *x;
	struct k8s_client *k;
	char **names, **patches;
	size_t first, n, step;
	np_error err;
	int ret;
};

static void *publish_worker(void *arg)
{
	struct publish_job *j = arg;
	for (size_t i = j->first; i < j->n && j->ret == 0; i += j->step) {
		json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", EXCHANGE_ANN_ASSIGN,
					  j->patches[i]);
		j->ret = patch ? k8s_patch_pod(j->k, j->x->ns, j->names[i], patch, NULL, &j->err)
			       : np_error_set(&j->err, NP_EINTERNAL, 0, "out of memory");
		json_decref(patch);
		if (j->ret < 0)
			np_error_wrap(&j->err, "cannot annotate pod %s", j->names[i]);
	}
	return NULL;
}

/* What member m is told of the round (or of the failure). */
static void member_assignment(struct ex *x, const struct member *m, const np_error *failure,
			      struct exchange_assignment *a)
{
	struct gather *g = x->g;
	memset(a, 0, sizeof(*a));
	snprintf(a->leader, sizeof(a->leader), "%s", x->uid);
	snprintf(a->leader_pod, sizeof(a->leader_pod), "%s", x->name);
	a->epoch = g->epoch;
	a->n_pods = g->n_pods;
	if (failure) {
		a->state = EXCHANGE_FAILED;
		a->status = failure->status;
		np_text_clean(a->reason, sizeof(a->reason), failure->msg, NP_TEXT_SPACE);
		return;
	}
	a->state = g->state;
	a->n_parts = m->n_parts;
	if (m->n_parts)
		memcpy(a->parts, m->parts, m->n_parts * sizeof(a->parts[0]));
	np_text_clean(a->versions, sizeof(a->versions), g->versions.warning, NP_TEXT_SPACE);
	np_text_clean(a->smoke_skip, sizeof(a->smoke_skip), g->versions.unavailable, NP_TEXT_SPACE);
	np_text_clean(a->warning, sizeof(a->warning), g->warning, NP_TEXT_SPACE);
	snprintf(a->token, sizeof(a->token), "%s", g->token);
	np_text_clean(a->floor, sizeof(a->floor), g->versions.floor, NP_TEXT_SPACE);
}

bool gather_round_unchanged(struct ex *x, int epoch, const char *token)
{
	struct gather *g = x->g;
	struct exchange_assignment *a = malloc(sizeof(*a));
	bool same = a != NULL;
	for (size_t i = 0; i < g->n && same; i++) {
		const struct member *m = &g->m[i];
		char *text = NULL;
		np_error e = { 0 };
		if (!m->selected)
			continue;
		member_assignment(x, m, NULL, a);
		a->epoch = epoch;
		snprintf(a->token, sizeof(a->token), "%s", token);
		same = exchange_assignment_to_json(a, &text, &e) == 0 && gather_text_hash(text) == m->as_hash;
		free(text);
	}
	free(a);
	return same;
}

/* Tell every pod its part of the round (or the failure); the gatherer's
 * own part goes with the round's state (gather_set_round). */
int gather_publish_round(struct ex *x, const np_error *failure, bool only_missing, np_error *err)
{
	struct gather *g = x->g;
	char **names = calloc(g->n + 1, sizeof(*names)), **patches = calloc(g->n + 1, sizeof(*patches));
	struct exchange_assignment *a = malloc(sizeof(*a));
	size_t n = 0;
	int ret = -1;
	if (!names || !patches || !a) {
		np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		if (!m->selected || (only_missing && m->assigned_epoch == g->epoch) ||
		    strcmp(m->name, x->name) == 0)
			continue;
		member_assignment(x, m, failure, a);
		names[n] = m->name;
		if (exchange_assignment_to_json(a, &patches[n++], err) < 0)
			goto out;
	}
	size_t conns = n < 32 ? 1 : PUBLISH_CONNS;
	struct publish_job jobs[PUBLISH_CONNS];
	pthread_t threads[PUBLISH_CONNS];
	bool started[PUBLISH_CONNS] = { false };
	if (assign_budget(x, err) < 0)
		goto out;
	/* A small job's parts go over this pod's own connection, already
	 * open: a new one would put a TCP and a TLS handshake between the
	 * decision and the first probe.  They still draw on their own budget. */
	bool own = conns == 1;
	for (size_t c = 0; c < conns; c++) {
		if (!own && !g->pool[c] && k8s_client_new_like(&g->pool[c], x->k, err) < 0)
			goto out;
		struct k8s_client *k = own ? x->k : g->pool[c];
		k8s_client_set_limiter(k, g->assign_lim);
		k8s_client_set_deadline(k, x->o->deadline_ms);
		jobs[c] = (struct publish_job){ .x = x, .k = k, .names = names, .patches = patches,
						.first = c, .n = n, .step = conns };
	}
	for (size_t c = 1; c < conns; c++)
		started[c] = pthread_create(&threads[c], NULL, publish_worker, &jobs[c]) == 0;
	publish_worker(&jobs[0]);
	for (size_t c = 1; c < conns; c++) {
		if (started[c])
			pthread_join(threads[c], NULL);
		else
			publish_worker(&jobs[c]); /* no thread: do its share here */
	}
	if (own)
		k8s_client_set_limiter(x->k, x->lim);
	ret = 0;
	for (size_t c = 0; c < conns && ret == 0; c++)
		if (jobs[c].ret < 0) {
			*err = jobs[c].err;
			ret = -1;
		}
	if (ret == 0) {
		for (size_t i = 0; i < g->n; i++)
			if (g->m[i].selected)
				g->m[i].assigned_epoch = g->epoch;
		gather_recount(g);
	}
out:
	for (size_t i = 0; patches && i < n; i++)
		free(patches[i]);
	free(patches);
	free(names);
	free(a);
	return ret;
}

/* A write on the gatherer's own pod (ann, taken): with it, this pod's
 * probe result of the round when it is not on the pod yet (own_probe in
 * gather.c), so that it costs the followers no event of its own. */
static int patch_self(struct ex *x, json_t *ann, np_error *err)
{
	struct gather *g = x->g;
	char *probe = g->probe_unsent;
	if (ann && probe && json_object_set_new(ann, EXCHANGE_ANN_PROBE, json_string(probe)) < 0) {
		json_decref(ann);
		ann = NULL;
	}
	if (!ann)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	if (ex_patch_annotations(x, x->name, ann, err) < 0)
		return -1;
	free(probe);
	g->probe_unsent = NULL;
	return 0;
}

/* The round's state on the gatherer's own pod, where every follower that
 * has probed is waiting: one write ends the round for the whole job.  A
 * round handed out (own_part) carries the gatherer's own part of it in
 * the same write, after every other pod's: each write on this pod reaches
 * every follower's watch, so one write a round, not two. */
int gather_set_round(struct ex *x, enum exchange_state state, const np_error *failure, bool own_part,
		     np_error *err)
{
	struct exchange_round rd = { .epoch = x->g->epoch, .state = state };
	snprintf(rd.leader, sizeof(rd.leader), "%s", x->uid);
	if (failure) {
		rd.state = EXCHANGE_FAILED;
		rd.status = failure->status;
		np_text_clean(rd.reason, sizeof(rd.reason), failure->msg, NP_TEXT_SPACE);
	}
	const struct member *me = own_part ? gather_member(x->g, x->name, false) : NULL;
	if (me && !me->selected)
		me = NULL; /* no part of this round */
	struct exchange_assignment *a = me ? malloc(sizeof(*a)) : NULL;
	char *s = NULL, *part = NULL;
	json_t *ann = NULL;
	int r = -1;
	if (me && !a) {
		np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		goto out;
	}
	if (a)
		member_assignment(x, me, failure, a);
	if (exchange_round_to_json(&rd, &s, err) < 0 || (a && exchange_assignment_to_json(a, &part, err) < 0))
		goto out;
	ann = part ? json_pack("{s:s, s:s}", EXCHANGE_ANN_ROUND, s, EXCHANGE_ANN_ASSIGN, part)
		   : json_pack("{s:s}", EXCHANGE_ANN_ROUND, s);
	r = patch_self(x, ann, err);
out:
	free(a);
	free(s);
	free(part);
	return r;
}

int gather_set_progress(struct ex *x, np_error *err)
{
	struct exchange_progress p;
	gather_progress(x->g, x->uid, x->name, &p);
	char *s = NULL;
	if (exchange_progress_to_json(&p, &s, err) < 0)
		return -1;
	int r = patch_self(x, json_pack("{s:s}", EXCHANGE_ANN_PROGRESS, s), err);
	free(s);
	return r;
}

/* Parts of one rail: this pod's interface and address, the ring neighbour
 * (pods sorted by name) it must reach, and its smoke rank.  The ranks are
 * agree_rail_rank's, computed in one pass (the rail is in name order and
 * the gatherer is rank 0): asking it per pod would cost O(N^2). */
int gather_rail_assign(struct ex *x, const struct agree_rail *rail, bool append, np_error *err)
{
	struct gather *g = x->g;
	size_t n = rail->n_assign, root = SIZE_MAX;
	struct agree_rank rk;
	if (agree_rail_rank(rail, x->name, x->name, &rk, err) < 0)
		return -1;
	for (size_t i = 0; i < n && root == SIZE_MAX; i++)
		if (strcmp(rail->assign[i].pod, x->name) == 0)
			root = i;
	for (size_t i = 0; i < n; i++) {
		const struct agree_assign *a = &rail->assign[i], *nx = &rail->assign[(i + 1) % n];
		const struct agree_assign *pv = &rail->assign[(i + n - 1) % n];
		struct member *m = gather_member(g, a->pod, false);
		if (!m)
			return np_error_set(err, NP_EINTERNAL, 0, "pod %s of the decision is not a member", a->pod);
		if (!append)
			m->n_parts = 0;
		if (m->n_parts >= EXCHANGE_PARTS_MAX)
			continue;
		struct exchange_part *parts = realloc(m->parts, (m->n_parts + 1) * sizeof(*parts));
		if (!parts)
			return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		m->parts = parts;
		struct exchange_part *p = &m->parts[m->n_parts];
		memset(p, 0, sizeof(*p));
		snprintf(p->net, sizeof(p->net), "%s", rail->net.text);
		snprintf(p->ifname, sizeof(p->ifname), "%s", a->ifname);
		snprintf(p->addr, sizeof(p->addr), "%s", a->addr);
		if (n > 1) {
			snprintf(p->next_pod, sizeof(p->next_pod), "%s", nx->pod);
			snprintf(p->next_addr, sizeof(p->next_addr), "%s", nx->addr);
			snprintf(p->prev_addr, sizeof(p->prev_addr), "%s", pv->addr);
		}
		p->rank = i == root ? 0 : i < root ? (int)i + 1 : (int)i;
		p->world = rk.world;
		snprintf(p->root, sizeof(p->root), "%s", rk.root_addr);
		p->min_mbps = rk.min_mbps;
		m->n_parts++;
	}
	return 0;
}
