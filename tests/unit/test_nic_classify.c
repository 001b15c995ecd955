/* Classification, effective speed, link-local detection, and the sysfs and
 * RDMA readers driven through nic_discover on a fixture tree built here
 * (JSON netlink source: no root, no netlink needed). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <net/if_arp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "nic/nic.h"

/* ---- classification table ---- */

struct class_case {
	const char *what;
	struct nic_class_facts f;
	enum nic_class want;
	const char *tunnel;
};

#define ETH ARPHRD_ETHER

static const struct class_case class_cases[] = {
	{ "veth by kind", { .kind = "veth", .arphrd = ETH }, NIC_CLASS_VETH, "" },
	{ "bridge by kind", { .kind = "bridge", .arphrd = ETH }, NIC_CLASS_BRIDGE, "" },
	{ "bond by kind", { .kind = "bond", .arphrd = ETH }, NIC_CLASS_BOND, "" },
	{ "team is other virtual", { .kind = "team", .arphrd = ETH }, NIC_CLASS_VIRTUAL, "" },
	{ "vlan by kind", { .kind = "vlan", .arphrd = ETH, .has_device = false }, NIC_CLASS_VLAN, "" },
	{ "macvlan by kind", { .kind = "macvlan", .arphrd = ETH }, NIC_CLASS_MACVLAN, "" },
	{ "macvtap by kind", { .kind = "macvtap", .arphrd = ETH }, NIC_CLASS_MACVLAN, "" },
	{ "ipvlan by kind", { .kind = "ipvlan", .arphrd = ETH }, NIC_CLASS_IPVLAN, "" },
	{ "vxlan tunnel", { .kind = "vxlan", .arphrd = ETH }, NIC_CLASS_TUNNEL, "vxlan" },
	{ "geneve tunnel", { .kind = "geneve", .arphrd = ETH }, NIC_CLASS_TUNNEL, "geneve" },
	{ "ipip tunnel", { .kind = "ipip", .arphrd = ARPHRD_TUNNEL }, NIC_CLASS_TUNNEL, "ipip" },
	{ "gre tunnel", { .kind = "gre", .arphrd = ARPHRD_IPGRE }, NIC_CLASS_TUNNEL, "gre" },
	{ "gretap tunnel", { .kind = "gretap", .arphrd = ETH }, NIC_CLASS_TUNNEL, "gretap" },
	{ "wireguard tunnel", { .kind = "wireguard", .arphrd = ARPHRD_NONE }, NIC_CLASS_TUNNEL,
	  "wireguard" },
	{ "kind-less ipip by ARPHRD", { .kind = "", .arphrd = ARPHRD_TUNNEL }, NIC_CLASS_TUNNEL,
	  "ipip" },
	{ "kind-less gre by ARPHRD", { .kind = "", .arphrd = ARPHRD_IPGRE }, NIC_CLASS_TUNNEL,
	  "gre" },
	{ "kind-less sit by ARPHRD", { .kind = "", .arphrd = ARPHRD_SIT }, NIC_CLASS_TUNNEL, "sit" },
	{ "tap by kind", { .kind = "tun", .arphrd = ETH }, NIC_CLASS_TUNTAP, "" },
	{ "tun by ARPHRD_NONE + tun_flags", { .kind = "", .arphrd = ARPHRD_NONE,
	  .has_tun_flags = true }, NIC_CLASS_TUNTAP, "" },
	{ "kind-less tap by tun_flags", { .kind = "", .arphrd = ETH, .has_tun_flags = true },
	  NIC_CLASS_TUNTAP, "" },
	{ "loopback by ARPHRD", { .kind = "", .arphrd = ARPHRD_LOOPBACK }, NIC_CLASS_LOOPBACK, "" },
	{ "loopback by flag", { .kind = "", .arphrd = -1, .is_loopback = true },
	  NIC_CLASS_LOOPBACK, "" },
	{ "ipoib by ARPHRD", { .kind = "", .arphrd = ARPHRD_INFINIBAND, .has_device = true },
	  NIC_CLASS_IPOIB, "" },
	{ "ipoib child by kind", { .kind = "ipoib", .arphrd = ARPHRD_INFINIBAND }, NIC_CLASS_IPOIB,
	  "" },
	{ "physical: device link", { .kind = "", .arphrd = ETH, .has_device = true },
	  NIC_CLASS_PHYSICAL, "" },
	{ "sriov vf: physfn", { .kind = "", .arphrd = ETH, .has_device = true, .is_vf = true },
	  NIC_CLASS_SRIOV_VF, "" },
	{ "dummy is other virtual", { .kind = "dummy", .arphrd = ETH }, NIC_CLASS_VIRTUAL, "" },
	{ "kind-less ether without device is virtual", { .kind = "", .arphrd = ETH },
	  NIC_CLASS_VIRTUAL, "" },
	{ "NULL kind, nothing known", { .kind = NULL, .arphrd = -1 }, NIC_CLASS_VIRTUAL, "" },
	{ "bond by DEVTYPE", { .kind = "", .arphrd = ETH, .devtype = "bond" }, NIC_CLASS_BOND, "" },
	{ "vlan by DEVTYPE over a VF", { .kind = "", .arphrd = ETH, .devtype = "vlan",
	  .has_device = true, .is_vf = true }, NIC_CLASS_VLAN, "" },
	{ "vxlan by DEVTYPE", { .kind = "", .arphrd = ETH, .devtype = "vxlan" }, NIC_CLASS_TUNNEL,
	  "vxlan" },
	{ "wlan by DEVTYPE", { .kind = "", .arphrd = ETH, .devtype = "wlan", .has_device = true },
	  NIC_CLASS_PHYSICAL, "" },
	{ "bond by bonding/", { .kind = "", .arphrd = ETH, .has_bonding = true }, NIC_CLASS_BOND,
	  "" },
	{ "bridge by bridge/", { .kind = "", .arphrd = ETH, .has_bridge = true },
	  NIC_CLASS_BRIDGE, "" },
	/* The kind wins over everything sysfs says (a bridge named eth0 with
	 * a device link is still a bridge). */
	{ "kind bridge beats device link", { .kind = "bridge", .arphrd = ETH, .has_device = true },
	  NIC_CLASS_BRIDGE, "" },
	{ "vlan kind beats physfn", { .kind = "vlan", .arphrd = ETH, .has_device = true,
	  .is_vf = true }, NIC_CLASS_VLAN, "" },
	{ "unknown kind with device is physical", { .kind = "someday", .arphrd = ETH,
	  .has_device = true }, NIC_CLASS_PHYSICAL, "" },
};

