/* What a piece of work that never blocks waits for before it can go on: a
 * file descriptor's readiness, a time, or both.  It is driven by whoever
 * waits for it, alone (np_wait_block) or along with other work (the API
 * client's watch, lib/k8s). */
#ifndef NP_WAIT_H
#define NP_WAIT_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/clock.h"

struct np_wait {
	int fd;		  /* -1: none */
	short events;	  /* POLLIN, POLLOUT */
	int64_t until_ms; /* np_now_ms() base; 0: no time */
};

static inline void np_wait_none(struct np_wait *w)
{
	*w = (struct np_wait){ .fd = -1 };
}

/* Milliseconds to wait for w, at most cap_ms (>= 0). */
static inline int np_wait_ms(const struct np_wait *w, int64_t cap_ms)
{
	int64_t ms = cap_ms;
	if (w->until_ms) {
		int64_t left = w->until_ms - np_now_ms();
		if (left < ms)
			ms = left > 0 ? left : 0;
	}
	return (int)ms;
}

/* Wait until w is ready or due, at most cap_ms: true when it is (false:
 * cap_ms passed first, or a signal came). */
static inline bool np_wait_block(const struct np_wait *w, int64_t cap_ms)
{
	struct pollfd p = { .fd = w->fd, .events = w->events };
	int r = poll(&p, w->fd >= 0 ? 1 : 0, np_wait_ms(w, cap_ms));
	return r > 0 || (r == 0 && w->until_ms && np_now_ms() >= w->until_ms);
}

#endif
