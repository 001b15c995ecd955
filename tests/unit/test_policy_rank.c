/* Ranking table tests: struct nic_list values built by hand, one scenario
 * per behaviour a user relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "policy/policy.h"
#include "select/decision.h"

#define FX_MAX 16

/* A hand-built node: storage for the pointers inside struct nic. */
struct fx {
	struct nic v[FX_MAX];
	size_t n;
	int lowers[FX_MAX][4];
	struct nic_addr addrs[FX_MAX][4];
	struct nic_rdma_port rdma[FX_MAX][2];
	struct policy p;
	struct policy_ranking r;
};

static struct fx *fx_new(void)
{
	struct fx *f = test_calloc(1, sizeof(*f));
	policy_init(&f->p);
	return f;
}

static void fx_free(struct fx *f)
{
	policy_ranking_free(&f->r);
	test_free(f);
}

static struct nic *add(struct fx *f, const char *name, enum nic_class cls, long speed)
{
	assert_true(f->n < FX_MAX);
	size_t i = f->n++;
	struct nic *n = &f->v[i];
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->ifindex = (int)i + 1;
	n->cls = cls;
	n->arphrd = 1;
	n->up = true;
	snprintf(n->operstate, sizeof(n->operstate), "up");
	n->carrier = 1;
	n->mtu = 1500;
	n->speed_mbps = speed;
	n->eff_speed_mbps = speed;
	n->numa_node = -1;
	n->lower = f->lowers[i];
	n->addrs = f->addrs[i];
	n->rdma = f->rdma[i];
	return n;
}

static void addr(struct nic *n, const char *text)
{
	assert_true(n->n_addrs < 4);
	struct nic_addr *a = &n->addrs[n->n_addrs++];
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, text, a->bytes) == 1) {
		a->family = AF_INET;
		a->prefixlen = 24;
	} else {
		assert_int_equal(inet_pton(AF_INET6, text, a->bytes), 1);
		a->family = AF_INET6;
		a->prefixlen = 64;
	}
	snprintf(a->text, sizeof(a->text), "%s", text);
}

/* Make `port` a lower device of `upper` (bond slave, bridge port). */
static void enslave(struct nic *port, struct nic *upper)
{
	assert_true(upper->n_lower < 4);
	upper->lower[upper->n_lower++] = port->ifindex;
	port->master_ifindex = upper->ifindex;
}

static void rank(struct fx *f)
{
	struct nic_list l = {.v = f->v, .n = f->n};
	np_error err = {0};
	policy_ranking_free(&f->r);
	assert_int_equal(policy_rank(&f->p, &l, &f->r, &err), 0);
	assert_int_equal(f->r.n, f->n);
}

static const struct policy_verdict *verdict(struct fx *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->v[i].name, name) == 0)
			return &f->r.v[i];
	fail_msg("no interface %s", name);
	return NULL;
}

static const char *best(struct fx *f)
{
	assert_true(f->r.n_usable > 0);
	return f->v[f->r.order[0]].name;
}

static void assert_reason(struct fx *f, const char *name, const char *reason)
{
	const struct policy_verdict *v = verdict(f, name);
	for (size_t i = 0; i < v->n_reasons; i++)
		if (strcmp(v->reasons[i], reason) == 0)
			return;
	for (size_t i = 0; i < v->n_reasons; i++)
		print_message("  %s: %s\n", name, v->reasons[i]);
	fail_msg("%s: no reason '%s'", name, reason);
}

static void assert_note_contains(struct fx *f, const char *name, const char *text)
{
	const struct policy_verdict *v = verdict(f, name);
	for (size_t i = 0; i < v->n_reasons; i++)
		if (strstr(v->reasons[i], text))
			return;
	fail_msg("%s: no note containing '%s'", name, text);
}

static void assert_refused(struct fx *f, const char *name, const char *reason)
{
	assert_false(verdict(f, name)->usable);
	assert_reason(f, name, reason);
}

