/* The smoke all-reduce: a small NCCL all-reduce across the job's pods, with
 * exactly the environment nicpick writes, that proves the chosen network.
 *
 * It runs in two processes.  `nicpick-smoke` (cmd/nicpick-smoke) is a small
 * dynamically linked program: it dlopens NCCL and the CUDA runtime, runs one
 * rank and prints one result message on standard output.  `nicpick` spawns
 * it with an explicit environment, reads the message with a strict reader,
 * reads NCCL's own debug log, and kills the companion if it outlives the
 * deadline: NCCL runs non-blocking under the deadline and is aborted, and
 * the kill is the backstop, so the smoke test can fail but never hang the
 * pod.  A static nicpick cannot dlopen at all, which is the other reason for
 * the split.
 *
 * The result message the two share is lib/smoke/result.h; the companion
 * itself is lib/gpu.
 */
#ifndef NP_SMOKE_H
#define NP_SMOKE_H

#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smoke/result.h"
#include "util/err.h"

#define SMOKE_DEFAULT_PORT 29418

/* ---- The ring links (lib/gpu/run.c times each on its own) ---- */

/* A link is slow below this fraction of the fastest link (each link
 * counted by its slower direction): a 2 Gbit/s node among 25 Gbit/s ones,
 * not the noise between healthy links (measured within 10 %, docs/smoke.md). */
#define SMOKE_SLOW_LINK_FRACTION 0.5
/* A lone slow link (no slow node at either end) is named only below this
 * fraction: a slow node shows on two links, which confirm each other; a
 * lone link shows once, and on a GPU shared by three pods one healthy
 * link measured 0.49 of the fastest even when timed three times
 * (docs/smoke.md).  A bad cable or port among healthy ones is far below. */
#define SMOKE_LONE_LINK_FRACTION (1.0 / 3)
#define SMOKE_NAMED_MAX 8  /* ranks named by one verdict */
#define SMOKE_LINKS_SHOWN 16 /* links in the one-line summary */

struct smoke_links_verdict {
	double ref_gbps;             /* the fastest link */
	size_t n_slow;
	bool slow[SMOKE_RING_MAX];   /* link k: rank k <-> k+1 */
	size_t n_named;
	int named[SMOKE_NAMED_MAX];  /* ranks */
	bool both[SMOKE_NAMED_MAX];  /* ... both of whose links are slow (the
				      * suspect), else one end of a slow link */
};

/* Pure.  Which nodes the link figures name: a rank whose incoming and
 * outgoing ring links are both slow is the suspect; a slow link with no
 * suspect at either end names both its ends when it is below
 * SMOKE_LONE_LINK_FRACTION of the fastest.  Returns n_named (0 with
 * fewer than 3 links). */
size_t smoke_links_judge(const struct smoke_result *r, struct smoke_links_verdict *v);
/* Pure.  Which links the companion times again before the verdict: every
 * link that looks slow, and the fastest (the reference), so that one bad
 * timing of either (a shared GPU, a busy core) names nobody.  Marks
 * recheck[] and returns how many; 0 when nothing looks slow. */
#define SMOKE_RECHECK_ROUNDS 2 /* timings again, one transfer each way */
size_t smoke_links_recheck(const struct smoke_result *r, bool recheck[SMOKE_RING_MAX]);
/* Pure.  A rechecked link's figure each way: the median of its first
 * timing and its SMOKE_RECHECK_ROUNDS timings again (again[round]). */
void smoke_link_settle(struct smoke_link *l, const struct smoke_link again[SMOKE_RECHECK_ROUNDS]);
/* "job-w-2 (node node-c, 10.9.0.3) (rank 2)", or "rank 2" without labels. */
void smoke_rank_label(const struct smoke_result *r, int rank, char *buf, size_t len);
/* The verdict in one line ("" when nothing is named). */
void smoke_links_text(const struct smoke_result *r, const struct smoke_links_verdict *v, char *buf,
		      size_t len);
