/* Snapshots: `discover --json` output read back exactly, strict about
 * types, tolerant of the keys the command adds. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "nic/nic.h"

static void assert_round_trip(const struct nic_list *l)
{
	np_error err = { 0 };
	struct nic_list back;
	json_t *a = nic_list_to_json(l);
	assert_non_null(a);
	/* Through text too: what is saved is a file. */
	char *text = json_dumps(a, JSON_COMPACT);
	json_t *parsed = json_loads(text, 0, NULL);
	assert_non_null(parsed);
	if (nic_list_from_json(parsed, &back, &err) < 0)
		fail_msg("nic_list_from_json: %s", err.msg);
	json_t *b = nic_list_to_json(&back);
	if (!json_equal(a, b)) {
		char *tb = json_dumps(b, JSON_COMPACT);
		fail_msg("round trip differs:\n%s\n%s", text, tb);
	}
	assert_int_equal(back.n, l->n);
	for (size_t i = 0; i < l->n; i++) {
		const struct nic *x = &l->v[i], *y = &back.v[i];
		assert_string_equal(x->name, y->name);
		assert_int_equal(x->ifindex, y->ifindex);
		assert_int_equal(x->cls, y->cls);
		assert_int_equal(x->carrier, y->carrier);
		assert_int_equal(x->speed_mbps, y->speed_mbps);
		assert_int_equal(x->eff_speed_mbps, y->eff_speed_mbps);
		assert_int_equal(x->master_ifindex, y->master_ifindex);
		assert_int_equal(x->link_ifindex, y->link_ifindex);
		assert_int_equal(x->n_lower, y->n_lower);
		for (size_t k = 0; k < x->n_lower; k++)
			assert_int_equal(x->lower[k], y->lower[k]);
		assert_int_equal(x->n_addrs, y->n_addrs);
		for (size_t k = 0; k < x->n_addrs; k++)
			assert_memory_equal(&x->addrs[k], &y->addrs[k], sizeof(struct nic_addr));
		assert_int_equal(x->n_rdma, y->n_rdma);
		for (size_t k = 0; k < x->n_rdma; k++) {
			const struct nic_rdma_port *p = &x->rdma[k], *q = &y->rdma[k];
			assert_string_equal(p->hca, q->hca);
			assert_int_equal(p->port, q->port);
			assert_int_equal(p->active, q->active);
			assert_string_equal(p->link_layer, q->link_layer);
			assert_int_equal(p->rate_mbps, q->rate_mbps);
			assert_int_equal(p->gid_index_v4_rocev2, q->gid_index_v4_rocev2);
		}
	}
	free(text);
	json_decref(a);
	json_decref(b);
	json_decref(parsed);
	nic_list_free(&back);
}

static void test_round_trip_this_machine(void **state)
{
	struct nic_list l;
	np_error err = { 0 };
	if (nic_discover(NULL, &l, &err) < 0) {
		printf("SKIP round_trip_this_machine: netlink unavailable: %s\n", err.msg);
		skip();
	}
	assert_non_null(nic_list_find_name(&l, "lo"));
	assert_round_trip(&l);
	nic_list_free(&l);
}

/* Every field set to something non-default, unknowns included. */
static void make_full(struct nic_list *l)
{
	l->n = 3;
	l->v = calloc(3, sizeof(*l->v));
	struct nic *b = &l->v[0], *e = &l->v[1], *v = &l->v[2];

	snprintf(b->name, sizeof(b->name), "bond0");
	b->ifindex = 10;
	b->cls = NIC_CLASS_BOND;
	snprintf(b->kind, sizeof(b->kind), "bond");
	b->arphrd = 1;
	snprintf(b->devtype, sizeof(b->devtype), "bond");
	b->up = true;
	snprintf(b->operstate, sizeof(b->operstate), "up");
	b->carrier = 1;
	b->mtu = 9000;
	snprintf(b->mac, sizeof(b->mac), "0c:42:a1:00:00:01");
	b->speed_mbps = 200000;
	b->eff_speed_mbps = 200000;
	b->numa_node = -1;
	b->lower = calloc(1, sizeof(int));
	b->lower[0] = 11;
	b->n_lower = 1;
	b->addrs = calloc(2, sizeof(*b->addrs));
	b->n_addrs = 2;
	b->addrs[0].family = AF_INET;
	inet_pton(AF_INET, "10.0.0.1", b->addrs[0].bytes);
	b->addrs[0].prefixlen = 24;
	snprintf(b->addrs[0].text, sizeof(b->addrs[0].text), "10.0.0.1");
	b->addrs[1].family = AF_INET6;
	inet_pton(AF_INET6, "fd00::1:2", b->addrs[1].bytes);
	b->addrs[1].prefixlen = 64;
	snprintf(b->addrs[1].text, sizeof(b->addrs[1].text), "fd00::1:2");
	b->rdma = calloc(2, sizeof(*b->rdma));
	b->n_rdma = 2;
	b->rdma[0] = (struct nic_rdma_port){ .hca = "mlx5_bond_0", .port = 1, .active = true,
					     .link_layer = "Ethernet", .rate_mbps = 200000,
					     .gid_index_v4_rocev2 = 3 };
	b->rdma[1] = (struct nic_rdma_port){ .hca = "mlx5_9", .port = 2, .active = false,
					     .link_layer = "", .rate_mbps = -1,
					     .gid_index_v4_rocev2 = -1 };

	snprintf(e->name, sizeof(e->name), "ens1f0");
	e->ifindex = 11;
	e->cls = NIC_CLASS_SRIOV_VF;
	e->arphrd = -1;
	e->carrier = 0;
	e->speed_mbps = 100000;
	e->eff_speed_mbps = 100000;
	snprintf(e->pci, sizeof(e->pci), "0000:17:00.2");
	e->numa_node = 1;
	snprintf(e->driver, sizeof(e->driver), "mlx5_core");
	e->has_device = true;
	e->is_vf = true;
	e->master_ifindex = 10;

	snprintf(v->name, sizeof(v->name), "vx0");
	v->ifindex = 12;
	v->cls = NIC_CLASS_TUNNEL;
	snprintf(v->kind, sizeof(v->kind), "vxlan");
	snprintf(v->tunnel, sizeof(v->tunnel), "vxlan");
	v->arphrd = 1;
	v->carrier = -1;
	v->speed_mbps = -1;
	v->eff_speed_mbps = -1;
	v->numa_node = -1;
	v->link_ifindex = 7; /* a device of another namespace: not in the list */
}

