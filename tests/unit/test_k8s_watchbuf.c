/* lib/k8s's watch buffer (k8s_wbuf): what curl's write callback keeps of a
 * watch stream, when it asks curl to pause, and how the watch's loop
 * hands the bytes on between curl_multi_perform calls, also while a
 * callback drives the multi itself (a request on the watch's twin). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/k8s_priv.h"

/* What fn saw, concatenated, and how often it was called. */
struct sink {
	struct k8s_buf got;
	int calls;
	int stop_after; /* 0: never stop */
	/* Bytes a "nested request" receives for the watch while fn runs:
	 * appended to b at the first call only. */
	struct k8s_wbuf *b;
	const char *nested;
	bool can_pause;
	int nested_rc;
};

static int sink_fn(const char *p, size_t n, void *ud)
{
	struct sink *s = ud;
	s->calls++;
	assert_int_equal(k8s_buf_append(&s->got, p, n), 0);
	if (s->nested && s->calls == 1)
		s->nested_rc = k8s_wbuf_take(s->b, s->nested, strlen(s->nested), s->can_pause);
	return s->stop_after && s->calls >= s->stop_after ? 7 : 0;
}

/* curl resumed: it hands over what it held back (the chunk it was
 * refused), which goes into the buffer as a write callback's would. */
struct resumer {
	struct k8s_wbuf *b;
	const char *held;
	int calls;
};

static void resume_fn(void *ud)
{
	struct resumer *r = ud;
	r->calls++;
	if (r->held) {
		assert_int_equal(k8s_wbuf_take(r->b, r->held, strlen(r->held), true), K8S_WBUF_TAKEN);
		r->held = NULL;
	}
}

struct both {
	struct sink s;
	struct resumer r;
};

static int both_fn(const char *p, size_t n, void *ud)
{
	return sink_fn(p, n, &((struct both *)ud)->s);
}

static void both_resume(void *ud)
{
	resume_fn(&((struct both *)ud)->r);
}

static void test_bytes_below_the_limit_are_kept_in_order(void **state)
{
	struct k8s_wbuf b = { .max = 64 };
	assert_int_equal(k8s_wbuf_take(&b, "abc", 3, true), K8S_WBUF_TAKEN);
	assert_int_equal(k8s_wbuf_take(&b, "def", 3, true), K8S_WBUF_TAKEN);
	assert_int_equal(b.raw.len, 6);
	assert_string_equal(b.raw.data, "abcdef");
	assert_false(b.paused);
	k8s_wbuf_free(&b);
}

static void test_over_the_limit_pauses_and_takes_nothing(void **state)
{
	struct k8s_wbuf b = { .max = 8 };
	assert_int_equal(k8s_wbuf_take(&b, "12345", 5, true), K8S_WBUF_TAKEN);
	assert_int_equal(k8s_wbuf_take(&b, "6789", 4, true), K8S_WBUF_PAUSE);
	assert_true(b.paused);
	assert_int_equal(b.raw.len, 5); /* curl keeps the refused chunk */
	k8s_wbuf_free(&b);
}

static void test_a_chunk_larger_than_the_limit_goes_into_an_empty_buffer(void **state)
{
	/* Else a paused transfer could never move on. */
	struct k8s_wbuf b = { .max = 4 };
	assert_int_equal(k8s_wbuf_take(&b, "0123456789", 10, true), K8S_WBUF_TAKEN);
	assert_int_equal(b.raw.len, 10);
	assert_false(b.paused);
	k8s_wbuf_free(&b);
}

static void test_without_pausing_it_grows_to_the_hard_limit_then_refuses(void **state)
{
	/* HTTP/2 on a libcurl older than 8.14.0: a paused stream would stall
	 * (its own or, before 8.1.0, its twin's on the same connection). */
	struct k8s_wbuf b = { .max = 4, .hard_max = 12 };
	assert_int_equal(k8s_wbuf_take(&b, "abcd", 4, false), K8S_WBUF_TAKEN);
	assert_int_equal(k8s_wbuf_take(&b, "efgh", 4, false), K8S_WBUF_TAKEN);
	assert_int_equal(k8s_wbuf_take(&b, "ijkl", 4, false), K8S_WBUF_TAKEN);
	assert_false(b.paused);
	assert_int_equal(k8s_wbuf_take(&b, "m", 1, false), K8S_WBUF_FULL);
	assert_int_equal(b.raw.len, 12);
	k8s_wbuf_free(&b);
}

