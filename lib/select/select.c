#include "select/select.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "outputs/decision.h"
#include "outputs/outputs.h"
#include "util/clock.h"
#include "util/text.h"

#define PUBLISH_RESERVE_MS 2000

int select_gather(const struct select_opts *o, struct select_result *r, np_error *err)
{
	memset(r, 0, sizeof(*r));
	r->chosen = -1;
	int ret;
	if (o->snapshot)
		ret = nic_snapshot_load(o->snapshot, &r->nics, err);
	else
		ret = nic_discover(&o->src, &r->nics, err);
	if (ret < 0)
		return ret;
	return policy_rank(&o->policy, &r->nics, &r->ranking, err);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* RDMA for NCCL: InfiniBand is a fabric of its own that needs no socket
 * interface, so every ACTIVE InfiniBand port of the node is listed (on a
 * DGX-class node the IB HCAs carry the job, whichever interface carries the
 * sockets).  Without IB, the RoCE ports of the chosen interface itself, with
 * the RoCE v2 GID of its IPv4 address. */
static void choose_rdma(const struct nic_list *l, const struct nic *chosen, char *hca,
			size_t hca_len, int *gid_index)
{
	const char *ports[64];
	char buf[64][NIC_HCA_MAX + 8];
	size_t n = 0;

	hca[0] = '\0';
	*gid_index = -1;
	for (size_t j = 0; j < l->n; j++) {
		for (size_t i = 0; i < l->v[j].n_rdma && n < 64; i++) {
			const struct nic_rdma_port *p = &l->v[j].rdma[i];
			if (!p->active || strcmp(p->link_layer, "InfiniBand") != 0)
				continue;
			snprintf(buf[n], sizeof(buf[n]), "%s:%d", p->hca, p->port);
			ports[n] = buf[n];
			n++;
		}
	}
	for (size_t i = 0; n == 0 && i < chosen->n_rdma; i++) {
		const struct nic_rdma_port *p = &chosen->rdma[i];
		if (!p->active || strcmp(p->link_layer, "Ethernet") != 0)
			continue;
		snprintf(buf[0], sizeof(buf[0]), "%s:%d", p->hca, p->port);
		ports[0] = buf[0];
		n = 1;
		*gid_index = p->gid_index_v4_rocev2;
	}
	if (n == 0)
		return;
	qsort(ports, n, sizeof(ports[0]), cmp_str);
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(ports[i], ports[i - 1]) == 0)
			continue;
		int w = snprintf(hca + off, hca_len - off, "%s%s", off ? "," : "", ports[i]);
		if (w < 0 || (size_t)w >= hca_len - off)
			break;
		off += (size_t)w;
	}
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
		policy_verdict_to_json(&c->rk->v[i], &c->l->v[i], obj);
	return c->fn(obj, c->ud);
}

int select_discover_each(const struct nic_list *l, const struct policy_ranking *rk,
			 int (*fn)(json_t *obj, void *ud), void *ud)
{
	struct each_ctx c = { .l = l, .rk = rk, .fn = fn, .ud = ud };
	return nic_list_each_json(l, each_one, &c);
}

/* Agree with the job's other pods; r->chosen becomes this pod's interface on
 * the agreed network. */
static int agree(const struct select_opts *o, struct select_result *r, const struct agree_gpu *gpu,
		 np_error *err)
{
	struct k8s_config cfg = { 0 };
	if (k8s_config_load(&cfg, &o->k8s, err) < 0) {
		k8s_config_free(&cfg);
		return -1;
	}
	struct exchange_opts xo = o->ex;
	xo.k8s = &cfg;
	xo.local_routes = !o->snapshot && !o->src.netlink_json && !o->src.sysfs_root;
	xo.gpu = gpu && gpu->has ? gpu : NULL;
	/* The job agrees within the same policy as each node ranks. */
	xo.agree.family = o->policy.family;
	xo.agree.has_cidr = o->policy.has_cidr;
	xo.agree.cidr = o->policy.cidr;
	/* The end of the deadline is kept for saying on the pod why it failed. */
	int64_t left = xo.deadline_ms - np_now_ms();
	xo.deadline_ms -= left / 10 < PUBLISH_RESERVE_MS ? left / 10 : PUBLISH_RESERVE_MS;
	int ret = exchange_run(&xo, &r->nics, &r->ranking, &r->ex, err);
	r->agreed = ret == 0;
	k8s_config_free(&cfg);
	if (ret < 0)
		return -1;
	const struct nic *n = nic_list_find_name(&r->nics, r->ex.ifname);
	if (!n)
		return np_error_set(err, NP_EK8S, 0, "the agreed interface %s is not on this node",
				    r->ex.ifname);
	r->chosen = (int)(n - r->nics.v);
	if (!r->ranking.v[r->chosen].usable)
		return np_error_set(err, NP_EK8S, 0, "the agreed interface %s is not usable here",
				    r->ex.ifname);
	return 0;
}

