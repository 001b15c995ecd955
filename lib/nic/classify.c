/* Classification, as NetworkManager does it: netlink kind first, then the
 * ARPHRD type, then sysfs (DEVTYPE, bonding/, bridge/, tun_flags, physfn,
 * the `device` link); a kind-less Ethernet device with no hardware behind
 * it is "virtual".  The name is never looked at. */
#include "nic/nic.h"
#include "nic/nic_priv.h"

#include <net/if_arp.h>
#include <stdio.h>
#include <string.h>

#ifndef ARPHRD_IP6GRE
#define ARPHRD_IP6GRE 823
#endif

struct name_rule {
	const char *name;
	enum nic_class cls;
	const char *tunnel; /* tunnel type for NIC_CLASS_TUNNEL; NULL: the name */
};

/* IFLA_INFO_KIND values (the kernel's rtnl_link_ops->kind). */
static const struct name_rule kind_rules[] = {
	{ "veth", NIC_CLASS_VETH, NULL },
	{ "netkit", NIC_CLASS_VETH, NULL },
	{ "bridge", NIC_CLASS_BRIDGE, NULL },
	{ "bond", NIC_CLASS_BOND, NULL },
	{ "team", NIC_CLASS_VIRTUAL, NULL },
	{ "vlan", NIC_CLASS_VLAN, NULL },
	{ "macvlan", NIC_CLASS_MACVLAN, NULL },
	{ "macvtap", NIC_CLASS_MACVLAN, NULL },
	{ "ipvlan", NIC_CLASS_IPVLAN, NULL },
	{ "ipvtap", NIC_CLASS_IPVLAN, NULL },
	{ "ipoib", NIC_CLASS_IPOIB, NULL },
	{ "tun", NIC_CLASS_TUNTAP, NULL },
	{ "vxlan", NIC_CLASS_TUNNEL, NULL },
	{ "geneve", NIC_CLASS_TUNNEL, NULL },
	{ "bareudp", NIC_CLASS_TUNNEL, NULL },
	{ "gtp", NIC_CLASS_TUNNEL, NULL },
	{ "ipip", NIC_CLASS_TUNNEL, NULL },
	{ "gre", NIC_CLASS_TUNNEL, NULL },
	{ "gretap", NIC_CLASS_TUNNEL, NULL },
	{ "erspan", NIC_CLASS_TUNNEL, NULL },
	{ "ip6gre", NIC_CLASS_TUNNEL, NULL },
	{ "ip6gretap", NIC_CLASS_TUNNEL, NULL },
	{ "ip6erspan", NIC_CLASS_TUNNEL, NULL },
	{ "ip6tnl", NIC_CLASS_TUNNEL, NULL },
	{ "sit", NIC_CLASS_TUNNEL, NULL },
	{ "vti", NIC_CLASS_TUNNEL, NULL },
	{ "vti6", NIC_CLASS_TUNNEL, NULL },
	{ "xfrm", NIC_CLASS_TUNNEL, NULL },
	{ "wireguard", NIC_CLASS_TUNNEL, NULL },
	{ "dummy", NIC_CLASS_VIRTUAL, NULL },
	{ "ifb", NIC_CLASS_VIRTUAL, NULL },
	{ "vrf", NIC_CLASS_VIRTUAL, NULL },
	{ "macsec", NIC_CLASS_VIRTUAL, NULL },
	{ "nlmon", NIC_CLASS_VIRTUAL, NULL },
	{ "openvswitch", NIC_CLASS_VIRTUAL, NULL },
	{ "hsr", NIC_CLASS_VIRTUAL, NULL },
	{ "vcan", NIC_CLASS_VIRTUAL, NULL },
	{ "vxcan", NIC_CLASS_VIRTUAL, NULL },
};

/* uevent DEVTYPE values set by the drivers (SET_NETDEV_DEVTYPE). */
static const struct name_rule devtype_rules[] = {
	{ "bond", NIC_CLASS_BOND, NULL },
	{ "bridge", NIC_CLASS_BRIDGE, NULL },
	{ "vlan", NIC_CLASS_VLAN, NULL },
	{ "macvlan", NIC_CLASS_MACVLAN, NULL },
	{ "ipvlan", NIC_CLASS_IPVLAN, NULL },
	{ "vxlan", NIC_CLASS_TUNNEL, NULL },
	{ "geneve", NIC_CLASS_TUNNEL, NULL },
	{ "wireguard", NIC_CLASS_TUNNEL, NULL },
	{ "ipip", NIC_CLASS_TUNNEL, NULL },
	{ "gre", NIC_CLASS_TUNNEL, NULL },
	{ "wlan", NIC_CLASS_PHYSICAL, NULL },
	{ "wwan", NIC_CLASS_PHYSICAL, NULL },
};

