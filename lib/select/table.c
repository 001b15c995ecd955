/* The human-readable interface table of `discover` and of a refused `select`. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/select.h"

static void speed_text(long mbps, char *buf, size_t len)
{
	if (mbps < 0)
		snprintf(buf, len, "-");
	else if (mbps >= 1000 && mbps % 1000 == 0)
		snprintf(buf, len, "%ldG", mbps / 1000);
	else if (mbps >= 1000)
		snprintf(buf, len, "%.1fG", mbps / 1000.0);
	else
		snprintf(buf, len, "%ldM", mbps);
}

static void join_addrs(const struct nic *n, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n->n_addrs; i++) {
		int w = snprintf(buf + off, len - off, "%s%s/%d", i ? "," : "", n->addrs[i].text,
				 n->addrs[i].prefixlen);
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

static void join_rdma(const struct nic *n, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n->n_rdma; i++) {
		int w = snprintf(buf + off, len - off, "%s%s:%d%s", i ? "," : "", n->rdma[i].hca,
				 n->rdma[i].port, n->rdma[i].active ? "" : "(down)");
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

static void verdict_text(const struct policy_verdict *v, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "%s", v->usable ? "usable" : "refused");
	for (size_t i = 0; i < v->n_reasons && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%s", i ? "; " : ": ", v->reasons[i]);
		if (w < 0)
			break;
		off += (size_t)w;
	}
}

enum { COL_NAME, COL_CLASS, COL_STATE, COL_SPEED, COL_MTU, COL_ADDRS, COL_PCI, COL_NUMA, COL_RDMA,
       COL_VERDICT, NCOLS };

static const char *const headers[NCOLS] = { "NAME", "CLASS", "STATE", "SPEED", "MTU", "ADDRESSES",
					    "PCI", "NUMA", "RDMA", "VERDICT" };

/* One row's cells, each malloc'd. */
static void row_cells(const struct nic *n, const struct policy_verdict *v, char *cells[NCOLS])
{
	char speed[16], addrs[512], rdma[256], verdict[1024], state[32];
	speed_text(n->eff_speed_mbps >= 0 ? n->eff_speed_mbps : n->speed_mbps, speed, sizeof(speed));
	join_addrs(n, addrs, sizeof(addrs));
	join_rdma(n, rdma, sizeof(rdma));
	snprintf(state, sizeof(state), "%s%s", n->up ? (n->operstate[0] ? n->operstate : "up") : "down",
		 n->carrier == 0 ? "/nc" : "");
	if (v)
		verdict_text(v, verdict, sizeof(verdict));
	else
		snprintf(verdict, sizeof(verdict), "-");
	cells[COL_NAME] = strdup(n->name);
	cells[COL_CLASS] = strdup(nic_class_name(n->cls) ? nic_class_name(n->cls) : "?");
	cells[COL_STATE] = strdup(state);
	cells[COL_SPEED] = strdup(speed);
	if (asprintf(&cells[COL_MTU], "%d", n->mtu) < 0)
		cells[COL_MTU] = NULL;
	cells[COL_ADDRS] = strdup(addrs);
	cells[COL_PCI] = strdup(n->pci[0] ? n->pci : "-");
	if (n->numa_node < 0 || asprintf(&cells[COL_NUMA], "%d", n->numa_node) < 0)
		cells[COL_NUMA] = strdup("-");
	cells[COL_RDMA] = strdup(rdma);
	cells[COL_VERDICT] = strdup(verdict);
}

/* Columns as wide as their widest cell, so that any name or address list
 * keeps the table aligned. */
char *select_render_table(const struct nic_list *l, const struct policy_ranking *rk)
{
	char *(*cells)[NCOLS] = calloc(l->n ? l->n : 1, sizeof(*cells));
	if (!cells)
		return NULL;
	size_t width[NCOLS];
	for (int c = 0; c < NCOLS; c++)
		width[c] = strlen(headers[c]);
	bool ok = true;
	for (size_t i = 0; i < l->n; i++) {
		row_cells(&l->v[i], rk && i < rk->n ? &rk->v[i] : NULL, cells[i]);
		for (int c = 0; c < NCOLS; c++) {
			if (!cells[i][c])
				ok = false;
			else if (strlen(cells[i][c]) > width[c])
				width[c] = strlen(cells[i][c]);
		}
	}
	char *out = NULL;
	size_t out_len = 0;
	FILE *f = ok ? open_memstream(&out, &out_len) : NULL;
	for (size_t i = 0; f && i <= l->n; i++) {
		for (int c = 0; c < NCOLS; c++) {
			const char *cell = i == 0 ? headers[c] : cells[i - 1][c];
			if (c == NCOLS - 1)
				fprintf(f, "%s\n", cell);
			else
				fprintf(f, "%-*s ", (int)width[c], cell);
		}
	}
	for (size_t i = 0; i < l->n; i++)
		for (int c = 0; c < NCOLS; c++)
			free(cells[i][c]);
	free(cells);
	if (!f || fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
