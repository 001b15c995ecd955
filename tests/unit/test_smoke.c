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

/* The log check with the agreed interfaces as "eth1,eth2" (rails), the
 * HCAs (NULL: sockets), the bootstrap rule and the number of ranks. */
static int check_as(const struct smoke_log *log, const char *ifs, const char *hca,
		    enum smoke_boot_rule boot, int world, np_error *err)
{
	static char buf[256];
	static const char *v[SMOKE_LOG_IFS_MAX];
	size_t n = 0;
	snprintf(buf, sizeof(buf), "%s", ifs);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < SMOKE_LOG_IFS_MAX;
	     t = strtok_r(NULL, ",", &save))
		v[n++] = t;
	struct smoke_log_want w = { .ifs = v, .n_ifs = n, .hca = hca, .boot = boot, .world = world };
	memset(err, 0, sizeof(*err));
	int r = smoke_log_check(log, &w, err);
	if (r != 0)
		assert_int_equal(err->status, NP_ESMOKE);
	return r;
}

/* As training runs it (no NCCL_COMM_ID) and with two ranks. */
static int check(const struct smoke_log *log, const char *ifs, const char *hca, np_error *err)
{
	return check_as(log, ifs, hca, SMOKE_BOOT_IFNAME, 2, err);
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
		{ "\"v\":2", "\"v\":3", "version 3" },
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
	assert_true(log.has_bootstrap); /* "Bootstrap: Using" (2.24+ spelling) */
	assert_string_equal(log.bootstrap.name, "va");
	assert_string_equal(log.channel_net, "Socket");
	assert_int_equal(log.n_channels, 4);
	assert_false(log.channel_mixed);
	assert_true(log.init_complete);
	np_error err = { 0 };
	assert_int_equal(check(&log, "va", NULL, &err), 0);
	/* The other rank's file names its own interface. */
	parse_file("socket-2.28.3-rank1.log", &log);
	assert_string_equal(log.socket[0].name, "vb");
	assert_int_equal(check(&log, "vb", NULL, &err), 0);
	assert_int_equal(check(&log, "va", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "not the agreed va"));
}

static void the_decoy_bridge_is_named(void **state)
{
	struct smoke_log log;
	parse_file("decoy-cni0.log", &log);
	assert_true(log.has_bootstrap); /* "Bootstrap : Using" (before 2.24) */
	assert_string_equal(log.bootstrap.name, "cni0");
	assert_int_equal(log.n_socket, 3);
	assert_string_equal(log.socket[2].name, "vc1");
	assert_string_equal(log.socket[2].addr, "fe80::4c5e:1ff:fe2a:9b10%vc1");
	assert_int_equal(log.n_warn, 1);
	assert_non_null(strstr(log.warn[0], "Connect to 10.244.0.1"));
	assert_false(log.init_complete);
	np_error err = { 0 };
	assert_int_equal(check(&log, "va", NULL, &err), -1);
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
	assert_int_equal(check(&log, "eth1", "mlx5_0:1,mlx5_1:1", &err), 0);
	assert_int_equal(check(&log, "eth1", "mlx5_0:1", &err), -1);
	assert_non_null(strstr(err.msg, "mlx5_1:1"));
	assert_int_equal(check(&log, "eth1", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "NET/IB"));
	assert_int_equal(check(&log, "eth0", "mlx5_0:1,mlx5_1:1", &err), -1);
}

static void a_log_without_devices_is_not_a_pass(void **state)
{
	struct smoke_log log = { 0 };
	const char *text = "h:1:1 [0] NCCL INFO NCCL version 2.28.3+cuda13.0\n";
	smoke_log_parse(text, strlen(text), &log);
	np_error err = { 0 };
	assert_int_equal(check(&log, "va", NULL, &err), -1);
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
	/* A NUL byte inside a device list ends no loop (a fuzzer's find). */
	static const char nul[] = "x [0] NCCL INFO NET/IB : Usingg [0]a\0b:1/IB [1]={[0] c\0d:1/IB,\0 }\n";
	struct smoke_log l2 = { 0 };
	smoke_log_parse(nul, sizeof(nul) - 1, &l2);
	assert_int_equal(l2.n_ib, 2);
	assert_string_equal(l2.ib[0].name, "a?b:1");
	assert_string_equal(l2.ib[1].name, "c?d:1");
	/* Bounded by its field, so never equal to a real (shorter) name. */
	assert_true(strlen(log.socket[0].name) < sizeof(log.socket[0].name));
	np_error err;
	assert_int_equal(check(&log, "averyveryverylo", NULL, &err), -1);
}

