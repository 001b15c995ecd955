/* The exchange's messages: one writer and one strict reader each. */
#include "exchange/message.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/jsonread.h"
#include "util/text.h"

#define EPOCH_MAX 1000000
#define MBPS_MAX 100000000LL

static const char *const state_names[] = {
	[EXCHANGE_PROBE] = "probe",
	[EXCHANGE_MEASURE] = "measure",
	[EXCHANGE_FINAL] = "final",
	[EXCHANGE_FAILED] = "failed",
};

static const char *const phase_names[] = {
	[EXCHANGE_GATHERING] = "gather",
	[EXCHANGE_PROBING] = "probe",
};

const char *exchange_state_name(enum exchange_state s)
{
	return (size_t)s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s] : "?";
}

void exchange_progress_text(const struct exchange_progress *p, char *buf, size_t len)
{
	FILE *f = fmemopen(buf, len, "w");
	if (!f) {
		snprintf(buf, len, "?");
		return;
	}
	if (p->phase == EXCHANGE_GATHERING)
		fprintf(f, "%d/%d pods reported", p->done, p->expect);
	else
		fprintf(f, "round %d: %d/%d pods probed", p->round, p->done, p->created);
	for (size_t i = 0; i < p->n_missing; i++)
		fprintf(f, "%s%s", i ? ", " : "; missing: ", p->missing[i]);
	if (p->missing_total > (int)p->n_missing)
		fprintf(f, " (+%d more)", p->missing_total - (int)p->n_missing);
	if (p->created < p->expect)
		fprintf(f, "; pods not created yet: %d of %d", p->expect - p->created, p->expect);
	if (p->refused[0])
		fprintf(f, "; refused: %s", p->refused);
	if (p->probe[0])
		fprintf(f, "; probe: %s", p->probe);
	fclose(f);
	buf[len - 1] = '\0';
}

/* ---- writing ---- */

static int dump(json_t *o, const char *what, char **json, np_error *err)
{
	*json = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (!*json)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot write the %s: out of memory", what);
	if (strlen(*json) > EXCHANGE_MSG_MAX_BYTES) {
		free(*json);
		*json = NULL;
		return np_error_set(err, NP_EINTERNAL, 0, "the %s is over %d bytes", what,
				    EXCHANGE_MSG_MAX_BYTES);
	}
	return 0;
}

static json_t *text(const char *s)
{
	char buf[EXCHANGE_REASON_MAX];
	np_text_clean(buf, sizeof(buf), s, NP_TEXT_SPACE);
	return json_string(buf);
}

/* A failed state carries its exit status and reason (get_failure). */
static void add_failure(json_t *o, enum exchange_state st, int status, const char *reason)
{
	if (!o || st != EXCHANGE_FAILED)
		return;
	json_object_set_new(o, "status", json_integer(status));
	json_object_set_new(o, "reason", text(reason));
}

int exchange_assignment_to_json(const struct exchange_assignment *a, char **json, np_error *err)
{
	json_t *parts = json_array();
	for (size_t i = 0; parts && i < a->n_parts && i < EXCHANGE_PARTS_MAX; i++) {
		const struct exchange_part *p = &a->parts[i];
		json_array_append_new(
			parts, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:I}", "net", p->net,
					 "if", p->ifname, "addr", p->addr, "next_pod", p->next_pod,
					 "next_addr", p->next_addr, "prev_addr", p->prev_addr, "rank", p->rank,
					 "world", p->world, "root", p->root, "min_mbps",
					 (json_int_t)p->min_mbps));
	}
	json_t *o = json_pack("{s:i, s:s, s:s, s:i, s:s, s:i, s:o}", "v", EXCHANGE_MSG_VERSION, "leader",
			      a->leader, "leader_pod", a->leader_pod, "epoch", a->epoch, "state",
			      exchange_state_name(a->state), "n", a->n_pods, "parts", parts);
	add_failure(o, a->state, a->status, a->reason);
	if (o && a->state != EXCHANGE_FAILED && a->versions[0])
		json_object_set_new(o, "versions", text(a->versions));
	if (o && a->state != EXCHANGE_FAILED && a->smoke_skip[0])
		json_object_set_new(o, "smoke_skip", text(a->smoke_skip));
	if (o && a->state != EXCHANGE_FAILED && a->warning[0])
		json_object_set_new(o, "warning", text(a->warning));
	if (o && a->state != EXCHANGE_FAILED)
		json_object_set_new(o, "token", json_string(a->token));
	if (o && a->state != EXCHANGE_FAILED && a->floor[0])
		json_object_set_new(o, "floor", text(a->floor));
	return dump(o, "assignment", json, err);
}

