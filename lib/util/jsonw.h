/* A streaming JSON array writer: jansson hands over many small pieces;
 * they are gathered in one buffer and written to a file descriptor in
 * large blocks, one element at a time. */
#ifndef NP_UTIL_JSONW_H
#define NP_UTIL_JSONW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct np_jsonw {
	int fd;
	size_t len;
	bool failed;
	int error;    /* errno of the failed write */
	size_t items; /* array elements written so far */
	char data[1 << 16];
};

void np_jsonw_init(struct np_jsonw *w, int fd);
/* Raw bytes ("[", "]\n"); 0, or -1 once a write failed. */
int np_jsonw_raw(const char *buf, size_t len, void *w);
/* One array element, compact, with the ',' before all but the first. */
int np_jsonw_item(struct np_jsonw *w, const json_t *obj);
/* Write what is buffered; false (w->error says why) when a write failed. */
bool np_jsonw_flush(struct np_jsonw *w);

#endif
