/* The smoke test's pure parts: the plan, exact sums, the result message's
 * strict reader, NCCL's log (real files from NCCL 2.28.3 and lines shaped
 * after its format strings), the device check and the verdict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoke/smoke.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	char *buf = malloc(1 << 20);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

static void parse_file(const char *name, struct smoke_log *log)
{
	char path[256];
	size_t len;
	snprintf(path, sizeof(path), "tests/fixtures/nccl-logs/%s", name);
	char *buf = slurp(path, &len);
	memset(log, 0, sizeof(*log));
	smoke_log_parse(buf, len, log);
	free(buf);
}

static void versions_as_people_write_them(void **state)
{
	char b[32];
	smoke_nccl_version_text(22809, b, sizeof(b));
	assert_string_equal(b, "2.28.9");
	smoke_nccl_version_text(2804, b, sizeof(b)); /* before 2.9: X*1000+Y*100+Z */
	assert_string_equal(b, "2.8.4");
	smoke_cuda_version_text(12040, b, sizeof(b));
	assert_string_equal(b, "12.4");
	smoke_nccl_version_text(0, b, sizeof(b));
	assert_string_equal(b, "unknown");
}

static struct smoke_result sample(void)
{
	struct smoke_result r = { .ok = true, .phase = SMOKE_PHASE_DONE, .rank = 1, .world = 2,
				  .nccl_version = 22803, .cuda_driver = 13000, .cuda_runtime = 13000,
				  .gpu_count = 1, .init_ms = 400, .total_ms = 900, .n_sizes = 2 };
	snprintf(r.nccl_path, sizeof(r.nccl_path), "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
	snprintf(r.gpu, sizeof(r.gpu), "NVIDIA H200");
	r.sizes[0] = (struct smoke_size){ 1 << 20, 5, 580.5, 1.8, 1.8, 0 };
	r.sizes[1] = (struct smoke_size){ 64 << 20, 5, 37000, 1.81, 1.81, 0 };
	return r;
}

static void result_round_trips(void **state)
{
	struct smoke_result r = sample(), back;
	char *json = NULL;
	np_error err = { 0 };
	assert_int_equal(smoke_result_to_json(&r, &json, &err), 0);
	assert_int_equal(smoke_result_parse(json, strlen(json), &back, &err), 0);
	assert_true(back.ok);
	assert_int_equal(back.rank, 1);
	assert_int_equal(back.world, 2);
	assert_int_equal(back.nccl_version, 22803);
	assert_string_equal(back.gpu, "NVIDIA H200");
	assert_int_equal(back.n_sizes, 2);
	assert_int_equal(back.sizes[1].bytes, 64 << 20);
	assert_true(back.sizes[1].busbw_gbps > 1.80 && back.sizes[1].busbw_gbps < 1.82);
	free(json);
}

static void result_reader_refuses_what_it_does_not_know(void **state)
{
	struct smoke_result r = sample(), back;
	char *json = NULL;
	np_error err = { 0 };
	assert_int_equal(smoke_result_to_json(&r, &json, &err), 0);
	struct {
		const char *from, *to, *why;
	} cases[] = {
		{ "\"v\":1", "\"v\":2", "version 2" },
		{ "\"rank\":1", "\"rank\":2", "\"rank\" is 2" },
		{ "\"rank\":1", "\"rank\":\"1\"", "not an integer" },
		{ "\"phase\":\"done\"", "\"phase\":\"dance\"", "not a known value" },
		{ "\"ok\":true", "\"ok\":true,\"extra\":1", "unknown key" },
		{ "\"ok\":true", "\"ok\":1", "not a boolean" },
		{ "\"phase\":\"done\"", "\"phase\":\"init\"", "\"ok\" with phase init" },
		{ "\"wrong\":0", "\"wrong\":-1", "\"wrong\" is -1" },
		{ "NVIDIA H200", "NVIDIA\\u0007H200", "characters that are not allowed" },
		{ "\"ok\":true", "\"ok\":true,\"ok\":false", "duplicate" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[8192];
		const char *at = strstr(json, cases[i].from);
		assert_non_null(at);
		snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - json), json, cases[i].to,
			 at + strlen(cases[i].from));
		memset(&err, 0, sizeof(err));
		assert_int_equal(smoke_result_parse(buf, strlen(buf), &back, &err), -1);
		assert_int_equal(err.status, NP_ESMOKE);
		if (!strstr(err.msg, cases[i].why))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err.msg, cases[i].why);
	}
	/* Oversize and truncated input. */
	char *big = malloc(SMOKE_RESULT_MAX_BYTES + 2);
	memset(big, ' ', SMOKE_RESULT_MAX_BYTES + 1);
	big[SMOKE_RESULT_MAX_BYTES + 1] = '\0';
	assert_int_equal(smoke_result_parse(big, SMOKE_RESULT_MAX_BYTES + 1, &back, &err), -1);
	free(big);
	assert_int_equal(smoke_result_parse(json, strlen(json) / 2, &back, &err), -1);
	free(json);
}

