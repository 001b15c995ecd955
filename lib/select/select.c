#include "select/select.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exchange/message.h"
#include "select/decision.h"
#include "outputs/outputs.h"
#include "util/clock.h"
#include "util/cancel.h"
#include "util/text.h"

#define PUBLISH_RESERVE_MS 2000
#define PUBLISH_STOPPED_MS 600

_Static_assert(EXCHANGE_DECISION_ID_MAX >= OUTPUTS_ID_MAX, "the outcome carries the set's id");

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
static int choose_rdma(const struct nic_list *l, const struct nic *const *rails, size_t n_rails,
		       char *hca, size_t hca_len, int *gid_index, size_t *rails_without, np_error *err)
{
	const char *ports[64];
	char buf[64][NIC_HCA_MAX + 8];
	size_t n = 0;

	hca[0] = '\0';
	*gid_index = -1;
	*rails_without = 0;
	for (size_t j = 0; j < l->n; j++) {
		for (size_t i = 0; i < l->v[j].n_rdma && n < 64; i++) {
			const struct nic_rdma_port *p = &l->v[j].rdma[i];
			if (!p->active || strcmp(p->link_layer, "InfiniBand") != 0)
				continue;
			if (nic_hca_check(p, err) < 0)
				return -1;
			snprintf(buf[n], sizeof(buf[n]), "%s:%d", p->hca, p->port);
			ports[n] = buf[n];
			n++;
		}
	}
	/* RoCE: a port of each rail's interface.  NCCL_IB_GID_INDEX is one
	 * for all of them: the first rail's. */
	bool ib = n > 0;
	for (size_t r = 0; !ib && r < n_rails; r++) {
		bool found = false;
		for (size_t i = 0; !found && i < rails[r]->n_rdma && n < 64; i++) {
			const struct nic_rdma_port *p = &rails[r]->rdma[i];
			if (!p->active || strcmp(p->link_layer, "Ethernet") != 0)
				continue;
			if (nic_hca_check(p, err) < 0)
				return -1;
			snprintf(buf[n], sizeof(buf[n]), "%s:%d", p->hca, p->port);
			ports[n] = buf[n];
			n++;
			found = true;
			if (r == 0)
				*gid_index = p->gid_index_v4_rocev2;
		}
		if (!found)
			++*rails_without;
	}
	if (n == 0) {
		*rails_without = 0;
		return 0;
	}
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
	return 0;
}

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
	/* This pod's interface on each rail, the first is r->chosen's. */
	size_t n_rails;
	const struct nic *rails[EXCHANGE_RAILS_MAX];
	char rail_list[EXCHANGE_RAILS_MAX * IFNAMSIZ]; /* "eth1,eth2" */
	char label[SMOKE_LABEL_MAX];
	/* The outputs */
	char hca[512];
	struct outputs_choice choice;
	struct outputs_env env;
	/* The steps that write into the out-dir (smoke, tune) run in o->ctx
	 * with made: what they made of it goes if the run fails. */
	struct select_ctx cx;
	struct outputs_made made;
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
	xo.cancel = o->ctx.cancel;
	return xo;
}

static void say(const struct run *x, enum exchange_log_level level, const char *msg)
{
	if (x->o->ctx.log)
		x->o->ctx.log(x->o->ctx.log_ud, level, msg);
}

/* The smoke test's NCCL, CUDA and GPU go into this pod's report: the
 * gatherer compares them and decides for the whole job whether the smoke
 * test can run.  Looking them up runs the companion (tens of ms on a GPU
 * node), so it runs in a thread of its own while the exchange connects to
 * the API server and reads this pod; the exchange asks for the answer
 * (info_wait) just before it builds the report. */
struct info_job {
	struct run *x;
	struct agree_gpu gpu;
	bool known;
	bool started, joined;
	pthread_t t;
};

static void info_look(struct info_job *j)
{
	const struct select_opts *o = j->x->o;
	memset(&j->gpu, 0, sizeof(j->gpu));
	/* Also with --smoke off: the job's NCCL floor (a training container
	 * that reads only nccl.conf) is checked from the reports' versions. */
	j->known = select_smoke_info(&o->smoke, &o->ctx, &j->gpu, j->x->here, sizeof(j->x->here));
}

