/* The report one pod publishes about its candidates: build, write, read. */
#include "agree/agree.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "smoke/smoke.h"
#include "util/jsonread.h"

_Static_assert(AGREE_WHY_MAX >= NP_JSON_WHY_MAX, "reasons are read into AGREE_WHY_MAX buffers");

#define MBPS_MAX 100000000LL	  /* 100 Tb/s: anything above is a bad value */
#define SCORE_MAX 1000000000000LL /* keeps worst-case arithmetic far from overflow */

/* ---- addresses ---- */

static bool addr_from_text(int family, const char *text, unsigned char *bytes)
{
	memset(bytes, 0, 16);
	return (family == AF_INET || family == AF_INET6) && inet_pton(family, text, bytes) == 1;
}

static bool addr_is_unicast(int family, const unsigned char *b)
{
	static const unsigned char zero[16];
	if (family == AF_INET)
		return memcmp(b, zero, 4) && b[0] != 127 && b[0] < 224;
	if (family == AF_INET6) {
		bool loop = !memcmp(b, zero, 15) && b[15] == 1;
		return memcmp(b, zero, 16) && !loop && b[0] != 0xff;
	}
	return false;
}

int agree_network_parse(const char *cidr, struct agree_network *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	if (np_prefix_parse(cidr, &out->pfx, err) < 0)
		return np_error_wrap(err, "network");
	np_prefix_format(&out->pfx, out->text, sizeof(out->text));
	return 0;
}

/* ---- building a report ---- */

static bool cand_same(const struct agree_cand *a, const struct agree_cand *b)
{
	return a->family == b->family && !strcmp(a->ifname, b->ifname) &&
	       !memcmp(a->addr, b->addr, 16);
}

/* One entry for (interface, address); false when it cannot be published. */
static bool cand_from_nic(const struct nic *nc, const struct policy_verdict *v,
			  const struct nic_addr *a, struct agree_cand *c)
{
	memset(c, 0, sizeof(*c));
	int max = a->family == AF_INET ? 32 : 128;
	if ((a->family != AF_INET && a->family != AF_INET6) || nic_addr_is_link_local(a) ||
	    !addr_is_unicast(a->family, a->bytes) || a->prefixlen < 1 || a->prefixlen > max)
		return false;
	if (!nc->name[0] || strlen(nc->name) >= IFNAMSIZ || !np_str_ok(nc->name, NP_CS_IFNAME))
		return false;
	strcpy(c->ifname, nc->name);
	const char *cls = nic_class_name(nc->cls);
	snprintf(c->cls, sizeof(c->cls), "%s", cls && np_str_ok(cls, NP_CS_CLS) ? cls : "other");
	c->family = a->family;
	memcpy(c->addr, a->bytes, a->family == AF_INET ? 4 : 16);
	inet_ntop(a->family, c->addr, c->addr_text, sizeof(c->addr_text));
	c->prefixlen = a->prefixlen;
	/* The speed the policy counts for sockets (an IPoIB link rate is not). */
	long mbps = v->socket_mbps;
	c->mbps = mbps < 0 ? -1 : mbps > MBPS_MAX ? MBPS_MAX : mbps;
	c->score = v->score > SCORE_MAX ? SCORE_MAX : v->score < -SCORE_MAX ? -SCORE_MAX : v->score;
	c->mtu = nc->mtu >= 68 && nc->mtu <= 65536 ? nc->mtu : 0;
	for (size_t i = 0; i < nc->n_rdma; i++) {
		const struct nic_rdma_port *p = &nc->rdma[i];
		if (p->active && p->hca[0] && p->port >= 1 && p->port <= 255 &&
		    np_str_ok(p->hca, NP_CS_NAME)) {
			snprintf(c->rdma, sizeof(c->rdma), "%s:%d", p->hca, p->port);
			break;
		}
	}
	return true;
}

