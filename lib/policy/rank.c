/* Verdict and score per interface, then the usable ones best first. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/policy.h"

/* Score components; see policy.h for the formula. */
enum {
	PTS_NIC = 1000,        /* physical, sriov-vf, bond, ipoib */
	PTS_POD_SECONDARY = 800, /* macvlan/ipvlan/vlan whose lower is elsewhere */
	PTS_VETH = 500,
	PTS_TUNNEL = 200,
	PTS_VIRTUAL = 100,
	PTS_RDMA_ACTIVE = 300,
	SPEED_CAP_MBPS = 3200000,
	LOWER_DEPTH_MAX = 8,   /* stacked devices deeper than this score 0 */
};

/* Own copy of the class names: lib/nic is written in parallel and the
 * verdict text must not depend on its progress. */
static const char *class_label(enum nic_class c)
{
	static const char *const names[NIC_CLASS_COUNT] = {
		[NIC_CLASS_PHYSICAL] = "physical", [NIC_CLASS_SRIOV_VF] = "sriov-vf",
		[NIC_CLASS_BOND] = "bond",         [NIC_CLASS_VLAN] = "vlan",
		[NIC_CLASS_MACVLAN] = "macvlan",   [NIC_CLASS_IPVLAN] = "ipvlan",
		[NIC_CLASS_IPOIB] = "ipoib",       [NIC_CLASS_VETH] = "veth",
		[NIC_CLASS_BRIDGE] = "bridge",     [NIC_CLASS_TUNNEL] = "tunnel",
		[NIC_CLASS_TUNTAP] = "tuntap",     [NIC_CLASS_LOOPBACK] = "loopback",
		[NIC_CLASS_VIRTUAL] = "virtual",
	};
	return (unsigned)c < NIC_CLASS_COUNT && names[c] ? names[c] : "unknown";
}


static const struct nic *find_index(const struct nic_list *l, int ifindex)
{
	for (size_t i = 0; ifindex > 0 && i < l->n; i++)
		if (l->v[i].ifindex == ifindex)
			return &l->v[i];
	return NULL;
}

static const struct nic *lower_of(const struct nic_list *l, const struct nic *n)
{
	int idx = n->link_ifindex ? n->link_ifindex : (n->n_lower ? n->lower[0] : 0);
	const struct nic *low = find_index(l, idx);
	return low == n ? NULL : low;
}

/* Class points, following stacked devices down to what carries the traffic:
 * a vlan, macvlan or bridge over a NIC is as good as the NIC.  *base is the
 * device that gave the points (n itself for a leaf). */
static int class_points(const struct nic_list *l, const struct nic *n, int depth,
			const struct nic **base)
{
	*base = n;
	if (depth > LOWER_DEPTH_MAX)
		return 0;
	switch (n->cls) {
	case NIC_CLASS_PHYSICAL:
	case NIC_CLASS_SRIOV_VF:
	case NIC_CLASS_BOND:
	case NIC_CLASS_IPOIB:
		return PTS_NIC;
	case NIC_CLASS_VLAN:
	case NIC_CLASS_MACVLAN:
	case NIC_CLASS_IPVLAN: {
		const struct nic *low = lower_of(l, n);
		/* Lower device not here: a Multus secondary in a pod namespace. */
		return low ? class_points(l, low, depth + 1, base) : PTS_POD_SECONDARY;
	}
	case NIC_CLASS_BRIDGE: {
		int best = 0;
		for (size_t i = 0; i < n->n_lower; i++) {
			const struct nic *port = find_index(l, n->lower[i]), *b;
			if (!port || port == n)
				continue;
			int pts = class_points(l, port, depth + 1, &b);
			if (pts > best) {
				best = pts;
				*base = b;
			}
		}
		return best;
	}
	case NIC_CLASS_VETH:
		return PTS_VETH;
	case NIC_CLASS_TUNNEL:
		return PTS_TUNNEL;
	case NIC_CLASS_VIRTUAL:
		return PTS_VIRTUAL;
	default:
		return 0;
	}
}

static void note(struct policy_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct policy_verdict *v, const char *fmt, ...)
{
	if (v->n_reasons >= POLICY_REASONS_MAX)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->reasons[v->n_reasons++], POLICY_REASON_LEN, fmt, ap);
	va_end(ap);
}

#define refuse(v, ...)                  \
	do {                            \
		(v)->usable = false;    \
		note((v), __VA_ARGS__); \
	} while (0)

