/* lib/gpu, the smoke companion's module: what one rank runs and checks
 * (sizes, values, exact sums), and where it looks for NCCL and the CUDA
 * runtime that PyTorch wheels ship: python prefixes from $VIRTUAL_ENV,
 * $CONDA_PREFIX and PATH, then site-packages/nvidia/{nccl,cuda_runtime,cu13}/lib,
 * in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/gpu.h"

static char root[] = "/tmp/np-smoke-search-XXXXXX";

static void touch(const char *rel, mode_t mode)
{
	char path[1024], dir[1024];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		mkdir(dir, 0755);
		*p = '/';
	}
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	chmod(path, mode);
}

static int setup(void **state)
{
	if (!mkdtemp(root))
		return -1;
	/* a venv whose python3 links to a base interpreter elsewhere */
	touch("base/bin/python3.12", 0755);
	touch("venv/bin/.keep", 0644);
	char link[1024], target[1024];
	snprintf(link, sizeof(link), "%s/venv/bin/python3", root);
	snprintf(target, sizeof(target), "%s/base/bin/python3.12", root);
	assert_int_equal(symlink(target, link), 0);
	touch("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2", 0644);
	touch("venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2", 0644);
	touch("venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13", 0644);
	touch("conda/lib/python3.10/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12", 0644);
	touch("nopython/bin/.keep", 0644);
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void prefixes_come_from_venv_conda_and_path(void **state)
{
	char venv[512], conda[512], path[2048], buf[16][SMOKE_PATH_MAX];
	snprintf(venv, sizeof(venv), "%s/venv", root);
	snprintf(conda, sizeof(conda), "%s/conda", root);
	snprintf(path, sizeof(path), "%s/nopython/bin:%s/venv/bin:relative/bin", root, root);
	size_t n = gpu_python_prefixes(path, NULL, conda, buf, 16);
	assert_true(n >= 3);
	assert_string_equal(buf[0], conda);
	assert_string_equal(buf[1], venv); /* PATH's python3, its bin/.. */
	char base[512];
	snprintf(base, sizeof(base), "%s/base", root);
	assert_string_equal(buf[2], base); /* and the interpreter it links to */
	for (size_t i = 0; i < n; i++)
		assert_null(strstr(buf[i], "nopython")); /* no python3 there */
	/* VIRTUAL_ENV first, no duplicates. */
	n = gpu_python_prefixes(path, venv, NULL, buf, 16);
	assert_string_equal(buf[0], venv);
	for (size_t i = 1; i < n; i++)
		assert_string_not_equal(buf[i], venv);
	assert_string_equal(buf[n - 1], "/opt/conda");
}

static void wheel_libraries_are_found_newest_first(void **state)
{
	char venv[512], conda[512], out[8][SMOKE_PATH_MAX], want[1024];
	snprintf(venv, sizeof(venv), "%s/venv", root);
	snprintf(conda, sizeof(conda), "%s/conda", root);
	const char *prefixes[] = { venv, conda, NULL };
	size_t n = gpu_wheel_paths(prefixes, true, out, 8);
	assert_int_equal(n, 2);
	snprintf(want, sizeof(want), "%s/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2", venv);
	assert_string_equal(out[0], want);
	n = gpu_wheel_paths(prefixes, false, out, 8);
	assert_int_equal(n, 2);
	snprintf(want, sizeof(want), "%s/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13", venv);
	assert_string_equal(out[0], want); /* the CUDA 13 wheels' layout */
	snprintf(want, sizeof(want),
		 "%s/lib/python3.10/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12", conda);
	assert_string_equal(out[1], want);
	const char *none[] = { "/nonexistent", NULL };
	assert_int_equal(gpu_wheel_paths(none, true, out, 8), 0);
}

