/* The decision as decision.json shows it ("agreement"."decision"):
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
#include "agree/agree.h"

#include <jansson.h>
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

json_t *agree_decision_json(const struct agree_decision *d)
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