static void fmt_speed(long mbps, char *buf, size_t len)
{
	if (mbps >= 1000 && mbps % 1000 == 0)
		snprintf(buf, len, "%ld Gb/s", mbps / 1000);
	else if (mbps >= 1000)
		snprintf(buf, len, "%ld.%ld Gb/s", mbps / 1000, (mbps % 1000) / 100);
	else
		snprintf(buf, len, "%ld Mb/s", mbps);
}

static long speed_of(const struct nic *n)
{
	return n->eff_speed_mbps > 0 ? n->eff_speed_mbps : n->speed_mbps;
}

/* The address to use: the first global one of the allowed family (inside
 * --cidr if given), IPv4 before IPv6 unless --family says otherwise. */
static void judge_addresses(const struct policy *p, const struct nic *n, struct policy_verdict *v)
{
	bool any_family = false, any_global = false;
	int first4 = -1, first6 = -1;
	for (size_t i = 0; i < n->n_addrs; i++) {
		const struct nic_addr *a = &n->addrs[i];
		if (a->family != AF_INET && a->family != AF_INET6)
			continue;
		if (p->family != AF_UNSPEC && a->family != p->family)
			continue;
		any_family = true;
		if (nic_addr_is_link_local(a))
			continue;
		any_global = true;
		if (p->has_cidr && !np_prefix_contains(&p->cidr, a->family, a->bytes))
			continue;
		if (a->family == AF_INET && first4 < 0)
			first4 = (int)i;
		if (a->family == AF_INET6 && first6 < 0)
			first6 = (int)i;
	}
	v->addr = first4 >= 0 ? first4 : first6;
	v->family = v->addr >= 0 ? n->addrs[v->addr].family : AF_UNSPEC;
	if (!any_family) {
		refuse(v, "%s", p->family == AF_INET    ? "no IPv4 address"
				: p->family == AF_INET6 ? "no IPv6 address"
							: "no IPv4/IPv6 address");
	} else if (!any_global) {
		refuse(v, "link-local only");
	} else if (v->addr < 0) {
		char c[NP_PREFIX_TEXT_MAX];
		np_prefix_format(&p->cidr, c, sizeof(c));
		refuse(v, "no address in %s", c);
	}
}

static bool oper_down(const struct nic *n)
{
	static const char *const down[] = {"down", "lowerlayerdown", "notpresent"};
	for (size_t i = 0; i < sizeof(down) / sizeof(down[0]); i++)
		if (strcmp(n->operstate, down[i]) == 0)
			return true;
	return n->carrier == 0;
}

static void judge(const struct policy *p, const struct nic_list *l, const struct nic *n,
		  struct policy_verdict *v)
{
	memset(v, 0, sizeof(*v));
	v->usable = true;
	v->addr = -1;
	v->socket_mbps = -1;
	v->family = AF_UNSPEC;

	if (n->cls == NIC_CLASS_LOOPBACK) {
		refuse(v, "loopback");
		return;
	}
	if (n->master_ifindex) {
		const struct nic *m = find_index(l, n->master_ifindex);
		/* A VRF is a master too, but its members keep their addresses. */
		if (!m)
			refuse(v, "enslaved to ifindex %d", n->master_ifindex);
		else if (strcmp(m->kind, "vrf") != 0)
			refuse(v, "enslaved to %s", m->name);
	}
	if (n->cls == NIC_CLASS_TUNTAP)
		refuse(v, "tun/tap");
	/* NCCL splits NCCL_SOCKET_IFNAME at ',' and ':': such a name cannot be
	 * named to it, so it can never be the answer. */
	json_t *as_json = json_string(n->name); /* NULL: not valid UTF-8 */
	if (!as_json)
		refuse(v, "name is not valid UTF-8: it cannot be written exactly to decision.json "
			  "or the Kubernetes API");
	json_decref(as_json);
	if (strpbrk(n->name, ",:"))
		refuse(v, "name contains '%c', which NCCL_SOCKET_IFNAME cannot express",
		       *strpbrk(n->name, ",:"));
	/* Linux allows control characters in a name (only '/', ':' and
	 * white space are refused); nccl.conf cannot carry one, so such an
	 * interface is left out here instead of failing the run later. */
	for (const unsigned char *c = (const unsigned char *)n->name; *c; c++)
		if (*c < 0x20 || *c == 0x7f) {
			refuse(v, "name has a control character (0x%02x): it cannot be written "
				  "safely to nccl.conf",
			       *c);
			break;
		}
	if (!n->up)
		refuse(v, "down");
	else if (oper_down(n))
		refuse(v, "no carrier");

