/* Helpers shared by the report and decision readers of lib/agree only. */
#ifndef NP_AGREE_PRIV_H
#define NP_AGREE_PRIV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "agree/agree.h"

enum agree_charset {
	AGREE_CS_NAME,	 /* Kubernetes object / node names: [A-Za-z0-9._-] */
	AGREE_CS_IFNAME, /* printable ASCII except '/', ':' (what Linux allows) */
	AGREE_CS_CLS,	 /* [a-z-] */
	AGREE_CS_TEXT,	 /* printable ASCII and space: reasons, messages */
	AGREE_CS_UTF8,	 /* AGREE_CS_TEXT and UTF-8 (jansson checks it): error messages */
};

/* Each returns 0 when read, 1 when an optional key is absent, -1 with a
 * reason in why[AGREE_WHY_MAX]. */
int agree_get_str(const json_t *o, const char *key, bool required, enum agree_charset cs,
		  size_t min, char *dst, size_t dstlen, char *why);
int agree_get_int(const json_t *o, const char *key, bool required, long long min, long long max,
		  long *dst, char *why);
int agree_get_bool(const json_t *o, const char *key, bool *dst, char *why);
/* Refuse keys that are not in the NULL-terminated list. */
int agree_check_keys(const json_t *o, const char *const *allowed, char *why);
bool agree_str_ok(const char *s, enum agree_charset cs);

/* inet_pton for family 4/6 written as AF_*; false when unparsable. */
bool agree_addr_from_text(int family, const char *text, unsigned char *bytes);
/* Unicast addresses only: not unspecified, loopback or multicast. */
bool agree_addr_is_unicast(int family, const unsigned char *bytes);

#endif
