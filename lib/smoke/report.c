/* The smoke step as a pod records it: decision.json's "smoke" object, the
 * one-line summary, and the reader `nicpick smoke --out-dir` uses. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "smoke/smoke.h"

const char *smoke_status_name(enum smoke_status s)
{
	return s == SMOKE_PASSED ? "passed" : s == SMOKE_FAILED ? "failed" : "skipped";
}

static json_t *sizes_json(const struct smoke_result *r)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < r->n_sizes; i++) {
		const struct smoke_size *s = &r->sizes[i];
		json_array_append_new(a, json_pack("{s:I, s:i, s:f, s:f, s:f, s:I}", "bytes",
						   (json_int_t)s->bytes, "iterations", s->iters,
						   "time_us", s->avg_us, "algbw_gbps", s->algbw_gbps,
						   "busbw_gbps", s->busbw_gbps, "wrong",
						   (json_int_t)s->wrong));
	}
	return a;
}

static json_t *log_json(const struct smoke_log *l)
{
	json_t *sock = json_array(), *ib = json_array(), *warn = json_array();
	for (size_t i = 0; sock && i < l->n_socket; i++)
		json_array_append_new(sock, json_pack("{s:s, s:s}", "interface", l->socket[i].name,
						      "address", l->socket[i].addr));
	for (size_t i = 0; ib && i < l->n_ib; i++)
		json_array_append_new(ib, json_string(l->ib[i].name));
	for (size_t i = 0; warn && i < l->n_warn; i++)
		json_array_append_new(warn, json_string(l->warn[i]));
	json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:s, s:I, s:o}", "nccl_version", l->version,
			      "network", l->network, "net_socket", sock, "net_ib", ib,
			      "channels_via", l->channel_net, "channels", (json_int_t)l->n_channels,
			      "warnings", warn);
	if (o && l->has_bootstrap)
		json_object_set_new(o, "bootstrap", json_pack("{s:s, s:s}", "interface",
							      l->bootstrap.name, "address",
							      l->bootstrap.addr));
	if (o && l->has_oob)
		json_object_set_new(o, "ib_oob", json_pack("{s:s, s:s}", "interface", l->oob.name,
							   "address", l->oob.addr));
	return o;
}

struct json_t *smoke_report_to_json(const struct smoke_report *s)
{
	json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:s}", "status", smoke_status_name(s->status),
			      "reason", s->reason, "rank", s->rank, "world", s->world, "comm_id",
			      s->comm_id);
	if (!o || !s->ran)
		return o;
	const struct smoke_result *r = &s->result;
	char nv[32], cd[16], cr[16];
	smoke_nccl_version_text(r->nccl_version, nv, sizeof(nv));
	smoke_cuda_version_text(r->cuda_driver, cd, sizeof(cd));
	smoke_cuda_version_text(r->cuda_runtime, cr, sizeof(cr));
	json_object_set_new(o, "correct", json_boolean(r->ok && r->n_sizes > 0 &&
							r->sizes[r->n_sizes - 1].wrong == 0 &&
							r->phase == SMOKE_PHASE_DONE));
	json_object_set_new(o, "time_to_verdict_ms", json_integer(s->verdict_ms));
	json_object_set_new(o, "init_ms", json_integer(r->init_ms));
	json_object_set_new(o, "sizes", sizes_json(r));
	if (s->min_busbw > 0)
		json_object_set_new(o, "min_busbw", json_pack("{s:f, s:s}", "gbps", s->min_busbw,
							      "why", s->min_busbw_why));
	json_object_set_new(o, "nccl", json_pack("{s:s, s:s}", "version", nv, "path", r->nccl_path));
	json_object_set_new(o, "cuda", json_pack("{s:s, s:s, s:s}", "driver", cd, "runtime", cr,
						 "runtime_path", r->cudart_path));
	json_object_set_new(o, "gpu", json_pack("{s:s, s:s, s:i}", "model", r->gpu, "bus",
						r->gpu_bus, "visible", r->gpu_count));
	json_object_set_new(o, "nccl_log", log_json(&s->log));
	if (r->n_links) {
		json_t *links = json_array();
		for (size_t i = 0; links && i < r->n_links; i++)
			json_array_append_new(links, json_pack("{s:I, s:I, s:f, s:f, s:b}", "from",
							       (json_int_t)i, "to",
							       (json_int_t)((i + 1) % r->n_links),
							       "gbps", r->links[i].fwd_gbps, "back_gbps",
							       r->links[i].rev_gbps, "slow",
							       s->links.slow[i]));
		json_t *named = json_array();
		for (size_t i = 0; named && i < s->links.n_named; i++) {
			int rk = s->links.named[i];
			json_array_append_new(named, json_pack("{s:i, s:s, s:s}", "rank", rk, "label",
							       (size_t)rk < r->n_labels ? r->labels[rk] : "",
							       "why", s->links.both[i] ? "both ring links slow"
											: "one end of a slow link"));
		}
		json_object_set_new(o, "links", json_pack("{s:o, s:I, s:f, s:f, s:o, s:s, s:s}", "ring", links,
							  "time_ms", (json_int_t)r->links_ms,
							  "fastest_gbps", s->links.ref_gbps,
							  "slow_below", SMOKE_SLOW_LINK_FRACTION, "named", named,
							  "verdict", s->links_text,
							  "on_slow", s->slow_link_fails ? "fail" : "warn"));
	}
	if (s->debug_dir[0])
		json_object_set_new(o, "nccl_debug_dir", json_string(s->debug_dir));
	return o;
}

void smoke_report_summary(const struct smoke_report *s, char *buf, size_t len)
{
	if (s->status == SMOKE_SKIPPED) {
		snprintf(buf, len, "smoke all-reduce skipped: %s", s->reason);
		return;
	}
	if (s->status == SMOKE_FAILED) {
		snprintf(buf, len, "smoke all-reduce failed: %s", s->reason);
		return;
	}
	const struct smoke_result *r = &s->result;
	const struct smoke_size *z = r->n_sizes ? &r->sizes[r->n_sizes - 1] : NULL;
	char nv[32];
	smoke_nccl_version_text(r->nccl_version, nv, sizeof(nv));
	const char *dev = s->log.n_socket ? s->log.socket[0].name
			  : s->log.n_ib  ? s->log.ib[0].name
					 : s->ifname;
	char sz[32], cd[16], cr[16], per[160] = "";
	smoke_size_text(z ? z->bytes : 0, sz, sizeof(sz));
	smoke_cuda_version_text(r->cuda_driver, cd, sizeof(cd));
	smoke_cuda_version_text(r->cuda_runtime, cr, sizeof(cr));
	/* busbw at every size, smallest first: "0.21, 1.37, 1.73" */
	for (size_t i = 0; i < r->n_sizes; i++) {
		size_t off = strlen(per);
		snprintf(per + off, sizeof(per) - off, "%s%.2f", i ? ", " : "", r->sizes[i].busbw_gbps);
	}
	int n = snprintf(buf, len,
		 "smoke all-reduce passed: %d pods, exact sums, busbw %.2f GB/s at %s (by size: %s GB/s), NCCL %s from %s on %s (%s), CUDA driver %s runtime %s, %s, verdict in %.1f s",
		 r->world, z ? z->busbw_gbps : 0.0, sz, per, nv, r->nccl_path, dev,
		 s->log.network[0] ? s->log.network : "Socket", cd, cr, r->gpu[0] ? r->gpu : "GPU ?",
		 s->verdict_ms / 1000.0);
	if (r->n_links && n > 0 && (size_t)n < len) {
		char fig[512];
		smoke_links_figures(r, fig, sizeof(fig));
		n += snprintf(buf + n, len - (size_t)n, "; ring links GB/s: %s", fig);
	}
	if (s->links_text[0] && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "; warning: %s", s->links_text);
}

