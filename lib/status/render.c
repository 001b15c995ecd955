/* The job line and the pods' table, and the JSON document: returned as
 * text, never printed here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoke/smoke.h"
#include "status/status.h"
#include "util/rate.h"

#define STATUS_JSON_VERSION "nicpick.io/v1"

static void nccl_text(int v, char *buf, size_t len)
{
	if (v > 0)
		smoke_nccl_version_text(v, buf, len);
	else
		snprintf(buf, len, "%s", "");
}

static void job_line(FILE *f, const struct status_job *j)
{
	fprintf(f, "%s %s", status_kind_name(j->kind == STATUS_KIND_ANY ? STATUS_KIND_JOB : j->kind),
		j->name);
	if (j->kind_text[0] || j->n_pods) {
		fprintf(f, " (");
		if (j->kind_text[0])
			fprintf(f, "%s, ", j->kind_text);
		if (j->expect > 0)
			fprintf(f, "%zu/%d pods", j->n_pods, j->expect);
		else
			fprintf(f, "%zu pods", j->n_pods);
		if (j->gatherer[0])
			fprintf(f, ", gatherer %s", j->gatherer);
		fprintf(f, ")");
	}
	fprintf(f, ": %s", status_job_state_name(j->state));
	if (j->network[0])
		fprintf(f, "; network %s, round %d", j->network, j->round);
	if (j->smoke[0]) {
		fprintf(f, "; smoke %s", j->smoke);
		if (j->has_busbw) {
			char rate[NP_RATE_TEXT_MAX];
			np_rate_text(rate, sizeof(rate), j->busbw, " ");
			fprintf(f, ", busbw %s", rate);
		}
	}
	if (j->suspect[0])
		fprintf(f, "; suspect: %s", j->suspect);
	if (j->versions[0])
		fprintf(f, "; warning: versions differ: %s", j->versions);
	if (j->smoke_skip[0])
		fprintf(f, "; no smoke test on: %s", j->smoke_skip);
	if (j->state == STATUS_FAILED)
		fprintf(f, "; exit %d: %s", j->exit_code, j->reason);
	if (j->state == STATUS_WAITING)
		fprintf(f, "; waiting for: %s", j->waiting);
	fputc('\n', f);
}

#define NCOLS 16
#define WIDE_FROM 10 /* columns from here on only with -o wide */

static const char *const headers[NCOLS] = { "POD",	 "NODE",    "STATE",  "INTERFACE", "ADDRESS",
					    "PROBE",	 "BUSBW",   "SUSPECT", "NCCL",	"WARNINGS",
					    "NETWORK", "ROUND",   "RANK",   "NEXT",	"DECISION",
					    "DETAIL" };

static const char *suspect_name(int s)
{
	return s == STATUS_SUSPECT_NODE ? "slow-node" : s == STATUS_SUSPECT_LINK_END ? "link-end" : "";
}

static void cells(const struct status_pod *p, char c[NCOLS][STATUS_TEXT_MAX])
{
	for (int i = 0; i < NCOLS; i++)
		snprintf(c[i], STATUS_TEXT_MAX, "-");
	snprintf(c[0], STATUS_TEXT_MAX, "%s%s", p->name, p->gatherer ? "*" : "");
	if (p->node[0])
		snprintf(c[1], STATUS_TEXT_MAX, "%s", p->node);
	snprintf(c[2], STATUS_TEXT_MAX, "%s", status_pod_state_name(p->state));
	if (p->ifname[0])
		snprintf(c[3], STATUS_TEXT_MAX, "%s", p->ifname);
	if (p->addr[0])
		snprintf(c[4], STATUS_TEXT_MAX, "%s", p->addr);
	if (p->has_probe) {
		if (p->probe_mbps > 0)
			snprintf(c[5], STATUS_TEXT_MAX, "%s %.0fMb/s", p->probe_ok ? "ok" : "failed",
				 p->probe_mbps);
		else
			snprintf(c[5], STATUS_TEXT_MAX, "%s", p->probe_ok ? "ok" : "failed");
	}
	if (p->has_outcome && p->outcome.has_busbw)
		np_rate_text(c[6], STATUS_TEXT_MAX, p->outcome.busbw, "");
	else if (p->has_outcome && p->outcome.smoke != EXCHANGE_SMOKE_PASSED)
		snprintf(c[6], STATUS_TEXT_MAX, "%s", exchange_smoke_name(p->outcome.smoke));
	if (p->suspect != STATUS_SUSPECT_NONE)
		snprintf(c[7], STATUS_TEXT_MAX, "%s", suspect_name(p->suspect));
	if (p->nccl > 0)
		nccl_text(p->nccl, c[8], STATUS_TEXT_MAX);
	if (p->n_warn) {
		size_t off = 0;
		for (size_t i = 0; i < p->n_warn && off < STATUS_TEXT_MAX; i++)
			off += (size_t)snprintf(c[9] + off, STATUS_TEXT_MAX - off, "%s%s", i ? "; " : "",
						p->warn[i]);
	}
	if (p->network[0])
		snprintf(c[10], STATUS_TEXT_MAX, "%s", p->network);
	if (p->round)
		snprintf(c[11], STATUS_TEXT_MAX, "%d", p->round);
	if (p->rank >= 0)
		snprintf(c[12], STATUS_TEXT_MAX, "%d", p->rank);
	if (p->next_pod[0])
		snprintf(c[13], STATUS_TEXT_MAX, "%s", p->next_pod);
	/* the output set in the pod's volume: DIR/decision-ID */
	if (p->has_outcome && p->outcome.decision_id[0])
		snprintf(c[14], STATUS_TEXT_MAX, "%s", p->outcome.decision_id);
	if (p->detail[0])
		snprintf(c[15], STATUS_TEXT_MAX, "%s", p->detail);
}

