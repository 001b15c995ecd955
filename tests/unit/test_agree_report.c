/* The report format: building, strict reading, fuzzing; networks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agree/agree.h"

static void set_addr(struct nic_addr *a, const char *text, int plen)
{
	memset(a, 0, sizeof(*a));
	a->family = strchr(text, ':') ? AF_INET6 : AF_INET;
	assert_int_equal(inet_pton(a->family, text, a->bytes), 1);
	a->prefixlen = plen;
	snprintf(a->text, sizeof(a->text), "%s", text);
}

/* eth0 (mgmt), ens3f0 (fast, RDMA, two global addresses and a link-local), cni0 (not usable). */
struct node_fixture {
	struct nic nics[3];
	struct nic_addr a0[1], a1[4], a2[1];
	struct nic_rdma_port rdma[2];
	struct policy_verdict v[3];
	size_t order[2];
	struct nic_list list;
	struct policy_ranking rank;
};

static void node_fixture(struct node_fixture *f)
{
	memset(f, 0, sizeof(*f));
	struct nic *n = f->nics;
	strcpy(n[0].name, "eth0");
	n[0].cls = NIC_CLASS_VETH;
	n[0].eff_speed_mbps = 10000;
	n[0].mtu = 1500;
	set_addr(&f->a0[0], "192.168.1.10", 24);
	n[0].addrs = f->a0;
	n[0].n_addrs = 1;

	strcpy(n[1].name, "ens3f0");
	n[1].cls = NIC_CLASS_PHYSICAL;
	n[1].eff_speed_mbps = 100000;
	n[1].mtu = 9000;
	set_addr(&f->a1[0], "fe80::1", 64);
	set_addr(&f->a1[1], "fd00:9::3", 64);
	set_addr(&f->a1[2], "10.9.0.3", 24);
	set_addr(&f->a1[3], "10.9.0.3", 24); /* netlink listed it twice: published once */
	n[1].addrs = f->a1;
	n[1].n_addrs = 4;
	strcpy(f->rdma[0].hca, "mlx5_1");
	f->rdma[0].port = 1; /* down: not published */
	strcpy(f->rdma[1].hca, "mlx5_0");
	f->rdma[1].port = 1;
	f->rdma[1].active = true;
	n[1].rdma = f->rdma;
	n[1].n_rdma = 2;

	strcpy(n[2].name, "cni0");
	n[2].cls = NIC_CLASS_BRIDGE;
	set_addr(&f->a2[0], "10.244.0.1", 24);
	n[2].addrs = f->a2;
	n[2].n_addrs = 1;

	f->v[0] = (struct policy_verdict){ .usable = true, .score = 10, .addr = 0, .family = AF_INET, .socket_mbps = 10000 };
	f->v[1] = (struct policy_verdict){ .usable = true, .score = 500, .addr = 2, .family = AF_INET, .socket_mbps = 100000 };
	f->v[2] = (struct policy_verdict){ .usable = false, .addr = -1 };
	f->order[0] = 1;
	f->order[1] = 0;
	f->list = (struct nic_list){ .v = f->nics, .n = 3 };
	f->rank = (struct policy_ranking){ .v = f->v, .n = 3, .order = f->order, .n_usable = 2 };
}

/* What a pod publishes: its report from its interfaces, written out. */
static int report_build(const char *pod, const char *uid, const char *node, const struct node_fixture *f,
			char **json, np_error *err)
{
	struct agree_report *r = malloc(sizeof(*r));
	assert_non_null(r);
	*json = NULL;
	int ret = agree_report_from_nics(pod, uid, node, &f->list, &f->rank, r, err) < 0
			  ? -1
			  : agree_report_to_json(r, json, err);
	free(r);
	return ret;
}