static void test_round_trip_every_field(void **state)
{
	struct nic_list l;
	make_full(&l);
	assert_round_trip(&l);
	json_t *a = nic_list_to_json(&l);
	json_t *b0 = json_array_get(a, 0), *e = json_array_get(a, 1), *v = json_array_get(a, 2);
	assert_string_equal(json_string_value(json_object_get(b0, "class")), "bond");
	assert_string_equal(json_string_value(json_object_get(e, "master")), "bond0");
	assert_string_equal(json_string_value(json_array_get(json_object_get(b0, "lower"), 0)),
			    "ens1f0");
	assert_true(json_is_null(json_object_get(v, "link")));
	assert_int_equal(json_integer_value(json_object_get(v, "link_ifindex")), 7);
	assert_true(json_is_null(json_object_get(v, "speed_mbps")));
	assert_true(json_is_null(json_object_get(v, "carrier")));
	assert_true(json_is_false(json_object_get(e, "carrier")));
	json_t *addr = json_array_get(json_object_get(b0, "addresses"), 0);
	assert_string_equal(json_string_value(json_object_get(addr, "family")), "inet");
	assert_string_equal(json_string_value(json_object_get(addr, "address")), "10.0.0.1");
	assert_int_equal(json_integer_value(json_object_get(addr, "prefixlen")), 24);
	json_t *r = json_array_get(json_object_get(b0, "rdma"), 0);
	assert_int_equal(json_integer_value(json_object_get(r, "gid_index_rocev2")), 3);
	json_decref(a);
	nic_list_free(&l);
}

