/* nicpick's pure parts of the smoke test: what it expects, and the
 * verdict. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "smoke/smoke.h"

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

double smoke_default_min_busbw(long min_mbps)
{
	if (min_mbps <= 0)
		return 0;
	return min_mbps / 8000.0 * 0.05;
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
