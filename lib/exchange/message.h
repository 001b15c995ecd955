/* The messages of the exchange, as annotations on Pod objects: each has a
 * struct, one writer (compact JSON, keys sorted) and one strict reader
 * (unknown keys, wrong types, bad values and oversized text are refused,
 * like agree_report_parse).  A message that cannot be read came from
 * another pod through the API: NP_EK8S, "bad MESSAGE: reason".
 *
 *   nicpick.io/assignment  on each pod, from the gatherer: its part of a round
 *     {"v":1,"leader":UID,"leader_pod":NAME,"epoch":N,"state":"probe"|"measure"|"failed",
 *      "status":5,"reason":"..." (failed only),"n":PODS,"token":"<32 hex>",
 *      "parts":[{"net":"10.9.0.0/24","if":"eth1","addr":"10.9.0.3","next_pod":NAME,
 *                "next_addr":ADDR,"prev_addr":ADDR,"rank":1,"world":4,"root":ADDR,
 *                "min_mbps":100000}],
 *      "versions":"NCCL 2.21.5 on job-w-3 (node-d), 2.28.3 on the other 3 pods",
 *      "smoke_skip":"job-w-2: no-gpu",
 *      "warning":"the preferred network 10.9.0.0/24 failed its probe: ...",
 *      "floor":"NCCL 2.21.5 on job-w-3 ignores NCCL_CONF_FILE (read from 2.23.4): ..."}
 *     in a probe round one part per rail (the agreed networks, in the
 *     decision's order: one unless rails are on), one per tied network in
 *     a measure round, none when failed; the token (the round's, lib/probe)
 *     in every state but failed; versions, smoke_skip (agree_versions_compare),
 *     the probe warning and floor (agree_versions.floor) only when not
 *     failed and not empty.  prev_addr is the ring neighbour that probes
 *     this part, the only address whose probe the listener counts ("" when
 *     alone).
 *   nicpick.io/probe       on each pod: what its probes of the round found
 *     (the gatherer's goes with its next write on its pod: the round's
 *     end, or a progress write while it waits)
 *     {"v":1,"leader":UID,"epoch":N,"trials":[{"ok":true,"mbps":9400.5,"detail":"...",
 *      "route_if":"eth1"}]}
 *     route_if (optional, failed trials only): the route to the neighbour
 *     leaves through this other interface of the pod, on the same network
 *   nicpick.io/round       on the gatherer's pod: the state of the round
 *     {"v":1,"leader":UID,"epoch":N,"state":"probe"|"measure"|"final"|"failed",
 *      "status":4,"reason":"..." (failed only)}
 *   nicpick.io/progress    on the gatherer's pod: what it waits for
 *     {"v":1,"leader":UID,"leader_pod":NAME,"phase":"gather"|"probe","round":N,
 *      "expect":M,"created":K,"done":D,"missing":[NAME...],"missing_total":T,
 *      "probe":"...","refused":"job-3: bad report: ..."}
 *   nicpick.io/gatherer    on a pod that gathers, with its report: its claim
 *     {"v":1,"leader":UID,"pod":NAME,"why":"..."}
 *     a second gatherer of the job sees it and the job fails at once,
 *     naming both and why each thought it gathers
 *   nicpick.io/outcome     on each pod, last: how its nicpick ended (outcome.c)
 *     {"v":1,"ok":true,"status":0,"reason":"..." (not ok only),"epoch":N,
 *      "smoke":"passed"|"failed"|"skipped","busbw":1.73,"min_busbw":0.5,
 *      "suspect":"slow node: job-w-2 (node node-c, 10.9.0.3) (rank 2) ...",
 *      "slow_nodes":[2],"slow_link_ends":[],"nccl":22105,
 *      "warnings":1,"warning":"container train sets NCCL_SOCKET_IFNAME=...",
 *      "decision_id":"20261201T145000Z-1a2b3c4d"}
 *     busbw (GB/s at the largest size) only when the smoke test ran;
 *     decision_id (the output set's, lib/outputs: DIR/decision-ID and
 *     "decision_id" in its decision.json) only when ok and the outputs
 *     were written; an outcome without it (nicpick before it, or no
 *     --out-dir) is read as one with "";
 *     suspect, warning only when not empty.  The smoke test's ring-link
 *     verdict (lib/smoke/plan.c): slow_nodes are the ranks both of whose
 *     ring links are slow, slow_link_ends both ends of a slow link with no
 *     slow node at either end; both arrays only with suspect, at least one
 *     of them not empty.  nicpick.io/result is the same
 *     outcome as one line of text, for people.
 *
 * The report (nicpick.io/report) is lib/agree's agree_report. */
