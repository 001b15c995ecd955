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

/* The output device of the route to one address; 0 with *oif set. */
static int route_oif(int family, const unsigned char *bytes, int *oif, const char **why, int *kerr)
{
	struct rtmsg rtm = { .rtm_family = (unsigned char)family };
	size_t alen = family == AF_INET ? 4 : 16;
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
	if (ans.kernel_errno == ENETUNREACH || ans.kernel_errno == EHOSTUNREACH) {
		*kerr = ans.kernel_errno;
		*why = "no route (is the interface to it down, or without its address?)";
		return -1;
	}
	if (ans.kernel_errno) {
		*kerr = ans.kernel_errno;
		*why = strerror(ans.kernel_errno);
		return -1;
	}
	if (r < 0) {
		*why = nl_geterror(r);
		return -1;
	}
	*oif = ans.oif;
	return 0;
}

int probe_route_dev(const char *peer_addr, char *ifname, size_t len, np_error *err)
{
	unsigned char bytes[16];
	int family, oif = 0, kerr = 0;
	const char *why = "";
	if (inet_pton(AF_INET, peer_addr, bytes) == 1)
		family = AF_INET;
	else if (inet_pton(AF_INET6, peer_addr, bytes) == 1)
		family = AF_INET6;
	else
		return np_error_set(err, NP_EINTERNAL, 0, "route lookup: invalid address '%s'", peer_addr);
	if (route_oif(family, bytes, &oif, &why, &kerr) < 0) {
		if (kerr == ENETUNREACH || kerr == EHOSTUNREACH)
			return np_error_set(err, NP_EINTERNAL, kerr,
					    "no route to %s (is the interface to it down, or without its "
					    "address?)",
					    peer_addr);
		return np_error_set(err, NP_EINTERNAL, 0, "route lookup for %s: %s", peer_addr, why);
	}
	char name[IF_NAMESIZE];
	if (oif <= 0 || !if_indextoname((unsigned)oif, name))
		return np_error_set(err, NP_EINTERNAL, 0, "route lookup for %s: no output device",
				    peer_addr);
	snprintf(ifname, len, "%s", name);
	return 0;
}

/* Add v (0..255) to the address's last byte with carry (v may be negative). */
static void addr_add(unsigned char *b, size_t alen, int v)
{
	int carry = v;
	for (size_t i = alen; i-- > 0 && carry;) {
		int x = b[i] + carry;
		carry = x < 0 ? -1 : x > 255 ? 1 : 0;
		b[i] = (unsigned char)(x & 0xff);
	}
}

int probe_route_subnet_dev(const struct np_prefix *pfx, char *ifname, size_t len, np_error *err)
{
	size_t alen = pfx->family == AF_INET ? 4 : pfx->family == AF_INET6 ? 16 : 0;
	if (!alen || pfx->len < 0 || pfx->len > (int)alen * 8)
		return np_error_set(err, NP_EINTERNAL, 0, "route lookup: invalid network");
	int host_bits = (int)alen * 8 - pfx->len;
	if (host_bits < 1)
		return 1;
	/* The last address of the network, and the ones below it: not a
	 * broadcast address for a subnet of 4 or more. */
	unsigned char last[16];
	memcpy(last, pfx->bytes, 16);
	for (int bit = 0; bit < host_bits; bit++)
		last[alen - 1 - (size_t)bit / 8] |= (unsigned char)(1u << (bit % 8));
	int tries = host_bits >= 2 ? 4 : 2;
	for (int t = 0; t < tries; t++) {
		unsigned char a[16];
		memcpy(a, last, 16);
		addr_add(a, alen, host_bits >= 2 ? -1 - t : -t);
		int oif = 0, kerr = 0;
		const char *why = "";
		char name[IF_NAMESIZE];
		if (route_oif(pfx->family, a, &oif, &why, &kerr) < 0 || oif <= 0 ||
		    !if_indextoname((unsigned)oif, name))
			continue;
		if (strcmp(name, "lo") == 0)
			continue; /* one of this node's own addresses */
		snprintf(ifname, len, "%s", name);
		return 0;
	}
	return 1;
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
