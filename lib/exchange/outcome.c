/* nicpick.io/outcome: how a pod's nicpick ended, for `nicpick status`.
 * One writer and one strict reader, as for the exchange's other messages. */
#include "exchange/message.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/jsonread.h"
#include "util/text.h"

#define OUTCOME_EPOCH_MAX 1000000
#define OUTCOME_BUSBW_MAX 1e6 /* GB/s */

static const char *const smoke_names[] = {
	[EXCHANGE_SMOKE_SKIPPED] = "skipped",
	[EXCHANGE_SMOKE_PASSED] = "passed",
	[EXCHANGE_SMOKE_FAILED] = "failed",
};

const char *exchange_smoke_name(enum exchange_smoke s)
{
	return (size_t)s < sizeof(smoke_names) / sizeof(smoke_names[0]) ? smoke_names[s] : "?";
}

static json_t *clean(const char *s, size_t max)
{
	char buf[EXCHANGE_REASON_MAX];
	np_text_clean(buf, max < sizeof(buf) ? max : sizeof(buf), s, NP_TEXT_SPACE);
	return json_string(buf);
}

static json_t *ranks_json(const int *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n && i < EXCHANGE_SUSPECTS_MAX; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

/* An optional array of distinct ranks, at most EXCHANGE_SUSPECTS_MAX. */
static int get_ranks(const json_t *o, const char *key, int *dst, size_t *n, char *why)
{
	*n = 0;
	const json_t *a = json_object_get(o, key);
	if (!a)
		return 0;
	if (!json_is_array(a)) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is not an array", key);
		return -1;
	}
	if (json_array_size(a) > EXCHANGE_SUSPECTS_MAX) {
		snprintf(why, NP_JSON_WHY_MAX, "\"%s\" has %zu ranks, more than %d", key,
			 json_array_size(a), EXCHANGE_SUSPECTS_MAX);
		return -1;
	}
	for (size_t i = 0; i < json_array_size(a); i++) {
		const json_t *v = json_array_get(a, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= 1 << 20) {
			snprintf(why, NP_JSON_WHY_MAX, "\"%s\"[%zu] is not a rank", key, i);
			return -1;
		}
		int r = (int)json_integer_value(v);
		for (size_t k = 0; k < *n; k++)
			if (dst[k] == r) {
				snprintf(why, NP_JSON_WHY_MAX, "\"%s\" names rank %d twice", key, r);
				return -1;
			}
		dst[(*n)++] = r;
	}
	return 0;
}

int exchange_outcome_to_json(const struct exchange_outcome *o, char **json, np_error *err)
{
	/* An id is outputs_new_id's; anything else is a caller's bug, which
	 * the reader would refuse on every pod's status. */
	size_t id_len = strnlen(o->decision_id, sizeof(o->decision_id));
	if (id_len == sizeof(o->decision_id) || !np_str_ok(o->decision_id, NP_CS_NAME)) {
		*json = NULL;
		return np_error_set(err, NP_EINTERNAL, 0, "cannot write the outcome: the decision id is "
				    "not an output set's");
	}
	json_t *j = json_pack("{s:i, s:b, s:i, s:i, s:s, s:f, s:i, s:i}", "v", EXCHANGE_MSG_VERSION,
			      "ok", o->ok, "status", o->ok ? 0 : o->status, "epoch", o->epoch, "smoke",
			      exchange_smoke_name(o->smoke), "min_busbw", o->min_busbw, "nccl", o->nccl,
			      "warnings", o->warnings);
	if (j && !o->ok)
		json_object_set_new(j, "reason", clean(o->reason, sizeof(o->reason)));
	if (j && o->has_busbw)
		json_object_set_new(j, "busbw", json_real(o->busbw));
	if (j && o->suspect[0])
		json_object_set_new(j, "suspect", clean(o->suspect, sizeof(o->suspect)));
	if (j && o->suspect[0]) {
		json_object_set_new(j, "slow_nodes", ranks_json(o->slow_nodes, o->n_slow_nodes));
		json_object_set_new(j, "slow_link_ends", ranks_json(o->slow_link_ends, o->n_slow_link_ends));
	}
	if (j && o->warning[0])
		json_object_set_new(j, "warning", clean(o->warning, sizeof(o->warning)));
	if (j && o->ok && o->decision_id[0])
		json_object_set_new(j, "decision_id", json_string(o->decision_id));
	*json = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	if (!*json)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot write the outcome: out of memory");
	return 0;
}

static int bad(np_error *err, const char *why)
{
	return np_error_set(err, NP_EK8S, 0, "bad outcome: %s", why);
}

static int get_int(const json_t *o, const char *key, long long min, long long max, int *dst,
		   char *why)
{
	long v;
	if (np_json_int(o, key, true, min, max, &v, why) < 0)
		return -1;
	*dst = (int)v;
	return 0;
}

