/* --tune: NCCL's socket transport measured where the job runs.
 *
 * NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD set how many helper
 * threads and sockets NET/Socket uses per connection.  NCCL reads each
 * once per process and caches it (NCCL_PARAM, src/include/param.h, 2.28.3),
 * so one process cannot try two settings: every run of the sweep is a
 * companion process of its own, with the outputs' variables plus the two,
 * delivered exactly as the smoke step delivers them (select_smoke).  The
 * listener's settings travel in its connect handle (net_socket.cc,
 * ncclNetSocketListen / ncclNetSocketConnect), and every pod runs the same
 * plan, so every pod runs the same configuration at the same moment: each
 * run's communicator cannot start until every rank joins it.  The
 * companion reports the ranks' mean time, so every pod judges the same
 * figures and takes the same verdict.
 *
 * Never worse: the best configuration is written only when it beats NCCL's
 * defaults, measured first and last in the same sweep, by more than their
 * run-to-run spread (and at least SPREAD_FLOOR of them). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/select.h"
#include "util/clock.h"

#define SPREAD_FLOOR 0.02 /* two runs estimate the spread poorly: at least 2% */

/* Most likely first: 4 x 4 (issue 16's measurements), NCCL's own vendor
 * settings (AWS 2 x 8, GCP 4 x 1, net_socket.cc), then around them. */
static const struct select_tune_conf candidates[] = {
	{ 4, 4 }, { 2, 8 }, { 8, 2 }, { 4, 1 }, { 2, 4 }, { 4, 2 }, { 8, 4 },
	{ 4, 8 }, { 16, 4 }, { 8, 8 }, { 2, 2 }, { 16, 2 }, { 1, 8 }, { 16, 1 },
};

static bool is_defaults(const struct select_tune_conf *c)
{
	return c->nthreads == 0 && c->nsocks == 0;
}

size_t select_tune_plan(int budget_s, struct select_tune_conf *out, size_t max)
{
	if (budget_s <= 0)
		budget_s = SELECT_TUNE_DEFAULT_BUDGET_S;
	long runs = (long)budget_s * 1000 / SELECT_TUNE_RUN_MS;
	if (runs > (long)max)
		runs = (long)max;
	if (runs > (long)(sizeof(candidates) / sizeof(candidates[0])) + 2)
		runs = (long)(sizeof(candidates) / sizeof(candidates[0])) + 2;
	if (runs < 3)
		return 0;
	size_t n = 0;
	out[n++] = (struct select_tune_conf){ 0, 0 };
	for (size_t i = 0; n < (size_t)runs - 1; i++)
		out[n++] = candidates[i];
	out[n++] = (struct select_tune_conf){ 0, 0 };
	return n;
}

static void conf_text(const struct select_tune_conf *c, char *buf, size_t len)
{
	if (is_defaults(c))
		snprintf(buf, len, "NCCL's defaults");
	else
		snprintf(buf, len, "%d threads x %d sockets", c->nthreads, c->nsocks);
}

void select_tune_verdict(struct select_tune *t)
{
	const struct select_tune_row *first = NULL, *last = NULL;
	t->best = -1;
	t->defaults = t->spread = t->margin = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct select_tune_row *r = &t->rows[i];
		if (is_defaults(&r->c)) {
			if (!first)
				first = r;
			else
				last = r;
		} else if (r->ok && (t->best < 0 || r->busbw > t->rows[t->best].busbw)) {
			t->best = (int)i;
		}
	}
	t->status = SELECT_TUNE_DEFAULTS;
	if (!first || !last || !first->ok || !last->ok) {
		t->best = -1;
		snprintf(t->reason, sizeof(t->reason),
			 "NCCL's defaults were not measured twice: no spread to judge by");
		return;
	}
	t->defaults = first->busbw > last->busbw ? first->busbw : last->busbw;
	t->spread = first->busbw > last->busbw ? first->busbw - last->busbw : last->busbw - first->busbw;
	t->margin = t->spread > t->defaults * SPREAD_FLOOR ? t->spread : t->defaults * SPREAD_FLOOR;
	if (t->best < 0) {
		snprintf(t->reason, sizeof(t->reason), "no other configuration ran: NCCL's defaults stand");
		return;
	}
	const struct select_tune_row *b = &t->rows[t->best];
	char c[64];
	conf_text(&b->c, c, sizeof(c));
	if (b->busbw > t->defaults + t->margin) {
		t->status = SELECT_TUNE_TUNED;
		snprintf(t->reason, sizeof(t->reason),
			 "%s: busbw %.2f GB/s, %.2fx NCCL's defaults (%.2f GB/s, run-to-run spread %.2f GB/s)",
			 c, b->busbw, t->defaults > 0 ? b->busbw / t->defaults : 0.0, t->defaults, t->spread);
		return;
	}
	snprintf(t->reason, sizeof(t->reason),
		 "never worse: the best, %s at %.2f GB/s, does not beat NCCL's defaults (%.2f GB/s) by more "
		 "than %.2f GB/s (the spread, at least 2%%)",
		 c, b->busbw, t->defaults, t->margin);
	t->best = -1;
}

