/* TEST DOUBLE — never shipped, built only for the tests.
 *
 * A stand-in for libnccl.so.2, libcudart.so, libnvidia-ml.so.1 and
 * libcuda.so.1's version call with the same C API
 * (lib/gpu/gpu_api.h), so that CPU-only CI can drive nicpick-smoke through
 * NCCL's and CUDA's behaviours, good and bad.  "Device" memory is host
 * memory.  The all-reduce is real across processes: each rank drops its
 * buffer into $FAKEGPU_DIR and sums everyone's once all are there, so sums
 * are checked end to end.  It writes NCCL-style INFO lines to
 * NCCL_DEBUG_FILE as NCCL would.
 *
 * FAKEGPU_MODE (default ok):
 *   ok          behave
 *   nodriver    cudaDriverGetVersion reports 0, no device
 *   nogpu       driver present, cudaGetDeviceCount 0
 *   hang-init   init never completes (the decoy-bridge hang)
 *   init-error  init fails with ncclSystemError and a last-error text
 *   wrong-sums  element 0 of every result is off by one
 *   wrong-if    the log says NCCL used FAKEGPU_IF (e.g. cni0)
 *   subnet-boot only the bootstrap line names FAKEGPU_IF, as NCCL's
 *               ncclFindInterfaceMatchSubnet does with NCCL_COMM_ID set and
 *               another interface on rank 0's subnet; data as agreed
 *   local-only  every channel via P2P/SHM, none via NET/ (one node)
 *   ib-absent   with NCCL_IB_HCA set, no RDMA device: NCCL 2.28's lines for
 *               it, then sockets (otherwise the HCAs named are used, as
 *               NET/IB lines in 2.28's format, transport/net_ib.cc)
 *   die-mid     rank FAKEGPU_DIE_RANK exits during the first all-reduce
 *   slow        every all-reduce takes FAKEGPU_SLOW_MS
 *   slow-link   node FAKEGPU_SLOW_RANK is slow: every point-to-point
 *               transfer it sends or receives runs at FAKEGPU_SLOW_GBPS
 *               (default a tenth of FAKEGPU_LINK_GBPS)
 *   noisy-link  the ring link FAKEGPU_NOISE_LINK (rank k <-> k+1) is
 *               healthy, but its first FAKEGPU_NOISE_N (default 3) large
 *               transfers (over 4 KiB) each way run at a tenth of
 *               FAKEGPU_LINK_GBPS: one bad timing, as a shared GPU gave
 *               (docs/smoke.md, issue 13's healthy 3-pod run)
 * FAKEGPU_TUNE="default=100,4x4=300": a busbw model for nicpick's --tune:
 *   an all-reduce moves its bytes at the rate (MB/s) listed for the
 *   process's NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD ("default":
 *   neither set, and every setting not listed), as the real transport's
 *   speed depends on them (issue 16's measurements).
 * FAKEGPU_DIR: directory shared by the ranks (required for world > 1).
 * FAKEGPU_LINK_GBPS: every other point-to-point transfer's rate (default
 *   0.005 GB/s, so that a 64 KiB message takes 13 ms: well above the double's
 *   own polling noise).
 *
 * Point-to-point, as NCCL does it: the n-th send from A to B matches B's
 * n-th receive from A; a transfer starts once both are posted and takes
 * bytes / rate.  A slow node slows every link it touches, both ways.  A
 * group (ncclGroupStart .. ncclGroupEnd) is one operation on the stream,
 * complete when all of its sends and receives are, so a grouped
 * send/receive is timed by its slowest direction.  NCCL's user guide:
 * usage/groups.html, group functions "merge multiple calls into one" (also
 * "merging multiple send/receive point-to-point operations");
 * usage/streams.html, a group on several streams blocks them "until the
 * NCCL kernel completes ... given it is a single operation".
 *
 * The GPUs (FAKEGPU_GPUS, default 1; FAKEGPU_GPU_NAMES="A,B": their models
 * in PCI order, default "Fake GPU (test double)"): GPU i sits at PCI bus
 * 0x1a + 0x10 i ("0000:1A:00.0", upper case as NVML and the runtime print
 * it) with UUID GPU-II4e0000-0000-4000-8000-00000000fa4e.  The runtime
 * enumerates them in PCI order (all equally fast, so FASTEST_FIRST has
 * nothing to rank) and honours CUDA_VISIBLE_DEVICES as the CUDA
 * programming guide (13.x, 5.2.1.1) documents it: unset all, empty none,
 * else indices or unique UUID prefixes in the order given, and "If an
 * invalid index is encountered, only devices with indices that appear
 * before the invalid index in the list are visible".
 *
 * NVML (libnvidia-ml.so.1) as nvml.h documents it (CUDA 13.0's toolkit):
 * it ignores CUDA_VISIBLE_DEVICES and lists every GPU; FAKEGPU_NVML_ORDER=
 * reverse lists them against PCI order ("The NVML index may not correlate
 * with other APIs, such as the CUDA device index"); FAKEGPU_MIG=1 puts
 * every GPU in MIG mode (nvmlDeviceGetMigMode's currentMode
 * NVML_DEVICE_MIG_ENABLE; the runtime's MIG enumeration is not modelled, so
 * nicpick must leave that case to the runtime).  Under nodriver, libcuda
 * is missing: nvmlSystemGetCudaDriverVersion_v2 gives
 * NVML_ERROR_LIBRARY_NOT_FOUND ("if libcuda.so.1 ... is not found"); under
 * nogpu nvmlInit_v2 fails
 * (NVML_INIT_FLAG_NO_GPUS: "Don't fail nvmlInit() when no GPUs are found";
 * the header names no code for it, so NVML_ERROR_UNKNOWN, its "on any
 * unexpected error").  Every NVML call before nvmlInit_v2 or after the
 * last nvmlShutdown is NVML_ERROR_UNINITIALIZED, as documented for each.
 *
 * FAKEGPU_TRACE=FILE: each call that reaches the driver (libcuda's
 * cuDriverGetVersion, the runtime's cudaDriverGetVersion, cudaGetDeviceCount, cudaGetDeviceProperties,
 * cudaDeviceGetPCIBusId, cudaSetDevice: the first of them loads and
 * initialises CUDA, 0.2 s on an H200) and NVML's init and shutdown append
 * their name, one a line.
 *
 * FAKEGPU_NCCL_VERSION: what ncclGetVersion reports (default 22809), and
 * how the conf file is read, as NCCL's src/misc/param.cc reads it:
 *   - below 2.23.4 NCCL_CONF_FILE is ignored: v2.21.5-1 initEnv() (line 51)
 *     reads only ~/.nccl.conf and /etc/nccl.conf; NCCL_CONF_FILE arrives
 *     in v2.23.4-1 initEnvFunc() (line 53, commit 68b54236 "2.23.4-1");
 *   - below 2.26.2 a '#' line is read like any other: everything before
 *     its first '=' becomes a variable name; v2.26.2-1 setEnvFile() skips
 *     it (line 35, `if (line[0] == '#') continue;`);
 *   - every version: setenv(key, value, 0), so the environment wins
 *     (line 44/45), and a line without '=' is skipped.
 * The double reads NCCL_CONF_FILE only (not the host's ~/.nccl.conf or
 * /etc/nccl.conf), the first time NCCL would (ncclGetEnv's pthread_once). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpu/gpu_api.h"

struct ncclComm {
	int rank, world;
	int64_t started_ms;
	bool joined;
	bool aborted;
};

enum op { OP_NONE, OP_ALLREDUCE, OP_ALLGATHER };

#define P2P_MAX 8 /* pending sends and receives of one stream (one group) */
#define PEERS_MAX 1024

