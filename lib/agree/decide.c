/* The job-wide decision: a pure function of the set of reports.
 *
 * Every (pod, candidate address) becomes an entry keyed by its network.  Two
 * sorts of the entries do all the work in O(E log E), E = all entries:
 * (network, address, pod) finds addresses that two pods share, (network,
 * pod, quality) finds which pods a network covers and its worst case.
 * Several candidates of one pod on one subnet form a group of which only
 * the best counts, and the route decides first (agree_cand.route).
 * The rails after the first are rails.c, the routed decision routed.c, the
 * words of it explain.c. */
#include "agree/decide_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int cmp_report(const void *a, const void *b)
{
	return strcmp((*(const struct agree_view *const *)a)->pod,
		      (*(const struct agree_view *const *)b)->pod);
}

static int cmp_netkey(const struct entry *a, const struct entry *b)
{
	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	int c = memcmp(a->netb, b->netb, 16);
	if (c)
		return c;
	return a->plen < b->plen ? -1 : a->plen > b->plen;
}

static int cmp_by_addr(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;
	int c = cmp_netkey(a, b);
	if (!c)
		c = memcmp(a->addr, b->addr, 16);
	if (!c)
		c = a->pod < b->pod ? -1 : a->pod > b->pod;
	if (!c)
		c = a->cand < b->cand ? -1 : a->cand > b->cand;
	return c;
}

/* Within a pod, the better entry first: the interface the kernel routes
 * the subnet through (a pod with several on one subnet can use no other:
 * its traffic leaves through that one whatever NCCL is told), then faster,
 * higher score, earlier in its report. */
static int cmp_by_pod(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;
	if (a->net != b->net)
		return a->net < b->net ? -1 : 1;
	if (a->pod != b->pod)
		return a->pod < b->pod ? -1 : 1;
	if (a->route != b->route)
		return a->route < b->route ? -1 : 1;
	if (a->mbps != b->mbps)
		return a->mbps > b->mbps ? -1 : 1;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->cand < b->cand ? -1 : a->cand > b->cand;
}

static const struct agree_options default_opt;

int decide_pref_family(const struct ctx *c)
{
	return c->opt->family == AF_INET6 ? AF_INET6 : AF_INET;
}

static int cmp_quality(const struct ctx *c, const struct netinfo *a, const struct netinfo *b)
{
	if (a->min_mbps != b->min_mbps)
		return a->min_mbps > b->min_mbps ? -1 : 1;
	if (a->min_score != b->min_score)
		return a->min_score > b->min_score ? -1 : 1;
	if (a->net.pfx.family != b->net.pfx.family)
		return a->net.pfx.family == decide_pref_family(c) ? -1 : 1;
	return strcmp(a->net.text, b->net.text);
}

static int cmp_rank(const void *pa, const void *pb, void *arg)
{
	const struct ctx *c = arg;
	const struct netinfo *a = &c->nets[*(const size_t *)pa];
	const struct netinfo *b = &c->nets[*(const size_t *)pb];
	bool ea = a->state == NET_ELIGIBLE, eb = b->state == NET_ELIGIBLE;
	if (ea != eb)
		return ea ? -1 : 1;
	if (!ea && a->n_pods != b->n_pods)
		return a->n_pods > b->n_pods ? -1 : 1;
	return cmp_quality(c, a, b);
}

static int build_entries(struct ctx *c, np_error *err)
{
	size_t total = 0;
	for (size_t p = 0; p < c->n; p++)
		total += c->r[p]->n < AGREE_CAND_MAX ? c->r[p]->n : AGREE_CAND_MAX;
	c->e = calloc(total ? total : 1, sizeof(*c->e));
	c->pos = calloc(total ? total : 1, sizeof(*c->pos));
	c->pod_first = calloc(c->n + 1, sizeof(*c->pod_first));
	if (!c->e || !c->pos || !c->pod_first)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	for (size_t p = 0; p < c->n; p++) {
		const struct agree_view *r = c->r[p];
		c->pod_first[p] = c->ne;
		for (size_t i = 0; i < r->n && i < AGREE_CAND_MAX; i++) {
			const struct agree_cand *k = &r->c[i];
			int max = k->family == AF_INET ? 32 : 128;
			if ((k->family != AF_INET && k->family != AF_INET6) || k->prefixlen < 1 ||
			    k->prefixlen > max)
				continue; /* only hand-built reports get here: parse refuses them */
			struct entry *e = &c->e[c->ne];
			e->pod = p;
			e->cand = i;
			e->orig = c->ne++;
			e->family = k->family;
			e->plen = k->prefixlen;
			memcpy(e->addr, k->addr, 16);
			if (k->family == AF_INET)
				memset(e->addr + 4, 0, 12);
			memcpy(e->netb, e->addr, 16);
			np_prefix_mask(e->family, e->netb, e->plen);
			e->mbps = k->mbps;
			e->score = k->score;
			e->route = k->route == AGREE_ROUTE_USED ? 0 : k->route == AGREE_ROUTE_UNKNOWN ? 1 : 2;
			e->dup_pod = -1;
		}
	}
	c->pod_first[c->n] = c->ne;
	return 0;
}