int exchange_probe_to_json(const struct exchange_probe *p, char **json, np_error *err)
{
	json_t *trials = json_array();
	for (size_t i = 0; trials && i < p->n && i < EXCHANGE_PARTS_MAX; i++) {
		json_t *t = json_pack("{s:b, s:f, s:o}", "ok", p->t[i].ok, "mbps", p->t[i].mbps, "detail",
				      text(p->t[i].detail));
		if (t && !p->t[i].ok && p->t[i].route_if[0])
			json_object_set_new(t, "route_if", json_string(p->t[i].route_if));
		json_array_append_new(trials, t);
	}
	json_t *o = json_pack("{s:i, s:s, s:i, s:o}", "v", EXCHANGE_MSG_VERSION, "leader", p->leader,
			      "epoch", p->epoch, "trials", trials);
	return dump(o, "probe result", json, err);
}

int exchange_round_to_json(const struct exchange_round *r, char **json, np_error *err)
{
	json_t *o = json_pack("{s:i, s:s, s:i, s:s}", "v", EXCHANGE_MSG_VERSION, "leader", r->leader,
			      "epoch", r->epoch, "state", exchange_state_name(r->state));
	add_failure(o, r->state, r->status, r->reason);
	return dump(o, "round", json, err);
}

int exchange_progress_to_json(const struct exchange_progress *p, char **json, np_error *err)
{
	json_t *missing = json_array();
	for (size_t i = 0; missing && i < p->n_missing && i < EXCHANGE_MISSING_SHOWN; i++)
		json_array_append_new(missing, json_string(p->missing[i]));
	json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:i, s:o, s:o}", "v",
			      EXCHANGE_MSG_VERSION, "leader", p->leader, "leader_pod", p->leader_pod,
			      "phase", phase_names[p->phase == EXCHANGE_PROBING], "round", p->round,
			      "expect", p->expect, "created", p->created, "done", p->done, "missing",
			      missing, "missing_total", p->missing_total, "probe", text(p->probe),
			      "refused", text(p->refused));
	return dump(o, "progress", json, err);
}

int exchange_claim_to_json(const struct exchange_claim *c, char **json, np_error *err)
{
	char why[EXCHANGE_DETAIL_MAX];
	np_text_clean(why, sizeof(why), c->why, NP_TEXT_SPACE);
	json_t *o = json_pack("{s:i, s:s, s:s, s:s}", "v", EXCHANGE_MSG_VERSION, "leader", c->leader,
			      "pod", c->pod, "why", why);
	return dump(o, "gatherer claim", json, err);
}

/* ---- reading ---- */

/* Parse, check size, object-ness, keys and version; why[NP_JSON_WHY_MAX]. */
static json_t *load(const char *json, size_t len, const char *const *keys, char *why)
{
	if (len > EXCHANGE_MSG_MAX_BYTES) {
		snprintf(why, NP_JSON_WHY_MAX, "%zu bytes, more than %d", len, EXCHANGE_MSG_MAX_BYTES);
		return NULL;
	}
	json_error_t je;
	json_t *root = json ? json_loadb(json, len, JSON_REJECT_DUPLICATES, &je) : NULL;
	if (!root) {
		snprintf(why, NP_JSON_WHY_MAX, "not JSON: %s", json ? je.text : "empty");
		return NULL;
	}
	long version;
	if (!json_is_object(root)) {
		snprintf(why, NP_JSON_WHY_MAX, "not a JSON object");
	} else if (np_json_check_keys(root, keys, why) == 0 &&
		   np_json_int(root, "v", true, 1, 1LL << 40, &version, why) == 0) {
		if (version == EXCHANGE_MSG_VERSION)
			return root;
		snprintf(why, NP_JSON_WHY_MAX, "version %ld, this nicpick reads %d (all pods of a job "
			 "must run the same nicpick)", version, EXCHANGE_MSG_VERSION);
	}
	json_decref(root);
	return NULL;
}