struct arphrd_rule {
	int arphrd;
	bool need_tun_flags; /* rule applies only with sysfs tun_flags */
	enum nic_class cls;
	const char *tunnel;
};

static const struct arphrd_rule arphrd_rules[] = {
	{ ARPHRD_LOOPBACK, false, NIC_CLASS_LOOPBACK, NULL },
	{ ARPHRD_INFINIBAND, false, NIC_CLASS_IPOIB, NULL },
	{ ARPHRD_TUNNEL, false, NIC_CLASS_TUNNEL, "ipip" },
	{ ARPHRD_TUNNEL6, false, NIC_CLASS_TUNNEL, "ip6tnl" },
	{ ARPHRD_SIT, false, NIC_CLASS_TUNNEL, "sit" },
	{ ARPHRD_IPGRE, false, NIC_CLASS_TUNNEL, "gre" },
	{ ARPHRD_IP6GRE, false, NIC_CLASS_TUNNEL, "ip6gre" },
	{ ARPHRD_NONE, true, NIC_CLASS_TUNTAP, NULL },
};

/* Boolean sysfs markers, in order of precedence: a VF is checked before
 * the generic `device` link because it has one too. */
struct flag_rule {
	size_t offset; /* of the bool in struct nic_class_facts */
	enum nic_class cls;
};

static const struct flag_rule flag_rules[] = {
	{ offsetof(struct nic_class_facts, is_loopback), NIC_CLASS_LOOPBACK },
	{ offsetof(struct nic_class_facts, has_bonding), NIC_CLASS_BOND },
	{ offsetof(struct nic_class_facts, has_bridge), NIC_CLASS_BRIDGE },
	{ offsetof(struct nic_class_facts, has_tun_flags), NIC_CLASS_TUNTAP },
	{ offsetof(struct nic_class_facts, is_vf), NIC_CLASS_SRIOV_VF },
	{ offsetof(struct nic_class_facts, has_device), NIC_CLASS_PHYSICAL },
};

#define N_ELEM(a) (sizeof(a) / sizeof((a)[0]))

static const struct name_rule *find_name(const struct name_rule *r, size_t n, const char *s)
{
	if (!s || !*s)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(r[i].name, s) == 0)
			return &r[i];
	return NULL;
}

static enum nic_class named(const struct name_rule *r, char *tunnel, size_t tunnel_len)
{
	if (r->cls == NIC_CLASS_TUNNEL && tunnel && tunnel_len)
		snprintf(tunnel, tunnel_len, "%s", r->tunnel ? r->tunnel : r->name);
	return r->cls;
}

enum nic_class nic_classify(const struct nic_class_facts *f, char *tunnel, size_t tunnel_len)
{
	const struct name_rule *r;

	if (tunnel && tunnel_len)
		tunnel[0] = '\0';
	r = find_name(kind_rules, N_ELEM(kind_rules), f->kind);
	if (r)
		return named(r, tunnel, tunnel_len);
	/* The loopback flag outranks everything the type could say. */
	if (f->is_loopback)
		return NIC_CLASS_LOOPBACK;
	for (size_t i = 0; i < N_ELEM(arphrd_rules); i++) {
		const struct arphrd_rule *a = &arphrd_rules[i];
		if (a->arphrd != f->arphrd || (a->need_tun_flags && !f->has_tun_flags))
			continue;
		if (a->cls == NIC_CLASS_TUNNEL && tunnel && tunnel_len)
			snprintf(tunnel, tunnel_len, "%s", a->tunnel);
		return a->cls;
	}
	r = find_name(devtype_rules, N_ELEM(devtype_rules), f->devtype);
	if (r)
		return named(r, tunnel, tunnel_len);
	for (size_t i = 0; i < N_ELEM(flag_rules); i++)
		if (*(const bool *)((const char *)f + flag_rules[i].offset))
			return flag_rules[i].cls;
	return NIC_CLASS_VIRTUAL;
}

bool nicp_kind_is_software(const char *kind)
{
	const struct name_rule *r = find_name(kind_rules, N_ELEM(kind_rules), kind);
	return r && r->cls != NIC_CLASS_IPOIB;
}

void nicp_classify_all(struct nic_list *l, const struct nicp_facts *fx)
{
	for (size_t i = 0; i < l->n; i++) {
		struct nic *n = &l->v[i];
		struct nic_class_facts f = {
			.kind = n->kind,
			.arphrd = n->arphrd,
			.devtype = n->devtype,
			.has_device = n->has_device,
			.is_vf = n->is_vf,
			.has_bonding = fx[i].has_bonding,
			.has_bridge = fx[i].has_bridge,
			.has_tun_flags = fx[i].has_tun_flags,
			.is_loopback = fx[i].loopback,
		};
		n->cls = nic_classify(&f, n->tunnel, sizeof(n->tunnel));
	}
}
