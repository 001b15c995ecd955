/* The decision as the gathering pod publishes it, its strict reader, and the
 * check every follower makes against its own report.
 *
 *   {"v":1,"ok":true,"routed":false,"pods":8,
 *    "rails":[{"net":"10.9.0.0/24","fam":4,"mbps":100000,"score":50,
 *              "assign":[{"pod":"job-w-0","if":"eth1","addr":"10.9.0.1","plen":24},...]}],
 *    "nets":[{"net":"10.9.0.0/24","pods":8,"mbps":100000,"score":50,"ok":true,
 *             "why":"chosen: ..."}],"nets_total":3,
 *    "table":[{"pod":"job-w-3","cands":"...","why":"..."}],"table_total":1,
 *    "excl":["10.8.0.0/24"],"error":"..."}
 *
 * "assign" is sorted by pod name (a follower finds itself by bisection);
 * "routed" rails have "net":"routed"; "error" is present when "ok" is false. */
#include "agree/agree.h"
#include "agree/agree_priv.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static json_t *rail_to_json(const struct agree_rail *r)
{
	json_t *assign = json_array();
	for (size_t i = 0; i < r->n_assign; i++) {
		const struct agree_assign *a = &r->assign[i];
		json_array_append_new(assign, json_pack("{s:s, s:s, s:s, s:i}", "pod", a->pod, "if",
							a->ifname, "addr", a->addr, "plen",
							a->prefixlen));
	}
	return json_pack("{s:s, s:i, s:I, s:I, s:o}", "net", r->net.text, "fam",
			 r->net.pfx.family == AF_INET ? 4 : 6, "mbps", (json_int_t)r->min_mbps, "score",
			 (json_int_t)r->min_score, "assign", assign);
}

int agree_decision_to_json(const struct agree_decision *d, char **json, np_error *err)
{
	*json = NULL;
	json_t *root = json_pack("{s:i, s:b, s:b, s:I}", "v", AGREE_DECISION_VERSION, "ok", d->ok,
				 "routed", d->routed, "pods", (json_int_t)d->n_pods);
	json_t *rails = json_array(), *nets = json_array(), *table = json_array();
	json_t *excl = json_array();
	for (size_t i = 0; i < d->n_rails && i < AGREE_RAILS_MAX; i++)
		json_array_append_new(rails, rail_to_json(&d->rails[i]));
	for (size_t i = 0; i < d->n_nets && i < AGREE_NETS_KEEP; i++) {
		const struct agree_ranked *k = &d->nets[i];
		json_array_append_new(nets, json_pack("{s:s, s:I, s:I, s:I, s:b, s:s}", "net",
						      k->net.text, "pods", (json_int_t)k->n_pods,
						      "mbps", (json_int_t)k->min_mbps, "score",
						      (json_int_t)k->min_score, "ok", k->eligible,
						      "why", k->why));
	}
	for (size_t i = 0; i < d->n_table && i < AGREE_TABLE_KEEP; i++) {
		const struct agree_pod_row *row = &d->table[i];
		json_array_append_new(table, json_pack("{s:s, s:s, s:s}", "pod", row->pod, "cands",
						       row->cands, "why", row->why));
	}
	for (size_t i = 0; i < d->n_excluded && i < AGREE_EXCLUDED_MAX; i++)
		json_array_append_new(excl, json_string(d->excluded[i].text));
	json_object_set_new(root, "rails", rails);
	json_object_set_new(root, "nets", nets);
	json_object_set_new(root, "nets_total", json_integer((json_int_t)d->nets_total));
	json_object_set_new(root, "table", table);
	json_object_set_new(root, "table_total", json_integer((json_int_t)d->table_total));
	json_object_set_new(root, "excl", excl);
	if (!d->ok)
		json_object_set_new(root, "error", json_string(d->error));
	char *s = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!s)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot serialize the decision");
	if (strlen(s) > AGREE_DECISION_MAX_BYTES) {
		size_t len = strlen(s);
		free(s);
		return np_error_set(err, NP_EINTERNAL, 0,
				    "the decision is %zu bytes, more than an annotation may hold (%d)",
				    len, AGREE_DECISION_MAX_BYTES);
	}
	*json = s;
	return 0;
}

