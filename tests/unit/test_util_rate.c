/* np_rate_text: a rate in the unit that suits it, three significant
 * digits, so that a slow link (or the test double's) never reads 0.00. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "util/rate.h"

static void test_each_rate_in_the_unit_that_suits_it(void **state)
{
	static const struct {
		double gbps;
		const char *want;
	} cases[] = {
		{ 2.94, "2.94 GB/s" },	    { 22.9, "22.9 GB/s" },	{ 21.4, "21.4 GB/s" },
		{ 123.4, "123 GB/s" },	    { 1234.5, "1234 GB/s" },	{ 1.0, "1.00 GB/s" },
		{ 0.171, "171 MB/s" },	    { 0.24, "240 MB/s" },	{ 0.005, "5.00 MB/s" },
		{ 0.0125, "12.5 MB/s" },    { 0.0005, "500 kB/s" },	{ 0.0000012, "1.20 kB/s" },
		{ 5e-10, "0.500 B/s" },	    { 0, "0 GB/s" },
		/* rounding to three digits moves up a unit, never "1000 MB/s" */
		{ 0.99996, "1.00 GB/s" },   { 0.99949, "999 MB/s" },	{ 0.0099996, "10.0 MB/s" },
		{ 0.00099996, "1.00 MB/s" }, { 9.996, "10.0 GB/s" },	{ 99.96, "100 GB/s" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[NP_RATE_TEXT_MAX];
		np_rate_text(buf, sizeof(buf), cases[i].gbps, " ");
		if (strcmp(buf, cases[i].want) != 0)
			fail_msg("%g GB/s: got '%s', want '%s'", cases[i].gbps, buf, cases[i].want);
	}
}

static void test_what_make_demo_shows_reads_as_figures_not_zeros(void **state)
{
	/* The NCCL/CUDA test double's links: 0.005 GB/s, a slow node's a tenth. */
	char buf[NP_RATE_TEXT_MAX];
	np_rate_text(buf, sizeof(buf), 0.005, " ");
	assert_string_equal(buf, "5.00 MB/s");
	np_rate_pair_text(buf, sizeof(buf), 0.0005, 0.00048, " ");
	assert_string_equal(buf, "500/480 kB/s");
	/* a table's cell has no space */
	np_rate_text(buf, sizeof(buf), 0.17, "");
	assert_string_equal(buf, "170MB/s");
}

static void test_a_pair_shares_the_larger_ones_unit(void **state)
{
	static const struct {
		double a, b;
		const char *want;
	} cases[] = {
		{ 0.25, 0.24, "250/240 MB/s" }, { 2.61, 2.58, "2.61/2.58 GB/s" },
		{ 2.61, 0.24, "2.61/0.24 GB/s" }, { 0.24, 2.61, "0.24/2.61 GB/s" },
		{ 22.9, 2.61, "22.9/2.6 GB/s" },  { 0.005, 0.0005, "5.00/0.50 MB/s" },
		/* the smaller is not 0: more decimals instead of "0.00" */
		{ 2.61, 0.0012, "2.61/0.00120 GB/s" }, { 0.0012, 2.61, "0.00120/2.61 GB/s" },
		{ 2.61, 0, "2.61/0.00 GB/s" },	 { 0, 0, "0/0 GB/s" },
		{ 1.5, 1.5, "1.50/1.50 GB/s" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[NP_RATE_TEXT_MAX];
		np_rate_pair_text(buf, sizeof(buf), cases[i].a, cases[i].b, " ");
		if (strcmp(buf, cases[i].want) != 0)
			fail_msg("%g/%g GB/s: got '%s', want '%s'", cases[i].a, cases[i].b, buf,
				 cases[i].want);
	}
}

static void test_odd_values_and_small_buffers(void **state)
{
	char buf[NP_RATE_TEXT_MAX];
	np_rate_text(buf, sizeof(buf), -1, " ");
	assert_string_equal(buf, "-1 GB/s");
	np_rate_text(buf, sizeof(buf), NAN, " ");
	assert_string_equal(buf, "nan GB/s");
	np_rate_pair_text(buf, sizeof(buf), INFINITY, 1, " ");
	assert_string_equal(buf, "inf/1 GB/s");
	char small[5] = "xxxx";
	np_rate_text(small, sizeof(small), 2.94, " ");
	assert_string_equal(small, "2.94");
	np_rate_text(small, 0, 2.94, " "); /* nothing written */
	assert_string_equal(small, "2.94");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_rate_in_the_unit_that_suits_it),
		cmocka_unit_test(test_what_make_demo_shows_reads_as_figures_not_zeros),
		cmocka_unit_test(test_a_pair_shares_the_larger_ones_unit),
		cmocka_unit_test(test_odd_values_and_small_buffers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
