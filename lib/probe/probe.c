/* The probe's wire format, its addresses, the round's token and the
 * listener's authentication check: the pure parts, shared by listen.c and
 * prober.c. */
#include "probe/probe_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

/* ---- addresses ---- */

int probe_parse_sockaddr(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*len = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return 0;
	}
	return -1;
}

void probe_sockaddr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const void *src = ss->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
						   : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (!inet_ntop(ss->ss_family, src, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* Both texts name the same address (IPv6 has many spellings). */
bool probe_same_addr(const char *a, const char *b)
{
	unsigned char x[16], y[16];
	if (inet_pton(AF_INET, a, x) == 1 && inet_pton(AF_INET, b, y) == 1)
		return memcmp(x, y, 4) == 0;
	if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
		return memcmp(x, y, 16) == 0;
	return false;
}

bool probe_is_addr(const char *a)
{
	unsigned char x[16];
	return inet_pton(AF_INET, a, x) == 1 || inet_pton(AF_INET6, a, x) == 1;
}

/* ---- the token ---- */

int probe_token_new(char token[PROBE_TOKEN_MAX], np_error *err)
{
	unsigned char b[PROBE_TOKEN_LEN / 2];
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t r = getrandom(b + got, sizeof(b) - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return np_error_set(err, NP_EINTERNAL, errno, "probe: no random bytes for the round's token");
		got += (size_t)r;
	}
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(token + 2 * i, 3, "%02x", b[i]);
	return 0;
}

bool probe_token_ok(const char *token)
{
	if (!token || strlen(token) != PROBE_TOKEN_LEN)
		return false;
	for (const char *p = token; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* Every byte compared, so that the time taken says nothing of the token. */
static bool token_equal(const char *a, const char *b)
{
	unsigned char diff = 0;
	for (size_t i = 0; i < PROBE_TOKEN_LEN; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

/* ---- the authentication check ---- */

/* The next space-separated field of *p (exactly one space between fields). */
static const char *field(const char **p, size_t *len)
{
	const char *s = *p, *e = s;
	while (*e && *e != ' ')
		e++;
	*len = (size_t)(e - s);
	*p = *e ? e + 1 : e;
	return s;
}

enum probe_hello probe_hello_check(const char *line, const char *seen,
				   const struct probe_server_opts *o, struct probe_hello_info *info)
{
	memset(info, 0, sizeof(*info));
	size_t ml = strlen(PROBE_MAGIC);
	if (strncmp(line, PROBE_MAGIC, ml) != 0 || !probe_token_ok(o->token))
		return PROBE_HELLO_BAD;
	const char *p = line + ml;
	size_t tl, al, pl;
	const char *tok = field(&p, &tl), *addr = field(&p, &al), *pay = field(&p, &pl);
	if (*p || tl != PROBE_TOKEN_LEN || al == 0 || al >= PROBE_ADDR_MAX || pl == 0 || pl > 12)
		return PROBE_HELLO_BAD;
	if (!token_equal(tok, o->token))
		return PROBE_HELLO_BAD;
	memcpy(info->claimed, addr, al);
	info->claimed[al] = '\0';
	if (!probe_is_addr(info->claimed))
		return PROBE_HELLO_BAD;
	long payload = 0;
	for (size_t i = 0; i < pl; i++) {
		if (pay[i] < '0' || pay[i] > '9' || (i == 0 && pay[i] == '0' && pl > 1))
			return PROBE_HELLO_BAD;
		payload = payload * 10 + (pay[i] - '0');
	}
	/* A payload only in a round that measures, and no more than it asked. */
	if (payload > 0 && (o->max_payload <= 0 || payload > o->max_payload))
		return PROBE_HELLO_BAD;
	if (o->peer_addr && o->peer_addr[0] && !probe_same_addr(seen, o->peer_addr))
		return PROBE_HELLO_FOREIGN;
	info->payload = payload;
	return PROBE_HELLO_OK;
}
