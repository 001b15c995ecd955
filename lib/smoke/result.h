/* The smoke test's result message: the one thing both programs share.
 * The companion (lib/gpu, cmd/nicpick-smoke) fills a struct smoke_result
 * and prints it with smoke_result_to_json; nicpick (lib/smoke/spawn.c)
 * reads it back with smoke_result_parse.  Writer and strict reader live
 * side by side in lib/smoke/result.c; lib/gpu includes this header and no
 * other of lib/smoke, and lib/smoke includes nothing of lib/gpu.
 *
 * One compact JSON object:
 *   {"v":1,"ok":true,"phase":"done","error":"","unavailable":"",
 *    "rank":0,"world":2,
 *    "nccl":{"version":22809,"path":"/usr/lib/.../libnccl.so.2"},
 *    "cuda":{"driver":13000,"runtime":13000,"path":"..."},
 *    "gpu":{"name":"NVIDIA H200","bus":"0000:18:00.0","count":1},
 *    "init_ms":812,"total_ms":1034,
 *    "sizes":[{"bytes":1048576,"iters":5,"us":512.3,"algbw":2.04,
 *              "busbw":2.04,"wrong":0}, ...],
 *    "links":[{"fwd":2.61,"rev":2.58}, ...],"links_ms":212,
 *    "labels":["job-w-0 (node node-a, 10.9.0.1)", ...]}
 * links: with 3 or more ranks, ring link k joins rank k and rank k+1 (mod
 * world); fwd is k -> k+1 as rank k+1 timed its receive, rev k+1 -> k as
 * rank k timed it, each measured alone (lib/gpu/run.c).  labels: what
 * each rank's nicpick called its pod, gathered from the ranks themselves
 * so that every pod can name a slow one (empty above SMOKE_LABELS_MAX).
 */
#ifndef NP_SMOKE_RESULT_H
#define NP_SMOKE_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define SMOKE_RESULT_VERSION 2
#define SMOKE_RESULT_MAX_BYTES 65536
#define SMOKE_DEFAULT_BYTES (64L << 20)
#define SMOKE_MIN_BYTES 4096L
#define SMOKE_SIZES_MAX 8
#define SMOKE_PATH_MAX 512
#define SMOKE_TEXT_MAX 512
#define SMOKE_RING_MAX 1024    /* ranks whose ring links are measured */
#define SMOKE_LABELS_MAX 64    /* ranks whose labels travel in the result */
#define SMOKE_LABEL_MAX 96     /* one rank's label, NUL included */

enum smoke_phase {
	SMOKE_PHASE_LOAD,      /* loading libnccl / libcudart */
	SMOKE_PHASE_DEVICE,    /* driver and GPU */
	SMOKE_PHASE_INIT,      /* communicator creation */
	SMOKE_PHASE_ALLREDUCE, /* the collectives */
	SMOKE_PHASE_VERIFY,    /* checking the sums */
	SMOKE_PHASE_DONE,
};
const char *smoke_phase_name(enum smoke_phase p);

/* Why the smoke test cannot run on this node at all (auto skips). */
enum smoke_unavailable {
	SMOKE_AVAILABLE = 0,
	SMOKE_NO_COMPANION, /* nicpick-smoke not found */
	SMOKE_NO_NCCL,      /* no usable libnccl.so.2 */
	SMOKE_NO_CUDART,    /* no usable CUDA runtime */
	SMOKE_NO_DRIVER,    /* CUDA runtime present, no (new enough) driver */
	SMOKE_NO_GPU,       /* driver present, no GPU visible to this container */
};
const char *smoke_unavailable_name(enum smoke_unavailable u);

struct smoke_size {
	long bytes;
	int iters;
	double avg_us;
	double algbw_gbps; /* bytes / time, GB/s (1e9) */
	double busbw_gbps; /* algbw * 2(n-1)/n, as nccl-tests computes it */
	long wrong;        /* elements that differ from the exact sum */
};

struct smoke_result {
	bool ok;
	enum smoke_phase phase; /* reached, or failed in */
	char error[SMOKE_TEXT_MAX];
	enum smoke_unavailable unavailable;
	int rank, world;
	int nccl_version; /* ncclGetVersion(), 0 unknown */
	char nccl_path[SMOKE_PATH_MAX];
	int cuda_driver, cuda_runtime; /* 13000 = 13.0 */
	char cudart_path[SMOKE_PATH_MAX];
	char gpu[128];
	char gpu_bus[32];
	int gpu_count;
	int64_t init_ms, total_ms;
	size_t n_sizes;
	struct smoke_size sizes[SMOKE_SIZES_MAX];
	/* With 3 or more ranks: every ring link, GB/s, each direction timed
	 * alone at its receiver (all ranks learn all figures through an
	 * all-gather).  Empty otherwise. */
	size_t n_links;
	struct smoke_link {
		double fwd_gbps; /* rank k -> k+1 */
		double rev_gbps; /* rank k+1 -> k */
		bool rechecked;  /* timed again (smoke_links_recheck): each
				  * way the median of the three timings */
	} links[SMOKE_RING_MAX];
	int64_t links_ms; /* how long the link phases took on this rank */
	size_t n_labels;  /* world, or 0 */
	char labels[SMOKE_LABELS_MAX][SMOKE_LABEL_MAX];
};

/* The result message: writer and strict reader (unknown keys, wrong types,
 * out-of-range values and oversize input are refused, NP_ESMOKE). */
int smoke_result_to_json(const struct smoke_result *r, char **json, np_error *err);
int smoke_result_parse(const char *json, size_t len, struct smoke_result *out, np_error *err);

/* "64 MiB", "64 KiB", "100 B": how both programs name a size. */
void smoke_size_text(long bytes, char *buf, size_t len);

#endif