static void test_unknown_keys_ignored(void **state)
{
	struct nic_list l, back;
	np_error err = { 0 };
	make_full(&l);
	json_t *a = nic_list_to_json(&l);
	json_t *o = json_array_get(a, 0);
	json_object_set_new(o, "usable", json_true());
	json_object_set_new(o, "score", json_integer(87));
	json_object_set_new(o, "reasons", json_pack("[s]", "bond"));
	if (nic_list_from_json(a, &back, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(back.n, 3);
	json_decref(a);
	nic_list_free(&l);
	nic_list_free(&back);
}

static void test_hand_written_names_resolve(void **state)
{
	/* master/link/lower given by name only, no *_ifindex keys */
	const char *doc = "[{\"name\":\"br0\",\"ifindex\":3,\"class\":\"bridge\","
			  "\"lower\":[\"eth0\"]},"
			  "{\"name\":\"eth0\",\"ifindex\":2,\"class\":\"physical\","
			  "\"master\":\"br0\",\"speed_mbps\":25000}]";
	json_t *a = json_loads(doc, 0, NULL);
	struct nic_list l;
	np_error err = { 0 };
	if (nic_list_from_json(a, &l, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(l.v[1].master_ifindex, 3);
	assert_int_equal(l.v[0].n_lower, 1);
	assert_int_equal(l.v[0].lower[0], 2);
	assert_int_equal(l.v[1].carrier, -1); /* absent: unknown */
	nic_compute_effective_speed(&l);
	assert_int_equal(l.v[0].eff_speed_mbps, 25000);
	json_decref(a);
	nic_list_free(&l);
}

struct bad_case {
	const char *key;
	const char *value; /* JSON text */
	const char *want;  /* substring of the message */
};

static const struct bad_case bad_cases[] = {
	{ "ifindex", "\"3\"", "ifindex" },
	{ "ifindex", "0", "ifindex" },
	{ "class", "\"ethernet\"", "class" },
	{ "class", "3", "class" },
	{ "kind", "5", "kind" },
	{ "up", "\"yes\"", "up" },
	{ "carrier", "1", "carrier" },
	{ "mtu", "1500.5", "mtu" },
	{ "speed_mbps", "\"100G\"", "speed_mbps" },
	{ "numa_node", "true", "numa_node" },
	{ "mac", "[]", "mac" },
	{ "vf", "0", "vf" },
	{ "master", "10", "master" },
	{ "lower", "\"eth0\"", "lower" },
	{ "lower", "[\"nosuch\"]", "not in the snapshot" },
	{ "addresses", "{}", "addresses" },
	{ "addresses", "[\"10.0.0.1/24\"]", "addresses" },
	{ "addresses", "[{\"family\":\"inet\",\"address\":\"10.0.0.300\",\"prefixlen\":24}]",
	  "address" },
	{ "addresses", "[{\"family\":\"inet\",\"address\":\"10.0.0.1\",\"prefixlen\":33}]",
	  "address" },
	{ "rdma", "[{\"hca\":\"mlx5_0\",\"port\":\"1\"}]", "port" },
	{ "rdma", "[{\"hca\":7}]", "hca" },
	{ "name", "\"abcdefghijklmnopqrstuvwxyz\"", "name" },
};

static void test_wrong_types_rejected(void **state)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		struct nic_list l;
		np_error err = { 0 };
		char doc[1024];
		snprintf(doc, sizeof(doc),
			 "[{\"name\":\"bond0\",\"ifindex\":10,\"class\":\"bond\"},"
			 "{\"name\":\"eth9\",\"ifindex\":11,\"class\":\"physical\",\"%s\":%s}]",
			 c->key, c->value);
		json_t *a = json_loads(doc, 0, NULL);
		assert_non_null(a);
		if (nic_list_from_json(a, &l, &err) == 0)
			fail_msg("%s=%s accepted", c->key, c->value);
		assert_int_equal(err.status, NP_EUSAGE);
		if (!strstr(err.msg, c->want))
			fail_msg("%s=%s: message \"%s\" lacks \"%s\"", c->key, c->value, err.msg,
				 c->want);
		/* the interface is named, except when its name is the problem */
		if (strcmp(c->key, "name") != 0 && !strstr(err.msg, "eth9"))
			fail_msg("%s=%s: message \"%s\" does not name eth9", c->key, c->value,
				 err.msg);
		assert_null(l.v);
		json_decref(a);
	}
}

static void test_not_an_array_and_duplicates(void **state)
{
	struct nic_list l;
	np_error err = { 0 };
	json_t *o = json_object();
	assert_int_equal(nic_list_from_json(o, &l, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	json_decref(o);
	json_t *a = json_loads("[{\"name\":\"a\",\"ifindex\":1,\"class\":\"veth\"},"
			       "{\"name\":\"a\",\"ifindex\":2,\"class\":\"veth\"}]",
			       0, NULL);
	assert_int_equal(nic_list_from_json(a, &l, &err), -1);
	assert_non_null(strstr(err.msg, "twice"));
	json_decref(a);
	a = json_loads("[{\"name\":\"a\",\"ifindex\":1}]", 0, NULL);
	assert_int_equal(nic_list_from_json(a, &l, &err), -1);
	assert_non_null(strstr(err.msg, "class"));
	json_decref(a);
}

static void test_snapshot_load_file(void **state)
{
	char path[] = "/tmp/nicpick-snap-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	struct nic_list l, back;
	np_error err = { 0 };
	make_full(&l);
	json_t *a = nic_list_to_json(&l);
	assert_int_equal(json_dumpfd(a, fd, JSON_INDENT(2)), 0);
	close(fd);
	if (nic_snapshot_load(path, &back, &err) < 0)
		fail_msg("%s", err.msg);
	json_t *b = nic_list_to_json(&back);
	assert_true(json_equal(a, b));
	json_decref(b);
	nic_list_free(&back);

	/* a syntax error: path and line:column */
	FILE *f = fopen(path, "w");
	fputs("[\n{\"name\": \"x\",,}]\n", f);
	fclose(f);
	assert_int_equal(nic_snapshot_load(path, &back, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, ":2:"));
	assert_null(back.v);

	/* a type error is wrapped with the path */
	f = fopen(path, "w");
	fputs("[{\"name\": \"x\", \"ifindex\": 1, \"class\": \"veth\", \"mtu\": \"big\"}]", f);
	fclose(f);
	assert_int_equal(nic_snapshot_load(path, &back, &err), -1);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "mtu"));
	unlink(path);

	/* a missing file says so */
	assert_int_equal(nic_snapshot_load(path, &back, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "No such file"));
	json_decref(a);
	nic_list_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_this_machine),
		cmocka_unit_test(test_round_trip_every_field),
		cmocka_unit_test(test_unknown_keys_ignored),
		cmocka_unit_test(test_hand_written_names_resolve),
		cmocka_unit_test(test_wrong_types_rejected),
		cmocka_unit_test(test_not_an_array_and_duplicates),
		cmocka_unit_test(test_snapshot_load_file),
	};
	return cmocka_run_group_tests_name("snapshot", tests, NULL, NULL);
}
