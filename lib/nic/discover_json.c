/* Links and addresses from a saved `ip -d -j addr show` document, so that
 * tests and offline replay need neither root nor the node's netlink. */
#include "nic/nic.h"
#include "nic/nic_priv.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ARPHRD_IP6GRE
#define ARPHRD_IP6GRE 823
#endif
#ifndef ARPHRD_NETLINK
#define ARPHRD_NETLINK 824
#endif
#ifndef ARPHRD_6LOWPAN
#define ARPHRD_6LOWPAN 825
#endif

/* iproute2's names for ARPHRD types (lib/ll_types.c, ll_type_n2a). */
static const struct {
	const char *name;
	int type;
} link_types[] = {
	{ "generic", 0 },
	{ "ether", ARPHRD_ETHER },
	{ "eether", ARPHRD_EETHER },
	{ "ax25", ARPHRD_AX25 },
	{ "ieee802", ARPHRD_IEEE802 },
	{ "arcnet", ARPHRD_ARCNET },
	{ "atm", ARPHRD_ATM },
	{ "ieee1394", ARPHRD_IEEE1394 },
	{ "infiniband", ARPHRD_INFINIBAND },
	{ "slip", ARPHRD_SLIP },
	{ "cslip", ARPHRD_CSLIP },
	{ "can", ARPHRD_CAN },
	{ "ppp", ARPHRD_PPP },
	{ "hdlc", ARPHRD_HDLC },
	{ "rawhdlc", ARPHRD_RAWHDLC },
	{ "rawip", ARPHRD_RAWIP },
	{ "ipip", ARPHRD_TUNNEL },
	{ "tunnel6", ARPHRD_TUNNEL6 },
	{ "loopback", ARPHRD_LOOPBACK },
	{ "fddi", ARPHRD_FDDI },
	{ "sit", ARPHRD_SIT },
	{ "gre", ARPHRD_IPGRE },
	{ "gre6", ARPHRD_IP6GRE },
	{ "pimreg", ARPHRD_PIMREG },
	{ "ieee802.11", ARPHRD_IEEE80211 },
	{ "ieee802.11/radiotap", ARPHRD_IEEE80211_RADIOTAP },
	{ "ieee802.15.4", ARPHRD_IEEE802154 },
	{ "netlink", ARPHRD_NETLINK },
	{ "6lowpan", ARPHRD_6LOWPAN },
	{ "none", ARPHRD_NONE },
	{ "void", ARPHRD_VOID },
};

static int link_type_from_name(const char *s)
{
	for (size_t i = 0; i < sizeof(link_types) / sizeof(link_types[0]); i++)
		if (strcmp(link_types[i].name, s) == 0)
			return link_types[i].type;
	/* iproute2 prints unnamed types as "[NNN]". */
	long v;
	char num[16];
	size_t len = strlen(s);
	if (len >= 3 && len < sizeof(num) + 2 && s[0] == '[' && s[len - 1] == ']') {
		memcpy(num, s + 1, len - 2);
		num[len - 2] = '\0';
		if (nicp_parse_long(num, &v) && v >= 0 && v <= 0xffff)
			return (int)v;
	}
	return -1;
}

static void lower_copy(char *dst, size_t len, const char *src)
{
	size_t i;
	for (i = 0; src[i] && i + 1 < len; i++)
		dst[i] = (char)tolower((unsigned char)src[i]);
	dst[i] = '\0';
}

