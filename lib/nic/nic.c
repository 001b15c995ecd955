/* The interface list: lifetime, lookups, the discovery pipeline and the
 * effective-speed computation. */
#include "nic/nic.h"
#include "nic/nic_priv.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/prefix.h"
#include "util/grow.h"

static const char *const class_names[NIC_CLASS_COUNT] = {
	[NIC_CLASS_PHYSICAL] = "physical",
	[NIC_CLASS_SRIOV_VF] = "sriov-vf",
	[NIC_CLASS_BOND] = "bond",
	[NIC_CLASS_VLAN] = "vlan",
	[NIC_CLASS_MACVLAN] = "macvlan",
	[NIC_CLASS_IPVLAN] = "ipvlan",
	[NIC_CLASS_IPOIB] = "ipoib",
	[NIC_CLASS_VETH] = "veth",
	[NIC_CLASS_BRIDGE] = "bridge",
	[NIC_CLASS_TUNNEL] = "tunnel",
	[NIC_CLASS_TUNTAP] = "tuntap",
	[NIC_CLASS_LOOPBACK] = "loopback",
	[NIC_CLASS_VIRTUAL] = "virtual",
};

const char *nic_class_name(enum nic_class c)
{
	if ((int)c < 0 || c >= NIC_CLASS_COUNT)
		return NULL;
	return class_names[c];
}

int nic_class_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < NIC_CLASS_COUNT; i++)
		if (strcmp(class_names[i], name) == 0)
			return i;
	return -1;
}

bool nic_addr_is_link_local(const struct nic_addr *a)
{
	static const struct np_prefix v4 = { .family = AF_INET, .bytes = { 169, 254 }, .len = 16 };
	static const struct np_prefix v6 = { .family = AF_INET6, .bytes = { 0xfe, 0x80 }, .len = 10 };
	return np_prefix_contains(&v4, a->family, a->bytes) || np_prefix_contains(&v6, a->family, a->bytes);
}

void nicp_nic_init(struct nic *n)
{
	memset(n, 0, sizeof(*n));
	n->arphrd = -1;
	n->cls = NIC_CLASS_VIRTUAL;
	n->carrier = -1;
	n->speed_mbps = -1;
	n->eff_speed_mbps = -1;
	n->numa_node = -1;
}

void nicp_nic_clear(struct nic *n)
{
	free(n->lower);
	free(n->addrs);
	free(n->rdma);
	n->lower = NULL;
	n->addrs = NULL;
	n->rdma = NULL;
	n->n_lower = n->n_addrs = n->n_rdma = 0;
}

void nic_list_free(struct nic_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		nicp_nic_clear(&l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

struct nic *nicp_list_add(struct nic_list *l, size_t *cap, np_error *err)
{
	if (np_grow(&l->v, cap, l->n, sizeof(*l->v), 16) < 0) {
		np_error_set(err, NP_EINTERNAL, ENOMEM, "interface list");
		return NULL;
	}
	struct nic *n = &l->v[l->n++];
	nicp_nic_init(n);
	return n;
}

int nicp_nic_add_addr(struct nic *n, const struct nic_addr *a, np_error *err)
{
	/* Interfaces carry a handful of addresses: grow by one. */
	struct nic_addr *v = realloc(n->addrs, (n->n_addrs + 1) * sizeof(*v));
	if (!v)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "addresses of %s", n->name);
	n->addrs = v;
	n->addrs[n->n_addrs++] = *a;
	return 0;
}

const struct nic *nic_list_find_index(const struct nic_list *l, int ifindex)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].ifindex == ifindex)
			return &l->v[i];
	return NULL;
}

const struct nic *nic_list_find_name(const struct nic_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return &l->v[i];
	return NULL;
}

/* ---- index ---- */