static int check_identity(const char *pod, const char *uid, const char *node, np_error *err)
{
	if (!pod || !*pod || strlen(pod) >= AGREE_NAME_MAX || !np_str_ok(pod, NP_CS_NAME))
		return np_error_set(err, NP_EUSAGE, 0, "pod name \"%s\" is not a valid name",
				    pod ? pod : "");
	if (uid && (strlen(uid) >= AGREE_UID_MAX || !np_str_ok(uid, NP_CS_NAME)))
		return np_error_set(err, NP_EUSAGE, 0, "pod uid \"%s\" is not valid", uid);
	if (node && (strlen(node) >= AGREE_NAME_MAX || !np_str_ok(node, NP_CS_NAME)))
		return np_error_set(err, NP_EUSAGE, 0, "node name \"%s\" is not valid", node);
	return 0;
}

int agree_report_from_nics(const char *pod, const char *uid, const char *node,
			   const struct nic_list *nics, const struct policy_ranking *ranking,
			   struct agree_report *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	if (check_identity(pod, uid, node, err) < 0)
		return -1;
	strcpy(out->pod, pod);
	strcpy(out->uid, uid ? uid : "");
	strcpy(out->node, node ? node : "");
	int dropped = 0;
	for (size_t k = 0; k < ranking->n_usable; k++) {
		size_t i = ranking->order[k];
		if (i >= nics->n || i >= ranking->n)
			continue;
		const struct nic *nc = &nics->v[i];
		const struct policy_verdict *v = &ranking->v[i];
		/* The address the policy chose goes first, then the others. */
		for (long j = -1; j < (long)nc->n_addrs; j++) {
			long ai = j < 0 ? v->addr : j;
			if (ai < 0 || ai >= (long)nc->n_addrs || (j >= 0 && j == v->addr))
				continue;
			struct agree_cand c;
			if (!cand_from_nic(nc, v, &nc->addrs[ai], &c))
				continue;
			bool dup = false;
			for (size_t e = 0; e < out->n && !dup; e++)
				dup = cand_same(&out->c[e], &c);
			if (dup)
				continue;
			if (out->n == AGREE_CAND_MAX) {
				dropped++;
				continue;
			}
			out->c[out->n++] = c;
		}
	}
	return dropped;
}

static json_t *cand_to_json(const struct agree_cand *c)
{
	json_t *o = json_object();
	json_object_set_new(o, "if", json_string(c->ifname));
	json_object_set_new(o, "cls", json_string(c->cls));
	json_object_set_new(o, "fam", json_integer(c->family == AF_INET ? 4 : 6));
	json_object_set_new(o, "addr", json_string(c->addr_text));
	json_object_set_new(o, "plen", json_integer(c->prefixlen));
	if (c->has_gw) {
		char gw[AGREE_ADDR_TEXT_MAX];
		inet_ntop(c->family, c->gw, gw, sizeof(gw));
		json_object_set_new(o, "gw", json_string(gw));
	}
	json_object_set_new(o, "mbps", json_integer(c->mbps));
	json_object_set_new(o, "score", json_integer(c->score));
	if (c->rdma[0])
		json_object_set_new(o, "rdma", json_string(c->rdma));
	json_object_set_new(o, "mtu", json_integer(c->mtu));
	if (c->route != AGREE_ROUTE_UNKNOWN)
		json_object_set_new(o, "rt", json_boolean(c->route == AGREE_ROUTE_USED));
	return o;
}

static json_t *gpu_to_json(const struct agree_gpu *g)
{
	json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:s}", "smoke",
			      np_str_ok(g->smoke, NP_CS_CLS) ? g->smoke : "", "nccl",
			      g->nccl > 0 ? g->nccl : 0, "driver", g->driver > 0 ? g->driver : 0, "runtime",
			      g->runtime > 0 ? g->runtime : 0, "model",
			      np_str_ok(g->model, NP_CS_TEXT) ? g->model : "");
	/* Only file delivery matters to the job (the NCCL_CONF_FILE floor). */
	if (o && strcmp(g->delivery, "file") == 0) {
		json_object_set_new(o, "delivery", json_string("file"));
		json_object_set_new(o, "nccl_env", json_string(np_str_ok(g->nccl_env, NP_CS_TEXT) ? g->nccl_env : ""));
	}
	return o;
}