static void test_report_round_trip_in_ranking_order(void **state)
{
	struct node_fixture f;
	struct agree_report r;
	np_error err = { 0 };
	char *json = NULL;
	node_fixture(&f);
	assert_int_equal(report_build("job-w-3", "6f1c-aa", "nodeA", &f, &json, &err), 0);
	assert_true(strlen(json) <= AGREE_REPORT_MAX_BYTES);
	assert_int_equal(agree_report_parse(json, strlen(json), &r, &err), 0);
	assert_string_equal(r.pod, "job-w-3");
	assert_string_equal(r.uid, "6f1c-aa");
	assert_string_equal(r.node, "nodeA");
	assert_int_equal(r.n, 3);
	/* The chosen address of the best interface first, link-local and cni0 left out. */
	assert_string_equal(r.c[0].ifname, "ens3f0");
	assert_string_equal(r.c[0].addr_text, "10.9.0.3");
	assert_int_equal(r.c[0].family, AF_INET);
	assert_int_equal(r.c[0].prefixlen, 24);
	assert_int_equal(r.c[0].mbps, 100000);
	assert_int_equal(r.c[0].score, 500);
	assert_int_equal(r.c[0].mtu, 9000);
	assert_string_equal(r.c[0].cls, "physical");
	assert_string_equal(r.c[0].rdma, "mlx5_0:1");
	assert_false(r.c[0].has_gw);
	assert_string_equal(r.c[1].addr_text, "fd00:9::3");
	assert_int_equal(r.c[1].family, AF_INET6);
	assert_string_equal(r.c[2].ifname, "eth0");
	assert_string_equal(r.c[2].cls, "veth");
	assert_string_equal(r.c[2].rdma, "");

	/* Gateways and host survive the trip too, and writing again gives the same text. */
	strcpy(r.host, "hostA");
	r.c[2].has_gw = true;
	inet_pton(AF_INET, "192.168.1.1", r.c[2].gw);
	char *again = NULL;
	struct agree_report r2;
	assert_int_equal(agree_report_to_json(&r, &again, &err), 0);
	assert_non_null(strstr(again, "\"gw\":\"192.168.1.1\""));
	assert_int_equal(agree_report_parse(again, strlen(again), &r2, &err), 0);
	assert_string_equal(r2.host, "hostA");
	assert_string_equal(r2.c[2].gw_text, "192.168.1.1");
	char *third = NULL;
	assert_int_equal(agree_report_to_json(&r2, &third, &err), 0);
	assert_string_equal(again, third);
	free(json);
	free(again);
	free(third);
}

