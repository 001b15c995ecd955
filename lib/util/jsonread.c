/* Strict reading of one JSON value at a time, for the messages pods
 * exchange: what is missing, mistyped, out of range or unknown is refused
 * with the key named. */
#include "util/jsonread.h"

#include <stdio.h>
#include <string.h>

static bool char_ok(int c, enum np_charset cs)
{
	switch (cs) {
	case NP_CS_NAME:
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		       c == '.' || c == '-' || c == '_';
	case NP_CS_IFNAME:
		return c > 0x20 && c < 0x7f && c != '/' && c != ':';
	case NP_CS_CLS:
		return (c >= 'a' && c <= 'z') || c == '-';
	case NP_CS_TEXT:
		return c >= 0x20 && c < 0x7f;
	case NP_CS_UTF8:
		return c >= 0x20 && c != 0x7f;
	case NP_CS_ANY:
		return c != 0;
	}
	return false;
}

bool np_str_ok(const char *s, enum np_charset cs)
{
	for (; *s; s++)
		if (!char_ok((unsigned char)*s, cs))
			return false;
	return true;
}

/* The value of key; NULL when absent, *rc then 1 (optional) or -1. */
static const json_t *value(const json_t *o, const char *key, bool required, int *rc, char *why)
{
	const json_t *v = json_object_get(o, key);
	*rc = required ? -1 : 1;
	if (!v && required)
		snprintf(why, NP_JSON_WHY_MAX, "missing \"%s\"", key);
	return v;
}

int np_json_str(const json_t *o, const char *key, bool required, enum np_charset cs, size_t min,
		char *dst, size_t dstlen, char *why)
{
	int rc;
	const json_t *v = value(o, key, required, &rc, why);
	if (!v)
		return rc;
	if (!json_is_string(v)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is not a string", key);
		return -1;
	}
	size_t len = json_string_length(v);
	const char *s = json_string_value(v);
	if (len < min || len >= dstlen) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" has length %zu, not %zu..%zu", key, len, min,
			 dstlen - 1);
		return -1;
	}
	if (strlen(s) != len || !np_str_ok(s, cs)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" has characters that are not allowed", key);
		return -1;
	}
	memcpy(dst, s, len + 1);
	return 0;
}

int np_json_int(const json_t *o, const char *key, bool required, long long min, long long max,
		long *dst, char *why)
{
	int rc;
	const json_t *v = value(o, key, required, &rc, why);
	if (!v)
		return rc;
	if (!json_is_integer(v)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is not an integer", key);
		return -1;
	}
	json_int_t x = json_integer_value(v);
	if (x < min || x > max) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is %lld, not %lld..%lld", key, (long long)x, min,
			 max);
		return -1;
	}
	*dst = (long)x;
	return 0;
}

int np_json_num(const json_t *o, const char *key, bool required, double min, double max,
		double *dst, char *why)
{
	int rc;
	const json_t *v = value(o, key, required, &rc, why);
	if (!v)
		return rc;
	double x = json_number_value(v);
	if (!json_is_number(v) || !(x >= min && x <= max)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is not a number in %g..%g", key, min, max);
		return -1;
	}
	*dst = x;
	return 0;
}

int np_json_bool(const json_t *o, const char *key, bool *dst, char *why)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_boolean(v)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is %s", key, v ? "not a boolean" : "missing");
		return -1;
	}
	*dst = json_is_true(v);
	return 0;
}

int np_json_check_keys(const json_t *o, const char *const *allowed, char *why)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)o, key, v)
	{
		size_t i;
		for (i = 0; allowed[i]; i++)
			if (!strcmp(key, allowed[i]))
				break;
		if (!allowed[i]) {
			char shown[40];
			snprintf(shown, sizeof(shown), "%s", key);
			if (!np_str_ok(shown, NP_CS_TEXT))
				strcpy(shown, "?");
			snprintf(why, NP_JSON_WHY_MAX, "unknown key \"%s\"", shown);
			return -1;
		}
	}
	return 0;
}

const char *np_json_cstr(const json_t *v)
{
	const char *s = json_string_value(v);
	return s && strlen(s) == json_string_length(v) ? s : NULL;
}
