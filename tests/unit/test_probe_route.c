/* The route lookup's errors name the kernel's reason (issue 14: a down
 * interface read "route lookup ...: Unspecific failure", libnl's word for
 * most errnos). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe/probe.h"

/* In a network namespace of its own (only lo, down) nothing is routable:
 * the kernel answers ENETUNREACH, as it does for a peer whose interface
 * is down. */
static void test_no_route_names_the_kernels_reason(void **state)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		char msg[NP_ERR_MSG_MAX + 8] = "";
		if (unshare(CLONE_NEWNET) < 0) {
			snprintf(msg, sizeof(msg), "SKIP unshare: %s", strerror(errno));
		} else {
			char dev[IF_NAMESIZE];
			np_error err = { 0 };
			int rc = probe_route_dev("10.1.2.3", dev, sizeof(dev), &err);
			snprintf(msg, sizeof(msg), "%d %s", rc, err.msg);
		}
		ssize_t w = write(fds[1], msg, strlen(msg));
		_exit(w < 0);
	}
	close(fds[1]);
	char got[NP_ERR_MSG_MAX + 8] = "";
	ssize_t n = read(fds[0], got, sizeof(got) - 1);
	close(fds[0]);
	int status;
	waitpid(pid, &status, 0);
	assert_true(n > 0);
	got[n] = '\0';
	if (!strncmp(got, "SKIP", 4)) {
		print_message("%s: needs CAP_SYS_ADMIN for a network namespace\n", got);
		skip();
	}
	assert_string_equal(got, "-1 no route to 10.1.2.3 (is the interface to it down, or "
				 "without its address?): Network is unreachable");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_route_names_the_kernels_reason),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