	const struct nic *base;
	int cls_pts = class_points(l, n, 0, &base);
	if (n->cls == NIC_CLASS_BRIDGE && cls_pts < PTS_NIC)
		refuse(v, "bridge without a physical port: container bridge");

	if (!policy_list_selects(&p->include, n->name))
		refuse(v, "not in --include '%s'", p->include.text);
	if (policy_list_matches(&p->exclude, n->name))
		refuse(v, "excluded by --exclude '%s'", p->exclude.text);

	judge_addresses(p, n, v);

	long speed = speed_of(n);
	if (p->min_speed > 0) {
		char want[32], have[32];
		fmt_speed(p->min_speed, want, sizeof(want));
		if (speed <= 0) {
			refuse(v, "speed unknown, --min-speed %s", want);
		} else if (speed < p->min_speed) {
			fmt_speed(speed, have, sizeof(have));
			refuse(v, "%s < %s", have, want);
		}
	}
	if (!v->usable)
		return;

	/* Usable: the score, with its parts written down. */
	if (base != n)
		note(v, "class %s over %s (%s): %d", class_label(n->cls), base->name,
		     class_label(base->cls), cls_pts);
	else if (cls_pts == PTS_POD_SECONDARY)
		note(v, "class %s, lower device in another namespace: %d", class_label(n->cls),
		     cls_pts);
	else if (n->cls == NIC_CLASS_TUNNEL)
		note(v, "class tunnel (%s), ranked low: %d", n->tunnel[0] ? n->tunnel : "?",
		     cls_pts);
	else
		note(v, "class %s: %d", class_label(n->cls), cls_pts);

	/* IPoIB sockets run far below the IB link rate, and NCCL reaches the IB
	 * ports through NCCL_IB_HCA whatever the socket interface: so for
	 * sockets an Ethernet NIC of known speed is preferred over IPoIB. */
	if (n->cls == NIC_CLASS_IPOIB && speed > 0) {
		note(v, "IPoIB: link rate not counted for sockets");
		speed = -1;
	}
	v->socket_mbps = speed > 0 ? speed : -1;

	long speed_pts = 0;
	if (speed > 0) {
		char s[32];
		fmt_speed(speed, s, sizeof(s));
		speed_pts = 1 + (speed > SPEED_CAP_MBPS ? SPEED_CAP_MBPS : speed) / 100;
		note(v, "speed %s: %ld", s, speed_pts);
	} else {
		note(v, "speed unknown: 0");
	}

	long rdma_pts = 0;
	for (size_t i = 0; n->cls != NIC_CLASS_IPOIB && i < n->n_rdma; i++) {
		if (n->rdma[i].active) {
			rdma_pts = PTS_RDMA_ACTIVE;
			note(v, "RDMA %s port %d ACTIVE: %d", n->rdma[i].hca, n->rdma[i].port,
			     PTS_RDMA_ACTIVE);
			break;
		}
	}

	v->score = 10 * (cls_pts + speed_pts + rdma_pts) + (v->family == AF_INET ? 1 : 0);
}

static int cmp_order(const void *a, const void *b, void *ctx)
{
	const struct policy_ranking *r = ((void **)ctx)[0];
	const struct nic_list *l = ((void **)ctx)[1];
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	if (r->v[i].score != r->v[j].score)
		return r->v[i].score > r->v[j].score ? -1 : 1;
	int c = strcmp(l->v[i].name, l->v[j].name);
	if (c)
		return c;
	return i < j ? -1 : i > j;
}

int policy_rank(const struct policy *p, const struct nic_list *l, struct policy_ranking *out,
		np_error *err)
{
	memset(out, 0, sizeof(*out));
	out->v = calloc(l->n ? l->n : 1, sizeof(*out->v));
	out->order = calloc(l->n ? l->n : 1, sizeof(*out->order));
	if (!out->v || !out->order) {
		policy_ranking_free(out);
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "ranking interfaces");
	}
	out->n = l->n;
	for (size_t i = 0; i < l->n; i++) {
		judge(p, l, &l->v[i], &out->v[i]);
		if (out->v[i].usable)
			out->order[out->n_usable++] = i;
	}
	void *ctx[2] = {out, (void *)l};
	qsort_r(out->order, out->n_usable, sizeof(*out->order), cmp_order, ctx);
	return 0;
}

void policy_ranking_free(struct policy_ranking *r)
{
	if (!r)
		return;
	free(r->v);
	free(r->order);
	memset(r, 0, sizeof(*r));
}
