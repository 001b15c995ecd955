/* agree_decide: the job-wide decision as a pure function of the reports. */
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
#include <time.h>

#include "agree/agree.h"
#include "select/decision.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

/* ---- building reports by hand ---- */

static void rep(struct agree_report *r, const char *pod)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->pod, sizeof(r->pod), "%s", pod);
	snprintf(r->uid, sizeof(r->uid), "uid-%s", pod);
	snprintf(r->node, sizeof(r->node), "node-%s", pod);
}

static struct agree_cand *add(struct agree_report *r, const char *ifname, const char *addr,
			      int plen, long mbps, long score)
{
	assert_true(r->n < AGREE_CAND_MAX);
	struct agree_cand *c = &r->c[r->n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->ifname, sizeof(c->ifname), "%s", ifname);
	strcpy(c->cls, "physical");
	c->family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	assert_int_equal(inet_pton(c->family, addr, c->addr), 1);
	snprintf(c->addr_text, sizeof(c->addr_text), "%s", addr);
	c->prefixlen = plen;
	c->mbps = mbps;
	c->score = score;
	c->mtu = 9000;
	return c;
}

static void gw(struct agree_cand *c, const char *addr)
{
	c->has_gw = true;
	assert_int_equal(inet_pton(c->family, addr, c->gw), 1);
	snprintf(c->gw_text, sizeof(c->gw_text), "%s", addr);
}

static const struct agree_assign *assign_of(const struct agree_decision *d, const char *pod)
{
	for (size_t i = 0; i < d->rails[0].n_assign; i++)
		if (!strcmp(d->rails[0].assign[i].pod, pod))
			return &d->rails[0].assign[i];
	fail_msg("pod %s not in the decision", pod);
	return NULL;
}

static const struct agree_ranked *ranked(const struct agree_decision *d, const char *net)
{
	for (size_t i = 0; i < d->n_nets; i++)
		if (!strcmp(d->nets[i].net.text, net))
			return &d->nets[i];
	fail_msg("network %s not in the ranked list", net);
	return NULL;
}

static char *decision_json(const struct agree_decision *d)
{
	json_t *j = select_decision_agree_json(d);
	assert_non_null(j);
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	assert_non_null(s);
	return s;
}

/* Four pods, different NIC names, a fast fabric, a management net, a decoy cni0. */
static const char *const names[] = { "eth1", "ens3f0", "enp65s0f0np0", "ib0" };

static void job4(struct agree_report *r, bool with_fast_on_2)
{
	for (int i = 0; i < 4; i++) {
		char pod[32], a[32];
		snprintf(pod, sizeof(pod), "job-w-%d", i);
		rep(&r[i], pod);
		add(&r[i], "cni0", "10.244.0.1", 24, 10000, 900); /* same on every node */
		if (i != 2 || with_fast_on_2) {
			snprintf(a, sizeof(a), "10.9.0.%d", i + 1);
			add(&r[i], names[i], a, 24, 100000, 500);
		}
		snprintf(a, sizeof(a), "192.168.1.%d", i + 10);
		add(&r[i], "eth0", a, 24, 1000, 100);
	}
}

static void test_happy_path_names_differ_per_node(void **state)
{
	struct agree_report r[4];
	struct agree_decision d;
	np_error err = { 0 };
	job4(r, true);
	assert_int_equal(agree_decide(r, 4, NULL, &d, &err), 0);
	assert_true(d.ok);
	assert_false(d.routed);
	assert_int_equal(d.n_rails, 1);
	assert_string_equal(d.rails[0].net.text, "10.9.0.0/24");
	assert_int_equal(d.rails[0].min_mbps, 100000);
	for (int i = 0; i < 4; i++) {
		char pod[32], a[32];
		snprintf(pod, sizeof(pod), "job-w-%d", i);
		snprintf(a, sizeof(a), "10.9.0.%d", i + 1);
		assert_string_equal(assign_of(&d, pod)->ifname, names[i]);
		assert_string_equal(assign_of(&d, pod)->addr, a);
	}
	assert_string_equal(d.nets[0].net.text, "10.9.0.0/24");
	assert_non_null(strstr(d.nets[0].why, "chosen"));
	assert_non_null(strstr(ranked(&d, "192.168.1.0/24")->why, "slower"));
	agree_decision_free(&d);
}