static void *info_thread(void *ud)
{
	info_look(ud);
	return NULL;
}

/* The answer, once: the thread joined (or, had it not started, the look-up
 * made here), and what it says about the smoke test said on this thread. */
static void info_join(struct info_job *j)
{
	if (j->joined)
		return;
	j->joined = true;
	if (j->started)
		pthread_join(j->t, NULL);
	else
		info_look(j);
	struct run *x = j->x;
	if (x->o->smoke.mode != SELECT_SMOKE_OFF && (!j->known || (!j->gpu.smoke[0] && x->here[0]))) {
		char line[NP_ERR_MSG_MAX + 64];
		snprintf(line, sizeof(line), "cannot tell this pod's NCCL and GPU: %s", x->here);
		say(x, EXCHANGE_WARN, line);
	}
	if (!j->gpu.smoke[0])
		x->here[0] = '\0';
}

static const struct agree_gpu *info_wait(void *ud)
{
	struct info_job *j = ud;
	info_join(j);
	return j->gpu.has ? &j->gpu : NULL;
}

/* Agree with the job's other pods (the exchange probes the ring
 * neighbour's address before it returns); r->chosen becomes this pod's
 * interface on the agreed network. */
static int agree(struct run *x, np_error *err)
{
	const struct select_opts *o = x->o;
	struct select_result *r = x->r;
	struct info_job info = { .x = x };
	info.started = pthread_create(&info.t, NULL, info_thread, &info) == 0;
	if (k8s_config_load(&x->k8s, &o->k8s, err) < 0) {
		info_join(&info);
		return -1;
	}
	x->have_k8s = true;
	struct exchange_opts xo = exchange_opts(x);
	xo.local_routes = !o->snapshot && !o->src.netlink_json && !o->src.sysfs_root;
	xo.gpu_wait = info_wait;
	xo.gpu_ud = &info;
	xo.out_dir = o->out_dir;
	xo.train_names = o->smoke.train_names;
	xo.n_train_names = o->smoke.n_train_names;
	/* The end of the deadline is kept for saying on the pod why it failed. */
	int64_t left = xo.deadline_ms - np_now_ms();
	xo.deadline_ms -= left / 10 < PUBLISH_RESERVE_MS ? left / 10 : PUBLISH_RESERVE_MS;
	int ran = exchange_run(&xo, &r->nics, &r->ranking, &r->ex, err);
	info_join(&info); /* an exchange that ended early never asked */
	if (ran < 0)
		return -1;
	r->agreed = true;
	const struct nic *n = nic_list_find_name(&r->nics, r->ex.ifname);
	if (!n)
		return np_error_set(err, NP_EK8S, 0, "the agreed interface %s is not on this node",
				    r->ex.ifname);
	r->chosen = (int)(n - r->nics.v);
	/* Every rail's interface, the first rail's being r->chosen. */
	for (size_t i = 0; i < r->ex.n_rails && i < EXCHANGE_RAILS_MAX; i++) {
		const struct nic *ri = nic_list_find_name(&r->nics, r->ex.rails[i].ifname);
		if (!ri)
			return np_error_set(err, NP_EK8S, 0, "the agreed interface %s is not on this node",
					    r->ex.rails[i].ifname);
		if (!r->ranking.v[ri - r->nics.v].usable)
			return np_error_set(err, NP_EK8S, 0, "the agreed interface %s is not usable here",
					    r->ex.rails[i].ifname);
		x->rails[x->n_rails++] = ri;
	}
	if (!x->n_rails)
		x->rails[x->n_rails++] = n;
	if (!r->ranking.v[r->chosen].usable)
		return np_error_set(err, NP_EK8S, 0, "the agreed interface %s is not usable here",
				    r->ex.ifname);
	if (x->n_rails > 1) {
		char line[256] = "";
		for (size_t i = 0; i < x->n_rails; i++)
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s on %s",
				 i ? ", " : "", r->ex.rails[i].ifname, r->ex.rails[i].network);
		char msg[300];
		snprintf(msg, sizeof(msg), "%zu rails: %s", x->n_rails, line);
		say(x, EXCHANGE_INFO, msg);
	}
	if (r->ex.versions[0]) {
		char line[AGREE_VERSIONS_TEXT_MAX + 64];
		snprintf(line, sizeof(line), "the job's pods differ: %s", r->ex.versions);
		say(x, EXCHANGE_WARN, line);
	}
	/* The job left a network that failed its probe: every pod says so. */
	if (r->ex.probe_warning[0]) {
		char line[sizeof(r->ex.probe_warning) + 64];
		snprintf(line, sizeof(line), "%s; the job uses %s", r->ex.probe_warning, r->ex.network);
		say(x, EXCHANGE_WARN, line);
	}
	select_comm_id(r->ex.root_addr, o->smoke.port, x->comm_id, sizeof(x->comm_id));
	x->plan = (struct select_smoke_plan){
		.rank = r->ex.rank,
		.world = r->ex.world,
		.root_pod = r->ex.root_pod,
		.min_mbps = r->ex.min_mbps,
		.job_skip = r->ex.smoke_skip,
		.label = x->label,
		.train = &r->ex.train,
		.floor = r->ex.floor,
	};
	if (r->ex.pod)
		own_label(r, x->label, sizeof(x->label));
	return 0;
}