static void test_report_build_refuses_bad_pod_name(void **state)
{
	struct node_fixture f;
	np_error err = { 0 };
	char *json = NULL;
	node_fixture(&f);
	assert_int_equal(report_build("", "u", "n", &f, &json, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_null(json);
	assert_int_equal(report_build("a b", "u", "n", &f, &json, &err), -1);
}

static void big_report(struct agree_report *r)
{
	memset(r, 0, sizeof(*r));
	memset(r->pod, 'p', AGREE_NAME_MAX - 1);
	memset(r->node, 'n', AGREE_NAME_MAX - 1);
	memset(r->host, 'h', AGREE_NAME_MAX - 1);
	memset(r->uid, 'u', AGREE_UID_MAX - 1);
	for (int i = 0; i < AGREE_CAND_MAX; i++) {
		struct agree_cand *c = &r->c[r->n++];
		snprintf(c->ifname, sizeof(c->ifname), "enp%02ux0f0np0", (unsigned)i % 100u);
		strcpy(c->cls, "sriov-vf");
		c->family = AF_INET6;
		char a[64];
		snprintf(a, sizeof(a), "fd00:1111:2222:3333:4444:5555:6666:%x", i + 1);
		inet_pton(AF_INET6, a, c->addr);
		inet_ntop(AF_INET6, c->addr, c->addr_text, sizeof(c->addr_text));
		c->prefixlen = 64;
		c->has_gw = true;
		inet_pton(AF_INET6, "fd00:1111:2222:3333:4444:5555:6666:ffff", c->gw);
		c->mbps = 99999999;
		c->score = -999999999999;
		snprintf(c->rdma, sizeof(c->rdma), "mlx5_%040d:255", i);
		c->mtu = 65536;
	}
}

static void test_report_over_16k_drops_lowest_ranked(void **state)
{
	struct agree_report *r = malloc(sizeof(*r)), *back = malloc(sizeof(*back));
	np_error err = { 0 };
	char *json = NULL;
	big_report(r);
	int dropped = agree_report_to_json(r, &json, &err);
	assert_true(dropped > 0);
	assert_true(strlen(json) <= AGREE_REPORT_MAX_BYTES);
	assert_int_equal(agree_report_parse(json, strlen(json), back, &err), 0);
	assert_int_equal(back->n + (size_t)dropped, AGREE_CAND_MAX);
	assert_string_equal(back->c[0].ifname, "enp00x0f0np0"); /* the best kept */
	assert_string_equal(back->c[back->n - 1].ifname, r->c[back->n - 1].ifname);
	free(json);
	free(r);
	free(back);
}

#define VALID_CAND "{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.3\",\"plen\":24,\"mbps\":100000,\"score\":5,\"mtu\":9000}"
#define HEAD "{\"v\":1,\"pod\":\"job-w-3\",\"uid\":\"u1\",\"node\":\"nodeA\",\"c\":["
#define GPU(smoke, nccl, model) \
	"\"gpu\":{\"smoke\":" smoke ",\"nccl\":" nccl ",\"driver\":13000,\"runtime\":13000,\"model\":" model "}"
#define CAND(fields) "{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.3\"," fields "}"

static void test_report_strict_rejection_table(void **state)
{
	static const struct {
		const char *json, *why;
	} table[] = {
		{ "{\"v\":3,\"pod\":\"job-w-3\",\"x\":1}",
		  "report version 3 from pod job-w-3 is newer than this nicpick (2)" },
		{ "{\"v\":1,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[]," GPU("\"\"", "22809", "\"H200\"") "}",
		  "\"gpu\" in a version 1 report" },
		{ "{\"v\":2,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[]," GPU("\"no-tpu\"", "22809", "\"H200\"") "}",
		  "\"gpu\": \"smoke\" is \"no-tpu\"" },
		{ "{\"v\":2,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[]," GPU("\"\"", "-1", "\"H200\"") "}",
		  "\"nccl\" is -1" },
		{ "{\"v\":2,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[]," GPU("\"\"", "22809", "7") "}",
		  "\"model\" is not a string" },
		{ "{\"v\":2,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[],\"gpu\":{\"smoke\":\"\"}}",
		  "missing \"nccl\"" },
		{ "{\"v\":2,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[],\"gpu\":[]}",
		  "\"gpu\" is not an object" },
		{ "{\"v\":0,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[]}", "\"v\" is 0, not 1.." },
		{ "{\"v\":\"1\",\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[]}", "\"v\" is not an integer" },
		{ "{\"v\":1,\"pod\":7,\"uid\":\"\",\"node\":\"\",\"c\":[]}", "bad report: \"pod\" is not a string" },
		{ "{\"v\":1,\"pod\":\"p\",\"node\":\"\",\"c\":[]}", "from pod p: missing \"uid\"" },
		{ "{\"v\":1,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\"}", "\"c\" is missing" },
		{ "{\"v\":1,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":{}}", "\"c\" is not an array" },
		{ "{\"v\":1,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[],\"extra\":1}", "unknown key \"extra\"" },
		{ "{\"v\":1,\"pod\":\"a b\",\"uid\":\"\",\"node\":\"\",\"c\":[]}", "\"pod\" has characters" },
		{ "{\"v\":1,\"pod\":\"\",\"uid\":\"\",\"node\":\"\",\"c\":[]}", "\"pod\" has length 0" },
		{ "{\"v\":1,\"v\":1,\"pod\":\"p\",\"uid\":\"\",\"node\":\"\",\"c\":[]}", "not JSON" },
		{ "[1,2]", "not a JSON object" },
		{ HEAD "]} trailing", "not JSON" },
		{ HEAD "1]}", "candidate 0: not an object" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1,\"score\":5") "]}", "candidate 0: missing \"mtu\"" },
		{ HEAD CAND("\"plen\":33,\"mbps\":1,\"score\":5,\"mtu\":0") "]}", "\"plen\" is 33, not 1..32" },
		{ HEAD CAND("\"plen\":0,\"mbps\":1,\"score\":5,\"mtu\":0") "]}", "\"plen\" is 0" },
		{ HEAD CAND("\"plen\":\"24\",\"mbps\":1,\"score\":5,\"mtu\":0") "]}", "\"plen\" is not an integer" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1.5,\"score\":5,\"mtu\":0") "]}", "\"mbps\" is not an integer" },
		{ HEAD CAND("\"plen\":24,\"mbps\":-2,\"score\":5,\"mtu\":0") "]}", "\"mbps\" is -2" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":10") "]}", "\"mtu\" is 10" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0,\"gw\":\"fd00::1\"") "]}", "\"gw\" \"fd00::1\" is not an IPv4" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0,\"rdma\":\"mlx5_0\"") "]}", "\"rdma\" is not HCA:PORT" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0,\"rdma\":\"mlx5_0:0\"") "]}", "\"rdma\" is not HCA:PORT" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0,\"rdma\":\"mlx5_0:256\"") "]}", "\"rdma\" is not HCA:PORT" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0,\"speed\":1") "]}", "unknown key \"speed\"" },
		{ HEAD "{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.300\",\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "\"addr\" \"10.9.0.300\" is not a unicast IPv4 address" },
		{ HEAD "{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"fd00::1\",\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "is not a unicast IPv4 address" },
		{ HEAD "{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"0.0.0.0\",\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "is not a unicast IPv4 address" },
		{ HEAD "{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":6,\"addr\":\"fd00::1\",\"plen\":129,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "\"plen\" is 129, not 1..128" },
		{ HEAD "{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":5,\"addr\":\"fd00::1\",\"plen\":64,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "\"fam\" is 5" },
		{ HEAD "{\"if\":\"\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.3\",\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "\"if\" has length 0, not 1..15" },
		{ HEAD "{\"if\":\"abcdefghijklmnop\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.3\",\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "\"if\" has length 16, not 1..15" },
		{ HEAD "{\"if\":\"a/b\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.3\",\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "\"if\" has characters that are not allowed" },
		{ HEAD "{\"if\":\"a\\u0000b\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.3\",\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0}]}",
		  "not JSON" },
		{ HEAD VALID_CAND "," VALID_CAND "]}", "candidate 1 duplicates 0 (eth1 10.9.0.3)" },
		{ HEAD CAND("\"plen\":24,\"mbps\":1,\"score\":5,\"mtu\":0,\"rt\":1") "]}", "\"rt\" is not a boolean" },
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		struct agree_report r;
		np_error err = { 0 };
		int rc = agree_report_parse(table[i].json, strlen(table[i].json), &r, &err);
		if (rc != -1 || err.status != NP_EK8S || !strstr(err.msg, table[i].why))
			fail_msg("case %zu: rc %d status %d msg \"%s\", wanted \"%s\"", i, rc,
				 err.status, err.msg, table[i].why);
		assert_int_equal(r.n, 0);
	}
}