static size_t hash_int(int v)
{
	uint32_t x = (uint32_t)v;
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

static size_t hash_str(const char *s)
{
	uint32_t h = 2166136261U; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619U;
	return h;
}

int nicp_index_build(struct nicp_index *ix, const struct nic_list *l, np_error *err)
{
	size_t cap = 16;
	while (cap < l->n * 2)
		cap *= 2;
	ix->cap = cap;
	ix->l = l;
	ix->by_idx = malloc(cap * sizeof(ssize_t));
	ix->by_name = malloc(cap * sizeof(ssize_t));
	if (!ix->by_idx || !ix->by_name) {
		nicp_index_free(ix);
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "interface index");
	}
	for (size_t i = 0; i < cap; i++)
		ix->by_idx[i] = ix->by_name[i] = -1;
	for (size_t i = 0; i < l->n; i++) {
		size_t h = hash_int(l->v[i].ifindex) & (cap - 1);
		while (ix->by_idx[h] >= 0)
			h = (h + 1) & (cap - 1);
		ix->by_idx[h] = (ssize_t)i;
		h = hash_str(l->v[i].name) & (cap - 1);
		while (ix->by_name[h] >= 0)
			h = (h + 1) & (cap - 1);
		ix->by_name[h] = (ssize_t)i;
	}
	return 0;
}

void nicp_index_free(struct nicp_index *ix)
{
	free(ix->by_idx);
	free(ix->by_name);
	ix->by_idx = ix->by_name = NULL;
}

ssize_t nicp_index_pos(const struct nicp_index *ix, int ifindex)
{
	if (ifindex <= 0)
		return -1;
	for (size_t h = hash_int(ifindex) & (ix->cap - 1);; h = (h + 1) & (ix->cap - 1)) {
		ssize_t p = ix->by_idx[h];
		if (p < 0)
			return -1;
		if (ix->l->v[p].ifindex == ifindex)
			return p;
	}
}

ssize_t nicp_index_name(const struct nicp_index *ix, const char *name)
{
	for (size_t h = hash_str(name) & (ix->cap - 1);; h = (h + 1) & (ix->cap - 1)) {
		ssize_t p = ix->by_name[h];
		if (p < 0)
			return -1;
		if (strcmp(ix->l->v[p].name, name) == 0)
			return p;
	}
}

/* ---- effective speed ---- */

enum { ST_NEW, ST_BUSY, ST_DONE };

struct speed_ctx {
	struct nic_list *l;
	struct nicp_index ix;
	unsigned char *st_eff, *st_phys;
	long *phys;
};

static long eff_of(struct speed_ctx *c, size_t i);

static bool slave_is_up(const struct nic *s)
{
	return s->up && s->carrier != 0;
}

/* Speed of i when it is backed by physical hardware, else -1: a bridge
 * counts only ports that lead to a real NIC. */
static long phys_of(struct speed_ctx *c, size_t i)
{
	if (c->st_phys[i] == ST_DONE)
		return c->phys[i];
	if (c->st_phys[i] == ST_BUSY)
		return -1; /* a loop in the lower graph */
	c->st_phys[i] = ST_BUSY;
	struct nic *n = &c->l->v[i];
	long v = -1;
	switch (n->cls) {
	case NIC_CLASS_PHYSICAL:
	case NIC_CLASS_SRIOV_VF:
	case NIC_CLASS_IPOIB:
		v = n->speed_mbps;
		break;
	case NIC_CLASS_BOND:
		for (size_t k = 0; k < n->n_lower; k++) {
			ssize_t p = nicp_index_pos(&c->ix, n->lower[k]);
			if (p < 0 || !slave_is_up(&c->l->v[p]))
				continue;
			long s = phys_of(c, (size_t)p);
			if (s > 0)
				v = (v < 0 ? 0 : v) + s;
		}
		break;
	case NIC_CLASS_VLAN:
	case NIC_CLASS_MACVLAN:
	case NIC_CLASS_IPVLAN:
		if (n->n_lower > 0) {
			ssize_t p = nicp_index_pos(&c->ix, n->lower[0]);
			if (p >= 0)
				v = phys_of(c, (size_t)p);
		}
		break;
	default:
		break;
	}
	c->phys[i] = v;
	c->st_phys[i] = ST_DONE;
	return v;
}

