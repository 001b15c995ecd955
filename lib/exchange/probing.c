/* This pod's probe round, the same on every pod: listen on each address
 * it has in the round, then probe the ring neighbour on each in turn and
 * check the route.  The listener counts only the round's token from the
 * expected neighbour, and no connection it holds outlives the exchange's
 * deadline.  The round never blocks (ex_probing_step): every pod, the
 * gatherer too, runs it beside its watch, so that what happens meanwhile
 * reaches it while it probes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange_priv.h"
#include "probe/probe.h"
#include "util/clock.h"
#include "util/testhook.h"
#include "util/text.h"

struct ex_probing {
	char token[PROBE_TOKEN_MAX];
	long bytes;
	size_t n;
	struct exchange_part parts[EX_SERVERS_MAX];
	bool listening[EX_SERVERS_MAX];
	struct exchange_probe out;
	size_t i;	     /* the part under way */
	struct probe_op *op; /* its probe; NULL: not started */
};

void ex_probe_servers_stop(struct ex *x)
{
	for (size_t i = 0; i < x->n_servers; i++)
		if (x->servers[i])
			probe_server_stop(x->servers[i]);
	memset(x->servers, 0, sizeof(x->servers));
	x->n_servers = 0;
}

void ex_probe_listen(struct ex *x, const char *token, const struct exchange_part *parts, size_t n,
		     long bytes)
{
	if (n > EX_SERVERS_MAX)
		n = EX_SERVERS_MAX;
	char key[EX_SERVERS_MAX][sizeof(x->server_key[0])];
	bool same = x->n_servers == n;
	for (size_t i = 0; i < n; i++) {
		snprintf(key[i], sizeof(key[i]), "%s|%s|%s|%ld", parts[i].addr, token,
			 parts[i].prev_addr, bytes);
		same = same && x->servers[i] && strcmp(x->server_key[i], key[i]) == 0;
	}
	if (same)
		return;
	ex_probe_servers_stop(x);
	for (size_t i = 0; i < n; i++) {
		np_error lerr = { 0 };
		struct probe_server_opts so = {
			.addr = parts[i].addr,
			.port = x->o->probe_port,
			.token = token,
			.peer_addr = parts[i].prev_addr,
			.max_payload = bytes,
			.deadline_ms = x->o->deadline_ms,
		};
		snprintf(x->server_key[i], sizeof(x->server_key[i]), "%s", key[i]);
		x->server_why[i][0] = '\0';
		if (probe_server_start(&so, &x->servers[i], &lerr) < 0) {
			x->servers[i] = NULL;
			np_text_clean(x->server_why[i], sizeof(x->server_why[i]), lerr.msg, NP_TEXT_SPACE);
		}
	}
	x->n_servers = n;
}

/* The route to the neighbour leaves through dev: when dev is another of
 * this pod's own candidates on the part's network, name it, so that the
 * gatherer tries it before it gives up the network. */
static void route_alternative(const struct ex *x, const struct exchange_part *p, const char *dev,
			      struct exchange_trial *t)
{
	struct agree_network net;
	np_error e = { 0 };
	if (strcmp(p->net, "routed") == 0 || agree_network_parse(p->net, &net, &e) < 0)
		return;
	for (size_t i = 0; i < x->mine.n; i++) {
		const struct agree_cand *c = &x->mine.c[i];
		if (strcmp(c->ifname, dev) == 0 && c->prefixlen == net.pfx.len &&
		    np_prefix_contains(&net.pfx, c->family, c->addr)) {
			snprintf(t->route_if, sizeof(t->route_if), "%s", dev);
			return;
		}
	}
}

int ex_probing_start(struct ex *x, const char *leader_uid, int epoch, const char *token,
		     const struct exchange_part *parts, size_t n, long bytes, struct ex_probing **out,
		     np_error *err)
{
	struct ex_probing *p = calloc(1, sizeof(*p));
	if (!(*out = p))
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	/* This pod holds its part of a decision and is about to probe. */
	np_test_point("after-decision");
	snprintf(p->token, sizeof(p->token), "%s", token);
	p->bytes = bytes;
	p->n = n < EX_SERVERS_MAX ? n : EX_SERVERS_MAX;
	memcpy(p->parts, parts, p->n * sizeof(parts[0]));
	snprintf(p->out.leader, sizeof(p->out.leader), "%s", leader_uid);
	p->out.epoch = epoch;
	ex_probe_listen(x, token, parts, n, bytes);
	for (size_t i = 0; i < p->n; i++) {
		p->listening[i] = x->servers[i] != NULL;
		if (!p->listening[i])
			snprintf(p->out.t[i].detail, sizeof(p->out.t[i].detail), "%s", x->server_why[i]);
	}
	return 0;
}