/* The result annotation and the Event on this pod: NetworkSelected, or
 * NetworkSelectionFailed with the reason.  Failing to post it is only a
 * warning: the outputs (or the exit code) say the rest. */
static void publish(const struct select_opts *o, const struct select_result *r, bool ok,
		    const char *msg)
{
	np_error perr = { 0 };
	struct exchange_opts xo = o->ex;
	struct k8s_config cfg = { 0 };
	if (k8s_config_load(&cfg, &o->k8s, &perr) == 0) {
		xo.k8s = &cfg;
		exchange_publish_result(&xo, &r->ex, ok, msg, &perr);
	}
	if (perr.msg[0] && xo.log)
		xo.log(xo.log_ud, EXCHANGE_WARN, perr.msg);
	k8s_config_free(&cfg);
}

static int run(const struct select_opts *o, struct select_result *r, np_error *err);

/* This pod as the link verdict names it: pod, node and agreed address. */
static void own_label(const struct select_result *r, char *buf, size_t len)
{
	const char *pod = json_string_value(json_object_get(json_object_get(r->ex.pod, "metadata"), "name"));
	const char *node = json_string_value(json_object_get(json_object_get(r->ex.pod, "spec"), "nodeName"));
	char raw[256];
	snprintf(raw, sizeof(raw), "%s (node %s, %s)", pod ? pod : "?", node && *node ? node : "?",
		 r->ex.addr);
	np_text_clean(buf, len, raw, NP_TEXT_ASCII);
}

int select_run(const struct select_opts *o, struct select_result *r, np_error *err)
{
	int ret = run(o, r, err);
	/* Every failure once this pod is known, on every pod, says why on it. */
	if (ret < 0 && o->peers_k8s && r->ex.pod)
		publish(o, r, false, err->msg);
	return ret;
}