static void real_nccl_2_28_socket_log(void **state)
{
	struct smoke_log log;
	parse_file("socket-2.28.3-rank0.log", &log);
	assert_string_equal(log.version, "2.28.3+cuda13.0");
	assert_string_equal(log.network, "Socket");
	assert_int_equal(log.n_socket, 1);
	assert_string_equal(log.socket[0].name, "va");
	assert_string_equal(log.socket[0].addr, "10.9.0.1");
	assert_true(log.has_bootstrap); /* "Bootstrap: Using" (2.23+ spelling) */
	assert_string_equal(log.bootstrap.name, "va");
	assert_string_equal(log.channel_net, "Socket");
	assert_int_equal(log.n_channels, 4);
	assert_false(log.channel_mixed);
	assert_true(log.init_complete);
	np_error err = { 0 };
	assert_int_equal(smoke_log_check(&log, "va", NULL, &err), 0);
	/* The other rank's file names its own interface. */
	parse_file("socket-2.28.3-rank1.log", &log);
	assert_string_equal(log.socket[0].name, "vb");
	assert_int_equal(smoke_log_check(&log, "vb", NULL, &err), 0);
	assert_int_equal(smoke_log_check(&log, "va", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "not the agreed va"));
}

static void the_decoy_bridge_is_named(void **state)
{
	struct smoke_log log;
	parse_file("decoy-cni0.log", &log);
	assert_true(log.has_bootstrap); /* "Bootstrap : Using" (before 2.23) */
	assert_string_equal(log.bootstrap.name, "cni0");
	assert_int_equal(log.n_socket, 3);
	assert_string_equal(log.socket[2].name, "vc1");
	assert_string_equal(log.socket[2].addr, "fe80::4c5e:1ff:fe2a:9b10%vc1");
	assert_int_equal(log.n_warn, 1);
	assert_non_null(strstr(log.warn[0], "Connect to 10.244.0.1"));
	assert_false(log.init_complete);
	np_error err = { 0 };
	assert_int_equal(smoke_log_check(&log, "va", NULL, &err), -1);
	assert_int_equal(err.status, NP_ESMOKE);
	assert_non_null(strstr(err.msg, "bootstrapped on cni0:10.244.0.1"));
}

static void roce_log_checks_hcas_and_oob(void **state)
{
	struct smoke_log log;
	parse_file("ib-roce-2.21.log", &log);
	assert_string_equal(log.network, "IB");
	assert_int_equal(log.n_ib, 2);
	assert_string_equal(log.ib[0].name, "mlx5_0:1");
	assert_string_equal(log.ib[1].name, "mlx5_1:1");
	assert_true(log.has_oob);
	assert_string_equal(log.oob.name, "eth1");
	assert_string_equal(log.channel_net, "IB");
	np_error err = { 0 };
	assert_int_equal(smoke_log_check(&log, "eth1", "mlx5_0:1,mlx5_1:1", &err), 0);
	assert_int_equal(smoke_log_check(&log, "eth1", "mlx5_0:1", &err), -1);
	assert_non_null(strstr(err.msg, "mlx5_1:1"));
	assert_int_equal(smoke_log_check(&log, "eth1", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "NET/IB"));
	assert_int_equal(smoke_log_check(&log, "eth0", "mlx5_0:1,mlx5_1:1", &err), -1);
}

static void a_log_without_devices_is_not_a_pass(void **state)
{
	struct smoke_log log = { 0 };
	const char *text = "h:1:1 [0] NCCL INFO NCCL version 2.28.3+cuda13.0\n";
	smoke_log_parse(text, strlen(text), &log);
	np_error err = { 0 };
	assert_int_equal(smoke_log_check(&log, "va", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "names no network device"));
}