static void test_drain_hands_on_everything_and_empties(void **state)
{
	struct k8s_wbuf b = { .max = 64 };
	struct sink s = { 0 };
	k8s_wbuf_take(&b, "one\n", 4, true);
	k8s_wbuf_take(&b, "two\n", 4, true);
	assert_int_equal(k8s_wbuf_drain(&b, sink_fn, NULL, &s), 0);
	assert_int_equal(s.calls, 1);
	assert_string_equal(s.got.data, "one\ntwo\n");
	assert_int_equal(b.raw.len, 0);
	/* nothing new: fn is not called again */
	assert_int_equal(k8s_wbuf_drain(&b, sink_fn, NULL, &s), 0);
	assert_int_equal(s.calls, 1);
	k8s_buf_free(&s.got);
	k8s_wbuf_free(&b);
}

static void test_bytes_arriving_while_a_callback_runs_are_handed_on_after_it(void **state)
{
	/* The callback made a request on the twin, which drove the multi and
	 * received more of the watch's stream: those come next, in order. */
	struct k8s_wbuf b = { .max = 64 };
	struct sink s = { .b = &b, .nested = "three\n", .can_pause = true };
	k8s_wbuf_take(&b, "one\ntwo\n", 8, true);
	assert_int_equal(k8s_wbuf_drain(&b, sink_fn, NULL, &s), 0);
	assert_int_equal(s.nested_rc, K8S_WBUF_TAKEN);
	assert_int_equal(s.calls, 2);
	assert_string_equal(s.got.data, "one\ntwo\nthree\n");
	assert_int_equal(b.raw.len, 0);
	k8s_buf_free(&s.got);
	k8s_wbuf_free(&b);
}

static void test_paused_while_a_callback_runs_resumes_once_drained(void **state)
{
	/* The nested request received more than the limit for the watch: the
	 * watch was paused with a chunk held back by curl; the drain hands on
	 * what was taken, resumes the transfer, and curl's chunk follows. */
	struct k8s_wbuf b = { .max = 10 };
	struct both x = { .s = { .b = &b, .nested = "12345678\n", .can_pause = true },
			  .r = { .b = &b, .held = "held\n" } };
	k8s_wbuf_take(&b, "first\n", 6, true);
	/* during the first call, the nested request: 9 bytes taken into the
	 * emptied buffer, then curl's next chunk does not fit: paused */
	assert_int_equal(k8s_wbuf_drain(&b, both_fn, both_resume, &x), 0);
	assert_int_equal(x.s.nested_rc, K8S_WBUF_TAKEN);
	assert_int_equal(x.r.calls, 0); /* never paused so far */
	assert_string_equal(x.s.got.data, "first\n12345678\n");

	k8s_wbuf_take(&b, "12345678\n", 9, true);
	assert_int_equal(k8s_wbuf_take(&b, "held\n", 5, true), K8S_WBUF_PAUSE);
	assert_true(b.paused);
	assert_int_equal(k8s_wbuf_drain(&b, both_fn, both_resume, &x), 0);
	assert_int_equal(x.r.calls, 1);
	assert_false(b.paused);
	assert_string_equal(x.s.got.data, "first\n12345678\n12345678\nheld\n");
	assert_int_equal(b.raw.len, 0);
	k8s_buf_free(&x.s.got);
	k8s_wbuf_free(&b);
}

