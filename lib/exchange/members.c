/* Who is in the job: the gatherer's table of pods, folded from watch
 * events, with pods of earlier attempts and old incarnations set aside. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/gather_priv.h"
#include "util/grow.h"
#include "util/jsonread.h"

static const char *index_labels[] = {
	"training.kubeflow.org/replica-type", "training.kubeflow.org/replica-index",
	"jobset.sigs.k8s.io/job-global-index", "batch.kubernetes.io/job-completion-index",
};

struct member *gather_member(struct gather *g, const char *name, bool create)
{
	for (size_t i = 0; i < g->n; i++)
		if (strcmp(g->m[i].name, name) == 0)
			return &g->m[i];
	if (!create)
		return NULL;
	if (np_grow(&g->m, &g->cap, g->n, sizeof(*g->m), 64) < 0)
		return NULL;
	struct member *m = &g->m[g->n++];
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	return m;
}

static void member_reset(struct member *m)
{
	free(m->rep);
	char name[AGREE_NAME_MAX];
	memcpy(name, m->name, sizeof(name));
	memset(m, 0, sizeof(*m));
	memcpy(m->name, name, sizeof(name));
}

/* Fold one Pod object into the member table. */
void gather_member_update(struct gather *g, const char *leader_uid, json_t *pod)
{
	const char *name = ex_meta(pod, "name"), *uid = ex_meta(pod, "uid");
	if (!name || !uid)
		return;
	struct member *m = gather_member(g, name, true);
	if (!m)
		return;
	if (strcmp(m->uid, uid) != 0) {
		/* A new incarnation: nothing of the old one counts. */
		member_reset(m);
		snprintf(m->uid, sizeof(m->uid), "%s", uid);
	}
	const char *phase = np_json_cstr(json_object_get(json_object_get(pod, "status"), "phase"));
	m->live = !json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") &&
		  !(phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0));
	const char *created = ex_meta(pod, "creationTimestamp");
	snprintf(m->created, sizeof(m->created), "%s", created ? created : "");
	size_t off = 0;
	m->key[0] = '\0';
	for (size_t i = 0; i < sizeof(index_labels) / sizeof(index_labels[0]); i++) {
		const char *v = ex_label(pod, index_labels[i]);
		if (v)
			off += (size_t)snprintf(m->key + off, sizeof(m->key) - off, "%s/", v);
		if (off >= sizeof(m->key))
			break;
	}
	if (!m->key[0])
		snprintf(m->key, sizeof(m->key), "%s", name);

	const char *rep = ex_annotation(pod, EXCHANGE_ANN_REPORT);
	m->has_report = false;
	m->report_why[0] = '\0';
	if (rep) {
		if (!m->rep)
			m->rep = malloc(sizeof(*m->rep));
		np_error e = { 0 };
		if (!m->rep) {
			snprintf(m->report_why, sizeof(m->report_why), "out of memory");
		} else if (agree_report_parse(rep, strlen(rep), m->rep, &e) < 0) {
			snprintf(m->report_why, sizeof(m->report_why), "%.250s", e.msg);
		} else if (strcmp(m->rep->pod, name) != 0 || strcmp(m->rep->uid, uid) != 0) {
			snprintf(m->report_why, sizeof(m->report_why),
				 "report was written by an earlier incarnation of the pod");
		} else {
			m->has_report = true;
		}
	} else if (ex_annotation_nul(pod, EXCHANGE_ANN_REPORT)) {
		snprintf(m->report_why, sizeof(m->report_why),
			 "its %s annotation has a NUL character", EXCHANGE_ANN_REPORT);
	}
	/* What this gatherer handed out and what came back; anything else
	 * (an earlier incarnation's, unreadable) does not count. */
	const char *a = ex_annotation(pod, EXCHANGE_ANN_ASSIGN);
	struct exchange_assignment as;
	np_error e = { 0 };
	m->assigned_epoch = 0;
	if (a && exchange_assignment_parse(a, strlen(a), &as, &e) == 0 && strcmp(as.leader, leader_uid) == 0)
		m->assigned_epoch = as.epoch;
	const char *p = ex_annotation(pod, EXCHANGE_ANN_PROBE);
	struct exchange_probe pr;
	if (!p && ex_annotation_nul(pod, EXCHANGE_ANN_PROBE))
		snprintf(m->report_why, sizeof(m->report_why),
			 "its %s annotation has a NUL character", EXCHANGE_ANN_PROBE);
	else if (p && exchange_probe_parse(p, strlen(p), &pr, &e) < 0)
		snprintf(m->report_why, sizeof(m->report_why), "%.250s", e.msg);
	else if (p && strcmp(pr.leader, leader_uid) == 0) {
		m->probe = pr;
		m->has_probe = true;
	}
}

void gather_free_members(struct gather *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->m[i].rep);
	free(g->m);
	g->m = NULL;
	g->n = g->cap = 0;
}

/* Pick, per job index, the newest live pod: a pod of an earlier attempt
 * must not count.  Returns the number selected. */
size_t gather_select_members(struct gather *g)
{
	size_t n = 0;
	for (size_t i = 0; i < g->n; i++)
		g->m[i].selected = false;
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		if (!m->live)
			continue;
		struct member *best = m;
		for (size_t j = 0; j < g->n; j++) {
			struct member *o = &g->m[j];
			if (o->live && strcmp(o->key, m->key) == 0 &&
			    (strcmp(o->created, best->created) > 0 ||
			     (strcmp(o->created, best->created) == 0 && strcmp(o->name, best->name) > 0)))
				best = o;
		}
		if (best == m) {
			m->selected = true;
			n++;
		}
	}
	return n;
}
