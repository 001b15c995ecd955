/* nicpick's pure parts of the smoke test: what it expects, and the
 * verdict. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "smoke/smoke.h"
#include "util/rate.h"

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

static double link_gbps(const struct smoke_link *l)
{
	return l->fwd_gbps < l->rev_gbps ? l->fwd_gbps : l->rev_gbps;
}

size_t smoke_links_judge(const struct smoke_result *r, struct smoke_links_verdict *v)
{
	memset(v, 0, sizeof(*v));
	size_t n = r->n_links;
	if (n < 3)
		return 0;
	for (size_t k = 0; k < n; k++)
		if (link_gbps(&r->links[k]) > v->ref_gbps)
			v->ref_gbps = link_gbps(&r->links[k]);
	for (size_t k = 0; k < n; k++)
		if (link_gbps(&r->links[k]) < v->ref_gbps * SMOKE_SLOW_LINK_FRACTION) {
			v->slow[k] = true;
			v->n_slow++;
		}
	/* A node both of whose ring links are slow is the suspect: one slow
	 * node slows every link it touches. */
	for (size_t i = 0; i < n && v->n_named < SMOKE_NAMED_MAX; i++)
		if (v->slow[(i + n - 1) % n] && v->slow[i]) {
			v->named[v->n_named] = (int)i;
			v->both[v->n_named++] = true;
		}
	/* A slow link whose ends are both otherwise fine names both ends, if
	 * it is slow by the wider margin a lone link needs. */
	for (size_t k = 0; k < n; k++) {
		if (!v->slow[k] || link_gbps(&r->links[k]) >= v->ref_gbps * SMOKE_LONE_LINK_FRACTION)
			continue;
		size_t a = k, b = (k + 1) % n;
		bool covered = false;
		for (size_t j = 0; j < v->n_named; j++)
			covered |= v->both[j] && ((size_t)v->named[j] == a || (size_t)v->named[j] == b);
		if (covered)
			continue;
		for (size_t e = 0; e < 2 && v->n_named < SMOKE_NAMED_MAX; e++) {
			int rk = (int)(e ? b : a);
			bool dup = false;
			for (size_t j = 0; j < v->n_named; j++)
				dup |= v->named[j] == rk;
			if (!dup)
				v->named[v->n_named++] = rk;
		}
	}
	return v->n_named;
}

size_t smoke_links_recheck(const struct smoke_result *r, bool recheck[SMOKE_RING_MAX])
{
	memset(recheck, 0, SMOKE_RING_MAX * sizeof(recheck[0]));
	struct smoke_links_verdict v;
	smoke_links_judge(r, &v);
	if (v.n_slow == 0)
		return 0;
	size_t n = 0;
	bool ref_marked = false;
	for (size_t k = 0; k < r->n_links && k < SMOKE_RING_MAX; k++) {
		bool ref = !ref_marked && link_gbps(&r->links[k]) == v.ref_gbps;
		ref_marked |= ref;
		if (v.slow[k] || ref) {
			recheck[k] = true;
			n++;
		}
	}
	return n;
}

static double median3(double a, double b, double c)
{
	if (a > b) {
		double t = a;
		a = b;
		b = t;
	}
	/* a <= b */
	return c <= a ? a : c >= b ? b : c;
}

void smoke_link_settle(struct smoke_link *l, const struct smoke_link again[SMOKE_RECHECK_ROUNDS])
{
	_Static_assert(SMOKE_RECHECK_ROUNDS == 2, "the median of three timings");
	l->fwd_gbps = median3(l->fwd_gbps, again[0].fwd_gbps, again[1].fwd_gbps);
	l->rev_gbps = median3(l->rev_gbps, again[0].rev_gbps, again[1].rev_gbps);
	l->rechecked = true;
}

void smoke_rank_label(const struct smoke_result *r, int rank, char *buf, size_t len)
{
	if ((size_t)rank < r->n_labels && r->labels[rank][0])
		snprintf(buf, len, "%s (rank %d)", r->labels[rank], rank);
	else
		snprintf(buf, len, "rank %d", rank);
}

void smoke_links_text(const struct smoke_result *r, const struct smoke_links_verdict *v, char *buf,
		      size_t len)
{
	buf[0] = '\0';
	size_t n = r->n_links, off = 0;
	for (size_t j = 0; j < v->n_named && off + 1 < len; j++) {
		int rk = v->named[j];
		const struct smoke_link *in = &r->links[((size_t)rk + n - 1) % n], *out = &r->links[rk];
		char who[SMOKE_LABEL_MAX + 32];
		smoke_rank_label(r, rk, who, sizeof(who));
		char from[NP_RATE_TEXT_MAX], to[NP_RATE_TEXT_MAX];
		np_rate_pair_text(from, sizeof(from), in->fwd_gbps, in->rev_gbps, " ");
		np_rate_pair_text(to, sizeof(to), out->rev_gbps, out->fwd_gbps, " ");
		if (v->both[j])
			off += (size_t)snprintf(buf + off, len - off,
						"%sslow node: %s, both its ring links are slow (%s from rank %zu, %s to rank %zu, in/out)",
						j ? "; " : "", who, from, ((size_t)rk + n - 1) % n, to,
						((size_t)rk + 1) % n);
		else
			off += (size_t)snprintf(buf + off, len - off, "%sslow link end: %s", j ? "; " : "", who);
		if (off >= len)
			off = len - 1;
	}
	bool lone = false;
	for (size_t j = 0; j < v->n_named; j++)
		lone |= !v->both[j];
	char ref[NP_RATE_TEXT_MAX];
	np_rate_text(ref, sizeof(ref), v->ref_gbps, " ");
	if (v->n_named && off + 1 < len)
		snprintf(buf + off, len - off,
			 "; the fastest ring link carries %s, slow is below %.0f%% of it%s", ref,
			 SMOKE_SLOW_LINK_FRACTION * 100, lone ? " (a lone link below 33%)" : "");
}

void smoke_links_figures(const struct smoke_result *r, char *buf, size_t len)
{
	buf[0] = '\0';
	size_t off = 0, n = r->n_links;
	for (size_t k = 0; k < n && off + 1 < len; k++) {
		if (k == SMOKE_LINKS_SHOWN) {
			snprintf(buf + off, len - off, ", +%zu more in decision.json", n - k);
			break;
		}
		off += (size_t)snprintf(buf + off, len - off, "%s%zu>%zu %.2f %zu>%zu %.2f", k ? ", " : "", k,
					(k + 1) % n, r->links[k].fwd_gbps, (k + 1) % n, k, r->links[k].rev_gbps);
		if (off >= len)
			off = len - 1;
	}
}
