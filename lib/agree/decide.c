/* The job-wide decision: a pure function of the set of reports.
 *
 * Every (pod, candidate address) becomes an entry keyed by its network.  Two
 * sorts of the entries do all the work in O(E log E), E = all entries:
 * (network, address, pod) finds addresses that two pods share, (network,
 * pod, quality) finds which pods a network covers and its worst case.
 * Several candidates of one pod on one subnet form a group of which only
 * the best counts, and the route decides first (agree_cand.route). */
#include "agree/agree.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum net_state {
	NET_ELIGIBLE,
	NET_INCOMPLETE, /* some pod has no candidate on it */
	NET_DUPLICATE,	/* two pods report the same address on it */
	NET_FILTERED,	/* family or --cidr */
	NET_EXCLUDED,	/* failed probe */
};

struct entry {
	size_t pod;  /* index in name order */
	size_t cand; /* index into that pod's report */
	size_t orig; /* position in (pod, cand) order */
	size_t net;  /* network id */
	int family;
	int plen;
	unsigned char netb[16];
	unsigned char addr[16];
	long mbps, score;
	int route; /* 0: the kernel routes the subnet through it, 1: unknown, 2: not */
	long dup_pod; /* another pod with this address on this network, -1 none */
};

struct netinfo {
	struct agree_network net;
	size_t first, count; /* range in the (network, pod, quality) order */
	size_t n_pods;
	long min_mbps, min_score;
	enum net_state state;
	int rail;	     /* 1-based: the decision's rail on it; 0 none */
	long no_own_pod;     /* same quality, but this pod has no interface of
			      * its own on it (it is on another rail); -1 none */
	size_t dup_a, dup_b; /* pods sharing dup_addr */
	unsigned char dup_addr[16];
};

struct ctx {
	const struct agree_view **r; /* by pod name */
	size_t n;
	const struct agree_options *opt;
	struct entry *e;
	size_t ne;
	size_t *pos; /* orig -> index in e */
	size_t *pod_first; /* first orig of each pod; pod_first[n] = ne */
	struct netinfo *nets;
	size_t nn;
	size_t *order; /* nets, best first */
};

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

static int pref_family(const struct ctx *c)
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
		return a->net.pfx.family == pref_family(c) ? -1 : 1;
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

static void speed_text(long mbps, char *buf, size_t len)
{
	if (mbps < 0)
		snprintf(buf, len, "unknown speed");
	else
		snprintf(buf, len, "%ld Mb/s", mbps);
}