__attribute__((format(printf, 2, 3))) static int skip(struct select_tune *out, const char *fmt, ...)
{
	out->status = SELECT_TUNE_SKIPPED;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
	return 0;
}

static int add_var(struct outputs_env *env, const char *key, int v, np_error *err)
{
	if (env->n >= OUTPUTS_VARS_MAX)
		return np_error_set(err, NP_EINTERNAL, 0, "too many output variables");
	env->vars[env->n].key = key;
	snprintf(env->vars[env->n++].value, sizeof(env->vars[0].value), "%d", v);
	return 0;
}

static int conf_env(const struct outputs_env *env, const struct select_tune_conf *c,
		    struct outputs_env *out, np_error *err)
{
	*out = *env;
	if (is_defaults(c))
		return 0;
	return add_var(out, "NCCL_SOCKET_NTHREADS", c->nthreads, err) < 0 ||
			       add_var(out, "NCCL_NSOCKS_PERTHREAD", c->nsocks, err) < 0
		       ? -1
		       : 0;
}

static void say(const struct select_ctx *cx, enum exchange_log_level l, const char *msg)
{
	if (cx->log)
		cx->log(cx->log_ud, l, msg);
}

int select_tune_run(const struct select_tune_opts *t, const struct select_smoke_opts *o,
		    const struct select_ctx *cx, const char *out_dir, const struct select_smoke_plan *p,
		    struct outputs_env *env, const struct smoke_report *smoke, struct select_tune *out,
		    np_error *err)
{
	memset(out, 0, sizeof(*out));
	out->best = -1;
	if (t->mode == SELECT_TUNE_OFF)
		return 0;
	out->budget_s = t->budget_s > 0 ? t->budget_s : SELECT_TUNE_DEFAULT_BUDGET_S;
	long smoke_bytes = o->bytes > 0 ? o->bytes : SMOKE_DEFAULT_BYTES;
	out->bytes = t->bytes > 0 ? t->bytes : smoke_bytes < SELECT_TUNE_BYTES ? smoke_bytes : SELECT_TUNE_BYTES;
	if (smoke->status != SMOKE_PASSED)
		return skip(out, "the smoke test did not pass here (%s): nothing to measure with",
			    smoke->status == SMOKE_SKIPPED ? smoke->reason : "failed");
	const struct smoke_log *lg = &smoke->log;
	if (strcmp(lg->network, "IB") == 0 || (lg->n_ib && !lg->n_socket))
		return skip(out, "NCCL used NET/IB (%s): NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD "
			    "only apply to NET/Socket", lg->n_ib ? lg->ib[0].name : "IB");
	if (p->world < 2)
		return skip(out, "%s", "one pod: no network between pods to tune");
	struct select_tune_conf plan[SELECT_TUNE_RUNS_MAX];
	size_t n = select_tune_plan(out->budget_s, plan, SELECT_TUNE_RUNS_MAX);
	if (n == 0) {
		char b[32];
		snprintf(b, sizeof(b), "%d", out->budget_s);
		return skip(out, "--tune-budget %s s fits fewer than 3 runs", b);
	}

	/* Every run within the budget; the companion's own log lines are
	 * left out (one line per configuration instead). */
	int64_t t0 = np_now_ms();
	struct select_ctx rcx = *cx;
	rcx.log = NULL;
	if (t0 + out->budget_s * 1000LL < rcx.deadline_ms)
		rcx.deadline_ms = t0 + out->budget_s * 1000LL;
	struct select_smoke_opts ro = *o;
	ro.mode = SELECT_SMOKE_REQUIRED;
	ro.bytes = out->bytes;
	ro.timeout_s = out->budget_s;
	ro.min_busbw = 1e-9; /* a slow configuration is a figure, not a failure */
	ro.nccl_debug = false; /* --nccl-debug keeps the smoke step's log, not the sweep's */
	ro.no_links = true;    /* the smoke step judged the links; a run is its busbw */
	struct smoke_report *rep = malloc(sizeof(*rep));
	struct outputs_env *renv = malloc(sizeof(*renv));
	if (!rep || !renv) {
		free(rep);
		free(renv);
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	}
	int ret = 0;
	for (size_t i = 0; i < n; i++) {
		struct select_tune_row *row = &out->rows[out->n++];
		row->c = plan[i];
		int64_t r0 = np_now_ms();
		np_error rerr = { 0 };
		memset(rep, 0, sizeof(*rep));
		if (conf_env(env, &plan[i], renv, err) < 0) {
			ret = -1;
			break;
		}
		int r = select_smoke(&ro, &rcx, out_dir, p, renv, rep, &rerr);
		row->ms = (long)(np_now_ms() - r0);
		const struct smoke_result *res = &rep->result;
		row->ok = r == 0 && rep->status == SMOKE_PASSED && res->n_sizes > 0;
		if (row->ok)
			row->busbw = res->sizes[res->n_sizes - 1].busbw_gbps;
		else
			snprintf(row->why, sizeof(row->why), "%s", rerr.msg[0] ? rerr.msg : rep->reason);
		char c[64], line[400];
		conf_text(&row->c, c, sizeof(c));
		if (row->ok)
			snprintf(line, sizeof(line), "tune %zu/%zu: %s: busbw %.2f GB/s (%.1f s)", i + 1, n, c,
				 row->busbw, row->ms / 1000.0);
		else
			snprintf(line, sizeof(line), "tune %zu/%zu: %s failed: %s", i + 1, n, c, row->why);
		say(cx, row->ok ? EXCHANGE_INFO : EXCHANGE_WARN, line);
		if (!row->ok) {
			/* The other pods may be waiting in this run: stop, tune nothing. */
			out->status = SELECT_TUNE_SKIPPED;
			snprintf(out->reason, sizeof(out->reason), "run %zu of %zu (%s) failed: %.300s", i + 1, n,
				 c, row->why);
			break;
		}
	}
	out->ms = np_now_ms() - t0;
	free(rep);
	free(renv);
	if (ret < 0 || out->status == SELECT_TUNE_SKIPPED)
		return ret;
	select_tune_verdict(out);
	if (out->status == SELECT_TUNE_TUNED && conf_env(env, &out->rows[out->best].c, env, err) < 0)
		return -1;
	return 0;
}

