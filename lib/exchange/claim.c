/* One gatherer, always.  A pod that gathers says so on its own object
 * (nicpick.io/gatherer, in the same write as its report), and the gatherer
 * watches every pod of the job anyway: a second pod that claims to gather
 * is seen as soon as its report is, before either decides.  Then the job
 * fails at once on every pod (exit 5), naming both pods and why each
 * gathers, instead of two gatherers handing out rounds until the deadline.
 *
 * One case needs no claim: a PyTorchJob's worker 0 gathers only when the
 * job has no Master (lib/jobs/rule.c); a Master pod of the same job says
 * the rule was misled (no MASTER_ADDR in worker 0's containers), whether
 * or not the Master's nicpick has started yet.
 *
 * And one case is no split: two pods of the same job index (a replacement
 * made while the first still runs).  The gatherer counts the newest one
 * (members.c), followers follow the newest (follow.c), and so the older
 * one steps aside alone, telling no one. */
#include <stdio.h>
#include <string.h>

#include "exchange/gather_priv.h"

#define PT_JOB "training.kubeflow.org/job-name"
#define PT_TYPE "training.kubeflow.org/replica-type"

/* Why pod (another of the job's pods) gathers, or "" when it does not. */
static void rival_why(struct ex *x, const json_t *pod, const char *uid, char *why, size_t len)
{
	why[0] = '\0';
	const char *c = ex_annotation(pod, EXCHANGE_ANN_GATHERER);
	struct exchange_claim cl;
	np_error e = { 0 };
	/* a claim left by an earlier pod of the same name is not this one's */
	if (c && exchange_claim_parse(c, strlen(c), &cl, &e) == 0 && strcmp(cl.leader, uid) == 0) {
		snprintf(why, len, "%s", cl.why[0] ? cl.why : "it says it gathers");
		return;
	}
	const char *mine = ex_label(x->pod, PT_TYPE), *theirs = ex_label(pod, PT_TYPE);
	const char *job = ex_label(x->pod, PT_JOB), *their_job = ex_label(pod, PT_JOB);
	if (x->by_rule && mine && theirs && job && their_job && strcmp(mine, "worker") == 0 &&
	    strcmp(theirs, "master") == 0 && strcmp(job, their_job) == 0)
		snprintf(why, len, "it is the Master of PyTorchJob %s, and a PyTorchJob with a Master "
			 "is gathered by master 0", job);
}

void ex_rival_see(struct ex *x, const json_t *pod)
{
	const char *name = ex_meta(pod, "name"), *uid = ex_meta(pod, "uid");
	if (!name || !uid)
		return;
	bool terminating = ex_meta(pod, "deletionTimestamp") != NULL;
	if (strcmp(uid, x->uid) == 0) {
		x->terminating = x->terminating || terminating;
		return;
	}
	/* a pod being deleted gathers no more: its replacement does */
	if (x->has_rival || terminating)
		return;
	char why[EXCHANGE_DETAIL_MAX];
	rival_why(x, pod, uid, why, sizeof(why));
	if (!why[0])
		return;
	const struct member *me = x->g ? gather_member(x->g, x->name, false) : NULL;
	const struct member *them = x->g ? gather_member(x->g, name, false) : NULL;
	if (me && them && me->key[0] && strcmp(me->key, them->key) == 0) {
		int c = strcmp(me->created, them->created);
		if (c > 0 || (c == 0 && strcmp(me->name, them->name) > 0))
			return; /* it is the older one: it steps aside */
		x->has_rival = x->superseded = true;
		np_error_set(&x->rival, NP_EK8S, 0,
			     "pod %s has this pod's job index and is newer: it gathers in this pod's "
			     "place (%s), and this pod, replaced, takes no part", name, why);
		return;
	}
	x->has_rival = true;
	np_error_set(&x->rival, NP_EK8S, 0,
		     "two pods gather this job: %s, because %s; and %s, because %s.  Only one may: "
		     "fix the job's labels or env (the README: \"Which pods agree, and which one "
		     "gathers\"), or give every pod the same --leader-selector",
		     x->name, x->why, name, why);
}
