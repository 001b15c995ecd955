/* A restarted gatherer: what it published before, read back from its pod
 * (exchange_priv.h declares ex_published_round and ex_round_final). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/gather_priv.h"
#include "util/text.h"

bool ex_published_round(const struct ex *x, struct exchange_round *out)
{
	const char *rd = ex_annotation(x->pod, EXCHANGE_ANN_ROUND);
	np_error e = { 0 };
	return rd && exchange_round_parse(rd, strlen(rd), out, &e) == 0 && strcmp(out->leader, x->uid) == 0 &&
	       out->epoch >= 1;
}

bool ex_round_final(const struct ex *x)
{
	struct exchange_round r;
	return ex_published_round(x, &r) && r.state == EXCHANGE_FINAL;
}

/* A restarted gatherer container (same pod, same uid) goes on from the
 * round it published: the next round is numbered after it, so that no
 * message of an earlier round can pass for one of the new; and a final
 * round stands, with this pod's parts as they were handed out (its
 * followers have taken them and gone).  The round it handed out last, and
 * its token, are kept too: a round whose parts went out before its state
 * did is handed out again with that token (gather.c, run_round). */
void gather_resume(struct ex *x)
{
	struct gather *g = x->g;
	const char *a = ex_annotation(x->pod, EXCHANGE_ANN_ASSIGN);
	struct exchange_assignment *as = a ? malloc(sizeof(*as)) : NULL;
	np_error e = { 0 };
	bool own = as && exchange_assignment_parse(a, strlen(a), as, &e) == 0 && strcmp(as->leader, x->uid) == 0 &&
		   as->state != EXCHANGE_FAILED;
	if (own) {
		g->resume_epoch = as->epoch;
		snprintf(g->resume_token, sizeof(g->resume_token), "%s", as->token);
	}
	struct exchange_round r;
	if (!ex_published_round(x, &r)) {
		free(as);
		return;
	}
	g->epoch = r.epoch;
	if (r.state == EXCHANGE_FINAL && own && as->epoch == r.epoch && as->state == EXCHANGE_PROBE &&
	    as->n_parts >= 1 && as->n_parts <= EXCHANGE_RAILS_MAX) {
		g->resume_final = true;
		g->resume_routed = strcmp(as->parts[0].net, "routed") == 0;
		g->n_final = as->n_parts;
		memcpy(g->final_parts, as->parts, as->n_parts * sizeof(as->parts[0]));
		/* The networks that failed before it: every follower has them. */
		np_text_clean(g->warning, sizeof(g->warning), as->warning, NP_TEXT_SPACE);
	}
	free(as);
	ex_log(x, EXCHANGE_INFO, "this pod gathered before: round %d was %s; %s", r.epoch,
	       exchange_state_name(r.state),
	       g->resume_final ? "its result stands" : "the next round follows it");
}

/* A network of the final round that gather_resume() found. */
static bool handed_out(const struct gather *g, const char *net)
{
	for (size_t k = 0; k < g->n_final; k++)
		if (strcmp(g->final_parts[k].net, net) == 0)
			return true;
	return false;
}

/* The final round that gather_resume() found, decided again from the same
 * reports (pure): the decision for this pod's outputs, its parts as they
 * were handed out.  What the earlier run left (networks that failed their
 * probe, tied ones that measured slower) is not known: a network the
 * decision puts before or beside the ones handed out is left again, one at
 * a time.  Returns 1 when the round stands, 0 when the reports now say
 * otherwise (a new round follows), -1 on error. */
int gather_resume_final(struct ex *x, const struct agree_options *opt, struct exchange_result *res,
			np_error *err)
{
	struct gather *g = x->g;
	struct agree_options o = *opt;
	struct agree_decision d;
	bool stands = false;
	g->resume_final = false;
	for (;;) {
		np_error e = { 0 };
		if (gather_decide(x, &o, &d, &e) < 0) {
			agree_decision_free(&d);
			break;
		}
		bool routed = d.routed && g->resume_routed, direct = !d.routed && !g->resume_routed;
		size_t k = 0;
		while (direct && k < d.n_rails && k < g->n_final && strcmp(d.rails[k].net.text, g->final_parts[k].net) == 0)
			k++;
		if (routed || (direct && k == d.n_rails && k == g->n_final)) {
			stands = true;
			break;
		}
		bool leave = !d.routed && k < d.n_rails && !handed_out(g, d.rails[k].net.text) &&
			     o.n_excluded < AGREE_EXCLUDED_MAX;
		if (leave)
			o.excluded[o.n_excluded++] = d.rails[k].net;
		agree_decision_free(&d);
		if (!leave)
			break;
	}
	if (!stands) {
		g->warning[0] = '\0'; /* the new rounds find their own */
		ex_log(x, EXCHANGE_INFO, "round %d no longer stands on these reports: deciding again", g->epoch);
		return 0;
	}
	g->n_pods = (int)d.n_pods;
	struct member *me = gather_member(g, x->name, false);
	struct exchange_part *parts = me ? realloc(me->parts, g->n_final * sizeof(*parts)) : NULL;
	if (!parts) {
		agree_decision_free(&d);
		return me ? np_error_set(err, NP_EINTERNAL, 0, "out of memory")
			  : np_error_set(err, NP_EINTERNAL, 0, "the gatherer %s is not a member", x->name);
	}
	memcpy(parts, g->final_parts, g->n_final * sizeof(*parts));
	me->parts = parts;
	me->n_parts = g->n_final;
	ex_log(x, EXCHANGE_INFO, "round %d stands: %zu pods on %s%s", g->epoch, d.n_pods, d.rails[0].net.text,
	       g->n_final > 1 ? " and its other rails" : "");
	gather_fill_result(x, &d, res);
	return 1;
}
