/* The `ip -d -j addr show` reader (--netlink-json), through the whole of
 * discovery over a fixture sysfs tree (tests/fixtures/roce-v2, or
 * $NICPICK_FUZZ_SYSFS), then ranking and the snapshot writer: interface
 * names and links come from the input, every fact behind them from sysfs. */
#include "fuzz.h"

#include <sys/mman.h>
#include <unistd.h>

#include "nic/nic.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	static const char *sysfs;
	if (fd < 0) {
		fd = memfd_create("ip.json", MFD_CLOEXEC);
		FUZZ_CHECK(fd >= 0, "memfd");
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		sysfs = getenv("NICPICK_FUZZ_SYSFS");
		if (!sysfs)
			sysfs = "tests/fixtures/roce-v2/sys";
	}
	FUZZ_CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size, "write");

	struct nic_source src = { .sysfs_root = sysfs, .netlink_json = path };
	struct nic_list l = { 0 };
	np_error err = { 0 };
	if (nic_discover(&src, &l, &err) < 0) {
		FUZZ_CHECK(err.msg[0] && !strchr(err.msg, '\n'), "'%s'", err.msg);
		nic_list_free(&l);
		return 0;
	}
	struct policy p;
	struct policy_ranking r = { 0 };
	policy_init(&p);
	FUZZ_CHECK(policy_rank(&p, &l, &r, &err) == 0, "%s", err.msg);
	for (size_t i = 0; i < r.n_usable; i++)
		FUZZ_CHECK(r.order[i] < l.n && r.v[r.order[i]].usable, "order %zu", i);
	json_t *j = nic_list_to_json(&l);
	FUZZ_CHECK(j, "nic_list_to_json");
	json_decref(j);
	policy_ranking_free(&r);
	nic_list_free(&l);
	return 0;
}
