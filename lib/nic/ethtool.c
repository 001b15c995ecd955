/* Link speeds of every interface in one ethtool netlink dump
 * (ETHTOOL_MSG_LINKMODES_GET), instead of one sysfs `speed` file per
 * interface: on a node with a thousand interfaces the file opens cost more
 * than the whole netlink dump of links and addresses.  Used only on the live
 * node; fixture trees are read from sysfs. */
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "nic/nic_priv.h"

struct speed_ctx {
	struct nic_list *l;
	const struct nicp_index *ix;
	struct nicp_facts *fx;
};

static int on_linkmodes(struct nl_msg *msg, void *arg)
{
	struct speed_ctx *c = arg;
	struct nlattr *tb[ETHTOOL_A_LINKMODES_MAX + 1], *hdr[ETHTOOL_A_HEADER_MAX + 1];
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, ETHTOOL_A_LINKMODES_MAX, NULL) < 0 ||
	    !tb[ETHTOOL_A_LINKMODES_HEADER] ||
	    nla_parse_nested(hdr, ETHTOOL_A_HEADER_MAX, tb[ETHTOOL_A_LINKMODES_HEADER], NULL) < 0 ||
	    !hdr[ETHTOOL_A_HEADER_DEV_INDEX])
		return NL_SKIP;
	ssize_t pos = nicp_index_pos(c->ix, (int)nla_get_u32(hdr[ETHTOOL_A_HEADER_DEV_INDEX]));
	if (pos < 0)
		return NL_SKIP;
	struct nic *n = &c->l->v[pos];
	/* sysfs reports a speed only while the interface is running; match it. */
	if (n->up && tb[ETHTOOL_A_LINKMODES_SPEED]) {
		uint32_t s = nla_get_u32(tb[ETHTOOL_A_LINKMODES_SPEED]);
		n->speed_mbps = s == (uint32_t)SPEED_UNKNOWN || s > INT32_MAX ? -1 : (long)s;
	}
	return NL_OK;
}

int nicp_ethtool_speeds(struct nic_list *l, const struct nicp_index *ix, struct nicp_facts *fx)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct speed_ctx c = { .l = l, .ix = ix, .fx = fx };
	int r = -1;
	if (!sk || genl_connect(sk) < 0)
		goto out;
	int family = genl_ctrl_resolve(sk, ETHTOOL_GENL_NAME);
	if (family < 0)
		goto out;
	struct nl_msg *msg = nlmsg_alloc();
	if (!msg)
		goto out;
	void *hdr = genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, NLM_F_DUMP,
				ETHTOOL_MSG_LINKMODES_GET, ETHTOOL_GENL_VERSION);
	struct nlattr *nest = hdr ? nla_nest_start(msg, ETHTOOL_A_LINKMODES_HEADER) : NULL;
	if (!nest || nla_nest_end(msg, nest) < 0 ||
	    nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, on_linkmodes, &c) < 0 ||
	    nl_send_auto(sk, msg) < 0) {
		nlmsg_free(msg);
		goto out;
	}
	nlmsg_free(msg);
	r = nl_recvmsgs_default(sk) < 0 ? -1 : 0;
out:
	nl_socket_free(sk);
	if (r == 0)
		for (size_t i = 0; i < l->n; i++)
			fx[i].speed_known = true;
	return r;
}