#ifndef NP_EXCHANGE_MESSAGE_H
#define NP_EXCHANGE_MESSAGE_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#include "agree/agree.h"
#include "probe/probe.h"
#include "util/err.h"

#define EXCHANGE_MSG_VERSION 1
#define EXCHANGE_MSG_MAX_BYTES 16384
#define EXCHANGE_PARTS_MAX 4 /* tied networks measured at once */
#define EXCHANGE_REASON_MAX 1024
#define EXCHANGE_DETAIL_MAX 256
#define EXCHANGE_MISSING_SHOWN 10 /* names in a progress message; the rest is a count */

enum exchange_state {
	EXCHANGE_PROBE,	  /* probe the ring neighbour on the part */
	EXCHANGE_MEASURE, /* measure throughput on each tied network */
	EXCHANGE_FINAL,	  /* round only: the parts of this round stand */
	EXCHANGE_FAILED,  /* no network: status and reason say why */
};

const char *exchange_state_name(enum exchange_state s);

/* One pod's part of one network. */
struct exchange_part {
	char net[AGREE_NET_TEXT_MAX]; /* "10.9.0.0/24", or "routed" */
	char ifname[IFNAMSIZ];
	char addr[AGREE_ADDR_TEXT_MAX];
	char next_pod[AGREE_NAME_MAX]; /* ring neighbour; "" when alone */
	char next_addr[AGREE_ADDR_TEXT_MAX];
	char prev_addr[AGREE_ADDR_TEXT_MAX]; /* who probes this part; "" when alone */
	int rank; /* agree_rail_rank */
	int world;
	char root[AGREE_ADDR_TEXT_MAX];
	long min_mbps;
};

struct exchange_assignment {
	char leader[AGREE_UID_MAX]; /* the gatherer's pod uid */
	char leader_pod[AGREE_NAME_MAX];
	int epoch; /* >= 1 */
	enum exchange_state state; /* probe, measure or failed */
	int status;		   /* failed: the exit status (enum np_status) */
	char reason[EXCHANGE_REASON_MAX];
	int n_pods;
	size_t n_parts;
	struct exchange_part parts[EXCHANGE_PARTS_MAX];
	/* Job-wide, from every pod's report: pods whose NCCL, CUDA or GPU
	 * differ from the majority, and pods where the smoke test cannot run
	 * (every pod then skips it, or fails with --smoke required); "" none. */
	char versions[AGREE_VERSIONS_TEXT_MAX];
	char smoke_skip[AGREE_VERSIONS_TEXT_MAX];
	char token[PROBE_TOKEN_MAX]; /* the round's probe token; "" when failed */
	/* Job-wide: why the job left a network that failed its probe; "" none. */
	char warning[EXCHANGE_REASON_MAX];
	char floor[AGREE_VERSIONS_TEXT_MAX]; /* agree_versions.floor */
};

struct exchange_trial {
	bool ok;
	double mbps;
	char detail[EXCHANGE_DETAIL_MAX];
	/* Failed because the route to the neighbour leaves through this other
	 * interface of the pod, on the same network: try it ("" otherwise). */
	char route_if[IFNAMSIZ];
};

struct exchange_probe {
	char leader[AGREE_UID_MAX];
	int epoch;
	size_t n;
	struct exchange_trial t[EXCHANGE_PARTS_MAX];
};

struct exchange_round {
	char leader[AGREE_UID_MAX];
	int epoch;
	enum exchange_state state;
	int status; /* failed */
	char reason[EXCHANGE_REASON_MAX];
};

enum exchange_phase { EXCHANGE_GATHERING, EXCHANGE_PROBING };