static const char *str_member(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool has_flag(const json_t *flags, const char *name)
{
	size_t i;
	const json_t *v;
	json_array_foreach(flags, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
			return true;
	return false;
}

static int bad(np_error *err, const char *path, size_t i, const char *what)
{
	return np_error_set(err, NP_EUSAGE, 0, "%s: interface #%zu: %s", path, i, what);
}

static int read_addrs(struct nic *n, const json_t *ai, const char *path, size_t i,
		      np_error *err)
{
	size_t k;
	const json_t *e;

	if (!ai)
		return 0;
	if (!json_is_array(ai))
		return bad(err, path, i, "addr_info is not an array");
	json_array_foreach(ai, k, e) {
		const char *fam = str_member(e, "family");
		const char *local = str_member(e, "local");
		const char *scope = str_member(e, "scope");
		const json_t *plen = json_object_get(e, "prefixlen");
		struct nic_addr a = { 0 };

		if (!fam || !local)
			continue; /* e.g. "link" family entries */
		if (strcmp(fam, "inet") == 0)
			a.family = AF_INET;
		else if (strcmp(fam, "inet6") == 0)
			a.family = AF_INET6;
		else
			continue;
		if (scope && strcmp(scope, "host") == 0)
			continue;
		if (inet_pton(a.family, local, a.bytes) != 1)
			return bad(err, path, i, "addr_info: bad local address");
		if (!json_is_integer(plen))
			return bad(err, path, i, "addr_info: prefixlen is not an integer");
		a.prefixlen = (int)json_integer_value(plen);
		inet_ntop(a.family, a.bytes, a.text, sizeof(a.text));
		if (nicp_nic_add_addr(n, &a, err) < 0)
			return -1;
	}
	return 0;
}

static int fill_one(struct nic *n, struct nicp_facts *f, const json_t *o, const char *path,
		    size_t i, np_error *err)
{
	const char *name = str_member(o, "ifname");
	const json_t *idx = json_object_get(o, "ifindex");
	const json_t *flags = json_object_get(o, "flags");
	const json_t *mtu = json_object_get(o, "mtu");
	const json_t *li = json_object_get(o, "linkinfo");
	const char *s;

	if (!json_is_object(o))
		return bad(err, path, i, "not an object");
	/* As Linux's dev_valid_name(): the name becomes a path under sysfs. */
	if (!name || !*name || strlen(name) >= sizeof(n->name) || strchr(name, '/') ||
	    !strcmp(name, ".") || !strcmp(name, ".."))
		return bad(err, path, i, "missing or invalid \"ifname\"");
	if (!json_is_integer(idx) || json_integer_value(idx) <= 0)
		return bad(err, path, i, "missing or invalid \"ifindex\"");
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->ifindex = (int)json_integer_value(idx);
	if (flags && !json_is_array(flags))
		return bad(err, path, i, "\"flags\" is not an array");
	n->up = has_flag(flags, "UP");
	f->loopback = has_flag(flags, "LOOPBACK");
	/* ip prints LOWER_UP for carrier; the kernel hides carrier while down. */
	n->carrier = n->up ? has_flag(flags, "LOWER_UP") : -1;
	if (json_is_integer(mtu))
		n->mtu = (int)json_integer_value(mtu);
	if ((s = str_member(o, "operstate")))
		lower_copy(n->operstate, sizeof(n->operstate), s);
	if ((s = str_member(o, "link_type")))
		n->arphrd = link_type_from_name(s);
	if ((s = str_member(o, "address")))
		snprintf(n->mac, sizeof(n->mac), "%s", s);
	if (json_is_object(li) && (s = str_member(li, "info_kind")))
		snprintf(n->kind, sizeof(n->kind), "%s", s);
	if (json_object_get(o, "link_netnsid"))
		f->link_other_ns = true;
	return read_addrs(n, json_object_get(o, "addr_info"), path, i, err);
}

/* "master" and "link" are names in ip's output: resolve them once all
 * interfaces are known. */
static void resolve_names(struct nic_list *l, const struct nicp_facts *fx, const json_t *root)
{
	struct nicp_index ix;
	if (nicp_index_build(&ix, l, NULL) < 0)
		return;
	for (size_t i = 0; i < l->n; i++) {
		const json_t *o = json_array_get(root, i);
		const char *m = str_member(o, "master");
		const char *k = str_member(o, "link");
		ssize_t p;
		if (m && (p = nicp_index_name(&ix, m)) >= 0)
			l->v[i].master_ifindex = l->v[p].ifindex;
		if (k && !fx[i].link_other_ns && (p = nicp_index_name(&ix, k)) >= 0 &&
		    (size_t)p != i)
			l->v[i].link_ifindex = l->v[p].ifindex;
	}
	nicp_index_free(&ix);
}

int nicp_json_read(const char *path, struct nic_list *out, struct nicp_facts **fxp,
		   np_error *err)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	struct nicp_facts *fx = NULL;
	size_t cap = 0, i;
	const json_t *o;
	int rc = -1;

	*fxp = NULL;
	if (!root)
		return np_error_set(err, NP_EUSAGE, 0, "%s:%d:%d: %s", path, je.line, je.column,
				    je.text);
	if (!json_is_array(root)) {
		np_error_set(err, NP_EUSAGE, 0,
			     "%s: not an array (expected the output of `ip -d -j addr show`)", path);
		goto out;
	}
	fx = calloc(json_array_size(root) + 1, sizeof(*fx));
	if (!fx) {
		np_error_set(err, NP_EINTERNAL, ENOMEM, "interface facts");
		goto out;
	}
	json_array_foreach(root, i, o) {
		struct nic *n = nicp_list_add(out, &cap, err);
		if (!n || fill_one(n, &fx[i], o, path, i, err) < 0)
			goto out;
	}
	resolve_names(out, fx, root);
	rc = 0;
out:
	json_decref(root);
	if (rc == 0)
		*fxp = fx;
	else
		free(fx);
	return rc;
}
