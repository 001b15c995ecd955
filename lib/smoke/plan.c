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

/* Rails: the expected interface is a list ("eth2,eth1"), and NCCL prints
 * one NET/Socket device per interface it uses ("NET/Socket : Using
 * [0]eth2:10.10.0.1<0> [1]eth1:10.9.0.1<0>", net_socket.cc).  Every
 * device must be one of the list and every one of the list in use; the
 * bootstrap and the channels are checked as for one interface, against
 * the first (rank 0's address is on it).  (The log check taking a list
 * itself replaces this.) */
static int check_rails(const struct smoke_log *log, const char *list, const char *hca, np_error *err)
{
	char first[IFNAMSIZ];
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(list, ","), list);
	if (!log->n_socket)
		return smoke_log_check(log, first, hca, err);
	for (const char *s = list; *s; s += strcspn(s, ",") + (s[strcspn(s, ",")] == ',')) {
		size_t n = strcspn(s, ","), i = 0;
		while (i < log->n_socket && (strlen(log->socket[i].name) != n ||
					     strncmp(log->socket[i].name, s, n) != 0))
			i++;
		if (i == log->n_socket)
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL did not use the rail %.*s: NET/Socket used %zu of the %s",
					    (int)n, s, log->n_socket, list);
	}
	for (size_t i = 0; i < log->n_socket; i++) {
		size_t n = strlen(log->socket[i].name);
		const char *at = strstr(list, log->socket[i].name);
		while (at && !((at == list || at[-1] == ',') && (at[n] == ',' || !at[n])))
			at = strstr(at + 1, log->socket[i].name);
		if (!at)
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL used NET/Socket on %s:%s, not one of the agreed rails %s",
					    log->socket[i].name, log->socket[i].addr, list);
	}
	static struct smoke_log one; /* large: not on the stack; judged one at a time */
	one = *log;
	one.n_socket = 1;
	snprintf(one.socket[0].name, sizeof(one.socket[0].name), "%s", first);
	return smoke_log_check(&one, first, hca, err);
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
	if (log && x->ifname &&
	    (strchr(x->ifname, ',') ? check_rails(log, x->ifname, x->ib_hca, err)
				    : smoke_log_check(log, x->ifname, x->ib_hca, err)) < 0)
		return -1;
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
	return 0;
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
