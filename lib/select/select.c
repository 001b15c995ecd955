#include "select/select.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "select/decision.h"
#include "outputs/outputs.h"
#include "util/clock.h"

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

/* The gatherer names a rank: its pod and address on the agreed rail. */
static void rank_name(void *ud, int rank, char *buf, size_t len)
{
	const struct select_result *r = ud;
	const struct agree_rail *rail = &r->ex.decision.rails[0];
	const char *gatherer = NULL;
	for (size_t i = 0; i < rail->n_assign; i++) {
		struct agree_rank rk;
		np_error e = { 0 };
		if (!gatherer) {
			/* rank 0 is the gatherer: the pod whose address is the root */
			for (size_t j = 0; j < rail->n_assign; j++)
				if (strcmp(rail->assign[j].addr, r->ex.root_addr) == 0)
					gatherer = rail->assign[j].pod;
			if (!gatherer)
				break;
		}
		if (agree_rail_rank(rail, gatherer, rail->assign[i].pod, &rk, &e) == 0 &&
		    rk.rank == rank) {
			snprintf(buf, len, "%s, %s", rail->assign[i].pod, rail->assign[i].addr);
			return;
		}
	}
	buf[0] = '\0';
}

/* One run of the flow: the options, what it found so far, and what the
 * later steps take from the earlier ones. */
struct run {
	const struct select_opts *o;
	struct select_result *r;
	/* peers_k8s: loaded once, for the exchange and for the result */
	struct k8s_config k8s;
	bool have_k8s;
	char here[NP_ERR_MSG_MAX]; /* why the smoke test cannot run on this pod */
	/* Where this pod stands once the network is decided: its place in the
	 * smoke all-reduce (alone: rank 0 of 1, rooted at its own address). */
	struct select_smoke_plan plan;
	char comm_id[80];
	/* The outputs */
	char hca[512];
	struct outputs_choice choice;
	struct outputs_env env;
};

/* The exchange's options: the stage's own, the run's context, and the
 * job agreeing within the same policy as each node ranks. */
static struct exchange_opts exchange_opts(struct run *x)
{
	const struct select_opts *o = x->o;
	struct exchange_opts xo = o->ex;
	xo.k8s = &x->k8s;
	xo.deadline_ms = o->ctx.deadline_ms;
	xo.log = o->ctx.log;
	xo.log_ud = o->ctx.log_ud;
	xo.agree.family = o->policy.family;
	xo.agree.has_cidr = o->policy.has_cidr;
	xo.agree.cidr = o->policy.cidr;
	return xo;
}

static void say(const struct run *x, enum exchange_log_level level, const char *msg)
{
	if (x->o->ctx.log)
		x->o->ctx.log(x->o->ctx.log_ud, level, msg);
}

/* The smoke test's NCCL, CUDA and GPU go into this pod's report: the
 * gatherer compares them and decides for the whole job whether the smoke
 * test can run. */
static void smoke_info(struct run *x, struct agree_gpu *gpu)
{
	const struct select_opts *o = x->o;
	memset(gpu, 0, sizeof(*gpu));
	if (o->smoke.mode != SELECT_SMOKE_OFF &&
	    (!select_smoke_info(&o->smoke, &o->ctx, gpu, x->here, sizeof(x->here)) ||
	     (!gpu->smoke[0] && x->here[0]))) {
		char line[NP_ERR_MSG_MAX + 64];
		snprintf(line, sizeof(line), "cannot tell this pod's NCCL and GPU: %s", x->here);
		say(x, EXCHANGE_WARN, line);
	}
	if (!gpu->smoke[0])
		x->here[0] = '\0';
}

/* Agree with the job's other pods (the exchange probes the ring
 * neighbour's address before it returns); r->chosen becomes this pod's
 * interface on the agreed network. */
