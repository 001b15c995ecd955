/* The pure parts of the smoke test: what it runs, what it expects, and the
 * verdict. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "smoke/smoke.h"

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

void smoke_nccl_version_text(int code, char *buf, size_t len)
{
	if (code <= 0)
		snprintf(buf, len, "unknown");
	else if (code < 10000) /* NCCL_VERSION(X,Y,Z) before 2.9: X*1000+Y*100+Z */
		snprintf(buf, len, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
	else
		snprintf(buf, len, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
}

void smoke_cuda_version_text(int code, char *buf, size_t len)
{
	if (code <= 0)
		snprintf(buf, len, "unknown");
	else
		snprintf(buf, len, "%d.%d", code / 1000, code % 1000 / 10);
}

size_t smoke_plan_sizes(long max_bytes, long *sizes)
{
	size_t n = 0;
	if (max_bytes < SMOKE_MIN_BYTES)
		max_bytes = SMOKE_MIN_BYTES;
	max_bytes &= ~3L; /* whole float32 elements */
	for (long b = 1L << 20; b < max_bytes && n < SMOKE_SIZES_MAX - 1; b <<= 3)
		sizes[n++] = b;
	sizes[n++] = max_bytes;
	return n;
}

/* 1..8: a sum over up to 2^20 ranks stays below 2^24, where every integer
 * is exact in float32, whatever order NCCL adds in. */
float smoke_input_value(int rank, size_t i)
{
	return (float)((i + (size_t)rank) % 8 + 1);
}

float smoke_expected_sum(int world, size_t i)
{
	/* Every full cycle of 8 ranks contributes 1+...+8 = 36. */
	long sum = (long)(world / 8) * 36;
	for (int r = world / 8 * 8; r < world; r++)
		sum += (long)((i + (size_t)r) % 8 + 1);
	return (float)sum;
}

double smoke_busbw_factor(int world)
{
	return world > 1 ? 2.0 * (world - 1) / world : 1.0;
}

double smoke_default_min_busbw(long min_mbps)
{
	if (min_mbps <= 0)
		return 0;
	return min_mbps / 8000.0 * 0.05;
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

int smoke_judge(const struct smoke_result *r, const struct smoke_log *log,
		const struct smoke_expect *x, np_error *err)
{
	for (size_t i = 0; i < r->n_sizes; i++) {
		if (r->sizes[i].wrong) {
			char sz[32];
			smoke_size_text(r->sizes[i].bytes, sz, sizeof(sz));
			return np_error_set(err, NP_ESMOKE, 0,
					    "smoke all-reduce of %s gave wrong sums: %ld of %ld elements differ from the exact sum",
					    sz, r->sizes[i].wrong, r->sizes[i].bytes / 4);
		}
	}
	if (!r->ok) {
		if (r->unavailable)
			return np_error_set(err, NP_ESMOKE, 0, "smoke test cannot run here (%s): %s",
					    smoke_unavailable_name(r->unavailable), r->error);
		return np_error_set(err, NP_ESMOKE, 0, "smoke all-reduce failed in %s: %s",
				    smoke_phase_name(r->phase), r->error);
	}
	int proof = 0;
	if (log && (x->n_ifs || x->ib_hca)) {
		struct smoke_log_want w = { .ifs = x->ifs, .n_ifs = x->n_ifs, .hca = x->ib_hca,
					    .boot = x->boot, .world = r->world };
		proof = smoke_log_check(log, &w, err);
		if (proof < 0)
			return -1;
		if (proof > 0 && x->required)
			return np_error_wrap(err, "--smoke required");
	}
	if (x->min_busbw > 0 && r->n_sizes > 0 && r->world > 1) {
		const struct smoke_size *s = &r->sizes[r->n_sizes - 1];
		if (s->busbw_gbps < x->min_busbw) {
			char sz[32];
			smoke_size_text(s->bytes, sz, sizeof(sz));
			return np_error_set(err, NP_ESMOKE, 0,
					    "slow network: busbw %.2f GB/s (algbw %.2f GB/s) at %s < %.2f GB/s (%s)",
					    s->busbw_gbps, s->algbw_gbps, sz, x->min_busbw, x->min_busbw_why);
		}
	}
	return proof;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int smoke_ring_suspect(const struct smoke_result *r, double *gbps, double *median)
{
	if (r->n_ring < 3)
		return -1;
	static double v[SMOKE_RING_MAX];
	memcpy(v, r->ring_gbps, r->n_ring * sizeof(double));
	qsort(v, r->n_ring, sizeof(double), cmp_double);
	double med = r->n_ring % 2 ? v[r->n_ring / 2] : (v[r->n_ring / 2 - 1] + v[r->n_ring / 2]) / 2;
	int worst = -1;
	for (size_t i = 0; i < r->n_ring; i++)
		if (r->ring_gbps[i] < med / 3 && (worst < 0 || r->ring_gbps[i] < r->ring_gbps[worst]))
			worst = (int)i;
	if (worst >= 0) {
		*gbps = r->ring_gbps[worst];
		*median = med;
	}
	return worst;
}