static void a_run_that_fell_back_to_sockets_is_named_with_nccls_line(void **state)
{
	struct {
		const char *file, *quote;
	} cases[] = {
		{ "ib-absent-2.18.6.log", "\"Failed to open libibverbs.so[.1]\"" },
		{ "ib-nodev-2.21.5.log", "\"NET/IB : No device found.\"" },
		{ "ib-fallback-2.28.3.log", "\"NET/IB : No device found.\"" },
	};
	np_error err;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct smoke_log log;
		parse_file(cases[i].file, &log);
		assert_int_equal(check(&log, "eth1", "mlx5_0:1,mlx5_1:1", &err), -1);
		if (!strstr(err.msg, "fell back to sockets") || !strstr(err.msg, cases[i].quote))
			fail_msg("%s: %s", cases[i].file, err.msg);
		/* The same run is right when nicpick chose sockets. */
		assert_int_equal(check(&log, "eth1", NULL, &err), 0);
	}
	/* 2.28 gives up the IB plugin in its own words too. */
	struct smoke_log log = { 0 };
	const char *t = "h:1:1 [0] NCCL INFO Failed to initialize NET plugin IB\n"
			"h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth1:10.1.0.11<0>\n"
			"h:1:1 [0] NCCL INFO Using network Socket\n"
			"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n";
	smoke_log_parse(t, strlen(t), &log);
	assert_int_equal(check(&log, "eth1", "mlx5_0:1", &err), -1);
	assert_non_null(strstr(err.msg, "\"Failed to initialize NET plugin IB\""));
	/* With no line that says why, the verdict still names the fallback. */
	memset(&log, 0, sizeof(log));
	t = "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth1:10.1.0.11<0>\n"
	    "h:1:1 [0] NCCL INFO Using network Socket\n";
	smoke_log_parse(t, strlen(t), &log);
	assert_int_equal(check(&log, "eth1", "mlx5_0:1", &err), -1);
	assert_non_null(strstr(err.msg, "NCCL used sockets although nicpick chose the HCAs mlx5_0:1"));
}

static void no_channel_over_the_network_is_not_proven(void **state)
{
	struct smoke_log log;
	np_error err;
	parse_file("p2p-only-2.26.2.log", &log);
	assert_int_equal(log.n_channels, 0);
	assert_int_equal(log.n_local, 3);
	assert_int_equal(check(&log, "eth1", NULL, &err), 1);
	assert_non_null(strstr(err.msg, "not proven: no channel ran over the network (3 via"));
	/* One rank alone has no network to prove. */
	assert_int_equal(check_as(&log, "eth1", NULL, SMOKE_BOOT_IFNAME, 1, &err), 0);
	/* A device list that is wrong is still wrong. */
	assert_int_equal(check(&log, "eth2", NULL, &err), -1);

	/* The verdict: a warning under auto, exit 6 under required. */
	struct smoke_result r = sample();
	const char *eth1[] = { "eth1" };
	struct smoke_expect x = { .ifs = eth1, .n_ifs = 1 };
	memset(&err, 0, sizeof(err));
	assert_int_equal(smoke_judge(&r, &log, &x, &err), 1);
	assert_non_null(strstr(err.msg, "not proven:"));
	x.required = true;
	assert_int_equal(smoke_judge(&r, &log, &x, &err), -1);
	assert_int_equal(err.status, NP_ESMOKE);
	assert_non_null(strstr(err.msg, "--smoke required: not proven:"));
	/* A bandwidth failure outranks the missing proof. */
	x.required = false;
	x.min_busbw = 100;
	assert_int_equal(smoke_judge(&r, &log, &x, &err), -1);
	assert_non_null(strstr(err.msg, "slow network"));
}

