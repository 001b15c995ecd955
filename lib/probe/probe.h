/* Reachability checks between the job's pods on the agreed network, before
 * anything is written: a TCP exchange in which the listener reports the
 * source address it saw (this catches NAT and wrong routes), and a netlink
 * route lookup that the path to a peer leaves through the chosen device.
 *
 * Under hostNetwork the probe port is open to every host on the node's
 * networks, so the listener trusts nobody: a probe counts only when it
 * carries the round's token (the gatherer puts it in every assignment) and
 * comes from the expected peer's address; anything else is dropped without
 * counting as a failure.  Every connection, accepted or opened, ends by the
 * deadline it was given, and stopping never waits on a peer. */
#ifndef NP_PROBE_H
#define NP_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"
#include "util/prefix.h"
#include "util/wait.h"

#define PROBE_DEFAULT_PORT 29417
#define PROBE_ADDR_MAX 64
/* The round's token: 32 lowercase hex digits (128 random bits). */
#define PROBE_TOKEN_LEN 32
#define PROBE_TOKEN_MAX (PROBE_TOKEN_LEN + 1)
/* A connection must send its hello line within this bound. */
#define PROBE_HELLO_MS 2000
/* A payload (--probe-throughput) slower than this is cut off: after a
 * grace of PROBE_RATE_GRACE_MS, the bytes received must keep up with it. */
#define PROBE_MIN_RATE_BPS 1000000L /* 1 MB/s, 8 Mbit/s */
#define PROBE_RATE_GRACE_MS 1000
/* Connections in their handshake at once: a pool for the expected peer's
 * address, which no other host can fill, and one for everyone else. */
#define PROBE_PEER_SLOTS 8
#define PROBE_OTHER_SLOTS 24

/* A fresh token from the kernel's random pool. */
int probe_token_new(char token[PROBE_TOKEN_MAX], np_error *err);
/* 32 lowercase hex digits. */
bool probe_token_ok(const char *token);

struct probe_server_opts {
	const char *addr;      /* listen here */
	int port;	       /* 0 picks one; probe_server_port tells which */
	const char *token;     /* the round's token; a probe without it is dropped */
	const char *peer_addr; /* the expected prober; NULL or "": any address */
	long max_payload;      /* bytes a probe may send (the round's
				* --probe-throughput); 0: none */
	int64_t deadline_ms;   /* CLOCK_MONOTONIC; no connection outlives it */
};

/* What the listener made of one hello line, given the source address of the
 * connection.  Pure: the whole authentication check. */
enum probe_hello {
	PROBE_HELLO_OK,	     /* the round's token, from the expected peer */
	PROBE_HELLO_FOREIGN, /* the round's token from another address (NAT, or
			      * someone who read the token): answered with the
			      * address seen, never counted as the peer's probe */
	PROBE_HELLO_BAD,     /* not a probe of this round: dropped */
};

struct probe_hello_info {
	char claimed[PROBE_ADDR_MAX]; /* the address the prober published */
	long payload;		      /* bytes that follow (OK only) */
};

enum probe_hello probe_hello_check(const char *line, const char *seen,
				   const struct probe_server_opts *o, struct probe_hello_info *info);

struct probe_server;

/* Listen on o->addr:o->port and answer probes in a thread until
 * probe_server_stop.  The options' strings are copied. */
int probe_server_start(const struct probe_server_opts *o, struct probe_server **out, np_error *err);
int probe_server_port(const struct probe_server *s);

struct probe_server_counts {
	int answered;	/* probes of the expected peer, answered */
	int mismatched; /* ... of which the claimed address differed from the seen one */
	int foreign;	/* the round's token from another address (answered, not counted) */
	int dropped;	/* everything else: bad hello, wrong token, too slow, too much */
};
void probe_server_counts(struct probe_server *s, struct probe_server_counts *c);
/* Close every connection and the listener at once: never waits on a peer. */
void probe_server_stop(struct probe_server *s);

struct probe_result {
	bool connected;
	bool source_ok;                /* the peer saw self_addr */
	char seen[PROBE_ADDR_MAX];     /* source address the peer saw */
	int64_t rtt_us;                /* connect + hello round trip */
	double mbps;                   /* throughput, 0 unless measured */
	char detail[256];              /* why it failed, "" when ok */
};

/* The pause before connect attempt attempt + 1 (attempt counts from 0):
 * PROBE_RETRY_FIRST_MS for the first PROBE_RETRY_QUICK attempts, then
 * doubling up to PROBE_RETRY_MAX_MS.  The peer usually starts listening a
 * few milliseconds after this pod (it learns its part of the round from
 * its own watch), and a refused connection on the pod's own network costs
 * a SYN and a reset: the first retries come soon, and a peer that stays
 * away is tried about once a second. */
#define PROBE_RETRY_FIRST_MS 2
#define PROBE_RETRY_QUICK 8
#define PROBE_RETRY_MAX_MS 1000
int probe_retry_ms(int attempt);

/* Probe a peer: connect to peer_addr:port (retrying until deadline_ms on
 * CLOCK_MONOTONIC), present the round's token and the address we published,
 * read back what it saw.  throughput_bytes > 0 also streams that many bytes
 * and measures the rate.  Returns 0 when the exchange ran (see res for the
 * verdict), -1 on an internal error. */
int probe_peer(const char *self_addr, const char *peer_addr, int port, const char *token,
	       int64_t deadline_ms, long throughput_bytes, struct probe_result *res, np_error *err);

/* The same probe, driven without ever blocking, so that its caller can
 * wait for other things meanwhile (a follower reads its watch while it
 * probes): probe_op_step goes as far as it can now and says in *w what
 * it waits for next; call it again when that is ready or due.  It returns
 * 1 when the probe is over, with res as probe_peer fills it.  Free it at
 * any time: its connection is closed. */
struct probe_op;
int probe_op_start(const char *self_addr, const char *peer_addr, int port, const char *token,
		   int64_t deadline_ms, long throughput_bytes, struct probe_op **out, np_error *err);
int probe_op_step(struct probe_op *op, struct np_wait *w, struct probe_result *res);
void probe_op_free(struct probe_op *op);

/* The interface the kernel routes peer_addr through (RTM_GETROUTE). */
int probe_route_dev(const char *peer_addr, char *ifname, size_t len, np_error *err);

/* The interface the kernel routes the on-link subnet pfx through: the
 * device of the route to an address of pfx that is not one of this node's
 * own.  0 with ifname set; 1 when it cannot tell (a /32, or every address
 * tried is local); -1 on a netlink error. */
int probe_route_subnet_dev(const struct np_prefix *pfx, char *ifname, size_t len, np_error *err);

/* A gateway of the main routing table and the device it is reached through. */
struct probe_gateway {
	int ifindex;
	int family;
	unsigned char addr[16]; /* the gateway */
	struct np_prefix dst;	/* the route's destination; length 0: the default route */
};

/* Every route with a gateway in the main table, both families.  *out is
 * malloc'd (NULL when there is none). */
int probe_route_gateways(struct probe_gateway **out, size_t *n, np_error *err);

#endif
