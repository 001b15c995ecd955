/* Effective speeds: one walk down the lower graph (bond slaves, bridge
 * ports, the parent of a VLAN or macvlan) gives each interface the speed
 * traffic through it gets. */
#include "nic/nic.h"
#include "nic/nic_priv.h"

#include <stdlib.h>

enum { ST_NEW, ST_BUSY, ST_DONE };

struct speed_ctx {
	struct nic_list *l;
	struct nicp_index ix;
	unsigned char *st;
	long *phys;
};

/* phys: the speed when the interface is backed by physical hardware, else
 * -1 (a bridge counts only ports that lead to a real NIC); eff: the speed
 * traffic through it gets (nic.eff_speed_mbps). */
struct speeds {
	long phys, eff;
};

static bool slave_is_up(const struct nic *s)
{
	return s->up && s->carrier != 0;
}

static struct speeds walk(struct speed_ctx *c, size_t i)
{
	struct nic *n = &c->l->v[i];
	if (c->st[i] == ST_DONE)
		return (struct speeds){ c->phys[i], n->eff_speed_mbps };
	if (c->st[i] == ST_BUSY)
		return (struct speeds){ -1, -1 }; /* a loop in the lower graph */
	c->st[i] = ST_BUSY;
	struct speeds v = { -1, n->speed_mbps };
	switch (n->cls) {
	case NIC_CLASS_PHYSICAL:
	case NIC_CLASS_SRIOV_VF:
	case NIC_CLASS_IPOIB:
		v.phys = n->speed_mbps;
		break;
	case NIC_CLASS_BOND: {
		/* The sum of the slaves that are up. */
		long phys = -1, eff = -1;
		for (size_t k = 0; k < n->n_lower; k++) {
			ssize_t p = nicp_index_pos(&c->ix, n->lower[k]);
			if (p < 0 || !slave_is_up(&c->l->v[p]))
				continue;
			struct speeds s = walk(c, (size_t)p);
			if (s.phys > 0)
				phys = (phys < 0 ? 0 : phys) + s.phys;
			if (s.eff > 0)
				eff = (eff < 0 ? 0 : eff) + s.eff;
		}
		v.phys = phys;
		if (eff > 0)
			v.eff = eff;
		break;
	}
	case NIC_CLASS_BRIDGE:
		/* A bridge is as fast as its best port to real hardware; one
		 * with only veth/tap ports has no meaningful speed. */
		v.eff = -1;
		for (size_t k = 0; k < n->n_lower; k++) {
			ssize_t p = nicp_index_pos(&c->ix, n->lower[k]);
			if (p < 0)
				continue;
			struct speeds s = walk(c, (size_t)p);
			if (s.phys > v.eff)
				v.eff = s.phys;
		}
		break;
	case NIC_CLASS_VLAN:
	case NIC_CLASS_MACVLAN:
	case NIC_CLASS_IPVLAN:
		if (n->n_lower > 0) {
			ssize_t p = nicp_index_pos(&c->ix, n->lower[0]);
			if (p >= 0)
				v = walk(c, (size_t)p);
		}
		break;
	default:
		break;
	}
	c->phys[i] = v.phys;
	n->eff_speed_mbps = v.eff;
	c->st[i] = ST_DONE;
	return v;
}

void nic_compute_effective_speed(struct nic_list *l)
{
	struct speed_ctx c = { .l = l };
	if (l->n == 0)
		return;
	c.st = calloc(l->n, 1);
	c.phys = calloc(l->n, sizeof(long));
	bool ok = c.st && c.phys && nicp_index_build(&c.ix, l, NULL) == 0;
	for (size_t i = 0; i < l->n; i++) {
		if (ok)
			walk(&c, i);
		else /* out of memory: degrade to own speeds, never crash */
			l->v[i].eff_speed_mbps = l->v[i].speed_mbps;
	}
	if (ok)
		nicp_index_free(&c.ix);
	free(c.st);
	free(c.phys);
}
