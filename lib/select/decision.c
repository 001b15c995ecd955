/* decision.json: the one writer, from the structs of the whole flow, and
 * the one strict reader beside it. */
#include "select/decision.h"
#include "select/select.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/text.h"

/* ---- the interfaces and their verdicts ---- */

void select_decision_verdict_json(const struct policy_verdict *v, const struct nic *n, json_t *obj)
{
	json_t *reasons = json_array();
	for (size_t i = 0; i < v->n_reasons; i++)
		json_array_append_new(reasons, json_string(v->reasons[i]));
	json_object_set_new(obj, "usable", json_boolean(v->usable));
	json_object_set_new(obj, "score", json_integer(v->score));
	json_object_set_new(obj, "reasons", reasons);
	json_object_set_new(obj, "address",
			    n && v->addr >= 0 && (size_t)v->addr < n->n_addrs
				    ? json_string(n->addrs[v->addr].text)
				    : json_null());
}

json_t *select_decision_candidates(const struct nic_list *l, const struct policy_ranking *rk)
{
	json_t *arr = nic_list_to_json(l);
	for (size_t i = 0; arr && rk && i < l->n && i < rk->n; i++)
		select_decision_verdict_json(&rk->v[i], &l->v[i], json_array_get(arr, i));
	return arr;
}


struct each_ctx {
	const struct nic_list *l;
	const struct policy_ranking *rk;
	int (*fn)(json_t *obj, void *ud);
	void *ud;
};

static int each_one(size_t i, json_t *obj, void *ud)
{
	struct each_ctx *c = ud;
	if (c->rk && i < c->rk->n)
		select_decision_verdict_json(&c->rk->v[i], &c->l->v[i], obj);
	return c->fn(obj, c->ud);
}

int select_discover_each(const struct nic_list *l, const struct policy_ranking *rk,
			 int (*fn)(json_t *obj, void *ud), void *ud)
{
	struct each_ctx c = { .l = l, .rk = rk, .fn = fn, .ud = ud };
	return nic_list_each_json(l, each_one, &c);
}

/* ---- the policy, the agreement, the smoke step, the warnings ---- */

json_t *select_decision_policy_json(const struct policy *p)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "include", p->include.set ? json_string(p->include.text) : json_null());
	json_object_set_new(o, "exclude", p->exclude.set ? json_string(p->exclude.text) : json_null());
	if (p->has_cidr) {
		char buf[NP_PREFIX_TEXT_MAX];
		np_prefix_format(&p->cidr, buf, sizeof(buf));
		json_object_set_new(o, "cidr", json_string(buf));
	} else {
		json_object_set_new(o, "cidr", json_null());
	}
	json_object_set_new(o, "family",
			    p->family == AF_INET    ? json_string("inet")
			    : p->family == AF_INET6 ? json_string("inet6")
						    : json_null());
	json_object_set_new(o, "min_speed_mbps",
			    p->min_speed > 0 ? json_integer(p->min_speed) : json_null());
	return o;
}

/* ---- "agreement"."decision" ----
 *
 * The decision as decision.json shows it ("agreement"."decision"):
 *
 *   {"v":1,"ok":true,"routed":false,"pods":8,
 *    "rails":[{"net":"10.9.0.0/24","fam":4,"mbps":100000,"score":50,
 *              "assign":[{"pod":"job-w-0","if":"eth1","addr":"10.9.0.1","plen":24},...]}],
 *    "nets":[{"net":"10.9.0.0/24","pods":8,"mbps":100000,"score":50,"ok":true,
 *             "why":"chosen: ..."}],"nets_total":3,
 *    "table":[{"pod":"job-w-3","cands":"...","why":"..."}],"table_total":1,
 *    "excl":["10.8.0.0/24"],"error":"..."}
 *
 * "assign" is sorted by pod name; "routed" rails have "net":"routed";
 * "error" is present when "ok" is false.  Only the gatherer has it: pods
 * learn their part from their assignment (lib/exchange/message.h). */
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

json_t *select_decision_agree_json(const struct agree_decision *d)
{
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
	return root;
}