static void the_bootstrap_is_judged_by_the_rule_that_picked_it(void **state)
{
	struct smoke_log log;
	np_error err;
	/* 2.18.6 with NCCL_COMM_ID: eth0 shares rank 0's subnet and comes
	 * first, so the bootstrap took it while the data used eth1. */
	parse_file("socket-subnet-2.18.6.log", &log);
	assert_string_equal(log.bootstrap.name, "eth0");
	assert_int_equal(check_as(&log, "eth1", NULL, SMOKE_BOOT_SUBNET, 2, &err), 0);
	/* Training's rule (no NCCL_COMM_ID): the bootstrap follows
	 * NCCL_SOCKET_IFNAME, so another interface is a failure. */
	assert_int_equal(check_as(&log, "eth1", NULL, SMOKE_BOOT_IFNAME, 2, &err), -1);
	assert_non_null(strstr(err.msg, "NCCL bootstrapped on eth0:10.1.7.5, not the agreed eth1"));
	/* The subnet rule does not excuse the data path. */
	assert_int_equal(check_as(&log, "eth2", NULL, SMOKE_BOOT_SUBNET, 2, &err), -1);
	assert_non_null(strstr(err.msg, "NCCL used NET/Socket on eth1:10.1.0.11, not the agreed eth2"));
	/* The decoy bridge under the subnet rule: named by the socket list. */
	parse_file("decoy-cni0.log", &log);
	assert_int_equal(check_as(&log, "va", NULL, SMOKE_BOOT_SUBNET, 2, &err), -1);
	assert_non_null(strstr(err.msg, "NET/Socket on cni0:10.244.0.1"));
}

static void net_plugins_are_recognised_by_family(void **state)
{
	assert_int_equal(smoke_net_family("IB"), SMOKE_NET_IB);
	assert_int_equal(smoke_net_family("IBext"), SMOKE_NET_IB);
	assert_int_equal(smoke_net_family("IBext_v8"), SMOKE_NET_IB);
	assert_int_equal(smoke_net_family("Socket"), SMOKE_NET_SOCKET);
	assert_int_equal(smoke_net_family("AWS Libfabric"), SMOKE_NET_OFI);
	assert_int_equal(smoke_net_family("Libfabric"), SMOKE_NET_OFI);
	assert_int_equal(smoke_net_family("GCP TCPX"), SMOKE_NET_OTHER);
	assert_int_equal(smoke_net_family(""), SMOKE_NET_NONE);

	struct smoke_log log;
	np_error err;
	/* HPC-X: IBext_v8, its device line with " ; OOB" and /SHARP entries. */
	parse_file("ibext-2.23.4.log", &log);
	assert_string_equal(log.network, "IBext_v8");
	assert_string_equal(log.channel_net, "IBext_v8");
	assert_int_equal(log.n_ib, 2);
	assert_string_equal(log.ib[0].name, "mlx5_0:1");
	assert_string_equal(log.ib[1].name, "mlx5_3:1");
	assert_string_equal(log.oob.name, "ib0");
	assert_int_equal(check(&log, "ib0", "mlx5_0:1,mlx5_3:1", &err), 0);
	assert_int_equal(check(&log, "ib0", "mlx5_0,mlx5_3", &err), 0); /* no port: any */
	assert_int_equal(check(&log, "ib0", "mlx5_0:1", &err), -1);
	assert_non_null(strstr(err.msg, "NET/IB device mlx5_3:1, not one of the agreed mlx5_0:1"));
	assert_int_equal(check(&log, "ib0", "mlx5_0:1,mlx5_3:1,mlx5_4:1", &err), -1);
	assert_non_null(strstr(err.msg, "leaves out the agreed HCA mlx5_4:1"));
	assert_int_equal(check(&log, "ib0", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "although nicpick chose sockets"));

	/* aws-ofi-nccl: the name holds a blank; its devices are libfabric's. */
	parse_file("ofi-2.26.2.log", &log);
	assert_string_equal(log.network, "AWS Libfabric");
	assert_string_equal(log.channel_net, "AWS Libfabric");
	assert_false(log.channel_mixed);
	assert_int_equal(log.n_channels, 2);
	assert_int_equal(check_as(&log, "ens5", NULL, SMOKE_BOOT_SUBNET, 2, &err), 1);
	assert_non_null(strstr(err.msg, "not proven: NCCL's channels run via NET/AWS Libfabric (libfabric)"));
	/* ... but the bootstrap line it shares with NCCL is still checked. */
	assert_int_equal(check(&log, "eth1", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "bootstrapped on ens5:10.0.0.11"));

	/* A bootstrap over a net device (NCCL_OOB_NET_ENABLE) is a device of
	 * the net, not an interface: the socket bootstrap line stays. */
	parse_file("boot-net-2.26.2.log", &log);
	assert_true(log.has_boot_dev);
	assert_string_equal(log.boot_dev.name, "mlx5_1:1");
	assert_string_equal(log.bootstrap.name, "eth1");
	assert_int_equal(check(&log, "eth1", "mlx5_0:1,mlx5_1:1", &err), 0);
	memset(&log, 0, sizeof(log));
	const char *t = "h:1:1 [0] NCCL INFO Bootstrap: Using mlx5_1:1\n";
	smoke_log_parse(t, strlen(t), &log);
	assert_false(log.has_bootstrap);
	assert_true(log.has_boot_dev);
}

