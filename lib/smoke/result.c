/* The result message nicpick-smoke prints: one writer, one strict reader. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoke/smoke.h"

static json_t *size_to_json(const struct smoke_size *s)
{
	return json_pack("{s:I, s:i, s:f, s:f, s:f, s:I}", "bytes", (json_int_t)s->bytes, "iters",
			 s->iters, "us", s->avg_us, "algbw", s->algbw_gbps, "busbw", s->busbw_gbps,
			 "wrong", (json_int_t)s->wrong);
}

int smoke_result_to_json(const struct smoke_result *r, char **json, np_error *err)
{
	*json = NULL;
	json_t *sizes = json_array();
	for (size_t i = 0; sizes && i < r->n_sizes && i < SMOKE_SIZES_MAX; i++)
		json_array_append_new(sizes, size_to_json(&r->sizes[i]));
	json_t *ring = json_array();
	for (size_t i = 0; ring && i < r->n_ring && i < SMOKE_RING_MAX; i++)
		json_array_append_new(ring, json_real(r->ring_gbps[i]));
	json_t *o = json_pack(
		"{s:i, s:b, s:s, s:s, s:s, s:i, s:i, s:{s:i, s:s}, s:{s:i, s:i, s:s}, s:{s:s, s:s, s:i}, s:I, s:I, s:o, s:o}",
		"v", SMOKE_RESULT_VERSION, "ok", r->ok, "phase", smoke_phase_name(r->phase), "error",
		r->error, "unavailable", smoke_unavailable_name(r->unavailable), "rank", r->rank,
		"world", r->world, "nccl", "version", r->nccl_version, "path", r->nccl_path, "cuda",
		"driver", r->cuda_driver, "runtime", r->cuda_runtime, "path", r->cudart_path, "gpu",
		"name", r->gpu, "bus", r->gpu_bus, "count", r->gpu_count, "init_ms",
		(json_int_t)r->init_ms, "total_ms", (json_int_t)r->total_ms, "sizes", sizes, "ring", ring);
	if (!o)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot build the smoke result (bad text?)");
	*json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!*json)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	return 0;
}

/* ---- strict reader ---- */

struct rd {
	char why[256];
};

__attribute__((format(printf, 2, 3))) static int bad(struct rd *rd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rd->why, sizeof(rd->why), fmt, ap);
	va_end(ap);
	/* keys and values come from another program: one printable line */
	for (char *p = rd->why; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	return -1;
}

static int only_keys(struct rd *rd, const json_t *o, const char *where, const char *const *keys)
{
	const char *k;
	const json_t *v;
	if (!json_is_object(o))
		return bad(rd, "%s is not an object", where);
	json_object_foreach((json_t *)o, k, v) {
		size_t i = 0;
		while (keys[i] && strcmp(keys[i], k) != 0)
			i++;
		if (!keys[i])
			return bad(rd, "unknown key \"%s\" in %s", k, where);
	}
	for (size_t i = 0; keys[i]; i++)
		if (!json_object_get(o, keys[i]))
			return bad(rd, "missing \"%s\" in %s", keys[i], where);
	return 0;
}

/* Text fields: printable ASCII only (they end up in logs and annotations). */
static int get_text(struct rd *rd, const json_t *o, const char *key, char *dst, size_t len)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		return bad(rd, "\"%s\" is not a string", key);
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	if (n >= len)
		return bad(rd, "\"%s\" is longer than %zu bytes", key, len - 1);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return bad(rd, "\"%s\" has a control or non-ASCII character", key);
	memcpy(dst, s, n + 1);
	return 0;
}

static int get_int(struct rd *rd, const json_t *o, const char *key, long long min, long long max,
		   long long *dst)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_integer(v))
		return bad(rd, "\"%s\" is not an integer", key);
	long long x = json_integer_value(v);
	if (x < min || x > max)
		return bad(rd, "\"%s\" is %lld, not %lld..%lld", key, x, min, max);
	*dst = x;
	return 0;
}