static long eff_of(struct speed_ctx *c, size_t i)
{
	struct nic *n = &c->l->v[i];
	if (c->st_eff[i] == ST_DONE)
		return n->eff_speed_mbps;
	if (c->st_eff[i] == ST_BUSY)
		return -1;
	c->st_eff[i] = ST_BUSY;
	long v = n->speed_mbps;
	switch (n->cls) {
	case NIC_CLASS_BOND: {
		long sum = -1;
		for (size_t k = 0; k < n->n_lower; k++) {
			ssize_t p = nicp_index_pos(&c->ix, n->lower[k]);
			if (p < 0 || !slave_is_up(&c->l->v[p]))
				continue;
			long s = eff_of(c, (size_t)p);
			if (s > 0)
				sum = (sum < 0 ? 0 : sum) + s;
		}
		if (sum > 0)
			v = sum;
		break;
	}
	case NIC_CLASS_BRIDGE:
		/* A bridge is as fast as its best port to real hardware; one
		 * with only veth/tap ports has no meaningful speed. */
		v = -1;
		for (size_t k = 0; k < n->n_lower; k++) {
			ssize_t p = nicp_index_pos(&c->ix, n->lower[k]);
			if (p < 0)
				continue;
			long s = phys_of(c, (size_t)p);
			if (s > v)
				v = s;
		}
		break;
	case NIC_CLASS_VLAN:
	case NIC_CLASS_MACVLAN:
	case NIC_CLASS_IPVLAN:
		if (n->n_lower > 0) {
			ssize_t p = nicp_index_pos(&c->ix, n->lower[0]);
			if (p >= 0)
				v = eff_of(c, (size_t)p);
		}
		break;
	default:
		break;
	}
	n->eff_speed_mbps = v;
	c->st_eff[i] = ST_DONE;
	return v;
}

void nic_compute_effective_speed(struct nic_list *l)
{
	struct speed_ctx c = { .l = l };
	if (l->n == 0)
		return;
	c.st_eff = calloc(l->n, 1);
	c.st_phys = calloc(l->n, 1);
	c.phys = calloc(l->n, sizeof(long));
	bool ok = c.st_eff && c.st_phys && c.phys && nicp_index_build(&c.ix, l, NULL) == 0;
	for (size_t i = 0; i < l->n; i++) {
		if (ok)
			eff_of(&c, i);
		else /* out of memory: degrade to own speeds, never crash */
			l->v[i].eff_speed_mbps = l->v[i].speed_mbps;
	}
	if (ok)
		nicp_index_free(&c.ix);
	free(c.st_eff);
	free(c.st_phys);
	free(c.phys);
}

/* ---- the pipeline ---- */

static void facts_free(struct nicp_facts *fx, size_t n)
{
	if (!fx)
		return;
	for (size_t i = 0; i < n; i++)
		free(fx[i].devpath);
	free(fx);
}

int nic_discover(const struct nic_source *src, struct nic_list *out, np_error *err)
{
	const char *root = src && src->sysfs_root ? src->sysfs_root : "/sys";
	struct nic_list l = { 0 };
	struct nicp_facts *fx = NULL;
	struct nicp_index ix = { 0 };
	int rc;

	out->v = NULL;
	out->n = 0;
	if (src && src->netlink_json)
		rc = nicp_json_read(src->netlink_json, &l, &fx, err);
	else
		rc = nicp_netlink_read(&l, &fx, err);
	if (rc < 0)
		goto fail;
	rc = nicp_index_build(&ix, &l, err);
	if (rc < 0)
		goto fail;
	/* On the live node one ethtool dump replaces a thousand `speed` files;
	 * if it is not available, sysfs is read as for a fixture tree. */
	if (!(src && (src->sysfs_root || src->netlink_json)))
		(void)nicp_ethtool_speeds(&l, &ix, fx);
	rc = nicp_sysfs_read(root, &l, fx, err);
	if (rc < 0)
		goto fail;
	nicp_classify_all(&l, fx);
	rc = nicp_links_build(root, &l, fx, &ix, !(src && src->netlink_json), err);
	if (rc < 0)
		goto fail;
	rc = nicp_rdma_read(root, &l, fx, &ix, err);
	if (rc < 0)
		goto fail;
	nic_compute_effective_speed(&l);
	nicp_index_free(&ix);
	facts_free(fx, l.n);
	*out = l;
	return 0;
fail:
	nicp_index_free(&ix);
	facts_free(fx, l.n);
	nic_list_free(&l);
	return -1;
}