/* Alone: this node's best interface; rank 0 of 1, rooted at its own
 * address, judged against its own link. */
static int decide_alone(struct run *x)
{
	struct select_result *r = x->r;
	r->chosen = (int)r->ranking.order[0];
	const struct nic *n = &r->nics.v[r->chosen];
	x->rails[0] = n;
	x->n_rails = 1;
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
	struct outputs_choice *c = &x->choice;
	*c = (struct outputs_choice){ .n_ifaces = x->n_rails,
				      .family = x->r->ranking.v[x->r->chosen].family, .gid_index = -1 };
	x->rail_list[0] = '\0';
	for (size_t i = 0; i < x->n_rails; i++) {
		c->ifaces[i] = x->rails[i]->name;
		snprintf(x->rail_list + strlen(x->rail_list), sizeof(x->rail_list) - strlen(x->rail_list),
			 "%s%s", i ? "," : "", x->rails[i]->name);
	}
	size_t without = 0;
	if (choose_rdma(&x->r->nics, x->rails, x->n_rails, x->hca, sizeof(x->hca), &c->gid_index, &without,
			err) < 0)
		return -1;
	c->ib_hca = x->hca[0] ? x->hca : NULL;
	/* RDMA and rails: NCCL_IB_HCA must cover every rail, or NCCL's IB
	 * transport runs on fewer NICs than the sockets were given. */
	if (without) {
		char line[sizeof(x->hca) + 160];
		snprintf(line, sizeof(line), "NCCL_IB_HCA %s covers %zu of the %zu rails (%s): NCCL's IB "
			 "transport will not use the others", x->hca, x->n_rails - without, x->n_rails,
			 x->rail_list);
		say(x, EXCHANGE_WARN, line);
	}
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
	char dir[SMOKE_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/nccl-debug", o->out_dir);
	env->vars[env->n].key = "NCCL_DEBUG_FILE";
	if (smoke_debug_file(env->vars[env->n++].value, sizeof(env->vars[0].value), dir, "train") < 0)
		return np_error_set(err, NP_EUSAGE, 0, "NCCL_DEBUG_FILE under %s is too long", dir);
	return 0;
}

/* The smoke all-reduce, after every pod's probe passed and before anything
 * is written: a failure leaves no outputs. */
static int smoke(struct run *x, np_error *err)
{
	struct select_result *r = x->r;
	x->plan.comm_id = x->comm_id;
	/* With rails the expected interface is the list: NCCL must use each. */
	x->plan.ifname = x->n_rails > 1 ? x->rail_list : r->nics.v[r->chosen].name;
	x->plan.ib_hca = x->choice.ib_hca;
	x->plan.here = x->here;
	int ret = select_smoke(&x->o->smoke, &x->cx, x->o->out_dir, &x->plan, &x->env, &r->smoke,
			       err);
	if (r->smoke.status != SMOKE_SKIPPED) {
		char line[NP_ERR_MSG_MAX + 64];
		smoke_report_summary(&r->smoke, line, sizeof(line));
		say(x, r->smoke.status == SMOKE_PASSED ? EXCHANGE_INFO : EXCHANGE_WARN, line);
	}
	return ret;
}

/* --tune: the sweep of NCCL's socket settings, every pod at once; the
 * best goes into the outputs only when it beats NCCL's defaults. */
static int tune(struct run *x, np_error *err)
{
	struct select_result *r = x->r;
	if (select_tune_run(&x->o->tune, &x->o->smoke, &x->cx, x->o->out_dir, &x->plan, &x->env,
			    &r->smoke, &r->tune, err) < 0)
		return -1;
	if (r->tune.status != SELECT_TUNE_NOT_RUN) {
		char line[1024];
		select_tune_text(&r->tune, line, sizeof(line));
		say(x, r->tune.status == SELECT_TUNE_SKIPPED ? EXCHANGE_WARN : EXCHANGE_INFO, line);
	}
	return 0;
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
		.tune = &r->tune,
		.env_warnings = &r->env_warnings,
		.agreement = r->agreed ? &r->ex : NULL,
	};
	r->decision = select_decision_json(&d);
	if (!r->decision)
		return np_error_set(err, NP_EINTERNAL, 0, "cannot build decision.json");
	/* The set's id, chosen here so that the result and the Event on the
	 * pod name the set this run wrote. */
	if (o->out_dir && !x->env.decision_id[0])
		outputs_new_id(x->env.decision_id);
	if (o->out_dir && outputs_write(o->out_dir, &x->env, r->decision, o->ctx.deadline_ms,
				      x->cx.made, err) < 0)
		return -1;
	return 0;
}

