/* --tune without a GPU: the sweep's plan, the never-worse verdict and
 * what decision.json and the log say. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/select.h"

static void plan_fits_the_budget_and_nccls_limits(void **state)
{
	struct select_tune_conf c[SELECT_TUNE_RUNS_MAX];
	/* 15 s at 2.5 s a run: 6 runs, NCCL's defaults first and last */
	size_t n = select_tune_plan(15, c, SELECT_TUNE_RUNS_MAX);
	assert_int_equal(n, 15 * 1000 / SELECT_TUNE_RUN_MS);
	assert_int_equal(c[0].nthreads, 0);
	assert_int_equal(c[0].nsocks, 0);
	assert_int_equal(c[n - 1].nthreads, 0);
	assert_int_equal(c[n - 1].nsocks, 0);
	/* 4 x 4 first: what issue 16 measured as the best on two H200s */
	assert_int_equal(c[1].nthreads, 4);
	assert_int_equal(c[1].nsocks, 4);
	for (size_t i = 1; i + 1 < n; i++) {
		/* net_socket.cc: MAX_THREADS 16, MAX_SOCKETS 64 */
		assert_true(c[i].nthreads >= 1 && c[i].nthreads <= SELECT_TUNE_THREADS_MAX);
		assert_true(c[i].nsocks >= 1);
		assert_true(c[i].nthreads * c[i].nsocks <= SELECT_TUNE_SOCKETS_MAX);
		for (size_t k = 1; k < i; k++)
			assert_false(c[k].nthreads == c[i].nthreads && c[k].nsocks == c[i].nsocks);
	}
	/* the same options give the same plan on every pod */
	struct select_tune_conf d[SELECT_TUNE_RUNS_MAX];
	assert_int_equal(select_tune_plan(15, d, SELECT_TUNE_RUNS_MAX), n);
	assert_memory_equal(c, d, n * sizeof(c[0]));
	/* a short budget: fewer runs; below 3 runs, none */
	assert_int_equal(select_tune_plan(10, c, SELECT_TUNE_RUNS_MAX), 4);
	assert_int_equal(select_tune_plan(7, c, SELECT_TUNE_RUNS_MAX), 0);
	/* a long one is capped by the room and the candidates */
	n = select_tune_plan(600, c, SELECT_TUNE_RUNS_MAX);
	assert_true(n <= SELECT_TUNE_RUNS_MAX);
	assert_int_equal(c[n - 1].nthreads, 0);
	assert_int_equal(select_tune_plan(600, c, 5), 5);
}

static struct select_tune sweep(const double *busbw, const int (*conf)[2], size_t n)
{
	struct select_tune t;
	memset(&t, 0, sizeof(t));
	t.bytes = 64L << 20;
	t.budget_s = 15;
	for (size_t i = 0; i < n; i++) {
		t.rows[i].c.nthreads = conf[i][0];
		t.rows[i].c.nsocks = conf[i][1];
		t.rows[i].ok = busbw[i] >= 0;
		t.rows[i].busbw = busbw[i] >= 0 ? busbw[i] : 0;
	}
	t.n = n;
	return t;
}

static const int confs[][2] = { { 0, 0 }, { 4, 4 }, { 8, 2 }, { 2, 8 }, { 0, 0 } };

static void verdict_takes_the_best_that_beats_the_defaults(void **state)
{
	/* issue 16, two H200s, one link at 64 MiB */
	const double bw[] = { 2.66, 9.61, 5.23, 7.0, 2.70 };
	struct select_tune t = sweep(bw, confs, 5);
	select_tune_verdict(&t);
	assert_int_equal(t.status, SELECT_TUNE_TUNED);
	assert_int_equal(t.best, 1);
	assert_float_equal(t.defaults, 2.70, 1e-9);
	assert_float_equal(t.spread, 0.04, 1e-9);
	assert_non_null(strstr(t.reason, "4 threads x 4 sockets: busbw 9.61 GB/s"));
	char line[1024];
	select_tune_text(&t, line, sizeof(line));
	assert_non_null(strstr(line, "tuned NCCL's socket transport"));
}

static void verdict_is_never_worse_than_the_defaults(void **state)
{
	/* issue 16, the one-GPU kind: 4 x 4 lost to the defaults */
	const double lost[] = { 1.83, 1.60, 1.14, 1.85, 1.80 };
	struct select_tune t = sweep(lost, confs, 5);
	select_tune_verdict(&t);
	assert_int_equal(t.status, SELECT_TUNE_DEFAULTS);
	assert_int_equal(t.best, -1);
	assert_non_null(strstr(t.reason, "never worse"));
	/* a gain inside the spread measured between the two defaults runs */
	const double noisy[] = { 2.0, 2.35, 1.0, 1.0, 2.4 };
	t = sweep(noisy, confs, 5);
	select_tune_verdict(&t);
	assert_int_equal(t.status, SELECT_TUNE_DEFAULTS);
	assert_float_equal(t.margin, 0.4, 1e-9);
	/* ... just beyond it */
	const double beyond[] = { 2.0, 2.81, 1.0, 1.0, 2.4 };
	t = sweep(beyond, confs, 5);
	select_tune_verdict(&t);
	assert_int_equal(t.status, SELECT_TUNE_TUNED);
	/* no spread measured (equal runs): at least 2% */
	const double flat[] = { 2.0, 2.03, 1.0, 1.0, 2.0 };
	t = sweep(flat, confs, 5);
	select_tune_verdict(&t);
	assert_int_equal(t.status, SELECT_TUNE_DEFAULTS);
	assert_float_equal(t.margin, 0.04, 1e-9);
	/* the defaults measured once only: nothing to judge by */
	const double once[] = { 2.0, 9.0, 1.0, 1.0, -1 };
	t = sweep(once, confs, 5);
	select_tune_verdict(&t);
	assert_int_equal(t.status, SELECT_TUNE_DEFAULTS);
	assert_int_equal(t.best, -1);
}

