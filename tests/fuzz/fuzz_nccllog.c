/* NCCL's own log, as the smoke test reads it: any bytes (a log is written by
 * a library in the training image, and NCCL_DEBUG_FILE may be shared), no
 * crash, every field terminated, bounded and free of control bytes (names
 * keep bytes above 0x7f: Linux allows them), and a verdict that is a pass,
 * "not proven" or one line with exit 6, under either bootstrap rule, with
 * one interface or rails. */
#include "fuzz.h"

#include "smoke/smoke.h"

static void printable(const char *s, size_t max, const char *what)
{
	size_t n = strnlen(s, max);
	FUZZ_CHECK(n < max, "%s is not terminated", what);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK((unsigned char)s[i] >= 0x20 && s[i] != 0x7f, "%s has byte 0x%02x", what,
			   (unsigned char)s[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct smoke_log log;
	memset(&log, 0, sizeof(log));
	smoke_log_parse((const char *)data, size, &log);
	FUZZ_CHECK(log.n_socket <= SMOKE_LOG_IFS_MAX && log.n_ib <= SMOKE_LOG_IFS_MAX, "%zu/%zu",
		   log.n_socket, log.n_ib);
	FUZZ_CHECK(log.n_warn <= SMOKE_LOG_LINES_KEEP, "%zu warnings", log.n_warn);
	for (size_t i = 0; i < log.n_socket; i++) {
		printable(log.socket[i].name, sizeof(log.socket[i].name), "socket name");
		printable(log.socket[i].addr, sizeof(log.socket[i].addr), "socket addr");
	}
	for (size_t i = 0; i < log.n_ib; i++)
		printable(log.ib[i].name, sizeof(log.ib[i].name), "ib name");
	for (size_t i = 0; i < log.n_warn; i++)
		printable(log.warn[i], sizeof(log.warn[i]), "warning");
	printable(log.version, sizeof(log.version), "version");
	printable(log.network, sizeof(log.network), "network");
	printable(log.bootstrap.name, sizeof(log.bootstrap.name), "bootstrap");
	printable(log.bootstrap.addr, sizeof(log.bootstrap.addr), "bootstrap addr");
	printable(log.boot_dev.name, sizeof(log.boot_dev.name), "bootstrap device");
	printable(log.oob.name, sizeof(log.oob.name), "oob");
	printable(log.ib_absent, sizeof(log.ib_absent), "ib absent");
	printable(log.channel_net, sizeof(log.channel_net), "channel");
	static const char *const one[] = { "eth1" }, *const rails[] = { "eth1", "eth2" };
	struct smoke_log_want w = {
		.ifs = size % 3 ? one : rails,
		.n_ifs = size % 3 ? 1 : 2,
		.hca = size % 2 ? "mlx5_0:1,mlx5_1" : NULL,
		.boot = size % 5 ? SMOKE_BOOT_SUBNET : SMOKE_BOOT_IFNAME,
		.world = size % 7 ? 2 : 1,
	};
	np_error err = { 0 };
	int r = smoke_log_check(&log, &w, &err);
	FUZZ_CHECK(r == 0 || ((r == -1 || r == 1) && err.status == NP_ESMOKE), "check returned %d/%d",
		   r, err.status);
	FUZZ_CHECK(r != 1 || strncmp(err.msg, "not proven: ", 12) == 0, "not proven says: %s", err.msg);
	FUZZ_CHECK(r == 0 || !strchr(err.msg, '\n'), "two-line verdict: %s", err.msg);
	return 0;
}