static const char *status_name(enum select_tune_status s)
{
	switch (s) {
	case SELECT_TUNE_SKIPPED:
		return "skipped";
	case SELECT_TUNE_DEFAULTS:
		return "defaults";
	case SELECT_TUNE_TUNED:
		return "tuned";
	default:
		return "off";
	}
}

void select_tune_text(const struct select_tune *t, char *buf, size_t len)
{
	switch (t->status) {
	case SELECT_TUNE_TUNED:
		snprintf(buf, len, "tuned NCCL's socket transport: %s; %zu runs in %.1f s", t->reason, t->n,
			 t->ms / 1000.0);
		break;
	case SELECT_TUNE_DEFAULTS:
		snprintf(buf, len, "NCCL's socket defaults stand: %s; %zu runs in %.1f s", t->reason, t->n,
			 t->ms / 1000.0);
		break;
	case SELECT_TUNE_SKIPPED:
		snprintf(buf, len, "tuning skipped: %s", t->reason);
		break;
	default:
		snprintf(buf, len, "tuning off");
	}
}

static json_t *conf_value(int v)
{
	return v > 0 ? json_integer(v) : json_null();
}

json_t *select_tune_json(const struct select_tune *t)
{
	if (t->status == SELECT_TUNE_NOT_RUN)
		return NULL;
	json_t *table = json_array();
	for (size_t i = 0; table && i < t->n; i++) {
		const struct select_tune_row *r = &t->rows[i];
		json_array_append_new(table, json_pack("{s:o, s:o, s:b, s:f, s:I, s:s}", "nthreads",
						       conf_value(r->c.nthreads), "nsocks_perthread",
						       conf_value(r->c.nsocks), "ok", r->ok, "busbw_gbps",
						       r->busbw, "ms", (json_int_t)r->ms, "why", r->why));
	}
	json_t *o = json_pack("{s:s, s:s, s:I, s:i, s:I, s:f, s:f, s:f, s:o}", "status",
			      status_name(t->status), "reason", t->reason, "bytes", (json_int_t)t->bytes,
			      "budget_s", t->budget_s, "sweep_ms", (json_int_t)t->ms, "defaults_gbps",
			      t->defaults, "spread_gbps", t->spread, "margin_gbps", t->margin, "table",
			      table);
	if (o) {
		const struct select_tune_row *b = t->status == SELECT_TUNE_TUNED && t->best >= 0
							  ? &t->rows[t->best]
							  : NULL;
		json_object_set_new(o, "chosen",
				    b ? json_pack("{s:i, s:i}", "NCCL_SOCKET_NTHREADS", b->c.nthreads,
						  "NCCL_NSOCKS_PERTHREAD", b->c.nsocks)
				      : json_null());
	}
	return o;
}