/* ---- reading a finished out-dir ---- */

__attribute__((format(printf, 3, 4))) static int bad(np_error *err, const char *path,
						      const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	for (char *p = why; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	return np_error_set(err, NP_EUSAGE, 0, "%s: %s (was it written by nicpick select?)", path, why);
}

static int text(const json_t *o, const char *key, char *dst, size_t len, bool required,
		const char *path, np_error *err)
{
	const json_t *v = json_object_get(o, key);
	if (!v && !required) {
		dst[0] = '\0';
		return 0;
	}
	if (!json_is_string(v))
		return bad(err, path, "\"%s\" is missing or not a string", key);
	if (json_string_length(v) >= len || strlen(json_string_value(v)) != json_string_length(v))
		return bad(err, path, "\"%s\" is too long or holds a NUL", key);
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int integer(const json_t *o, const char *key, long min, long max, long *dst,
		   const char *path, np_error *err)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return bad(err, path, "\"%s\" is missing or not an integer in %ld..%ld", key, min, max);
	*dst = (long)json_integer_value(v);
	return 0;
}

int smoke_outdir_load(const char *dir, struct smoke_outdir *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	char path[4096];
	snprintf(path, sizeof(path), "%s/decision.json", dir);
	json_error_t je;
	json_t *d = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!d) {
		if (je.line == -1 && errno == ENOENT)
			return np_error_set(err, NP_EUSAGE, ENOENT, "cannot read %s", path);
		return bad(err, path, "%s (line %d)", je.text, je.line);
	}
	int ret = -1;
	long v;
	const json_t *env = json_object_get(d, "env"), *choice = json_object_get(d, "choice"),
		     *smoke = json_object_get(d, "smoke"), *val;
	const char *key;
	if (!json_is_object(env) || !json_is_object(choice) || !json_is_object(smoke)) {
		bad(err, path, "\"env\", \"choice\" or \"smoke\" is missing");
		goto out;
	}
	json_object_foreach((json_t *)env, key, val) {
		if (out->n_vars == SMOKE_OUTDIR_VARS_MAX) {
			bad(err, path, "more than %d variables in \"env\"", SMOKE_OUTDIR_VARS_MAX);
			goto out;
		}
		if (strlen(key) >= sizeof(out->key[0]) || strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(key)) {
			bad(err, path, "\"env\" has a key that is no variable name");
			goto out;
		}
		if (text(env, key, out->value[out->n_vars], sizeof(out->value[0]), true, path, err) < 0)
			goto out;
		snprintf(out->key[out->n_vars], sizeof(out->key[0]), "%s", key);
		out->n_vars++;
	}
	if (text(choice, "interface", out->ifname, sizeof(out->ifname), true, path, err) < 0 ||
	    text(choice, "ib_hca", out->ib_hca, sizeof(out->ib_hca), false, path, err) < 0 ||
	    text(smoke, "comm_id", out->comm_id, sizeof(out->comm_id), true, path, err) < 0)
		goto out;
	if (integer(smoke, "world", 1, 1 << 20, &v, path, err) < 0)
		goto out;
	out->world = (int)v;
	if (integer(smoke, "rank", 0, out->world - 1, &v, path, err) < 0)
		goto out;
	out->rank = (int)v;
	out->min_mbps = -1;
	if (json_object_get(choice, "effective_speed_mbps") &&
	    integer(choice, "effective_speed_mbps", -1, 100000000, &out->min_mbps, path, err) < 0)
		goto out;
	/* NCCL_IB_HCA in the outputs carries a leading '=' */
	if (out->ib_hca[0] == '=')
		memmove(out->ib_hca, out->ib_hca + 1, strlen(out->ib_hca));
	ret = 0;
out:
	json_decref(d);
	return ret;
}