static int get_num(struct rd *rd, const json_t *o, const char *key, double *dst)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_number(v))
		return bad(rd, "\"%s\" is not a number", key);
	double x = json_number_value(v);
	if (!isfinite(x) || x < 0 || x > 1e12)
		return bad(rd, "\"%s\" is out of range", key);
	*dst = x;
	return 0;
}

static int name_index(struct rd *rd, const char *key, const char *text,
		      const char *(*name)(int), int n, int *dst)
{
	for (int i = 0; i < n; i++)
		if (strcmp(name(i), text) == 0) {
			*dst = i;
			return 0;
		}
	return bad(rd, "\"%s\" is \"%s\", not a known value", key, text);
}

static const char *phase_name_i(int i)
{
	return smoke_phase_name((enum smoke_phase)i);
}
static const char *unavail_name_i(int i)
{
	return smoke_unavailable_name((enum smoke_unavailable)i);
}

static int parse_size(struct rd *rd, const json_t *o, struct smoke_size *s)
{
	static const char *const keys[] = { "bytes", "iters", "us", "algbw", "busbw", "wrong", NULL };
	long long v;
	if (only_keys(rd, o, "a size", keys) < 0)
		return -1;
	if (get_int(rd, o, "bytes", 1, 1LL << 40, &v) < 0)
		return -1;
	s->bytes = (long)v;
	if (get_int(rd, o, "iters", 0, 1000000, &v) < 0)
		return -1;
	s->iters = (int)v;
	if (get_int(rd, o, "wrong", 0, 1LL << 40, &v) < 0)
		return -1;
	s->wrong = (long)v;
	return get_num(rd, o, "us", &s->avg_us) < 0 || get_num(rd, o, "algbw", &s->algbw_gbps) < 0 ||
			       get_num(rd, o, "busbw", &s->busbw_gbps) < 0
		       ? -1
		       : 0;
}

