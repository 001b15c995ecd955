#include "util/testhook.h"

#ifdef NICPICK_TEST_HOOKS
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* NICPICK_TEST_PAUSE_AT=step:ms, the step's name then how long to stay. */
static long pause_ms(const char *step)
{
	const char *at = getenv("NICPICK_TEST_PAUSE_AT");
	size_t n = strlen(step);
	if (!at || strncmp(at, step, n) != 0 || at[n] != ':')
		return 0;
	char *end;
	long ms = strtol(at + n + 1, &end, 10);
	return *end == '\0' && ms > 0 ? ms : 0;
}

void np_test_point(const char *step)
{
	const char *at = getenv("NICPICK_TEST_KILL_AT");
	if (at && strcmp(at, step) == 0)
		raise(SIGKILL);
	long ms = pause_ms(step);
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L };
	while (ms > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
#endif
