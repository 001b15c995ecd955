/* On the GPU machine: where the time of `nicpick-smoke info` goes, step by
 * step, and what NVML says beside what the CUDA runtime says (the fields
 * the info result carries must read the same both ways).
 *
 *   cc -O1 -o info_steps tests/gpu/info_steps.c -ldl
 *   ./info_steps cuda [CUDART [NCCL]]   the runtime path, as lib/gpu does it
 *   ./info_steps nvml [CUDART [NCCL]]   NVML and the libraries' version calls
 *
 * One line per step: wall and CPU (user + system) in ms.  The libraries'
 * types are declared here as in cuda_runtime_api.h and nvml.h, so that it
 * builds without either header. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double t_wall, t_cpu;

static double wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static void step(const char *what)
{
	double w = wall_ms(), c = cpu_ms();
	printf("  %-34s wall %8.2f ms  cpu %8.2f ms\n", what, w - t_wall, c - t_cpu);
	t_wall = w;
	t_cpu = c;
}

static void *open_or_die(const char *name)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("  dlopen %s: %s\n", name, dlerror());
		exit(1);
	}
	return h;
}

#define SYM(h, name) ((__typeof__(name##_t))sym(h, #name))
static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		printf("  no %s\n", name);
		exit(1);
	}
	return p;
}

typedef int (*int_fn)(int *);
static int_fn cudaDriverGetVersion_t, cudaRuntimeGetVersion_t, cudaGetDeviceCount_t, ncclGetVersion_t;
static int (*cudaGetDeviceProperties_t)(void *, int);
static int (*cudaDeviceGetPCIBusId_t)(char *, int, int);

/* nvml.h */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;
static int (*nvmlInit_v2_t)(void);
static int (*nvmlShutdown_t)(void);
static int (*nvmlSystemGetCudaDriverVersion_v2_t)(int *);
static int (*nvmlDeviceGetCount_v2_t)(unsigned int *);
static int (*nvmlDeviceGetHandleByIndex_v2_t)(unsigned int, nvmlDevice_t *);
static int (*nvmlDeviceGetName_t)(nvmlDevice_t, char *, unsigned int);
static int (*nvmlDeviceGetPciInfo_v3_t)(nvmlDevice_t, nvmlPciInfo_t *);
static int (*nvmlDeviceGetUUID_t)(nvmlDevice_t, char *, unsigned int);
static int (*nvmlDeviceGetMigMode_t)(nvmlDevice_t, unsigned int *, unsigned int *);

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "cuda";
	const char *cudart = argc > 2 ? argv[2] : "libcudart.so.13";
	const char *nccl = argc > 3 ? argv[3] : "libnccl.so.2";
	t_wall = wall_ms();
	t_cpu = cpu_ms();
	printf("%s (process start to main: cpu %.2f ms)\n", mode, t_cpu);
	void *hc = open_or_die(cudart);
	step("dlopen cudart");
	void *hn = open_or_die(nccl);
	step("dlopen nccl");
	int nv = 0, rt = 0, drv = 0;
	SYM(hn, ncclGetVersion)(&nv);
	SYM(hc, cudaRuntimeGetVersion)(&rt);
	step("ncclGetVersion+cudaRuntimeGetVersion");
	printf("    nccl %d runtime %d\n", nv, rt);
	if (strcmp(mode, "cuda") == 0) {
		SYM(hc, cudaDriverGetVersion)(&drv);
		step("cudaDriverGetVersion");
		int n = 0, ce = SYM(hc, cudaGetDeviceCount)(&n);
		step("cudaGetDeviceCount");
		static char prop[64 * 1024];
		void *gp = dlsym(hc, "cudaGetDeviceProperties_v2");
		cudaGetDeviceProperties_t = gp ? gp : sym(hc, "cudaGetDeviceProperties");
		int pe = cudaGetDeviceProperties_t(prop, 0);
		step("cudaGetDeviceProperties");
		char bus[32] = "";
		int be = SYM(hc, cudaDeviceGetPCIBusId)(bus, sizeof(bus), 0);
		step("cudaDeviceGetPCIBusId");
		prop[255] = 0;
		printf("    driver %d count %d (%d) name '%s' (%d) bus '%s' (%d)\n", drv, n, ce, prop, pe,
		       bus, be);
		return 0;
	}
	void *hm = open_or_die("libnvidia-ml.so.1");
	step("dlopen libnvidia-ml.so.1");
	int e = SYM(hm, nvmlInit_v2)();
	step("nvmlInit_v2");
	e |= SYM(hm, nvmlSystemGetCudaDriverVersion_v2)(&drv);
	unsigned int n = 0;
	e |= SYM(hm, nvmlDeviceGetCount_v2)(&n);
	step("driver version + count");
	for (unsigned int i = 0; i < n; i++) {
		nvmlDevice_t d;
		char name[96] = "", uuid[96] = "";
		nvmlPciInfo_t pci;
		memset(&pci, 0, sizeof(pci));
		unsigned int cur = 99, pend = 99;
		int he = SYM(hm, nvmlDeviceGetHandleByIndex_v2)(i, &d);
		step("nvmlDeviceGetHandleByIndex_v2");
		int pe = SYM(hm, nvmlDeviceGetPciInfo_v3)(d, &pci);
		step("nvmlDeviceGetPciInfo_v3");
		int ne = SYM(hm, nvmlDeviceGetName)(d, name, sizeof(name));
		step("nvmlDeviceGetName");
		int me = SYM(hm, nvmlDeviceGetMigMode)(d, &cur, &pend);
		step("nvmlDeviceGetMigMode");
		int ue = SYM(hm, nvmlDeviceGetUUID)(d, uuid, sizeof(uuid));
		step("nvmlDeviceGetUUID");
		printf("    [%u] %d/%d/%d/%d/%d name '%s' busId '%s' legacy '%s' %04x:%02x:%02x uuid '%s' mig %u/%u\n",
		       i, he, ne, pe, ue, me, name, pci.busId, pci.busIdLegacy, pci.domain, pci.bus,
		       pci.device, uuid, cur, pend);
	}
	SYM(hm, nvmlShutdown)();
	step("nvmlShutdown");
	printf("    driver %d count %u (errors or'd %d)\n", drv, n, e);
	return 0;
}