static void test_classify_table(void **state)
{
	bool seen[NIC_CLASS_COUNT] = { false };
	for (size_t i = 0; i < sizeof(class_cases) / sizeof(class_cases[0]); i++) {
		const struct class_case *c = &class_cases[i];
		char tunnel[16] = "garbage";
		enum nic_class got = nic_classify(&c->f, tunnel, sizeof(tunnel));
		if (got != c->want || strcmp(tunnel, c->tunnel) != 0)
			fail_msg("%s: got %s/\"%s\", want %s/\"%s\"", c->what, nic_class_name(got),
				 tunnel, nic_class_name(c->want), c->tunnel);
		seen[got] = true;
	}
	for (int k = 0; k < NIC_CLASS_COUNT; k++)
		if (!seen[k])
			fail_msg("no case covers class %s", nic_class_name(k));
}

static void test_classify_never_uses_name(void **state)
{
	/* The facts carry no name at all; the same facts under any name give
	 * one answer.  What matters: a kind-less ether with a device link
	 * is physical whatever it is called. */
	struct nic_class_facts f = { .kind = "", .arphrd = ETH, .has_device = true };
	assert_int_equal(nic_classify(&f, NULL, 0), NIC_CLASS_PHYSICAL);
}

static void test_class_names_round_trip(void **state)
{
	for (int k = 0; k < NIC_CLASS_COUNT; k++) {
		const char *n = nic_class_name(k);
		assert_non_null(n);
		assert_int_equal(nic_class_from_name(n), k);
	}
	assert_null(nic_class_name(NIC_CLASS_COUNT));
	assert_int_equal(nic_class_from_name("ethernet"), -1);
	assert_int_equal(nic_class_from_name(NULL), -1);
}

/* ---- link-local ---- */

static struct nic_addr mkaddr(int family, const char *text)
{
	struct nic_addr a = { .family = family };
	assert_int_equal(inet_pton(family, text, a.bytes), 1);
	snprintf(a.text, sizeof(a.text), "%s", text);
	return a;
}

