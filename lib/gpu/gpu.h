/* The smoke companion's module (cmd/nicpick-smoke): NCCL and the CUDA
 * runtime loaded with dlopen into tables typed from their real prototypes,
 * and one rank of the all-reduce.  Only the companion links this; nicpick
 * itself never loads a GPU library.  What it shares with nicpick is the
 * result message, smoke/result.h, and nothing else of lib/smoke. */
#ifndef NP_GPU_H
#define NP_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu_api.h"
#include "smoke/result.h"

/* The link phases' message size: 8 MiB takes 33 ms at 2 Gbit/s and 20 ms
 * at 3.3 Gbit/s, so a link slow enough to matter is timed over far more
 * than NCCL's per-message latency (lib/gpu/run.c). */
#define GPU_RING_BYTES (8L << 20)
#define GPU_RING_ITERS 3 /* per direction; the best counts (the first connects) */

struct gpu_nccl_api {
	__typeof__(&ncclGetVersion) GetVersion;
	__typeof__(&ncclGetUniqueId) GetUniqueId;
	__typeof__(&ncclCommInitRankConfig) CommInitRankConfig;
	__typeof__(&ncclCommGetAsyncError) CommGetAsyncError;
	__typeof__(&ncclCommFinalize) CommFinalize;
	__typeof__(&ncclCommAbort) CommAbort;
	__typeof__(&ncclCommDestroy) CommDestroy;
	__typeof__(&ncclAllReduce) AllReduce;
	__typeof__(&ncclAllGather) AllGather;
	__typeof__(&ncclSend) Send;
	__typeof__(&ncclRecv) Recv;
	__typeof__(&ncclGroupStart) GroupStart;
	__typeof__(&ncclGroupEnd) GroupEnd;
	__typeof__(&ncclGetErrorString) GetErrorString;
	__typeof__(&ncclGetLastError) GetLastError; /* optional (2.13+) */
};

struct gpu_cuda_api {
	__typeof__(&cudaGetDeviceCount) GetDeviceCount;
	__typeof__(&cudaSetDevice) SetDevice;
	__typeof__(&cudaDriverGetVersion) DriverGetVersion;
	__typeof__(&cudaRuntimeGetVersion) RuntimeGetVersion;
	__typeof__(&cudaGetDeviceProperties) GetDeviceProperties;
	__typeof__(&cudaDeviceGetPCIBusId) DeviceGetPCIBusId;
	__typeof__(&cudaMalloc) Malloc;
	__typeof__(&cudaFree) Free;
	__typeof__(&cudaMemcpy) Memcpy;
	__typeof__(&cudaStreamCreateWithFlags) StreamCreateWithFlags;
	__typeof__(&cudaStreamQuery) StreamQuery;
	__typeof__(&cudaStreamDestroy) StreamDestroy;
	__typeof__(&cudaGetErrorString) GetErrorString;
};

struct gpu_libs {
	void *nccl_h, *cudart_h;
	char nccl_path[SMOKE_PATH_MAX];
	char cudart_path[SMOKE_PATH_MAX];
	struct gpu_nccl_api nccl;
	struct gpu_cuda_api cuda;
};

/* Where to look, in order: the explicit paths (a failure there is final),
 * the loader's own search path, then the libraries PyTorch wheels ship
 * (site-packages/nvidia/{nccl,cuda_runtime,cu*}/lib) under every python
 * prefix given. */
struct gpu_search {
	const char *nccl_lib;   /* NICPICK_NCCL_LIB, or NULL */
	const char *cudart_lib; /* NICPICK_CUDART_LIB, or NULL */
	const char *const *prefixes; /* python prefixes (NULL-terminated), or NULL */
	/* RTLD_LAZY for info, which calls only the version functions: 0.3 ms
	 * less of a process's CPU for NCCL 2.28's dlopen on an H200 host
	 * (docs/smoke.md).  run binds at load (RTLD_NOW), so a library that
	 * lacks a symbol it needs fails there, not in the middle of the test. */
	bool lazy;
};