static int bad(np_error *err, const char *what, const char *why)
{
	return np_error_set(err, NP_EK8S, 0, "bad %s: %s", what, why);
}

static int get_state(const json_t *o, const char *key, bool round, enum exchange_state *out, char *why)
{
	char s[16];
	if (np_json_str(o, key, true, NP_CS_CLS, 1, s, sizeof(s), why) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(state_names) / sizeof(state_names[0]); i++)
		if (strcmp(s, state_names[i]) == 0 && (round || i != EXCHANGE_FINAL)) {
			*out = (enum exchange_state)i;
			return 0;
		}
	snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is \"%s\"", key, s);
	return -1;
}

static int get_i(const json_t *o, const char *key, long long min, long long max, int *dst, char *why)
{
	long v;
	if (np_json_int(o, key, true, min, max, &v, why) < 0)
		return -1;
	*dst = (int)v;
	return 0;
}

/* An address of either family; "" only when empty_ok. */
static int get_addr(const json_t *o, const char *key, bool empty_ok, char *dst, char *why)
{
	if (np_json_str(o, key, true, NP_CS_TEXT, empty_ok ? 0 : 1, dst, AGREE_ADDR_TEXT_MAX,
			  why) < 0)
		return -1;
	unsigned char b[16];
	if (!dst[0] || inet_pton(strchr(dst, ':') ? AF_INET6 : AF_INET, dst, b) == 1)
		return 0;
	snprintf(why, NP_JSON_WHY_MAX, "\"%s\" is not an address", key);
	return -1;
}

/* A failed state carries its exit status and reason; others carry neither. */
static int get_failure(const json_t *o, enum exchange_state st, int *status, char *reason, char *why)
{
	bool has = json_object_get(o, "status") || json_object_get(o, "reason");
	if (st != EXCHANGE_FAILED) {
		if (!has)
			return 0;
		snprintf(why, NP_JSON_WHY_MAX, "\"status\" or \"reason\" without a failure");
		return -1;
	}
	return get_i(o, "status", NP_EINTERNAL, NP_ESMOKE, status, why) < 0 ||
			       np_json_str(o, "reason", true, NP_CS_UTF8, 1, reason,
					     EXCHANGE_REASON_MAX, why) < 0
		       ? -1
		       : 0;
}

/* "10.9.0.0/24", or "routed" for a routed rail. */
static int get_net(const json_t *o, char *dst, char *why)
{
	struct agree_network n;
	np_error e = { 0 };
	if (np_json_str(o, "net", true, NP_CS_TEXT, 1, dst, AGREE_NET_TEXT_MAX, why) < 0)
		return -1;
	if (strcmp(dst, "routed") == 0 || agree_network_parse(dst, &n, &e) == 0)
		return 0;
	snprintf(why, NP_JSON_WHY_MAX, "\"net\" is not a network: %.200s", e.msg);
	return -1;
}

static int read_part(const json_t *o, struct exchange_part *p, char *why)
{
	static const char *const keys[] = { "net",   "if",   "addr",	 "next_pod", "next_addr",
					    "prev_addr", "rank", "world", "root", "min_mbps", NULL };
	long mbps;
	if (!json_is_object(o)) {
		snprintf(why, NP_JSON_WHY_MAX, "a part is not an object");
		return -1;
	}
	if (np_json_check_keys(o, keys, why) < 0 || get_net(o, p->net, why) < 0 ||
	    np_json_str(o, "if", true, NP_CS_IFNAME, 1, p->ifname, sizeof(p->ifname), why) < 0 ||
	    get_addr(o, "addr", false, p->addr, why) < 0 ||
	    np_json_str(o, "next_pod", true, NP_CS_NAME, 0, p->next_pod, sizeof(p->next_pod), why) < 0 ||
	    get_addr(o, "next_addr", true, p->next_addr, why) < 0 ||
	    get_addr(o, "prev_addr", true, p->prev_addr, why) < 0 ||
	    get_i(o, "world", 1, AGREE_PODS_MAX, &p->world, why) < 0 ||
	    get_i(o, "rank", 0, p->world - 1, &p->rank, why) < 0 || get_addr(o, "root", false, p->root, why) < 0 ||
	    np_json_int(o, "min_mbps", true, -1, MBPS_MAX, &mbps, why) < 0)
		return -1;
	p->min_mbps = mbps;
	if (!p->next_pod[0] != !p->next_addr[0] || !p->next_addr[0] != !p->prev_addr[0]) {
		snprintf(why, NP_JSON_WHY_MAX, "a ring neighbour without its address, or the reverse");
		return -1;
	}
	return 0;
}

