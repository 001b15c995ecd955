/* np_prefix: the one IP prefix type, parsed once and compared as bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "util/prefix.h"

static void test_parse_clears_host_bits_and_formats_back(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "10.1.2.3/8", "10.0.0.0/8" },	  { "10.9.0.0/24", "10.9.0.0/24" },
		{ "0.0.0.0/0", "0.0.0.0/0" },	  { "fd00:1:2ff:3::5/44", "fd00:1:2f0::/44" },
		{ "10.9.0.7/32", "10.9.0.7/32" }, { "::1/128", "::1/128" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct np_prefix p;
		np_error err = { 0 };
		char buf[NP_PREFIX_TEXT_MAX];
		assert_int_equal(np_prefix_parse(cases[i].in, &p, &err), 0);
		np_prefix_format(&p, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].out);
	}
}

static void test_parse_refuses_with_the_reason(void **state)
{
	static const struct {
		const char *in, *why;
	} cases[] = {
		{ "10.0.0.0", "expected ADDRESS/PREFIX" }, { "10.0.0.0/33", "prefix length must be 0 to 32" },
		{ "::/129", "0 to 128" },		   { "x/8", "'x' is not an IPv4 or IPv6 address" },
		{ "10.0.0.0/", "prefix length" },	   { "10.0.0.0/-1", "prefix length" },
		{ "/8", "bad address" },		   { "", "expected ADDRESS/PREFIX" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct np_prefix p;
		np_error err = { 0 };
		assert_int_equal(np_prefix_parse(cases[i].in, &p, &err), -1);
		assert_int_equal(err.status, NP_EUSAGE);
		if (!strstr(err.msg, cases[i].why))
			fail_msg("'%s': '%s' does not say '%s'", cases[i].in, err.msg, cases[i].why);
	}
	assert_int_equal(np_prefix_parse(NULL, &(struct np_prefix){ 0 }, &(np_error){ 0 }), -1);
}

static void test_contains_and_covers(void **state)
{
	struct np_prefix p16, p24, p24b, p6;
	np_error err = { 0 };
	assert_int_equal(np_prefix_parse("10.9.0.0/16", &p16, &err), 0);
	assert_int_equal(np_prefix_parse("10.9.3.0/24", &p24, &err), 0);
	assert_int_equal(np_prefix_parse("10.10.3.0/24", &p24b, &err), 0);
	assert_int_equal(np_prefix_parse("fd00::/8", &p6, &err), 0);
	unsigned char a[16];
	inet_pton(AF_INET, "10.9.200.1", a);
	assert_true(np_prefix_contains(&p16, AF_INET, a));
	assert_false(np_prefix_contains(&p24, AF_INET, a));
	assert_false(np_prefix_contains(&p6, AF_INET, a));
	assert_true(np_prefix_covers(&p16, &p24));
	assert_false(np_prefix_covers(&p24, &p16));
	assert_false(np_prefix_covers(&p16, &p24b));
	assert_false(np_prefix_covers(&p6, &p16));
	assert_true(np_prefix_equal(&p24, &p24));
	assert_false(np_prefix_equal(&p24, &p24b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_clears_host_bits_and_formats_back),
		cmocka_unit_test(test_parse_refuses_with_the_reason),
		cmocka_unit_test(test_contains_and_covers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
