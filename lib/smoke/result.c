/* The result message nicpick-smoke prints: one writer, one strict reader. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoke/result.h"
#include "util/jsonread.h"

const char *smoke_phase_name(enum smoke_phase p)
{
	static const char *const names[] = {
		[SMOKE_PHASE_LOAD] = "load",	       [SMOKE_PHASE_DEVICE] = "device",
		[SMOKE_PHASE_INIT] = "init",	       [SMOKE_PHASE_ALLREDUCE] = "all-reduce",
		[SMOKE_PHASE_VERIFY] = "verify",       [SMOKE_PHASE_DONE] = "done",
	};
	return (unsigned)p < sizeof(names) / sizeof(names[0]) ? names[p] : "?";
}

const char *smoke_unavailable_name(enum smoke_unavailable u)
{
	static const char *const names[] = {
		[SMOKE_AVAILABLE] = "",		    [SMOKE_NO_COMPANION] = "no-companion",
		[SMOKE_NO_NCCL] = "no-libnccl",	    [SMOKE_NO_CUDART] = "no-cudart",
		[SMOKE_NO_DRIVER] = "no-driver",    [SMOKE_NO_GPU] = "no-gpu",
	};
	return (unsigned)u < sizeof(names) / sizeof(names[0]) ? names[u] : "?";
}

void smoke_size_text(long bytes, char *buf, size_t len)
{
	if (bytes >= (1L << 20) && bytes % (1L << 20) == 0)
		snprintf(buf, len, "%ld MiB", bytes >> 20);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(buf, len, "%ld KiB", bytes >> 10);
	else
		snprintf(buf, len, "%ld B", bytes);
}

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
	json_t *links = json_array(), *labels = json_array();
	for (size_t i = 0; links && i < r->n_links && i < SMOKE_RING_MAX; i++)
		json_array_append_new(links, json_pack("{s:f, s:f, s:b}", "fwd", r->links[i].fwd_gbps, "rev",
						       r->links[i].rev_gbps, "rechecked",
						       r->links[i].rechecked));
	for (size_t i = 0; labels && i < r->n_labels && i < SMOKE_LABELS_MAX; i++)
		json_array_append_new(labels, json_string(r->labels[i]));
	json_t *o = json_pack(
		"{s:i, s:b, s:s, s:s, s:s, s:i, s:i, s:{s:i, s:s}, s:{s:i, s:i, s:s}, s:{s:s, s:s, s:i}, s:I, s:I, s:o, s:o, s:I, s:o}",
		"v", SMOKE_RESULT_VERSION, "ok", r->ok, "phase", smoke_phase_name(r->phase), "error",
		r->error, "unavailable", smoke_unavailable_name(r->unavailable), "rank", r->rank,
		"world", r->world, "nccl", "version", r->nccl_version, "path", r->nccl_path, "cuda",
		"driver", r->cuda_driver, "runtime", r->cuda_runtime, "path", r->cudart_path, "gpu",
		"name", r->gpu, "bus", r->gpu_bus, "count", r->gpu_count, "init_ms",
		(json_int_t)r->init_ms, "total_ms", (json_int_t)r->total_ms, "sizes", sizes, "links", links,
		"links_ms", (json_int_t)r->links_ms, "labels", labels);
	if (!o)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot build the smoke result (bad text?)");
	*json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!*json)
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	return 0;
}

/* ---- strict reader (lib/util/jsonread) ---- */

static int index_of(const char *text, const char *(*name)(int), int n, int *dst, char *why,
		    const char *key)
{
	for (int i = 0; i < n; i++)
		if (strcmp(name(i), text) == 0) {
			*dst = i;
			return 0;
		}
	snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is \"%s\", not a known value", key, text);
	return -1;
}

static const char *phase_name_i(int i)
{
	return smoke_phase_name((enum smoke_phase)i);
}
static const char *unavail_name_i(int i)
{
	return smoke_unavailable_name((enum smoke_unavailable)i);
}

static int object(const json_t *o, const char *what, const char *const *keys, char *why)
{
	if (!json_is_object(o)) {
		snprintf(why, NP_JSON_WHY_MAX, "%s is not an object", what);
		return -1;
	}
	return np_json_check_keys(o, keys, why);
}