/* Python prefixes from the environment: $VIRTUAL_ENV, $CONDA_PREFIX, the
 * parent of every PATH directory that holds a python3, and the usual
 * system ones.  Fills up to max entries of v (strings in buf). */
size_t gpu_python_prefixes(const char *path_env, const char *virtual_env,
			     const char *conda_prefix, char buf[][SMOKE_PATH_MAX], size_t max);

/* The libraries wheels ship under these prefixes, in search order (for
 * each prefix: the newest python first, the newest soname first). */
size_t gpu_wheel_paths(const char *const *prefixes, bool nccl, char out[][SMOKE_PATH_MAX],
			 size_t max);

/* Load both libraries.  On failure r->unavailable says which is missing
 * and the error names every place tried. */
/* dlsym each of names[0..n) of h into slots[i] (a struct of function
 * pointers, in the names' order); the first n_required must be there,
 * the rest may be NULL.  -1 (err names lib and the symbol) when one is not. */
int gpu_load_syms(void *h, const char *lib, const char *const *names, void **slots, size_t n_required,
		  size_t n, np_error *err);

int gpu_libs_load(const struct gpu_search *s, struct gpu_libs *l, struct smoke_result *r,
		    np_error *err);
void gpu_libs_close(struct gpu_libs *l);

/* Driver, GPU count and model (fills r); with select, also makes device
 * gpu current (cudaSetDevice, which creates its primary context in CUDA
 * 12: 0.4-0.6 s on an H200).  `info` needs no context: the model and the
 * PCI bus id are read by ordinal. */
int gpu_device_query(const struct gpu_libs *l, int gpu, bool select, struct smoke_result *r,
		       np_error *err);

/* The versions step (`nicpick-smoke info`) without a CUDA context: the
 * runtime's first call that reaches the driver (cudaDriverGetVersion
 * already) loads and initialises it, 195 ms of CPU on an H200, where NVML
 * answers the same questions in about 20 ms and the driver's own files
 * with libcuda's cuDriverGetVersion in about 2 ms (docs/smoke.md).  So
 * info reads the driver, the GPUs and the model from the driver's procfs
 * files and libcuda (lib/gpu/procfs.c), else through NVML (nvml.c), and
 * the versions through ncclGetVersion and cudaRuntimeGetVersion
 * (gpu_libs_load), none of which initialises CUDA.  Neither source knows
 * CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER, so the runtime's view is
 * rebuilt from them (gpu_visible_map); whenever that is in doubt, or both
 * sources are missing or fail, the CUDA runtime answers as before
 * (gpu_device_query), with the same fields and the same errors. */
struct gpu_info_env {
	const char *driver_root;     /* NICPICK_DRIVER_ROOT, or NULL: the driver's /proc and /dev */
	const char *cuda_lib;        /* NICPICK_CUDA_LIB, or NULL: libcuda.so.1 */
	const char *nvml_lib;        /* NICPICK_NVML_LIB, or NULL: libnvidia-ml.so.1 */
	const char *visible_devices; /* CUDA_VISIBLE_DEVICES, or NULL (unset) */
	const char *nvidia_visible_devices; /* NVIDIA_VISIBLE_DEVICES, or NULL */
	const char *device_order;    /* CUDA_DEVICE_ORDER, or NULL (unset) */
	/* The caller exits as soon as this returns (the companion's info):
	 * when NVML answered, it is left to the process's exit instead of
	 * nvmlShutdown() and dlclose().  Closing the process's /dev/nvidia*
	 * descriptors frees what its clients held (NVIDIA's
	 * open-gpu-kernel-modules, kernel-open/nvidia/nv.c: nvidia_close ->
	 * nvidia_close_callback -> rm_cleanup_file_private), and nvmlShutdown
	 * costs 2.5 ms of CPU and of wall on an H200 (tests/gpu/info_steps.c).
	 * libcuda, when it answered, is left loaded the same way. */
	bool exiting;
};
int gpu_device_info(const struct gpu_libs *l, const struct gpu_info_env *e, int gpu,
		      struct smoke_result *r, np_error *err);

