/* Private to lib/agree's decision (decide.c, rails.c, routed.c, explain.c):
 * the entries and networks one agree_decide_views() call builds, and the
 * steps that share them. */
#ifndef NICPICK_AGREE_DECIDE_PRIV_H
#define NICPICK_AGREE_DECIDE_PRIV_H

#include "agree/agree.h"

#include <stdbool.h>
#include <stddef.h>

enum net_state {
	NET_ELIGIBLE,
	NET_INCOMPLETE, /* some pod has no candidate on it */
	NET_DUPLICATE,	/* two pods report the same address on it */
	NET_FILTERED,	/* family or --cidr */
	NET_EXCLUDED,	/* failed probe */
};

struct entry {
	size_t pod;  /* index in name order */
	size_t cand; /* index into that pod's report */
	size_t orig; /* position in (pod, cand) order */
	size_t net;  /* network id */
	int family;
	int plen;
	unsigned char netb[16];
	unsigned char addr[16];
	long mbps, score;
	int route; /* 0: the kernel routes the subnet through it, 1: unknown, 2: not */
	long dup_pod; /* another pod with this address on this network, -1 none */
};

struct netinfo {
	struct agree_network net;
	size_t first, count; /* range in the (network, pod, quality) order */
	size_t n_pods;
	long min_mbps, min_score;
	enum net_state state;
	int rail;	     /* 1-based: the decision's rail on it; 0 none */
	long no_own_pod;     /* same quality, but this pod has no interface of
			      * its own on it (it is on another rail); -1 none */
	size_t dup_a, dup_b; /* pods sharing dup_addr */
	unsigned char dup_addr[16];
};

struct ctx {
	const struct agree_view **r; /* by pod name */
	size_t n;
	const struct agree_options *opt;
	struct entry *e;
	size_t ne;
	size_t *pos; /* orig -> index in e */
	size_t *pod_first; /* first orig of each pod; pod_first[n] = ne */
	struct netinfo *nets;
	size_t nn;
	size_t *order; /* nets, best first */
};

/* decide.c: the networks and who is on them */
int decide_pref_family(const struct ctx *c);
/* The pod's best entry on a network, or NULL. */
const struct entry *decide_pod_on_net(const struct ctx *c, const struct netinfo *ni, size_t pod);
void decide_assign_from(const struct ctx *c, const struct entry *e, struct agree_assign *a);
int decide_rail_init(const struct ctx *c, struct agree_rail *rail, np_error *err);

/* rails.c: the rails after the first */
bool decide_same_quality(const struct netinfo *a, const struct netinfo *b);
int decide_rails_max(const struct ctx *c);
int decide_add_rails(struct ctx *c, struct netinfo *win, struct agree_decision *d, np_error *err);

/* routed.c: no common network; each pod reaches the others through a gateway */
int decide_routed(const struct ctx *c, struct agree_decision *d, np_error *err);

/* explain.c: why each network won or lost, and why no network is common */
void decide_why_lost(const struct ctx *c, const struct netinfo *ni, const struct netinfo *win, char *buf,
		     size_t len);
int decide_no_common(const struct ctx *c, struct agree_decision *d, np_error *err);

#endif