static void test_decoy_container_bridges_refused(void **state)
{
	struct fx *f = fx_new();
	addr(add(f, "docker0", NIC_CLASS_BRIDGE, -1), "172.17.0.1");
	struct nic *cni = add(f, "cni0", NIC_CLASS_BRIDGE, -1);
	addr(cni, "10.244.0.1");
	struct nic *veth = add(f, "veth1234", NIC_CLASS_VETH, 10000);
	enslave(veth, cni);
	addr(add(f, "eth0", NIC_CLASS_PHYSICAL, 25000), "10.0.0.5");
	rank(f);
	assert_refused(f, "docker0", "bridge without a physical port: container bridge");
	assert_refused(f, "cni0", "bridge without a physical port: container bridge");
	assert_refused(f, "veth1234", "enslaved to cni0");
	assert_int_equal(f->r.n_usable, 1);
	assert_string_equal(best(f), "eth0");
	fx_free(f);
}

static void test_bridge_over_physical_usable_and_as_good_as_the_nic(void **state)
{
	struct fx *f = fx_new();
	struct nic *br = add(f, "br0", NIC_CLASS_BRIDGE, -1);
	struct nic *eth1 = add(f, "eth1", NIC_CLASS_PHYSICAL, 100000);
	enslave(eth1, br);
	br->eff_speed_mbps = 100000;
	addr(br, "10.1.0.2");
	addr(add(f, "eth2", NIC_CLASS_PHYSICAL, 100000), "10.2.0.2");
	rank(f);
	assert_true(verdict(f, "br0")->usable);
	assert_refused(f, "eth1", "enslaved to br0");
	assert_int_equal(verdict(f, "br0")->score, verdict(f, "eth2")->score);
	assert_note_contains(f, "br0", "class bridge over eth1 (physical)");
	/* Equal scores: ordered by name. */
	assert_int_equal(f->r.n_usable, 2);
	assert_string_equal(best(f), "br0");
	fx_free(f);
}

static void test_bridge_over_bond_over_physical_is_usable(void **state)
{
	struct fx *f = fx_new();
	struct nic *br = add(f, "br-data", NIC_CLASS_BRIDGE, -1);
	struct nic *bond = add(f, "bond0", NIC_CLASS_BOND, 50000);
	struct nic *e0 = add(f, "ens1f0", NIC_CLASS_PHYSICAL, 25000);
	struct nic *e1 = add(f, "ens1f1", NIC_CLASS_PHYSICAL, 25000);
	enslave(e0, bond);
	enslave(e1, bond);
	enslave(bond, br);
	br->eff_speed_mbps = 50000;
	addr(br, "10.7.0.1");
	rank(f);
	assert_true(verdict(f, "br-data")->usable);
	assert_refused(f, "bond0", "enslaved to br-data");
	assert_refused(f, "ens1f0", "enslaved to bond0");
	assert_string_equal(best(f), "br-data");
	fx_free(f);
}

static void test_bond_2x100g_beats_single_100g(void **state)
{
	struct fx *f = fx_new();
	addr(add(f, "eth2", NIC_CLASS_PHYSICAL, 100000), "10.2.0.2");
	struct nic *bond = add(f, "bond0", NIC_CLASS_BOND, 200000);
	enslave(add(f, "eth0", NIC_CLASS_PHYSICAL, 100000), bond);
	enslave(add(f, "eth1", NIC_CLASS_PHYSICAL, 100000), bond);
	addr(bond, "10.1.0.2");
	rank(f);
	assert_string_equal(best(f), "bond0");
	assert_true(verdict(f, "bond0")->score > verdict(f, "eth2")->score);
	assert_refused(f, "eth0", "enslaved to bond0");
	assert_refused(f, "eth1", "enslaved to bond0");
	fx_free(f);
}

static void test_link_local_only_refused(void **state)
{
	struct fx *f = fx_new();
	struct nic *ll = add(f, "eth9", NIC_CLASS_PHYSICAL, 10000);
	addr(ll, "169.254.3.4");
	addr(ll, "fe80::1");
	struct nic *v6 = add(f, "eth8", NIC_CLASS_PHYSICAL, 10000);
	addr(v6, "fe80::2");
	addr(v6, "2001:db8::8");
	rank(f);
	assert_refused(f, "eth9", "link-local only");
	assert_true(verdict(f, "eth8")->usable);
	assert_int_equal(verdict(f, "eth8")->addr, 1);
	assert_int_equal(verdict(f, "eth8")->family, AF_INET6);
	fx_free(f);
}

