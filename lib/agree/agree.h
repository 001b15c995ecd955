/* Job-wide agreement: every pod publishes a report of its usable candidates
 * (an annotation on its own Pod object), one pod gathers all reports and
 * decides; lib/exchange hands every pod its part of the decision.
 *
 * The decision is a pure, deterministic function of the set of reports, so
 * it is unit-tested and replayed offline.  Nothing here assumes one
 * interface per pod: a decision holds rails, each rail one network with an
 * interface and address per pod.  The first rail is the best network; with
 * agree_options.max_rails above 1 the next ones are the other networks of
 * the same quality (the same worst-case speed, known, and the same
 * worst-case score, on the same family), each pod on a different
 * interface on each (agree_decide).
 *
 * Report (annotation value), compact JSON, at most AGREE_REPORT_MAX_BYTES:
 *
 *   {"v":1,"pod":"job-w-3","uid":"...","node":"nodeA","host":"...",
 *    "c":[{"if":"ens3f0","cls":"physical","fam":4,"addr":"10.9.0.3","plen":24,
 *          "gw":"10.9.0.254","mbps":100000,"score":1234,"rdma":"mlx5_0:1",
 *          "mtu":9000}, ...]}
 *
 *   v      report format version (AGREE_REPORT_VERSION)
 *   pod    the pod's name (required, non-empty)
 *   uid    the pod's UID ("" when unknown)
 *   node   spec.nodeName ("" when unknown)
 *   host   optional: host name, informational
 *   c      candidates, best first; one entry per (interface, global address)
 *     if    interface name on that node (names differ per node)
 *     cls   nic_class_name() of the interface
 *     fam   4 or 6
 *     addr  the address, plen its prefix length (IPv4 1..32, IPv6 1..128)
 *     gw    optional: a gateway of the same family reached through `if`;
 *           only candidates with one may be used for a routed decision
 *     mbps  effective speed in Mb/s, -1 unknown
 *     score the policy score on that node (higher is better)
 *     rdma  optional: "hca:port" of an active RDMA port on the interface
 *     mtu   the interface's MTU, 0 unknown
 *     rt    optional: true when the kernel routes this candidate's subnet
 *           through `if`, false when through another interface; only on
 *           candidates that share their subnet with another of the report.
 *           The agreement assigns a pod the routed one of such a group.
 *   gpu    optional (report version 2): what the smoke test would use here,
 *          {"smoke":"","nccl":22809,"driver":13000,"runtime":13000,
 *           "model":"NVIDIA H200"}; smoke is "" when it can run, else
 *          smoke_unavailable_name() ("no-gpu", ...); 0 / "" unknown.  A
 *          report without it (version 1, or --smoke off) is read as before.
 *
 * Reading is strict: unknown keys, wrong types, missing keys, bad values and
 * duplicates are refused.  A report that cannot be read came from another
 * pod through the Kubernetes API, so it is an NP_EK8S error
 * ("bad report from pod X: reason"); a newer version says so. */
#ifndef NP_AGREE_H
#define NP_AGREE_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "nic/nic.h"
#include "policy/policy.h"
#include "util/err.h"
#include "util/prefix.h"

#define AGREE_REPORT_VERSION 2 /* 2: the optional "gpu" block */
#define AGREE_DECISION_VERSION 1 /* of decision.json's "decision" */
#define AGREE_REPORT_MAX_BYTES 16384
#define AGREE_CAND_MAX 64		/* entries in one report */
#define AGREE_NAME_MAX 254		/* DNS subdomain (253) + NUL */
#define AGREE_UID_MAX 129
#define AGREE_CLS_MAX 16
#define AGREE_RDMA_MAX 72
#define AGREE_ADDR_TEXT_MAX 46 /* INET6_ADDRSTRLEN */
#define AGREE_NET_TEXT_MAX 50  /* address + "/128" */
#define AGREE_WHY_MAX 256
#define AGREE_RAILS_MAX 8
#define AGREE_RAILS_AUTO (-1) /* agree_options.max_rails: every equivalent rail */
#define AGREE_EXCLUDED_MAX 32
#define AGREE_NETS_KEEP 32  /* ranked networks kept in a decision */
#define AGREE_TABLE_KEEP 64 /* per-pod rows kept in a decision */
#define AGREE_PODS_MAX 65536
#define AGREE_GPU_MODEL_MAX 128
#define AGREE_SMOKE_WHY_MAX 24
#define AGREE_VERSIONS_TEXT_MAX 1024 /* the job-wide warning and skip reason */

/* Whether the kernel routes a candidate's subnet through its interface:
 * known (and reported) only where a pod has several candidates on one
 * subnet, the one case where it decides which interface NCCL must use. */
