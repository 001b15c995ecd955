/* Snapshot: the JSON that `nicpick discover --json` prints, and back.
 *
 * An array with one object per interface:
 *   name, ifindex, class, kind, arphrd, devtype, tunnel, up, operstate,
 *   carrier, mtu, mac, speed_mbps, effective_speed_mbps, pci, numa_node,
 *   driver, has_device, vf, master, master_ifindex, link, link_ifindex,
 *   lower (names), addresses [{family, address, prefixlen}],
 *   rdma [{hca, port, active, link_layer, rate_mbps, gid_index_rocev2}]
 * Unknown values are null (never -1 or ""), so readers need no sentinels.
 * devtype/pci/numa_node/driver are not looked up for software kinds (veth,
 * bridge, vlan, ...): null there means "not applicable". 
 * The reader ignores keys it does not know (the command adds "usable",
 * "score", "reasons"), and rejects a known key of the wrong type. */
#include "nic/nic.h"
#include "nic/nic_priv.h"
#include "util/jsonread.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- writing ---- */

/* Interface names are bytes, not necessarily UTF-8: such a name must not
 * make the whole document fail, so invalid bytes become '?'. */
static json_t *text(const char *s)
{
	json_t *v = json_string(s);
	if (v)
		return v;
	char buf[256];
	size_t i;
	for (i = 0; s[i] && i + 1 < sizeof(buf); i++)
		buf[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
	buf[i] = '\0';
	return json_string(buf);
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? text(s) : json_null();
}

static json_t *int_or_null(long v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

/* Names of other interfaces, found through the index (a linear search per
 * reference would make 1,000 interfaces quadratic). */
static const struct nic *other(const struct nic_list *l, const struct nicp_index *ix,
			       int ifindex)
{
	ssize_t p = l && ix ? nicp_index_pos(ix, ifindex) : -1;
	return p >= 0 ? &l->v[p] : NULL;
}

static json_t *name_of(const struct nic_list *l, const struct nicp_index *ix, int ifindex)
{
	const struct nic *m = other(l, ix, ifindex);
	return m ? text(m->name) : json_null();
}

static json_t *addr_to_json(const struct nic_addr *a)
{
	return json_pack("{s:s, s:s, s:i}", "family", a->family == AF_INET6 ? "inet6" : "inet",
			 "address", a->text, "prefixlen", a->prefixlen);
}

static json_t *rdma_to_json(const struct nic_rdma_port *p)
{
	return json_pack("{s:o, s:i, s:b, s:o, s:o, s:o}", "hca", text(p->hca), "port", p->port,
			 "active", p->active, "link_layer", str_or_null(p->link_layer),
			 "rate_mbps", int_or_null(p->rate_mbps), "gid_index_rocev2",
			 int_or_null(p->gid_index_v4_rocev2));
}

/* With the list at hand, master/link/lower are written as names too. */
static json_t *nic_json(const struct nic_list *l, const struct nicp_index *ix,
			const struct nic *n)
{
	json_t *o = json_object();
	json_t *lower = json_array(), *addrs = json_array(), *rdma = json_array();
	if (!o || !lower || !addrs || !rdma)
		goto fail;
	for (size_t i = 0; i < n->n_lower; i++) {
		const struct nic *m = other(l, ix, n->lower[i]);
		if (json_array_append_new(lower, m ? text(m->name) : json_integer(n->lower[i])))
			goto fail;
	}
	for (size_t i = 0; i < n->n_addrs; i++)
		if (json_array_append_new(addrs, addr_to_json(&n->addrs[i])))
			goto fail;
	for (size_t i = 0; i < n->n_rdma; i++)
		if (json_array_append_new(rdma, rdma_to_json(&n->rdma[i])))
			goto fail;

	const char *cls = nic_class_name(n->cls);
	int bad = 0;
	bad |= json_object_set_new_nocheck(o, "name", text(n->name));
	bad |= json_object_set_new_nocheck(o, "ifindex", json_integer(n->ifindex));
	bad |= json_object_set_new_nocheck(o, "class", str_or_null(cls));
	bad |= json_object_set_new_nocheck(o, "kind", str_or_null(n->kind));
	bad |= json_object_set_new_nocheck(o, "arphrd", int_or_null(n->arphrd));
	bad |= json_object_set_new_nocheck(o, "devtype", str_or_null(n->devtype));
	bad |= json_object_set_new_nocheck(o, "tunnel", str_or_null(n->tunnel));
	bad |= json_object_set_new_nocheck(o, "up", json_boolean(n->up));
	bad |= json_object_set_new_nocheck(o, "operstate", str_or_null(n->operstate));
	bad |= json_object_set_new_nocheck(o, "carrier",
				   n->carrier < 0 ? json_null() : json_boolean(n->carrier));
	bad |= json_object_set_new_nocheck(o, "mtu", json_integer(n->mtu));
	bad |= json_object_set_new_nocheck(o, "mac", str_or_null(n->mac));
	bad |= json_object_set_new_nocheck(o, "speed_mbps", int_or_null(n->speed_mbps));
	bad |= json_object_set_new_nocheck(o, "effective_speed_mbps", int_or_null(n->eff_speed_mbps));
	bad |= json_object_set_new_nocheck(o, "pci", str_or_null(n->pci));
	bad |= json_object_set_new_nocheck(o, "numa_node", int_or_null(n->numa_node));
	bad |= json_object_set_new_nocheck(o, "driver", str_or_null(n->driver));
	bad |= json_object_set_new_nocheck(o, "has_device", json_boolean(n->has_device));
	bad |= json_object_set_new_nocheck(o, "vf", json_boolean(n->is_vf));
	bad |= json_object_set_new_nocheck(o, "master", name_of(l, ix, n->master_ifindex));
	bad |= json_object_set_new_nocheck(o, "master_ifindex", int_or_null(n->master_ifindex ? n->master_ifindex : -1));
	bad |= json_object_set_new_nocheck(o, "link", name_of(l, ix, n->link_ifindex));
	bad |= json_object_set_new_nocheck(o, "link_ifindex", int_or_null(n->link_ifindex ? n->link_ifindex : -1));
	bad |= json_object_set_new_nocheck(o, "lower", lower);
	lower = NULL;
	bad |= json_object_set_new_nocheck(o, "addresses", addrs);
	addrs = NULL;
	bad |= json_object_set_new_nocheck(o, "rdma", rdma);
	rdma = NULL;
	if (bad)
		goto fail;
	return o;
fail:
	json_decref(o);
	json_decref(lower);
	json_decref(addrs);
	json_decref(rdma);
	return NULL;
}

json_t *nic_to_json(const struct nic *n)
{
	return nic_json(NULL, NULL, n);
}

json_t *nic_list_to_json(const struct nic_list *l)
{
	struct nicp_index ix;
	json_t *a = json_array();
	if (!a || nicp_index_build(&ix, l, NULL) < 0) {
		json_decref(a);
		return NULL;
	}
	for (size_t i = 0; i < l->n; i++) {
		if (json_array_append_new(a, nic_json(l, &ix, &l->v[i]))) {
			json_decref(a);
			a = NULL;
			break;
		}
	}
	nicp_index_free(&ix);
	return a;
}

int nic_list_each_json(const struct nic_list *l, int (*fn)(size_t i, json_t *obj, void *ud),
		       void *ud)
{
	struct nicp_index ix;
	if (nicp_index_build(&ix, l, NULL) < 0)
		return -1;
	int r = 0;
	for (size_t i = 0; i < l->n && r == 0; i++) {
		json_t *o = nic_json(l, &ix, &l->v[i]);
		r = o ? fn(i, o, ud) : -1;
	}
	nicp_index_free(&ix);
	return r;
}

/* ---- reading ---- */

struct rd {
	const char *iface; /* for messages */
	np_error *err;
};

static int type_err(struct rd *r, const char *key, const char *want)
{
	return np_error_set(r->err, NP_EUSAGE, 0, "snapshot: interface %s: \"%s\" must be %s",
			    r->iface, key, want);
}

/* Each getter: a missing key or null leaves the default; anything else is
 * read by util/jsonread, and what it refuses is an error naming the
 * interface. */
static bool absent(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return !v || json_is_null(v);
}

static int refused(struct rd *r, const char *why)
{
	return np_error_set(r->err, NP_EUSAGE, 0, "snapshot: interface %s: %s", r->iface, why);
}

static int get_str(struct rd *r, const json_t *o, const char *key, char *dst, size_t len)
{
	char why[NP_JSON_WHY_MAX];
	if (absent(o, key))
		return 0;
	return np_json_str(o, key, false, NP_CS_ANY, 0, dst, len, why) < 0 ? refused(r, why) : 0;
}

static int get_long(struct rd *r, const json_t *o, const char *key, long *dst)
{
	char why[NP_JSON_WHY_MAX];
	if (absent(o, key))
		return 0;
	return np_json_int(o, key, false, LONG_MIN, LONG_MAX, dst, why) < 0 ? refused(r, why) : 0;
}

static int get_int(struct rd *r, const json_t *o, const char *key, int *dst)
{
	char why[NP_JSON_WHY_MAX];
	long v;
	if (absent(o, key))
		return 0;
	if (np_json_int(o, key, false, -1, 0x7fffffff, &v, why) < 0)
		return refused(r, why);
	*dst = (int)v;
	return 0;
}

static int get_bool(struct rd *r, const json_t *o, const char *key, bool *dst)
{
	char why[NP_JSON_WHY_MAX];
	if (absent(o, key))
		return 0;
	return np_json_bool(o, key, dst, why) < 0 ? refused(r, why) : 0;
}

static const json_t *get_array(struct rd *r, const json_t *o, const char *key, int *rc)
{
	const json_t *v = json_object_get(o, key);
	*rc = 0;
	if (!v || json_is_null(v))
		return NULL;
	if (!json_is_array(v)) {
		*rc = type_err(r, key, "an array");
		return NULL;
	}
	return v;
}

static int read_addrs(struct rd *r, const json_t *o, struct nic *n)
{
	int rc;
	const json_t *arr = get_array(r, o, "addresses", &rc), *e;
	size_t i;
	if (!arr)
		return rc;
	json_array_foreach(arr, i, e) {
		struct nic_addr a = { 0 };
		char fam[8] = "";
		char text[NIC_ADDR_TEXT_MAX] = "";
		long plen = -1;
		if (!json_is_object(e))
			return type_err(r, "addresses", "an array of objects");
		if (get_str(r, e, "family", fam, sizeof(fam)) < 0 ||
		    get_str(r, e, "address", text, sizeof(text)) < 0 ||
		    get_long(r, e, "prefixlen", &plen) < 0)
			return -1;
		a.family = strcmp(fam, "inet6") == 0 ? AF_INET6 : strcmp(fam, "inet") == 0 ? AF_INET : 0;
		int max = a.family == AF_INET ? 32 : 128;
		if (!a.family || inet_pton(a.family, text, a.bytes) != 1 || plen < 0 || plen > max)
			return np_error_set(r->err, NP_EUSAGE, 0,
					    "snapshot: interface %s: bad address entry #%zu", r->iface, i);
		a.prefixlen = (int)plen;
		inet_ntop(a.family, a.bytes, a.text, sizeof(a.text));
		if (nicp_nic_add_addr(n, &a, r->err) < 0)
			return -1;
	}
	return 0;
}

static int read_rdma(struct rd *r, const json_t *o, struct nic *n)
{
	int rc;
	const json_t *arr = get_array(r, o, "rdma", &rc), *e;
	size_t i;
	if (!arr)
		return rc;
	n->rdma = calloc(json_array_size(arr) + 1, sizeof(*n->rdma));
	if (!n->rdma)
		return np_error_set(r->err, NP_EINTERNAL, ENOMEM, "snapshot");
	json_array_foreach(arr, i, e) {
		struct nic_rdma_port *p = &n->rdma[n->n_rdma];
		*p = (struct nic_rdma_port){ .rate_mbps = -1, .gid_index_v4_rocev2 = -1 };
		if (!json_is_object(e))
			return type_err(r, "rdma", "an array of objects");
		if (get_str(r, e, "hca", p->hca, sizeof(p->hca)) < 0 ||
		    get_int(r, e, "port", &p->port) < 0 || get_bool(r, e, "active", &p->active) < 0 ||
		    get_str(r, e, "link_layer", p->link_layer, sizeof(p->link_layer)) < 0 ||
		    get_long(r, e, "rate_mbps", &p->rate_mbps) < 0 ||
		    get_int(r, e, "gid_index_rocev2", &p->gid_index_v4_rocev2) < 0)
			return -1;
		if (!p->hca[0] || p->port < 1)
			return np_error_set(r->err, NP_EUSAGE, 0,
					    "snapshot: interface %s: rdma entry #%zu needs an \"hca\" name and a "
					    "\"port\" from 1",
					    r->iface, i);
		n->n_rdma++;
	}
	return 0;
}

static int read_one(const json_t *o, size_t idx, struct nic *n, np_error *err)
{
	char cls[32] = "", buf[32];
	bool carrier_known;
	struct rd r = { .err = err };
	long v;

	if (!json_is_object(o))
		return np_error_set(err, NP_EUSAGE, 0, "snapshot: entry #%zu is not an object", idx);
	snprintf(buf, sizeof(buf), "#%zu", idx);
	r.iface = buf;
	const json_t *name = json_object_get(o, "name");
	if (!json_is_string(name) || !json_string_length(name) ||
	    json_string_length(name) >= sizeof(n->name))
		return type_err(&r, "name", "a non-empty interface name");
	snprintf(n->name, sizeof(n->name), "%s", json_string_value(name));
	r.iface = n->name;

	v = 0;
	if (get_long(&r, o, "ifindex", &v) < 0)
		return -1;
	if (v <= 0 || v > 0x7fffffff)
		return type_err(&r, "ifindex", "a positive integer");
	n->ifindex = (int)v;
	if (get_str(&r, o, "class", cls, sizeof(cls)) < 0)
		return -1;
	int c = nic_class_from_name(cls);
	if (c < 0)
		return type_err(&r, "class", "one of the class names");
	n->cls = c;

	const json_t *cj = json_object_get(o, "carrier");
	carrier_known = cj && !json_is_null(cj);
	bool carrier = false;
	long master = -1, link = -1;
	if (get_str(&r, o, "kind", n->kind, sizeof(n->kind)) < 0 ||
	    get_int(&r, o, "arphrd", &n->arphrd) < 0 ||
	    get_str(&r, o, "devtype", n->devtype, sizeof(n->devtype)) < 0 ||
	    get_str(&r, o, "tunnel", n->tunnel, sizeof(n->tunnel)) < 0 ||
	    get_bool(&r, o, "up", &n->up) < 0 ||
	    get_str(&r, o, "operstate", n->operstate, sizeof(n->operstate)) < 0 ||
	    get_bool(&r, o, "carrier", &carrier) < 0 || get_int(&r, o, "mtu", &n->mtu) < 0 ||
	    get_str(&r, o, "mac", n->mac, sizeof(n->mac)) < 0 ||
	    get_long(&r, o, "speed_mbps", &n->speed_mbps) < 0 ||
	    get_long(&r, o, "effective_speed_mbps", &n->eff_speed_mbps) < 0 ||
	    get_str(&r, o, "pci", n->pci, sizeof(n->pci)) < 0 ||
	    get_int(&r, o, "numa_node", &n->numa_node) < 0 ||
	    get_str(&r, o, "driver", n->driver, sizeof(n->driver)) < 0 ||
	    get_bool(&r, o, "has_device", &n->has_device) < 0 ||
	    get_bool(&r, o, "vf", &n->is_vf) < 0 ||
	    get_long(&r, o, "master_ifindex", &master) < 0 ||
	    get_long(&r, o, "link_ifindex", &link) < 0 || read_addrs(&r, o, n) < 0 ||
	    read_rdma(&r, o, n) < 0)
		return -1;
	n->carrier = carrier_known ? carrier : -1;
	n->master_ifindex = master > 0 ? (int)master : 0;
	n->link_ifindex = link > 0 ? (int)link : 0;
	/* "master", "link" and "lower" are names: checked in resolve(). */
	const json_t *s;
	if ((s = json_object_get(o, "master")) && !json_is_null(s) && !json_is_string(s))
		return type_err(&r, "master", "a string or null");
	if ((s = json_object_get(o, "link")) && !json_is_null(s) && !json_is_string(s))
		return type_err(&r, "link", "a string or null");
	int rc;
	get_array(&r, o, "lower", &rc);
	return rc;
}

/* Second pass: names that refer to other interfaces of the snapshot. */
static int resolve(const json_t *arr, struct nic_list *l, np_error *err)
{
	struct nicp_index ix;
	int rc = -1;
	if (nicp_index_build(&ix, l, err) < 0)
		return -1;
	for (size_t i = 0; i < l->n; i++) {
		struct nic *n = &l->v[i];
		const json_t *o = json_array_get(arr, i), *e;
		const json_t *lower = json_object_get(o, "lower");
		const char *m = json_string_value(json_object_get(o, "master"));
		const char *k = json_string_value(json_object_get(o, "link"));
		ssize_t p;
		size_t j;

		/* A name without a numeric ifindex (hand-written snapshot). */
		if (m && !n->master_ifindex) {
			if ((p = nicp_index_name(&ix, m)) < 0)
				goto unknown;
			n->master_ifindex = l->v[p].ifindex;
		}
		if (k && !n->link_ifindex) {
			if ((p = nicp_index_name(&ix, k)) < 0)
				goto unknown;
			n->link_ifindex = l->v[p].ifindex;
		}
		if (!json_is_array(lower) || !json_array_size(lower))
			continue;
		n->lower = calloc(json_array_size(lower), sizeof(int));
		if (!n->lower) {
			np_error_set(err, NP_EINTERNAL, ENOMEM, "snapshot");
			goto out;
		}
		json_array_foreach(lower, j, e) {
			if (json_is_string(e)) {
				if ((p = nicp_index_name(&ix, json_string_value(e))) < 0)
					goto unknown;
				n->lower[n->n_lower++] = l->v[p].ifindex;
			} else if (json_is_integer(e) && json_integer_value(e) > 0 &&
				   json_integer_value(e) <= 0x7fffffff) {
				n->lower[n->n_lower++] = (int)json_integer_value(e);
			} else {
				np_error_set(err, NP_EUSAGE, 0,
					     "snapshot: interface %s: \"lower\" must hold names", n->name);
				goto out;
			}
		}
		continue;
unknown:
		np_error_set(err, NP_EUSAGE, 0,
			     "snapshot: interface %s refers to an interface not in the snapshot",
			     n->name);
		goto out;
	}
	rc = 0;
out:
	nicp_index_free(&ix);
	return rc;
}

int nic_list_from_json(const json_t *arr, struct nic_list *out, np_error *err)
{
	struct nic_list l = { 0 };
	size_t cap = 0, i;
	const json_t *o;

	out->v = NULL;
	out->n = 0;
	if (!json_is_array(arr))
		return np_error_set(err, NP_EUSAGE, 0, "snapshot: not an array of interfaces");
	json_array_foreach(arr, i, o) {
		struct nic *n = nicp_list_add(&l, &cap, err);
		if (!n || read_one(o, i, n, err) < 0)
			goto fail;
	}
	{
		/* Names and ifindexes must be unique, as in one namespace. */
		struct nicp_index ix;
		if (nicp_index_build(&ix, &l, err) < 0)
			goto fail;
		for (i = 0; i < l.n; i++) {
			if (nicp_index_pos(&ix, l.v[i].ifindex) != (ssize_t)i ||
			    nicp_index_name(&ix, l.v[i].name) != (ssize_t)i) {
				np_error_set(err, NP_EUSAGE, 0,
					     "snapshot: interface %s (ifindex %d) appears twice",
					     l.v[i].name, l.v[i].ifindex);
				nicp_index_free(&ix);
				goto fail;
			}
		}
		nicp_index_free(&ix);
	}
	if (resolve(arr, &l, err) < 0)
		goto fail;
	*out = l;
	return 0;
fail:
	nic_list_free(&l);
	return -1;
}

int nic_snapshot_load(const char *path, struct nic_list *out, np_error *err)
{
	json_error_t je;
	out->v = NULL;
	out->n = 0;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return np_error_set(err, NP_EUSAGE, EISDIR, "snapshot %s", path);
	json_t *root = json_load_file(path, 0, &je);
	if (!root) {
		/* jansson says "unable to open FILE: ERRNO" for I/O errors. */
		return np_error_set(err, NP_EUSAGE, 0, "snapshot %s:%d:%d: %s", path, je.line,
				    je.column, je.text);
	}
	int rc = nic_list_from_json(root, out, err);
	json_decref(root);
	if (rc < 0)
		return np_error_wrap(err, "%s", path);
	return 0;
}