static int parse_net(const json_t *o, const char *key, struct agree_network *n, char *why)
{
	char text[AGREE_NET_TEXT_MAX];
	np_error e;
	if (agree_get_str(o, key, true, AGREE_CS_TEXT, 1, text, sizeof(text), why) < 0)
		return -1;
	if (agree_network_parse(text, n, &e) < 0 || strcmp(n->text, text)) {
		snprintf(why, AGREE_WHY_MAX, "\"%s\" is not a network: \"%s\"", key, text);
		return -1;
	}
	return 0;
}

static int parse_assign(const json_t *o, int family, struct agree_assign *a, char *why)
{
	static const char *const keys[] = { "pod", "if", "addr", "plen", NULL };
	unsigned char b[16];
	long plen;
	if (!json_is_object(o))
		return snprintf(why, AGREE_WHY_MAX, "assignment is not an object"), -1;
	if (agree_check_keys(o, keys, why) < 0 ||
	    agree_get_str(o, "pod", true, AGREE_CS_NAME, 1, a->pod, sizeof(a->pod), why) < 0 ||
	    agree_get_str(o, "if", true, AGREE_CS_IFNAME, 1, a->ifname, sizeof(a->ifname), why) < 0 ||
	    agree_get_str(o, "addr", true, AGREE_CS_TEXT, 2, a->addr, sizeof(a->addr), why) < 0 ||
	    agree_get_int(o, "plen", true, 1, family == AF_INET ? 32 : 128, &plen, why) < 0)
		return -1;
	if (!agree_addr_from_text(family, a->addr, b) || !agree_addr_is_unicast(family, b))
		return snprintf(why, AGREE_WHY_MAX, "\"addr\" of pod %.64s is not an address", a->pod),
		       -1;
	a->family = family;
	a->prefixlen = (int)plen;
	return 0;
}

static int parse_rail(const json_t *o, bool routed, size_t n_pods, struct agree_rail *r, char *why)
{
	static const char *const keys[] = { "net", "fam", "mbps", "score", "assign", NULL };
	long fam;
	if (!json_is_object(o))
		return snprintf(why, AGREE_WHY_MAX, "rail is not an object"), -1;
	if (agree_check_keys(o, keys, why) < 0 || agree_get_int(o, "fam", true, 4, 6, &fam, why) < 0 ||
	    agree_get_int(o, "mbps", true, -1, 100000000LL, &r->min_mbps, why) < 0 ||
	    agree_get_int(o, "score", true, -1000000000000LL, 1000000000000LL, &r->min_score, why) < 0)
		return -1;
	if (fam == 5)
		return snprintf(why, AGREE_WHY_MAX, "\"fam\" is 5"), -1;
	int family = fam == 4 ? AF_INET : AF_INET6;
	if (routed) {
		char text[AGREE_NET_TEXT_MAX];
		if (agree_get_str(o, "net", true, AGREE_CS_TEXT, 1, text, sizeof(text), why) < 0)
			return -1;
		if (strcmp(text, "routed"))
			return snprintf(why, AGREE_WHY_MAX, "routed rail with \"net\" \"%s\"", text), -1;
		memset(&r->net, 0, sizeof(r->net));
		r->net.pfx.family = family;
		strcpy(r->net.text, "routed");
	} else {
		if (parse_net(o, "net", &r->net, why) < 0)
			return -1;
		if (r->net.pfx.family != family)
			return snprintf(why, AGREE_WHY_MAX, "\"fam\" does not match \"net\""), -1;
	}
	const json_t *arr = json_object_get(o, "assign");
	if (!json_is_array(arr) || json_array_size(arr) != n_pods)
		return snprintf(why, AGREE_WHY_MAX, "\"assign\" is not an array of %zu pods", n_pods),
		       -1;
	r->assign = calloc(n_pods ? n_pods : 1, sizeof(*r->assign));
	if (!r->assign)
		return snprintf(why, AGREE_WHY_MAX, "out of memory"), -1;
	for (size_t i = 0; i < n_pods; i++) {
		if (parse_assign(json_array_get(arr, i), family, &r->assign[i], why) < 0)
			return -1;
		r->n_assign = i + 1;
		if (i && strcmp(r->assign[i - 1].pod, r->assign[i].pod) >= 0)
			return snprintf(why, AGREE_WHY_MAX, "\"assign\" is not sorted by pod name"), -1;
	}
	return 0;
}