static int parse_size(const json_t *o, struct smoke_size *s, char *why)
{
	static const char *const keys[] = { "bytes", "iters", "us", "algbw", "busbw", "wrong", NULL };
	long v;
	if (object(o, "a size", keys, why) < 0 || np_json_int(o, "bytes", true, 1, 1LL << 40, &s->bytes, why) < 0 ||
	    np_json_int(o, "iters", true, 0, 1000000, &v, why) < 0)
		return -1;
	s->iters = (int)v;
	return np_json_int(o, "wrong", true, 0, 1LL << 40, &s->wrong, why) < 0 ||
			       np_json_num(o, "us", true, 0, 1e12, &s->avg_us, why) < 0 ||
			       np_json_num(o, "algbw", true, 0, 1e12, &s->algbw_gbps, why) < 0 ||
			       np_json_num(o, "busbw", true, 0, 1e12, &s->busbw_gbps, why) < 0
		       ? -1
		       : 0;
}

static int parse_obj(const json_t *o, struct smoke_result *r, char *why)
{
	static const char *const keys[] = { "v",	   "ok",       "phase", "error", "unavailable",
					    "rank",	   "world",    "nccl",	"cuda",	 "gpu",
					    "init_ms", "total_ms", "sizes", "links",	 "links_ms",
					    "labels",  NULL };
	static const char *const nccl_keys[] = { "version", "path", NULL };
	static const char *const cuda_keys[] = { "driver", "runtime", "path", NULL };
	static const char *const gpu_keys[] = { "name", "bus", "count", NULL };
	char text[32];
	long v;
	int idx = 0;

	if (!json_is_object(o)) {
		snprintf(why, NP_JSON_WHY_MAX, "not a JSON object");
		return -1;
	}
	if (np_json_int(o, "v", true, 1, 1000000, &v, why) < 0)
		return -1;
	if (v != SMOKE_RESULT_VERSION) {
		snprintf(why, NP_JSON_WHY_MAX,
			 "version %ld (this nicpick reads %d): nicpick and nicpick-smoke differ", v,
			 SMOKE_RESULT_VERSION);
		return -1;
	}
	if (np_json_check_keys(o, keys, why) < 0 || np_json_bool(o, "ok", &r->ok, why) < 0 ||
	    np_json_str(o, "phase", true, NP_CS_TEXT, 1, text, sizeof(text), why) < 0 ||
	    index_of(text, phase_name_i, SMOKE_PHASE_DONE + 1, &idx, why, "phase") < 0)
		return -1;
	r->phase = (enum smoke_phase)idx;
	if (np_json_str(o, "unavailable", true, NP_CS_TEXT, 0, text, sizeof(text), why) < 0 ||
	    index_of(text, unavail_name_i, SMOKE_NO_GPU + 1, &idx, why, "unavailable") < 0)
		return -1;
	r->unavailable = (enum smoke_unavailable)idx;
	if (np_json_str(o, "error", true, NP_CS_TEXT, 0, r->error, sizeof(r->error), why) < 0 ||
	    np_json_int(o, "world", true, 1, 1 << 20, &v, why) < 0)
		return -1;
	r->world = (int)v;
	if (np_json_int(o, "rank", true, 0, r->world - 1, &v, why) < 0)
		return -1;
	r->rank = (int)v;

	const json_t *n = json_object_get(o, "nccl"), *c = json_object_get(o, "cuda"),
		     *g = json_object_get(o, "gpu");
	if (object(n, "\"nccl\"", nccl_keys, why) < 0 || np_json_int(n, "version", true, 0, 1000000, &v, why) < 0)
		return -1;
	r->nccl_version = (int)v;
	if (np_json_str(n, "path", true, NP_CS_TEXT, 0, r->nccl_path, sizeof(r->nccl_path), why) < 0 ||
	    object(c, "\"cuda\"", cuda_keys, why) < 0 || np_json_int(c, "driver", true, 0, 1000000, &v, why) < 0)
		return -1;
	r->cuda_driver = (int)v;
	if (np_json_int(c, "runtime", true, 0, 1000000, &v, why) < 0)
		return -1;
	r->cuda_runtime = (int)v;
	if (np_json_str(c, "path", true, NP_CS_TEXT, 0, r->cudart_path, sizeof(r->cudart_path), why) < 0 ||
	    object(g, "\"gpu\"", gpu_keys, why) < 0 ||
	    np_json_str(g, "name", true, NP_CS_TEXT, 0, r->gpu, sizeof(r->gpu), why) < 0 ||
	    np_json_str(g, "bus", true, NP_CS_TEXT, 0, r->gpu_bus, sizeof(r->gpu_bus), why) < 0 ||
	    np_json_int(g, "count", true, 0, 1 << 16, &v, why) < 0)
		return -1;
	r->gpu_count = (int)v;
	if (np_json_int(o, "init_ms", true, 0, 1LL << 40, &v, why) < 0)
		return -1;
	r->init_ms = v;
	if (np_json_int(o, "total_ms", true, 0, 1LL << 40, &v, why) < 0)
		return -1;
	r->total_ms = v;

	const json_t *sizes = json_object_get(o, "sizes");
	if (!json_is_array(sizes) || json_array_size(sizes) > SMOKE_SIZES_MAX) {
		snprintf(why, NP_JSON_WHY_MAX, "\"sizes\" is not an array of at most %d", SMOKE_SIZES_MAX);
		return -1;
	}
	for (size_t i = 0; i < json_array_size(sizes); i++)
		if (parse_size(json_array_get(sizes, i), &r->sizes[i], why) < 0)
			return -1;
	r->n_sizes = json_array_size(sizes);
	static const char *const link_keys[] = { "fwd", "rev", "rechecked", NULL };
	const json_t *links = json_object_get(o, "links");
	if (!json_is_array(links) || json_array_size(links) > SMOKE_RING_MAX ||
	    (json_array_size(links) && json_array_size(links) != (size_t)r->world)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"links\" is not an array of one link per rank");
		return -1;
	}
	for (size_t i = 0; i < json_array_size(links); i++) {
		const json_t *l = json_array_get(links, i);
		if (object(l, "a link", link_keys, why) < 0 ||
		    np_json_num(l, "fwd", true, 0, 1e6, &r->links[i].fwd_gbps, why) < 0 ||
		    np_json_num(l, "rev", true, 0, 1e6, &r->links[i].rev_gbps, why) < 0 ||
		    np_json_bool(l, "rechecked", &r->links[i].rechecked, why) < 0)
			return -1;
	}
	r->n_links = json_array_size(links);
	if (np_json_int(o, "links_ms", true, 0, 1LL << 40, &v, why) < 0)
		return -1;
	r->links_ms = v;
	const json_t *labels = json_object_get(o, "labels");
	if (!json_is_array(labels) || json_array_size(labels) > SMOKE_LABELS_MAX ||
	    (json_array_size(labels) && json_array_size(labels) != (size_t)r->world)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"labels\" is not an array of one label per rank");
		return -1;
	}
	for (size_t i = 0; i < json_array_size(labels); i++) {
		const json_t *l = json_array_get(labels, i);
		const char *t = json_string_value(l);
		if (!t || json_string_length(l) >= SMOKE_LABEL_MAX || strlen(t) != json_string_length(l) ||
		    !np_str_ok(t, NP_CS_TEXT)) {
			snprintf(why, NP_JSON_WHY_MAX, "label %zu is not a short text", i);
			return -1;
		}
		memcpy(r->labels[i], t, strlen(t) + 1);
	}
	r->n_labels = json_array_size(labels);
	if (r->ok && (r->phase != SMOKE_PHASE_DONE || r->unavailable)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"ok\" with phase %s", smoke_phase_name(r->phase));
		return -1;
	}
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
	char why[NP_JSON_WHY_MAX] = "";
	int ret = parse_obj(o, out, why);
	json_decref(o);
	if (ret < 0) {
		memset(out, 0, sizeof(*out));
		return np_error_set(err, NP_ESMOKE, 0, "bad result from nicpick-smoke: %s", why);
	}
	return 0;
}
