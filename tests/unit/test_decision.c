/* decision.json's reader, as `nicpick smoke --out-dir` uses it, and the
 * smoke section's writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "select/decision.h"

static char dir[64];

static void write_decision(const char *agreement)
{
	strcpy(dir, "/tmp/np-decision.XXXXXX");
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/decision.json", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"version\": 1, \"env\": {\"NCCL_SOCKET_IFNAME\": \"=eth1\", \"NCCL_IB_HCA\": \"=mlx5_0:1\"},"
		" \"choice\": {\"interface\": \"eth1\", \"ib_hca\": \"=mlx5_0:1\", \"effective_speed_mbps\": 100000},"
		" \"smoke\": {\"status\": \"passed\", \"rank\": 1, \"world\": 2, \"comm_id\": \"10.9.0.1:29418\"}%s%s}",
		agreement ? ", \"agreement\": " : "", agreement ? agreement : "");
	assert_int_equal(fclose(f), 0);
}

static void remove_decision(void)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/decision.json", dir);
	unlink(path);
	rmdir(dir);
}

/* `select` judges the smoke test against the slowest agreed link (the
 * agreement's min_mbps); the reader must hand `nicpick smoke` the same,
 * not this pod's own faster link. */
static void test_agreed_threshold_is_the_slowest_agreed_link(void **state)
{
	write_decision("{\"network\": \"10.9.0.0/24\", \"min_mbps\": 10000, \"rank\": 1, \"world\": 2}");
	struct select_decision_read d;
	np_error err = { 0 };
	assert_int_equal(select_decision_load(dir, &d, &err), 0);
	assert_int_equal(d.min_mbps, 10000);
	assert_int_equal(d.rank, 1);
	assert_int_equal(d.world, 2);
	assert_string_equal(d.ifname, "eth1");
	assert_string_equal(d.ib_hca, "mlx5_0:1");
	assert_string_equal(d.comm_id, "10.9.0.1:29418");
	assert_int_equal(d.n_vars, 2);
	remove_decision();
}

static void test_alone_threshold_is_this_pods_link(void **state)
{
	write_decision(NULL);
	struct select_decision_read d;
	np_error err = { 0 };
	assert_int_equal(select_decision_load(dir, &d, &err), 0);
	assert_int_equal(d.min_mbps, 100000);
	remove_decision();
}

static void test_agreement_without_min_mbps_is_refused(void **state)
{
	write_decision("{\"network\": \"10.9.0.0/24\"}");
	struct select_decision_read d;
	np_error err = { 0 };
	assert_int_equal(select_decision_load(dir, &d, &err), -1);
	assert_int_equal(err.status, NP_EUSAGE);
	assert_non_null(strstr(err.msg, "\"min_mbps\""));
	remove_decision();
}

static void test_smoke_section_holds_what_nccls_log_said(void **state)
{
	/* Names from NCCL's log keep their bytes (Linux allows any byte above
	 * 0x7f); JSON holds UTF-8 only, so one that is not is written with
	 * '?', and the section is still there. */
	static struct smoke_report s;
	memset(&s, 0, sizeof(s));
	s.status = SMOKE_PASSED;
	s.ran = true;
	s.world = 2;
	snprintf(s.reason, sizeof(s.reason), "passed on r\xe9seau");
	snprintf(s.not_proven, sizeof(s.not_proven), "not proven: no channel ran over the network");
	s.log.n_socket = 2;
	snprintf(s.log.socket[0].name, sizeof(s.log.socket[0].name), "r\xc3\xa9seau;1");
	snprintf(s.log.socket[1].name, sizeof(s.log.socket[1].name), "bad\xff");
	snprintf(s.log.network, sizeof(s.log.network), "AWS Libfabric");
	snprintf(s.log.ib_absent, sizeof(s.log.ib_absent), "NET/IB : No device found.");
	s.log.n_local = 3;
	json_t *o = select_decision_smoke_json(&s);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "reason")), "passed on r?seau");
	assert_string_equal(json_string_value(json_object_get(o, "not_proven")),
			    "not proven: no channel ran over the network");
	json_t *log = json_object_get(o, "nccl_log");
	assert_non_null(log);
	json_t *sock = json_object_get(log, "net_socket");
	assert_int_equal(json_array_size(sock), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(sock, 0), "interface")),
			    "r\xc3\xa9seau;1");
	assert_string_equal(json_string_value(json_object_get(json_array_get(sock, 1), "interface")),
			    "bad?");
	assert_string_equal(json_string_value(json_object_get(log, "network")), "AWS Libfabric");
	assert_string_equal(json_string_value(json_object_get(log, "ib_absent")),
			    "NET/IB : No device found.");
	assert_int_equal(json_integer_value(json_object_get(log, "channels_local")), 3);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agreed_threshold_is_the_slowest_agreed_link),
		cmocka_unit_test(test_alone_threshold_is_this_pods_link),
		cmocka_unit_test(test_agreement_without_min_mbps_is_refused),
		cmocka_unit_test(test_smoke_section_holds_what_nccls_log_said),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