static void an_explicit_path_that_is_no_library_names_it(void **state)
{
	struct gpu_search s = { .cudart_lib = "/etc/hostname" };
	struct gpu_libs l;
	struct smoke_result r = { 0 };
	np_error err = { 0 };
	assert_int_equal(gpu_libs_load(&s, &l, &r, &err), -1);
	assert_int_equal(err.status, NP_ESMOKE);
	assert_int_equal(r.unavailable, SMOKE_NO_CUDART);
	assert_non_null(strstr(err.msg, "no usable CUDA runtime: /etc/hostname ("));
	assert_null(strstr(err.msg, "set NICPICK_CUDART_LIB")); /* it was set */
}

static void sizes_end_at_the_bound(void **state)
{
	long s[SMOKE_SIZES_MAX];
	size_t n = gpu_plan_sizes(64L << 20, s);
	assert_int_equal(n, 3);
	assert_int_equal(s[0], 1L << 20);
	assert_int_equal(s[1], 8L << 20);
	assert_int_equal(s[2], 64L << 20);
	n = gpu_plan_sizes(65536, s);
	assert_int_equal(n, 1);
	assert_int_equal(s[0], 65536);
	n = gpu_plan_sizes(10, s); /* below the minimum: the minimum */
	assert_int_equal(n, 1);
	assert_int_equal(s[0], SMOKE_MIN_BYTES);
	n = gpu_plan_sizes(1L << 34, s);
	assert_true(n <= SMOKE_SIZES_MAX);
	assert_int_equal(s[n - 1], 1L << 34);
}

static void expected_sums_are_exact_in_float(void **state)
{
	/* The sum over ranks of each rank's value, computed in float the way
	 * a reduction would, equals the expected value exactly. */
	int worlds[] = { 1, 2, 3, 7, 8, 9, 64, 1000, 100000 };
	for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++) {
		for (size_t i = 0; i < 16; i++) {
			float sum = 0;
			for (int r = 0; r < worlds[w]; r++)
				sum += gpu_input_value(r, i);
			assert_true(sum == gpu_expected_sum(worlds[w], i));
		}
	}
	/* Different elements differ, so a shifted or truncated buffer is caught. */
	assert_true(gpu_expected_sum(2, 0) != gpu_expected_sum(2, 1));
}

static void busbw_factor_is_nccl_tests(void **state)
{
	assert_true(gpu_busbw_factor(1) == 1.0);
	assert_true(gpu_busbw_factor(2) == 1.0);
	assert_true(gpu_busbw_factor(4) == 1.5);
	assert_true(gpu_busbw_factor(8) == 1.75);
}

/* Four GPUs as NVML lists them (not in PCI order: NVML promises none):
 * PCI order is devs[2] (0x1a), devs[0] (0x2a), devs[3] (0x3a), devs[1] (0x4a). */
static struct gpu_nvml_dev four[4] = {
	{ .bus = 0x2a, .name = "NVIDIA H200", .uuid = "GPU-2a000000-1111" },
	{ .bus = 0x4a, .name = "NVIDIA H200", .uuid = "GPU-4a000000-2222" },
	{ .bus = 0x1a, .name = "NVIDIA H200", .uuid = "GPU-1a000000-3333" },
	{ .bus = 0x3a, .name = "NVIDIA H200", .uuid = "GPU-3aff0000-4444" },
};

static void visible_devices_map_as_the_runtime_enumerates(void **state)
{
	size_t m[GPU_NVML_MAX];
	/* unset: every GPU, in PCI bus order (same models: FASTEST_FIRST too) */
	assert_int_equal(gpu_visible_map(NULL, NULL, four, 4, m), 4);
	assert_int_equal(m[0], 2);
	assert_int_equal(m[1], 0);
	assert_int_equal(m[2], 3);
	assert_int_equal(m[3], 1);
	assert_int_equal(gpu_visible_map(NULL, "PCI_BUS_ID", four, 4, m), 4);
	assert_int_equal(m[0], 2);
	assert_int_equal(gpu_visible_map(NULL, "FASTEST_FIRST", four, 4, m), 4);
	/* indices: the runtime's ordinals, in the order given */
	assert_int_equal(gpu_visible_map("3,0", NULL, four, 4, m), 2);
	assert_int_equal(m[0], 1);
	assert_int_equal(m[1], 2);
	/* UUIDs, whole or a unique prefix, mixed with indices */
	assert_int_equal(gpu_visible_map("GPU-3aff,GPU-2a000000-1111,0", NULL, four, 4, m), 3);
	assert_int_equal(m[0], 3);
	assert_int_equal(m[1], 0);
	assert_int_equal(m[2], 2);
	/* one GPU, the plain Kubernetes case */
	assert_int_equal(gpu_visible_map(NULL, NULL, four, 1, m), 1);
	assert_int_equal(m[0], 0);
}

