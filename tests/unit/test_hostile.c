/* Hostile input found by the fuzzers (tests/fuzz), kept as regressions:
 * each case once crashed, misread or gave a misleading error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agree/agree.h"
#include "nic/nic_priv.h"
#include "outputs/outputs.h"
#include "util/err.h"

/* fuzz_sysfs: "1e30 Gb/sec" scaled to Mb/s did not fit a long (UBSan:
 * float-cast-overflow); NaN and infinity passed the `v <= 0` test. */
static void test_ib_rate_out_of_range_is_unknown(void **state)
{
	assert_int_equal(nicp_parse_rate("100 Gb/sec (4X EDR)"), 100000);
	assert_int_equal(nicp_parse_rate("2.5 Gb/sec (1X SDR)"), 2500);
	assert_int_equal(nicp_parse_rate("1e30 Gb/sec"), -1);
	assert_int_equal(nicp_parse_rate("1111111111111111111111111111 Gb/sec"), -1);
	assert_int_equal(nicp_parse_rate("nan Gb/sec"), -1);
	assert_int_equal(nicp_parse_rate("inf Gb/sec"), -1);
	assert_int_equal(nicp_parse_rate("-100 Gb/sec"), -1);
}

/* fuzz_env: an interface name with a newline gave a two-line error, and one
 * with escape sequences wrote them raw to the terminal. */
static void test_error_with_control_characters_is_one_line(void **state)
{
	struct outputs_choice c = { .n_ifaces = 1, .ifaces = { "eth\n0\x1b[2Jxxxxxxxxxx" },
				    .family = AF_INET, .gid_index = -1 };
	struct outputs_env env;
	np_error err = { 0 };
	assert_int_equal(outputs_env_from_choice(&c, &env, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_null(strchr(err.msg, '\n'));
	assert_null(strchr(err.msg, '\x1b'));
	assert_non_null(strstr(err.msg, "'eth\\x0a0\\x1b[2Jxxxxxxxxxx'"));
	np_error_wrap(&err, "interface %s", "a\rb");
	assert_null(strchr(err.msg, '\r'));
	assert_non_null(strstr(err.msg, "interface a\\x0db: "));
}

/* A report whose pod name is not a Kubernetes name (newline, shell syntax,
 * path traversal) is refused, in one line. */
static void test_report_with_hostile_pod_name(void **state)
{
	static const char *names[] = { "a\\nb", "$(reboot)", "../../etc/passwd", "a;b", "`id`" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char json[512];
		struct agree_report r;
		np_error err = { 0 };
		snprintf(json, sizeof(json),
			 "{\"v\":1,\"pod\":\"%s\",\"uid\":\"\",\"node\":\"\",\"c\":[]}", names[i]);
		assert_int_equal(agree_report_parse(json, strlen(json), &r, &err), -1);
		assert_int_equal(err.status, NP_EK8S);
		assert_non_null(strstr(err.msg, "\"pod\" has characters that are not allowed"));
		assert_null(strchr(err.msg, '\n'));
	}
}

/* --netlink-json: an interface name becomes a path under the sysfs root, so
 * one that Linux could not have ("..", "a/b") is refused, not followed. */
static void test_netlink_json_name_that_would_leave_sysfs_is_refused(void **state)
{
	static const char *names[] = { "..", ".", "../../etc", "a/b" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[] = "/tmp/nicpick-hostile-XXXXXX";
		int fd = mkstemp(path);
		assert_true(fd >= 0);
		dprintf(fd, "[{\"ifindex\":2,\"ifname\":\"%s\",\"flags\":[\"UP\"]}]", names[i]);
		close(fd);
		struct nic_source src = { .sysfs_root = "/nonexistent", .netlink_json = path };
		struct nic_list l = { 0 };
		np_error err = { 0 };
		assert_int_equal(nic_discover(&src, &l, &err), -1);
		assert_int_equal(err.status, NP_EUSAGE);
		assert_non_null(strstr(err.msg, "invalid \"ifname\""));
		nic_list_free(&l);
		unlink(path);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ib_rate_out_of_range_is_unknown),
		cmocka_unit_test(test_error_with_control_characters_is_one_line),
		cmocka_unit_test(test_report_with_hostile_pod_name),
		cmocka_unit_test(test_netlink_json_name_that_would_leave_sysfs_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
