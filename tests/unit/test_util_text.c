/* util/text (the one sanitiser, by rule) and util/grow. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "util/text.h"

static void test_escape_writes_control_characters_as_hex(void **state)
{
	char out[64];
	np_text_clean(out, sizeof(out), "a\nb\x7f" "c\xc3\xa9", NP_TEXT_ESCAPE);
	assert_string_equal(out, "a\\x0ab\\x7fc\xc3\xa9");
	/* An escape that does not fit is left out whole. */
	char small[6];
	np_text_clean(small, sizeof(small), "ab\ncd", NP_TEXT_ESCAPE);
	assert_string_equal(small, "ab");
}

static void test_space_keeps_utf8_and_never_cuts_a_sequence(void **state)
{
	char out[64];
	np_text_clean(out, sizeof(out), "a\tb\x7f\xc3\xa9", NP_TEXT_SPACE);
	assert_string_equal(out, "a b \xc3\xa9");
	char small[4]; /* room for "ab" and half of the é: the half is dropped */
	np_text_clean(small, sizeof(small), "ab\xc3\xa9", NP_TEXT_SPACE);
	assert_string_equal(small, "ab");
}

static void test_ascii_replaces_everything_unprintable_in_place(void **state)
{
	char s[] = "NVIDIA\x01H200\xc3\xa9~";
	np_text_clean(s, sizeof(s), s, NP_TEXT_ASCII);
	assert_string_equal(s, "NVIDIA?H200??~");
}

static void test_grow_doubles_from_the_first_capacity(void **state)
{
	int *v = NULL;
	size_t cap = 0;
	for (size_t n = 0; n < 100; n++) {
		assert_int_equal(np_grow(&v, &cap, n, sizeof(*v), 4), 0);
		assert_true(cap > n);
		v[n] = (int)n;
	}
	assert_int_equal(cap, 128);
	assert_int_equal(v[99], 99);
	/* Room already there: nothing changes. */
	int *before = v;
	assert_int_equal(np_grow(&v, &cap, 100, sizeof(*v), 4), 0);
	assert_ptr_equal(v, before);
	assert_int_equal(cap, 128);
	/* A size that cannot be had is refused, the array kept. */
	size_t huge = (size_t)-1 / 2;
	assert_int_equal(np_grow(&v, &huge, huge, 4, 4), -1);
	assert_ptr_equal(v, before);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape_writes_control_characters_as_hex),
		cmocka_unit_test(test_space_keeps_utf8_and_never_cuts_a_sequence),
		cmocka_unit_test(test_ascii_replaces_everything_unprintable_in_place),
		cmocka_unit_test(test_grow_doubles_from_the_first_capacity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
