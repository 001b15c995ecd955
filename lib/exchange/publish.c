/* Handing each pod its part of a round, and the round's state. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/gather_priv.h"

/* Handing out parts costs one PATCH per pod: on a large job they go out
 * over a few connections at once, each with its own client. */
#define PUBLISH_CONNS PUBLISH_CONNS_MAX

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

/* Tell every pod its part of the round (or the failure). */
int gather_publish_round(struct ex *x, const char *state, const char *reason, np_error *err)
{
	struct gather *g = x->g;
	char **names = calloc(g->n + 1, sizeof(*names)), **patches = calloc(g->n + 1, sizeof(*patches));
	size_t n = 0;
	int ret = -1;
	if (!names || !patches) {
		np_error_set(err, NP_EINTERNAL, 0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		if (!m->selected)
			continue;
		json_t *as = json_object_get(g->assign_of, m->name);
		json_t *a = as ? json_deep_copy(as) : json_object();
		json_object_set_new(a, "leader", json_string(x->uid));
		json_object_set_new(a, "leader_pod", json_string(x->name));
		json_object_set_new(a, "epoch", json_integer(g->epoch));
		json_object_set_new(a, "state", json_string(state));
		if (reason)
			json_object_set_new(a, "reason", json_string(reason));
		names[n] = m->name;
		patches[n] = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(a);
		if (!patches[n++]) {
			np_error_set(err, NP_EINTERNAL, 0, "out of memory");
			goto out;
		}
	}
	size_t conns = n < 32 ? 1 : PUBLISH_CONNS;
	struct publish_job jobs[PUBLISH_CONNS];
	pthread_t threads[PUBLISH_CONNS];
	bool started[PUBLISH_CONNS] = { false };
	for (size_t c = 0; c < conns; c++) {
		if (!g->pool[c] && k8s_client_new(&g->pool[c], x->o->k8s, err) < 0)
			goto out;
		k8s_client_set_deadline(g->pool[c], x->o->deadline_ms);
		jobs[c] = (struct publish_job){ .x = x, .k = g->pool[c], .names = names, .patches = patches,
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
	ret = 0;
	for (size_t c = 0; c < conns && ret == 0; c++)
		if (jobs[c].ret < 0) {
			*err = jobs[c].err;
			ret = -1;
		}
	if (ret == 0)
		for (size_t i = 0; i < g->n; i++)
			if (g->m[i].selected)
				g->m[i].assigned_epoch = g->epoch;
out:
	for (size_t i = 0; patches && i < n; i++)
		free(patches[i]);
	free(patches);
	free(names);
	return ret;
}

/* The round's state on the gatherer's own pod, where every follower that
 * has probed is waiting: one write ends the round for the whole job. */
int gather_set_round(struct ex *x, const char *state, const char *reason, np_error *err)
{
	json_t *rd = json_pack("{s:s, s:i, s:s}", "leader", x->uid, "epoch", x->g->epoch, "state", state);
	if (reason)
		json_object_set_new(rd, "reason", json_string(reason));
	char *s = json_dumps(rd, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(rd);
	int r = s ? ex_patch_annotations(x, x->name, json_pack("{s:s}", EXCHANGE_ANN_ROUND, s), err)
		  : np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	free(s);
	return r;
}

/* Assignments of one rail: this pod's interface and address, the ring
 * neighbour (pods sorted by name) it must reach, and its smoke rank. */
int gather_rail_assign(struct ex *x, const struct agree_rail *rail, json_t *trials_of, np_error *err)
{
	struct gather *g = x->g;
	size_t n = rail->n_assign;
	for (size_t i = 0; i < n; i++) {
		const struct agree_assign *a = &rail->assign[i], *nx = &rail->assign[(i + 1) % n];
		struct agree_rank rk;
		if (agree_rail_rank(rail, x->name, a->pod, &rk, err) < 0)
			return -1;
		json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:I}", "net",
				      rail->net.text, "if", a->ifname, "addr", a->addr, "next_pod",
				      n > 1 ? nx->pod : "", "next_addr", n > 1 ? nx->addr : "", "n", (int)n,
				      "rank", rk.rank, "world", rk.world, "root", rk.root_addr, "min_mbps",
				      (json_int_t)rk.min_mbps);
		if (trials_of) {
			json_t *arr = json_object_get(trials_of, a->pod);
			if (!arr) {
				arr = json_array();
				json_object_set_new(trials_of, a->pod, arr);
			}
			json_array_append_new(arr, t);
		} else {
			json_object_set_new(g->assign_of, a->pod, t);
		}
	}
	return 0;
}