static void test_down_and_no_carrier_refused(void **state)
{
	struct fx *f = fx_new();
	struct nic *a = add(f, "eth0", NIC_CLASS_PHYSICAL, 10000);
	addr(a, "10.0.0.1");
	a->up = false;
	snprintf(a->operstate, sizeof(a->operstate), "down");
	struct nic *b = add(f, "eth1", NIC_CLASS_PHYSICAL, 10000);
	addr(b, "10.0.1.1");
	b->carrier = 0;
	snprintf(b->operstate, sizeof(b->operstate), "down");
	struct nic *c = add(f, "eth2.5", NIC_CLASS_VLAN, 10000);
	addr(c, "10.0.2.1");
	snprintf(c->operstate, sizeof(c->operstate), "lowerlayerdown");
	c->carrier = -1;
	struct nic *d = add(f, "tunx", NIC_CLASS_VIRTUAL, -1);
	addr(d, "10.0.3.1");
	snprintf(d->operstate, sizeof(d->operstate), "unknown");
	d->carrier = -1;
	rank(f);
	assert_refused(f, "eth0", "down");
	assert_refused(f, "eth1", "no carrier");
	assert_refused(f, "eth2.5", "no carrier");
	/* operstate "unknown" is what many virtual devices report when up. */
	assert_true(verdict(f, "tunx")->usable);
	assert_int_equal(f->r.n_usable, 1);
	fx_free(f);
}

/* A name that nccl.conf cannot carry leaves that interface out with its
 * reason; the run goes on with the others (issue 14: it used to exit 2). */
static void test_control_character_in_name_refused_next_to_a_good_one(void **state)
{
	struct fx *f = fx_new();
	struct nic *a = add(f, "bad\001x", NIC_CLASS_PHYSICAL, 100000);
	addr(a, "10.0.0.1");
	struct nic *b = add(f, "eth1", NIC_CLASS_PHYSICAL, 10000);
	addr(b, "10.0.1.1");
	struct nic *c = add(f, "del\177", NIC_CLASS_PHYSICAL, 100000);
	addr(c, "10.0.2.1");
	rank(f);
	assert_refused(f, "bad\001x",
		       "name has a control character (0x01): it cannot be written safely to nccl.conf");
	assert_refused(f, "del\177",
		       "name has a control character (0x7f): it cannot be written safely to nccl.conf");
	assert_string_equal(best(f), "eth1");
	assert_int_equal(f->r.n_usable, 1);
	fx_free(f);
}

static void test_pod_netns_only_eth0_veth_is_chosen(void **state)
{
	struct fx *f = fx_new();
	add(f, "lo", NIC_CLASS_LOOPBACK, -1);
	struct nic *eth0 = add(f, "eth0", NIC_CLASS_VETH, 10000);
	addr(eth0, "10.244.1.5");
	addr(eth0, "fe80::a");
	eth0->link_ifindex = 27; /* the host end, in another namespace */
	rank(f);
	assert_refused(f, "lo", "loopback");
	assert_int_equal(f->r.n_usable, 1);
	assert_string_equal(best(f), "eth0");
	assert_int_equal(verdict(f, "eth0")->addr, 0);
	fx_free(f);
}

static void test_pod_netns_multus_secondary_preferred_over_veth(void **state)
{
	const enum nic_class classes[] = {NIC_CLASS_MACVLAN, NIC_CLASS_IPVLAN, NIC_CLASS_SRIOV_VF};
	for (size_t i = 0; i < 3; i++) {
		struct fx *f = fx_new();
		add(f, "lo", NIC_CLASS_LOOPBACK, -1);
		struct nic *eth0 = add(f, "eth0", NIC_CLASS_VETH, 10000);
		addr(eth0, "10.244.1.5");
		eth0->link_ifindex = 27;
		struct nic *net1 = add(f, "net1", classes[i], -1);
		addr(net1, "192.168.50.5");
		net1->link_ifindex = 4; /* the parent NIC, not in this namespace */
		rank(f);
		assert_int_equal(f->r.n_usable, 2);
		assert_string_equal(best(f), "net1");
		fx_free(f);
	}
}

