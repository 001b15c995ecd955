#include "util/testhook.h"

#ifdef NICPICK_TEST_HOOKS
#include <signal.h>
#include <stdlib.h>
#include <string.h>

void np_test_point(const char *step)
{
	const char *at = getenv("NICPICK_TEST_KILL_AT");
	if (at && strcmp(at, step) == 0)
		raise(SIGKILL);
}
#endif
