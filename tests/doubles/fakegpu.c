/* TEST DOUBLE — never shipped, built only for the tests.
 *
 * A stand-in for libnccl.so.2 and libcudart.so with the same C API
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
 *   slow-link   the ring step's receive of rank FAKEGPU_SLOW_RANK takes 300 ms
 * FAKEGPU_DIR: directory shared by the ranks (required for world > 1).
 * FAKEGPU_NCCL_VERSION: what ncclGetVersion reports (default 22809). */
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

enum op { OP_NONE, OP_ALLREDUCE, OP_P2P, OP_ALLGATHER };

struct CUstream_st {
	/* the pending operation */
	enum op op;
	float *buf;
	size_t count;
	int seq;
	int peer; /* OP_P2P: receive from */
	struct ncclComm *comm;
	int64_t ready_at_ms;
};

static int group_depth;
static int group_seq;

static int seq_no;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

/* NCCL_DEBUG_FILE with %h and %p expanded, as NCCL does. */
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

/* ---- CUDA runtime ---- */

cudaError_t cudaDriverGetVersion(int *v)
{
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
	if (is("nodriver")) {
		*count = 0;
		return (cudaError_t)35; /* cudaErrorInsufficientDriver */
	}
	*count = is("nogpu") ? 0 : 1;
	return is("nogpu") ? (cudaError_t)100 : cudaSuccess; /* cudaErrorNoDevice */
}
cudaError_t cudaSetDevice(int d)
{
	return d == 0 ? cudaSuccess : (cudaError_t)101;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d)
{
	snprintf((char *)prop, 256, "Fake GPU (test double)");
	return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d)
{
	snprintf(bus, (size_t)len, "0000:00:00.0");
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
	snprintf(buf, len, "%s/%s-%d-%d", dir(), what, seq, rank);
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
	if (s->op == OP_NONE)
		return cudaSuccess;
	if (now_ms() < s->ready_at_ms)
		return cudaErrorNotReady;
	char p[1024];
	if (s->op == OP_P2P) {
		snprintf(p, sizeof(p), "%s/p2p-%d-%d-%d", dir(), s->seq, s->peer, s->comm->rank);
		if (access(p, F_OK) != 0)
			return cudaErrorNotReady;
		read_file(p, s->buf, s->count * sizeof(float));
		s->op = OP_NONE;
		return cudaSuccess;
	}
	const char *what = s->op == OP_ALLGATHER ? "ag" : "buf";
	if (!all_present(what, s->seq, s->comm->world))
		return cudaErrorNotReady;
	if (s->op == OP_ALLGATHER) {
		for (int r = 0; r < s->comm->world; r++) {
			rank_file(p, sizeof(p), what, s->seq, r);
			read_file(p, s->buf + (size_t)r * s->count, s->count * sizeof(float));
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
	const char *e = getenv("FAKEGPU_NCCL_VERSION");
	*v = e && *e ? atoi(e) : 22809;
	return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	memset(id, 0, sizeof(*id));
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
	log_info("NCCL version 2.28.9+cuda13.0 (test double)");
	log_info("Bootstrap: Using %s:10.0.0.%d<0>", boot_iface(), rank + 1);
	if (is("init-error"))
		return ncclInProgress;
	char p[1024];
	rank_file(p, sizeof(p), "join", 0, rank);
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
			log_info("NET/IB : Using%s ; OOB %s:10.0.0.%d<0>", line, iface(), c->rank + 1);
			log_info("Using network IB");
		} else {
			if (hca && *hca) {
				log_info("NET/IB : No device found.");
				log_info("Failed to initialize NET plugin IB");
			}
			log_info("NET/Socket : Using [0]%s:10.0.0.%d<0>", iface(), c->rank + 1);
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
	s->buf = recv;
	s->count = count;
	s->seq = seq;
	s->comm = c;
	const char *slow = getenv("FAKEGPU_SLOW_MS");
	s->ready_at_ms = now_ms() + (is("slow") && slow ? atoi(slow) : 0);
	return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
			   ncclComm_t c, cudaStream_t s)
{
	if (t != ncclFloat32)
		return ncclInvalidArgument;
	int seq = ++seq_no;
	char p[1024];
	rank_file(p, sizeof(p), "ag", seq, c->rank);
	write_file(p, send, count * sizeof(float));
	s->op = OP_ALLGATHER;
	s->buf = recv;
	s->count = count;
	s->seq = seq;
	s->comm = c;
	s->ready_at_ms = 0;
	return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
	if (group_depth++ == 0)
		group_seq = ++seq_no;
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	group_depth--;
	return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
		      cudaStream_t s)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/p2p-%d-%d-%d", dir(), group_seq, c->rank, peer);
	write_file(p, send, count * sizeof(float));
	return ncclSuccess;
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
		      cudaStream_t s)
{
	s->op = OP_P2P;
	s->buf = recv;
	s->count = count;
	s->seq = group_seq;
	s->peer = peer;
	s->comm = c;
	const char *sr = getenv("FAKEGPU_SLOW_RANK");
	s->ready_at_ms = now_ms() + (is("slow-link") && sr && atoi(sr) == c->rank ? 300 : 0);
	return ncclSuccess;
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