static void hostile_log_lines_do_not_break_the_parser(void **state)
{
	struct smoke_log log = { 0 };
	char text[4096];
	/* Truncated entries, a name longer than IFNAMSIZ, control bytes,
	 * brackets without digits and a line with no newline at the end. */
	snprintf(text, sizeof(text),
		 "x [0] NCCL INFO NET/Socket : Using [0]\n"
		 "x [0] NCCL INFO NET/Socket : Using [0]averyveryverylongname:1.2.3.4<0> [x]y:z\n"
		 "x [0] NCCL INFO Bootstrap: Using \x01\x02:\x7f<0>\n"
		 "x [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/\n"
		 "x [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n"
		 "x [0] NCCL WARN %s",
		 "no newline");
	smoke_log_parse(text, strlen(text), &log);
	assert_true(log.has_bootstrap);
	assert_string_equal(log.bootstrap.name, "??");
	assert_true(log.channel_mixed);
	assert_int_equal(log.n_warn, 1);
	assert_string_equal(log.warn[0], "no newline");
	assert_true(strlen(log.socket[0].name) <= IFNAMSIZ);
}

static void verdict_names_phase_sums_device_and_speed(void **state)
{
	struct smoke_result r = sample();
	struct smoke_log log;
	parse_file("socket-2.28.3-rank0.log", &log);
	struct smoke_expect x = { .ifname = "va", .min_busbw = 1.0 };
	snprintf(x.min_busbw_why, sizeof(x.min_busbw_why), "--min-busbw 1");
	np_error err = { 0 };
	assert_int_equal(smoke_judge(&r, &log, &x, &err), 0);

	x.min_busbw = 2.5; /* the figures, and where the threshold came from */
	assert_int_equal(smoke_judge(&r, &log, &x, &err), -1);
	assert_int_equal(err.status, NP_ESMOKE);
	assert_non_null(strstr(err.msg, "slow network: busbw 1.81 GB/s"));
	assert_non_null(strstr(err.msg, "at 64 MiB < 2.50 GB/s (--min-busbw 1)"));

	x.min_busbw = 0;
	struct smoke_result w = sample();
	w.sizes[0].wrong = 3;
	assert_int_equal(smoke_judge(&w, &log, &x, &err), -1);
	assert_non_null(strstr(err.msg, "wrong sums: 3 of 262144"));

	struct smoke_result f = sample();
	f.ok = false;
	f.phase = SMOKE_PHASE_INIT;
	snprintf(f.error, sizeof(f.error), "communicator init did not finish by the deadline");
	assert_int_equal(smoke_judge(&f, NULL, &x, &err), -1);
	assert_non_null(strstr(err.msg, "failed in init: communicator init"));

	struct smoke_result u = { .unavailable = SMOKE_NO_DRIVER };
	snprintf(u.error, sizeof(u.error), "no CUDA driver");
	assert_int_equal(smoke_judge(&u, NULL, &x, &err), -1);
	assert_non_null(strstr(err.msg, "cannot run here (no-driver)"));

	x.ifname = "vb"; /* NCCL used va */
	assert_int_equal(smoke_judge(&r, &log, &x, &err), -1);
	assert_non_null(strstr(err.msg, "not the agreed vb"));
}

static void default_threshold_follows_the_link(void **state)
{
	assert_true(smoke_default_min_busbw(-1) == 0);
	/* 100 Gb/s = 12.5 GB/s line rate; 5 % of it. */
	double t = smoke_default_min_busbw(100000);
	assert_true(t > 0.62 && t < 0.63);
}

static void companion_is_found_beside_nicpick_then_on_path(void **state)
{
	char out[512];
	np_error err = { 0 };
	assert_int_equal(smoke_find_companion("/nonexistent/nicpick-smoke", NULL, NULL, out,
					      sizeof(out), &err),
			 -1);
	assert_non_null(strstr(err.msg, "NICPICK_SMOKE_BIN=/nonexistent/nicpick-smoke"));
	assert_int_equal(smoke_find_companion(NULL, "/nonexistent/nicpick", "/nonexistent:/also-not",
					      out, sizeof(out), &err),
			 -1);
	assert_non_null(strstr(err.msg, "not found beside nicpick or on PATH"));
	/* /bin/true is executable: as an explicit path it is taken as is. */
	assert_int_equal(smoke_find_companion("/bin/true", NULL, NULL, out, sizeof(out), &err), 0);
	assert_string_equal(out, "/bin/true");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(versions_as_people_write_them),
		cmocka_unit_test(result_round_trips),
		cmocka_unit_test(result_reader_refuses_what_it_does_not_know),
		cmocka_unit_test(real_nccl_2_28_socket_log),
		cmocka_unit_test(the_decoy_bridge_is_named),
		cmocka_unit_test(roce_log_checks_hcas_and_oob),
		cmocka_unit_test(a_log_without_devices_is_not_a_pass),
		cmocka_unit_test(hostile_log_lines_do_not_break_the_parser),
		cmocka_unit_test(verdict_names_phase_sums_device_and_speed),
		cmocka_unit_test(default_threshold_follows_the_link),
		cmocka_unit_test(companion_is_found_beside_nicpick_then_on_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