static int parse_nets(const json_t *root, struct agree_decision *d, char *why)
{
	static const char *const keys[] = { "net", "pods", "mbps", "score", "ok", "why", NULL };
	const json_t *arr = json_object_get(root, "nets");
	if (!json_is_array(arr) || json_array_size(arr) > AGREE_NETS_KEEP)
		return snprintf(why, AGREE_WHY_MAX, "\"nets\" is not an array of at most %d",
				AGREE_NETS_KEEP), -1;
	d->nets = calloc(json_array_size(arr) + 1, sizeof(*d->nets));
	if (!d->nets)
		return snprintf(why, AGREE_WHY_MAX, "out of memory"), -1;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const json_t *o = json_array_get(arr, i);
		struct agree_ranked *k = &d->nets[i];
		long pods;
		if (!json_is_object(o))
			return snprintf(why, AGREE_WHY_MAX, "\"nets\" entry is not an object"), -1;
		if (agree_check_keys(o, keys, why) < 0 || parse_net(o, "net", &k->net, why) < 0 ||
		    agree_get_int(o, "pods", true, 0, (long long)d->n_pods, &pods, why) < 0 ||
		    agree_get_int(o, "mbps", true, -1, 100000000LL, &k->min_mbps, why) < 0 ||
		    agree_get_int(o, "score", true, -1000000000000LL, 1000000000000LL, &k->min_score,
				  why) < 0 ||
		    agree_get_bool(o, "ok", &k->eligible, why) < 0 ||
		    agree_get_str(o, "why", true, AGREE_CS_TEXT, 0, k->why, sizeof(k->why), why) < 0)
			return -1;
		k->n_pods = (size_t)pods;
		d->n_nets = i + 1;
	}
	long total;
	if (agree_get_int(root, "nets_total", true, (long long)d->n_nets, 1LL << 32, &total, why) < 0)
		return -1;
	d->nets_total = (size_t)total;
	return 0;
}

static int parse_table(const json_t *root, struct agree_decision *d, char *why)
{
	static const char *const keys[] = { "pod", "cands", "why", NULL };
	const json_t *arr = json_object_get(root, "table");
	if (!json_is_array(arr) || json_array_size(arr) > AGREE_TABLE_KEEP)
		return snprintf(why, AGREE_WHY_MAX, "\"table\" is not an array of at most %d",
				AGREE_TABLE_KEEP), -1;
	d->table = calloc(json_array_size(arr) + 1, sizeof(*d->table));
	if (!d->table)
		return snprintf(why, AGREE_WHY_MAX, "out of memory"), -1;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const json_t *o = json_array_get(arr, i);
		struct agree_pod_row *row = &d->table[i];
		if (!json_is_object(o))
			return snprintf(why, AGREE_WHY_MAX, "\"table\" row is not an object"), -1;
		if (agree_check_keys(o, keys, why) < 0 ||
		    agree_get_str(o, "pod", true, AGREE_CS_NAME, 1, row->pod, sizeof(row->pod), why) < 0 ||
		    agree_get_str(o, "cands", true, AGREE_CS_TEXT, 0, row->cands, sizeof(row->cands),
				  why) < 0 ||
		    agree_get_str(o, "why", true, AGREE_CS_TEXT, 0, row->why, sizeof(row->why), why) < 0)
			return -1;
		d->n_table = i + 1;
	}
	long total;
	if (agree_get_int(root, "table_total", true, (long long)d->n_table, AGREE_PODS_MAX, &total,
			  why) < 0)
		return -1;
	d->table_total = (size_t)total;
	return 0;
}

