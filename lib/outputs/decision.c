/* decision.json, from the structs of the whole flow. */
#include "outputs/decision.h"

#include <sys/socket.h>
#include <unistd.h>

json_t *outputs_candidates_json(const struct nic_list *l, const struct policy_ranking *rk)
{
	json_t *arr = nic_list_to_json(l);
	for (size_t i = 0; arr && rk && i < l->n && i < rk->n; i++)
		policy_verdict_to_json(&rk->v[i], &l->v[i], json_array_get(arr, i));
	return arr;
}

static json_t *env_to_json(const struct outputs_env *env)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < env->n; i++)
		json_object_set_new(o, env->vars[i].key, json_string(env->vars[i].value));
	return o;
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
	/* Job-wide: pods whose NCCL, CUDA or GPU differ ("" none). */
	if (a)
		json_object_set_new(a, "versions_warning", json_string(x->versions));
	if (a && x->has_decision)
		json_object_set_new(a, "decision", agree_decision_json(&x->decision));
	return a;
}

json_t *outputs_decision_json(const struct outputs_decision *d)
{
	const struct nic *n = &d->nics->v[d->chosen];
	const struct policy_verdict *v = &d->ranking->v[d->chosen];
	const struct outputs_choice *c = d->choice;
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);

	json_t *choice = json_pack("{s:s, s:[s], s:s?, s:s, s:s, s:I, s:I}", "interface", n->name,
				   "interfaces", n->name, "address",
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
				 policy_to_json(d->policy), "choice", choice, "env", env_to_json(d->env),
				 "candidates", outputs_candidates_json(d->nics, d->ranking), "smoke",
				 smoke_report_to_json(d->smoke));
	if (root && json_object_set_new(root, "warnings", jobs_env_warnings_json(d->env_warnings)) < 0) {
		json_decref(root);
		return NULL;
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