/* Append to a fixed buffer; marks truncation with "..." */
__attribute__((format(printf, 3, 4))) static void append(char *buf, size_t len, const char *fmt,
							  ...)
{
	size_t used = strlen(buf);
	if (used + 4 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
	if (w >= 0 && used + (size_t)w >= len)
		strcpy(buf + len - 4, "...");
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
static const struct entry *pod_on_net(const struct ctx *c, const struct netinfo *ni, size_t pod)
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

static void assign_from(const struct ctx *c, const struct entry *e, struct agree_assign *a)
{
	const struct agree_cand *k = &c->r[e->pod]->c[e->cand];
	snprintf(a->pod, sizeof(a->pod), "%s", c->r[e->pod]->pod);
	snprintf(a->ifname, sizeof(a->ifname), "%s", k->ifname);
	a->family = k->family;
	if (!inet_ntop(k->family, k->addr, a->addr, sizeof(a->addr)))
		strcpy(a->addr, "?");
	a->prefixlen = k->prefixlen;
}

static int rail_init(const struct ctx *c, struct agree_rail *rail, np_error *err)
{
	rail->assign = calloc(c->n ? c->n : 1, sizeof(*rail->assign));
	if (!rail->assign)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	rail->n_assign = c->n;
	return 0;
}

static int cmp_addr16(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

/* Chosen entries lie in different networks, so the per-network duplicate
 * check has not compared them: two pods must still not share an address. */
static bool routed_addrs_clash(const struct ctx *c, const size_t *best)
{
	unsigned char(*a)[16] = malloc(c->n * 16);
	bool clash = !a;
	for (size_t p = 0; a && p < c->n; p++)
		memcpy(a[p], c->e[best[p]].addr, 16);
	if (a)
		qsort(a, c->n, 16, cmp_addr16);
	for (size_t p = 1; a && p < c->n && !clash; p++)
		clash = !memcmp(a[p - 1], a[p], 16);
	free(a);
	return clash;
}

/* No network is common: each pod reaches the others through a gateway. */
static int decide_routed(const struct ctx *c, struct agree_decision *d, np_error *err)
{
	int fams[2] = { pref_family(c), pref_family(c) == AF_INET ? AF_INET6 : AF_INET };
	size_t *best = calloc(c->n ? c->n : 1, sizeof(*best));
	if (!best)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	for (int f = 0; f < 2 && !d->ok; f++) {
		if (c->opt->family && c->opt->family != fams[f])
			continue;
		for (size_t p = 0; p < c->n; p++)
			best[p] = SIZE_MAX;
		for (size_t i = 0; i < c->ne; i++) {
			const struct entry *e = &c->e[i];
			enum net_state s = c->nets[e->net].state;
			if (e->family != fams[f] || e->dup_pod >= 0 || s == NET_DUPLICATE ||
			    s == NET_FILTERED || s == NET_EXCLUDED || !c->r[e->pod]->c[e->cand].has_gw)
				continue;
			const struct entry *b = best[e->pod] == SIZE_MAX ? NULL : &c->e[best[e->pod]];
			if (!b || e->mbps > b->mbps || (e->mbps == b->mbps && e->score > b->score) ||
			    (e->mbps == b->mbps && e->score == b->score && e->cand < b->cand))
				best[e->pod] = i;
		}
		size_t p = 0;
		while (p < c->n && best[p] != SIZE_MAX)
			p++;
		if (p < c->n || !c->n || routed_addrs_clash(c, best))
			continue;
		struct agree_rail *rail = &d->rails[0];
		if (rail_init(c, rail, err) < 0) {
			free(best);
			return -1;
		}
		d->n_rails = 1;
		d->ok = d->routed = true;
		rail->net.pfx.family = fams[f];
		strcpy(rail->net.text, "routed");
		rail->min_mbps = c->e[best[0]].mbps;
		rail->min_score = c->e[best[0]].score;
		for (p = 0; p < c->n; p++) {
			const struct entry *e = &c->e[best[p]];
			assign_from(c, e, &rail->assign[p]);
			if (e->mbps < rail->min_mbps)
				rail->min_mbps = e->mbps;
			if (e->score < rail->min_score)
				rail->min_score = e->score;
		}
	}
	free(best);
	return 0;
}

static void missing_pods(const struct ctx *c, const struct netinfo *ni, char *buf, size_t len)
{
	size_t shown = 0, k = ni->first, end = ni->first + ni->count;
	buf[0] = '\0';
	append(buf, len, "no candidate on %zu of %zu pods:", c->n - ni->n_pods, c->n);
	for (size_t p = 0; p < c->n && shown < 3; p++) {
		while (k < end && c->e[k].pod < p)
			k++;
		if (k < end && c->e[k].pod == p)
			continue;
		append(buf, len, "%s %s", shown ? "," : "", c->r[p]->pod);
		shown++;
	}
	if (c->n - ni->n_pods > shown)
		append(buf, len, " and %zu more", c->n - ni->n_pods - shown);
}

/* A rail is as good as the first: the same worst-case speed (known) and
 * score, on the same family.  A slower network is never a rail: NCCL
 * stripes every message over the rails, so the slowest sets the pace. */
static bool same_quality(const struct netinfo *a, const struct netinfo *b)
{
	return a->state == NET_ELIGIBLE && a->min_mbps > 0 && a->min_mbps == b->min_mbps &&
	       a->min_score == b->min_score && a->net.pfx.family == b->net.pfx.family;
}

static int rails_max(const struct ctx *c)
{
	int m = c->opt->max_rails;
	return m == AGREE_RAILS_AUTO || m > AGREE_RAILS_MAX ? AGREE_RAILS_MAX : m < 1 ? 1 : m;
}

/* The pod's entry on a network on an interface no earlier rail of the
 * decision uses, at least as good as the network's worst case; NULL none. */
static const struct entry *own_on_net(const struct ctx *c, const struct netinfo *ni, size_t pod,
				      const struct agree_decision *d)
{
	const struct entry *e = pod_on_net(c, ni, pod);
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
static int add_rails(struct ctx *c, struct netinfo *win, struct agree_decision *d, np_error *err)
{
	win->rail = 1;
	for (size_t i = 1; i < c->nn && (int)d->n_rails < rails_max(c); i++) {
		struct netinfo *ni = &c->nets[c->order[i]];
		if (!same_quality(ni, win))
			continue;
		size_t p = 0;
		while (p < c->n && own_on_net(c, ni, p, d))
			p++;
		if (p < c->n) {
			ni->no_own_pod = (long)p;
			continue;
		}
		struct agree_rail *rail = &d->rails[d->n_rails];
		if (rail_init(c, rail, err) < 0)
			return -1;
		rail->net = ni->net;
		rail->min_mbps = ni->min_mbps;
		rail->min_score = ni->min_score;
		for (p = 0; p < c->n; p++)
			assign_from(c, own_on_net(c, ni, p, d), &rail->assign[p]);
		ni->rail = (int)++d->n_rails;
	}
	return 0;
}

static void why_lost(const struct ctx *c, const struct netinfo *ni, const struct netinfo *win,
		     char *buf, size_t len)
{
	char s1[32], s2[32], a[NP_PREFIX_TEXT_MAX];
	buf[0] = '\0';
	switch (ni->state) {
	case NET_EXCLUDED:
		append(buf, len, "excluded after a failed probe");
		return;
	case NET_FILTERED:
		if (c->opt->family && c->opt->family != ni->net.pfx.family) {
			append(buf, len, "family %s not allowed",
			       ni->net.pfx.family == AF_INET ? "inet" : "inet6");
			return;
		}
		np_prefix_format(&c->opt->cidr, a, sizeof(a));
		append(buf, len, "outside %s", a);
		return;
	case NET_DUPLICATE:
		inet_ntop(ni->net.pfx.family, ni->dup_addr, a, sizeof(a));
		append(buf, len, "duplicate address %s on pods %s and %s", a, c->r[ni->dup_a]->pod,
			 c->r[ni->dup_b]->pod);
		return;
	case NET_INCOMPLETE:
		missing_pods(c, ni, buf, len);
		return;
	case NET_ELIGIBLE:
		break;
	}
	speed_text(ni->min_mbps, s1, sizeof(s1));
	if (!win || ni == win)
		append(buf, len, "chosen: worst case %s on all %zu pods", s1, c->n);
	else if (ni->rail)
		append(buf, len, "rail %d: worst case %s on all %zu pods, the same quality as %s",
		       ni->rail, s1, c->n, win->net.text);
	else if (ni->no_own_pod >= 0)
		append(buf, len, "same quality as %s, but pod %s has no interface on it that no other "
		       "rail uses", win->net.text, c->r[ni->no_own_pod]->pod);
	else if (same_quality(ni, win) && rails_max(c) > 1)
		append(buf, len, "same quality as %s, beyond the %d rails allowed", win->net.text,
		       rails_max(c));
	else if (ni->min_mbps != win->min_mbps)
		append(buf, len, "slower: worst case %s < %s on %s", s1,
			 (speed_text(win->min_mbps, s2, sizeof(s2)), s2), win->net.text);
	else if (ni->min_score != win->min_score)
		append(buf, len, "same speed, worst-case score %ld < %ld on %s", ni->min_score,
			 win->min_score, win->net.text);
	else if (ni->net.pfx.family != win->net.pfx.family)
		append(buf, len, "same quality as %s, %s preferred", win->net.text,
			 win->net.pfx.family == AF_INET ? "IPv4" : "IPv6");
	else
		append(buf, len, "same quality as %s, which sorts first", win->net.text);
}

/* Why a pod is not covered: the best-covered networks it lacks, duplicates, exclusions. */
static void pod_why(const struct ctx *c, size_t p, char *buf, size_t len)
{
	buf[0] = '\0';
	if (c->pod_first[p] == c->pod_first[p + 1])
		append(buf, len, "no usable candidate; ");
	size_t shown = 0;
	for (size_t i = 0; i < c->nn && shown < 3; i++) {
		const struct netinfo *ni = &c->nets[c->order[i]];
		if (ni->state != NET_INCOMPLETE)
			continue;
		shown++;
		if (!pod_on_net(c, ni, p))
			append(buf, len, "no candidate on %s (%zu of %zu pods have one); ",
			       ni->net.text, ni->n_pods, c->n);
	}
	for (size_t o = c->pod_first[p]; o < c->pod_first[p + 1]; o++) {
		const struct entry *e = &c->e[c->pos[o]];
		const struct netinfo *ni = &c->nets[e->net];
		char a[AGREE_ADDR_TEXT_MAX];
		if (e->dup_pod >= 0) {
			inet_ntop(e->family, e->addr, a, sizeof(a));
			append(buf, len, "duplicate address %s also on pod %s; ", a,
			       c->r[e->dup_pod]->pod);
		} else if (ni->state == NET_EXCLUDED) {
			append(buf, len, "%s excluded after a failed probe; ", ni->net.text);
		} else if (ni->state == NET_FILTERED) {
			append(buf, len, "%s filtered out by family/cidr; ", ni->net.text);
		}
	}
	size_t l = strlen(buf);
	if (l >= 2 && !strcmp(buf + l - 2, "; "))
		buf[l - 2] = '\0';
}

static void pod_cands(const struct agree_view *r, char *buf, size_t len)
{
	buf[0] = '\0';
	for (size_t i = 0; i < r->n && i < AGREE_CAND_MAX; i++) {
		const struct agree_cand *k = &r->c[i];
		char a[AGREE_ADDR_TEXT_MAX], s[32];
		if (!inet_ntop(k->family, k->addr, a, sizeof(a)))
			continue;
		speed_text(k->mbps, s, sizeof(s));
		append(buf, len, "%s%s %s/%d %s", i ? ", " : "", k->ifname, a, k->prefixlen, s);
	}
	if (!buf[0])
		snprintf(buf, len, "none");
}

static int no_common(const struct ctx *c, struct agree_decision *d, np_error *err)
{
	d->table = calloc(AGREE_TABLE_KEEP, sizeof(*d->table));
	if (!d->table)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	char why[AGREE_WHY_MAX];
	snprintf(d->error, sizeof(d->error), "the job's %zu pods share no usable network", c->n);
	for (size_t p = 0; p < c->n; p++) {
		pod_why(c, p, why, sizeof(why));
		if (!why[0])
			continue;
		if (d->n_table < AGREE_TABLE_KEEP) {
			struct agree_pod_row *row = &d->table[d->n_table++];
			snprintf(row->pod, sizeof(row->pod), "%s", c->r[p]->pod);
			snprintf(row->why, sizeof(row->why), "%s", why);
			pod_cands(c->r[p], row->cands, sizeof(row->cands));
		}
		if (d->table_total++ < 4)
			append(d->error, sizeof(d->error), "%s %s: %s", d->table_total > 1 ? ";" : ":",
			       c->r[p]->pod, why);
	}
	if (d->table_total > 4)
		append(d->error, sizeof(d->error), "; and %zu more pods", d->table_total - 4);
	return np_error_set(err, NP_ENOCOMMON, 0, "%s", d->error);
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
		if (rail_init(&c, rail, err) < 0)
			goto out;
		out->ok = true;
		out->n_rails = 1;
		rail->net = win->net;
		rail->min_mbps = win->min_mbps;
		rail->min_score = win->min_score;
		for (size_t p = 0; p < n; p++)
			assign_from(&c, pod_on_net(&c, win, p), &rail->assign[p]);
		if (add_rails(&c, &c.nets[c.order[0]], out, err) < 0)
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
		why_lost(&c, ni, win, rk->why, sizeof(rk->why));
	}
	rc = out->ok ? 0 : no_common(&c, out, err);
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