static json_t *agreement_json(const struct exchange_result *x)
{
	json_t *a = json_pack("{s:b, s:s, s:I, s:i, s:i, s:i, s:s, s:I, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}}",
			      "gatherer", x->leader, "network", x->network, "pods", (json_int_t)x->n_pods,
			      "round", x->epoch, "rank", x->rank, "world", x->world, "root", x->root_addr,
			      "min_mbps", (json_int_t)x->min_mbps, "probed_pod", x->next_pod,
			      "probed_address", x->next_addr, "probe", x->probe_detail, "api", "requests",
			      (json_int_t)x->stats.requests, "retries", (json_int_t)x->stats.retries,
			      "bytes_sent", (json_int_t)x->stats.bytes_sent, "bytes_received",
			      (json_int_t)x->stats.bytes_received);
	/* Every rail, the first being the one above. */
	json_t *rails = json_array();
	for (size_t i = 0; rails && i < x->n_rails && i < EXCHANGE_RAILS_MAX; i++) {
		const struct exchange_rail *r = &x->rails[i];
		json_array_append_new(rails, json_pack("{s:s, s:s, s:s, s:s, s:s}", "network", r->network,
						       "interface", r->ifname, "address", r->addr,
						       "probed_pod", r->next_pod, "probed_address",
						       r->next_addr));
	}
	if (a)
		json_object_set_new(a, "rails", rails);
	else
		json_decref(rails);
	/* Job-wide: pods whose NCCL, CUDA or GPU differ ("" none). */
	if (a)
		json_object_set_new(a, "versions_warning", json_string(x->versions));
	if (a && x->has_decision)
		json_object_set_new(a, "decision", select_decision_agree_json(&x->decision));
	return a;
}

static json_t *sizes_json(const struct smoke_result *r)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < r->n_sizes; i++) {
		const struct smoke_size *s = &r->sizes[i];
		json_array_append_new(a, json_pack("{s:I, s:i, s:f, s:f, s:f, s:I}", "bytes",
						   (json_int_t)s->bytes, "iterations", s->iters,
						   "time_us", s->avg_us, "algbw_gbps", s->algbw_gbps,
						   "busbw_gbps", s->busbw_gbps, "wrong",
						   (json_int_t)s->wrong));
	}
	return a;
}

/* Text from NCCL's log, and verdicts that quote it: names keep their bytes
 * for the check (Linux allows any byte above 0x7f), but JSON holds only
 * UTF-8, so text that is not is written with '?' for each byte outside
 * printable ASCII. */
static json_t *log_text(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	char buf[NP_ERR_MSG_MAX];
	np_text_clean(buf, sizeof(buf), s, NP_TEXT_ASCII);
	return json_string(buf);
}

static json_t *log_if_json(const struct smoke_log_if *i)
{
	return json_pack("{s:o, s:o}", "interface", log_text(i->name), "address", log_text(i->addr));
}

static json_t *log_json(const struct smoke_log *l)
{
	json_t *sock = json_array(), *ib = json_array(), *warn = json_array();
	for (size_t i = 0; sock && i < l->n_socket; i++)
		json_array_append_new(sock, log_if_json(&l->socket[i]));
	for (size_t i = 0; ib && i < l->n_ib; i++)
		json_array_append_new(ib, log_text(l->ib[i].name));
	for (size_t i = 0; warn && i < l->n_warn; i++)
		json_array_append_new(warn, log_text(l->warn[i]));
	json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:o}", "nccl_version",
			      log_text(l->version), "network", log_text(l->network), "net_socket", sock,
			      "net_ib", ib, "channels_via", log_text(l->channel_net), "channels",
			      (json_int_t)l->n_channels, "channels_local", (json_int_t)l->n_local,
			      "warnings", warn);
	if (o && l->has_bootstrap)
		json_object_set_new(o, "bootstrap", log_if_json(&l->bootstrap));
	if (o && l->has_boot_dev)
		json_object_set_new(o, "bootstrap_net_device", log_text(l->boot_dev.name));
	if (o && l->has_oob)
		json_object_set_new(o, "ib_oob", log_if_json(&l->oob));
	if (o && l->ib_absent[0])
		json_object_set_new(o, "ib_absent", log_text(l->ib_absent));
	return o;
}

