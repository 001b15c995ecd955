/* NCCL list syntax: --include/--exclude must mean what NCCL_SOCKET_IFNAME
 * means to NCCL (socket.cc / utils.cc). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"
#include "select/decision.h"

static struct policy_list parse_ok(const char *s)
{
	struct policy_list l;
	np_error err = {0};
	assert_int_equal(policy_list_parse(s, &l, &err), 0);
	assert_int_equal(err.status, NP_OK);
	return l;
}

static void test_prefix_match_eth1_matches_eth10(void **state)
{
	struct policy_list l = parse_ok("eth1");
	assert_true(l.set);
	assert_false(l.exclude);
	assert_false(l.exact);
	assert_true(policy_list_selects(&l, "eth1"));
	assert_true(policy_list_selects(&l, "eth10"));
	assert_false(policy_list_selects(&l, "eth0"));
	assert_false(policy_list_selects(&l, "eth"));
}

static void test_exact_eth1_does_not_match_eth10(void **state)
{
	struct policy_list l = parse_ok("=eth1");
	assert_true(l.exact);
	assert_true(policy_list_selects(&l, "eth1"));
	assert_false(policy_list_selects(&l, "eth10"));
	assert_false(policy_list_selects(&l, "eth"));
}

static void test_exact_applies_to_whole_list(void **state)
{
	struct policy_list l = parse_ok("=eth1,eth2");
	assert_int_equal(l.n, 2);
	assert_string_equal(l.names[1], "eth2");
	assert_true(policy_list_selects(&l, "eth2"));
	assert_false(policy_list_selects(&l, "eth20"));
}

static void test_exclude_docker_lo(void **state)
{
	struct policy_list l = parse_ok("^docker,lo");
	assert_true(l.exclude);
	assert_int_equal(l.n, 2);
	assert_false(policy_list_selects(&l, "docker0"));
	assert_false(policy_list_selects(&l, "lo"));
	assert_false(policy_list_selects(&l, "local0"));
	assert_true(policy_list_selects(&l, "eth0"));
	assert_true(policy_list_selects(&l, "ens3"));
	/* The entries themselves match, whatever the '^' says. */
	assert_true(policy_list_matches(&l, "docker0"));
	assert_false(policy_list_matches(&l, "eth0"));
}

static void test_exclude_exact_docker0(void **state)
{
	struct policy_list l = parse_ok("^=docker0");
	assert_true(l.exclude);
	assert_true(l.exact);
	assert_false(policy_list_selects(&l, "docker0"));
	assert_true(policy_list_selects(&l, "docker01"));
	assert_true(policy_list_selects(&l, "eth0"));
}

static void test_one_character_value_is_unset(void **state)
{
	const char *values[] = {"", "e", "^", "=", ","};
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		struct policy_list l = parse_ok(values[i]);
		assert_false(l.set);
		assert_true(policy_list_selects(&l, "eth0"));
		assert_false(policy_list_matches(&l, "eth0"));
	}
	struct policy_list l = parse_ok(NULL);
	assert_false(l.set);
	/* Two characters is a real list. */
	l = parse_ok("e0");
	assert_true(l.set);
	assert_false(policy_list_selects(&l, "eth0"));
}

static void test_empty_entries_are_skipped(void **state)
{
	struct policy_list l = parse_ok(",,eth0,,ib,");
	assert_int_equal(l.n, 2);
	assert_string_equal(l.names[0], "eth0");
	assert_string_equal(l.names[1], "ib");
	assert_true(policy_list_selects(&l, "ib0"));
	assert_false(policy_list_selects(&l, ""));
}

static void test_port_suffix_is_ignored_for_interfaces(void **state)
{
	struct policy_list l = parse_ok("=eth1:1234,ens3:7,:99,ib0");
	assert_int_equal(l.n, 3);
	assert_string_equal(l.names[0], "eth1");
	assert_string_equal(l.names[1], "ens3");
	assert_string_equal(l.names[2], "ib0");
	assert_true(policy_list_selects(&l, "eth1"));
	assert_true(policy_list_selects(&l, "ens3"));
}