int exchange_assignment_parse(const char *json, size_t len, struct exchange_assignment *out,
			      np_error *err)
{
	static const char *const keys[] = { "v",      "leader", "leader_pod", "epoch", "state",
					    "status", "reason", "n",          "parts", "versions",
					    "smoke_skip", "token", "warning", "floor", NULL };
	char why[NP_JSON_WHY_MAX] = "";
	memset(out, 0, sizeof(*out));
	json_t *o = load(json, len, keys, why);
	if (!o)
		return bad(err, "assignment", why);
	int ret = -1;
	const json_t *parts = json_object_get(o, "parts");
	if (np_json_str(o, "leader", true, NP_CS_NAME, 1, out->leader, sizeof(out->leader), why) < 0 ||
	    np_json_str(o, "leader_pod", true, NP_CS_NAME, 1, out->leader_pod, sizeof(out->leader_pod),
			  why) < 0 ||
	    get_i(o, "epoch", 1, EPOCH_MAX, &out->epoch, why) < 0 ||
	    get_state(o, "state", false, &out->state, why) < 0 ||
	    get_failure(o, out->state, &out->status, out->reason, why) < 0 ||
	    get_i(o, "n", 0, AGREE_PODS_MAX, &out->n_pods, why) < 0 ||
	    np_json_str(o, "versions", false, NP_CS_UTF8, 1, out->versions, sizeof(out->versions), why) < 0 ||
	    np_json_str(o, "smoke_skip", false, NP_CS_UTF8, 1, out->smoke_skip, sizeof(out->smoke_skip),
			  why) < 0 ||
	    np_json_str(o, "warning", false, NP_CS_UTF8, 1, out->warning, sizeof(out->warning), why) < 0 ||
	    np_json_str(o, "token", false, NP_CS_NAME, 1, out->token, sizeof(out->token), why) < 0)
		goto out;
	if (np_json_str(o, "floor", false, NP_CS_UTF8, 1, out->floor, sizeof(out->floor), why) < 0)
		goto out;
	if (out->state == EXCHANGE_FAILED && (out->versions[0] || out->smoke_skip[0] || out->floor[0])) {
		snprintf(why, sizeof(why), "\"versions\" or \"smoke_skip\" in a failed assignment");
		goto out;
	}
	if (out->state == EXCHANGE_FAILED && (out->warning[0] || out->token[0])) {
		snprintf(why, sizeof(why), "\"warning\" or \"token\" in a failed assignment");
		goto out;
	}
	if (out->state != EXCHANGE_FAILED && !probe_token_ok(out->token)) {
		snprintf(why, sizeof(why), "\"token\" is %s, not 32 lowercase hex digits",
			 out->token[0] ? "malformed" : "missing");
		goto out;
	}
	size_t want_min = out->state == EXCHANGE_FAILED ? 0 : 1;
	/* A probe round has one part per rail: an assignment of one rail is
	 * what every earlier nicpick wrote and read. */
	size_t want_max = out->state == EXCHANGE_FAILED ? 0 : EXCHANGE_PARTS_MAX;
	if (!json_is_array(parts) || json_array_size(parts) < want_min || json_array_size(parts) > want_max) {
		snprintf(why, sizeof(why), "\"parts\" is not an array of %zu..%zu parts for state %s",
			 want_min, want_max, exchange_state_name(out->state));
		goto out;
	}
	for (size_t i = 0; i < json_array_size(parts); i++) {
		if (read_part(json_array_get(parts, i), &out->parts[i], why) < 0)
			goto out;
		if (out->parts[i].world != out->n_pods) {
			snprintf(why, sizeof(why), "a part of %d pods in a round of %d", out->parts[i].world,
				 out->n_pods);
			goto out;
		}
		for (size_t k = 0; k < i && out->state == EXCHANGE_PROBE; k++)
			if (!strcmp(out->parts[k].net, out->parts[i].net) ||
			    !strcmp(out->parts[k].ifname, out->parts[i].ifname)) {
				snprintf(why, sizeof(why), "two rails on one network or one interface");
				goto out;
			}
		out->n_parts++;
	}
	ret = 0;
out:
	json_decref(o);
	return ret < 0 ? bad(err, "assignment", why) : 0;
}