static int parse_decision(const json_t *root, struct agree_decision *d, char *why)
{
	static const char *const keys[] = { "v",     "ok",	    "routed", "pods", "rails",
					     "nets", "nets_total", "table",  "table_total",
					     "excl", "error",	    NULL };
	long pods;
	if (agree_check_keys(root, keys, why) < 0 || agree_get_bool(root, "ok", &d->ok, why) < 0 ||
	    agree_get_bool(root, "routed", &d->routed, why) < 0 ||
	    agree_get_int(root, "pods", true, 1, AGREE_PODS_MAX, &pods, why) < 0)
		return -1;
	d->n_pods = (size_t)pods;
	const json_t *rails = json_object_get(root, "rails");
	if (!json_is_array(rails) || json_array_size(rails) > AGREE_RAILS_MAX)
		return snprintf(why, AGREE_WHY_MAX, "\"rails\" is not an array of at most %d",
				AGREE_RAILS_MAX), -1;
	if (d->ok != (json_array_size(rails) > 0))
		return snprintf(why, AGREE_WHY_MAX, "\"ok\" does not match \"rails\""), -1;
	for (size_t i = 0; i < json_array_size(rails); i++) {
		d->n_rails = i + 1;
		if (parse_rail(json_array_get(rails, i), d->routed, d->n_pods, &d->rails[i], why) < 0)
			return -1;
	}
	if (parse_nets(root, d, why) < 0 || parse_table(root, d, why) < 0)
		return -1;
	const json_t *excl = json_object_get(root, "excl");
	if (!json_is_array(excl) || json_array_size(excl) > AGREE_EXCLUDED_MAX)
		return snprintf(why, AGREE_WHY_MAX, "\"excl\" is not an array of at most %d",
				AGREE_EXCLUDED_MAX), -1;
	for (size_t i = 0; i < json_array_size(excl); i++) {
		json_t *wrap = json_pack("{s:O}", "excl", json_array_get(excl, i));
		int rc = wrap ? parse_net(wrap, "excl", &d->excluded[i], why) : -1;
		json_decref(wrap);
		if (rc < 0)
			return -1;
		d->n_excluded = i + 1;
	}
	int r = agree_get_str(root, "error", !d->ok, AGREE_CS_TEXT, 1, d->error, sizeof(d->error),
			      why);
	if (r < 0)
		return -1;
	if (d->ok && r == 0)
		return snprintf(why, AGREE_WHY_MAX, "\"error\" in a successful decision"), -1;
	return 0;
}

int agree_decision_parse(const char *json, size_t len, struct agree_decision *out, np_error *err)
{
	char why[AGREE_WHY_MAX] = "";
	long version;
	memset(out, 0, sizeof(*out));
	if (!json || len > AGREE_DECISION_MAX_BYTES)
		return np_error_set(err, NP_EK8S, 0, "bad decision: %zu bytes, more than %d", len,
				    AGREE_DECISION_MAX_BYTES);
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return np_error_set(err, NP_EK8S, 0, "bad decision: not JSON (line %d, column %d)",
				    je.line, je.column);
	int rc = -1;
	if (!json_is_object(root))
		snprintf(why, sizeof(why), "not a JSON object");
	else if (agree_get_int(root, "v", true, 1, 1LL << 40, &version, why) < 0)
		;
	else if (version > AGREE_DECISION_VERSION)
		snprintf(why, sizeof(why), "version %ld is newer than this nicpick (%d)", version,
			 AGREE_DECISION_VERSION);
	else
		rc = parse_decision(root, out, why);
	json_decref(root);
	if (rc < 0) {
		agree_decision_free(out);
		memset(out, 0, sizeof(*out));
		return np_error_set(err, NP_EK8S, 0, "bad decision: %s", why);
	}
	return 0;
}

static int cmp_assign_pod(const void *key, const void *elem)
{
	return strcmp(key, ((const struct agree_assign *)elem)->pod);
}

int agree_decision_check_own(const struct agree_decision *d, const struct agree_report *mine,
			     struct agree_own *own, np_error *err)
{
	memset(own, 0, sizeof(*own));
	if (!d->ok)
		return np_error_set(err, NP_ENOCOMMON, 0, "%s",
				    d->error[0] ? d->error : "the job's pods share no usable network");
	for (size_t r = 0; r < d->n_rails && r < AGREE_RAILS_MAX; r++) {
		const struct agree_rail *rail = &d->rails[r];
		const struct agree_assign *a = bsearch(mine->pod, rail->assign, rail->n_assign,
						       sizeof(*rail->assign), cmp_assign_pod);
		if (!a)
			return np_error_set(err, NP_EK8S, 0,
					    "the decision does not include pod %s (made without its report?)",
					    mine->pod);
		unsigned char b[16];
		size_t i = 0;
		if (agree_addr_from_text(a->family, a->addr, b)) {
			for (; i < mine->n && i < AGREE_CAND_MAX; i++) {
				const struct agree_cand *k = &mine->c[i];
				if (k->family == a->family && !strcmp(k->ifname, a->ifname) &&
				    !memcmp(k->addr, b, a->family == AF_INET ? 4 : 16))
					break;
			}
		}
		if (i >= mine->n || i >= AGREE_CAND_MAX)
			return np_error_set(err, NP_EK8S, 0,
					    "the decision names %s %s for pod %s, which is not in its report",
					    a->ifname, a->addr, mine->pod);
		own->cand[r] = i;
		own->n_rails = r + 1;
	}
	return 0;
}