static int parse_obj(struct rd *rd, const json_t *o, struct smoke_result *r)
{
	static const char *const keys[] = { "v",     "ok",   "phase", "error", "unavailable",
					    "rank",  "world", "nccl", "cuda",  "gpu",
					    "init_ms", "total_ms", "sizes", "ring", NULL };
	static const char *const nccl_keys[] = { "version", "path", NULL };
	static const char *const cuda_keys[] = { "driver", "runtime", "path", NULL };
	static const char *const gpu_keys[] = { "name", "bus", "count", NULL };
	char text[32];
	long long v;
	int idx = 0;

	if (!json_is_object(o))
		return bad(rd, "not a JSON object");
	if (get_int(rd, o, "v", 1, 1000000, &v) < 0)
		return -1;
	if (v != SMOKE_RESULT_VERSION)
		return bad(rd, "version %lld (this nicpick reads %d): nicpick and nicpick-smoke differ",
			   v, SMOKE_RESULT_VERSION);
	if (only_keys(rd, o, "the result", keys) < 0)
		return -1;
	const json_t *ok = json_object_get(o, "ok");
	if (!json_is_boolean(ok))
		return bad(rd, "\"ok\" is not a boolean");
	r->ok = json_is_true(ok);
	if (get_text(rd, o, "phase", text, sizeof(text)) < 0 ||
	    name_index(rd, "phase", text, phase_name_i, SMOKE_PHASE_DONE + 1, &idx) < 0)
		return -1;
	r->phase = (enum smoke_phase)idx;
	if (get_text(rd, o, "unavailable", text, sizeof(text)) < 0 ||
	    name_index(rd, "unavailable", text, unavail_name_i, SMOKE_NO_GPU + 1, &idx) < 0)
		return -1;
	r->unavailable = (enum smoke_unavailable)idx;
	if (get_text(rd, o, "error", r->error, sizeof(r->error)) < 0)
		return -1;
	if (get_int(rd, o, "world", 1, 1 << 20, &v) < 0)
		return -1;
	r->world = (int)v;
	if (get_int(rd, o, "rank", 0, r->world - 1, &v) < 0)
		return -1;
	r->rank = (int)v;

	const json_t *n = json_object_get(o, "nccl"), *c = json_object_get(o, "cuda"),
		     *g = json_object_get(o, "gpu");
	if (only_keys(rd, n, "\"nccl\"", nccl_keys) < 0 ||
	    get_int(rd, n, "version", 0, 1000000, &v) < 0)
		return -1;
	r->nccl_version = (int)v;
	if (get_text(rd, n, "path", r->nccl_path, sizeof(r->nccl_path)) < 0)
		return -1;
	if (only_keys(rd, c, "\"cuda\"", cuda_keys) < 0 || get_int(rd, c, "driver", 0, 1000000, &v) < 0)
		return -1;
	r->cuda_driver = (int)v;
	if (get_int(rd, c, "runtime", 0, 1000000, &v) < 0)
		return -1;
	r->cuda_runtime = (int)v;
	if (get_text(rd, c, "path", r->cudart_path, sizeof(r->cudart_path)) < 0)
		return -1;
	if (only_keys(rd, g, "\"gpu\"", gpu_keys) < 0 ||
	    get_text(rd, g, "name", r->gpu, sizeof(r->gpu)) < 0 ||
	    get_text(rd, g, "bus", r->gpu_bus, sizeof(r->gpu_bus)) < 0 ||
	    get_int(rd, g, "count", 0, 1 << 16, &v) < 0)
		return -1;
	r->gpu_count = (int)v;
	if (get_int(rd, o, "init_ms", 0, 1LL << 40, &v) < 0)
		return -1;
	r->init_ms = v;
	if (get_int(rd, o, "total_ms", 0, 1LL << 40, &v) < 0)
		return -1;
	r->total_ms = v;

	const json_t *sizes = json_object_get(o, "sizes");
	if (!json_is_array(sizes))
		return bad(rd, "\"sizes\" is not an array");
	if (json_array_size(sizes) > SMOKE_SIZES_MAX)
		return bad(rd, "%zu sizes, at most %d", json_array_size(sizes), SMOKE_SIZES_MAX);
	for (size_t i = 0; i < json_array_size(sizes); i++)
		if (parse_size(rd, json_array_get(sizes, i), &r->sizes[i]) < 0)
			return -1;
	r->n_sizes = json_array_size(sizes);
	const json_t *ring = json_object_get(o, "ring");
	if (!json_is_array(ring))
		return bad(rd, "\"ring\" is not an array");
	if (json_array_size(ring) > SMOKE_RING_MAX ||
	    (json_array_size(ring) && json_array_size(ring) != (size_t)r->world))
		return bad(rd, "\"ring\" has %zu figures for %d ranks", json_array_size(ring), r->world);
	for (size_t i = 0; i < json_array_size(ring); i++) {
		const json_t *fig = json_array_get(ring, i);
		double x = json_number_value(fig);
		if (!json_is_number(fig) || !isfinite(x) || x < 0 || x > 1e6)
			return bad(rd, "\"ring\" figure %zu is not a bandwidth", i);
		r->ring_gbps[i] = x;
	}
	r->n_ring = json_array_size(ring);
	if (r->ok && (r->phase != SMOKE_PHASE_DONE || r->unavailable))
		return bad(rd, "\"ok\" with phase %s", smoke_phase_name(r->phase));
	return 0;
}

int smoke_result_parse(const char *json, size_t len, struct smoke_result *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	if (len > SMOKE_RESULT_MAX_BYTES)
		return np_error_set(err, NP_ESMOKE, 0,
				    "bad result from nicpick-smoke: %zu bytes, at most %d", len,
				    SMOKE_RESULT_MAX_BYTES);
	json_error_t je;
	json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return np_error_set(err, NP_ESMOKE, 0, "bad result from nicpick-smoke: %s", je.text);
	struct rd rd = { "" };
	int ret = parse_obj(&rd, o, out);
	json_decref(o);
	if (ret < 0) {
		memset(out, 0, sizeof(*out));
		return np_error_set(err, NP_ESMOKE, 0, "bad result from nicpick-smoke: %s", rd.why);
	}
	return 0;
}
