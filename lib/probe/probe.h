/* Reachability checks between the job's pods on the agreed network, before
 * anything is written: a TCP exchange in which the listener reports the
 * source address it saw (this catches NAT and wrong routes), and a netlink
 * route lookup that the path to a peer leaves through the chosen device. */
#ifndef NP_PROBE_H
#define NP_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"
#include "util/prefix.h"

#define PROBE_DEFAULT_PORT 29417
#define PROBE_ADDR_MAX 64

struct probe_server;

/* Listen on addr:port (port 0 picks one; probe_server_port tells which)
 * and answer probes in a thread until probe_server_stop. */
int probe_server_start(const char *addr, int port, struct probe_server **out, np_error *err);
int probe_server_port(const struct probe_server *s);
/* How many probes this server has answered, and how many whose claimed
 * address differed from the one seen. */
void probe_server_counts(struct probe_server *s, int *answered, int *mismatched);
void probe_server_stop(struct probe_server *s);

struct probe_result {
	bool connected;
	bool source_ok;                /* the peer saw self_addr */
	char seen[PROBE_ADDR_MAX];     /* source address the peer saw */
	int64_t rtt_us;                /* connect + hello round trip */
	double mbps;                   /* throughput, 0 unless measured */
	char detail[256];              /* why it failed, "" when ok */
};

/* Probe a peer: connect to peer_addr:port (retrying until deadline_ms on
 * CLOCK_MONOTONIC), tell it which address we published, read back what it
 * saw.  throughput_bytes > 0 also streams that many bytes and measures the
 * rate.  Returns 0 when the exchange ran (see res for the verdict), -1 on an
 * internal error. */
int probe_peer(const char *self_addr, const char *peer_addr, int port, int64_t deadline_ms,
	       long throughput_bytes, struct probe_result *res, np_error *err);

/* The interface the kernel routes peer_addr through (RTM_GETROUTE). */
int probe_route_dev(const char *peer_addr, char *ifname, size_t len, np_error *err);

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
