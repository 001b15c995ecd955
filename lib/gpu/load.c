/* Loading NCCL and the CUDA runtime at run time, as libnvidia-container
 * loads its optional libraries: dlopen into tables typed from the real
 * prototypes; a missing library or symbol is a clear error. */
#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/gpu.h"

/* The CUDA runtime's soname carries its major version; newest first. */
static const char *const cudart_sonames[] = { "libcudart.so.13", "libcudart.so.12",
					      "libcudart.so.11.0", "libcudart.so", NULL };

/* Under a python prefix, where wheels put the libraries (nvidia-nccl-cu12
 * and -cu13 in nvidia/nccl/lib; nvidia-cuda-runtime-cu12 in
 * nvidia/cuda_runtime/lib; the CUDA 13 wheels in nvidia/cu13/lib). */
static const char *const nccl_globs[] = {
	"/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
	"/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
	"/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
	NULL,
};
static const char *const cudart_globs[] = {
	"/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.*",
	"/lib/python3*/site-packages/nvidia/cu1*/lib/libcudart.so.*",
	"/lib/python3*/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.*",
	"/lib/python3/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.*",
	NULL,
};

size_t gpu_python_prefixes(const char *path_env, const char *virtual_env,
			     const char *conda_prefix, char buf[][SMOKE_PATH_MAX], size_t max)
{
	size_t n = 0;
#define ADD(p)                                                                          \
	do {                                                                            \
		bool dup_ = false;                                                      \
		for (size_t k_ = 0; k_ < n; k_++)                                       \
			dup_ = dup_ || strcmp(buf[k_], (p)) == 0;                       \
		if (!dup_ && n < max && strlen(p) < SMOKE_PATH_MAX)                     \
			snprintf(buf[n++], SMOKE_PATH_MAX, "%s", (p));                  \
	} while (0)
	if (virtual_env && *virtual_env == '/')
		ADD(virtual_env);
	if (conda_prefix && *conda_prefix == '/')
		ADD(conda_prefix);
	for (const char *p = path_env; p && *p;) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		char dir[SMOKE_PATH_MAX], py[SMOKE_PATH_MAX + 16];
		if (len > 0 && len < sizeof(dir) && p[0] == '/') {
			memcpy(dir, p, len);
			dir[len] = '\0';
			snprintf(py, sizeof(py), "%s/python3", dir);
			if (access(py, X_OK) == 0) {
				/* bin/.. is the prefix; a venv's python3 is a link
				 * to the base interpreter, whose prefix counts too. */
				char *slash = strrchr(dir, '/');
				if (slash && slash != dir) {
					*slash = '\0';
					ADD(dir);
				}
				char real[PATH_MAX];
				if (realpath(py, real)) {
					for (int up = 0; up < 2; up++) {
						char *s = strrchr(real, '/');
						if (s && s != real)
							*s = '\0';
					}
					ADD(real);
				}
			}
		}
		p = colon ? colon + 1 : NULL;
	}
	static const char *const system[] = { "/usr/local", "/usr", "/opt/conda", NULL };
	for (size_t i = 0; system[i]; i++)
		ADD(system[i]);
#undef ADD
	return n;
}

static void note(char *tried, size_t len, const char *what, const char *why)
{
	size_t off = strlen(tried);
	if (off + 4 < len)
		snprintf(tried + off, len - off, "%s%s (%s)", off ? "; " : "", what, why);
}

/* dlopen and remember where it really came from. */
static void *open_lib(const struct gpu_search *s, const char *name, char *path, size_t path_len,
		      char *tried, size_t tried_len, const char *probe_sym)
{
	void *h = dlopen(name, (s->lazy ? RTLD_LAZY : RTLD_NOW) | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		note(tried, tried_len, name, e ? e : "cannot load");
		return NULL;
	}
	Dl_info info;
	void *sym = dlsym(h, probe_sym);
	if (!sym) {
		note(tried, tried_len, name, "not the expected library");
		dlclose(h);
		return NULL;
	}
	snprintf(path, path_len, "%s", name);
	if (dladdr(sym, &info) && info.dli_fname)
		snprintf(path, path_len, "%s", info.dli_fname);
	return h;
}

