/* nicpick-smoke's side: NCCL and the CUDA runtime loaded with dlopen into
 * tables typed from their real prototypes, and one rank of the all-reduce.
 * Only the companion links this; nicpick itself never loads a GPU library. */
#ifndef NP_SMOKE_GPU_H
#define NP_SMOKE_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include "smoke/gpu_api.h"
#include "smoke/smoke.h"

struct smoke_nccl_api {
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

struct smoke_cuda_api {
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

struct smoke_libs {
	void *nccl_h, *cudart_h;
	char nccl_path[SMOKE_PATH_MAX];
	char cudart_path[SMOKE_PATH_MAX];
	struct smoke_nccl_api nccl;
	struct smoke_cuda_api cuda;
};

/* Where to look, in order: the explicit paths (a failure there is final),
 * the loader's own search path, then the libraries PyTorch wheels ship
 * (site-packages/nvidia/{nccl,cuda_runtime,cu*}/lib) under every python
 * prefix given. */
struct smoke_search {
	const char *nccl_lib;   /* NICPICK_NCCL_LIB, or NULL */
	const char *cudart_lib; /* NICPICK_CUDART_LIB, or NULL */
	const char *const *prefixes; /* python prefixes (NULL-terminated), or NULL */
};

/* Python prefixes from the environment: $VIRTUAL_ENV, $CONDA_PREFIX, the
 * parent of every PATH directory that holds a python3, and the usual
 * system ones.  Fills up to max entries of v (strings in buf). */
size_t smoke_python_prefixes(const char *path_env, const char *virtual_env,
			     const char *conda_prefix, char buf[][SMOKE_PATH_MAX], size_t max);

/* The libraries wheels ship under these prefixes, in search order (for
 * each prefix: the newest python first, the newest soname first). */
size_t smoke_wheel_paths(const char *const *prefixes, bool nccl, char out[][SMOKE_PATH_MAX],
			 size_t max);

/* Load both libraries.  On failure r->unavailable says which is missing
 * and the error names every place tried. */
int smoke_libs_load(const struct smoke_search *s, struct smoke_libs *l, struct smoke_result *r,
		    np_error *err);
void smoke_libs_close(struct smoke_libs *l);

/* Driver, GPU count and model (fills r), and selects device gpu. */
int smoke_device_query(const struct smoke_libs *l, int gpu, struct smoke_result *r,
		       np_error *err);

struct smoke_run_opts {
	int rank, world;
	long max_bytes;
	int64_t deadline_ms; /* CLOCK_MONOTONIC */
};

/* One rank: non-blocking init under the deadline (NCCL_COMM_ID must be in
 * the environment), the all-reduces with exact checks, abort on any
 * failure.  Fills r; returns 0 when every step passed, else -1 with
 * NP_ESMOKE naming the phase. */
int smoke_rank_run(const struct smoke_libs *l, const struct smoke_run_opts *o,
		   struct smoke_result *r, np_error *err);

#endif