/* Per-link figures, GB/s each way: "0>1 2.61 1>0 2.58, 1>2 0.25 2>1 0.24, ...". */
void smoke_links_figures(const struct smoke_result *r, char *buf, size_t len);

/* "2.28.9" from 22809 (and 2.8.4 from 2804, the pre-2.9 encoding). */
void smoke_nccl_version_text(int code, char *buf, size_t len);
/* "13.0" from 13000. */
void smoke_cuda_version_text(int code, char *buf, size_t len);

/* ---- NCCL's own log ---- */

#define SMOKE_LOG_IFS_MAX 16
#define SMOKE_LOG_LINES_KEEP 3

struct smoke_log_if {
	/* An interface, or "hca:port" for NET/IB, byte for byte as NCCL
	 * printed it (';' and non-ASCII kept; a control byte becomes '?'). */
	char name[72];
	char addr[64]; /* "10.9.0.1" (the <port> suffix removed) */
};

/* What a net plugin's name says it is: NCCL's own "IB" and the HPC-X
 * plugin's "IBext"/"IBext_v8" drive verbs HCAs and print NCCL's NET/IB
 * lines; "Socket" is NCCL's TCP transport; aws-ofi-nccl calls itself "AWS
 * Libfabric" (1.11.0 and before) or "Libfabric"; anything else is a plugin
 * nicpick knows nothing of. */
enum smoke_net_family {
	SMOKE_NET_NONE,
	SMOKE_NET_SOCKET,
	SMOKE_NET_IB,
	SMOKE_NET_OFI,
	SMOKE_NET_OTHER,
};
enum smoke_net_family smoke_net_family(const char *name);

struct smoke_log {
	char version[48]; /* "2.28.9+cuda13.0" from "NCCL version ..." */
	char network[64]; /* "Socket", "IB", "IBext_v8", "AWS Libfabric" from "Using network X" */
	size_t n_socket;  /* NET/Socket : Using [0]eth1:10.1.0.11<0> ... */
	struct smoke_log_if socket[SMOKE_LOG_IFS_MAX];
	/* NET/IB : Using [0]mlx5_0:1/RoCE ...; OOB eth1:10.1.0.11<0>, the
	 * devices of a merged one ([0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB},
	 * 2.20-2.23) each on its own. */
	size_t n_ib;
	struct smoke_log_if ib[SMOKE_LOG_IFS_MAX];
	bool ib_merged;
	bool has_oob;
	struct smoke_log_if oob;
	bool has_bootstrap; /* "Bootstrap : Using" (< 2.24) or "Bootstrap: Using" */
	struct smoke_log_if bootstrap;
	bool has_boot_dev;  /* "Bootstrap: Using mlx5_0:1" (NCCL_OOB_NET_ENABLE, 2.24+) */
	struct smoke_log_if boot_dev;
	/* The first line that says NCCL's IB transport is not there ("NET/IB :
	 * No device found.", "Failed to open libibverbs.so[.1]", "Failed to
	 * initialize NET plugin IB", "NCCL_IB_DISABLE set by environment to 1."). */
	char ib_absent[SMOKE_TEXT_MAX / 4];
	size_t n_channels;     /* "Channel .. via NET/<transport>/<dev>" lines */
	char channel_net[64];  /* the transport of the first such line */
	bool channel_mixed;    /* ... and another transport was seen too */
	size_t n_local;        /* channels via anything else: P2P, SHM, NVLS, ... */
	size_t n_warn;
	char warn[SMOKE_LOG_LINES_KEEP][SMOKE_TEXT_MAX / 2]; /* first NCCL WARN lines */
	bool init_complete;    /* "Init COMPLETE" */
};

/* Parse NCCL_DEBUG=INFO output (any subsystems; lines of other ranks and
 * other programs are tolerated).  Pure; never fails on any input. */
void smoke_log_parse(const char *buf, size_t len, struct smoke_log *out);

