/* The smoke step as a pod says it: the status names and the one-line
 * summary.  decision.json's "smoke" object is written and read in
 * lib/select/decision.c. */
#include <stdio.h>
#include <string.h>

#include "smoke/smoke.h"

const char *smoke_status_name(enum smoke_status s)
{
	return s == SMOKE_PASSED ? "passed" : s == SMOKE_FAILED ? "failed" : "skipped";
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
	if (s->not_proven[0] && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, "; %s", s->not_proven);
	if (r->n_links && n > 0 && (size_t)n < len) {
		char fig[512];
		smoke_links_figures(r, fig, sizeof(fig));
		n += snprintf(buf + n, len - (size_t)n, "; ring links GB/s: %s", fig);
	}
	if (s->links_text[0] && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "; warning: %s", s->links_text);
}
