/* The decision's words: why each network won or lost, and, when no
 * network is common, why each pod is left out and what it offered. */
#include "agree/decide_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static void speed_text(long mbps, char *buf, size_t len)
{
	if (mbps < 0)
		snprintf(buf, len, "unknown speed");
	else
		snprintf(buf, len, "%ld Mb/s", mbps);
}

/* Append to a fixed buffer; marks truncation with "..." */
__attribute__((format(printf, 3, 4))) static void append(char *buf, size_t len, const char *fmt,
							  ...)
{
	size_t used = strlen(buf);
	if (used + 4 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
	if (w >= 0 && used + (size_t)w >= len)
		strcpy(buf + len - 4, "...");
}

static void missing_pods(const struct ctx *c, const struct netinfo *ni, char *buf, size_t len)
{
	size_t shown = 0, k = ni->first, end = ni->first + ni->count;
	buf[0] = '\0';
	append(buf, len, "no candidate on %zu of %zu pods:", c->n - ni->n_pods, c->n);
	for (size_t p = 0; p < c->n && shown < 3; p++) {
		while (k < end && c->e[k].pod < p)
			k++;
		if (k < end && c->e[k].pod == p)
			continue;
		append(buf, len, "%s %s", shown ? "," : "", c->r[p]->pod);
		shown++;
	}
	if (c->n - ni->n_pods > shown)
		append(buf, len, " and %zu more", c->n - ni->n_pods - shown);
}

void decide_why_lost(const struct ctx *c, const struct netinfo *ni, const struct netinfo *win,
		     char *buf, size_t len)
{
	char s1[32], s2[32], a[NP_PREFIX_TEXT_MAX];
	buf[0] = '\0';
	switch (ni->state) {
	case NET_EXCLUDED:
		append(buf, len, "excluded after a failed probe");
		return;
	case NET_FILTERED:
		if (c->opt->family && c->opt->family != ni->net.pfx.family) {
			append(buf, len, "family %s not allowed",
			       ni->net.pfx.family == AF_INET ? "inet" : "inet6");
			return;
		}
		np_prefix_format(&c->opt->cidr, a, sizeof(a));
		append(buf, len, "outside %s", a);
		return;
	case NET_DUPLICATE:
		inet_ntop(ni->net.pfx.family, ni->dup_addr, a, sizeof(a));
		append(buf, len, "duplicate address %s on pods %s and %s", a, c->r[ni->dup_a]->pod,
			 c->r[ni->dup_b]->pod);
		return;
	case NET_INCOMPLETE:
		missing_pods(c, ni, buf, len);
		return;
	case NET_ELIGIBLE:
		break;
	}
	speed_text(ni->min_mbps, s1, sizeof(s1));
	if (!win || ni == win)
		append(buf, len, "chosen: worst case %s on all %zu pods", s1, c->n);
	else if (ni->rail)
		append(buf, len, "rail %d: worst case %s on all %zu pods, the same quality as %s",
		       ni->rail, s1, c->n, win->net.text);
	else if (ni->no_own_pod >= 0)
		append(buf, len, "same quality as %s, but pod %s has no interface on it that no other "
		       "rail uses", win->net.text, c->r[ni->no_own_pod]->pod);
	else if (decide_same_quality(ni, win) && decide_rails_max(c) > 1)
		append(buf, len, "same quality as %s, beyond the %d rails allowed", win->net.text,
		       decide_rails_max(c));
	else if (ni->min_mbps != win->min_mbps)
		append(buf, len, "slower: worst case %s < %s on %s", s1,
			 (speed_text(win->min_mbps, s2, sizeof(s2)), s2), win->net.text);
	else if (ni->min_score != win->min_score)
		append(buf, len, "same speed, worst-case score %ld < %ld on %s", ni->min_score,
			 win->min_score, win->net.text);
	else if (ni->net.pfx.family != win->net.pfx.family)
		append(buf, len, "same quality as %s, %s preferred", win->net.text,
			 win->net.pfx.family == AF_INET ? "IPv4" : "IPv6");
	else
		append(buf, len, "same quality as %s, which sorts first", win->net.text);
}

/* Why a pod is not covered: the best-covered networks it lacks, duplicates, exclusions. */
static void pod_why(const struct ctx *c, size_t p, char *buf, size_t len)
{
	buf[0] = '\0';
	if (c->pod_first[p] == c->pod_first[p + 1])
		append(buf, len, "no usable candidate; ");
	size_t shown = 0;
	for (size_t i = 0; i < c->nn && shown < 3; i++) {
		const struct netinfo *ni = &c->nets[c->order[i]];
		if (ni->state != NET_INCOMPLETE)
			continue;
		shown++;
		if (!decide_pod_on_net(c, ni, p))
			append(buf, len, "no candidate on %s (%zu of %zu pods have one); ",
			       ni->net.text, ni->n_pods, c->n);
	}
	for (size_t o = c->pod_first[p]; o < c->pod_first[p + 1]; o++) {
		const struct entry *e = &c->e[c->pos[o]];
		const struct netinfo *ni = &c->nets[e->net];
		char a[AGREE_ADDR_TEXT_MAX];
		if (e->dup_pod >= 0) {
			inet_ntop(e->family, e->addr, a, sizeof(a));
			append(buf, len, "duplicate address %s also on pod %s; ", a,
			       c->r[e->dup_pod]->pod);
		} else if (ni->state == NET_EXCLUDED) {
			append(buf, len, "%s excluded after a failed probe; ", ni->net.text);
		} else if (ni->state == NET_FILTERED) {
			append(buf, len, "%s filtered out by family/cidr; ", ni->net.text);
		}
	}
	size_t l = strlen(buf);
	if (l >= 2 && !strcmp(buf + l - 2, "; "))
		buf[l - 2] = '\0';
}

static void pod_cands(const struct agree_view *r, char *buf, size_t len)
{
	buf[0] = '\0';
	for (size_t i = 0; i < r->n && i < AGREE_CAND_MAX; i++) {
		const struct agree_cand *k = &r->c[i];
		char a[AGREE_ADDR_TEXT_MAX], s[32];
		if (!inet_ntop(k->family, k->addr, a, sizeof(a)))
			continue;
		speed_text(k->mbps, s, sizeof(s));
		append(buf, len, "%s%s %s/%d %s", i ? ", " : "", k->ifname, a, k->prefixlen, s);
	}
	if (!buf[0])
		snprintf(buf, len, "none");
}

int decide_no_common(const struct ctx *c, struct agree_decision *d, np_error *err)
{
	d->table = calloc(AGREE_TABLE_KEEP, sizeof(*d->table));
	if (!d->table)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "deciding");
	char why[AGREE_WHY_MAX];
	snprintf(d->error, sizeof(d->error), "the job's %zu pods share no usable network", c->n);
	for (size_t p = 0; p < c->n; p++) {
		pod_why(c, p, why, sizeof(why));
		if (!why[0])
			continue;
		if (d->n_table < AGREE_TABLE_KEEP) {
			struct agree_pod_row *row = &d->table[d->n_table++];
			snprintf(row->pod, sizeof(row->pod), "%s", c->r[p]->pod);
			snprintf(row->why, sizeof(row->why), "%s", why);
			pod_cands(c->r[p], row->cands, sizeof(row->cands));
		}
		if (d->table_total++ < 4)
			append(d->error, sizeof(d->error), "%s %s: %s", d->table_total > 1 ? ";" : ":",
			       c->r[p]->pod, why);
	}
	if (d->table_total > 4)
		append(d->error, sizeof(d->error), "; and %zu more pods", d->table_total - 4);
	return np_error_set(err, NP_ENOCOMMON, 0, "%s", d->error);
}