/* Which of a pod's interfaces on one subnet the kernel routes through:
 * "rt" written only where it is known, and read back as it was meant. */
static void test_report_route_flag_round_trips(void **state)
{
	struct agree_report r, back;
	memset(&r, 0, sizeof(r));
	snprintf(r.pod, sizeof(r.pod), "job-1");
	enum agree_route want[3] = { AGREE_ROUTE_USED, AGREE_ROUTE_UNUSED, AGREE_ROUTE_UNKNOWN };
	const char *names[3] = { "eth1", "aaa0", "eth2" }, *addrs[3] = { "10.9.0.2", "10.9.0.2", "10.8.0.2" };
	for (int i = 0; i < 3; i++) {
		struct agree_cand *c = &r.c[r.n++];
		snprintf(c->ifname, sizeof(c->ifname), "%s", names[i]);
		snprintf(c->cls, sizeof(c->cls), "macvlan");
		c->family = AF_INET;
		inet_pton(AF_INET, addrs[i], c->addr);
		snprintf(c->addr_text, sizeof(c->addr_text), "%s", addrs[i]);
		c->prefixlen = 24;
		c->route = want[i];
	}
	char *json = NULL;
	np_error err = { 0 };
	assert_int_equal(agree_report_to_json(&r, &json, &err), 0);
	assert_non_null(strstr(json, "\"if\":\"eth1\",\"cls\":\"macvlan\",\"fam\":4,\"addr\":\"10.9.0.2\",\"plen\":24,"
				     "\"mbps\":0,\"score\":0,\"mtu\":0,\"rt\":true"));
	assert_non_null(strstr(json, "\"rt\":false"));
	assert_int_equal(agree_report_parse(json, strlen(json), &back, &err), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(back.c[i].route, want[i]);
	free(json);
}

/* The gpu block: written as version 2 and read back; without it the report
 * stays version 1, which older pods read. */
static void test_report_gpu_block_round_trips(void **state)
{
	struct node_fixture f;
	node_fixture(&f);
	struct agree_report *r = calloc(1, sizeof(*r)), *back = calloc(1, sizeof(*back));
	np_error err = { 0 };
	char *json = NULL;
	assert_int_equal(agree_report_from_nics("job-w-0", "u0", "nodeA", &f.list, &f.rank, r, &err), 0);
	assert_int_equal(agree_report_to_json(r, &json, &err), 0);
	assert_non_null(strstr(json, "\"v\":1,"));
	assert_null(strstr(json, "gpu"));
	assert_int_equal(agree_report_parse(json, strlen(json), back, &err), 0);
	assert_false(back->gpu.has);
	free(json);

	r->gpu = (struct agree_gpu){ .has = true, .nccl = 22809, .driver = 13000, .runtime = 12080 };
	strcpy(r->gpu.model, "NVIDIA H200");
	strcpy(r->gpu.smoke, "no-gpu");
	assert_int_equal(agree_report_to_json(r, &json, &err), 0);
	assert_non_null(strstr(json, "\"v\":2,"));
	assert_int_equal(agree_report_parse(json, strlen(json), back, &err), 0);
	assert_true(back->gpu.has);
	assert_int_equal(back->gpu.nccl, 22809);
	assert_int_equal(back->gpu.driver, 13000);
	assert_int_equal(back->gpu.runtime, 12080);
	assert_string_equal(back->gpu.model, "NVIDIA H200");
	assert_string_equal(back->gpu.smoke, "no-gpu");
	assert_int_equal(back->n, r->n);
	free(json);
	free(r);
	free(back);
}

/* File delivery travels in the gpu block; env delivery leaves it out. */
static void test_report_carries_file_delivery(void **state)
{
	struct node_fixture f;
	node_fixture(&f);
	struct agree_report *r = calloc(1, sizeof(*r)), *back = calloc(1, sizeof(*back));
	np_error err = { 0 };
	char *json = NULL;
	assert_int_equal(agree_report_from_nics("job-w-3", "u3", "nodeD", &f.list, &f.rank, r, &err), 0);
	r->gpu = (struct agree_gpu){ .has = true, .nccl = 22105 };
	strcpy(r->gpu.delivery, "file");
	strcpy(r->gpu.nccl_env, "/nicpick/nccl.env");
	assert_int_equal(agree_report_to_json(r, &json, &err), 0);
	assert_non_null(strstr(json, "\"delivery\":\"file\""));
	assert_int_equal(agree_report_parse(json, strlen(json), back, &err), 0);
	assert_string_equal(back->gpu.delivery, "file");
	assert_string_equal(back->gpu.nccl_env, "/nicpick/nccl.env");
	/* a delivery nicpick does not know is refused */
	char *at = strstr(json, "\"delivery\":\"file\"");
	memcpy(at, "\"delivery\":\"fil?\"", 18);
	assert_int_equal(agree_report_parse(json, strlen(json), back, &err), -1);
	free(json);
	r->gpu.delivery[0] = '\0';
	assert_int_equal(agree_report_to_json(r, &json, &err), 0);
	assert_null(strstr(json, "delivery"));
	free(json);
	free(r);
	free(back);
}

/* NCCL reads NCCL_CONF_FILE from 2.23.4: a pod whose training reads only
 * the file on an older NCCL is named, with what to do. */
static void test_versions_name_the_pods_below_the_conf_file_floor(void **state)
{
	struct agree_report r[3] = { 0 };
	const int nccl[3] = { 22304, 22105, 22105 };
	const char *delivery[3] = { "file", "file", "" };
	for (int i = 0; i < 3; i++) {
		snprintf(r[i].pod, sizeof(r[i].pod), "job-w-%d", i + 2);
		r[i].gpu = (struct agree_gpu){ .has = true, .nccl = nccl[i] };
		strcpy(r[i].gpu.delivery, delivery[i]);
		strcpy(r[i].gpu.nccl_env, "/nicpick/nccl.env");
	}
	struct agree_versions v;
	agree_versions_compare(r, 3, &v);
	/* 2.23.4 reads the file; job-w-4 sources nccl.env */
	assert_string_equal(v.floor, "NCCL 2.21.5 on job-w-3 ignores NCCL_CONF_FILE (read from 2.23.4): "
				     "source /nicpick/nccl.env in the command, or use NCCL >= 2.23.4");
	r[1].gpu.nccl = 22602;
	agree_versions_compare(r, 3, &v);
	assert_string_equal(v.floor, "");
}

struct vrow {
	const char *pod, *node;
	int nccl, driver, runtime;
	const char *model, *smoke; /* smoke NULL: no gpu block (an older pod) */
};

static void versions_of(const struct vrow *rows, size_t n, bool reverse, struct agree_versions *v)
{
	struct agree_report *r = calloc(n, sizeof(*r));
	for (size_t i = 0; i < n; i++) {
		const struct vrow *w = &rows[reverse ? n - 1 - i : i];
		strcpy(r[i].pod, w->pod);
		strcpy(r[i].node, w->node);
		if (!w->smoke)
			continue;
		r[i].gpu = (struct agree_gpu){ .has = true, .nccl = w->nccl, .driver = w->driver,
					       .runtime = w->runtime };
		strcpy(r[i].gpu.model, w->model);
		strcpy(r[i].gpu.smoke, w->smoke);
	}
	agree_versions_compare(r, n, v);
	free(r);
}

static void test_versions_compare_from_tables(void **state)
{
	static const struct vrow same[] = {
		{ "job-w-0", "node-a", 22803, 13000, 13000, "NVIDIA H200", "" },
		{ "job-w-1", "node-b", 22803, 13000, 13000, "NVIDIA H200", "" },
		{ "job-w-2", "node-c", 0, 0, 0, "", NULL }, /* older pod: left out */
	};
	static const struct vrow nccl[] = {
		{ "job-w-0", "node-a", 22803, 13000, 13000, "NVIDIA H200", "" },
		{ "job-w-1", "node-b", 22803, 13000, 13000, "NVIDIA H200", "" },
		{ "job-w-2", "node-c", 22803, 13000, 13000, "NVIDIA H200", "" },
		{ "job-w-3", "node-d", 22105, 13000, 13000, "NVIDIA H200", "" },
	};
	static const struct vrow many[] = {
		{ "job-w-0", "node-a", 22803, 13000, 12080, "NVIDIA H200", "" },
		{ "job-w-1", "", 22803, 12040, 12080, "NVIDIA A100", "" },
		{ "job-w-2", "node-c", 22803, 13000, 12080, "NVIDIA H200", "no-driver" },
		{ "job-w-3", "node-d", 0, 0, 0, "", "no-libnccl" },
	};
	/* A tie: the value sorting first is the majority, in any order. */
	static const struct vrow tie[] = {
		{ "job-w-0", "node-a", 22803, 13000, 13000, "NVIDIA H200", "" },
		{ "job-w-1", "node-b", 22105, 13000, 13000, "NVIDIA H200", "" },
	};
	static const struct {
		const struct vrow *rows;
		size_t n;
		const char *warning, *unavailable;
	} table[] = {
		{ same, 3, "", "" },
		{ nccl, 4, "NCCL 2.21.5 on job-w-3 (node-d), 2.28.3 on the other 3 pods", "" },
		{ many, 4, "CUDA driver 12.4 on job-w-1, 13.0 on the other 2 pods; GPU NVIDIA A100 on job-w-1, "
			   "NVIDIA H200 on the other 2 pods",
		  "job-w-2: no-driver, job-w-3: no-libnccl" },
		{ tie, 2, "NCCL 2.28.3 on job-w-0 (node-a), 2.21.5 on the other 1 pod", "" },
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		for (int rev = 0; rev < 2; rev++) {
			struct agree_versions v;
			versions_of(table[i].rows, table[i].n, rev, &v);
			if (strcmp(v.warning, table[i].warning) || strcmp(v.unavailable, table[i].unavailable))
				fail_msg("case %zu%s: warning \"%s\" unavailable \"%s\"", i,
					 rev ? " reversed" : "", v.warning, v.unavailable);
		}
	}
}

/* A big job names a few odd pods and counts the rest; the text fits. */
static void test_versions_compare_bounds_its_text(void **state)
{
	size_t n = 3000;
	struct agree_report *r = calloc(n, sizeof(*r));
	for (size_t i = 0; i < n; i++) {
		snprintf(r[i].pod, sizeof(r[i].pod), "job-worker-with-a-long-name-%04zu", i);
		r[i].gpu = (struct agree_gpu){ .has = true, .nccl = i % 3 ? 22803 : 22105 };
		if (i % 2)
			strcpy(r[i].gpu.smoke, "no-gpu");
	}
	struct agree_versions v;
	agree_versions_compare(r, n, &v);
	assert_non_null(strstr(v.warning, "NCCL 2.21.5 on job-worker-with-a-long-name-0000, 2.21.5 on "));
	assert_non_null(strstr(v.warning, "(+992 more pods), 2.28.3 on the other 2000 pods"));
	assert_non_null(strstr(v.unavailable, "job-worker-with-a-long-name-0001: no-gpu, "));
	assert_non_null(strstr(v.unavailable, "(+1492 more pods)"));
	assert_true(strlen(v.warning) < sizeof(v.warning));
	free(r);
}

static void test_report_size_and_count_limits(void **state)
{
	np_error err = { 0 };
	struct agree_report r;
	/* A valid report padded past 16 KiB is refused before it is parsed. */
	size_t len = AGREE_REPORT_MAX_BYTES + 1;
	char *big = malloc(len + 1);
	const char *v = HEAD "]}";
	memset(big, ' ', len);
	memcpy(big, v, strlen(v));
	big[len] = '\0';
	assert_int_equal(agree_report_parse(big, len, &r, &err), -1);
	assert_non_null(strstr(err.msg, "16385 bytes, more than 16384"));
	assert_int_equal(agree_report_parse(big, len - 1, &r, &err), 0);
	free(big);

	/* 65 distinct candidates. */
	char *many = malloc(AGREE_REPORT_MAX_BYTES);
	strcpy(many, HEAD);
	for (int i = 0; i <= AGREE_CAND_MAX; i++)
		sprintf(many + strlen(many),
			"%s{\"if\":\"e%d\",\"cls\":\"x\",\"fam\":4,\"addr\":\"10.0.0.%d\",\"plen\":8,"
			"\"mbps\":1,\"score\":1,\"mtu\":0}",
			i ? "," : "", i, i + 1);
	strcat(many, "]}");
	assert_int_equal(agree_report_parse(many, strlen(many), &r, &err), -1);
	assert_non_null(strstr(err.msg, "65 candidates, more than 64"));
	free(many);
}

static const char *const tokens[] = { "\"", "{", "}", "[", "]", ",", ":", "null", "-1",
				      "1e99", "\"fam\":6", "\\u0000", "99999999999999999999",
				      "\"v\":2", "\xff", "0.5", "true", "\"routed\"" };

/* One to four random edits of buf (len bytes, room for cap). */
static size_t mutate(char *buf, size_t len, size_t cap, unsigned *seed)
{
	int muts = 1 + rand_r(seed) % 4;
	for (int m = 0; m < muts && len > 0; m++) {
		size_t at = (size_t)rand_r(seed) % len, n;
		const char *t;
		switch (rand_r(seed) % 5) {
		case 0: /* flip a byte */
			buf[at] = (char)(rand_r(seed) & 0xff);
			break;
		case 1: /* delete a span */
			n = 1 + (size_t)rand_r(seed) % 8;
			if (at + n > len)
				n = len - at;
			memmove(buf + at, buf + at + n, len - at - n);
			len -= n;
			break;
		case 2: /* insert a token */
			t = tokens[rand_r(seed) % (sizeof(tokens) / sizeof(*tokens))];
			n = strlen(t);
			if (len + n > cap)
				break;
			memmove(buf + at + n, buf + at, len - at);
			memcpy(buf + at, t, n);
			len += n;
			break;
		case 3: /* truncate */
			len = at;
			break;
		default: /* duplicate a span */
			n = 1 + (size_t)rand_r(seed) % 32;
			if (at + n > len)
				n = len - at;
			if (len + n > cap)
				break;
			memmove(buf + at + n, buf + at, len - at);
			len += n;
			break;
		}
	}
	return len;
}

/* Mutations of a valid report: never a crash, and whatever is accepted
 * writes back to something that is accepted again. */
static void test_report_fuzz_mutations_never_crash(void **state)
{
	struct node_fixture f;
	np_error err = { 0 };
	char *seed_json = NULL;
	node_fixture(&f);
	assert_int_equal(report_build("job-w-3", "u", "nodeA", &f, &seed_json, &err), 0);
	struct agree_report *r = malloc(sizeof(*r)), *r2 = malloc(sizeof(*r2));
	size_t seed_len = strlen(seed_json), accepted = 0;
	char *buf = malloc(4 * seed_len);
	unsigned seed = 12345;
	for (int it = 0; it < 10000; it++) {
		memcpy(buf, seed_json, seed_len);
		size_t len = mutate(buf, seed_len, 4 * seed_len, &seed);
		/* Not NUL-terminated on purpose: the reader must respect len. */
		np_error e = { 0 };
		if (agree_report_parse(buf, len, r, &e) == 0) {
			char *again = NULL;
			accepted++;
			assert_true(agree_report_to_json(r, &again, &e) >= 0);
			assert_int_equal(agree_report_parse(again, strlen(again), r2, &e), 0);
			assert_int_equal(r2->n, r->n);
			free(again);
		} else {
			assert_int_equal(e.status, NP_EK8S);
			assert_true(strlen(e.msg) > 0);
		}
	}
	print_message("report fuzz: 10000 mutations, %zu accepted\n", accepted);
	free(buf);
	free(r);
	free(r2);
	free(seed_json);
}

/* ---- networks ---- */

static void test_network_parse(void **state)
{
	struct agree_network n;
	np_error err = { 0 };
	assert_int_equal(agree_network_parse("10.9.0.77/24", &n, &err), 0);
	assert_string_equal(n.text, "10.9.0.0/24");
	assert_int_equal(agree_network_parse("fd00:9::1/64", &n, &err), 0);
	assert_string_equal(n.text, "fd00:9::/64");
	assert_int_equal(agree_network_parse("10.9.0.0/33", &n, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_int_equal(agree_network_parse("10.9.0.0", &n, &err), -1);
	assert_int_equal(agree_network_parse("10.9.0.0/2x", &n, &err), -1);
	assert_int_equal(agree_network_parse("bogus/8", &n, &err), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_round_trip_in_ranking_order),
		cmocka_unit_test(test_report_build_refuses_bad_pod_name),
		cmocka_unit_test(test_report_over_16k_drops_lowest_ranked),
		cmocka_unit_test(test_report_strict_rejection_table),
		cmocka_unit_test(test_report_gpu_block_round_trips),
		cmocka_unit_test(test_report_route_flag_round_trips),
		cmocka_unit_test(test_versions_compare_from_tables),
		cmocka_unit_test(test_versions_compare_bounds_its_text),
		cmocka_unit_test(test_report_carries_file_delivery),
		cmocka_unit_test(test_versions_name_the_pods_below_the_conf_file_floor),
		cmocka_unit_test(test_report_size_and_count_limits),
		cmocka_unit_test(test_report_fuzz_mutations_never_crash),
		cmocka_unit_test(test_network_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