bool ex_probing_is(const struct ex_probing *p, const char *leader_uid, int epoch, const char *token)
{
	return strcmp(p->out.leader, leader_uid) == 0 && p->out.epoch == epoch && strcmp(p->token, token) == 0;
}

/* The part's probe is over: say how it went. */
static void part_done(struct ex *x, struct ex_probing *p, const char *why)
{
	const struct exchange_part *pt = &p->parts[p->i];
	struct exchange_trial *t = &p->out.t[p->i];
	np_text_clean(t->detail, sizeof(t->detail), why, NP_TEXT_SPACE);
	ex_log(x, t->ok ? EXCHANGE_INFO : EXCHANGE_WARN, "probe %s -> %s on %s: %s%s%s", pt->addr,
	       pt->next_addr[0] ? pt->next_addr : "(alone)", pt->ifname, t->ok ? "ok" : "FAILED",
	       why[0] ? ": " : "", why);
	p->i++;
}

/* Start the probe of the part under way, after the route check: 1 when
 * there is nothing to probe (alone on it, or a wrong route). */
static int part_start(struct ex *x, struct ex_probing *p, np_error *err)
{
	const struct exchange_part *pt = &p->parts[p->i];
	struct exchange_trial *t = &p->out.t[p->i];
	char why[512] = "";
	t->ok = true;
	if (!pt->next_addr[0]) {
		part_done(x, p, why);
		return 1;
	}
	char dev[IFNAMSIZ] = "";
	np_error rerr = { 0 };
	if (probe_route_dev(pt->next_addr, dev, sizeof(dev), &rerr) < 0) {
		t->ok = false;
		snprintf(why, sizeof(why), "%s", rerr.msg);
	} else if (strcmp(dev, pt->ifname) != 0) {
		t->ok = false;
		snprintf(why, sizeof(why), "the route to %s leaves through %s, not %s", pt->next_addr, dev,
			 pt->ifname);
		route_alternative(x, pt, dev, t);
	}
	if (!t->ok) {
		part_done(x, p, why);
		return 1;
	}
	/* Leave the gatherer time to react within the deadline. */
	int64_t pd = np_now_ms() + EX_PROBE_WINDOW_MS;
	if (pd > x->o->deadline_ms)
		pd = x->o->deadline_ms;
	return probe_op_start(pt->addr, pt->next_addr, x->o->probe_port, p->token, pd, p->bytes, &p->op, err);
}

int ex_probing_step(struct ex *x, struct ex_probing *p, struct np_wait *w, np_error *err)
{
	np_wait_none(w);
	while (p->i < p->n) {
		p->out.n = p->i + 1;
		if (!p->listening[p->i]) {
			p->i++; /* could not even listen */
			continue;
		}
		if (!p->op) {
			int r = part_start(x, p, err);
			if (r < 0)
				return -1;
			if (r > 0)
				continue;
		}
		struct probe_result pr;
		if (!probe_op_step(p->op, w, &pr))
			return 0;
		probe_op_free(p->op);
		p->op = NULL;
		struct exchange_trial *t = &p->out.t[p->i];
		t->ok = pr.connected && pr.source_ok;
		t->mbps = pr.mbps;
		part_done(x, p, pr.detail);
	}
	return 1;
}

void ex_probing_idle(void *ud, struct np_wait *w)
{
	struct ex *x = ud;
	np_wait_none(w);
	if (!x->probing || x->failed)
		return;
	np_error e = { 0 };
	if (ex_probing_step(x, x->probing, w, &e) < 0)
		ex_fail(x, &e);
}

int ex_probing_result(const struct ex_probing *p, struct exchange_probe *out, char **json, np_error *err)
{
	if (out)
		*out = p->out;
	return exchange_probe_to_json(&p->out, json, err);
}

void ex_probing_free(struct ex_probing *p)
{
	if (!p)
		return;
	probe_op_free(p->op);
	free(p);
}

void ex_probing_stop(struct ex *x)
{
	ex_probing_free(x->probing);
	x->probing = NULL;
}