/* Every ring link each way, and the nodes they name. */
static json_t *links_json(const struct smoke_report *s)
{
	const struct smoke_result *r = &s->result;
	json_t *links = json_array(), *named = json_array();
	for (size_t i = 0; links && i < r->n_links; i++)
		json_array_append_new(links, json_pack("{s:I, s:I, s:f, s:f, s:b, s:b}", "from", (json_int_t)i,
						       "to", (json_int_t)((i + 1) % r->n_links), "gbps",
						       r->links[i].fwd_gbps, "back_gbps",
						       r->links[i].rev_gbps, "slow", s->links.slow[i],
						       "rechecked", r->links[i].rechecked));
	for (size_t i = 0; named && i < s->links.n_named; i++) {
		int rk = s->links.named[i];
		json_array_append_new(named, json_pack("{s:i, s:s, s:s}", "rank", rk, "label",
						       (size_t)rk < r->n_labels ? r->labels[rk] : "", "why",
						       s->links.both[i] ? "both ring links slow"
									: "one end of a slow link"));
	}
	return json_pack("{s:o, s:I, s:f, s:f, s:o, s:s, s:s}", "ring", links, "time_ms",
			 (json_int_t)r->links_ms, "fastest_gbps", s->links.ref_gbps, "slow_below",
			 SMOKE_SLOW_LINK_FRACTION, "named", named, "verdict", s->links_text, "on_slow",
			 s->slow_link_fails ? "fail" : "warn");
}

/* Which delivery the proof tested, and where each variable came from. */
static json_t *delivery_json(const struct smoke_report *s)
{
	json_t *vars = json_array(), *unknown = json_array();
	for (size_t i = 0; vars && i < s->n_sources; i++)
		json_array_append_new(vars, json_pack("{s:s, s:s, s:s}", "variable", s->sources[i].var,
						      "value", s->sources[i].value, "from",
						      s->sources[i].from));
	for (size_t i = 0; unknown && i < s->n_unknown; i++)
		json_array_append_new(unknown, json_string(s->unknown[i]));
	json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o}", "tested", s->delivery, "container",
			      s->train_container, "why", s->delivery_why, "variables", vars,
			      "unknown_to_the_proof", unknown);
	if (o && s->floor[0])
		json_object_set_new(o, "nccl_floor_warning", json_string(s->floor));
	return o;
}

json_t *select_decision_smoke_json(const struct smoke_report *s)
{
	json_t *o = json_pack("{s:s, s:o, s:i, s:i, s:s}", "status", smoke_status_name(s->status),
			      "reason", log_text(s->reason), "rank", s->rank, "world", s->world,
			      "comm_id", s->comm_id);
	if (o && s->delivery[0])
		json_object_set_new(o, "delivery", delivery_json(s));
	if (!o || !s->ran)
		return o;
	const struct smoke_result *r = &s->result;
	char nv[32], cd[16], cr[16];
	smoke_nccl_version_text(r->nccl_version, nv, sizeof(nv));
	smoke_cuda_version_text(r->cuda_driver, cd, sizeof(cd));
	smoke_cuda_version_text(r->cuda_runtime, cr, sizeof(cr));
	json_object_set_new(o, "correct", json_boolean(r->ok && r->n_sizes > 0 &&
							r->sizes[r->n_sizes - 1].wrong == 0 &&
							r->phase == SMOKE_PHASE_DONE));
	json_object_set_new(o, "time_to_verdict_ms", json_integer(s->verdict_ms));
	json_object_set_new(o, "init_ms", json_integer(r->init_ms));
	json_object_set_new(o, "sizes", sizes_json(r));
	if (s->min_busbw > 0)
		json_object_set_new(o, "min_busbw", json_pack("{s:f, s:s}", "gbps", s->min_busbw,
							      "why", s->min_busbw_why));
	json_object_set_new(o, "nccl", json_pack("{s:s, s:s}", "version", nv, "path", r->nccl_path));
	json_object_set_new(o, "cuda", json_pack("{s:s, s:s, s:s}", "driver", cd, "runtime", cr,
						 "runtime_path", r->cudart_path));
	json_object_set_new(o, "gpu", json_pack("{s:s, s:s, s:i}", "model", r->gpu, "bus",
						r->gpu_bus, "visible", r->gpu_count));
	json_object_set_new(o, "nccl_log", log_json(&s->log));
	if (r->n_links)
		json_object_set_new(o, "links", links_json(s));
	if (s->debug_dir[0])
		json_object_set_new(o, "nccl_debug_dir", json_string(s->debug_dir));
	if (s->not_proven[0])
		json_object_set_new(o, "not_proven", log_text(s->not_proven));
	return o;
}