static bool is_excluded(const struct ctx *c, const struct agree_network *n)
{
	for (size_t i = 0; i < c->opt->n_excluded && i < AGREE_EXCLUDED_MAX; i++)
		if (np_prefix_equal(&c->opt->excluded[i].pfx, &n->pfx))
			return true;
	return false;
}

/* Networks, duplicate addresses, coverage and worst case of each network. */
static int index_networks(struct ctx *c, np_error *err)
{
	qsort(c->e, c->ne, sizeof(*c->e), cmp_by_addr);
	c->nets = calloc(c->ne ? c->ne : 1, sizeof(*c->nets));
	if (!c->nets)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	for (size_t i = 0; i < c->ne;) {
		struct netinfo *ni = &c->nets[c->nn];
		size_t end = i;
		while (end < c->ne && !cmp_netkey(&c->e[i], &c->e[end]))
			end++;
		ni->net.pfx.family = c->e[i].family;
		memcpy(ni->net.pfx.bytes, c->e[i].netb, 16);
		ni->net.pfx.len = c->e[i].plen;
		np_prefix_format(&ni->net.pfx, ni->net.text, sizeof(ni->net.text));
		ni->state = NET_ELIGIBLE;
		ni->no_own_pod = -1;
		/* Runs of one address: sorted by pod, so first and last differ iff two pods share it. */
		for (size_t a = i; a < end;) {
			size_t b = a;
			while (b < end && !memcmp(c->e[a].addr, c->e[b].addr, 16))
				b++;
			if (c->e[a].pod != c->e[b - 1].pod) {
				for (size_t k = a; k < b; k++)
					c->e[k].dup_pod = (long)(c->e[k].pod == c->e[a].pod ? c->e[b - 1].pod
											   : c->e[a].pod);
				if (ni->state != NET_DUPLICATE) {
					ni->state = NET_DUPLICATE;
					ni->dup_a = c->e[a].pod;
					ni->dup_b = c->e[b - 1].pod;
					memcpy(ni->dup_addr, c->e[a].addr, 16);
				}
			}
			a = b;
		}
		for (size_t k = i; k < end; k++)
			c->e[k].net = c->nn;
		c->nn++;
		i = end;
	}
	qsort(c->e, c->ne, sizeof(*c->e), cmp_by_pod);
	for (size_t i = 0; i < c->ne; i++)
		c->pos[c->e[i].orig] = i;
	for (size_t i = 0; i < c->ne;) {
		struct netinfo *ni = &c->nets[c->e[i].net];
		ni->first = i;
		ni->min_mbps = c->e[i].mbps;
		ni->min_score = c->e[i].score;
		size_t k = i;
		for (; k < c->ne && c->e[k].net == c->e[i].net; k++) {
			if (k > i && c->e[k].pod == c->e[k - 1].pod)
				continue; /* not the pod's best entry on this network */
			ni->n_pods++;
			if (c->e[k].mbps < ni->min_mbps)
				ni->min_mbps = c->e[k].mbps;
			if (c->e[k].score < ni->min_score)
				ni->min_score = c->e[k].score;
		}
		ni->count = k - i;
		i = k;
	}
	const struct agree_options *o = c->opt;
	for (size_t i = 0; i < c->nn; i++) {
		struct netinfo *ni = &c->nets[i];
		if (is_excluded(c, &ni->net))
			ni->state = NET_EXCLUDED;
		else if ((o->family && o->family != ni->net.pfx.family) ||
			 (o->has_cidr && !np_prefix_covers(&o->cidr, &ni->net.pfx)))
			ni->state = NET_FILTERED;
		else if (ni->state == NET_ELIGIBLE && ni->n_pods < c->n)
			ni->state = NET_INCOMPLETE;
	}
	c->order = calloc(c->nn ? c->nn : 1, sizeof(*c->order));
	if (!c->order)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	for (size_t i = 0; i < c->nn; i++)
		c->order[i] = i;
	qsort_r(c->order, c->nn, sizeof(*c->order), cmp_rank, c);
	return 0;
}

/* The pod's best entry on a network, or NULL (the range is sorted by pod). */
const struct entry *decide_pod_on_net(const struct ctx *c, const struct netinfo *ni, size_t pod)
{
	size_t lo = ni->first, hi = ni->first + ni->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->e[mid].pod < pod)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < ni->first + ni->count && c->e[lo].pod == pod)
		return &c->e[lo];
	return NULL;
}