static void test_macvlan_over_physical_ranks_as_the_nic(void **state)
{
	struct fx *f = fx_new();
	struct nic *phys = add(f, "eth0", NIC_CLASS_PHYSICAL, 100000);
	addr(phys, "10.0.0.1");
	struct nic *mv = add(f, "mv0", NIC_CLASS_MACVLAN, 100000);
	mv->link_ifindex = phys->ifindex;
	addr(mv, "10.0.0.2");
	rank(f);
	assert_int_equal(verdict(f, "mv0")->score, verdict(f, "eth0")->score);
	assert_note_contains(f, "mv0", "class macvlan over eth0 (physical)");
	fx_free(f);
}

static void test_min_speed_filter(void **state)
{
	struct fx *f = fx_new();
	np_error err = {0};
	addr(add(f, "eth0", NIC_CLASS_PHYSICAL, 10000), "10.0.0.1");
	addr(add(f, "eth1", NIC_CLASS_PHYSICAL, 100000), "10.0.1.1");
	addr(add(f, "eth2", NIC_CLASS_PHYSICAL, -1), "10.0.2.1");
	addr(add(f, "eth3", NIC_CLASS_PHYSICAL, 2500), "10.0.3.1");
	assert_int_equal(policy_set_min_speed(&f->p, "100G", &err), 0);
	rank(f);
	assert_refused(f, "eth0", "10 Gb/s < 100 Gb/s");
	assert_refused(f, "eth2", "speed unknown, --min-speed 100 Gb/s");
	assert_refused(f, "eth3", "2.5 Gb/s < 100 Gb/s");
	assert_int_equal(f->r.n_usable, 1);
	assert_string_equal(best(f), "eth1");
	fx_free(f);
}

static void test_cidr_filter_and_chosen_address(void **state)
{
	struct fx *f = fx_new();
	np_error err = {0};
	addr(add(f, "eth0", NIC_CLASS_PHYSICAL, 10000), "10.0.0.5");
	addr(add(f, "eth1", NIC_CLASS_PHYSICAL, 100000), "192.168.1.5");
	struct nic *two = add(f, "eth2", NIC_CLASS_PHYSICAL, 10000);
	addr(two, "192.168.2.2");
	addr(two, "10.5.5.5");
	assert_int_equal(policy_set_cidr(&f->p, "10.0.0.0/8", &err), 0);
	rank(f);
	assert_refused(f, "eth1", "no address in 10.0.0.0/8");
	assert_int_equal(verdict(f, "eth2")->addr, 1);
	assert_int_equal(verdict(f, "eth0")->addr, 0);
	assert_int_equal(f->r.n_usable, 2);
	fx_free(f);
}

static void test_family_filter(void **state)
{
	struct fx *f = fx_new();
	np_error err = {0};
	addr(add(f, "eth0", NIC_CLASS_PHYSICAL, 10000), "10.0.0.5");
	addr(add(f, "eth1", NIC_CLASS_PHYSICAL, 10000), "2001:db8::1");
	struct nic *both = add(f, "eth2", NIC_CLASS_PHYSICAL, 10000);
	addr(both, "2001:db8::2");
	addr(both, "10.0.2.2");

	rank(f);
	/* No --family: IPv4 is chosen when both are there. */
	assert_int_equal(verdict(f, "eth2")->addr, 1);
	assert_int_equal(verdict(f, "eth2")->family, AF_INET);
	assert_int_equal(f->r.n_usable, 3);

	assert_int_equal(policy_set_family(&f->p, "inet6", &err), 0);
	rank(f);
	assert_refused(f, "eth0", "no IPv6 address");
	assert_int_equal(verdict(f, "eth2")->addr, 0);
	assert_int_equal(verdict(f, "eth2")->family, AF_INET6);

	assert_int_equal(policy_set_family(&f->p, "inet", &err), 0);
	rank(f);
	assert_refused(f, "eth1", "no IPv4 address");

	struct fx *g = fx_new();
	add(g, "eth0", NIC_CLASS_PHYSICAL, 10000);
	rank(g);
	assert_refused(g, "eth0", "no IPv4/IPv6 address");
	fx_free(g);
	fx_free(f);
}