int exchange_probe_parse(const char *json, size_t len, struct exchange_probe *out, np_error *err)
{
	static const char *const keys[] = { "v", "leader", "epoch", "trials", NULL };
	static const char *const tkeys[] = { "ok", "mbps", "detail", "route_if", NULL };
	char why[NP_JSON_WHY_MAX] = "";
	memset(out, 0, sizeof(*out));
	json_t *o = load(json, len, keys, why);
	if (!o)
		return bad(err, "probe result", why);
	int ret = -1;
	const json_t *trials = json_object_get(o, "trials");
	if (np_json_str(o, "leader", true, NP_CS_NAME, 1, out->leader, sizeof(out->leader), why) < 0 ||
	    get_i(o, "epoch", 1, EPOCH_MAX, &out->epoch, why) < 0)
		goto out;
	if (!json_is_array(trials) || json_array_size(trials) < 1 ||
	    json_array_size(trials) > EXCHANGE_PARTS_MAX) {
		snprintf(why, sizeof(why), "\"trials\" is not an array of 1..%d", EXCHANGE_PARTS_MAX);
		goto out;
	}
	for (size_t i = 0; i < json_array_size(trials); i++) {
		const json_t *t = json_array_get(trials, i);
		struct exchange_trial *x = &out->t[i];
		const json_t *mbps = json_object_get(t, "mbps");
		if (!json_is_object(t)) {
			snprintf(why, sizeof(why), "a trial is not an object");
			goto out;
		}
		if (np_json_check_keys(t, tkeys, why) < 0 || np_json_bool(t, "ok", &x->ok, why) < 0 ||
		    np_json_str(t, "detail", true, NP_CS_UTF8, 0, x->detail, sizeof(x->detail), why) < 0 ||
		    np_json_str(t, "route_if", false, NP_CS_IFNAME, 1, x->route_if, sizeof(x->route_if),
				  why) < 0)
			goto out;
		if (x->ok && x->route_if[0]) {
			snprintf(why, sizeof(why), "\"route_if\" in a trial that passed");
			goto out;
		}
		if (!json_is_number(mbps) || json_number_value(mbps) < 0 ||
		    json_number_value(mbps) > (double)MBPS_MAX) {
			snprintf(why, sizeof(why), "\"mbps\" is not a number 0..%lld", MBPS_MAX);
			goto out;
		}
		x->mbps = json_number_value(mbps);
		out->n++;
	}
	ret = 0;
out:
	json_decref(o);
	return ret < 0 ? bad(err, "probe result", why) : 0;
}

int exchange_round_parse(const char *json, size_t len, struct exchange_round *out, np_error *err)
{
	static const char *const keys[] = { "v", "leader", "epoch", "state", "status", "reason", NULL };
	char why[NP_JSON_WHY_MAX] = "";
	memset(out, 0, sizeof(*out));
	json_t *o = load(json, len, keys, why);
	if (!o)
		return bad(err, "round", why);
	int ret = np_json_str(o, "leader", true, NP_CS_NAME, 1, out->leader, sizeof(out->leader),
				why) < 0 ||
				  get_i(o, "epoch", 0, EPOCH_MAX, &out->epoch, why) < 0 ||
				  get_state(o, "state", true, &out->state, why) < 0 ||
				  get_failure(o, out->state, &out->status, out->reason, why) < 0
			  ? -1
			  : 0;
	json_decref(o);
	return ret < 0 ? bad(err, "round", why) : 0;
}

