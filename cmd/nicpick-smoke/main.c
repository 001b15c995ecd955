/* nicpick-smoke: one rank of nicpick's smoke all-reduce.  nicpick runs it
 * (lib/smoke/spawn.c); it prints one result message on standard output and
 * nothing else there.
 *
 *   nicpick-smoke info [--gpu N] [--parent PID]
 *   nicpick-smoke run --rank R --world N --bytes B --timeout-ms T [--gpu N] [--parent PID]
 *                     [--label TEXT]   (this rank's pod, node and address, for the link verdict)
 *                     [--no-links]     (busbw only: no ring link timing, for --tune's runs)
 *
 * NCCL_COMM_ID and the NCCL variables come from the environment; info reads
 * NICPICK_DRIVER_ROOT (where the driver's /proc and /dev are, default /),
 * NICPICK_CUDA_LIB (the driver's library, default libcuda.so.1),
 * NICPICK_NVML_LIB (where NVML is, default libnvidia-ml.so.1),
 * CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER.
 * Exit: 0 passed, 6 failed (the message says why), 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/prctl.h>

#include "gpu/gpu.h"
#include "util/clock.h"
#include "util/text.h"

#define PREFIXES_MAX 32

static int usage(const char *msg)
{
	fprintf(stderr, "nicpick-smoke: error: %s (it is run by 'nicpick select' and 'nicpick smoke')\n",
		msg);
	return NP_EUSAGE;
}

static int num(const char *s, long long min, long long max, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Exit without running atexit handlers: after an abort, NCCL's and the
 * CUDA runtime's teardown may wait for what will never come. */
__attribute__((noreturn)) static void finish(int code)
{
	fflush(stdout);
	_exit(code);
}

static int emit(struct smoke_result *r, const np_error *err)
{
	if (err && err->status) {
		np_text_clean(r->error, sizeof(r->error), err->msg, NP_TEXT_ASCII);
	}
	char *json = NULL;
	np_error jerr = { 0 };
	if (smoke_result_to_json(r, &json, &jerr) < 0) {
		fprintf(stderr, "nicpick-smoke: error: %s\n", jerr.msg);
		return NP_EINTERNAL;
	}
	int ok = printf("%s\n", json) > 0 && fflush(stdout) == 0;
	free(json);
	if (!ok)
		return NP_EINTERNAL;
	return r->ok ? 0 : NP_ESMOKE;
}

int main(int argc, char **argv)
{
	/* Die with nicpick: a companion whose nicpick was killed must not
	 * keep a GPU, or rank 0's bootstrap port, for the next attempt.
	 * --parent closes the race of a nicpick that died before this line. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (argc < 2)
		return usage("expected 'info' or 'run'");
	bool run = strcmp(argv[1], "run") == 0;
	if (!run && strcmp(argv[1], "info") != 0)
		return usage("expected 'info' or 'run'");

	static const struct option opts[] = {
		{ "rank", required_argument, NULL, 'r' },   { "world", required_argument, NULL, 'w' },
		{ "bytes", required_argument, NULL, 'b' },  { "gpu", required_argument, NULL, 'g' },
		{ "timeout-ms", required_argument, NULL, 't' }, { "parent", required_argument, NULL, 'p' },
		{ "label", required_argument, NULL, 'l' },
		{ "no-links", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const char *label = "";
	bool no_links = false;
	long long rank = -1, world = 0, bytes = SMOKE_DEFAULT_BYTES, gpu = 0, timeout_ms = 0, parent = 0;
	int c;
	opterr = 0;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 'r':
			bad = num(optarg, 0, 1 << 20, &rank);
			break;
		case 'w':
			bad = num(optarg, 1, 1 << 20, &world);
			break;
		case 'b':
			bad = num(optarg, SMOKE_MIN_BYTES, 1LL << 34, &bytes);
			break;
		case 'g':
			bad = num(optarg, 0, 1024, &gpu);
			break;
		case 't':
			bad = num(optarg, 1, 86400000, &timeout_ms);
			break;
		case 'p':
			bad = num(optarg, 1, 1LL << 30, &parent);
			break;
		case 'n':
			no_links = true;
			break;
		case 'l':
			label = optarg;
			bad = strlen(optarg) >= SMOKE_LABEL_MAX;
			break;
		default:
			return usage("unknown option");
		}
		if (bad)
			return usage("bad option value");
	}
	if (optind < argc)
		return usage("unexpected argument");
	if (parent && getppid() != (pid_t)parent)
		return NP_ESMOKE; /* nicpick is gone: nobody reads the result */
	if (run && (rank < 0 || world < 1 || rank >= world || timeout_ms <= 0))
		return usage("run needs --rank R --world N (R < N) and --timeout-ms");

	int64_t deadline = np_now_ms() + (timeout_ms > 0 ? timeout_ms : 60000);
	struct smoke_result r = { .rank = (int)(rank < 0 ? 0 : rank), .world = (int)(world < 1 ? 1 : world) };
	np_error err = { 0 };

	static char prefix_buf[PREFIXES_MAX][SMOKE_PATH_MAX];
	const char *prefixes[PREFIXES_MAX + 1] = { 0 };
	size_t np = gpu_python_prefixes(getenv("PATH"), getenv("VIRTUAL_ENV"),
					  getenv("CONDA_PREFIX"), prefix_buf, PREFIXES_MAX);
	for (size_t i = 0; i < np; i++)
		prefixes[i] = prefix_buf[i];
	const char *nccl = getenv("NICPICK_NCCL_LIB"), *cudart = getenv("NICPICK_CUDART_LIB");
	struct gpu_search s = { .nccl_lib = nccl && *nccl ? nccl : NULL,
				  .cudart_lib = cudart && *cudart ? cudart : NULL,
				  .prefixes = prefixes,
				  .lazy = !run };
	struct gpu_libs libs;
	/* info: the driver's files or NVML, no CUDA context (lib/gpu/procfs.c). */
	const char *nvml = getenv("NICPICK_NVML_LIB"), *root = getenv("NICPICK_DRIVER_ROOT"),
		   *cuda = getenv("NICPICK_CUDA_LIB");
	struct gpu_info_env ie = { .driver_root = root && *root ? root : NULL,
				   .cuda_lib = cuda && *cuda ? cuda : NULL,
				   .nvml_lib = nvml && *nvml ? nvml : NULL,
				   .visible_devices = getenv("CUDA_VISIBLE_DEVICES"),
				   .nvidia_visible_devices = getenv("NVIDIA_VISIBLE_DEVICES"),
				   .device_order = getenv("CUDA_DEVICE_ORDER"),
				   .exiting = true /* finish() follows */ };
	if (gpu_libs_load(&s, &libs, &r, &err) < 0 ||
	    (run ? gpu_device_query(&libs, (int)gpu, true, &r, &err)
		 : gpu_device_info(&libs, &ie, (int)gpu, &r, &err)) < 0)
		finish(emit(&r, &err));
	if (!run) {
		r.ok = true;
		r.phase = SMOKE_PHASE_DONE;
		finish(emit(&r, NULL));
	}
	struct gpu_run_opts o = { .rank = (int)rank, .world = (int)world, .label = label,
				    .max_bytes = (long)bytes, .no_links = no_links,
				    .deadline_ms = deadline };
	if (gpu_rank_run(&libs, &o, &r, &err) < 0)
		finish(emit(&r, &err));
	finish(emit(&r, NULL));
}
