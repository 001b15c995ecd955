/* Strict readers of JSON values for the messages on the wire (reports,
 * the exchange's messages): one call per key, a reason when refused. */
#ifndef NP_JSONREAD_H
#define NP_JSONREAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define NP_JSON_WHY_MAX 256 /* the reason buffers these write */

enum np_charset {
	NP_CS_NAME,   /* Kubernetes object / node names: [A-Za-z0-9._-] */
	NP_CS_IFNAME, /* printable ASCII except '/', ':' (what Linux allows) */
	NP_CS_CLS,    /* [a-z-] */
	NP_CS_TEXT,   /* printable ASCII and space: reasons, messages */
	NP_CS_UTF8,   /* NP_CS_TEXT and UTF-8 (jansson checks it): error messages */
	NP_CS_ANY,    /* any UTF-8 but NUL: what a snapshot reports as the kernel had it */
};

/* Each returns 0 when read, 1 when an optional key is absent, -1 with a
 * reason in why[NP_JSON_WHY_MAX]. */
int np_json_str(const json_t *o, const char *key, bool required, enum np_charset cs, size_t min,
		char *dst, size_t dstlen, char *why);
int np_json_int(const json_t *o, const char *key, bool required, long long min, long long max,
		long *dst, char *why);
int np_json_bool(const json_t *o, const char *key, bool *dst, char *why);
/* A finite number (integer or real) in min..max. */
int np_json_num(const json_t *o, const char *key, bool required, double min, double max,
		double *dst, char *why);
/* Refuse keys that are not in the NULL-terminated list. */
int np_json_check_keys(const json_t *o, const char *const *allowed, char *why);
bool np_str_ok(const char *s, enum np_charset cs);

/* JSON from the API server is read with JSON_ALLOW_NUL: the API accepts
 * "\u0000" in any string, and a NUL in a field nicpick does not use must
 * not fail the run.  A field it does use is read through this: the value
 * when v is a string without a NUL, else NULL (refused as not a string). */
const char *np_json_cstr(const json_t *v);

#endif