int agree_report_to_json(const struct agree_report *r, char **json, np_error *err)
{
	*json = NULL;
	if (check_identity(r->pod, r->uid, r->node, err) < 0)
		return -1;
	json_t *root = json_object();
	/* Version 1 without the gpu block: older pods still read it. */
	json_object_set_new(root, "v", json_integer(r->gpu.has ? AGREE_REPORT_VERSION : 1));
	if (r->gpu.has)
		json_object_set_new(root, "gpu", gpu_to_json(&r->gpu));
	json_object_set_new(root, "pod", json_string(r->pod));
	json_object_set_new(root, "uid", json_string(r->uid));
	json_object_set_new(root, "node", json_string(r->node));
	if (r->host[0] && np_str_ok(r->host, NP_CS_NAME))
		json_object_set_new(root, "host", json_string(r->host));
	json_t *arr = json_array();
	for (size_t i = 0; i < r->n && i < AGREE_CAND_MAX; i++)
		json_array_append_new(arr, cand_to_json(&r->c[i]));
	json_object_set_new(root, "c", arr);
	int dropped = r->n > AGREE_CAND_MAX ? (int)(r->n - AGREE_CAND_MAX) : 0;
	for (;;) {
		char *s = json_dumps(root, JSON_COMPACT);
		if (!s) {
			json_decref(root);
			return np_error_set(err, NP_EINTERNAL, 0, "cannot serialize the report");
		}
		if (strlen(s) <= AGREE_REPORT_MAX_BYTES) {
			*json = s;
			break;
		}
		free(s);
		size_t n = json_array_size(arr);
		if (n == 0) {
			json_decref(root);
			return np_error_set(err, NP_EINTERNAL, 0, "report over %d bytes",
					    AGREE_REPORT_MAX_BYTES);
		}
		/* The lowest-ranked entry goes first: the best ones must get through. */
		json_array_remove(arr, n - 1);
		dropped++;
	}
	json_decref(root);
	return dropped;
}

/* ---- reading a report ---- */

/* "mlx5_0:1": an HCA name, a colon, a port 1..255 without leading zeros. */
static bool rdma_ok(const char *s)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || colon[1] < '1' || colon[1] > '9' || strlen(colon + 1) > 3)
		return false;
	char hca[AGREE_RDMA_MAX];
	snprintf(hca, sizeof(hca), "%.*s", (int)(colon - s), s);
	if (!np_str_ok(hca, NP_CS_NAME))
		return false;
	long port = 0;
	for (const char *p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		port = port * 10 + (*p - '0');
	}
	return port <= 255;
}