static void merged_ib_devices_are_read_one_by_one(void **state)
{
	struct smoke_log log;
	np_error err;
	parse_file("ib-merged-2.21.5.log", &log);
	assert_true(log.ib_merged);
	assert_int_equal(log.n_ib, 2);
	assert_string_equal(log.ib[0].name, "mlx5_0:1");
	assert_string_equal(log.ib[1].name, "mlx5_1:1");
	assert_string_equal(log.oob.name, "eth1");
	assert_string_equal(log.oob.addr, "10.1.0.11");
	assert_int_equal(check(&log, "eth1", "mlx5_0:1,mlx5_1:1", &err), 0);
	assert_int_equal(check(&log, "eth1", "mlx5_0:1", &err), -1);
	assert_non_null(strstr(err.msg, "mlx5_1:1"));
	/* Two merged groups and a lone device on one line. */
	memset(&log, 0, sizeof(log));
	const char *t = "h:1:1 [0] NCCL INFO NET/IB : Using [0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB} "
			"[1]={[2] mlx5_2:1/RoCE, [3] mlx5_3:1/RoCE} [2]mlx5_4:1/IB ; OOB eth1:10.1.0.11<0>\n";
	smoke_log_parse(t, strlen(t), &log);
	assert_int_equal(log.n_ib, 5);
	assert_string_equal(log.ib[2].name, "mlx5_2:1");
	assert_string_equal(log.ib[4].name, "mlx5_4:1");
	assert_string_equal(log.oob.name, "eth1");
}

static void rails_need_every_agreed_interface_and_no_other(void **state)
{
	struct smoke_log log;
	np_error err;
	parse_file("rails-2.28.3.log", &log);
	assert_int_equal(log.n_socket, 2);
	assert_string_equal(log.socket[1].name, "eth2");
	assert_string_equal(log.socket[1].addr, "10.1.0.1");
	assert_int_equal(check(&log, "eth1,eth2", NULL, &err), 0);
	assert_int_equal(check(&log, "eth2,eth1", NULL, &err), 0);
	assert_int_equal(check(&log, "eth1", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "NET/Socket on eth2:10.1.0.1, not the agreed eth1"));
	assert_int_equal(check(&log, "eth1,eth2,eth3", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "leaves out the agreed eth3"));
}

static void names_keep_their_bytes(void **state)
{
	struct smoke_log log;
	np_error err;
	parse_file("names-2.28.3.log", &log);
	assert_int_equal(log.n_socket, 2);
	assert_string_equal(log.socket[0].name, "r\xc3\xa9seau;1");
	assert_string_equal(log.socket[1].name, "eth;2");
	assert_string_equal(log.socket[1].addr, "10.1.0.1");
	assert_string_equal(log.bootstrap.name, "r\xc3\xa9seau;1");
	assert_int_equal(check(&log, "r\xc3\xa9seau;1,eth;2", NULL, &err), 0);
	assert_int_equal(check(&log, "r\xc3\xa9seau;1", NULL, &err), -1);
	assert_non_null(strstr(err.msg, "eth;2"));
}