/* The result annotation and the Event on this pod: NetworkSelected, or
 * NetworkSelectionFailed with the reason.  Failing to post it is only a
 * warning: the outputs (or the exit code) say the rest. */
static void publish(struct run *x, int status, const char *msg)
{
	np_error perr = { 0 };
	/* A run that failed before the exchange (no usable interface, a usage
	 * error that depends on the node) loads the configuration here; a pod
	 * whose name or API server is unknown has nowhere to say it (the
	 * run's own error says the rest). */
	if (!x->have_k8s && k8s_config_load(&x->k8s, &x->o->k8s, &perr) < 0)
		return;
	x->have_k8s = true;
	if (!x->r->ex.pod && !x->k8s.pod_name)
		return;
	bool ok = status == NP_OK;
	const struct select_result *r = x->r;
	const struct smoke_report *s = &r->smoke;
	struct exchange_outcome oc = {
		.ok = ok,
		.status = status,
		.epoch = r->ex.epoch,
		.smoke = s->status == SMOKE_PASSED   ? EXCHANGE_SMOKE_PASSED
			 : s->status == SMOKE_FAILED ? EXCHANGE_SMOKE_FAILED
						     : EXCHANGE_SMOKE_SKIPPED,
		.min_busbw = s->min_busbw > 0 ? s->min_busbw : 0,
		.nccl = s->ran ? s->result.nccl_version : 0,
		.warnings = (int)r->env_warnings.n,
	};
	if (!ok)
		snprintf(oc.reason, sizeof(oc.reason), "%s", msg);
	if (s->ran && s->result.n_sizes) {
		oc.has_busbw = true;
		oc.busbw = s->result.sizes[s->result.n_sizes - 1].busbw_gbps;
	}
	if (s->ran && s->links.n_named && s->links_text[0]) {
		snprintf(oc.suspect, sizeof(oc.suspect), "%s", s->links_text);
		for (size_t i = 0; i < s->links.n_named && i < EXCHANGE_SUSPECTS_MAX; i++) {
			if (s->links.both[i])
				oc.slow_nodes[oc.n_slow_nodes++] = s->links.named[i];
			else
				oc.slow_link_ends[oc.n_slow_link_ends++] = s->links.named[i];
		}
	}
	if (r->env_warnings.n)
		jobs_env_warning_text(&r->env_warnings.v[0], oc.warning, sizeof(oc.warning));
	if (ok)
		snprintf(oc.decision_id, sizeof(oc.decision_id), "%s", x->env.decision_id);
	char *outcome = NULL;
	if (exchange_outcome_to_json(&oc, &outcome, &perr) < 0)
		say(x, EXCHANGE_WARN, perr.msg);
	perr = (np_error){ 0 };
	struct exchange_opts xo = exchange_opts(x);
	/* Stopped by a signal: say so, but within the second the stop allows. */
	if (np_cancelled(xo.cancel) && xo.deadline_ms > np_now_ms() + PUBLISH_STOPPED_MS)
		xo.deadline_ms = np_now_ms() + PUBLISH_STOPPED_MS;
	exchange_publish_result(&xo, &x->r->ex, status, msg, outcome, &perr);
	free(outcome);
	if (perr.msg[0])
		say(x, EXCHANGE_WARN, perr.msg);
}

