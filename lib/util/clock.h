/* nicpick's one monotonic clock, in milliseconds (deadlines) and in
 * microseconds (the smoke test's timings), and the one deadline every wait
 * respects. */
#ifndef NP_CLOCK_H
#define NP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline struct timespec np_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

static inline int64_t np_now_ms(void)
{
	struct timespec ts = np_mono();
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline double np_now_us(void)
{
	struct timespec ts = np_mono();
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Milliseconds left until deadline (never negative). */
static inline int64_t np_left_ms(int64_t deadline_ms)
{
	int64_t left = deadline_ms - np_now_ms();
	return left > 0 ? left : 0;
}

#endif