static void test_empty_list_after_prefixes_behaves_as_nccl(void **state)
{
	/* NCCL: an empty list matches every name, so "^=" selects none. */
	struct policy_list l = parse_ok("^=");
	assert_true(l.set);
	assert_int_equal(l.n, 0);
	assert_false(policy_list_selects(&l, "eth0"));
	l = parse_ok("=,");
	assert_true(policy_list_selects(&l, "eth0"));
}

static void test_too_many_entries_is_usage_error(void **state)
{
	char buf[256] = "";
	for (int i = 0; i <= POLICY_LIST_MAX; i++)
		strcat(buf, i ? ",e" : "e");
	struct policy_list l;
	np_error err = {0};
	assert_int_equal(policy_list_parse(buf, &l, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "more than 16 entries, and NCCL reads only the first 16"));
	assert_null(strchr(err.msg, '\n'));
	/* 16, NCCL's MAX_IFS, is accepted, in an exclude list too */
	strcpy(buf, "^");
	for (int i = 0; i < POLICY_LIST_MAX; i++)
		strcat(buf, i ? ",e" : "e");
	struct policy_list ok = parse_ok(buf);
	assert_int_equal(ok.n, 16);
	assert_true(ok.exclude);
}

static void test_overlong_entry_in_an_exclude_list_is_refused_too(void **state)
{
	struct policy_list l;
	np_error err = {0};
	assert_int_equal(policy_list_parse("^docker0,abcdefghijklmnop", &l, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "would never match"));
}

static void test_overlong_entry_is_usage_error(void **state)
{
	struct policy_list l;
	np_error err = {0};
	assert_int_equal(policy_list_parse("eth0,abcdefghijklmnop", &l, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "'abcdefghijklmnop'"));
	/* 15 characters is the longest possible interface name: accepted. */
	struct policy_list ok = parse_ok("abcdefghijklmno");
	assert_true(policy_list_selects(&ok, "abcdefghijklmno"));
}

static void test_exclude_option_caret_means_the_same(void **state)
{
	struct policy a, b;
	np_error err = {0};
	policy_init(&a);
	policy_init(&b);
	assert_int_equal(policy_set_exclude(&a, "^docker,lo", &err), 0);
	assert_int_equal(policy_set_exclude(&b, "docker,lo", &err), 0);
	const char *names[] = {"docker0", "lo", "eth0", "cni0"};
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(policy_list_matches(&a.exclude, names[i]),
				 policy_list_matches(&b.exclude, names[i]));
	assert_true(policy_list_matches(&a.exclude, "docker0"));
	assert_false(policy_list_matches(&a.exclude, "eth0"));
	assert_int_equal(policy_set_include(&a, "=eth0,abcdefghijklmnopq", &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "invalid --include"));
}

static void test_set_cidr(void **state)
{
	struct policy p;
	np_error err = {0};
	policy_init(&p);
	assert_int_equal(policy_set_cidr(&p, "10.1.2.3/8", &err), 0);
	assert_int_equal(p.cidr.family, AF_INET);
	assert_int_equal(p.cidr.len, 8);
	const unsigned char want4[4] = {10, 0, 0, 0};
	assert_memory_equal(p.cidr.bytes, want4, 4);
	assert_int_equal(policy_set_cidr(&p, "fd00:1:2ff:3::5/44", &err), 0);
	assert_int_equal(p.cidr.family, AF_INET6);
	const unsigned char want6[16] = {0xfd, 0, 0, 1, 2, 0xf0};
	assert_memory_equal(p.cidr.bytes, want6, 16);
	assert_int_equal(policy_set_cidr(&p, "10.0.0.0/0", &err), 0);

	const char *bad[] = {"10.0.0.0", "10.0.0.0/33", "10.0.0/8", "x/8", "10.0.0.0/",
			     "10.0.0.0/8x", "10.0.0.0/-1", "/8", "::/129", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		np_error_clear(&err);
		assert_int_equal(policy_set_cidr(&p, bad[i], &err), -1);
		assert_int_equal(err.status, NP_EUSAGE);
		char want[64];
		snprintf(want, sizeof(want), "invalid --cidr: '%s': ", bad[i]);
		assert_non_null(strstr(err.msg, want));
	}
}