enum agree_route {
	AGREE_ROUTE_UNKNOWN,
	AGREE_ROUTE_USED,   /* "rt":true */
	AGREE_ROUTE_UNUSED, /* "rt":false: the route to the subnet leaves elsewhere */
};

struct agree_cand {
	char ifname[IFNAMSIZ];
	char cls[AGREE_CLS_MAX];
	int family; /* AF_INET or AF_INET6 */
	unsigned char addr[16];
	char addr_text[AGREE_ADDR_TEXT_MAX];
	int prefixlen;
	bool has_gw;
	unsigned char gw[16];
	char gw_text[AGREE_ADDR_TEXT_MAX];
	long mbps; /* -1 unknown */
	long score;
	char rdma[AGREE_RDMA_MAX]; /* "" none */
	int mtu;		   /* 0 unknown */
	enum agree_route route;	   /* "rt" */
};

/* What the smoke test would use on a pod (nicpick-smoke info). */
struct agree_gpu {
	bool has;  /* the block is in the report */
	char smoke[AGREE_SMOKE_WHY_MAX]; /* "" available, else "no-gpu", ... */
	int nccl;  /* ncclGetVersion(), 0 unknown */
	int driver, runtime; /* CUDA, 13000 = 13.0; 0 unknown */
	char model[AGREE_GPU_MODEL_MAX]; /* "" unknown */
	/* How this pod's training container gets the variables: "file"
	 * (NCCL_CONF_FILE alone), or "" (nccl.env, or not seen), and where it
	 * sees nccl.env ("" unknown): the job's NCCL floor depends on it. */
	char delivery[8];
	char nccl_env[AGREE_NAME_MAX];
};

struct agree_report {
	char pod[AGREE_NAME_MAX];
	char uid[AGREE_UID_MAX];
	char node[AGREE_NAME_MAX];
	char host[AGREE_NAME_MAX]; /* "" when not given */
	struct agree_gpu gpu;
	size_t n;
	struct agree_cand c[AGREE_CAND_MAX];
};

/* A report as the decision reads it: borrowed pointers to what one pod
 * reported, and no more.  The gatherer keeps a job's reports this way,
 * each sized by its own candidates (a whole agree_report is sized for
 * AGREE_CAND_MAX); agree_report_view() views a whole one. */
struct agree_view {
	const char *pod;
	const char *node;
	const struct agree_gpu *gpu; /* NULL or !has: no gpu block */
	size_t n;
	const struct agree_cand *c;
};

struct agree_view agree_report_view(const struct agree_report *r);

/* Fill a report from this node's interfaces: every usable interface in
 * ranking order, one entry per global address (the one the policy chose
 * first).  Gateways are not known here; a caller that knows them sets
 * has_gw/gw before agree_report_to_json().  Returns the number of entries
 * dropped because the report was full (0 normally), or -1. */
int agree_report_from_nics(const char *pod, const char *uid, const char *node,
			   const struct nic_list *nics, const struct policy_ranking *ranking,
			   struct agree_report *out, np_error *err);

/* Serialize; if the JSON would exceed AGREE_REPORT_MAX_BYTES, the
 * lowest-ranked entries are dropped until it fits.  Returns the number of
 * entries dropped (0 normally, it never exceeds the limit), or -1.  *json
 * is malloc'd. */
int agree_report_to_json(const struct agree_report *r, char **json, np_error *err);

/* Strict reader (never crashes on any input, fuzzed).  NP_EK8S on error. */
int agree_report_parse(const char *json, size_t len, struct agree_report *out, np_error *err);

/* The job's smoke-test versions compared (pure; reports without a gpu
 * block are left out).  warning: the pods whose NCCL version, CUDA driver
 * or runtime, or GPU model differ from the majority, "NCCL 2.21.5 on
 * job-w-3 (node-d), 2.28.3 on the other 3 pods; ..." ("" when all agree).
 * unavailable: the pods where the smoke test cannot run, "job-w-2: no-gpu,
 * job-w-5: no-driver" ("" none).  Both are cut to fit, with a count of the
 * pods left out. */
struct agree_versions {
	char warning[AGREE_VERSIONS_TEXT_MAX];
	char unavailable[AGREE_VERSIONS_TEXT_MAX];
	/* pods whose NCCL ignores the nccl.conf their training reads: "NCCL
	 * 2.21.5 on job-w-3 ignores NCCL_CONF_FILE (read from 2.23.4): ..." */
	char floor[AGREE_VERSIONS_TEXT_MAX];
};
/* NCCL reads NCCL_CONF_FILE from 2.23.4 (src/misc/param.cc: v2.21.5-1's
 * initEnv reads only ~/.nccl.conf and /etc/nccl.conf; v2.23.4-1's
 * initEnvFunc reads getenv("NCCL_CONF_FILE") first). */