static void cell(FILE *f, const char *s, size_t w, bool last)
{
	if (last)
		fprintf(f, "%s\n", s);
	else
		fprintf(f, "%-*s   ", (int)w, s);
}

char *status_text(const struct status_job *j, bool wide)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	job_line(f, j);
	int ncols = wide ? NCOLS : WIDE_FROM;
	char (*rows)[NCOLS][STATUS_TEXT_MAX] = calloc(j->n_pods + 1, sizeof(*rows));
	if (!rows) {
		fclose(f);
		free(buf);
		return NULL;
	}
	size_t w[NCOLS];
	for (int c = 0; c < NCOLS; c++)
		w[c] = strlen(headers[c]);
	for (size_t i = 0; i < j->n_pods; i++) {
		cells(&j->pods[i], rows[i]);
		for (int c = 0; c < NCOLS; c++)
			if (strlen(rows[i][c]) > w[c])
				w[c] = strlen(rows[i][c]);
	}
	if (j->n_pods) {
		/* kubectl's layout: three spaces between columns, the last unpadded */
		for (int c = 0; c < ncols; c++)
			cell(f, headers[c], w[c], c + 1 == ncols);
		for (size_t i = 0; i < j->n_pods; i++)
			for (int c = 0; c < ncols; c++)
				cell(f, rows[i][c], w[c], c + 1 == ncols);
	}
	free(rows);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static json_t *pod_json(const struct status_pod *p)
{
	char nv[32];
	nccl_text(p->nccl, nv, sizeof(nv));
	json_t *warn = json_array();
	for (size_t i = 0; warn && i < p->n_warn; i++)
		json_array_append_new(warn, json_string(p->warn[i]));
	json_t *probe = p->has_probe ? json_pack("{s:b, s:f, s:s}", "ok", p->probe_ok, "mbps",
						 p->probe_mbps, "detail", p->probe_detail)
				     : json_null();
	json_t *smoke = p->has_outcome ? json_string(exchange_smoke_name(p->outcome.smoke)) : json_null();
	json_t *busbw = p->has_outcome && p->outcome.has_busbw ? json_real(p->outcome.busbw) : json_null();
	json_t *id = str_or_null(p->has_outcome ? p->outcome.decision_id : NULL);
	return json_pack("{s:s, s:o, s:o, s:s, s:b, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
			 " s:o, s:o, s:o, s:o, s:o}",
			 "name", p->name, "node", str_or_null(p->node), "phase", str_or_null(p->phase),
			 "state", status_pod_state_name(p->state), "gatherer", p->gatherer, "round",
			 p->round, "network", str_or_null(p->network), "interface",
			 str_or_null(p->ifname), "address", str_or_null(p->addr), "rank",
			 p->rank >= 0 ? json_integer(p->rank) : json_null(), "next",
			 str_or_null(p->next_pod), "probe", probe ? probe : json_null(), "smoke", smoke,
			 "suspect", p->suspect ? json_string(suspect_name(p->suspect)) : json_null(), "busbw", busbw, "nccl", str_or_null(nv), "warnings",
			 warn ? warn : json_array(), "detail", str_or_null(p->detail), "decisionId", id);
}

char *status_json(const struct status_job *j)
{
	json_t *pods = json_array();
	for (size_t i = 0; pods && i < j->n_pods; i++)
		json_array_append_new(pods, pod_json(&j->pods[i]));
	json_t *job = json_pack(
		"{s:s, s:s, s:s, s:o, s:s, s:i, s:i, s:i, s:o, s:i, s:o, s:o, s:o, s:o, s:o, s:o,"
		" s:o, s:o}",
		"name", j->name, "namespace", j->namespace, "kind",
		status_kind_name(j->kind == STATUS_KIND_ANY ? STATUS_KIND_JOB : j->kind), "rule",
		str_or_null(j->kind_text), "state", status_job_state_name(j->state), "exitCode",
		j->exit_code, "pods", (int)j->n_pods, "expect", j->expect, "gatherer",
		str_or_null(j->gatherer), "round", j->round, "network", str_or_null(j->network),
		"smoke", str_or_null(j->smoke), "busbw", j->has_busbw ? json_real(j->busbw) : json_null(),
		"suspect", str_or_null(j->suspect), "versions", str_or_null(j->versions), "smokeSkip",
		str_or_null(j->smoke_skip), "waiting", str_or_null(j->waiting), "reason",
		str_or_null(j->reason));
	/* The pods the smoke test's verdict names, and why. */
	json_t *named = json_array();
	for (size_t i = 0; named && i < j->n_pods; i++) {
		const struct status_pod *p = &j->pods[i];
		if (p->suspect != STATUS_SUSPECT_NONE)
			json_array_append_new(named, json_pack("{s:s, s:o, s:s}", "pod", p->name, "node",
							       str_or_null(p->node), "why",
							       suspect_name(p->suspect)));
	}
	if (job)
		json_object_set_new(job, "suspects", named ? named : json_array());
	json_t *doc = json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", STATUS_JSON_VERSION, "kind",
				"JobNetworkStatus", "job", job ? job : json_null(), "pods",
				pods ? pods : json_array());
	char *s = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(doc);
	return s;
}