/* How NCCL picked its bootstrap interface in the run that wrote the log.
 * Training started by torch sets no NCCL_COMM_ID, and then the bootstrap
 * follows NCCL_SOCKET_IFNAME (ncclFindInterfaces); with NCCL_COMM_ID set,
 * as the smoke step sets it to reach rank 0, NCCL takes the first
 * interface whose subnet holds rank 0's address and ignores
 * NCCL_SOCKET_IFNAME (ncclFindInterfaceMatchSubnet, bootstrap.cc and
 * misc/socket.cc, 2.18-2.28). */
enum smoke_boot_rule {
	SMOKE_BOOT_IFNAME, /* the bootstrap line must name an agreed interface */
	SMOKE_BOOT_SUBNET, /* it says nothing of NCCL_SOCKET_IFNAME: recorded only */
};

struct smoke_log_want {
	const char *const *ifs; /* NCCL_SOCKET_IFNAME's interfaces (rails: several) */
	size_t n_ifs;
	const char *hca;        /* NCCL_IB_HCA without '=', or NULL: no RDMA expected */
	enum smoke_boot_rule boot;
	int world;              /* ranks: with one, no data crosses a network */
};

/* Did NCCL use the agreed network?  0: the log shows it did; 1: the log
 * cannot show it (no channel ran over the network, or over a plugin whose
 * devices nicpick cannot see), err says why; -1: NCCL used something
 * else, err says what, quoting NCCL.  err's status is NP_ESMOKE. */
int smoke_log_check(const struct smoke_log *log, const struct smoke_log_want *w, np_error *err);

/* ---- Running the companion (nicpick side) ---- */

struct smoke_opts {
	const char *companion;   /* path of nicpick-smoke */
	char *const *base_env;   /* the environment to start from (NULL: empty) */
	const char *const *vars; /* KEY, VALUE, KEY, VALUE, ..., NULL: what the
				  * companion gets (nicpick's outputs, or
				  * NCCL_CONF_FILE), replacing base_env's */
	const char *const *unset; /* KEY, ..., NULL: left out of base_env too */
	const char *label;       /* this rank's pod, node and address, or NULL */
	bool no_links;           /* --no-links: no ring link timing */
	int rank, world;
	const char *comm_id; /* NCCL_COMM_ID: "10.9.0.1:29418" or "[fd00::1]:29418";
			      * NULL (info only): not set */
	long max_bytes;
	int gpu;            /* CUDA device index (0: the first the pod sees) */
	int64_t deadline_ms; /* CLOCK_MONOTONIC */
	const char *log_dir; /* NCCL_DEBUG_FILE goes here (must exist); NULL
			      * (info only): no NCCL_DEBUG* set */
	const volatile sig_atomic_t *cancel; /* the run's (util/cancel.h); NULL none */
};

/* NCCL_DEBUG_FILE for files in dir: "DIR/NAME.%h.%p" (host and pid), each
 * '%' of dir doubled, as NCCL reads it (debug.cc, ncclDebugInit: "%%" is
 * one '%', "%h" the host).  -1 when it does not fit len. */
int smoke_debug_file(char *buf, size_t len, const char *dir, const char *name);

/* Find the companion: explicit (NICPICK_SMOKE_BIN), else beside self_exe,
 * else on path_env.  Returns 0 and the path, or -1 (NP_ESMOKE). */
int smoke_find_companion(const char *explicit_path, const char *self_exe, const char *path_env,
			 char *out, size_t len, np_error *err);

/* Run one rank (info_only: only load the libraries and query the GPU).
 * Returns 0 when the companion produced a result (which may say it
 * failed), -1 when it could not be run, overran the deadline or produced
 * no readable result (NP_ESMOKE); when the deadline backstop had to kill
 * it, the error says so. */
int smoke_spawn(const struct smoke_opts *o, bool info_only, struct smoke_result *r, np_error *err);