static void test_set_family(void **state)
{
	struct policy p;
	np_error err = {0};
	policy_init(&p);
	assert_int_equal(p.family, AF_UNSPEC);
	assert_int_equal(policy_set_family(&p, "inet6", &err), 0);
	assert_int_equal(p.family, AF_INET6);
	assert_int_equal(policy_set_family(&p, "4", &err), 0);
	assert_int_equal(p.family, AF_INET);
	assert_int_equal(policy_set_family(&p, "6", &err), 0);
	assert_int_equal(p.family, AF_INET6);
	assert_int_equal(policy_set_family(&p, "inet", &err), 0);
	assert_int_equal(p.family, AF_INET);
	assert_int_equal(policy_set_family(&p, "ipx", &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_int_equal(p.family, AF_INET);
}

static void test_set_min_speed(void **state)
{
	struct policy p;
	np_error err = {0};
	policy_init(&p);
	assert_int_equal(policy_set_min_speed(&p, "25000", &err), 0);
	assert_int_equal(p.min_speed, 25000);
	assert_int_equal(policy_set_min_speed(&p, "100G", &err), 0);
	assert_int_equal(p.min_speed, 100000);
	const char *bad[] = {"", "0", "-5", "+5", " 5", "5 ", "5x", "G", "1e5", "99999999999999999999",
			     "10GG"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		np_error_clear(&err);
		assert_int_equal(policy_set_min_speed(&p, bad[i], &err), -1);
		assert_int_equal(err.status, NP_EUSAGE);
		assert_non_null(strstr(err.msg, "invalid --min-speed"));
	}
	assert_int_equal(p.min_speed, 100000);
}

static void test_policy_to_json(void **state)
{
	struct policy p;
	np_error err = {0};
	policy_init(&p);
	assert_int_equal(policy_set_include(&p, "^=docker0", &err), 0);
	assert_int_equal(policy_set_cidr(&p, "10.9.8.7/16", &err), 0);
	assert_int_equal(policy_set_family(&p, "inet", &err), 0);
	assert_int_equal(policy_set_min_speed(&p, "10G", &err), 0);
	json_t *o = select_decision_policy_json(&p);
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(s, "{\"include\":\"^=docker0\",\"exclude\":null,\"cidr\":\"10.9.0.0/16\","
			       "\"family\":\"inet\",\"min_speed_mbps\":10000}");
	free(s);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefix_match_eth1_matches_eth10),
		cmocka_unit_test(test_exact_eth1_does_not_match_eth10),
		cmocka_unit_test(test_exact_applies_to_whole_list),
		cmocka_unit_test(test_exclude_docker_lo),
		cmocka_unit_test(test_exclude_exact_docker0),
		cmocka_unit_test(test_one_character_value_is_unset),
		cmocka_unit_test(test_empty_entries_are_skipped),
		cmocka_unit_test(test_port_suffix_is_ignored_for_interfaces),
		cmocka_unit_test(test_empty_list_after_prefixes_behaves_as_nccl),
		cmocka_unit_test(test_too_many_entries_is_usage_error),
		cmocka_unit_test(test_overlong_entry_in_an_exclude_list_is_refused_too),
		cmocka_unit_test(test_overlong_entry_is_usage_error),
		cmocka_unit_test(test_exclude_option_caret_means_the_same),
		cmocka_unit_test(test_set_cidr),
		cmocka_unit_test(test_set_family),
		cmocka_unit_test(test_set_min_speed),
		cmocka_unit_test(test_policy_to_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
