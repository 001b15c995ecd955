/* The job's smoke-test versions compared: which pods differ from the
 * majority, and where the smoke test cannot run at all. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree/agree.h"
#include "smoke/smoke.h"

#define NAMED_MAX 8 /* pods named per item; the rest is a count */

enum item { IT_NCCL, IT_DRIVER, IT_RUNTIME, IT_MODEL, IT_COUNT };

static const char *const item_names[IT_COUNT] = {
	[IT_NCCL] = "NCCL",
	[IT_DRIVER] = "CUDA driver",
	[IT_RUNTIME] = "CUDA runtime",
	[IT_MODEL] = "GPU",
};

/* The item's value on one pod as text; "" unknown (left out). */
static void value(const struct agree_gpu *g, enum item it, char *buf, size_t len)
{
	buf[0] = '\0';
	if (it == IT_NCCL && g->nccl > 0)
		smoke_nccl_version_text(g->nccl, buf, len);
	else if (it == IT_DRIVER && g->driver > 0)
		smoke_cuda_version_text(g->driver, buf, len);
	else if (it == IT_RUNTIME && g->runtime > 0)
		smoke_cuda_version_text(g->runtime, buf, len);
	else if (it == IT_MODEL)
		snprintf(buf, len, "%s", g->model);
}

/* Append to buf (always terminated, never past len). */
static void add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t len, const char *fmt, ...)
{
	size_t off = strlen(buf);
	if (off + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + off, len - off, fmt, ap);
	va_end(ap);
}

struct entry {
	char val[AGREE_GPU_MODEL_MAX];
	const struct agree_view *r;
};

static int by_value_then_pod(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->val, y->val);
	return c ? c : strcmp(x->r->pod, y->r->pod);
}

static void add_pod(char *buf, size_t len, size_t *named, size_t *more, const char *val,
		    const struct agree_view *r)
{
	if (*named == NAMED_MAX) {
		(*more)++;
		return;
	}
	add(buf, len, "%s%s%s%s%s%s%s", *named ? ", " : "", val, val[0] ? " on " : "", r->pod,
	    r->node[0] ? " (" : "", r->node, r->node[0] ? ")" : "");
	(*named)++;
}

/* One item: "NCCL 2.21.5 on job-w-3 (node-d), 2.28.3 on the other 3 pods".
 * The majority is the most common value (ties: the one sorting first); the
 * others are named by value, then pod name, so the same reports in any
 * order give the same text. */
static void compare_item(const struct agree_view *r, size_t n, enum item it, char *out, size_t len)
{
	struct entry *e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!r[i].gpu || !r[i].gpu->has)
			continue;
		value(r[i].gpu, it, e[k].val, sizeof(e[k].val));
		e[k].r = &r[i];
		k += e[k].val[0] != '\0';
	}
	qsort(e, k, sizeof(*e), by_value_then_pod);
	size_t best = 0, best_count = 0;
	for (size_t i = 0; i < k;) {
		size_t j = i;
		while (j < k && strcmp(e[j].val, e[i].val) == 0)
			j++;
		if (j - i > best_count) {
			best = i;
			best_count = j - i;
		}
		i = j;
	}
	if (best_count == k) {
		free(e);
		return;
	}
	char text[AGREE_VERSIONS_TEXT_MAX] = "";
	size_t named = 0, more = 0;
	for (size_t i = 0; i < k; i++)
		if (i < best || i >= best + best_count)
			add_pod(text, sizeof(text), &named, &more, e[i].val, e[i].r);
	if (more)
		add(text, sizeof(text), " (+%zu more pods)", more);
	add(out, len, "%s%s %s, %s on the other %zu pod%s", out[0] ? "; " : "", item_names[it], text,
	    e[best].val, best_count, best_count == 1 ? "" : "s");
	free(e);
}

void agree_versions_compare(const struct agree_report *r, size_t n, struct agree_versions *out)
{
	struct agree_view *v = calloc(n ? n : 1, sizeof(*v));
	memset(out, 0, sizeof(*out));
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		v[i] = agree_report_view(&r[i]);
	agree_versions_compare_views(v, n, out);
	free(v);
}

void agree_versions_compare_views(const struct agree_view *r, size_t n, struct agree_versions *out)
{
	memset(out, 0, sizeof(*out));
	for (int it = 0; it < IT_COUNT; it++)
		compare_item(r, n, (enum item)it, out->warning, sizeof(out->warning));
	struct entry *e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (r[i].gpu && r[i].gpu->has && r[i].gpu->smoke[0])
			e[k++].r = &r[i];
	qsort(e, k, sizeof(*e), by_value_then_pod);
	size_t named = 0, more = 0;
	for (size_t i = 0; i < k; i++) {
		if (named == NAMED_MAX) {
			more++;
			continue;
		}
		add(out->unavailable, sizeof(out->unavailable), "%s%s: %s", named ? ", " : "", e[i].r->pod,
		    e[i].r->gpu->smoke);
		named++;
	}
	if (more)
		add(out->unavailable, sizeof(out->unavailable), " (+%zu more pods)", more);
	/* File delivery on an NCCL that ignores NCCL_CONF_FILE: training falls
	 * back to NCCL's own choice of interface on that pod. */
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (r[i].gpu && r[i].gpu->has && strcmp(r[i].gpu->delivery, "file") == 0 &&
		    r[i].gpu->nccl > 0 && r[i].gpu->nccl < AGREE_NCCL_CONF_FILE_FLOOR)
			e[k++].r = &r[i];
	qsort(e, k, sizeof(*e), by_value_then_pod);
	for (size_t i = 0; i < k && i < NAMED_MAX; i++) {
		char v[32];
		smoke_nccl_version_text(e[i].r->gpu->nccl, v, sizeof(v));
		add(out->floor, sizeof(out->floor),
		    "%sNCCL %s on %s ignores NCCL_CONF_FILE (read from 2.23.4): source %s in the command, or use NCCL >= 2.23.4",
		    i ? "; " : "", v, e[i].r->pod, e[i].r->gpu->nccl_env[0] ? e[i].r->gpu->nccl_env : "nccl.env");
	}
	if (k > NAMED_MAX)
		add(out->floor, sizeof(out->floor), " (+%zu more pods)", k - NAMED_MAX);
	free(e);
}