/* The settings that would override the outputs, and (agreed) the networks
 * the job left because they failed their probe ("kind": "probe"). */
static json_t *warnings_json(const struct jobs_env_warnings *w, const struct exchange_result *x)
{
	json_t *arr = json_array();
	if (arr && x && x->probe_warning[0])
		json_array_append_new(arr, json_pack("{s:s, s:s}", "kind", "probe", "text", x->probe_warning));
	for (size_t i = 0; arr && i < w->n; i++) {
		char text[1024];
		jobs_env_warning_text(&w->v[i], text, sizeof(text));
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "container",
						     w->v[i].container, "variable", w->v[i].var, "value",
						     w->v[i].value, "nicpick", w->v[i].want, "why", w->v[i].why,
						     "text", text));
	}
	return arr;
}

static json_t *env_to_json(const struct outputs_env *env)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < env->n; i++)
		json_object_set_new(o, env->vars[i].key, json_string(env->vars[i].value));
	return o;
}

/* ---- the tree ---- */

json_t *select_decision_json(const struct select_decision *d)
{
	const struct nic *n = &d->nics->v[d->chosen];
	const struct policy_verdict *v = &d->ranking->v[d->chosen];
	const struct outputs_choice *c = d->choice;
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);

	json_t *ifaces = json_array();
	for (size_t i = 0; ifaces && i < c->n_ifaces && i < sizeof(c->ifaces) / sizeof(c->ifaces[0]); i++)
		json_array_append_new(ifaces, json_string(c->ifaces[i]));
	json_t *choice = json_pack("{s:s, s:o, s:s?, s:s, s:s, s:I, s:I}", "interface", n->name,
				   "interfaces", ifaces, "address",
				   v->addr >= 0 ? n->addrs[v->addr].text : NULL, "family",
				   c->family == AF_INET6 ? "inet6" : "inet", "class",
				   nic_class_name(n->cls), "effective_speed_mbps",
				   (json_int_t)n->eff_speed_mbps, "score", (json_int_t)v->score);
	if (choice && c->ib_hca)
		json_object_set_new(choice, "ib_hca", json_string(c->ib_hca));
	if (choice && c->gid_index >= 0)
		json_object_set_new(choice, "ib_gid_index", json_integer(c->gid_index));

	json_t *root = json_pack("{s:i, s:{s:s, s:s}, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "version", 1,
				 "nicpick", "version", NICPICK_VERSION, "rev", NICPICK_GITREV, "node", host,
				 "peers", d->peers_k8s ? "k8s" : "none", "source", d->source, "policy",
				 select_decision_policy_json(d->policy), "choice", choice, "env", env_to_json(d->env),
				 "candidates", select_decision_candidates(d->nics, d->ranking), "smoke",
				 select_decision_smoke_json(d->smoke));
	if (root && json_object_set_new(root, "warnings", warnings_json(d->env_warnings, d->agreement)) < 0) {
		json_decref(root);
		return NULL;
	}
	json_t *tune = d->tune ? select_tune_json(d->tune) : NULL;
	if (root && tune && json_object_set_new(root, "tune", tune) < 0) {
		json_decref(root);
		return NULL;
	} else if (!root) {
		json_decref(tune);
	}
	if (root && d->agreement) {
		json_t *a = agreement_json(d->agreement);
		if (!a || json_object_set_new(root, "agreement", a) < 0) {
			json_decref(root);
			return NULL;
		}
	}
	return root;
}

/* ---- the reader: a finished out-dir ---- */

__attribute__((format(printf, 3, 4))) static int bad(np_error *err, const char *path,
						      const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	np_text_clean(why, sizeof(why), why, NP_TEXT_ASCII);
	return np_error_set(err, NP_EUSAGE, 0, "%s: %s (was it written by nicpick select?)", path, why);
}

static int text(const json_t *o, const char *key, char *dst, size_t len, bool required,
		const char *path, np_error *err)
{
	const json_t *v = json_object_get(o, key);
	if (!v && !required) {
		dst[0] = '\0';
		return 0;
	}
	if (!json_is_string(v))
		return bad(err, path, "\"%s\" is missing or not a string", key);
	if (json_string_length(v) >= len || strlen(json_string_value(v)) != json_string_length(v))
		return bad(err, path, "\"%s\" is too long or holds a NUL", key);
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int integer(const json_t *o, const char *key, long min, long max, long *dst,
		   const char *path, np_error *err)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return bad(err, path, "\"%s\" is missing or not an integer in %ld..%ld", key, min, max);
	*dst = (long)json_integer_value(v);
	return 0;
}