int exchange_claim_parse(const char *json, size_t len, struct exchange_claim *out, np_error *err)
{
	static const char *const keys[] = { "v", "leader", "pod", "why", NULL };
	char why[NP_JSON_WHY_MAX] = "";
	memset(out, 0, sizeof(*out));
	json_t *o = load(json, len, keys, why);
	if (!o)
		return bad(err, "gatherer claim", why);
	int ret = np_json_str(o, "leader", true, NP_CS_NAME, 1, out->leader, sizeof(out->leader), why) < 0 ||
				  np_json_str(o, "pod", true, NP_CS_NAME, 1, out->pod, sizeof(out->pod), why) < 0 ||
				  np_json_str(o, "why", true, NP_CS_TEXT, 0, out->why, sizeof(out->why), why) < 0
			  ? -1
			  : 0;
	json_decref(o);
	return ret < 0 ? bad(err, "gatherer claim", why) : 0;
}

int exchange_progress_parse(const char *json, size_t len, struct exchange_progress *out,
			    np_error *err)
{
	static const char *const keys[] = { "v",	    "leader",  "leader_pod", "phase",
					    "round",	    "expect",  "created",    "done",
					    "missing",	    "missing_total", "probe", "refused", NULL };
	char why[NP_JSON_WHY_MAX] = "", phase[16];
	memset(out, 0, sizeof(*out));
	json_t *o = load(json, len, keys, why);
	if (!o)
		return bad(err, "progress", why);
	int ret = -1;
	const json_t *missing = json_object_get(o, "missing");
	if (np_json_str(o, "leader", true, NP_CS_NAME, 1, out->leader, sizeof(out->leader), why) < 0 ||
	    np_json_str(o, "leader_pod", true, NP_CS_NAME, 1, out->leader_pod, sizeof(out->leader_pod),
			  why) < 0 ||
	    np_json_str(o, "phase", true, NP_CS_CLS, 1, phase, sizeof(phase), why) < 0 ||
	    get_i(o, "round", 0, EPOCH_MAX, &out->round, why) < 0 ||
	    get_i(o, "expect", 1, AGREE_PODS_MAX, &out->expect, why) < 0 ||
	    get_i(o, "created", 0, AGREE_PODS_MAX, &out->created, why) < 0 ||
	    get_i(o, "done", 0, AGREE_PODS_MAX, &out->done, why) < 0 ||
	    get_i(o, "missing_total", 0, AGREE_PODS_MAX, &out->missing_total, why) < 0 ||
	    np_json_str(o, "probe", true, NP_CS_UTF8, 0, out->probe, sizeof(out->probe), why) < 0 ||
	    np_json_str(o, "refused", true, NP_CS_UTF8, 0, out->refused, sizeof(out->refused), why) < 0)
		goto out;
	if (strcmp(phase, phase_names[EXCHANGE_GATHERING]) == 0) {
		out->phase = EXCHANGE_GATHERING;
	} else if (strcmp(phase, phase_names[EXCHANGE_PROBING]) == 0) {
		out->phase = EXCHANGE_PROBING;
	} else {
		snprintf(why, sizeof(why), "\"phase\" is \"%s\"", phase);
		goto out;
	}
	if (!json_is_array(missing) || json_array_size(missing) > EXCHANGE_MISSING_SHOWN ||
	    json_array_size(missing) > (size_t)out->missing_total) {
		snprintf(why, sizeof(why), "\"missing\" is not an array of at most %d names and "
			 "\"missing_total\"", EXCHANGE_MISSING_SHOWN);
		goto out;
	}
	for (size_t i = 0; i < json_array_size(missing); i++) {
		const json_t *m = json_array_get(missing, i);
		const char *s = np_json_cstr(m);
		if (!s || json_string_length(m) == 0 || json_string_length(m) >= AGREE_NAME_MAX ||
		    strlen(s) != json_string_length(m) || !np_str_ok(s, NP_CS_NAME)) {
			snprintf(why, sizeof(why), "\"missing\" holds a value that is not a pod name");
			goto out;
		}
		memcpy(out->missing[i], s, json_string_length(m) + 1);
		out->n_missing++;
	}
	ret = 0;
out:
	json_decref(o);
	return ret < 0 ? bad(err, "progress", why) : 0;
}