int exchange_outcome_parse(const char *json, size_t len, struct exchange_outcome *out,
			   np_error *err)
{
	static const char *const keys[] = { "v",     "ok",	 "status",  "reason",   "epoch",
					    "smoke", "busbw",	 "min_busbw", "suspect", "slow_nodes", "slow_link_ends", "nccl",
					    "warnings", "warning", "decision_id", NULL };
	char why[NP_JSON_WHY_MAX] = "", smoke[16];
	memset(out, 0, sizeof(*out));
	if (len > EXCHANGE_MSG_MAX_BYTES) {
		snprintf(why, sizeof(why), "%zu bytes, more than %d", len, EXCHANGE_MSG_MAX_BYTES);
		return bad(err, why);
	}
	json_error_t je;
	json_t *o = json ? json_loadb(json, len, JSON_REJECT_DUPLICATES, &je) : NULL;
	if (!o) {
		snprintf(why, sizeof(why), "not JSON: %s", json ? je.text : "empty");
		return bad(err, why);
	}
	long version = 0;
	int ret = -1;
	if (!json_is_object(o)) {
		snprintf(why, sizeof(why), "not a JSON object");
		goto out;
	}
	if (np_json_check_keys(o, keys, why) < 0 ||
	    np_json_int(o, "v", true, 1, 1LL << 40, &version, why) < 0)
		goto out;
	if (version != EXCHANGE_MSG_VERSION) {
		snprintf(why, sizeof(why), "version %ld, this nicpick reads %d", version,
			 EXCHANGE_MSG_VERSION);
		goto out;
	}
	int r;
	if (np_json_bool(o, "ok", &out->ok, why) < 0 ||
	    get_int(o, "status", 0, 255, &out->status, why) < 0 ||
	    get_int(o, "epoch", 0, OUTCOME_EPOCH_MAX, &out->epoch, why) < 0 ||
	    np_json_str(o, "smoke", true, NP_CS_CLS, 1, smoke, sizeof(smoke), why) < 0 ||
	    np_json_num(o, "min_busbw", true, 0, OUTCOME_BUSBW_MAX, &out->min_busbw, why) < 0 ||
	    (r = np_json_num(o, "busbw", false, 0, OUTCOME_BUSBW_MAX, &out->busbw, why)) < 0 ||
	    get_int(o, "nccl", 0, 1 << 30, &out->nccl, why) < 0 ||
	    get_int(o, "warnings", 0, 1 << 20, &out->warnings, why) < 0 ||
	    np_json_str(o, "reason", !out->ok, NP_CS_UTF8, out->ok ? 0 : 1, out->reason,
			sizeof(out->reason), why) < 0 ||
	    np_json_str(o, "suspect", false, NP_CS_UTF8, 1, out->suspect, sizeof(out->suspect), why) < 0 ||
	    np_json_str(o, "warning", false, NP_CS_UTF8, 1, out->warning, sizeof(out->warning), why) < 0 ||
	    /* optional: the nicpick before it wrote none (a job may mix the two) */
	    np_json_str(o, "decision_id", false, NP_CS_NAME, 1, out->decision_id,
			sizeof(out->decision_id), why) < 0)
		goto out;
	out->has_busbw = r == 0;
	if (get_ranks(o, "slow_nodes", out->slow_nodes, &out->n_slow_nodes, why) < 0 ||
	    get_ranks(o, "slow_link_ends", out->slow_link_ends, &out->n_slow_link_ends, why) < 0)
		goto out;
	bool has_ranks = json_object_get(o, "slow_nodes") || json_object_get(o, "slow_link_ends");
	if (has_ranks && !out->suspect[0]) {
		snprintf(why, sizeof(why), "\"slow_nodes\" or \"slow_link_ends\" without \"suspect\"");
		goto out;
	}
	if (out->suspect[0] && !out->n_slow_nodes && !out->n_slow_link_ends) {
		snprintf(why, sizeof(why), "\"suspect\" names no rank in \"slow_nodes\" or \"slow_link_ends\"");
		goto out;
	}
	if (out->ok != (out->status == 0)) {
		snprintf(why, sizeof(why), "\"ok\" is %s with \"status\" %d", out->ok ? "true" : "false",
			 out->status);
		goto out;
	}
	if (out->ok && json_object_get(o, "reason")) {
		snprintf(why, sizeof(why), "\"reason\" given with \"ok\" true");
		goto out;
	}
	if (!out->ok && out->decision_id[0]) {
		snprintf(why, sizeof(why), "\"decision_id\" given with \"ok\" false");
		goto out;
	}
	bool known = false;
	for (size_t i = 0; i < sizeof(smoke_names) / sizeof(smoke_names[0]); i++)
		if (strcmp(smoke, smoke_names[i]) == 0) {
			out->smoke = (enum exchange_smoke)i;
			known = true;
		}
	if (!known) {
		snprintf(why, sizeof(why), "\"smoke\" is \"%s\"", smoke);
		goto out;
	}
	ret = 0;
out:
	json_decref(o);
	if (ret < 0) {
		memset(out, 0, sizeof(*out));
		return bad(err, why);
	}
	return 0;
}