static int parse_cand(const json_t *o, struct agree_cand *c, char *why)
{
	static const char *const keys[] = { "if",   "cls",   "fam",  "addr", "plen", "gw",
					    "mbps", "score", "rdma", "mtu",  "rt",   NULL };
	char text[AGREE_ADDR_TEXT_MAX];
	long fam, v;
	memset(c, 0, sizeof(*c));
	if (!json_is_object(o))
		return snprintf(why, AGREE_WHY_MAX, "not an object"), -1;
	if (np_json_check_keys(o, keys, why) < 0 ||
	    np_json_str(o, "if", true, NP_CS_IFNAME, 1, c->ifname, sizeof(c->ifname), why) < 0 ||
	    np_json_str(o, "cls", true, NP_CS_CLS, 1, c->cls, sizeof(c->cls), why) < 0 ||
	    np_json_int(o, "fam", true, 4, 6, &fam, why) < 0)
		return -1;
	if (fam == 5)
		return snprintf(why, AGREE_WHY_MAX, "\"fam\" is 5, not 4 or 6"), -1;
	if (!strcmp(c->ifname, ".") || !strcmp(c->ifname, ".."))
		return snprintf(why, AGREE_WHY_MAX, "\"if\" is not an interface name"), -1;
	c->family = fam == 4 ? AF_INET : AF_INET6;
	if (np_json_str(o, "addr", true, NP_CS_TEXT, 2, text, sizeof(text), why) < 0)
		return -1;
	if (!addr_from_text(c->family, text, c->addr) ||
	    !addr_is_unicast(c->family, c->addr))
		return snprintf(why, AGREE_WHY_MAX, "\"addr\" \"%s\" is not a unicast IPv%ld address",
				text, fam), -1;
	inet_ntop(c->family, c->addr, c->addr_text, sizeof(c->addr_text));
	if (np_json_int(o, "plen", true, 1, fam == 4 ? 32 : 128, &v, why) < 0)
		return -1;
	c->prefixlen = (int)v;
	int r = np_json_str(o, "gw", false, NP_CS_TEXT, 2, text, sizeof(text), why);
	if (r < 0)
		return -1;
	if (r == 0) {
		if (!addr_from_text(c->family, text, c->gw) ||
		    !addr_is_unicast(c->family, c->gw))
			return snprintf(why, AGREE_WHY_MAX, "\"gw\" \"%s\" is not an IPv%ld address",
					text, fam), -1;
		c->has_gw = true;
		inet_ntop(c->family, c->gw, c->gw_text, sizeof(c->gw_text));
	}
	if (np_json_int(o, "mbps", true, -1, MBPS_MAX, &c->mbps, why) < 0 ||
	    np_json_int(o, "score", true, -SCORE_MAX, SCORE_MAX, &c->score, why) < 0 ||
	    np_json_int(o, "mtu", true, 0, 65536, &v, why) < 0)
		return -1;
	if (v > 0 && v < 68)
		return snprintf(why, AGREE_WHY_MAX, "\"mtu\" is %ld, not 0 or 68..65536", v), -1;
	c->mtu = (int)v;
	r = np_json_str(o, "rdma", false, NP_CS_TEXT, 3, c->rdma, sizeof(c->rdma), why);
	if (r < 0)
		return -1;
	if (r == 0 && !rdma_ok(c->rdma))
		return snprintf(why, AGREE_WHY_MAX, "\"rdma\" is not HCA:PORT"), -1;
	const json_t *rt = json_object_get(o, "rt");
	if (rt && !json_is_boolean(rt))
		return snprintf(why, AGREE_WHY_MAX, "\"rt\" is not a boolean"), -1;
	c->route = !rt ? AGREE_ROUTE_UNKNOWN : json_is_true(rt) ? AGREE_ROUTE_USED : AGREE_ROUTE_UNUSED;
	return 0;
}

#define GPU_VERSION_MAX 10000000 /* 1000.0.0 */

static int parse_gpu(const json_t *o, struct agree_gpu *g, char *why)
{
	static const char *const keys[] = { "smoke", "nccl", "driver", "runtime", "model", "delivery",
					    "nccl_env", NULL };
	long v[3];
	if (!json_is_object(o))
		return snprintf(why, AGREE_WHY_MAX, "\"gpu\" is not an object"), -1;
	if (np_json_check_keys(o, keys, why) < 0 ||
	    np_json_str(o, "smoke", true, NP_CS_CLS, 0, g->smoke, sizeof(g->smoke), why) < 0 ||
	    np_json_int(o, "nccl", true, 0, GPU_VERSION_MAX, &v[0], why) < 0 ||
	    np_json_int(o, "driver", true, 0, GPU_VERSION_MAX, &v[1], why) < 0 ||
	    np_json_int(o, "runtime", true, 0, GPU_VERSION_MAX, &v[2], why) < 0 ||
	    np_json_str(o, "model", true, NP_CS_TEXT, 0, g->model, sizeof(g->model), why) < 0 ||
	    np_json_str(o, "delivery", false, NP_CS_CLS, 0, g->delivery, sizeof(g->delivery), why) < 0 ||
	    np_json_str(o, "nccl_env", false, NP_CS_TEXT, 0, g->nccl_env, sizeof(g->nccl_env), why) < 0)
		return -1;
	if (g->delivery[0] && strcmp(g->delivery, "file") != 0)
		return snprintf(why, AGREE_WHY_MAX, "\"gpu\": \"delivery\" is \"%s\"", g->delivery), -1;
	bool known = false;
	for (int u = SMOKE_AVAILABLE; u <= SMOKE_NO_GPU && !known; u++)
		known = strcmp(g->smoke, smoke_unavailable_name((enum smoke_unavailable)u)) == 0;
	if (!known)
		return snprintf(why, AGREE_WHY_MAX, "\"gpu\": \"smoke\" is \"%s\"", g->smoke), -1;
	g->nccl = (int)v[0];
	g->driver = (int)v[1];
	g->runtime = (int)v[2];
	g->has = true;
	return 0;
}