void decide_assign_from(const struct ctx *c, const struct entry *e, struct agree_assign *a)
{
	const struct agree_cand *k = &c->r[e->pod]->c[e->cand];
	snprintf(a->pod, sizeof(a->pod), "%s", c->r[e->pod]->pod);
	snprintf(a->ifname, sizeof(a->ifname), "%s", k->ifname);
	a->family = k->family;
	if (!inet_ntop(k->family, k->addr, a->addr, sizeof(a->addr)))
		strcpy(a->addr, "?");
	a->prefixlen = k->prefixlen;
}

int decide_rail_init(const struct ctx *c, struct agree_rail *rail, np_error *err)
{
	rail->assign = calloc(c->n ? c->n : 1, sizeof(*rail->assign));
	if (!rail->assign)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	rail->n_assign = c->n;
	return 0;
}

struct agree_view agree_report_view(const struct agree_report *r)
{
	return (struct agree_view){ .pod = r->pod, .node = r->node, .gpu = &r->gpu,
				    .n = r->n < AGREE_CAND_MAX ? r->n : AGREE_CAND_MAX, .c = r->c };
}

int agree_decide(const struct agree_report *reports, size_t n, const struct agree_options *opt,
		 struct agree_decision *out, np_error *err)
{
	struct agree_view *v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		memset(out, 0, sizeof(*out));
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	}
	for (size_t i = 0; i < n; i++)
		v[i] = agree_report_view(&reports[i]);
	int r = agree_decide_views(v, n, opt, out, err);
	free(v);
	return r;
}

int agree_decide_views(const struct agree_view *reports, size_t n, const struct agree_options *opt,
		       struct agree_decision *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	struct ctx c = { .n = n, .opt = opt ? opt : &default_opt };
	int rc = -1;
	for (size_t i = 0; i < c.opt->n_excluded && i < AGREE_EXCLUDED_MAX; i++)
		out->excluded[out->n_excluded++] = c.opt->excluded[i];
	out->n_pods = n;
	if (n == 0 || n > AGREE_PODS_MAX)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot decide for %zu pods", n);
	c.r = calloc(n, sizeof(*c.r));
	if (!c.r)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	for (size_t i = 0; i < n; i++)
		c.r[i] = &reports[i];
	qsort(c.r, n, sizeof(*c.r), cmp_report);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(c.r[i]->pod, c.r[i - 1]->pod)) {
			np_error_set(err, NP_EINTERNAL, 0, "pod %s reported twice", c.r[i]->pod);
			goto out;
		}
	}
	if (build_entries(&c, err) < 0 || index_networks(&c, err) < 0)
		goto out;
	const struct netinfo *win = NULL;
	if (c.nn && c.nets[c.order[0]].state == NET_ELIGIBLE) {
		win = &c.nets[c.order[0]];
		struct agree_rail *rail = &out->rails[0];
		if (decide_rail_init(&c, rail, err) < 0)
			goto out;
		out->ok = true;
		out->n_rails = 1;
		rail->net = win->net;
		rail->min_mbps = win->min_mbps;
		rail->min_score = win->min_score;
		for (size_t p = 0; p < n; p++)
			decide_assign_from(&c, decide_pod_on_net(&c, win, p), &rail->assign[p]);
		if (decide_add_rails(&c, &c.nets[c.order[0]], out, err) < 0)
			goto out;
	} else if (!c.opt->no_routed && decide_routed(&c, out, err) < 0) {
		goto out;
	}
	out->nets_total = c.nn;
	out->n_nets = c.nn < AGREE_NETS_KEEP ? c.nn : AGREE_NETS_KEEP;
	out->nets = calloc(out->n_nets ? out->n_nets : 1, sizeof(*out->nets));
	if (!out->nets) {
		np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
		goto out;
	}
	for (size_t i = 0; i < out->n_nets; i++) {
		const struct netinfo *ni = &c.nets[c.order[i]];
		struct agree_ranked *rk = &out->nets[i];
		rk->net = ni->net;
		rk->n_pods = ni->n_pods;
		rk->min_mbps = ni->min_mbps;
		rk->min_score = ni->min_score;
		rk->eligible = ni->state == NET_ELIGIBLE;
		decide_why_lost(&c, ni, win, rk->why, sizeof(rk->why));
	}
	rc = out->ok ? 0 : decide_no_common(&c, out, err);
out:
	free(c.r);
	free(c.e);
	free(c.pos);
	free(c.pod_first);
	free(c.nets);
	free(c.order);
	return rc;
}

void agree_decision_free(struct agree_decision *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < AGREE_RAILS_MAX; i++) {
		free(d->rails[i].assign);
		d->rails[i].assign = NULL;
		d->rails[i].n_assign = 0;
	}
	free(d->nets);
	free(d->table);
	d->nets = NULL;
	d->table = NULL;
	d->n_rails = d->n_nets = d->n_table = 0;
}
