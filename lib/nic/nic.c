/* The interface list: class names, lifetime, lookups and the index.
 * Discovery is discover.c; the speed walk is speed.c. */
#include "nic/nic.h"
#include "nic/nic_priv.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/prefix.h"
#include "util/grow.h"
#include "util/text.h"

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

int nic_hca_check(const struct nic_rdma_port *p, np_error *err)
{
	const char *bad = NULL;
	for (const char *c = p->hca; *c && !bad; c++)
		if (*c == ',' || *c == ':' || (unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
			bad = c;
	const char *why = NULL;
	if (!p->hca[0])
		why = "it has no name";
	else if (p->port < 1)
		why = "ports are numbered from 1";
	else if (p->hca[0] == '^' || p->hca[0] == '=')
		why = "NCCL reads its first character as the list's mode; rename it (rdma dev set)";
	else if (bad && *bad == ',')
		why = "its name contains ',', NCCL's separator; rename it (rdma dev set)";
	else if (bad && *bad == ':')
		why = "its name contains ':', which NCCL reads as the start of a port; rename it (rdma dev set)";
	else if (bad)
		why = "its name contains a space or a control character; rename it (rdma dev set)";
	if (!why)
		return 0;
	char name[NIC_HCA_MAX];
	np_text_clean(name, sizeof(name), p->hca, NP_TEXT_ASCII);
	return np_error_set(err, NP_EUSAGE, 0, "RDMA device '%s' port %d cannot be passed to NCCL in NCCL_IB_HCA: %s",
			    name, p->port, why);
}