static int agree(struct run *x, np_error *err)
{
	const struct select_opts *o = x->o;
	struct select_result *r = x->r;
	struct agree_gpu gpu;
	smoke_info(x, &gpu);
	if (k8s_config_load(&x->k8s, &o->k8s, err) < 0)
		return -1;
	x->have_k8s = true;
	struct exchange_opts xo = exchange_opts(x);
	xo.local_routes = !o->snapshot && !o->src.netlink_json && !o->src.sysfs_root;
	xo.gpu = gpu.has ? &gpu : NULL;
	/* The end of the deadline is kept for saying on the pod why it failed. */
	int64_t left = xo.deadline_ms - np_now_ms();
	xo.deadline_ms -= left / 10 < PUBLISH_RESERVE_MS ? left / 10 : PUBLISH_RESERVE_MS;
	if (exchange_run(&xo, &r->nics, &r->ranking, &r->ex, err) < 0)
		return -1;
	r->agreed = true;
	const struct nic *n = nic_list_find_name(&r->nics, r->ex.ifname);
	if (!n)
		return np_error_set(err, NP_EK8S, 0, "the agreed interface %s is not on this node",
				    r->ex.ifname);
	r->chosen = (int)(n - r->nics.v);
	if (!r->ranking.v[r->chosen].usable)
		return np_error_set(err, NP_EK8S, 0, "the agreed interface %s is not usable here",
				    r->ex.ifname);
	if (r->ex.versions[0]) {
		char line[AGREE_VERSIONS_TEXT_MAX + 64];
		snprintf(line, sizeof(line), "the job's pods differ: %s", r->ex.versions);
		say(x, EXCHANGE_WARN, line);
	}
	select_comm_id(r->ex.root_addr, o->smoke.port, x->comm_id, sizeof(x->comm_id));
	x->plan = (struct select_smoke_plan){
		.rank = r->ex.rank,
		.world = r->ex.world,
		.root_pod = r->ex.root_pod,
		.min_mbps = r->ex.min_mbps,
		.job_skip = r->ex.smoke_skip,
		.rank_name = r->ex.has_decision && r->ex.decision.n_rails ? rank_name : NULL,
		.rank_ud = r,
	};
	return 0;
}

/* Alone: this node's best interface; rank 0 of 1, rooted at its own
 * address, judged against its own link. */
static int decide_alone(struct run *x)
{
	struct select_result *r = x->r;
	r->chosen = (int)r->ranking.order[0];
	const struct nic *n = &r->nics.v[r->chosen];
	const struct policy_verdict *v = &r->ranking.v[r->chosen];
	select_comm_id(v->addr >= 0 ? n->addrs[v->addr].text : "127.0.0.1", x->o->smoke.port,
		       x->comm_id, sizeof(x->comm_id));
	x->plan = (struct select_smoke_plan){ .rank = 0, .world = 1, .root_pod = "",
					      .min_mbps = n->eff_speed_mbps };
	return 0;
}

/* The variables for NCCL from the chosen interface and its RDMA ports,
 * and with --nccl-debug, training's log beside the smoke test's. */
static int choose_outputs(struct run *x, np_error *err)
{
	const struct select_opts *o = x->o;
	const struct nic *n = &x->r->nics.v[x->r->chosen];
	struct outputs_choice *c = &x->choice;
	*c = (struct outputs_choice){ .n_ifaces = 1, .family = x->r->ranking.v[x->r->chosen].family,
				      .gid_index = -1 };
	c->ifaces[0] = n->name;
	choose_rdma(&x->r->nics, n, x->hca, sizeof(x->hca), &c->gid_index);
	c->ib_hca = x->hca[0] ? x->hca : NULL;
	if (c->family != AF_INET) /* the RoCE v2 GID found carries the IPv4 address */
		c->gid_index = -1;
	struct outputs_env *env = &x->env;
	if (outputs_env_from_choice(c, env, err) < 0)
		return -1;
	if (!o->smoke.nccl_debug || !o->out_dir)
		return 0;
	/* Training logs as the smoke test did, into the same emptyDir. */
	if (env->n + 2 > OUTPUTS_VARS_MAX)
		return np_error_set(err, NP_EINTERNAL, 0, "too many output variables");
	env->vars[env->n].key = "NCCL_DEBUG";
	snprintf(env->vars[env->n++].value, sizeof(env->vars[0].value), "INFO");
	env->vars[env->n].key = "NCCL_DEBUG_FILE";
	snprintf(env->vars[env->n++].value, sizeof(env->vars[0].value), "%s/nccl-debug/train.%%h.%%p",
		 o->out_dir);
	return 0;
}

/* The smoke all-reduce, after every pod's probe passed and before anything
 * is written: a failure leaves no outputs. */
static int smoke(struct run *x, np_error *err)
{
	struct select_result *r = x->r;
	x->plan.comm_id = x->comm_id;
	x->plan.ifname = r->nics.v[r->chosen].name;
	x->plan.ib_hca = x->choice.ib_hca;
	x->plan.here = x->here;
	int ret = select_smoke(&x->o->smoke, &x->o->ctx, x->o->out_dir, &x->plan, &x->env, &r->smoke,
			       err);
	if (r->smoke.status != SMOKE_SKIPPED) {
		char line[NP_ERR_MSG_MAX + 64];
		smoke_report_summary(&r->smoke, line, sizeof(line));
		say(x, r->smoke.status == SMOKE_PASSED ? EXCHANGE_INFO : EXCHANGE_WARN, line);
	}
	return ret;
}

