/* The routed decision: no network is common to every pod, so each pod
 * takes its best candidate that has a gateway, one family for all. */
#include "agree/decide_priv.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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
int decide_routed(const struct ctx *c, struct agree_decision *d, np_error *err)
{
	int fams[2] = { decide_pref_family(c), decide_pref_family(c) == AF_INET ? AF_INET6 : AF_INET };
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
		if (decide_rail_init(c, rail, err) < 0) {
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
			decide_assign_from(c, e, &rail->assign[p]);
			if (e->mbps < rail->min_mbps)
				rail->min_mbps = e->mbps;
			if (e->score < rail->min_score)
				rail->min_score = e->score;
		}
	}
	free(best);
	return 0;
}