static void test_link_local(void **state)
{
	struct {
		int fam;
		const char *a;
		bool ll;
	} cases[] = {
		{ AF_INET, "169.254.3.4", true },   { AF_INET, "169.253.0.1", false },
		{ AF_INET, "10.0.0.1", false },     { AF_INET, "170.254.0.1", false },
		{ AF_INET6, "fe80::1", true },      { AF_INET6, "febf::1", true },
		{ AF_INET6, "fec0::1", false },     { AF_INET6, "fd00::1", false },
		{ AF_INET6, "::ffff:169.254.1.1", false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct nic_addr a = mkaddr(cases[i].fam, cases[i].a);
		if (nic_addr_is_link_local(&a) != cases[i].ll)
			fail_msg("%s: link-local should be %d", cases[i].a, cases[i].ll);
	}
}

/* ---- effective speed ---- */

struct spec {
	const char *name;
	enum nic_class cls;
	long speed;
	bool up;
	int master; /* ifindex */
	int lower[4];
};

/* ifindex = position + 1; lower built from masters plus explicit lower. */
static void build(struct nic_list *l, const struct spec *s, size_t n)
{
	l->n = n;
	l->v = calloc(n, sizeof(*l->v));
	assert_non_null(l->v);
	for (size_t i = 0; i < n; i++) {
		struct nic *x = &l->v[i];
		snprintf(x->name, sizeof(x->name), "%s", s[i].name);
		x->ifindex = (int)i + 1;
		x->cls = s[i].cls;
		x->speed_mbps = s[i].speed;
		x->eff_speed_mbps = -1;
		x->up = s[i].up;
		x->carrier = s[i].up ? 1 : -1;
		x->master_ifindex = s[i].master;
		x->lower = calloc(8, sizeof(int));
		for (int k = 0; k < 4 && s[i].lower[k]; k++)
			x->lower[x->n_lower++] = s[i].lower[k];
	}
	for (size_t i = 0; i < n; i++)
		if (s[i].master)
			l->v[s[i].master - 1].lower[l->v[s[i].master - 1].n_lower++] = (int)i + 1;
}

static long eff(const struct nic_list *l, const char *name)
{
	const struct nic *n = nic_list_find_name(l, name);
	assert_non_null(n);
	return n->eff_speed_mbps;
}

static void test_effective_speed(void **state)
{
	struct nic_list l;
	const struct spec s[] = {
		/* 1 */ { "eth0", NIC_CLASS_PHYSICAL, 25000, true, 3, { 0 } },
		/* 2 */ { "ens1", NIC_CLASS_PHYSICAL, 100000, true, 4, { 0 } },
		/* 3 */ { "br0", NIC_CLASS_BRIDGE, -1, true, 0, { 0 } },
		/* 4 */ { "bond0", NIC_CLASS_BOND, -1, true, 0, { 0 } },
		/* 5 */ { "ens2", NIC_CLASS_PHYSICAL, 100000, true, 4, { 0 } },
		/* 6 */ { "ens3", NIC_CLASS_PHYSICAL, 100000, false, 4, { 0 } }, /* down */
		/* 7 */ { "bond0.100", NIC_CLASS_VLAN, -1, true, 0, { 4 } },
		/* 8 */ { "cni0", NIC_CLASS_BRIDGE, -1, true, 0, { 0 } },
		/* 9 */ { "veth1", NIC_CLASS_VETH, 10000, true, 8, { 0 } },
		/* 10 */ { "veth2", NIC_CLASS_VETH, 10000, true, 8, { 0 } },
		/* 11 */ { "mv0", NIC_CLASS_MACVLAN, -1, true, 0, { 1 } },
		/* 12 */ { "br1", NIC_CLASS_BRIDGE, -1, true, 0, { 0 } },
		/* 13 */ { "vethx", NIC_CLASS_VETH, 10000, true, 12, { 0 } },
		/* 14 */ { "bond0.200", NIC_CLASS_VLAN, -1, true, 12, { 4 } },
		/* 15 */ { "lo", NIC_CLASS_LOOPBACK, -1, true, 0, { 0 } },
	};
	build(&l, s, sizeof(s) / sizeof(s[0]));
	nic_compute_effective_speed(&l);
	assert_int_equal(eff(&l, "eth0"), 25000);
	/* bond of 2 x 100G up (the third slave is down) */
	assert_int_equal(eff(&l, "bond0"), 200000);
	/* bridge over the physical eth0 */
	assert_int_equal(eff(&l, "br0"), 25000);
	/* vlan over bond */
	assert_int_equal(eff(&l, "bond0.100"), 200000);
	/* bridge of veths only: no physical speed */
	assert_int_equal(eff(&l, "cni0"), -1);
	assert_int_equal(eff(&l, "veth1"), 10000);
	assert_int_equal(eff(&l, "mv0"), 25000);
	/* bridge over a veth and a vlan-over-bond: the vlan leads to hardware */
	assert_int_equal(eff(&l, "br1"), 200000);
	assert_int_equal(eff(&l, "lo"), -1);
	nic_list_free(&l);
}

static void test_effective_speed_cycle_terminates(void **state)
{
	struct nic_list l;
	/* A vlan whose lower is itself via another vlan: nonsense input that
	 * must not recurse forever. */
	const struct spec s[] = {
		{ "a", NIC_CLASS_VLAN, 1000, true, 0, { 2 } },
		{ "b", NIC_CLASS_VLAN, 2000, true, 0, { 1 } },
	};
	build(&l, s, 2);
	nic_compute_effective_speed(&l);
	assert_true(eff(&l, "a") < 100000);
	nic_list_free(&l);
}

static void test_effective_speed_1000_linear(void **state)
{
	/* 1,000 bridges each over one NIC, plus one bond over all NICs. */
	enum { N = 1000 };
	struct nic_list l = { .n = 2 * N + 1 };
	l.v = calloc(l.n, sizeof(*l.v));
	struct nic *bond = &l.v[2 * N];
	bond->ifindex = 2 * N + 1;
	snprintf(bond->name, sizeof(bond->name), "bond0");
	bond->cls = NIC_CLASS_BOND;
	bond->speed_mbps = -1;
	bond->lower = calloc(N, sizeof(int));
	for (int i = 0; i < N; i++) {
		struct nic *p = &l.v[i], *b = &l.v[N + i];
		p->ifindex = i + 1;
		snprintf(p->name, sizeof(p->name), "p%d", i);
		p->cls = NIC_CLASS_PHYSICAL;
		p->speed_mbps = 1000;
		p->up = true;
		p->carrier = 1;
		b->ifindex = N + i + 1;
		snprintf(b->name, sizeof(b->name), "b%d", i);
		b->cls = NIC_CLASS_BRIDGE;
		b->speed_mbps = -1;
		b->lower = calloc(1, sizeof(int));
		b->lower[0] = p->ifindex;
		b->n_lower = 1;
		bond->lower[bond->n_lower++] = p->ifindex;
	}
	nic_compute_effective_speed(&l);
	assert_int_equal(eff(&l, "b999"), 1000);
	assert_int_equal(eff(&l, "bond0"), 1000L * N);
	nic_list_free(&l);
}

/* ---- fixture tree ---- */

static char fixdir[256];

static void mkpath(const char *rel)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", fixdir, rel);
	for (char *s = p + strlen(fixdir) + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", p, strerror(errno));
		*s = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", p, strerror(errno));
}

static void put(const char *rel, const char *content)
{
	char p[1024], d[1024];
	snprintf(d, sizeof(d), "%s", rel);
	char *slash = strrchr(d, '/');
	if (slash) {
		*slash = '\0';
		mkpath(d);
	}
	snprintf(p, sizeof(p), "%s/%s", fixdir, rel);
	FILE *f = fopen(p, "w");
	if (!f)
		fail_msg("write %s: %s", p, strerror(errno));
	fputs(content, f);
	fclose(f);
}

static void lnk(const char *rel, const char *target)
{
	char p[1024], d[1024];
	snprintf(d, sizeof(d), "%s", rel);
	char *slash = strrchr(d, '/');
	if (slash) {
		*slash = '\0';
		mkpath(d);
	}
	snprintf(p, sizeof(p), "%s/%s", fixdir, rel);
	if (symlink(target, p) < 0)
		fail_msg("symlink %s: %s", p, strerror(errno));
}

/* A netdev on a PCI function, laid out as the kernel does it. */
static void pci_netdev(const char *name, const char *pci, const char *speed)
{
	char dev[256], rel[512], tgt[512];
	snprintf(dev, sizeof(dev), "devices/pci0000:00/%s", pci);
	snprintf(rel, sizeof(rel), "%s/net/%s/speed", dev, name);
	put(rel, speed);
	snprintf(rel, sizeof(rel), "%s/net/%s/uevent", dev, name);
	put(rel, "INTERFACE=x\nIFINDEX=9\n");
	snprintf(rel, sizeof(rel), "%s/net/%s/device", dev, name);
	snprintf(tgt, sizeof(tgt), "../../../%s", pci);
	lnk(rel, tgt);
	snprintf(rel, sizeof(rel), "class/net/%s", name);
	snprintf(tgt, sizeof(tgt), "../../%s/net/%s", dev, name);
	lnk(rel, tgt);
}

static const char netlink_doc[] =
	"[{\"ifindex\":1,\"ifname\":\"lo\",\"flags\":[\"LOOPBACK\",\"UP\",\"LOWER_UP\"],"
	" \"mtu\":65536,\"operstate\":\"UNKNOWN\",\"link_type\":\"loopback\","
	" \"address\":\"00:00:00:00:00:00\",\"addr_info\":[{\"family\":\"inet\","
	" \"local\":\"127.0.0.1\",\"prefixlen\":8,\"scope\":\"host\"}]},"
	" {\"ifindex\":2,\"ifname\":\"ens1f0\",\"flags\":[\"BROADCAST\",\"UP\",\"LOWER_UP\"],"
	" \"mtu\":9000,\"operstate\":\"UP\",\"link_type\":\"ether\",\"address\":\"0c:42:a1:00:00:01\","
	" \"master\":\"bond0\","
	" \"addr_info\":[]},"
	" {\"ifindex\":3,\"ifname\":\"ib0\",\"flags\":[\"BROADCAST\",\"UP\",\"LOWER_UP\"],"
	" \"mtu\":4092,\"operstate\":\"UP\",\"link_type\":\"infiniband\","
	" \"addr_info\":[{\"family\":\"inet\",\"local\":\"192.168.10.5\",\"prefixlen\":24,"
	" \"scope\":\"global\"}]},"
	" {\"ifindex\":4,\"ifname\":\"eth1\",\"flags\":[\"BROADCAST\",\"UP\",\"LOWER_UP\"],"
	" \"mtu\":1500,\"operstate\":\"UP\",\"link_type\":\"ether\",\"addr_info\":[]},"
	" {\"ifindex\":5,\"ifname\":\"ens1f1\",\"flags\":[\"BROADCAST\",\"UP\",\"LOWER_UP\"],"
	" \"mtu\":9000,\"operstate\":\"UP\",\"link_type\":\"ether\",\"addr_info\":[]},"
	" {\"ifindex\":6,\"ifname\":\"bond0\",\"flags\":[\"BROADCAST\",\"MASTER\",\"UP\",\"LOWER_UP\"],"
	" \"mtu\":9000,\"operstate\":\"UP\",\"link_type\":\"ether\","
	" \"addr_info\":[{\"family\":\"inet\",\"local\":\"10.0.0.1\",\"prefixlen\":24,"
	"  \"scope\":\"global\"},{\"family\":\"inet6\",\"local\":\"fe80::e42:a1ff:fe00:1\","
	"  \"prefixlen\":64,\"scope\":\"link\"}]},"
	" {\"ifindex\":7,\"ifname\":\"ghost0\",\"flags\":[\"BROADCAST\"],\"mtu\":1500,"
	" \"operstate\":\"DOWN\",\"link_type\":\"ether\",\"addr_info\":[]},"
	" {\"ifindex\":8,\"ifname\":\"bond0.7\",\"link\":\"bond0\",\"flags\":[\"UP\",\"LOWER_UP\"],"
	" \"mtu\":9000,\"operstate\":\"UP\",\"link_type\":\"ether\","
	" \"linkinfo\":{\"info_kind\":\"vlan\"},\"addr_info\":[]},"
	" {\"ifindex\":9,\"ifname\":\"ib1\",\"flags\":[\"BROADCAST\",\"UP\"],"
	" \"mtu\":4092,\"operstate\":\"DOWN\",\"link_type\":\"infiniband\",\"addr_info\":[]}"
	"]";

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(p);
}