int select_decision_load(const char *dir, struct select_decision_read *out, np_error *err)
{
	memset(out, 0, sizeof(*out));
	char path[4096];
	snprintf(path, sizeof(path), "%s/decision.json", dir);
	json_error_t je;
	json_t *d = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!d) {
		if (je.line == -1 && errno == ENOENT)
			return np_error_set(err, NP_EUSAGE, ENOENT, "cannot read %s", path);
		return bad(err, path, "%s (line %d)", je.text, je.line);
	}
	int ret = -1;
	long v;
	const json_t *env = json_object_get(d, "env"), *choice = json_object_get(d, "choice"),
		     *smoke = json_object_get(d, "smoke"), *val;
	const char *key;
	if (!json_is_object(env) || !json_is_object(choice) || !json_is_object(smoke)) {
		bad(err, path, "\"env\", \"choice\" or \"smoke\" is missing");
		goto out;
	}
	const json_t *agreement = json_object_get(d, "agreement");
	if (agreement && !json_is_object(agreement)) {
		bad(err, path, "\"agreement\" is not an object");
		goto out;
	}
	json_object_foreach((json_t *)env, key, val) {
		if (out->n_vars == SELECT_DECISION_VARS_MAX) {
			bad(err, path, "more than %d variables in \"env\"", SELECT_DECISION_VARS_MAX);
			goto out;
		}
		if (strlen(key) >= sizeof(out->key[0]) || strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(key)) {
			bad(err, path, "\"env\" has a key that is no variable name");
			goto out;
		}
		if (text(env, key, out->value[out->n_vars], sizeof(out->value[0]), true, path, err) < 0)
			goto out;
		snprintf(out->key[out->n_vars], sizeof(out->key[0]), "%s", key);
		out->n_vars++;
	}
	if (text(choice, "interface", out->ifname, sizeof(out->ifname), true, path, err) < 0 ||
	    text(choice, "ib_hca", out->ib_hca, sizeof(out->ib_hca), false, path, err) < 0 ||
	    text(smoke, "comm_id", out->comm_id, sizeof(out->comm_id), true, path, err) < 0)
		goto out;
	const json_t *ifs = json_object_get(choice, "interfaces");
	if (ifs && (!json_is_array(ifs) || json_array_size(ifs) < 1 || json_array_size(ifs) > 8)) {
		bad(err, path, "\"interfaces\" is not an array of 1 to 8 names");
		goto out;
	}
	for (size_t i = 0; ifs && json_array_size(ifs) > 1 && i < json_array_size(ifs); i++) {
		const char *s = json_string_value(json_array_get(ifs, i));
		if (!s || !s[0] || strlen(s) >= IFNAMSIZ || strpbrk(s, ",:") ||
		    (i == 0 && strcmp(s, out->ifname) != 0)) {
			bad(err, path, "\"interfaces\" holds a bad name, or its first is not \"interface\"");
			goto out;
		}
		snprintf(out->rails + strlen(out->rails), sizeof(out->rails) - strlen(out->rails), "%s%s",
			 i ? "," : "", s);
	}
	if (integer(smoke, "world", 1, 1 << 20, &v, path, err) < 0)
		goto out;
	out->world = (int)v;
	if (integer(smoke, "rank", 0, out->world - 1, &v, path, err) < 0)
		goto out;
	out->rank = (int)v;
	/* The slow threshold is 5% of the slowest agreed link, as `select`
	 * judged it: the agreement's, when the job agreed; this pod's own
	 * link only when it decided alone. */
	out->min_mbps = -1;
	if (agreement) {
		if (integer(agreement, "min_mbps", -1, 100000000, &out->min_mbps, path, err) < 0)
			goto out;
	} else if (json_object_get(choice, "effective_speed_mbps") &&
		   integer(choice, "effective_speed_mbps", -1, 100000000, &out->min_mbps, path, err) < 0) {
		goto out;
	}
	/* NCCL_IB_HCA in the outputs carries a leading '=' */
	if (out->ib_hca[0] == '=')
		memmove(out->ib_hca, out->ib_hca + 1, strlen(out->ib_hca));
	ret = 0;
out:
	json_decref(d);
	return ret;
}