static void test_ipv4_preferred_only_as_tie_breaker(void **state)
{
	struct fx *f = fx_new();
	addr(add(f, "a6", NIC_CLASS_PHYSICAL, 10000), "2001:db8::1");
	addr(add(f, "b4", NIC_CLASS_PHYSICAL, 10000), "10.0.0.1");
	addr(add(f, "c6", NIC_CLASS_PHYSICAL, 10100), "2001:db8::3");
	rank(f);
	/* 100 Mb/s more beats the family; the family beats the name. */
	assert_string_equal(f->v[f->r.order[0]].name, "c6");
	assert_string_equal(f->v[f->r.order[1]].name, "b4");
	assert_string_equal(f->v[f->r.order[2]].name, "a6");
	fx_free(f);
}

static void test_include_and_exclude_reasons(void **state)
{
	struct fx *f = fx_new();
	np_error err = {0};
	addr(add(f, "eth0", NIC_CLASS_PHYSICAL, 10000), "10.0.0.1");
	addr(add(f, "eth1", NIC_CLASS_PHYSICAL, 10000), "10.0.1.1");
	addr(add(f, "eth10", NIC_CLASS_PHYSICAL, 10000), "10.0.10.1");
	assert_int_equal(policy_set_include(&f->p, "=eth1", &err), 0);
	rank(f);
	assert_refused(f, "eth0", "not in --include '=eth1'");
	assert_refused(f, "eth10", "not in --include '=eth1'");
	assert_int_equal(f->r.n_usable, 1);
	assert_string_equal(best(f), "eth1");

	policy_init(&f->p);
	assert_int_equal(policy_set_exclude(&f->p, "^eth1", &err), 0);
	rank(f);
	assert_refused(f, "eth1", "excluded by --exclude '^eth1'");
	assert_refused(f, "eth10", "excluded by --exclude '^eth1'");
	assert_string_equal(best(f), "eth0");
	fx_free(f);
}

static void test_tunnel_usable_but_ranked_low(void **state)
{
	struct fx *f = fx_new();
	struct nic *vx = add(f, "vxlan0", NIC_CLASS_TUNNEL, -1);
	snprintf(vx->tunnel, sizeof(vx->tunnel), "vxlan");
	addr(vx, "10.3.0.1");
	addr(add(f, "eth0", NIC_CLASS_VETH, 10000), "10.244.0.7");
	rank(f);
	assert_true(verdict(f, "vxlan0")->usable);
	assert_note_contains(f, "vxlan0", "tunnel (vxlan)");
	assert_string_equal(best(f), "eth0");
	fx_free(f);
}

static void test_tuntap_and_loopback_refused(void **state)
{
	struct fx *f = fx_new();
	addr(add(f, "tap0", NIC_CLASS_TUNTAP, 10000), "10.8.0.1");
	addr(add(f, "lo", NIC_CLASS_LOOPBACK, -1), "10.255.255.1");
	rank(f);
	assert_refused(f, "tap0", "tun/tap");
	assert_refused(f, "lo", "loopback");
	assert_int_equal(f->r.n_usable, 0);
	fx_free(f);
}

static void test_nothing_usable_is_not_an_error(void **state)
{
	struct fx *f = fx_new();
	add(f, "lo", NIC_CLASS_LOOPBACK, -1);
	rank(f);
	assert_int_equal(f->r.n_usable, 0);
	assert_true(verdict(f, "lo")->n_reasons > 0);
	fx_free(f);

	struct nic_list empty = {0};
	struct policy p;
	struct policy_ranking r;
	np_error err = {0};
	policy_init(&p);
	assert_int_equal(policy_rank(&p, &empty, &r, &err), 0);
	assert_int_equal(r.n_usable, 0);
	policy_ranking_free(&r);
}

static void test_equal_scores_order_by_name(void **state)
{
	struct fx *f = fx_new();
	addr(add(f, "eth1", NIC_CLASS_PHYSICAL, 25000), "10.0.1.1");
	addr(add(f, "eth0", NIC_CLASS_PHYSICAL, 25000), "10.0.0.1");
	rank(f);
	assert_int_equal(verdict(f, "eth0")->score, verdict(f, "eth1")->score);
	assert_string_equal(best(f), "eth0");
	fx_free(f);
}