static int run(const struct select_opts *o, struct select_result *r, np_error *err)
{
	if (select_gather(o, r, err) < 0)
		return -1;
	if (r->ranking.n_usable == 0)
		return np_error_set(err, NP_ENOIFACE, 0,
				    "no usable network interface among %zu", r->nics.n);

	char here[NP_ERR_MSG_MAX] = ""; /* why the smoke test cannot run on this pod */
	if (o->peers_k8s) {
		/* The smoke test's NCCL, CUDA and GPU go into this pod's report:
		 * the gatherer compares them and decides for the whole job
		 * whether the smoke test can run. */
		struct agree_gpu gpu = { 0 };
		if (strcmp(o->smoke_mode, "off") != 0 &&
		    (!select_smoke_info(o, &gpu, here, sizeof(here)) || (!gpu.smoke[0] && here[0])) &&
		    o->ex.log) {
			char line[NP_ERR_MSG_MAX + 64];
			snprintf(line, sizeof(line), "cannot tell this pod's NCCL and GPU: %s", here);
			o->ex.log(o->ex.log_ud, EXCHANGE_WARN, line);
		}
		if (!gpu.smoke[0])
			here[0] = '\0';
		if (agree(o, r, &gpu, err) < 0)
			return -1;
		if (r->ex.versions[0] && o->ex.log) {
			char line[AGREE_VERSIONS_TEXT_MAX + 64];
			snprintf(line, sizeof(line), "the job's pods differ: %s", r->ex.versions);
			o->ex.log(o->ex.log_ud, EXCHANGE_WARN, line);
		}
	} else {
		r->chosen = (int)r->ranking.order[0];
	}
	const struct nic *n = &r->nics.v[r->chosen];
	const struct policy_verdict *v = &r->ranking.v[r->chosen];
	if (!o->peers_k8s) {
		/* Alone: rank 0 of 1, the root is this pod's own address. */
		r->ex.rank = 0;
		r->ex.world = 1;
		snprintf(r->ex.root_addr, sizeof(r->ex.root_addr), "%s",
			 v->addr >= 0 ? n->addrs[v->addr].text : "");
		r->ex.min_mbps = n->eff_speed_mbps;
	}

	char hca[512];
	struct outputs_choice c = { .n_ifaces = 1, .family = v->family, .gid_index = -1 };
	c.ifaces[0] = n->name;
	choose_rdma(&r->nics, n, hca, sizeof(hca), &c.gid_index);
	c.ib_hca = hca[0] ? hca : NULL;
	if (c.family != AF_INET) /* the RoCE v2 GID found carries the IPv4 address */
		c.gid_index = -1;

	struct outputs_env env;
	if (outputs_env_from_choice(&c, &env, err) < 0)
		return -1;

	if (o->nccl_debug && o->out_dir) {
		/* Training logs as the smoke test did, into the same emptyDir. */
		if (env.n + 2 > OUTPUTS_VARS_MAX)
			return np_error_set(err, NP_EINTERNAL, 0, "too many output variables");
		env.vars[env.n].key = "NCCL_DEBUG";
		snprintf(env.vars[env.n++].value, sizeof(env.vars[0].value), "INFO");
		env.vars[env.n].key = "NCCL_DEBUG_FILE";
		snprintf(env.vars[env.n++].value, sizeof(env.vars[0].value),
			 "%s/nccl-debug/train.%%h.%%p", o->out_dir);
	}

	/* The smoke all-reduce, after every pod's probe passed and before
	 * anything is written: a failure leaves no outputs. */
	char comm_id[80], label[SMOKE_LABEL_MAX] = "";
	if (r->agreed && r->ex.pod)
		own_label(r, label, sizeof(label));
	select_comm_id(r->agreed ? r->ex.root_addr : (v->addr >= 0 ? n->addrs[v->addr].text : "127.0.0.1"),
		       o->smoke_port, comm_id, sizeof(comm_id));
	struct select_smoke_plan plan = {
		.rank = r->agreed ? r->ex.rank : 0,
		.world = r->agreed ? r->ex.world : 1,
		.comm_id = comm_id,
		.root_pod = r->agreed ? r->ex.root_pod : "",
		.ifname = n->name,
		.ib_hca = c.ib_hca,
		.min_mbps = r->agreed ? r->ex.min_mbps : n->eff_speed_mbps,
		.job_skip = r->agreed ? r->ex.smoke_skip : NULL,
		.here = here,
		.label = label,
	};
	int smoke_ret = select_smoke(o, &plan, &env, &r->smoke, err);
	if (o->ex.log && r->smoke.status != SMOKE_SKIPPED) {
		char line[NP_ERR_MSG_MAX + 64];
		smoke_report_summary(&r->smoke, line, sizeof(line));
		o->ex.log(o->ex.log_ud, r->smoke.status == SMOKE_PASSED ? EXCHANGE_INFO : EXCHANGE_WARN,
			  line);
	}
	if (smoke_ret < 0)
		return -1; /* select_run says why on the pod */

	/* Settings in the pod's containers that would override these outputs. */
	if (r->agreed && r->ex.pod &&
	    jobs_envcheck_pod(r->ex.pod, &env, o->out_dir, o->strict_env, &r->env_warnings, err) < 0)
		return -1; /* select_run says why on the pod */

	struct outputs_decision od = {
		.peers_k8s = o->peers_k8s,
		.source = o->snapshot ? "snapshot" : (o->src.sysfs_root || o->src.netlink_json) ? "replay" : "node",
		.policy = &o->policy,
		.nics = &r->nics,
		.ranking = &r->ranking,
		.chosen = (size_t)r->chosen,
		.choice = &c,
		.env = &env,
		.smoke = &r->smoke,
		.env_warnings = &r->env_warnings,
		.agreement = r->agreed ? &r->ex : NULL,
	};
	r->decision = outputs_decision_json(&od);
	if (!r->decision)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot build decision.json");
	if (o->out_dir && outputs_write(o->out_dir, &env, r->decision, err) < 0)
		return -1;
	if (r->agreed) {
		char msg[1536 + AGREE_VERSIONS_TEXT_MAX], sm[NP_ERR_MSG_MAX];
		smoke_report_summary(&r->smoke, sm, sizeof(sm));
		snprintf(msg, sizeof(msg), "NCCL uses %s (%s) on %s, agreed by %zu pods%s; %s", n->name,
			 r->ex.addr, r->ex.network, r->ex.n_pods,
			 r->ex.next_pod[0] ? " and probed around the ring" : "", sm);
		if (r->ex.versions[0]) {
			size_t len = strlen(msg);
			snprintf(msg + len, sizeof(msg) - len, "; warning: the job's pods differ: %s",
				 r->ex.versions);
		}
		if (r->env_warnings.n) {
			size_t len = strlen(msg);
			char first[1024];
			jobs_env_warning_text(&r->env_warnings.v[0], first, sizeof(first));
			snprintf(msg + len, sizeof(msg) - len, "; warning: %zu setting(s) override this: %s",
				 r->env_warnings.n, first);
		}
		publish(o, r, true, msg);
	}
	return 0;
}

void select_result_free(struct select_result *r)
{
	policy_ranking_free(&r->ranking);
	nic_list_free(&r->nics);
	json_decref(r->decision);
	r->decision = NULL;
	exchange_result_free(&r->ex);
}