struct p2p {
	bool send;
	void *buf;
	size_t bytes;
	int peer;
	int n;           /* the n-th transfer between this rank and peer that way */
	int big;         /* ... and the how-many-th over 4 KiB */
	int64_t post_us; /* when it was posted here */
	int64_t ready_us; /* a send: when it is done; 0 not yet known */
};

struct CUstream_st {
	/* the pending collective */
	enum op op;
	float *buf;
	size_t count;
	size_t elem;
	int seq;
	struct ncclComm *comm;
	int64_t ready_at_ms;
	/* the pending sends and receives */
	size_t n_p2p;
	struct p2p p2p[P2P_MAX];
};

static int seq_no;
/* The k-th communicator of a process is every rank's k-th (nicpick's
 * --tune runs one companion per configuration, in the same order on every
 * pod): its files carry k, so that a later one never reads an earlier
 * one's.  One communicator per process, as nicpick-smoke has. */
static int comm_gen;
static int sends_to[PEERS_MAX], recvs_from[PEERS_MAX];
static int big_to[PEERS_MAX], big_from[PEERS_MAX];

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
	return now_us() / 1000;
}

static size_t elem_size(ncclDataType_t t)
{
	return t == ncclUint8 ? 1 : 4;
}

static double env_num(const char *name, double def)
{
	const char *v = getenv(name);
	return v && *v ? atof(v) : def;
}