static void test_not_paused_is_not_resumed(void **state)
{
	struct k8s_wbuf b = { .max = 64 };
	struct both x = { 0 };
	k8s_wbuf_take(&b, "a\n", 2, true);
	assert_int_equal(k8s_wbuf_drain(&b, both_fn, both_resume, &x), 0);
	assert_int_equal(x.r.calls, 0);
	k8s_buf_free(&x.s.got);
	k8s_wbuf_free(&b);
}

static void test_a_stop_ends_the_drain_with_its_value(void **state)
{
	/* The callback stopped the watch: the rest is not handed on, and a
	 * paused transfer is not resumed (it is about to end). */
	struct k8s_wbuf b = { .max = 64 };
	struct both x = { .s = { .stop_after = 1, .b = &b, .nested = "more\n", .can_pause = true },
			  .r = { .b = &b } };
	k8s_wbuf_take(&b, "stop\n", 5, true);
	b.paused = true;
	assert_int_equal(k8s_wbuf_drain(&b, both_fn, both_resume, &x), 7);
	assert_int_equal(x.s.calls, 1);
	assert_int_equal(x.r.calls, 0);
	k8s_buf_free(&x.s.got);
	k8s_wbuf_free(&b);
}

/* The line splitter behind the buffer: events cut anywhere by curl's
 * chunks and by drains come out whole. */
struct lines {
	char seen[8][32];
	int n;
};

static int line_fn(const char *line, size_t len, void *ud)
{
	struct lines *l = ud;
	assert_true(l->n < 8 && len < sizeof(l->seen[0]));
	memcpy(l->seen[l->n], line, len);
	l->seen[l->n++][len] = '\0';
	return 0;
}

struct feed {
	struct k8s_linebuf lb;
	struct lines l;
};

static int feed_fn(const char *p, size_t n, void *ud)
{
	struct feed *f = ud;
	return k8s_linebuf_feed(&f->lb, p, n, line_fn, &f->l);
}

static void test_events_cut_by_chunks_and_drains_come_out_whole(void **state)
{
	const char *stream = "{\"a\":1}\n{\"b\":2}\r\n{\"c\":3}\n";
	size_t n = strlen(stream);
	for (size_t cut = 1; cut < n; cut++) {
		struct k8s_wbuf b = { .max = 4 };
		struct feed f = { .lb = { .max_line = 64 } };
		size_t off = 0;
		while (off < n) {
			size_t k = n - off < cut ? n - off : cut;
			int r = k8s_wbuf_take(&b, stream + off, k, true);
			if (r == K8S_WBUF_PAUSE) {
				b.paused = false; /* the loop drains, then curl retries the chunk */
				assert_int_equal(k8s_wbuf_drain(&b, feed_fn, NULL, &f), 0);
				continue;
			}
			assert_int_equal(r, K8S_WBUF_TAKEN);
			off += k;
		}
		assert_int_equal(k8s_wbuf_drain(&b, feed_fn, NULL, &f), 0);
		assert_int_equal(f.l.n, 3);
		assert_string_equal(f.l.seen[0], "{\"a\":1}");
		assert_string_equal(f.l.seen[1], "{\"b\":2}");
		assert_string_equal(f.l.seen[2], "{\"c\":3}");
		k8s_linebuf_free(&f.lb);
		k8s_wbuf_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_below_the_limit_are_kept_in_order),
		cmocka_unit_test(test_over_the_limit_pauses_and_takes_nothing),
		cmocka_unit_test(test_a_chunk_larger_than_the_limit_goes_into_an_empty_buffer),
		cmocka_unit_test(test_without_pausing_it_grows_to_the_hard_limit_then_refuses),
		cmocka_unit_test(test_drain_hands_on_everything_and_empties),
		cmocka_unit_test(test_bytes_arriving_while_a_callback_runs_are_handed_on_after_it),
		cmocka_unit_test(test_paused_while_a_callback_runs_resumes_once_drained),
		cmocka_unit_test(test_not_paused_is_not_resumed),
		cmocka_unit_test(test_a_stop_ends_the_drain_with_its_value),
		cmocka_unit_test(test_events_cut_by_chunks_and_drains_come_out_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
