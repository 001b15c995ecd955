#include "util/jsonw.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void np_jsonw_init(struct np_jsonw *w, int fd)
{
	w->fd = fd;
	w->len = 0;
	w->failed = false;
	w->error = 0;
	w->items = 0;
}

bool np_jsonw_flush(struct np_jsonw *w)
{
	for (size_t off = 0; off < w->len && !w->failed;) {
		ssize_t n = write(w->fd, w->data + off, w->len - off);
		if (n < 0 && errno != EINTR) {
			w->failed = true;
			w->error = errno;
		} else if (n > 0) {
			off += (size_t)n;
		}
	}
	w->len = 0;
	return !w->failed;
}

int np_jsonw_raw(const char *buf, size_t len, void *ud)
{
	struct np_jsonw *w = ud;
	if (w->len + len > sizeof(w->data))
		np_jsonw_flush(w);
	if (len > sizeof(w->data)) {
		for (size_t off = 0; off < len; off += sizeof(w->data)) {
			size_t n = len - off < sizeof(w->data) ? len - off : sizeof(w->data);
			memcpy(w->data, buf + off, n);
			w->len = n;
			np_jsonw_flush(w);
		}
		return w->failed ? -1 : 0;
	}
	memcpy(w->data + w->len, buf, len);
	w->len += len;
	return w->failed ? -1 : 0;
}

int np_jsonw_item(struct np_jsonw *w, const json_t *obj)
{
	if (w->items++ && np_jsonw_raw(",", 1, w) < 0)
		return -1;
	return json_dump_callback(obj, np_jsonw_raw, w, JSON_COMPACT | JSON_PRESERVE_ORDER) == 0 ? 0
												    : -1;
}
