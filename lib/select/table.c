/* The human-readable interface table of `discover` and of a refused `select`. */
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

char *select_render_table(const struct nic_list *l, const struct policy_ranking *rk)
{
	char *out = NULL;
	size_t out_len = 0;
	FILE *f = open_memstream(&out, &out_len);
	if (!f)
		return NULL;
	fprintf(f, "%-16s %-9s %-8s %-6s %-5s %-34s %-12s %-4s %-14s %s\n", "NAME", "CLASS",
		"STATE", "SPEED", "MTU", "ADDRESSES", "PCI", "NUMA", "RDMA", "VERDICT");
	for (size_t i = 0; i < l->n; i++) {
		const struct nic *n = &l->v[i];
		char speed[16], addrs[512], rdma[256], verdict[1024], state[32], numa[12];
		speed_text(n->eff_speed_mbps >= 0 ? n->eff_speed_mbps : n->speed_mbps, speed,
			   sizeof(speed));
		join_addrs(n, addrs, sizeof(addrs));
		join_rdma(n, rdma, sizeof(rdma));
		snprintf(state, sizeof(state), "%s%s", n->up ? (n->operstate[0] ? n->operstate : "up") : "down",
			 n->carrier == 0 ? "/nc" : "");
		snprintf(numa, sizeof(numa), "%d", n->numa_node);
		if (rk && i < rk->n)
			verdict_text(&rk->v[i], verdict, sizeof(verdict));
		else
			snprintf(verdict, sizeof(verdict), "-");
		fprintf(f, "%-16s %-9s %-8s %-6s %-5d %-34s %-12s %-4s %-14s %s\n", n->name,
			nic_class_name(n->cls), state, speed, n->mtu, addrs, n->pci[0] ? n->pci : "-",
			n->numa_node >= 0 ? numa : "-", rdma, verdict);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