static void verdict_names_phase_sums_device_and_speed(void **state)
{
	struct smoke_result r = sample();
	struct smoke_log log;
	parse_file("socket-2.28.3-rank0.log", &log);
	const char *va[] = { "va" }, *vb[] = { "vb" };
	struct smoke_expect x = { .ifs = va, .n_ifs = 1, .min_busbw = 1.0 };
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

	x.ifs = vb; /* NCCL used va */
	assert_int_equal(smoke_judge(&r, &log, &x, &err), -1);
	assert_non_null(strstr(err.msg, "not the agreed vb"));
}

/* Rails: NCCL 2.28's net_socket.cc prints one device per interface of
 * NCCL_SOCKET_IFNAME ("NET/Socket : Using [0]eth2:... [1]eth1:..."). */
static void verdict_with_rails_wants_every_rail_in_use(void **state)
{
	struct smoke_result r = sample();
	struct smoke_log log = { 0 };
	const char *both = "h:1:1 [0] NCCL INFO Bootstrap: Using eth2:10.10.0.1<0>\n"
			   "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth2:10.10.0.1<0> [1]eth1:10.9.0.1<0>\n"
			   "h:1:1 [0] NCCL INFO Using network Socket\n"
			   "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
			   "h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/1\n";
	smoke_log_parse(both, strlen(both), &log);
	const char *rails[] = { "eth2", "eth1" }, *three[] = { "eth2", "eth1", "eth3" },
		   *other[] = { "eth2", "eth11" };
	struct smoke_expect x = { .ifs = rails, .n_ifs = 2, .boot = SMOKE_BOOT_IFNAME };
	np_error err = { 0 };
	assert_int_equal(smoke_judge(&r, &log, &x, &err), 0);
	x.ifs = three; /* a rail NCCL did not use */
	x.n_ifs = 3;
	assert_int_equal(smoke_judge(&r, &log, &x, &err), -1);
	assert_non_null(strstr(err.msg, "eth3"));
	x.ifs = other; /* eth1 is not one of them */
	x.n_ifs = 2;
	assert_int_equal(smoke_judge(&r, &log, &x, &err), -1);
	assert_non_null(strstr(err.msg, "eth1"));
	struct smoke_log one = { 0 };
	const char *single = "h:1:1 [0] NCCL INFO Bootstrap: Using eth2:10.10.0.1<0>\n"
			     "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth2:10.10.0.1<0>\n";
	smoke_log_parse(single, strlen(single), &one);
	x.ifs = rails;
	assert_int_equal(smoke_judge(&r, &one, &x, &err), -1);
	assert_non_null(strstr(err.msg, "eth1"));
	struct smoke_log boot = { 0 };
	const char *wrong_boot = "h:1:1 [0] NCCL INFO Bootstrap: Using eth0:192.168.1.1<0>\n"
				 "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth2:10.10.0.1<0> [1]eth1:10.9.0.1<0>\n"
				 "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n";
	smoke_log_parse(wrong_boot, strlen(wrong_boot), &boot);
	assert_int_equal(smoke_judge(&r, &boot, &x, &err), -1);
	assert_non_null(strstr(err.msg, "eth0"));
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
		cmocka_unit_test(a_run_that_fell_back_to_sockets_is_named_with_nccls_line),
		cmocka_unit_test(no_channel_over_the_network_is_not_proven),
		cmocka_unit_test(the_bootstrap_is_judged_by_the_rule_that_picked_it),
		cmocka_unit_test(net_plugins_are_recognised_by_family),
		cmocka_unit_test(merged_ib_devices_are_read_one_by_one),
		cmocka_unit_test(rails_need_every_agreed_interface_and_no_other),
		cmocka_unit_test(names_keep_their_bytes),
		cmocka_unit_test(verdict_names_phase_sums_device_and_speed),
		cmocka_unit_test(verdict_with_rails_wants_every_rail_in_use),
		cmocka_unit_test(default_threshold_follows_the_link),
		cmocka_unit_test(companion_is_found_beside_nicpick_then_on_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