static bool is(const char *m);

#define NOISE_MIN_BYTES 4096

/* How long `bytes` take between ranks a and b of world, the big-th large
 * transfer that way. */
static int64_t xfer_us(int a, int b, int world, size_t bytes, int big)
{
	double fast = env_num("FAKEGPU_LINK_GBPS", 0.005), rate = fast;
	const char *sr = getenv("FAKEGPU_SLOW_RANK");
	if (is("slow-link") && sr && (atoi(sr) == a || atoi(sr) == b))
		rate = env_num("FAKEGPU_SLOW_GBPS", fast / 10);
	const char *nl = getenv("FAKEGPU_NOISE_LINK");
	if (is("noisy-link") && nl && world > 0 && bytes > NOISE_MIN_BYTES &&
	    big <= (int)env_num("FAKEGPU_NOISE_N", 3)) {
		int l = atoi(nl), m = (l + 1) % world;
		if ((a == l && b == m) || (a == m && b == l))
			rate = fast / 10;
	}
	return (int64_t)((double)bytes / (rate * 1e3));
}

static int fake_version(void)
{
	const char *e = getenv("FAKEGPU_NCCL_VERSION");
	return e && *e ? atoi(e) : 22809;
}

/* NCCL's setEnvFile/initEnvFunc, by version (see the top of this file). */
static void init_env(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	const char *f = getenv("NCCL_CONF_FILE");
	if (fake_version() < 22304 || !f || !*f)
		return;
	FILE *fp = fopen(f, "r");
	if (!fp)
		return;
	char *line = NULL;
	size_t n = 0;
	ssize_t got;
	while ((got = getline(&line, &n, fp)) != -1) {
		if (fake_version() >= 22602 && line[0] == '#')
			continue;
		if (got > 0 && line[got - 1] == '\n')
			line[got - 1] = '\0';
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		setenv(line, eq + 1, 0);
	}
	free(line);
	fclose(fp);
}

static const char *mode(void)
{
	const char *m = getenv("FAKEGPU_MODE");
	return m && *m ? m : "ok";
}

static bool is(const char *m)
{
	return strcmp(mode(), m) == 0;
}

static const char *dir(void)
{
	const char *d = getenv("FAKEGPU_DIR");
	return d && *d ? d : "/tmp";
}

/* NCCL_DEBUG_FILE with %h and %p expanded and %% read as one '%', as NCCL
 * does (src/debug.cc, ncclDebugInit: "case '%': // Double %"; any other
 * character after '%' is kept with it). */
