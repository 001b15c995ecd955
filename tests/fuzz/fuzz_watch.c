/* The watch stream: newline-delimited JSON events as the API server sends
 * them, in chunks cut wherever TCP and TLS cut them.  The events read must
 * not depend on where the chunks end: the stream is fed whole, one byte at
 * a time, and split in two at every byte boundary (inputs up to 512 bytes;
 * longer ones at 64 boundaries spread over the input), and each time the
 * same lines must come out (compared through a 64-bit hash of each) and the
 * stream stop at the same malformed event.  The events are a pure function
 * of the lines, decoded once, on the whole feed. */
#include "fuzz.h"

#include <stdbool.h>

#include "k8s/k8s_priv.h"

#define MAX_LINE 4096 /* small, so that the too-long path is reached too */

struct trace {
	char sig[8192]; /* each line's length and hash, in order, then rc */
	size_t len;
	size_t lines;
	size_t stop_after; /* split feeds: stop where the whole feed stopped */
	bool decode;	   /* the whole feed: decode each line as watch.c does */
};

static void add(struct trace *t, const char *s, size_t n)
{
	if (n > sizeof(t->sig) - t->len)
		n = sizeof(t->sig) - t->len;
	memcpy(t->sig + t->len, s, n);
	t->len += n;
}

/* The splitter's lines; the whole line is hashed, so traces compare every
 * byte.  Decoding is a pure function of the line, so only the whole feed
 * decodes (and checks the decoder); split feeds stop after the same line
 * the whole feed stopped at, as watch.c stops at a malformed event. */
static int on_line(const char *line, size_t len, void *ud)
{
	struct trace *t = ud;
	FUZZ_CHECK(len > 0 && len <= MAX_LINE && !memchr(line, '\n', len), "line of %zu", len);
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)line[i]) * 1099511628211ull;
	char buf[48];
	add(t, buf, (size_t)snprintf(buf, sizeof(buf), "%zu:%016llx;", len, (unsigned long long)h));
	t->lines++;
	if (!t->decode)
		return t->stop_after && t->lines == t->stop_after;
	struct k8s_watch_event e;
	int kind = k8s_watch_event_decode(line, len, &e);
	FUZZ_CHECK((kind == K8S_EVENT_MALFORMED) == !e.object, "kind %d, object %p", kind,
		   (void *)e.object);
	if (kind == K8S_EVENT_TYPED)
		FUZZ_CHECK(e.type >= K8S_WATCH_ADDED && e.type <= K8S_WATCH_BOOKMARK, "type %d",
			   (int)e.type);
	json_decref(e.ev);
	if (kind == K8S_EVENT_MALFORMED)
		t->stop_after = t->lines;
	return kind == K8S_EVENT_MALFORMED;
}

/* Feed data in the chunks that end at cuts[]; the result code is part of
 * the trace. */
static void feed(const uint8_t *data, size_t size, const size_t *cuts, size_t ncuts,
		 struct trace *t)
{
	struct k8s_linebuf lb = { .max_line = MAX_LINE };
	size_t at = 0;
	int rc = 0;
	t->len = 0;
	t->lines = 0;
	for (size_t i = 0; i <= ncuts && rc == 0; i++) {
		size_t end = i < ncuts ? cuts[i] : size;
		rc = k8s_linebuf_feed(&lb, (const char *)data + at, end - at, on_line, t);
		at = end;
	}
	char buf[32];
	add(t, buf, (size_t)snprintf(buf, sizeof(buf), "rc=%d", rc));
	k8s_linebuf_free(&lb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct trace whole, other;
	static size_t cuts[1 << 16];
	if (size > sizeof(cuts) / sizeof(cuts[0]))
		return 0;
	whole.decode = true;
	whole.stop_after = 0;
	feed(data, size, NULL, 0, &whole);
	other.decode = false;
	other.stop_after = whole.stop_after;

	for (size_t i = 0; i + 1 < size; i++)
		cuts[i] = i + 1;
	feed(data, size, cuts, size ? size - 1 : 0, &other);
	FUZZ_CHECK(other.len == whole.len && !memcmp(other.sig, whole.sig, whole.len),
		   "byte-at-a-time differs: %.*s | %.*s", (int)whole.len, whole.sig, (int)other.len,
		   other.sig);

	size_t step = size <= 512 ? 1 : size / 64;
	for (size_t c = 1; c < size; c += step) {
		feed(data, size, &c, 1, &other);
		FUZZ_CHECK(other.len == whole.len && !memcmp(other.sig, whole.sig, whole.len),
			   "split at %zu differs", c);
	}
	return 0;
}