static void visible_devices_in_doubt_are_left_to_the_runtime(void **state)
{
	size_t m[GPU_NVML_MAX];
	static const char *const doubt[] = {
		"",            /* no GPU: the runtime says so in its words */
		"4",           /* out of range: the list ends there */
		"0,-1,1",      /* an invalid entry ends the list */
		"1,1",         /* repeated */
		"01",          /* leading zero */
		" 0",          /* blank */
		"0,",          /* empty entry */
		"GPU-",        /* a bare prefix */
		"GPU-2a",      /* ambiguous: both GPUs' UUIDs start so */
		"GPU-9",       /* unknown */
		"MIG-GPU-2a000000-1111/1/0",
		"gpu-2a000000-1111",
		NULL,
	};
	struct gpu_nvml_dev two[2] = {
		{ .bus = 0x1a, .name = "NVIDIA H200", .uuid = "GPU-2a000000-1111" },
		{ .bus = 0x2a, .name = "NVIDIA H200", .uuid = "GPU-2a000000-2222" },
	};
	for (size_t i = 0; doubt[i]; i++) {
		if (gpu_visible_map(doubt[i], NULL, two, 2, m) != -1)
			fail_msg("CUDA_VISIBLE_DEVICES='%s' was mapped", doubt[i]);
	}
	/* mixed models: FASTEST_FIRST ranks them by a heuristic of its own */
	struct gpu_nvml_dev mixed[2] = {
		{ .bus = 0x1a, .name = "NVIDIA L4" },
		{ .bus = 0x2a, .name = "NVIDIA H200" },
	};
	assert_int_equal(gpu_visible_map(NULL, NULL, mixed, 2, m), -1);
	assert_int_equal(gpu_visible_map("1", "FASTEST_FIRST", mixed, 2, m), -1);
	assert_int_equal(gpu_visible_map("1", "PCI_BUS_ID", mixed, 2, m), 1);
	assert_int_equal(m[0], 1);
	assert_int_equal(gpu_visible_map(NULL, "SLOWEST_FIRST", four, 4, m), -1);
	assert_int_equal(gpu_visible_map(NULL, NULL, four, 0, m), -1);
	assert_true(gpu_visible_by_uuid("0,GPU-2a"));
	assert_false(gpu_visible_by_uuid("0,1"));
	assert_false(gpu_visible_by_uuid(NULL));
}

/* /proc/driver/nvidia/gpus/0000:00:06.0/information as an H200 wrote it
 * (driver 580.159.04, open kernel module; nv-procfs.c
 * nv_procfs_read_gpu_info), byte for byte. */
static const char h200_info[] =
	"Model: \t\t NVIDIA H200\n"
	"IRQ:   \t\t 41\n"
	"GPU UUID: \t GPU-1e0cbfb9-dcd4-f6e0-af00-7c26f4df2310\n"
	"Video BIOS: \t 96.00.a5.00.1a\n"
	"Bus Type: \t PCIe\n"
	"DMA Size: \t 52 bits\n"
	"DMA Mask: \t 0xfffffffffffff\n"
	"Bus Location: \t 0000:00:06.0\n"
	"Device Minor: \t 0\n"
	"GPU Firmware: \t 580.159.04\n"
	"GPU Excluded:\t No\n";

