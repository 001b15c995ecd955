/* Internals shared by the probe's three parts: probe.c (the wire format,
 * the token and the authentication check), listen.c (the listener) and
 * prober.c (the side that connects). */
#ifndef NP_PROBE_PRIV_H
#define NP_PROBE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "probe/probe.h"

/* Wire format (one line each way, then the optional payload):
 *   client: "NICPICK-PROBE 2 <token> <published address> <payload bytes>\n" <payload>
 *   server: "SEEN <source address of the connection>\n"
 * The server answers only the round's token; anything else is closed
 * without a word (the client retries: the peer may be between rounds). */
#define PROBE_MAGIC "NICPICK-PROBE 2 "
#define PROBE_LINE_MAX 192

/* addr:port as a socket address; -1 when addr is not an IP address. */
int probe_parse_sockaddr(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len);
/* The address of ss as text ("?" if it has none). */
void probe_sockaddr_text(const struct sockaddr_storage *ss, char *buf, size_t len);
/* Both texts name the same address (IPv6 has many spellings). */
bool probe_same_addr(const char *a, const char *b);
/* An IPv4 or IPv6 address. */
bool probe_is_addr(const char *a);

#endif