static void log_info(const char *fmt, ...)
{
	const char *f = getenv("NCCL_DEBUG_FILE");
	if (!f || !getenv("NCCL_DEBUG"))
		return;
	char path[1024], host[64] = "fakehost";
	gethostname(host, sizeof(host) - 1);
	size_t o = 0;
	for (const char *p = f; *p && o + 32 < sizeof(path); p++) {
		if (p[0] == '%' && p[1] == 'h') {
			o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", host);
			p++;
		} else if (p[0] == '%' && p[1] == 'p') {
			o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			path[o++] = '%';
			p++;
		} else {
			path[o++] = *p;
		}
	}
	path[o] = '\0';
	FILE *fp = fopen(path, "a");
	if (!fp)
		return;
	fprintf(fp, "%s:%d:%d [0] NCCL INFO ", host, (int)getpid(), (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	vfprintf(fp, fmt, ap);
	va_end(ap);
	fputc('\n', fp);
	fclose(fp);
}

/* ---- the GPUs ---- */

#define GPUS_MAX 16
#define DEFAULT_NAME "Fake GPU (test double)"

static void trace(const char *what)
{
	const char *f = getenv("FAKEGPU_TRACE");
	FILE *fp = f && *f ? fopen(f, "a") : NULL;
	if (fp) {
		fprintf(fp, "%s\n", what);
		fclose(fp);
	}
}

static int n_gpus(void)
{
	int n = (int)env_num("FAKEGPU_GPUS", 1);
	return n < 1 ? 1 : n > GPUS_MAX ? GPUS_MAX : n;
}

/* GPU i's model (PCI order). */
static void gpu_name(int i, char *buf, size_t len)
{
	const char *names = getenv("FAKEGPU_GPU_NAMES");
	snprintf(buf, len, "%s", DEFAULT_NAME);
	for (const char *p = names; p && *p; i--) {
		size_t n = strcspn(p, ",");
		if (i == 0) {
			snprintf(buf, len, "%.*s", (int)n, p);
			return;
		}
		p = p[n] ? p + n + 1 : NULL;
	}
}

static unsigned int gpu_bus(int i)
{
	return 0x1a + 0x10 * (unsigned int)i;
}

static void gpu_uuid(int i, char *buf, size_t len)
{
	snprintf(buf, len, "GPU-%02x4e0000-0000-4000-8000-00000000fa4e", i);
}

/* The runtime's devices: vis[k] is GPU (PCI index) of CUDA ordinal k. */
static int visible(int vis[GPUS_MAX])
{
	int n = n_gpus(), k = 0;
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	if (!cvd) {
		for (int i = 0; i < n; i++)
			vis[k++] = i;
		return k;
	}
	for (const char *p = cvd; *p && k < GPUS_MAX;) {
		size_t len = strcspn(p, ",");
		int pick = -1;
		if (len > 0 && strspn(p, "0123456789") == len) {
			pick = atoi(p);
			pick = pick < n ? pick : -1;
		} else if (len > 4 && strncmp(p, "GPU-", 4) == 0) {
			for (int i = 0; i < n; i++) {
				char u[96];
				gpu_uuid(i, u, sizeof(u));
				if (strncmp(u, p, len) == 0)
					pick = pick == -1 ? i : -2;
			}
		}
		for (int j = 0; j < k; j++)
			pick = vis[j] == pick ? -1 : pick;
		if (pick < 0)
			break; /* an invalid entry ends the list */
		vis[k++] = pick;
		p += len + (p[len] == ',');
	}
	return k;
}

/* ---- NVML ---- */

static int nvml_refs;

struct nvmlDevice_st {
	int gpu;
};
static struct nvmlDevice_st nvml_devs[GPUS_MAX];

nvmlReturn_t nvmlInit_v2(void)
{
	trace("nvmlInit_v2");
	if (is("nogpu"))
		return NVML_ERROR_UNKNOWN;
	nvml_refs++;
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlShutdown(void)
{
	trace("nvmlShutdown");
	if (nvml_refs == 0)
		return NVML_ERROR_UNINITIALIZED;
	nvml_refs--;
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
	if (!nvml_refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!v)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (is("nodriver"))
		return NVML_ERROR_LIBRARY_NOT_FOUND;
	*v = 13000;
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!nvml_refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = (unsigned int)n_gpus();
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *d)
{
	if (!nvml_refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!d || index >= (unsigned int)n_gpus())
		return NVML_ERROR_INVALID_ARGUMENT;
	const char *o = getenv("FAKEGPU_NVML_ORDER");
	int gpu = o && strcmp(o, "reverse") == 0 ? n_gpus() - 1 - (int)index : (int)index;
	nvml_devs[gpu].gpu = gpu;
	*d = &nvml_devs[gpu];
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
	if (!nvml_refs)
		return NVML_ERROR_UNINITIALIZED;
	char n[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	gpu_name(d->gpu, n, sizeof(n));
	if (!name || strlen(n) >= len)
		return NVML_ERROR_INVALID_ARGUMENT; /* nvml.h: INSUFFICIENT_SIZE; not modelled */
	snprintf(name, len, "%s", n);
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
	if (!nvml_refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!pci)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(pci, 0, sizeof(*pci));
	pci->bus = gpu_bus(d->gpu);
	pci->pciDeviceId = 0x233510de;
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, 0, pci->bus, 0);
	snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", 0, pci->bus, 0);
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
	if (!nvml_refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!uuid)
		return NVML_ERROR_INVALID_ARGUMENT;
	gpu_uuid(d->gpu, uuid, len);
	return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending)
{
	if (!nvml_refs)
		return NVML_ERROR_UNINITIALIZED;
	if (!cur || !pending)
		return NVML_ERROR_INVALID_ARGUMENT;
	*cur = *pending = getenv("FAKEGPU_MIG") ? NVML_DEVICE_MIG_ENABLE : 0;
	return NVML_SUCCESS;
}

/* ---- the CUDA driver (libcuda.so.1) ---- */

/* cuDriverGetVersion, the one driver call nicpick makes (lib/gpu/procfs.c):
 * no cuInit needed, it initialises nothing (it answered 13000 without one
 * on an H200, driver 580).  Under nodriver the library nicpick loads is the
 * toolkit's stub (lib64/stubs/libcuda.so, which images sometimes carry
 * where no driver is), and every call of a stub returns
 * CUDA_ERROR_STUB_LIBRARY (cuda.h: "the CUDA driver that the application
 * has loaded is a stub library"). */
CUresult cuDriverGetVersion(int *v)
{
	trace("cuDriverGetVersion");
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	if (is("nodriver"))
		return CUDA_ERROR_STUB_LIBRARY;
	*v = 13000;
	return CUDA_SUCCESS;
}

/* ---- CUDA runtime ---- */

cudaError_t cudaDriverGetVersion(int *v)
{
	trace("cudaDriverGetVersion");
	*v = is("nodriver") ? 0 : 13000;
	return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = 13000;
	return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *count)
{
	trace("cudaGetDeviceCount");
	if (is("nodriver")) {
		*count = 0;
		return (cudaError_t)35; /* cudaErrorInsufficientDriver */
	}
	int vis[GPUS_MAX];
	*count = is("nogpu") ? 0 : visible(vis);
	return *count == 0 ? (cudaError_t)100 : cudaSuccess; /* cudaErrorNoDevice */
}
/* CUDA ordinal d's GPU, or -1 (cudaErrorInvalidDevice, 101). */
static int ordinal(int d)
{
	int vis[GPUS_MAX], n = is("nogpu") || is("nodriver") ? 0 : visible(vis);
	return d >= 0 && d < n ? vis[d] : -1;
}
cudaError_t cudaSetDevice(int d)
{
	trace("cudaSetDevice");
	return ordinal(d) >= 0 ? cudaSuccess : (cudaError_t)101;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d)
{
	trace("cudaGetDeviceProperties");
	int g = ordinal(d);
	if (g < 0)
		return (cudaError_t)101;
	gpu_name(g, (char *)prop, 256);
	return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d)
{
	trace("cudaDeviceGetPCIBusId");
	int g = ordinal(d);
	if (g < 0)
		return (cudaError_t)101;
	snprintf(bus, (size_t)len, "%04X:%02X:%02X.0", 0, gpu_bus(g), 0);
	return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = malloc(n);
	return *p ? cudaSuccess : (cudaError_t)2;
}
cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
	memcpy(dst, src, n);
	return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	*s = calloc(1, sizeof(**s));
	return *s ? cudaSuccess : (cudaError_t)2;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	free(s);
	return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e)
{
	switch ((int)e) {
	case 0:
		return "no error";
	case 35:
		return "CUDA driver version is insufficient for CUDA runtime version";
	case 100:
		return "no CUDA-capable device is detected";
	default:
		return "unknown error";
	}
}

static void rank_file(char *buf, size_t len, const char *what, int seq, int rank)
{
	snprintf(buf, len, "%s/%s%d-%d-%d", dir(), what, comm_gen, seq, rank);
}

static bool all_present(const char *what, int seq, int world)
{
	for (int r = 0; r < world; r++) {
		char p[1024];
		rank_file(p, sizeof(p), what, seq, r);
		if (access(p, F_OK) != 0)
			return false;
	}
	return true;
}

static size_t read_file(const char *p, void *buf, size_t len)
{
	int fd = open(p, O_RDONLY);
	size_t off = 0;
	while (fd >= 0 && off < len) {
		ssize_t n = read(fd, (char *)buf + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	return off;
}

static void write_file(const char *p, const void *buf, size_t len)
{
	char tmp[1100];
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	int fd = open(tmp, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	size_t off = 0;
	while (fd >= 0 && off < len) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	rename(tmp, p);
}

/* Complete the pending operation once every rank's part is there. */
cudaError_t cudaStreamQuery(cudaStream_t s)
{
	char p[1024];
	bool pending = false;
	for (size_t i = 0; i < s->n_p2p; i++) {
		struct p2p *x = &s->p2p[i];
		int me = s->comm->rank;
		if (x->ready_us == 0) {
			/* Both ends post a stamp; the data moves once both have. */
			int from = x->send ? me : x->peer, to = x->send ? x->peer : me;
			char other[1024];
			snprintf(other, sizeof(other), "%s/p2p%d-%s-%d-%d-%d", dir(), comm_gen, x->send ? "recv" : "send",
				 from, to, x->n);
			int64_t their = 0;
			if (read_file(other, &their, sizeof(their)) != sizeof(their)) {
				pending = true;
				continue;
			}
			int64_t start = their > x->post_us ? their : x->post_us;
			x->ready_us = start + xfer_us(from, to, s->comm->world, x->bytes, x->big);
		}
		if (now_us() < x->ready_us)
			pending = true;
	}
	if (pending)
		return cudaErrorNotReady;
	for (size_t i = 0; i < s->n_p2p; i++) {
		struct p2p *x = &s->p2p[i];
		if (x->send)
			continue;
		snprintf(p, sizeof(p), "%s/p2p%d-data-%d-%d-%d", dir(), comm_gen, x->peer, s->comm->rank, x->n);
		if (read_file(p, x->buf, x->bytes) != x->bytes)
			return cudaErrorNotReady; /* the stamp came first */
	}
	s->n_p2p = 0;
	if (s->op == OP_NONE)
		return cudaSuccess;
	if (now_ms() < s->ready_at_ms)
		return cudaErrorNotReady;
	const char *what = s->op == OP_ALLGATHER ? "ag" : "buf";
	if (!all_present(what, s->seq, s->comm->world))
		return cudaErrorNotReady;
	if (s->op == OP_ALLGATHER) {
		for (int r = 0; r < s->comm->world; r++) {
			rank_file(p, sizeof(p), what, s->seq, r);
			read_file(p, (char *)s->buf + (size_t)r * s->count * s->elem, s->count * s->elem);
		}
		s->op = OP_NONE;
		return cudaSuccess;
	}
	float *sum = calloc(s->count, sizeof(float)), *tmp = malloc(s->count * sizeof(float));
	for (int r = 0; r < s->comm->world; r++) {
		rank_file(p, sizeof(p), what, s->seq, r);
		read_file(p, tmp, s->count * sizeof(float));
		for (size_t i = 0; i < s->count; i++)
			sum[i] += tmp[i];
	}
	if (is("wrong-sums"))
		sum[0] += 1;
	memcpy(s->buf, sum, s->count * sizeof(float));
	free(sum);
	free(tmp);
	s->op = OP_NONE;
	return cudaSuccess;
}

/* ---- NCCL ---- */

ncclResult_t ncclGetVersion(int *v)
{
	/* FAKEGPU_NCCL_VERSION: another version, so that one pod can differ. */
	*v = fake_version();
	return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	memset(id, 0, sizeof(*id));
	init_env();
	return getenv("NCCL_COMM_ID") ? ncclSuccess : ncclInvalidUsage;
}

static const char *iface(void)
{
	const char *v = getenv(is("wrong-if") ? "FAKEGPU_IF" : "NCCL_SOCKET_IFNAME");
	if (!v)
		return "eth0";
	return v[0] == '=' ? v + 1 : v;
}

static const char *boot_iface(void)
{
	const char *v = getenv("FAKEGPU_IF");
	return is("subnet-boot") && v ? v : iface();
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int world, ncclUniqueId id, int rank,
				    ncclConfig_t *cfg)
{
	if (!cfg || cfg->magic != 0xcafebeef || cfg->blocking != 0)
		return ncclInvalidArgument;
	struct ncclComm *c = calloc(1, sizeof(*c));
	c->rank = rank;
	c->world = world;
	c->started_ms = now_ms();
	*comm = c;
	init_env();
	int v = fake_version();
	log_info("NCCL version %d.%d.%d+cuda13.0 (test double)", v / 10000, v % 10000 / 100, v % 100);
	/* With NCCL_COMM_ID NCCL bootstraps on the interface of rank 0's
	 * subnet: the first of a list (rails) here. */
	log_info("Bootstrap: Using %.*s:10.0.0.%d<0>", (int)strcspn(boot_iface(), ","), boot_iface(), rank + 1);
	if (is("init-error"))
		return ncclInProgress;
	char p[1024];
	for (comm_gen = 0;; comm_gen++) {
		rank_file(p, sizeof(p), "join", 0, rank);
		if (access(p, F_OK) != 0)
			break;
	}
	if (!is("hang-init")) {
		int fd = open(p, O_CREAT | O_WRONLY, 0644);
		if (fd >= 0)
			close(fd);
	}
	return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *st)
{
	if (c->aborted)
		return ncclInvalidUsage;
	if (is("init-error") && !c->joined) {
		*st = ncclSystemError;
		return ncclSuccess;
	}
	if (!c->joined) {
		if (is("hang-init") || !all_present("join", 0, c->world)) {
			*st = ncclInProgress;
			return ncclSuccess;
		}
		c->joined = true;
		const char *hca = getenv("NCCL_IB_HCA");
		bool ib = hca && *hca && !is("ib-absent");
		if (ib) {
			/* "=mlx5_0:1,mlx5_1" -> " [0]mlx5_0:1/IB [1]mlx5_1:1/IB" */
			char line[2048] = "";
			int n = 0;
			for (const char *p = hca[0] == '=' ? hca + 1 : hca; *p;) {
				size_t len = strcspn(p, ",");
				size_t o = strlen(line);
				snprintf(line + o, sizeof(line) - o, " [%d]%.*s%s/IB", n++, (int)len, p,
					 memchr(p, ':', len) ? "" : ":1");
				p += len + (p[len] == ',');
			}
			log_info("NET/IB : Using%s ; OOB %.*s:10.0.0.%d<0>", line, (int)strcspn(iface(), ","),
				 iface(), c->rank + 1);
			log_info("Using network IB");
		} else {
			if (hca && *hca) {
				log_info("NET/IB : No device found.");
				log_info("Failed to initialize NET plugin IB");
			}
			/* One device per listed interface, as net_socket.cc prints
			 * them: "NET/Socket : Using [0]eth2:10.10.0.1<0> [1]eth1:10.9.0.1<0>". */
			char line[512] = "NET/Socket : Using";
			const char *s = iface();
			for (int i = 0; *s && i < 8; i++) {
				size_t n = strcspn(s, ",");
				snprintf(line + strlen(line), sizeof(line) - strlen(line), " [%d]%.*s:10.%d.0.%d<0>", i,
					 (int)n, s, i, c->rank + 1);
				s += n + (s[n] == ',');
			}
			log_info("%s", line);
			if (getenv("NCCL_SOCKET_NTHREADS") && getenv("NCCL_NSOCKS_PERTHREAD"))
				log_info("NET/Socket: Using %s threads and %s sockets per thread",
					 getenv("NCCL_SOCKET_NTHREADS"), getenv("NCCL_NSOCKS_PERTHREAD"));
			log_info("Using network Socket");
		}
		if (is("local-only"))
			log_info("Channel 00/0 : %d[0] -> %d[0] via P2P/CUMEM", c->rank,
				 (c->rank + 1) % c->world);
		else
			log_info("Channel 00/0 : %d[0] -> %d[0] [send] via NET/%s/0", c->rank,
				 (c->rank + 1) % c->world, ib ? "IB" : "Socket");
		log_info("comm %p rank %d nranks %d cudaDev 0 busId 0 - Init COMPLETE", (void *)c,
			 c->rank, c->world);
	}
	*st = ncclSuccess;
	return ncclSuccess;
}

const char *ncclGetLastError(ncclComm_t c)
{
	return is("init-error") ? "socket connect to 10.244.0.1<29418> failed: Connection refused" : "";
}

/* FAKEGPU_TUNE: how long an all-reduce of count floats takes. */
static long tune_delay_ms(size_t count)
{
	const char *t = getenv("FAKEGPU_TUNE");
	const char *nt = getenv("NCCL_SOCKET_NTHREADS"), *ns = getenv("NCCL_NSOCKS_PERTHREAD");
	if (!t || count < 1024)
		return 0;
	char key[64] = "default", buf[512];
	if (nt && ns)
		snprintf(key, sizeof(key), "%sx%s", nt, ns);
	snprintf(buf, sizeof(buf), "%s", t);
	double rate = 0, def = 0;
	char *save = NULL;
	for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(e, '=');
		if (!eq)
			continue;
		*eq = '\0';
		if (!strcmp(e, key))
			rate = atof(eq + 1);
		if (!strcmp(e, "default"))
			def = atof(eq + 1);
	}
	if (rate <= 0)
		rate = def;
	return rate > 0 ? (long)((double)count * 4 / (rate * 1e3)) : 0;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
			   ncclRedOp_t op, ncclComm_t c, cudaStream_t s)
{
	if (t != ncclFloat32 || op != ncclSum || send != recv)
		return ncclInvalidArgument;
	int seq = ++seq_no;
	if (is("die-mid") && seq == 1) {
		const char *dr = getenv("FAKEGPU_DIE_RANK");
		if (dr && atoi(dr) == c->rank)
			_exit(9);
	}
	char p[1024];
	rank_file(p, sizeof(p), "buf", seq, c->rank);
	write_file(p, send, count * sizeof(float));
	s->op = OP_ALLREDUCE;
	s->elem = sizeof(float);
	s->buf = recv;
	s->count = count;
	s->seq = seq;
	s->comm = c;
	const char *slow = getenv("FAKEGPU_SLOW_MS");
	s->ready_at_ms = now_ms() + (is("slow") && slow ? atoi(slow) : 0) + tune_delay_ms(count);
	return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
			   ncclComm_t c, cudaStream_t s)
{
	if (t != ncclFloat32 && t != ncclUint8)
		return ncclInvalidArgument;
	int seq = ++seq_no;
	char p[1024];
	rank_file(p, sizeof(p), "ag", seq, c->rank);
	write_file(p, send, count * elem_size(t));
	s->op = OP_ALLGATHER;
	s->buf = recv;
	s->count = count;
	s->elem = elem_size(t);
	s->seq = seq;
	s->comm = c;
	s->ready_at_ms = 0;
	return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	return ncclSuccess;
}

/* Post one side of a transfer: its stamp (when it was posted), and for a
 * send the data. */
static ncclResult_t post(bool send, void *buf, size_t count, ncclDataType_t t, int peer,
			 ncclComm_t c, cudaStream_t s)
{
	if ((t != ncclFloat32 && t != ncclUint8) || peer < 0 || peer >= c->world || peer >= PEERS_MAX ||
	    peer == c->rank || s->n_p2p == P2P_MAX)
		return ncclInvalidArgument;
	struct p2p *x = &s->p2p[s->n_p2p++];
	*x = (struct p2p){ .send = send, .buf = buf, .bytes = count * elem_size(t), .peer = peer,
			   .n = send ? ++sends_to[peer] : ++recvs_from[peer], .post_us = now_us() };
	if (x->bytes > NOISE_MIN_BYTES)
		x->big = send ? ++big_to[peer] : ++big_from[peer];
	s->comm = c;
	int from = send ? c->rank : peer, to = send ? peer : c->rank;
	char p[1024];
	if (send) {
		snprintf(p, sizeof(p), "%s/p2p%d-data-%d-%d-%d", dir(), comm_gen, from, to, x->n);
		write_file(p, buf, x->bytes);
	}
	snprintf(p, sizeof(p), "%s/p2p%d-%s-%d-%d-%d", dir(), comm_gen, send ? "send" : "recv", from, to, x->n);
	write_file(p, &x->post_us, sizeof(x->post_us));
	return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
		      cudaStream_t s)
{
	return post(true, (void *)send, count, t, peer, c, s);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
		      cudaStream_t s)
{
	return post(false, recv, count, t, peer, c, s);
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
	return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c)
{
	free(c);
	return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c)
{
	c->aborted = true;
	return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r)
{
	switch (r) {
	case ncclSuccess:
		return "no error";
	case ncclSystemError:
		return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInvalidArgument:
		return "invalid argument";
	case ncclInvalidUsage:
		return "invalid usage";
	default:
		return "unknown result";
	}
}