/* Settings in the pod's containers that would override these outputs. */
static int check_pod_env(struct run *x, np_error *err)
{
	struct select_result *r = x->r;
	if (!r->agreed || !r->ex.pod)
		return 0;
	struct jobs_vars ours = { 0 };
	for (size_t i = 0; i < x->env.n && i < JOBS_VARS_MAX; i++) {
		ours.v[ours.n].key = x->env.vars[i].key;
		ours.v[ours.n++].value = x->env.vars[i].value;
	}
	return jobs_envcheck_pod(r->ex.pod, &ours, x->o->out_dir, x->o->strict_env, &r->env_warnings,
				 err);
}

/* decision.json from every step's structs, and the files. */
static int write_outputs(struct run *x, np_error *err)
{
	const struct select_opts *o = x->o;
	struct select_result *r = x->r;
	struct select_decision d = {
		.peers_k8s = o->peers_k8s,
		.source = o->snapshot ? "snapshot" : (o->src.sysfs_root || o->src.netlink_json) ? "replay" : "node",
		.policy = &o->policy,
		.nics = &r->nics,
		.ranking = &r->ranking,
		.chosen = (size_t)r->chosen,
		.choice = &x->choice,
		.env = &x->env,
		.smoke = &r->smoke,
		.env_warnings = &r->env_warnings,
		.agreement = r->agreed ? &r->ex : NULL,
	};
	r->decision = select_decision_json(&d);
	if (!r->decision)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot build decision.json");
	if (o->out_dir && outputs_write(o->out_dir, &x->env, r->decision, err) < 0)
		return -1;
	return 0;
}

/* The result annotation and the Event on this pod: NetworkSelected, or
 * NetworkSelectionFailed with the reason.  Failing to post it is only a
 * warning: the outputs (or the exit code) say the rest. */
static void publish(struct run *x, bool ok, const char *msg)
{
	if (!x->have_k8s)
		return;
	np_error perr = { 0 };
	struct exchange_opts xo = exchange_opts(x);
	exchange_publish_result(&xo, &x->r->ex, ok, msg, &perr);
	if (perr.msg[0])
		say(x, EXCHANGE_WARN, perr.msg);
}

/* "NCCL uses eth1 (10.9.0.1) on 10.9.0.0/24, agreed by 8 pods ...". */
static void selected_text(const struct run *x, char *msg, size_t len)
{
	const struct select_result *r = x->r;
	char sm[NP_ERR_MSG_MAX];
	smoke_report_summary(&r->smoke, sm, sizeof(sm));
	snprintf(msg, len, "NCCL uses %s (%s) on %s, agreed by %zu pods%s; %s",
		 r->nics.v[r->chosen].name, r->ex.addr, r->ex.network, r->ex.n_pods,
		 r->ex.next_pod[0] ? " and probed around the ring" : "", sm);
	if (r->ex.versions[0]) {
		size_t n = strlen(msg);
		snprintf(msg + n, len - n, "; warning: the job's pods differ: %s", r->ex.versions);
	}
	if (r->env_warnings.n) {
		size_t n = strlen(msg);
		char first[1024];
		jobs_env_warning_text(&r->env_warnings.v[0], first, sizeof(first));
		snprintf(msg + n, len - n, "; warning: %zu setting(s) override this: %s",
			 r->env_warnings.n, first);
	}
}

/* The design's steps: discover -> rank -> agree (probing the ring) or
 * decide alone -> smoke -> write. */
static int run(struct run *x, np_error *err)
{
	if (select_gather(x->o, x->r, err) < 0)
		return -1;
	if (x->r->ranking.n_usable == 0)
		return np_error_set(err, NP_ENOIFACE, 0, "no usable network interface among %zu",
				    x->r->nics.n);
	if ((x->o->peers_k8s ? agree(x, err) : decide_alone(x)) < 0)
		return -1;
	if (choose_outputs(x, err) < 0 || smoke(x, err) < 0 || check_pod_env(x, err) < 0)
		return -1;
	return write_outputs(x, err);
}

int select_run(const struct select_opts *o, struct select_result *r, np_error *err)
{
	struct run x = { .o = o, .r = r };
	int ret = run(&x, err);
	if (ret == 0 && r->agreed) {
		char msg[1536 + AGREE_VERSIONS_TEXT_MAX];
		selected_text(&x, msg, sizeof(msg));
		publish(&x, true, msg);
	} else if (ret < 0 && o->peers_k8s && r->ex.pod) {
		/* Every failure once this pod is known, on every pod, says why on it. */
		publish(&x, false, err->msg);
	}
	k8s_config_free(&x.k8s);
	return ret;
}

void select_result_free(struct select_result *r)
{
	policy_ranking_free(&r->ranking);
	nic_list_free(&r->nics);
	json_decref(r->decision);
	r->decision = NULL;
	exchange_result_free(&r->ex);
}