size_t gpu_wheel_paths(const char *const *prefixes, bool nccl, char out[][SMOKE_PATH_MAX],
			 size_t max)
{
	const char *const *globs = nccl ? nccl_globs : cudart_globs;
	size_t n = 0;
	for (size_t p = 0; prefixes && prefixes[p]; p++) {
		for (size_t g = 0; globs[g]; g++) {
			char pat[SMOKE_PATH_MAX * 2];
			snprintf(pat, sizeof(pat), "%s%s", prefixes[p], globs[g]);
			glob_t gl;
			if (glob(pat, 0, NULL, &gl) != 0)
				continue;
			/* glob sorts: the newest python and soname come last */
			for (size_t i = gl.gl_pathc; i-- > 0 && n < max;)
				if (strlen(gl.gl_pathv[i]) < SMOKE_PATH_MAX)
					snprintf(out[n++], SMOKE_PATH_MAX, "%s", gl.gl_pathv[i]);
			globfree(&gl);
		}
	}
	return n;
}

static void *open_globs(const struct gpu_search *s, bool nccl, char *path, size_t path_len,
			char *tried, size_t tried_len, const char *probe_sym)
{
	static char found[32][SMOKE_PATH_MAX];
	size_t n = gpu_wheel_paths(s->prefixes, nccl, found, 32);
	for (size_t i = 0; i < n; i++) {
		void *h = open_lib(s, found[i], path, path_len, tried, tried_len, probe_sym);
		if (h)
			return h;
	}
	return NULL;
}

int gpu_load_syms(void *h, const char *lib, const char *const *names, void **slots, size_t n_required,
		  size_t n, np_error *err)
{
	for (size_t i = 0; i < n; i++) {
		slots[i] = dlsym(h, names[i]);
		if (!slots[i] && i < n_required)
			return np_error_set(err, NP_ESMOKE, 0, "%s has no %s", lib, names[i]);
	}
	return 0;
}