static void procfs_information_reads_as_the_driver_writes_it(void **state)
{
	struct gpu_procfs_gpu g;
	assert_int_equal(gpu_procfs_parse(h200_info, &g), 0);
	assert_string_equal(g.dev.name, "NVIDIA H200");
	assert_string_equal(g.dev.uuid, "GPU-1e0cbfb9-dcd4-f6e0-af00-7c26f4df2310");
	assert_string_equal(g.dev.bus_id, "0000:00:06.0");
	assert_int_equal(g.dev.bus, 0);
	assert_int_equal(g.dev.device, 6);
	assert_int_equal(g.minor, 0);
	assert_false(g.excluded);
	/* The driver prints the bus in lower case; NVML and the runtime in
	 * upper case ("%04X:%02X:%02X.0"), which the result carries. */
	char text[sizeof(h200_info) + 64];
	snprintf(text, sizeof(text), "Model: \t\t NVIDIA H100 80GB HBM3\nBus Location: \t 0001:1a:1f.0\n"
				     "Device Minor: \t 7\nGPU Excluded:\t Yes\n");
	assert_int_equal(gpu_procfs_parse(text, &g), 0);
	assert_string_equal(g.dev.name, "NVIDIA H100 80GB HBM3");
	assert_string_equal(g.dev.bus_id, "0001:1A:1F.0");
	assert_string_equal(g.dev.uuid, "");
	assert_int_equal(g.dev.domain, 1);
	assert_int_equal(g.minor, 7);
	assert_true(g.excluded);
	/* a function other than 0 parses; procfs.c leaves that GPU to NVML */
	snprintf(text, sizeof(text), "Model: \t\t X\nBus Location: \t 0000:1a:00.1\nDevice Minor: \t 1\n");
	assert_int_equal(gpu_procfs_parse(text, &g), 0);
	assert_int_equal(g.function, 1);
}

static void procfs_information_out_of_format_is_refused(void **state)
{
	static const char *const bad[] = {
		"", /* nothing */
		"Bus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\n", /* no model */
		"Model: \t\t A\nModel: \t\t B\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\n",
		"Model: \t\t \nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\n", /* empty */
		"Model: \t\t A\nDevice Minor: \t 0\n",                            /* no bus */
		"Model: \t\t A\nBus Location: \t 1a:00.0\nDevice Minor: \t 0\n",
		"Model: \t\t A\nBus Location: \t 0000:1g:00.0\nDevice Minor: \t 0\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0 x\nDevice Minor: \t 0\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0.0\nDevice Minor: \t 0\n",
		"Model: \t\t A\nBus Location: \t 10000:1a:00.0\nDevice Minor: \t 0\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:20.0\nDevice Minor: \t 0\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.8\nDevice Minor: \t 0\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\n", /* no minor */
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t -1\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 255\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 1x\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\nGPU UUID: \t MIG-1\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\nGPU Excluded:\t Maybe\n",
		/* optional fields repeated or empty are refused, not taken as absent */
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\nGPU UUID: \t GPU-1\n"
		"GPU UUID: \t GPU-2\n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\nGPU UUID: \t \n",
		"Model: \t\t A\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\nGPU Excluded:\t No\n"
		"GPU Excluded:\t Yes\n",
		NULL,
	};
	struct gpu_procfs_gpu g;
	for (size_t i = 0; bad[i]; i++)
		if (gpu_procfs_parse(bad[i], &g) != -1)
			fail_msg("read: '%s'", bad[i]);
	/* a model longer than NVML's name buffer does not fit */
	char text[512];
	snprintf(text, sizeof(text),
		 "Model: \t\t %0120d\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 0\n", 1);
	assert_int_equal(gpu_procfs_parse(text, &g), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sizes_end_at_the_bound),
		cmocka_unit_test(expected_sums_are_exact_in_float),
		cmocka_unit_test(busbw_factor_is_nccl_tests),
		cmocka_unit_test(prefixes_come_from_venv_conda_and_path),
		cmocka_unit_test(wheel_libraries_are_found_newest_first),
		cmocka_unit_test(an_explicit_path_that_is_no_library_names_it),
		cmocka_unit_test(visible_devices_map_as_the_runtime_enumerates),
		cmocka_unit_test(visible_devices_in_doubt_are_left_to_the_runtime),
		cmocka_unit_test(procfs_information_reads_as_the_driver_writes_it),
		cmocka_unit_test(procfs_information_out_of_format_is_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
