/* Which device the kernel routes a peer through: one RTM_GETROUTE request,
 * as `ip route get` does, over libnl. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe.h"

struct route_answer {
	int oif;
	int kernel_errno; /* the kernel's answer to the request, 0 none */
};

/* libnl turns the kernel's errno into its own codes, most of them
 * "Unspecific failure" (ENETUNREACH is one): keep the kernel's. */
static int on_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct route_answer *a = arg;
	a->kernel_errno = -e->error;
	return NL_STOP;
}

static int on_route(struct nl_msg *msg, void *arg)
{
	struct route_answer *a = arg;
	struct nlattr *tb[RTA_MAX + 1];
	struct nlmsghdr *h = nlmsg_hdr(msg);
	if (h->nlmsg_type != RTM_NEWROUTE || nlmsg_parse(h, sizeof(struct rtmsg), tb, RTA_MAX, NULL) < 0)
		return NL_SKIP;
	if (tb[RTA_OIF])
		a->oif = (int)nla_get_u32(tb[RTA_OIF]);
	return NL_OK;
}

int probe_route_dev(const char *peer_addr, char *ifname, size_t len, np_error *err)
{
	unsigned char bytes[16];
	struct rtmsg rtm = { 0 };
	size_t alen;
	if (inet_pton(AF_INET, peer_addr, bytes) == 1) {
		rtm.rtm_family = AF_INET;
		alen = 4;
	} else if (inet_pton(AF_INET6, peer_addr, bytes) == 1) {
		rtm.rtm_family = AF_INET6;
		alen = 16;
	} else {
		return np_error_set(err, NP_EINTERNAL, 0, "route lookup: invalid address '%s'", peer_addr);
	}
	rtm.rtm_dst_len = (unsigned char)(alen * 8);

	struct route_answer ans = { 0 };
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST);
	int r = -NLE_NOMEM;
	if (sk && msg && (r = nl_connect(sk, NETLINK_ROUTE)) == 0 &&
	    (r = nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO)) == 0 &&
	    (r = nla_put(msg, RTA_DST, (int)alen, bytes)) == 0 &&
	    (r = nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, on_route, &ans)) == 0 &&
	    (r = nl_socket_modify_err_cb(sk, NL_CB_CUSTOM, on_error, &ans)) == 0 &&
	    (r = nl_send_auto(sk, msg)) >= 0)
		r = nl_recvmsgs_default(sk);
	nlmsg_free(msg);
	nl_socket_free(sk);
	if (ans.kernel_errno == ENETUNREACH || ans.kernel_errno == EHOSTUNREACH)
		return np_error_set(err, NP_EINTERNAL, ans.kernel_errno,
				    "no route to %s (is the interface to it down, or without its "
				    "address?)",
				    peer_addr);
	if (ans.kernel_errno)
		return np_error_set(err, NP_EINTERNAL, ans.kernel_errno, "route lookup for %s",
				    peer_addr);
	if (r < 0)
		return np_error_set(err, NP_EINTERNAL, 0, "route lookup for %s: %s", peer_addr,
				    nl_geterror(r));
	char name[IF_NAMESIZE];
	if (ans.oif <= 0 || !if_indextoname((unsigned)ans.oif, name))
		return np_error_set(err, NP_EINTERNAL, 0, "route lookup for %s: no output device",
				    peer_addr);
	snprintf(ifname, len, "%s", name);
	return 0;
}

struct gw_dump {
	struct probe_gateway *v;
	size_t n, cap;
	bool nomem;
};

static int on_gateway_route(struct nl_msg *msg, void *arg)
{
	struct gw_dump *d = arg;
	struct nlattr *tb[RTA_MAX + 1];
	struct nlmsghdr *h = nlmsg_hdr(msg);
	struct rtmsg *rtm = nlmsg_data(h);
	if (h->nlmsg_type != RTM_NEWROUTE || nlmsg_parse(h, sizeof(*rtm), tb, RTA_MAX, NULL) < 0)
		return NL_SKIP;
	unsigned table = tb[RTA_TABLE] ? nla_get_u32(tb[RTA_TABLE]) : rtm->rtm_table;
	size_t alen = rtm->rtm_family == AF_INET ? 4 : rtm->rtm_family == AF_INET6 ? 16 : 0;
	if (table != RT_TABLE_MAIN || !alen || !tb[RTA_GATEWAY] || !tb[RTA_OIF] ||
	    (size_t)nla_len(tb[RTA_GATEWAY]) != alen)
		return NL_SKIP;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		struct probe_gateway *v = realloc(d->v, cap * sizeof(*v));
		if (!v) {
			d->nomem = true;
			return NL_STOP;
		}
		d->v = v;
		d->cap = cap;
	}
	struct probe_gateway *g = &d->v[d->n++];
	memset(g, 0, sizeof(*g));
	g->ifindex = (int)nla_get_u32(tb[RTA_OIF]);
	g->family = rtm->rtm_family;
	g->dst.family = rtm->rtm_family;
	g->dst.len = rtm->rtm_dst_len > alen * 8 ? (int)alen * 8 : rtm->rtm_dst_len;
	if (tb[RTA_DST] && (size_t)nla_len(tb[RTA_DST]) == alen)
		memcpy(g->dst.bytes, nla_data(tb[RTA_DST]), alen);
	np_prefix_mask(g->dst.family, g->dst.bytes, g->dst.len);
	memcpy(g->addr, nla_data(tb[RTA_GATEWAY]), alen);
	return NL_OK;
}

int probe_route_gateways(struct probe_gateway **out, size_t *n, np_error *err)
{
	struct gw_dump d = { 0 };
	struct rtmsg rtm = { .rtm_family = AF_UNSPEC };
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP);
	int r = -NLE_NOMEM;
	if (sk && msg && (r = nl_connect(sk, NETLINK_ROUTE)) == 0 &&
	    (r = nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO)) == 0 &&
	    (r = nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, on_gateway_route, &d)) == 0 &&
	    (r = nl_send_auto(sk, msg)) >= 0)
		r = nl_recvmsgs_default(sk);
	nlmsg_free(msg);
	nl_socket_free(sk);
	if (d.nomem)
		r = -NLE_NOMEM;
	if (r < 0) {
		free(d.v);
		return np_error_set(err, NP_EINTERNAL, 0, "route dump: %s", nl_geterror(r));
	}
	*out = d.v;
	*n = d.n;
	return 0;
}