static void test_decoy_cni0_same_address_is_excluded(void **state)
{
	struct agree_report r[4];
	struct agree_decision d;
	np_error err = { 0 };
	job4(r, true);
	for (int i = 0; i < 4; i++)
		r[i].c[0].mbps = 400000; /* the decoy would win on speed */
	assert_int_equal(agree_decide(r, 4, NULL, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "10.9.0.0/24");
	const struct agree_ranked *k = ranked(&d, "10.244.0.0/24");
	assert_false(k->eligible);
	assert_int_equal(k->n_pods, 4);
	assert_non_null(strstr(k->why, "duplicate address 10.244.0.1 on pods job-w-0 and job-w-"));
	agree_decision_free(&d);
}

static void test_docker0_same_address_is_excluded(void **state)
{
	struct agree_report r[3];
	struct agree_decision d;
	np_error err = { 0 };
	for (int i = 0; i < 3; i++) {
		char pod[32], a[32];
		snprintf(pod, sizeof(pod), "p%d", i);
		rep(&r[i], pod);
		add(&r[i], "docker0", "172.17.0.1", 16, 100000, 1000);
		snprintf(a, sizeof(a), "10.1.0.%d", i + 1);
		add(&r[i], "eth0", a, 16, 25000, 10);
	}
	/* Only two of the three share it: still excluded for the whole network. */
	assert_int_equal(inet_pton(AF_INET, "172.17.0.9", r[2].c[0].addr), 1);
	assert_int_equal(agree_decide(r, 3, NULL, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "10.1.0.0/16");
	assert_non_null(strstr(ranked(&d, "172.17.0.0/16")->why, "duplicate address 172.17.0.1"));
	agree_decision_free(&d);
}

static void test_pod_lacking_fast_network_falls_back_with_reason(void **state)
{
	struct agree_report r[4];
	struct agree_decision d;
	np_error err = { 0 };
	job4(r, false);
	assert_int_equal(agree_decide(r, 4, NULL, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "192.168.1.0/24");
	assert_string_equal(assign_of(&d, "job-w-2")->ifname, "eth0");
	const struct agree_ranked *k = ranked(&d, "10.9.0.0/24");
	assert_false(k->eligible);
	assert_int_equal(k->n_pods, 3);
	assert_string_equal(k->why, "no candidate on 1 of 4 pods: job-w-2");
	agree_decision_free(&d);
}

static void test_no_common_network_reports_per_pod_table(void **state)
{
	struct agree_report r[3];
	struct agree_decision d;
	np_error err = { 0 };
	for (int i = 0; i < 3; i++) {
		char pod[32];
		snprintf(pod, sizeof(pod), "job-w-%d", i);
		rep(&r[i], pod);
		add(&r[i], "cni0", "10.244.0.1", 24, 10000, 1);
	}
	add(&r[0], "eth1", "10.9.0.1", 24, 100000, 5);
	add(&r[1], "eth1", "10.9.0.2", 24, 100000, 5);
	add(&r[2], "eth7", "10.7.0.3", 24, 100000, 5);
	assert_int_equal(agree_decide(r, 3, NULL, &d, &err), -1);
	assert_int_equal(err.status, NP_ENOCOMMON);
	assert_false(d.ok);
	assert_int_equal(d.n_rails, 0);
	assert_non_null(strstr(err.msg, "the job's 3 pods share no usable network"));
	assert_non_null(strstr(err.msg, "job-w-2: no candidate on 10.9.0.0/24 (2 of 3 pods have one)"));
	assert_int_equal(d.table_total, 3);
	assert_string_equal(d.table[2].pod, "job-w-2");
	assert_non_null(strstr(d.table[2].why, "no candidate on 10.9.0.0/24"));
	assert_non_null(strstr(d.table[2].why, "duplicate address 10.244.0.1 also on pod job-w-"));
	assert_non_null(strstr(d.table[2].cands, "eth7 10.7.0.3/24 100000 Mb/s"));
	assert_non_null(strstr(d.table[0].why, "no candidate on 10.7.0.0/24 (1 of 3 pods have one)"));
	assert_string_equal(d.error, err.msg);
	agree_decision_free(&d);
}

static void test_pod_without_candidates_is_named(void **state)
{
	struct agree_report r[2];
	struct agree_decision d;
	np_error err = { 0 };
	rep(&r[0], "a");
	add(&r[0], "eth1", "10.9.0.1", 24, 100000, 5);
	rep(&r[1], "b");
	assert_int_equal(agree_decide(r, 2, NULL, &d, &err), -1);
	assert_int_equal(err.status, NP_ENOCOMMON);
	assert_string_equal(d.table[0].pod, "b");
	assert_non_null(strstr(d.table[0].why, "no usable candidate"));
	assert_string_equal(d.table[0].cands, "none");
	agree_decision_free(&d);
}

static void test_worst_case_speed_decides(void **state)
{
	struct agree_report r[4];
	struct agree_decision d;
	np_error err = { 0 };
	for (int i = 0; i < 4; i++) {
		char pod[32], a[32];
		snprintf(pod, sizeof(pod), "w%d", i);
		rep(&r[i], pod);
		snprintf(a, sizeof(a), "10.1.0.%d", i + 1);
		add(&r[i], "ethA", a, 24, i == 3 ? 10000 : 100000, 100);
		snprintf(a, sizeof(a), "10.2.0.%d", i + 1);
		add(&r[i], "ethB", a, 24, 25000, 50);
	}
	assert_int_equal(agree_decide(r, 4, NULL, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "10.2.0.0/24");
	assert_int_equal(d.rails[0].min_mbps, 25000);
	assert_string_equal(ranked(&d, "10.1.0.0/24")->why,
			    "slower: worst case 10000 Mb/s < 25000 Mb/s on 10.2.0.0/24");
	agree_decision_free(&d);
}

static void shuffle(struct agree_report *r, size_t n, unsigned *seed)
{
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand_r(seed) % (i + 1);
		struct agree_report t = r[i];
		r[i] = r[j];
		r[j] = t;
	}
}

static void test_tie_breaks_are_deterministic_under_permutation(void **state)
{
	enum { N = 6 };
	struct agree_report *r = calloc(N, sizeof(*r));
	struct agree_decision d;
	np_error err = { 0 };
	for (int i = 0; i < N; i++) {
		char pod[32], a[32];
		snprintf(pod, sizeof(pod), "pod-%c", 'f' - i);
		rep(&r[i], pod);
		/* Equal speed and score on two networks: the network text decides. */
		snprintf(a, sizeof(a), "10.9.0.%d", i + 1);
		add(&r[i], "x", a, 24, 25000, 7);
		snprintf(a, sizeof(a), "10.10.0.%d", i + 1);
		add(&r[i], "y", a, 24, 25000, 7);
		/* Two entries of one pod on one network: the better one, then report order. */
		snprintf(a, sizeof(a), "10.10.0.%d", i + 101);
		add(&r[i], "z", a, 24, 25000, 7);
	}
	assert_int_equal(agree_decide(r, N, NULL, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "10.10.0.0/24");
	assert_string_equal(assign_of(&d, "pod-a")->ifname, "y");
	assert_string_equal(ranked(&d, "10.9.0.0/24")->why,
			    "same quality as 10.10.0.0/24, which sorts first");
	char *first = decision_json(&d);
	agree_decision_free(&d);
	unsigned seed = 42;
	for (int k = 0; k < 20; k++) {
		shuffle(r, N, &seed);
		assert_int_equal(agree_decide(r, N, NULL, &d, &err), 0);
		char *s = decision_json(&d);
		assert_string_equal(s, first);
		free(s);
		agree_decision_free(&d);
	}
	free(first);
	free(r);
}

static void test_excluded_network_after_failed_probe(void **state)
{
	struct agree_report r[4];
	struct agree_decision d;
	struct agree_options opt = { 0 };
	np_error err = { 0 };
	job4(r, true);
	assert_int_equal(agree_network_parse("10.9.0.5/24", &opt.excluded[0], &err), 0);
	assert_string_equal(opt.excluded[0].text, "10.9.0.0/24");
	opt.n_excluded = 1;
	assert_int_equal(agree_decide(r, 4, &opt, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "192.168.1.0/24");
	assert_string_equal(ranked(&d, "10.9.0.0/24")->why, "excluded after a failed probe");
	assert_int_equal(d.n_excluded, 1);
	assert_string_equal(d.excluded[0].text, "10.9.0.0/24");
	agree_decision_free(&d);
}

static void test_ipv6_network(void **state)
{
	struct agree_report r[3];
	struct agree_decision d;
	struct agree_options opt = { 0 };
	np_error err = { 0 };
	for (int i = 0; i < 3; i++) {
		char pod[32], a[64];
		snprintf(pod, sizeof(pod), "v6-%d", i);
		rep(&r[i], pod);
		snprintf(a, sizeof(a), "fd00:9::%d", i + 1);
		add(&r[i], "eth1", a, 64, 100000, 10);
	}
	assert_int_equal(agree_decide(r, 3, NULL, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "fd00:9::/64");
	assert_int_equal(d.rails[0].net.pfx.family, AF_INET6);
	assert_string_equal(assign_of(&d, "v6-2")->addr, "fd00:9::3");
	agree_decision_free(&d);

	/* Equal quality: IPv4 is preferred, unless the options say inet6. */
	for (int i = 0; i < 3; i++) {
		char a[32];
		snprintf(a, sizeof(a), "10.9.0.%d", i + 1);
		add(&r[i], "eth1", a, 24, 100000, 10);
	}
	assert_int_equal(agree_decide(r, 3, NULL, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "10.9.0.0/24");
	assert_string_equal(ranked(&d, "fd00:9::/64")->why,
			    "same quality as 10.9.0.0/24, IPv4 preferred");
	agree_decision_free(&d);
	opt.family = AF_INET6;
	assert_int_equal(agree_decide(r, 3, &opt, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "fd00:9::/64");
	assert_string_equal(ranked(&d, "10.9.0.0/24")->why, "family inet not allowed");
	agree_decision_free(&d);
}

static void test_cidr_option_narrows(void **state)
{
	struct agree_report r[4];
	struct agree_decision d;
	struct agree_options opt = { 0 };
	np_error err = { 0 };
	job4(r, true);
	assert_int_equal(np_prefix_parse("192.168.0.0/16", &opt.cidr, &err), 0);
	opt.has_cidr = true;
	assert_int_equal(agree_decide(r, 4, &opt, &d, &err), 0);
	assert_string_equal(d.rails[0].net.text, "192.168.1.0/24");
	assert_string_equal(ranked(&d, "10.9.0.0/24")->why, "outside 192.168.0.0/16");
	agree_decision_free(&d);
}

static void test_routed_fallback_needs_gateways(void **state)
{
	struct agree_report r[3];
	struct agree_decision d;
	struct agree_options opt = { 0 };
	np_error err = { 0 };
	for (int i = 0; i < 3; i++) {
		char pod[32], a[32], g[32];
		snprintf(pod, sizeof(pod), "r%d", i);
		rep(&r[i], pod);
		add(&r[i], "cni0", "10.244.0.1", 24, 10000, 1);
		gw(&r[i].c[0], "10.244.0.254"); /* a decoy with a gateway is still a decoy */
		snprintf(a, sizeof(a), "172.16.%d.1", i);
		snprintf(g, sizeof(g), "172.16.%d.0", i);
		gw(add(&r[i], i ? "ens1" : "eth2", a, 31, 100000, 5), g);
		snprintf(a, sizeof(a), "172.20.%d.1", i);
		add(&r[i], "eth3", a, 31, 400000, 5); /* faster, but no route */
	}
	assert_int_equal(agree_decide(r, 3, NULL, &d, &err), 0);
	assert_true(d.ok);
	assert_true(d.routed);
	assert_string_equal(d.rails[0].net.text, "routed");
	assert_string_equal(assign_of(&d, "r0")->ifname, "eth2");
	assert_string_equal(assign_of(&d, "r2")->addr, "172.16.2.1");
	assert_int_equal(assign_of(&d, "r2")->prefixlen, 31);

	char *s = decision_json(&d);
	assert_non_null(strstr(s, "\"routed\":true"));
	assert_non_null(strstr(s, "\"net\":\"routed\""));
	free(s);
	agree_decision_free(&d);

	/* Two pods on one address in different subnets: never a routed decision. */
	struct agree_report clash[3];
	memcpy(clash, r, sizeof(clash));
	clash[2].c[1] = clash[1].c[1];
	clash[2].c[1].prefixlen = 30;
	assert_int_equal(agree_decide(clash, 3, NULL, &d, &err), -1);
	assert_int_equal(err.status, NP_ENOCOMMON);
	agree_decision_free(&d);

	opt.no_routed = true;
	assert_int_equal(agree_decide(r, 3, &opt, &d, &err), -1);
	assert_int_equal(err.status, NP_ENOCOMMON);
	agree_decision_free(&d);
	for (int i = 0; i < 3; i++)
		r[i].c[1].has_gw = false;
	assert_int_equal(agree_decide(r, 3, NULL, &d, &err), -1);
	assert_int_equal(err.status, NP_ENOCOMMON);
	agree_decision_free(&d);
}

static void test_ranks_put_the_gatherer_first_then_rail_order(void **state)
{
	struct agree_report r[4];
	struct agree_decision d;
	np_error err = { 0 };
	job4(r, true);
	assert_int_equal(agree_decide(r, 4, NULL, &d, &err), 0);
	/* The gatherer is not the first pod by name: the others close up. */
	static const struct {
		const char *pod;
		int rank;
	} want[] = { { "job-w-2", 0 }, { "job-w-0", 1 }, { "job-w-1", 2 }, { "job-w-3", 3 } };
	for (size_t i = 0; i < 4; i++) {
		struct agree_rank rk;
		assert_int_equal(agree_rail_rank(&d.rails[0], "job-w-2", want[i].pod, &rk, &err), 0);
		assert_int_equal(rk.rank, want[i].rank);
		assert_int_equal(rk.world, 4);
		assert_string_equal(rk.root_addr, "10.9.0.3");
		assert_int_equal(rk.min_mbps, 100000);
	}
	struct agree_rank rk;
	assert_int_equal(agree_rail_rank(&d.rails[0], "job-w-0", "job-w-3", &rk, &err), 0);
	assert_int_equal(rk.rank, 3);
	assert_string_equal(rk.root_addr, "10.9.0.1");
	assert_int_equal(agree_rail_rank(&d.rails[0], "job-w-9", "job-w-3", &rk, &err), -1);
	assert_non_null(strstr(err.msg, "job-w-9"));
	assert_int_equal(agree_rail_rank(&d.rails[0], "job-w-0", "job-w-9", &rk, &err), -1);
	agree_decision_free(&d);
}

static void test_one_pod_alone_is_rank_0_of_1_rooted_at_itself(void **state)
{
	struct agree_report r[1];
	struct agree_decision d;
	np_error err = { 0 };
	rep(&r[0], "solo");
	add(&r[0], "eth1", "10.9.0.7", 24, 25000, 500);
	assert_int_equal(agree_decide(r, 1, NULL, &d, &err), 0);
	struct agree_rank rk;
	assert_int_equal(agree_rail_rank(&d.rails[0], "solo", "solo", &rk, &err), 0);
	assert_int_equal(rk.rank, 0);
	assert_int_equal(rk.world, 1);
	assert_string_equal(rk.root_addr, "10.9.0.7");
	assert_int_equal(rk.min_mbps, 25000);
	agree_decision_free(&d);
}

static void test_same_pod_twice_is_an_error(void **state)
{
	struct agree_report r[2];
	struct agree_decision d;
	np_error err = { 0 };
	rep(&r[0], "same");
	rep(&r[1], "same");
	assert_int_equal(agree_decide(r, 2, NULL, &d, &err), -1);
	assert_int_equal(err.status, NP_EINTERNAL);
	assert_non_null(strstr(err.msg, "pod same reported twice"));
	agree_decision_free(&d);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_thousand_pods_quick_and_deterministic(void **state)
{
	enum { N = 1000, K = 16 };
	struct agree_report *r = calloc(N, sizeof(*r));
	struct agree_decision d;
	np_error err = { 0 };
	assert_non_null(r);
	for (int i = 0; i < N; i++) {
		char pod[32], a[64];
		snprintf(pod, sizeof(pod), "big-job-worker-%d", i);
		rep(&r[i], pod);
		add(&r[i], "cni0", "10.244.0.1", 24, 10000, 1);
		add(&r[i], "docker0", "172.17.0.1", 16, 10000, 1);
		for (int k = 0; k < 8; k++) { /* rails 10.(k).0.0/16, rail 3 slow on one pod */
			snprintf(a, sizeof(a), "10.%d.%d.%d", 100 + k, i / 250, i % 250 + 1);
			add(&r[i], names[k % 4], a, 16, (k == 3 && i != 777) ? 400000 : 200000, 10 + k);
		}
		for (int k = 0; k < K - 10; k++) { /* per-node networks nobody shares */
			snprintf(a, sizeof(a), "fd%02x:%x::1", k, i);
			add(&r[i], "eth9", a, 64, 400000, 1);
		}
	}
	double t0 = now_ms();
	assert_int_equal(agree_decide(r, N, NULL, &d, &err), 0);
	double ms = now_ms() - t0;
	/* Sanitizers and valgrind slow everything down by one or two orders of magnitude. */
	double limit = RUNNING_ON_VALGRIND ? 5000 : 100;
#if defined(__SANITIZE_ADDRESS__)
	limit = 500;
#endif
	print_message("1000 pods x %d candidates decided in %.1f ms (limit %.0f)\n", K, ms, limit);
	assert_true(ms < limit);
	/* Rail 3 is 400G except on pod 777; rails at 200G tie, score then decides: 10.107. */
	assert_string_equal(d.rails[0].net.text, "10.107.0.0/16");
	assert_int_equal(d.rails[0].n_assign, N);
	assert_string_equal(d.rails[0].assign[0].pod, "big-job-worker-0");
	assert_int_equal(d.nets_total, 2 + 8 + N * (K - 10));
	char *a1 = decision_json(&d);
	agree_decision_free(&d);
	for (int i = 0; i < N / 2; i++) { /* reverse the input */
		struct agree_report t = r[i];
		r[i] = r[N - 1 - i];
		r[N - 1 - i] = t;
	}
	assert_int_equal(agree_decide(r, N, NULL, &d, &err), 0);
	char *a2 = decision_json(&d);
	assert_string_equal(a1, a2);
	free(a1);
	free(a2);
	agree_decision_free(&d);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_happy_path_names_differ_per_node),
		cmocka_unit_test(test_decoy_cni0_same_address_is_excluded),
		cmocka_unit_test(test_docker0_same_address_is_excluded),
		cmocka_unit_test(test_pod_lacking_fast_network_falls_back_with_reason),
		cmocka_unit_test(test_no_common_network_reports_per_pod_table),
		cmocka_unit_test(test_pod_without_candidates_is_named),
		cmocka_unit_test(test_worst_case_speed_decides),
		cmocka_unit_test(test_tie_breaks_are_deterministic_under_permutation),
		cmocka_unit_test(test_excluded_network_after_failed_probe),
		cmocka_unit_test(test_ipv6_network),
		cmocka_unit_test(test_cidr_option_narrows),
		cmocka_unit_test(test_routed_fallback_needs_gateways),
		cmocka_unit_test(test_ranks_put_the_gatherer_first_then_rail_order),
		cmocka_unit_test(test_one_pod_alone_is_rank_0_of_1_rooted_at_itself),
		cmocka_unit_test(test_same_pod_twice_is_an_error),
		cmocka_unit_test(test_thousand_pods_quick_and_deterministic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