static void test_unknown_speed_ranks_below_known(void **state)
{
	struct fx *f = fx_new();
	addr(add(f, "eth0", NIC_CLASS_PHYSICAL, -1), "10.0.0.1");
	addr(add(f, "eth1", NIC_CLASS_PHYSICAL, 100), "10.0.1.1");
	rank(f);
	assert_string_equal(best(f), "eth1");
	assert_note_contains(f, "eth0", "speed unknown");
	fx_free(f);
}

static void test_active_rdma_port_bonus(void **state)
{
	struct fx *f = fx_new();
	addr(add(f, "ens1", NIC_CLASS_PHYSICAL, 100000), "10.0.1.1");
	struct nic *r = add(f, "ens2", NIC_CLASS_PHYSICAL, 100000);
	addr(r, "10.0.2.1");
	snprintf(r->rdma[0].hca, sizeof(r->rdma[0].hca), "mlx5_1");
	r->rdma[0].port = 1;
	r->rdma[0].active = true;
	r->n_rdma = 1;
	rank(f);
	assert_string_equal(best(f), "ens2");
	assert_note_contains(f, "ens2", "RDMA mlx5_1 port 1 ACTIVE");
	fx_free(f);
}

static void test_verdict_to_json(void **state)
{
	struct fx *f = fx_new();
	addr(add(f, "eth0", NIC_CLASS_PHYSICAL, 10000), "10.0.0.1");
	add(f, "eth1", NIC_CLASS_PHYSICAL, 10000)->up = false;
	rank(f);
	json_t *o = json_object();
	select_decision_verdict_json(verdict(f, "eth0"), &f->v[0], o);
	assert_true(json_is_true(json_object_get(o, "usable")));
	assert_string_equal(json_string_value(json_object_get(o, "address")), "10.0.0.1");
	assert_int_equal(json_integer_value(json_object_get(o, "score")), verdict(f, "eth0")->score);
	assert_true(json_array_size(json_object_get(o, "reasons")) >= 2);
	json_decref(o);

	o = json_object();
	select_decision_verdict_json(verdict(f, "eth1"), &f->v[1], o);
	assert_true(json_is_false(json_object_get(o, "usable")));
	assert_true(json_is_null(json_object_get(o, "address")));
	json_t *reasons = json_object_get(o, "reasons");
	assert_string_equal(json_string_value(json_array_get(reasons, 0)), "down");
	json_decref(o);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decoy_container_bridges_refused),
		cmocka_unit_test(test_bridge_over_physical_usable_and_as_good_as_the_nic),
		cmocka_unit_test(test_bridge_over_bond_over_physical_is_usable),
		cmocka_unit_test(test_bond_2x100g_beats_single_100g),
		cmocka_unit_test(test_link_local_only_refused),
		cmocka_unit_test(test_down_and_no_carrier_refused),
		cmocka_unit_test(test_control_character_in_name_refused_next_to_a_good_one),
		cmocka_unit_test(test_pod_netns_only_eth0_veth_is_chosen),
		cmocka_unit_test(test_pod_netns_multus_secondary_preferred_over_veth),
		cmocka_unit_test(test_macvlan_over_physical_ranks_as_the_nic),
		cmocka_unit_test(test_min_speed_filter),
		cmocka_unit_test(test_cidr_filter_and_chosen_address),
		cmocka_unit_test(test_family_filter),
		cmocka_unit_test(test_ipv4_preferred_only_as_tie_breaker),
		cmocka_unit_test(test_include_and_exclude_reasons),
		cmocka_unit_test(test_tunnel_usable_but_ranked_low),
		cmocka_unit_test(test_tuntap_and_loopback_refused),
		cmocka_unit_test(test_nothing_usable_is_not_an_error),
		cmocka_unit_test(test_equal_scores_order_by_name),
		cmocka_unit_test(test_unknown_speed_ranks_below_known),
		cmocka_unit_test(test_active_rdma_port_bonus),
		cmocka_unit_test(test_verdict_to_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