static int bad_report(np_error *err, const char *pod, const char *why)
{
	if (pod && *pod)
		return np_error_set(err, NP_EK8S, 0, "bad report from pod %s: %s", pod, why);
	return np_error_set(err, NP_EK8S, 0, "bad report: %s", why);
}

int agree_report_parse(const char *json, size_t len, struct agree_report *out, np_error *err)
{
	static const char *const keys[] = { "v", "pod", "uid", "node", "host", "c", "gpu", NULL };
	char why[AGREE_WHY_MAX] = "";
	long version;
	memset(out, 0, sizeof(*out));
	if (!json)
		return bad_report(err, NULL, "empty");
	if (len > AGREE_REPORT_MAX_BYTES) {
		snprintf(why, sizeof(why), "%zu bytes, more than %d", len, AGREE_REPORT_MAX_BYTES);
		return bad_report(err, NULL, why);
	}
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		snprintf(why, sizeof(why), "not JSON: %.120s (line %d, column %d)", je.text, je.line,
			 je.column);
		if (!np_str_ok(why, NP_CS_TEXT))
			snprintf(why, sizeof(why), "not JSON (line %d, column %d)", je.line, je.column);
		return bad_report(err, NULL, why);
	}
	int rc = -1;
	if (!json_is_object(root)) {
		snprintf(why, sizeof(why), "not a JSON object");
		goto out;
	}
	/* The name first, so that every later message can say whose report it is. */
	if (np_json_str(root, "pod", true, NP_CS_NAME, 1, out->pod, sizeof(out->pod), why) < 0)
		goto out;
	if (np_json_int(root, "v", true, 1, 1LL << 40, &version, why) < 0)
		goto out;
	if (version > AGREE_REPORT_VERSION) {
		rc = np_error_set(err, NP_EK8S, 0,
				  "report version %ld from pod %s is newer than this nicpick (%d)",
				  version, out->pod, AGREE_REPORT_VERSION);
		json_decref(root);
		memset(out, 0, sizeof(*out));
		return rc;
	}
	if (np_json_check_keys(root, keys, why) < 0 ||
	    np_json_str(root, "uid", true, NP_CS_NAME, 0, out->uid, sizeof(out->uid), why) < 0 ||
	    np_json_str(root, "node", true, NP_CS_NAME, 0, out->node, sizeof(out->node), why) < 0 ||
	    np_json_str(root, "host", false, NP_CS_NAME, 1, out->host, sizeof(out->host), why) < 0)
		goto out;
	const json_t *gpu = json_object_get(root, "gpu");
	if (gpu && version < 2) {
		snprintf(why, sizeof(why), "\"gpu\" in a version %ld report", version);
		goto out;
	}
	if (gpu && parse_gpu(gpu, &out->gpu, why) < 0)
		goto out;
	const json_t *arr = json_object_get(root, "c");
	if (!json_is_array(arr)) {
		snprintf(why, sizeof(why), "\"c\" is %s", arr ? "not an array" : "missing");
		goto out;
	}
	if (json_array_size(arr) > AGREE_CAND_MAX) {
		snprintf(why, sizeof(why), "%zu candidates, more than %d", json_array_size(arr),
			 AGREE_CAND_MAX);
		goto out;
	}
	for (size_t i = 0; i < json_array_size(arr); i++) {
		char cwhy[AGREE_WHY_MAX];
		if (parse_cand(json_array_get(arr, i), &out->c[i], cwhy) < 0) {
			snprintf(why, sizeof(why), "candidate %zu: %.200s", i, cwhy);
			goto out;
		}
		for (size_t j = 0; j < i; j++) {
			if (cand_same(&out->c[j], &out->c[i])) {
				snprintf(why, sizeof(why), "candidate %zu duplicates %zu (%s %s)", i, j,
					 out->c[i].ifname, out->c[i].addr_text);
				goto out;
			}
		}
		out->n = i + 1;
	}
	rc = 0;
out:
	json_decref(root);
	if (rc < 0) {
		char pod[AGREE_NAME_MAX];
		strcpy(pod, out->pod);
		memset(out, 0, sizeof(*out));
		return bad_report(err, pod, why);
	}
	return 0;
}