static void decision_json_has_the_table(void **state)
{
	const double bw[] = { 2.66, 9.61, 5.23, 7.0, 2.70 };
	struct select_tune t = sweep(bw, confs, 5);
	t.rows[2].ok = false;
	snprintf(t.rows[2].why, sizeof(t.rows[2].why), "init did not finish");
	select_tune_verdict(&t);
	json_t *j = select_tune_json(&t);
	assert_non_null(j);
	char *s = json_dumps(j, JSON_COMPACT);
	assert_non_null(strstr(s, "\"status\":\"tuned\""));
	assert_non_null(strstr(s, "\"chosen\":{\"NCCL_SOCKET_NTHREADS\":4,\"NCCL_NSOCKS_PERTHREAD\":4}"));
	assert_non_null(strstr(s, "{\"nthreads\":null,\"nsocks_perthread\":null,\"ok\":true,\"busbw_gbps\":2.66"));
	assert_non_null(strstr(s, "\"ok\":false"));
	assert_non_null(strstr(s, "init did not finish"));
	assert_int_equal(json_array_size(json_object_get(j, "table")), 5);
	free(s);
	json_decref(j);
	/* never worse: the table, and no choice */
	const double lost[] = { 1.83, 1.60, 1.14, 1.85, 1.80 };
	t = sweep(lost, confs, 5);
	select_tune_verdict(&t);
	j = select_tune_json(&t);
	assert_true(json_is_null(json_object_get(j, "chosen")));
	assert_string_equal(json_string_value(json_object_get(j, "status")), "defaults");
	json_decref(j);
	/* --tune off: nothing at all */
	struct select_tune off = { .status = SELECT_TUNE_NOT_RUN };
	assert_null(select_tune_json(&off));
}

static void over_ib_or_alone_it_is_skipped_with_the_reason(void **state)
{
	struct select_tune_opts t = { .mode = SELECT_TUNE_ON, .budget_s = 15 };
	struct select_smoke_opts o = { .mode = SELECT_SMOKE_AUTO };
	struct select_ctx cx = { .deadline_ms = INT64_MAX };
	struct select_smoke_plan p = { .rank = 0, .world = 2 };
	struct outputs_env env = { 0 };
	struct smoke_report *rep = calloc(1, sizeof(*rep));
	struct select_tune out;
	np_error err = { 0 };
	rep->status = SMOKE_PASSED;
	snprintf(rep->log.network, sizeof(rep->log.network), "IB");
	rep->log.n_ib = 1;
	snprintf(rep->log.ib[0].name, sizeof(rep->log.ib[0].name), "mlx5_0:1");
	assert_int_equal(select_tune_run(&t, &o, &cx, "/nonexistent", &p, &env, rep, &out, &err), 0);
	assert_int_equal(out.status, SELECT_TUNE_SKIPPED);
	assert_non_null(strstr(out.reason, "NCCL used NET/IB (mlx5_0:1)"));
	assert_int_equal(env.n, 0);
	memset(&rep->log, 0, sizeof(rep->log));
	p.world = 1;
	assert_int_equal(select_tune_run(&t, &o, &cx, "/nonexistent", &p, &env, rep, &out, &err), 0);
	assert_non_null(strstr(out.reason, "one pod"));
	p.world = 2;
	rep->status = SMOKE_SKIPPED;
	snprintf(rep->reason, sizeof(rep->reason), "no-gpu");
	assert_int_equal(select_tune_run(&t, &o, &cx, "/nonexistent", &p, &env, rep, &out, &err), 0);
	assert_non_null(strstr(out.reason, "did not pass here (no-gpu)"));
	t.mode = SELECT_TUNE_OFF;
	assert_int_equal(select_tune_run(&t, &o, &cx, "/nonexistent", &p, &env, rep, &out, &err), 0);
	assert_int_equal(out.status, SELECT_TUNE_NOT_RUN);
	free(rep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_fits_the_budget_and_nccls_limits),
		cmocka_unit_test(verdict_takes_the_best_that_beats_the_defaults),
		cmocka_unit_test(verdict_is_never_worse_than_the_defaults),
		cmocka_unit_test(decision_json_has_the_table),
		cmocka_unit_test(over_ib_or_alone_it_is_skipped_with_the_reason),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