/* Read every NCCL debug file the companion left in dir and parse them. */
int smoke_log_read_dir(const char *dir, struct smoke_log *log, np_error *err);

/* ---- The verdict ---- */

struct smoke_expect {
	const char *const *ifs; /* this pod's agreed interfaces (NULL/0: NCCL's choice) */
	size_t n_ifs;
	const char *ib_hca;   /* NCCL_IB_HCA without '=', or NULL */
	enum smoke_boot_rule boot;
	bool required;        /* --smoke required: a run the log cannot prove fails */
	double min_busbw;     /* GB/s; 0: none */
	char min_busbw_why[128]; /* "--min-busbw 5" or "5% of the slowest agreed link (100000 Mb/s)" */
};

/* Default threshold: a fraction of the slowest agreed link's line rate,
 * low enough that NCCL's socket defaults pass (measured: 2.7 GB/s of a
 * 12.5 GB/s link) and high enough that a management NIC (1-10 Gb/s)
 * carrying the job fails.  0 when the speed is unknown. */
double smoke_default_min_busbw(long min_mbps);
/* ... applied only when the largest all-reduce is at least this big: below
 * it latency, not the link, sets the figure. */
#define SMOKE_DEFAULT_MIN_SIZE (8L << 20)

/* Judge a finished run: the result itself, the exact sums, NCCL's log and
 * the bandwidth.  Returns 0, or -1 with NP_ESMOKE and one line that names
 * the phase and the figures ("slow network: busbw 0.24 GB/s at 64 MiB <
 * 0.62 GB/s (5% of ...)").  Returns 1 when the run passed but NCCL's log
 * cannot prove the network ("not proven: ...", in err), unless
 * x->required, where that is -1. */
int smoke_judge(const struct smoke_result *r, const struct smoke_log *log,
		const struct smoke_expect *x, np_error *err);

/* ---- What a pod records ---- */

#define SMOKE_SOURCES_MAX 48

enum smoke_status { SMOKE_SKIPPED, SMOKE_PASSED, SMOKE_FAILED };

/* The smoke step's part of decision.json ("smoke"), the annotation and the
 * Event.  rank/world/comm_id are kept even when it was skipped, so that
 * `nicpick smoke --out-dir` can run it later. */
struct smoke_report {
	enum smoke_status status;
	char reason[NP_ERR_MSG_MAX]; /* skipped: why; failed: the verdict */
	int rank, world;
	char comm_id[80];
	char ifname[IFNAMSIZ];
	char ib_hca[512]; /* "" none */
	double min_busbw;
	char min_busbw_why[128];
	int64_t verdict_ms; /* from the start of the step to the verdict */
	char not_proven[NP_ERR_MSG_MAX]; /* passed, but "not proven: ..." (auto) */
	struct smoke_links_verdict links; /* ran with 3 or more ranks */
	char links_text[1024]; /* smoke_links_text(), "" none named */
	bool slow_link_fails;  /* --slow-link fail: a named node fails the step */
	/* How the companion got the variables: as the training container
	 * will (lib/jobs/train.c), and where each came from. */
	char delivery[8];   /* "file", "env", "unseen" ("" before the step) */
	char delivery_why[512];
	char train_container[256];
	size_t n_sources;
	struct smoke_source {
		char var[64];
		char value[256];
		char from[16]; /* "nicpick", "nccl.conf", "container" */
	} sources[SMOKE_SOURCES_MAX];
	size_t n_unknown;   /* set where nicpick cannot see the value */
	char unknown[16][300];
	char floor[1024];   /* job-wide: a pod whose NCCL ignores its nccl.conf */
	bool ran;           /* result and log are filled */
	struct smoke_result result;
	struct smoke_log log;
	char debug_dir[SMOKE_PATH_MAX]; /* "" unless --nccl-debug kept the files */
};

const char *smoke_status_name(enum smoke_status s);
/* One line for logs, the annotation and the Event. */
void smoke_report_summary(const struct smoke_report *s, char *buf, size_t len);

#endif
