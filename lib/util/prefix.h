/* An IP prefix (a network): family, address bytes with the host bits
 * cleared, prefix length.  Parsed once where it enters (--cidr, a message)
 * and passed on as this struct, never as text to be parsed again. */
#ifndef NP_PREFIX_H
#define NP_PREFIX_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define NP_PREFIX_TEXT_MAX 50 /* an IPv6 address + "/128" */

struct np_prefix {
	int family;		 /* AF_INET or AF_INET6 */
	unsigned char bytes[16]; /* network order; host bits cleared */
	int len;		 /* 0..32 or 0..128 */
};

/* "10.9.0.0/24" or "fd00::/64".  Host bits are cleared: "10.1.2.3/8" is
 * 10.0.0.0/8 (users paste host addresses).  NP_EUSAGE naming what is wrong. */
int np_prefix_parse(const char *text, struct np_prefix *out, np_error *err);
/* "10.9.0.0/24"; buf of NP_PREFIX_TEXT_MAX bytes always suffices. */
void np_prefix_format(const struct np_prefix *p, char *buf, size_t len);
/* Clear the bits after the first `len` of an address of `family`. */
void np_prefix_mask(int family, unsigned char *bytes, int len);
/* The address (network order) of `family` lies inside p. */
bool np_prefix_contains(const struct np_prefix *p, int family, const unsigned char *addr);
/* inner is p or a smaller network inside it. */
bool np_prefix_covers(const struct np_prefix *p, const struct np_prefix *inner);
bool np_prefix_equal(const struct np_prefix *a, const struct np_prefix *b);

#endif