#define AGREE_NCCL_CONF_FILE_FLOOR 22304
void agree_versions_compare(const struct agree_report *reports, size_t n, struct agree_versions *out);
void agree_versions_compare_views(const struct agree_view *reports, size_t n, struct agree_versions *out);

/* A network of the decision, and its text. */
struct agree_network {
	struct np_prefix pfx;
	char text[AGREE_NET_TEXT_MAX]; /* "10.9.0.0/24"; "routed" for a routed rail */
};

/* "10.9.0.0/24" or "fd00::/64"; host bits are cleared. NP_EUSAGE on error. */
int agree_network_parse(const char *cidr, struct agree_network *out, np_error *err);

struct agree_options {
	int family; /* AF_UNSPEC: both, IPv4 preferred; AF_INET / AF_INET6: only that */
	bool has_cidr;
	struct np_prefix cidr; /* only networks inside it (--cidr) */
	bool no_routed;		   /* never fall back to a routed decision */
	/* Rails: 0 or 1: one network; N: up to N networks of the same
	 * quality; AGREE_RAILS_AUTO: every one (at most AGREE_RAILS_MAX). */
	int max_rails;
	/* Networks removed after a failed probe: decide again without them. */
	size_t n_excluded;
	struct agree_network excluded[AGREE_EXCLUDED_MAX];
};

/* One pod's part of a rail. */
struct agree_assign {
	char pod[AGREE_NAME_MAX];
	char ifname[IFNAMSIZ]; /* that pod's own name for the network */
	int family;
	char addr[AGREE_ADDR_TEXT_MAX];
	int prefixlen;
};

struct agree_rail {
	struct agree_network net; /* routed: family set, length 0, "routed" */
	long min_mbps;		  /* worst case over pods */
	long min_score;
	size_t n_assign; /* one per pod, sorted by pod name */
	struct agree_assign *assign;
};

/* A network seen in the reports and what became of it. */
struct agree_ranked {
	struct agree_network net;
	size_t n_pods; /* pods with a candidate on it */
	long min_mbps; /* over those pods */
	long min_score;
	bool eligible; /* on every pod, no duplicate, not excluded */
	char why[AGREE_WHY_MAX]; /* "chosen", or why it lost */
};

/* When no network is common: one pod, its candidates, what it lacks. */
struct agree_pod_row {
	char pod[AGREE_NAME_MAX];
	char cands[AGREE_WHY_MAX]; /* "eth1 10.9.0.3/24 100000Mb/s, ..." */
	char why[AGREE_WHY_MAX];   /* "no candidate on 10.9.0.0/24 (7 of 8 pods); ..." */
};

struct agree_decision {
	bool ok;
	bool routed; /* pods use addresses in different subnets via gateways */
	size_t n_pods;
	size_t n_rails;
	struct agree_rail rails[AGREE_RAILS_MAX];
	size_t n_nets; /* best first, at most AGREE_NETS_KEEP */
	size_t nets_total;
	struct agree_ranked *nets;
	size_t n_table; /* only when !ok, at most AGREE_TABLE_KEEP */
	size_t table_total;
	struct agree_pod_row *table;
	size_t n_excluded;
	struct agree_network excluded[AGREE_EXCLUDED_MAX];
	char error[NP_ERR_MSG_MAX]; /* when !ok */
};

/* Decide for the whole job.  Pure and deterministic: the same set of
 * reports in any order gives the same decision.  `out` is always filled
 * (free it with agree_decision_free); when no network is common it returns
 * -1 with NP_ENOCOMMON, out->ok false and the per-pod table in out->table.
 * opt may be NULL. */
int agree_decide(const struct agree_report *reports, size_t n, const struct agree_options *opt,
		 struct agree_decision *out, np_error *err);
/* The same over views (the gatherer's compact reports). */
int agree_decide_views(const struct agree_view *reports, size_t n, const struct agree_options *opt,
		       struct agree_decision *out, np_error *err);
void agree_decision_free(struct agree_decision *d);


/* The smoke test's place of one pod on a rail: the gatherer is rank 0, the
 * other pods follow in the rail's order (pod name), skipping the gatherer;
 * root is the gatherer's address on the rail. */
struct agree_rank {
	int rank;
	int world;
	char root_addr[AGREE_ADDR_TEXT_MAX];
	long min_mbps; /* the rail's worst-case speed */
};

/* NP_EINTERNAL when pod or the gatherer is not on the rail. */
int agree_rail_rank(const struct agree_rail *rail, const char *gatherer, const char *pod,
		    struct agree_rank *out, np_error *err);

#endif