struct exchange_progress {
	char leader[AGREE_UID_MAX];
	char leader_pod[AGREE_NAME_MAX];
	enum exchange_phase phase;
	int round;   /* 0 before the first decision */
	int expect;  /* pods the job should have */
	int created; /* of them, pods that exist */
	int done;    /* reported (gathering) or probed (probing) */
	int missing_total; /* pods that exist and are not done */
	size_t n_missing;  /* at most EXCHANGE_MISSING_SHOWN of them, by name */
	char missing[EXCHANGE_MISSING_SHOWN][AGREE_NAME_MAX];
	char probe[EXCHANGE_DETAIL_MAX]; /* the probe's status, "" before one */
	char refused[EXCHANGE_DETAIL_MAX]; /* "pod: why" of a missing pod whose
					    * report or probe was refused, or "" */
};

struct exchange_claim {
	char leader[AGREE_UID_MAX]; /* the claiming pod's uid */
	char pod[AGREE_NAME_MAX];
	char why[EXCHANGE_DETAIL_MAX]; /* the rule or option that made it gather */
};

/* Writers: *json is malloc'd.  Text fields are cut to fit and their
 * control characters replaced, so that the reader takes what they wrote. */
int exchange_assignment_to_json(const struct exchange_assignment *a, char **json, np_error *err);
int exchange_probe_to_json(const struct exchange_probe *p, char **json, np_error *err);
int exchange_round_to_json(const struct exchange_round *r, char **json, np_error *err);
int exchange_progress_to_json(const struct exchange_progress *p, char **json, np_error *err);
int exchange_claim_to_json(const struct exchange_claim *c, char **json, np_error *err);

/* Strict readers (never crash on any input).  NP_EK8S on error. */
int exchange_assignment_parse(const char *json, size_t len, struct exchange_assignment *out,
			      np_error *err);
int exchange_probe_parse(const char *json, size_t len, struct exchange_probe *out, np_error *err);
int exchange_round_parse(const char *json, size_t len, struct exchange_round *out, np_error *err);
int exchange_progress_parse(const char *json, size_t len, struct exchange_progress *out,
			    np_error *err);
int exchange_claim_parse(const char *json, size_t len, struct exchange_claim *out, np_error *err);

/* "3/4 pods reported; missing: job-2, job-3 (+5 more); pods not created
 * yet: 1 of 4; round 2 ..." for log lines and deadline messages. */
void exchange_progress_text(const struct exchange_progress *p, char *buf, size_t len);

/* How this pod's nicpick ended (nicpick.io/outcome). */
#define EXCHANGE_SUSPECTS_MAX 8 /* ranks one verdict names (SMOKE_NAMED_MAX) */
#define EXCHANGE_DECISION_ID_MAX 40 /* OUTPUTS_ID_MAX */
enum exchange_smoke { EXCHANGE_SMOKE_SKIPPED, EXCHANGE_SMOKE_PASSED, EXCHANGE_SMOKE_FAILED };
const char *exchange_smoke_name(enum exchange_smoke s);

struct exchange_outcome {
	bool ok;
	int status; /* the exit status (enum np_status); 0 when ok */
	char reason[EXCHANGE_REASON_MAX]; /* not ok: the error */
	int epoch;  /* the round the pod ended in, 0 before one */
	enum exchange_smoke smoke;
	bool has_busbw;
	double busbw;     /* GB/s at the largest size, when the test ran */
	double min_busbw; /* the floor it was held to, 0 none */
	char suspect[EXCHANGE_DETAIL_MAX * 2]; /* the verdict's text, "" none */
	/* The ranks it names: the slow nodes themselves, and both ends of a
	 * lone slow link. */
	size_t n_slow_nodes, n_slow_link_ends;
	int slow_nodes[EXCHANGE_SUSPECTS_MAX];
	int slow_link_ends[EXCHANGE_SUSPECTS_MAX];
	int nccl;         /* ncclGetVersion(), 0 unknown */
	int warnings;     /* pod settings that override the outputs */
	char warning[EXCHANGE_DETAIL_MAX * 2]; /* the first of them, "" none */
	/* The output set this run wrote (OUTPUTS_ID_MAX), "" none. */
	char decision_id[EXCHANGE_DECISION_ID_MAX];
};

int exchange_outcome_to_json(const struct exchange_outcome *o, char **json, np_error *err);
int exchange_outcome_parse(const char *json, size_t len, struct exchange_outcome *out,
			   np_error *err);

#endif
