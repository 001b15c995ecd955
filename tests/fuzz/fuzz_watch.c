/* The watch stream: newline-delimited JSON events as the API server sends
 * them, in chunks cut wherever TCP and TLS cut them.  The events read must
 * not depend on where the chunks end: the stream is fed whole, one byte at
 * a time, and split in two at every byte boundary (inputs up to 512 bytes;
 * longer ones at 64 boundaries spread over the input), and each time the
 * same lines must decode to the same events. */
#include "fuzz.h"

#include "k8s/k8s_priv.h"

#define MAX_LINE 4096 /* small, so that the too-long path is reached too */

struct trace {
	char sig[8192];
	size_t len;
};

static void add(struct trace *t, const char *s, size_t n)
{
	if (n > sizeof(t->sig) - t->len)
		n = sizeof(t->sig) - t->len;
	memcpy(t->sig + t->len, s, n);
	t->len += n;
}

static int on_line(const char *line, size_t len, void *ud)
{
	struct trace *t = ud;
	FUZZ_CHECK(len > 0 && len <= MAX_LINE && !memchr(line, '\n', len), "line of %zu", len);
	struct k8s_watch_event e;
	int kind = k8s_watch_event_decode(line, len, &e);
	char buf[96];
	const char *rv = json_string_value(
		json_object_get(json_object_get(e.object, "metadata"), "resourceVersion"));
	int n = snprintf(buf, sizeof(buf), "%d/%d/%.40s/%zu;", kind, (int)e.type, rv ? rv : "-", len);
	add(t, buf, (size_t)n);
	add(t, line, len < 32 ? len : 32);
	json_decref(e.ev);
	/* A malformed event stops the watch, as in watch.c. */
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
	feed(data, size, NULL, 0, &whole);

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
