/* Rails after the first: the next networks of the winner's quality, each
 * pod on an interface of its own; and a pod's rank on a rail. */
#include "agree/decide_priv.h"

#include <stdio.h>
#include <string.h>

/* A rail is as good as the first: the same worst-case speed (known) and
 * score, on the same family.  A slower network is never a rail: NCCL
 * stripes every message over the rails, so the slowest sets the pace. */
bool decide_same_quality(const struct netinfo *a, const struct netinfo *b)
{
	return a->state == NET_ELIGIBLE && a->min_mbps > 0 && a->min_mbps == b->min_mbps &&
	       a->min_score == b->min_score && a->net.pfx.family == b->net.pfx.family;
}

int decide_rails_max(const struct ctx *c)
{
	int m = c->opt->max_rails;
	return m == AGREE_RAILS_AUTO || m > AGREE_RAILS_MAX ? AGREE_RAILS_MAX : m < 1 ? 1 : m;
}

/* The pod's entry on a network on an interface no earlier rail of the
 * decision uses, at least as good as the network's worst case; NULL none. */
static const struct entry *own_on_net(const struct ctx *c, const struct netinfo *ni, size_t pod,
				      const struct agree_decision *d)
{
	const struct entry *e = decide_pod_on_net(c, ni, pod);
	for (; e && e < c->e + ni->first + ni->count && e->pod == pod; e++) {
		const char *ifname = c->r[pod]->c[e->cand].ifname;
		bool used = false;
		for (size_t k = 0; k < d->n_rails && !used; k++)
			used = strcmp(d->rails[k].assign[pod].ifname, ifname) == 0;
		if (!used && e->mbps >= ni->min_mbps && e->score >= ni->min_score)
			return e;
	}
	return NULL;
}

/* Rails after the first: the next networks of its quality, in rank order,
 * each pod on an interface of its own. */
int decide_add_rails(struct ctx *c, struct netinfo *win, struct agree_decision *d, np_error *err)
{
	win->rail = 1;
	for (size_t i = 1; i < c->nn && (int)d->n_rails < decide_rails_max(c); i++) {
		struct netinfo *ni = &c->nets[c->order[i]];
		if (!decide_same_quality(ni, win))
			continue;
		size_t p = 0;
		while (p < c->n && own_on_net(c, ni, p, d))
			p++;
		if (p < c->n) {
			ni->no_own_pod = (long)p;
			continue;
		}
		struct agree_rail *rail = &d->rails[d->n_rails];
		if (decide_rail_init(c, rail, err) < 0)
			return -1;
		rail->net = ni->net;
		rail->min_mbps = ni->min_mbps;
		rail->min_score = ni->min_score;
		for (p = 0; p < c->n; p++)
			decide_assign_from(c, own_on_net(c, ni, p, d), &rail->assign[p]);
		ni->rail = (int)++d->n_rails;
	}
	return 0;
}

int agree_rail_rank(const struct agree_rail *rail, const char *gatherer, const char *pod,
		    struct agree_rank *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	const struct agree_assign *root = NULL;
	int rank = -1, next = 1;
	for (size_t i = 0; i < rail->n_assign; i++) {
		const struct agree_assign *a = &rail->assign[i];
		bool is_root = strcmp(a->pod, gatherer) == 0;
		if (is_root)
			root = a;
		if (strcmp(a->pod, pod) == 0)
			rank = is_root ? 0 : next;
		if (!is_root)
			next++;
	}
	if (!root)
		return np_error_set(err, NP_EINTERNAL, 0, "the gatherer %s is not on the rail %s", gatherer,
				    rail->net.text);
	if (rank < 0)
		return np_error_set(err, NP_EINTERNAL, 0, "pod %s is not on the rail %s", pod, rail->net.text);
	out->rank = rank;
	out->world = (int)rail->n_assign;
	snprintf(out->root_addr, sizeof(out->root_addr), "%s", root->addr);
	out->min_mbps = rail->min_mbps;
	return 0;
}