/* One GPU as NVML (or the driver's procfs) describes it. */
#define GPU_NVML_MAX 64
struct gpu_nvml_dev {
	unsigned int domain, bus, device;
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE]; /* "" when not read */
	char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
};
/* PCI order of two GPUs: domain, bus, device. */
int gpu_pci_cmp(const struct gpu_nvml_dev *a, const struct gpu_nvml_dev *b);
/* The answer of either source into the result, as gpu_device_query fills
 * the same fields: the driver's CUDA version, the CUDA-visible count and
 * the device ordinal gpu's model and bus id. */
void gpu_info_answer(int driver, int count, const struct gpu_nvml_dev *d, struct smoke_result *r);

/* One GPU as the driver's /proc/driver/nvidia/gpus/<bus>/information
 * describes it (lib/gpu/procfs.c). */
struct gpu_procfs_gpu {
	struct gpu_nvml_dev dev; /* uuid "" when the file has none */
	unsigned int function, minor;
	bool excluded; /* "GPU Excluded: Yes" */
};
/* The file's text into g; -1 when a field is missing, repeated or out of
 * its format. */
int gpu_procfs_parse(const char *text, struct gpu_procfs_gpu *g);
/* 0 when the driver's files and libcuda answered (r filled), -1 when NVML
 * or the runtime must. */
int gpu_procfs_info(const struct gpu_info_env *e, int gpu, struct smoke_result *r);

/* The devices the CUDA runtime would enumerate, in its order, as indices
 * into devs (NVML's order): map[k] is CUDA ordinal k.  Returns how many
 * (>= 1), or -1 when the runtime's answer cannot be known for sure from
 * NVML's list (see nvml.c); devs need uuid only when visible names one. */
int gpu_visible_map(const char *visible, const char *order, const struct gpu_nvml_dev *devs,
		      size_t n, size_t map[GPU_NVML_MAX]);
/* Whether CUDA_VISIBLE_DEVICES names a device by UUID (so uuids are needed). */
bool gpu_visible_by_uuid(const char *visible);

struct gpu_run_opts {
	int rank, world;
	const char *label; /* this rank's pod, node and address ("" none) */
	long max_bytes;
	bool no_links;       /* skip the ring link timing */
	int64_t deadline_ms; /* CLOCK_MONOTONIC */
};

/* One rank: non-blocking init under the deadline (NCCL_COMM_ID must be in
 * the environment), the all-reduces with exact checks, abort on any
 * failure.  Fills r; returns 0 when every step passed, else -1 with
 * NP_ESMOKE naming the phase. */
int gpu_rank_run(const struct gpu_libs *l, const struct gpu_run_opts *o,
		   struct smoke_result *r, np_error *err);

/* The sizes an all-reduce of at most max_bytes runs: powers of 8 from
 * 1 MiB (or max_bytes if smaller) up to max_bytes, the last always
 * max_bytes.  Returns the count (<= SMOKE_SIZES_MAX). */
size_t gpu_plan_sizes(long max_bytes, long *sizes);
/* The value rank r contributes at element i, and the exact sum over n
 * ranks: small integers, so a float32 sum is exact (n <= 2^20). */
float gpu_input_value(int rank, size_t i);
float gpu_expected_sum(int world, size_t i);
/* The link phases of a ring of world ranks (world >= 3): ring link k joins
 * rank k and k+1 (mod world).  Phase 0 holds the even links, phase 1 the
 * odd ones, and with an odd world the last link (world-1 -> 0) gets phase
 * 2, so that no rank is in two links of one phase. */
int gpu_link_phase(int world, int link);
/* nccl-tests' bus bandwidth factor for all-reduce: 2(n-1)/n. */
double gpu_busbw_factor(int world);

#endif
