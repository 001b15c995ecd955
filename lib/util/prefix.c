#include "util/prefix.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static int max_len(int family)
{
	return family == AF_INET ? 32 : 128;
}

void np_prefix_mask(int family, unsigned char *b, int len)
{
	int bits = max_len(family);
	for (int i = 0; i < 16; i++) {
		int keep = len - 8 * i;
		if (8 * i >= bits || keep <= 0)
			b[i] = 0;
		else if (keep < 8)
			b[i] &= (unsigned char)(0xff << (8 - keep));
	}
}

int np_prefix_parse(const char *text, struct np_prefix *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	const char *slash = text ? strchr(text, '/') : NULL;
	char a[INET6_ADDRSTRLEN];
	if (!slash)
		return np_error_set(err, NP_EUSAGE, 0, "'%s': expected ADDRESS/PREFIX, e.g. 10.0.0.0/8",
				    text ? text : "");
	size_t alen = (size_t)(slash - text);
	if (alen == 0 || alen >= sizeof(a))
		return np_error_set(err, NP_EUSAGE, 0, "'%s': bad address", text);
	memcpy(a, text, alen);
	a[alen] = '\0';
	if (inet_pton(AF_INET, a, out->bytes) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, a, out->bytes) == 1)
		out->family = AF_INET6;
	else
		return np_error_set(err, NP_EUSAGE, 0, "'%s': '%s' is not an IPv4 or IPv6 address", text, a);
	const char *p = slash + 1;
	int len = 0;
	if (!*p || strlen(p) > 3)
		goto bad_len;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			goto bad_len;
		len = len * 10 + (*p - '0');
	}
	if (len > max_len(out->family))
		goto bad_len;
	out->len = len;
	np_prefix_mask(out->family, out->bytes, len);
	return 0;
bad_len:
	np_error_set(err, NP_EUSAGE, 0, "'%s': prefix length must be 0 to %d", text, max_len(out->family));
	memset(out, 0, sizeof(*out));
	return -1;
}

void np_prefix_format(const struct np_prefix *p, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	if (!inet_ntop(p->family, p->bytes, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	snprintf(buf, len, "%s/%d", a, p->len);
}

bool np_prefix_contains(const struct np_prefix *p, int family, const unsigned char *addr)
{
	if (family != p->family)
		return false;
	unsigned char b[16] = { 0 };
	memcpy(b, addr, family == AF_INET ? 4 : 16);
	np_prefix_mask(family, b, p->len);
	return memcmp(b, p->bytes, 16) == 0;
}

bool np_prefix_covers(const struct np_prefix *p, const struct np_prefix *inner)
{
	return inner->len >= p->len && np_prefix_contains(p, inner->family, inner->bytes);
}

bool np_prefix_equal(const struct np_prefix *a, const struct np_prefix *b)
{
	return a->family == b->family && a->len == b->len && memcmp(a->bytes, b->bytes, 16) == 0;
}