/* "NCCL uses eth1 (10.9.0.1) on 10.9.0.0/24, agreed by 8 pods ...". */
static void selected_text(const struct run *x, char *msg, size_t len)
{
	const struct select_result *r = x->r;
	char sm[NP_ERR_MSG_MAX];
	smoke_report_summary(&r->smoke, sm, sizeof(sm));
	char rails[EXCHANGE_RAILS_MAX * (IFNAMSIZ + AGREE_NET_TEXT_MAX + 8)] = "";
	for (size_t i = 1; i < r->ex.n_rails && i < EXCHANGE_RAILS_MAX; i++)
		snprintf(rails + strlen(rails), sizeof(rails) - strlen(rails), " and %s (%s) on %s",
			 r->ex.rails[i].ifname, r->ex.rails[i].addr, r->ex.rails[i].network);
	/* The output set's id comes before the long parts (the smoke test's
	 * figures, the warnings), so that it stays within an Event's 1024
	 * bytes (lib/k8s/events.c cuts the rest). */
	char id[EXCHANGE_DECISION_ID_MAX + 16] = "";
	if (x->env.decision_id[0])
		snprintf(id, sizeof(id), "; decision %s", x->env.decision_id);
	snprintf(msg, len, "NCCL uses %s (%s) on %s%s, agreed by %zu pods%s%s; %s",
		 r->nics.v[r->chosen].name, r->ex.addr, r->ex.network, rails, r->ex.n_pods,
		 r->ex.next_pod[0] ? " and probed around the ring" : "", id, sm);
	if (r->ex.probe_warning[0]) {
		size_t n = strlen(msg);
		snprintf(msg + n, len - n, "; warning: %s", r->ex.probe_warning);
	}
	if (r->ex.versions[0]) {
		size_t n = strlen(msg);
		snprintf(msg + n, len - n, "; warning: the job's pods differ: %s", r->ex.versions);
	}
	if (r->ex.floor[0]) {
		size_t n = strlen(msg);
		snprintf(msg + n, len - n, "; warning: %s", r->ex.floor);
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
	if (choose_outputs(x, err) < 0 || smoke(x, err) < 0 || tune(x, err) < 0 ||
	    check_pod_env(x, err) < 0)
		return -1;
	/* A run stopped now writes nothing (one stopped later has the new set
	 * in force, or the old: lib/outputs). */
	int sig = np_cancelled(x->o->ctx.cancel);
	if (sig)
		return np_error_cancelled(err, sig, "deciding");
	return write_outputs(x, err);
}

int select_run(const struct select_opts *o, struct select_result *r, np_error *err)
{
	struct run x = { .o = o, .r = r, .cx = o->ctx };
	x.cx.made = &x.made;
	int ret = run(&x, err);
	/* A failed run leaves no out-dir of its own making behind, empty as
	 * if a result were on its way (one that holds NCCL's log for
	 * --nccl-debug stays). */
	if (ret < 0)
		outputs_unmake(&x.made);
	if (ret == 0 && r->agreed) {
		char msg[1536 + AGREE_VERSIONS_TEXT_MAX + sizeof(r->ex.probe_warning)];
		selected_text(&x, msg, sizeof(msg));
		publish(&x, NP_OK, msg);
	} else if (ret < 0 && o->peers_k8s && (r->ex.pod || err->status != NP_EK8S)) {
		/* Every failure once this pod is known, on every pod, says why on
		 * it; also one before the exchange read the pod, unless the API
		 * itself failed: then there is nothing to post it through. */
		int sig = np_cancelled(o->ctx.cancel);
		publish(&x, sig ? 128 + sig : err->status ? err->status : NP_EINTERNAL, err->msg);
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