int gpu_libs_load(const struct gpu_search *s, struct gpu_libs *l, struct smoke_result *r,
		    np_error *err)
{
	char tried[1024] = "";
	memset(l, 0, sizeof(*l));
	r->phase = SMOKE_PHASE_LOAD;

	/* The CUDA runtime first: NCCL needs the driver it talks to. */
	if (s->cudart_lib) {
		l->cudart_h = open_lib(s, s->cudart_lib, l->cudart_path, sizeof(l->cudart_path), tried,
				       sizeof(tried), "cudaGetDeviceCount");
	} else {
		for (size_t i = 0; !l->cudart_h && cudart_sonames[i]; i++)
			l->cudart_h = open_lib(s, cudart_sonames[i], l->cudart_path,
					       sizeof(l->cudart_path), tried, sizeof(tried),
					       "cudaGetDeviceCount");
		if (!l->cudart_h)
			l->cudart_h = open_globs(s, false, l->cudart_path,
						 sizeof(l->cudart_path), tried, sizeof(tried),
						 "cudaGetDeviceCount");
	}
	if (!l->cudart_h) {
		r->unavailable = SMOKE_NO_CUDART;
		return np_error_set(err, NP_ESMOKE, 0, "no usable CUDA runtime: %s%s", tried,
				    s->cudart_lib ? "" : "; set NICPICK_CUDART_LIB to its path");
	}
	tried[0] = '\0';
	if (s->nccl_lib) {
		l->nccl_h = open_lib(s, s->nccl_lib, l->nccl_path, sizeof(l->nccl_path), tried,
				     sizeof(tried), "ncclGetVersion");
	} else {
		l->nccl_h = open_lib(s, "libnccl.so.2", l->nccl_path, sizeof(l->nccl_path), tried,
				     sizeof(tried), "ncclGetVersion");
		if (!l->nccl_h)
			l->nccl_h = open_globs(s, true, l->nccl_path,
					       sizeof(l->nccl_path), tried, sizeof(tried),
					       "ncclGetVersion");
	}
	if (!l->nccl_h) {
		r->unavailable = SMOKE_NO_NCCL;
		return np_error_set(err, NP_ESMOKE, 0, "no usable libnccl.so.2: %s%s", tried,
				    s->nccl_lib ? "" : "; set NICPICK_NCCL_LIB to its path");
	}
	snprintf(r->nccl_path, sizeof(r->nccl_path), "%s", l->nccl_path);
	snprintf(r->cudart_path, sizeof(r->cudart_path), "%s", l->cudart_path);

	static const char *const nccl_names[] = {
		"ncclGetVersion", "ncclGetUniqueId",	"ncclCommInitRankConfig",
		"ncclCommGetAsyncError", "ncclCommFinalize", "ncclCommAbort", "ncclCommDestroy",
		"ncclAllReduce",  "ncclAllGather", "ncclSend", "ncclRecv", "ncclGroupStart",
		"ncclGroupEnd", "ncclGetErrorString", "ncclGetLastError",
	};
	_Static_assert(sizeof(nccl_names) / sizeof(nccl_names[0]) ==
			       sizeof(struct gpu_nccl_api) / sizeof(void *),
		       "one name per NCCL slot");
	if (gpu_load_syms(l->nccl_h, l->nccl_path, nccl_names, (void **)&l->nccl, 14, 15, err) < 0) {
		r->unavailable = SMOKE_NO_NCCL;
		return np_error_wrap(err, "NCCL 2.14 or later is needed (non-blocking init)");
	}
	const char *cuda_names[] = {
		"cudaGetDeviceCount",	 "cudaSetDevice",	   "cudaDriverGetVersion",
		"cudaRuntimeGetVersion", "cudaGetDeviceProperties_v2", "cudaDeviceGetPCIBusId",
		"cudaMalloc",		 "cudaFree",		   "cudaMemcpy",
		"cudaStreamCreateWithFlags", "cudaStreamQuery",	   "cudaStreamDestroy",
		"cudaGetErrorString",
	};
	_Static_assert(sizeof(cuda_names) / sizeof(cuda_names[0]) ==
			       sizeof(struct gpu_cuda_api) / sizeof(void *),
		       "one name per CUDA slot");
	/* CUDA 12 renamed cudaGetDeviceProperties to _v2 in its header and
	 * kept the old symbol; earlier runtimes (and 13) have only the old one. */
	if (!dlsym(l->cudart_h, cuda_names[4]))
		cuda_names[4] = "cudaGetDeviceProperties";
	size_t n_cuda = sizeof(cuda_names) / sizeof(cuda_names[0]);
	if (gpu_load_syms(l->cudart_h, l->cudart_path, cuda_names, (void **)&l->cuda, n_cuda, n_cuda,
		      err) < 0) {
		r->unavailable = SMOKE_NO_CUDART;
		return -1;
	}
	/* Neither initialises CUDA, so info can call them without a context:
	 * NCCL's ncclGetVersion (src/init.cc) stores NCCL_VERSION_CODE without
	 * ncclInit(); cudaRuntimeGetVersion, cuda_runtime_api.h: "As of CUDA
	 * 12.0, this function no longer initializes CUDA" (an 11.x runtime
	 * may).  Both took 0.02 ms on the H200 (docs/smoke.md). */
	l->nccl.GetVersion(&r->nccl_version);
	l->cuda.RuntimeGetVersion(&r->cuda_runtime);
	return 0;
}

void gpu_libs_close(struct gpu_libs *l)
{
	/* Never dlclose NCCL: its threads may still run after an abort. */
	memset(l, 0, sizeof(*l));
}