static int fixture_setup(void **state)
{
	snprintf(fixdir, sizeof(fixdir), "/tmp/nicpick-nic-test-XXXXXX");
	if (!mkdtemp(fixdir))
		return -1;
	put("netlink.json", netlink_doc);

	/* ens1f0 / ens1f1: a dual-port ConnectX in RoCE mode, bonded. */
	pci_netdev("ens1f0", "0000:17:00.0", "100000\n");
	pci_netdev("ens1f1", "0000:17:00.1", "100000\n");
	put("devices/pci0000:00/0000:17:00.0/numa_node", "1\n");
	lnk("devices/pci0000:00/0000:17:00.0/driver", "../../../bus/pci/drivers/mlx5_core");
	/* bond0: a kind-less bond (no linkinfo in the dump) known by sysfs;
	 * ens1f1 is enslaved only according to bonding/slaves. */
	put("devices/virtual/net/bond0/speed", "200000\n");
	put("devices/virtual/net/bond0/bonding/slaves", "ens1f0 ens1f1\n");
	put("devices/virtual/net/bond0/uevent", "DEVTYPE=bond\nINTERFACE=bond0\n");
	lnk("class/net/bond0", "../../devices/virtual/net/bond0");
	put("devices/virtual/net/bond0.7/uevent", "DEVTYPE=vlan\n");
	lnk("class/net/bond0.7", "../../devices/virtual/net/bond0.7");

	/* RoCE v2 on the bond (LAG): the GID table names bond0. */
	lnk("class/infiniband/mlx5_bond_0", "../../devices/pci0000:00/0000:17:00.0/infiniband/mlx5_bond_0");
	lnk("devices/pci0000:00/0000:17:00.0/infiniband/mlx5_bond_0/device", "../../../0000:17:00.0");
	const char *p1 = "devices/pci0000:00/0000:17:00.0/infiniband/mlx5_bond_0/ports/1/";
	char rel[512];
#define PORT(file, text) (snprintf(rel, sizeof(rel), "%s%s", p1, file), put(rel, text))
	PORT("state", "4: ACTIVE\n");
	PORT("link_layer", "Ethernet\n");
	PORT("rate", "200 Gb/sec (4X HDR)\n");
	PORT("gid_attrs/ndevs/0", "bond0\n");
	PORT("gid_attrs/ndevs/1", "bond0\n");
	PORT("gid_attrs/ndevs/2", "bond0\n");
	PORT("gid_attrs/ndevs/3", "bond0\n");
	PORT("gid_attrs/ndevs/4", ""); /* unused entry */
	PORT("gid_attrs/types/0", "IB/RoCE v1\n");
	PORT("gid_attrs/types/1", "RoCE v2\n");
	PORT("gid_attrs/types/2", "IB/RoCE v1\n");
	PORT("gid_attrs/types/3", "RoCE v2\n");
	PORT("gids/0", "fe80:0000:0000:0000:0e42:a1ff:fe00:0001\n");
	PORT("gids/1", "fe80:0000:0000:0000:0e42:a1ff:fe00:0001\n");
	PORT("gids/2", "0000:0000:0000:0000:0000:ffff:0a00:0001\n");
	PORT("gids/3", "0000:0000:0000:0000:0000:ffff:0a00:0001\n");
	PORT("gids/4", "0000:0000:0000:0000:0000:0000:0000:0000\n");
#undef PORT

	/* ib0: IPoIB on mlx5_0 (same PCI function, no GID ndevs). */
	pci_netdev("ib0", "0000:41:00.0", "200000\n");
	put("devices/pci0000:00/0000:41:00.0/net/ib0/type", "32\n");
	lnk("class/infiniband/mlx5_0", "../../devices/pci0000:00/0000:41:00.0/infiniband/mlx5_0");
	lnk("devices/pci0000:00/0000:41:00.0/infiniband/mlx5_0/device", "../../../0000:41:00.0");
	put("devices/pci0000:00/0000:41:00.0/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
	put("devices/pci0000:00/0000:41:00.0/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
	put("devices/pci0000:00/0000:41:00.0/infiniband/mlx5_0/ports/1/rate",
	    "100 Gb/sec (4X EDR)\n");

	/* ib1: a port that is down. */
	pci_netdev("ib1", "0000:42:00.0", "-1\n");
	lnk("class/infiniband/mlx5_1", "../../devices/pci0000:00/0000:42:00.0/infiniband/mlx5_1");
	lnk("devices/pci0000:00/0000:42:00.0/infiniband/mlx5_1/device", "../../../0000:42:00.0");
	put("devices/pci0000:00/0000:42:00.0/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
	put("devices/pci0000:00/0000:42:00.0/infiniband/mlx5_1/ports/1/link_layer", "InfiniBand\n");
	put("devices/pci0000:00/0000:42:00.0/infiniband/mlx5_1/ports/1/rate",
	    "10 Gb/sec (4X SDR)\n");

	/* eth1: virtio-net in a cloud VM: speed -1, and the device link
	 * points at virtio3 under its PCI function. */
	put("devices/pci0000:00/0000:00:05.0/virtio3/net/eth1/speed", "-1\n");
	lnk("devices/pci0000:00/0000:00:05.0/virtio3/net/eth1/device", "../../../virtio3");
	lnk("class/net/eth1", "../../devices/pci0000:00/0000:00:05.0/virtio3/net/eth1");
	lnk("devices/pci0000:00/0000:00:05.0/virtio3/driver", "../../../../bus/virtio/drivers/virtio_net");
	/* lo in sysfs, ghost0 not at all. */
	put("devices/virtual/net/lo/type", "772\n");
	lnk("class/net/lo", "../../devices/virtual/net/lo");
	*state = fixdir;
	return 0;
}

static int fixture_teardown(void **state)
{
	nftw(fixdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

static void discover_fixture(struct nic_list *l)
{
	char nl[512];
	np_error err = { 0 };
	snprintf(nl, sizeof(nl), "%s/netlink.json", fixdir);
	struct nic_source src = { .sysfs_root = fixdir, .netlink_json = nl };
	if (nic_discover(&src, l, &err) < 0)
		fail_msg("nic_discover: %s", err.msg);
}

static const struct nic *get(const struct nic_list *l, const char *name)
{
	const struct nic *n = nic_list_find_name(l, name);
	if (!n)
		fail_msg("%s not discovered", name);
	return n;
}

static void test_fixture_physical_and_bond(void **state)
{
	struct nic_list l;
	discover_fixture(&l);
	assert_int_equal(l.n, 9);
	const struct nic *e = get(&l, "ens1f0"), *f = get(&l, "ens1f1"), *b = get(&l, "bond0");
	assert_int_equal(e->cls, NIC_CLASS_PHYSICAL);
	assert_string_equal(e->pci, "0000:17:00.0");
	assert_int_equal(e->numa_node, 1);
	assert_string_equal(e->driver, "mlx5_core");
	assert_int_equal(e->speed_mbps, 100000);
	assert_int_equal(e->master_ifindex, 6);
	assert_int_equal(e->carrier, 1);
	assert_int_equal(e->mtu, 9000);
	assert_string_equal(e->operstate, "up");
	assert_int_equal(f->numa_node, -1);
	/* only bonding/slaves says ens1f1 is in bond0 */
	assert_int_equal(f->master_ifindex, 6);
	assert_int_equal(b->cls, NIC_CLASS_BOND);
	assert_string_equal(b->devtype, "bond");
	assert_int_equal(b->n_lower, 2);
	assert_int_equal(b->eff_speed_mbps, 200000);
	assert_false(b->has_device);
	/* addresses: link-local kept, host scope not */
	assert_int_equal(b->n_addrs, 2);
	assert_string_equal(b->addrs[0].text, "10.0.0.1");
	assert_int_equal(b->addrs[0].prefixlen, 24);
	assert_true(nic_addr_is_link_local(&b->addrs[1]));
	/* vlan over the bond, by netlink kind and "link" name */
	const struct nic *v = get(&l, "bond0.7");
	assert_int_equal(v->cls, NIC_CLASS_VLAN);
	assert_int_equal(v->link_ifindex, 6);
	assert_int_equal(v->n_lower, 1);
	assert_int_equal(v->eff_speed_mbps, 200000);
	nic_list_free(&l);
}

static void test_fixture_rocev2_gid_index(void **state)
{
	struct nic_list l;
	discover_fixture(&l);
	const struct nic *b = get(&l, "bond0");
	assert_int_equal(b->n_rdma, 1);
	assert_string_equal(b->rdma[0].hca, "mlx5_bond_0");
	assert_int_equal(b->rdma[0].port, 1);
	assert_true(b->rdma[0].active);
	assert_string_equal(b->rdma[0].link_layer, "Ethernet");
	assert_int_equal(b->rdma[0].rate_mbps, 200000);
	/* index 2 has the address but is RoCE v1; 1 is v2 but link-local */
	assert_int_equal(b->rdma[0].gid_index_v4_rocev2, 3);
	/* the GID table names bond0, not the slave on the same PCI function */
	assert_int_equal(get(&l, "ens1f0")->n_rdma, 0);
	nic_list_free(&l);
}

static void test_fixture_ib_ports(void **state)
{
	struct nic_list l;
	discover_fixture(&l);
	const struct nic *ib = get(&l, "ib0"), *ib1 = get(&l, "ib1");
	assert_int_equal(ib->cls, NIC_CLASS_IPOIB);
	assert_int_equal(ib->arphrd, ARPHRD_INFINIBAND);
	assert_int_equal(ib->n_rdma, 1);
	assert_string_equal(ib->rdma[0].hca, "mlx5_0");
	assert_true(ib->rdma[0].active);
	assert_string_equal(ib->rdma[0].link_layer, "InfiniBand");
	assert_int_equal(ib->rdma[0].rate_mbps, 100000);
	assert_int_equal(ib->rdma[0].gid_index_v4_rocev2, -1);
	assert_int_equal(ib1->n_rdma, 1);
	assert_false(ib1->rdma[0].active);
	assert_int_equal(ib1->rdma[0].rate_mbps, 10000);
	/* speed -1 in sysfs is unknown */
	assert_int_equal(ib1->speed_mbps, -1);
	/* UP without LOWER_UP in the dump: no carrier */
	assert_int_equal(ib1->carrier, 0);
	nic_list_free(&l);
}

static void test_fixture_virtio_and_unknowns(void **state)
{
	struct nic_list l;
	discover_fixture(&l);
	const struct nic *e = get(&l, "eth1");
	assert_int_equal(e->cls, NIC_CLASS_PHYSICAL);
	assert_int_equal(e->speed_mbps, -1);
	assert_int_equal(e->eff_speed_mbps, -1);
	assert_string_equal(e->pci, "0000:00:05.0"); /* the PCI parent of virtio3 */
	assert_string_equal(e->driver, "virtio_net");
	const struct nic *g = get(&l, "ghost0");
	/* in netlink, absent from sysfs: unknown facts, not an error */
	assert_int_equal(g->cls, NIC_CLASS_VIRTUAL);
	assert_int_equal(g->speed_mbps, -1);
	assert_false(g->has_device);
	assert_false(g->up);
	assert_int_equal(g->carrier, -1);
	const struct nic *lo = get(&l, "lo");
	assert_int_equal(lo->cls, NIC_CLASS_LOOPBACK);
	assert_int_equal(lo->n_addrs, 0); /* 127.0.0.1 is host scope */
	nic_list_free(&l);
}

static void test_fixture_malformed_netlink_json(void **state)
{
	char p[512];
	struct nic_list l;
	np_error err = { 0 };
	put("bad.json", "[{\"ifindex\": 1,\n \"ifname\": }]");
	snprintf(p, sizeof(p), "%s/bad.json", fixdir);
	struct nic_source src = { .sysfs_root = fixdir, .netlink_json = p };
	assert_int_equal(nic_discover(&src, &l, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, p));
	assert_non_null(strstr(err.msg, ":2:")); /* line:column from jansson */
	assert_null(l.v);

	put("bad2.json", "[{\"ifindex\": \"one\", \"ifname\": \"x\"}]");
	snprintf(p, sizeof(p), "%s/bad2.json", fixdir);
	assert_int_equal(nic_discover(&src, &l, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "ifindex"));

	snprintf(p, sizeof(p), "%s/absent.json", fixdir);
	assert_int_equal(nic_discover(&src, &l, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "absent.json"));
}

static void test_fixture_missing_sysfs_root(void **state)
{
	char nl[512];
	struct nic_list l;
	np_error err = { 0 };
	snprintf(nl, sizeof(nl), "%s/netlink.json", fixdir);
	struct nic_source src = { .sysfs_root = "/nonexistent/sysfs", .netlink_json = nl };
	assert_int_equal(nic_discover(&src, &l, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "/nonexistent/sysfs"));
}

/* ---- the real kernel ---- */

static void test_netlink_finds_loopback(void **state)
{
	struct nic_list l;
	np_error err = { 0 };
	if (nic_discover(NULL, &l, &err) < 0) {
		if (strstr(err.msg, "Permission") || strstr(err.msg, "not supported")) {
			printf("SKIP netlink_finds_loopback: %s\n", err.msg);
			skip();
		}
		fail_msg("nic_discover: %s", err.msg);
	}
	const struct nic *lo = nic_list_find_name(&l, "lo");
	assert_non_null(lo);
	assert_int_equal(lo->cls, NIC_CLASS_LOOPBACK);
	assert_int_equal(lo->ifindex, 1);
	assert_ptr_equal(nic_list_find_index(&l, 1), lo);
	for (size_t i = 0; i < lo->n_addrs; i++)
		assert_false(lo->addrs[i].family == AF_INET && lo->addrs[i].bytes[0] == 127);
	nic_list_free(&l);
}

int main(void)
{
	const struct CMUnitTest pure[] = {
		cmocka_unit_test(test_classify_table),
		cmocka_unit_test(test_classify_never_uses_name),
		cmocka_unit_test(test_class_names_round_trip),
		cmocka_unit_test(test_link_local),
		cmocka_unit_test(test_effective_speed),
		cmocka_unit_test(test_effective_speed_cycle_terminates),
		cmocka_unit_test(test_effective_speed_1000_linear),
		cmocka_unit_test(test_netlink_finds_loopback),
	};
	const struct CMUnitTest fixture[] = {
		cmocka_unit_test(test_fixture_physical_and_bond),
		cmocka_unit_test(test_fixture_rocev2_gid_index),
		cmocka_unit_test(test_fixture_ib_ports),
		cmocka_unit_test(test_fixture_virtio_and_unknowns),
		cmocka_unit_test(test_fixture_malformed_netlink_json),
		cmocka_unit_test(test_fixture_missing_sysfs_root),
	};
	int rc = cmocka_run_group_tests_name("nic_classify", pure, NULL, NULL);
	rc += cmocka_run_group_tests_name("nic_sysfs_fixture", fixture, fixture_setup,
					  fixture_teardown);
	return rc;
}
