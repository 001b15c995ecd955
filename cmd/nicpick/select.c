/* nicpick select: its options (and those it shares with discover and
 * smoke, which are declared here), and the report of what it chose. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "policy/policy.h"
#include "smoke/smoke.h"
#include "util/clock.h"

static int set_peers(struct cli *c, const char *a)
{
	static const char *const words[] = { "k8s", "none", NULL };
	int w, rc = cli_word("peers", a, words, &w);
	if (rc == 0)
		c->sel.peers_k8s = w == 0;
	return rc;
}

static int set_timeout(struct cli *c, const char *a)
{
	return cli_long("timeout", a, 1, 86400, "expected seconds, 1 to 86400", &c->timeout);
}

static int set_smoke(struct cli *c, const char *a)
{
	static const char *const words[] = { "off", "auto", "required", NULL };
	static const enum select_smoke_mode modes[] = { SELECT_SMOKE_OFF, SELECT_SMOKE_AUTO,
							SELECT_SMOKE_REQUIRED };
	int w, rc = cli_word("smoke", a, words, &w);
	if (rc == 0)
		c->sel.smoke.mode = modes[w];
	return rc;
}

static int set_smoke_port(struct cli *c, const char *a)
{
	return cli_int("smoke-port", a, 1, 65535, "expected 1 to 65535", &c->sel.smoke.port);
}

static int set_smoke_bytes(struct cli *c, const char *a)
{
	if (cli_parse_bytes(a, SMOKE_MIN_BYTES, 1L << 34, &c->sel.smoke.bytes) < 0)
		return cli_usage_error("--smoke-bytes '%s': expected bytes (K, M, G suffixes), 4K to 16G", a);
	return 0;
}

static int set_smoke_timeout(struct cli *c, const char *a)
{
	return cli_int("smoke-timeout", a, 1, 86400, "expected seconds, 1 to 86400",
		       &c->sel.smoke.timeout_s);
}

static int set_tune(struct cli *c, const char *a)
{
	static const char *const words[] = { "off", "on", NULL };
	int w, rc = cli_word("tune", a, words, &w);
	if (rc == 0)
		c->sel.tune.mode = w ? SELECT_TUNE_ON : SELECT_TUNE_OFF;
	return rc;
}

static int set_tune_budget(struct cli *c, const char *a)
{
	return cli_int("tune-budget", a, 5, 600, "expected seconds, 5 to 600", &c->sel.tune.budget_s);
}

static int set_min_busbw(struct cli *c, const char *a)
{
	char *end;
	errno = 0;
	double g = strtod(a, &end);
	if (errno || end == a || *end || !(g > 0) || g > 100000)
		return cli_usage_error("--min-busbw '%s': expected GB/s, e.g. 2.5", a);
	c->sel.smoke.min_busbw = g;
	return 0;
}

static int set_slow_link(struct cli *c, const char *a)
{
	static const char *const words[] = { "warn", "fail", NULL };
	int w, rc = cli_word("slow-link", a, words, &w);
	if (rc == 0)
		c->sel.smoke.slow_link_fail = w == 1;
	return rc;
}

static int set_train_container(struct cli *c, const char *a)
{
	struct select_smoke_opts *s = &c->sel.smoke;
	if (!*a)
		return cli_usage_error("--train-container: expected a container name");
	if (s->n_train_names == JOBS_TRAIN_NAMES_MAX)
		return cli_usage_error("--train-container: at most %d", JOBS_TRAIN_NAMES_MAX);
	s->train_names[s->n_train_names++] = a;
	return 0;
}

/* The policy's own parsers say what is wrong with a value. */
#define POLICY_SETTER(fn, setter)                                   \
	static int fn(struct cli *c, const char *a)                 \
	{                                                           \
		np_error err = { 0 };                               \
		return setter(&c->sel.policy, a, &err) < 0 ? cli_fail(&err) : 0; \
	}
POLICY_SETTER(set_include, policy_set_include)
POLICY_SETTER(set_exclude, policy_set_exclude)
POLICY_SETTER(set_cidr, policy_set_cidr)
POLICY_SETTER(set_family, policy_set_family)
POLICY_SETTER(set_min_speed, policy_set_min_speed)

static int set_expect(struct cli *c, const char *a)
{
	return cli_int("expect", a, 1, 100000, "expected a pod count, 1 to 100000", &c->sel.ex.expect);
}

static int set_probe_port(struct cli *c, const char *a)
{
	return cli_int("probe-port", a, 1, 65535, "expected 1 to 65535", &c->sel.ex.probe_port);
}

static int set_probe_throughput(struct cli *c, const char *a)
{
	c->sel.ex.probe_throughput_bytes = 16L << 20;
	if (a && cli_parse_long(a, 1, 1L << 34, &c->sel.ex.probe_throughput_bytes) < 0)
		return cli_usage_error("--probe-throughput='%s': expected bytes", a);
	return 0;
}

/* --rails N|auto (1: one network). */
static int set_rails(struct cli *c, const char *a)
{
	if (strcmp(a, "auto") == 0) {
		c->sel.ex.agree.max_rails = AGREE_RAILS_AUTO;
		return 0;
	}
	return cli_int("rails", a, 1, EXCHANGE_RAILS_MAX, "expected auto or 1 to 4",
		       &c->sel.ex.agree.max_rails);
}

static int set_log_interval(struct cli *c, const char *a)
{
	int rc = cli_int("log-interval", a, 1, 3600, "expected seconds", &c->sel.ex.log_interval_ms);
	c->sel.ex.log_interval_ms *= 1000;
	return rc;
}

static int set_out_dir(struct cli *c, const char *a)
{
	if (!*a)
		return cli_usage_error("%s", "--out-dir '': an empty path; name the directory the "
					     "training container mounts (e.g. /nicpick)");
	if (strlen(a) > SELECT_OUT_DIR_MAX)
		return cli_usage_error("--out-dir: a path of %zu bytes; at most %d", strlen(a),
				       SELECT_OUT_DIR_MAX);
	c->sel.out_dir = a;
	return 0;
}

static int set_pod_name(struct cli *c, const char *a)
{
	c->sel.k8s.pod_name = a;
	cli_log_pod_name = a;
	return 0;
}

#define SEL CLI_SELECT
#define SEL_SMOKE (CLI_SELECT | CLI_SMOKE)
#define SEL_DISC (CLI_SELECT | CLI_DISCOVER)

static const struct cli_opt opts[] = {
	{ "out-dir", required_argument, "--out-dir DIR",
	  "write nccl.env, nccl.conf and decision.json into DIR", CLI_SEC_SELECT, SEL_SMOKE,
	  .set = set_out_dir },
	{ "peers", required_argument, "--peers k8s|none",
	  "agree with the job's pods through the Kubernetes API,\nor decide on this node alone (default: none)",
	  CLI_SEC_SELECT, SEL, .set = set_peers },
	{ "timeout", required_argument, "--timeout SEC",
	  "overall deadline (default 300); nicpick never waits longer", CLI_SEC_SELECT, SEL_SMOKE,
	  .set = set_timeout },
	{ "smoke", required_argument, "--smoke off|auto|required",
	  "the NCCL smoke all-reduce over the agreed network before\n"
	  "anything is written (default auto: run when this pod has\n"
	  "a GPU, its driver and libnccl, else skip and say why)",
	  CLI_SEC_SELECT, SEL, .set = set_smoke },
	{ "smoke-port", required_argument, "--smoke-port PORT",
	  "NCCL_COMM_ID port on the gatherer's agreed address (default 29418)", CLI_SEC_SMOKE, SEL,
	  .set = set_smoke_port },
	{ "smoke-bytes", required_argument, "--smoke-bytes BYTES",
	  "the largest all-reduce, e.g. 64M (default 64M)", CLI_SEC_SMOKE, SEL_SMOKE, .set = set_smoke_bytes },
	{ "smoke-timeout", required_argument, "--smoke-timeout SEC",
	  "the smoke step's own bound within --timeout (default 60)", CLI_SEC_SMOKE, SEL_SMOKE,
	  .set = set_smoke_timeout },
	{ "min-busbw", required_argument, "--min-busbw GBPS",
	  "slower is a failure (default: 5% of the slowest agreed link)", CLI_SEC_SMOKE, SEL_SMOKE,
	  .set = set_min_busbw },
	{ "tune", required_argument, "--tune off|on",
	  "after the smoke step, measure NCCL_SOCKET_NTHREADS x\n"
	  "NCCL_NSOCKS_PERTHREAD against NCCL's defaults on every pod at\n"
	  "once and write the best only if it beats them (default off)",
	  CLI_SEC_SMOKE, SEL, .set = set_tune },
	{ "tune-budget", required_argument, "--tune-budget SEC",
	  "the sweep's bound: as many runs as fit (default 15)", CLI_SEC_SMOKE, SEL,
	  .set = set_tune_budget },
	{ "slow-link", required_argument, "--slow-link warn|fail",
	  "with 3 or more pods, a node whose ring links measure below half\n"
	  "the fastest link is named: a warning (default) or exit 6", CLI_SEC_SMOKE, SEL_SMOKE,
	  .set = set_slow_link },
	{ "train-container", required_argument, "--train-container NAME",
	  "the training container whose delivery the smoke test copies\n"
	  "(repeatable; default: the containers that mount the out-dir)", CLI_SEC_SMOKE, SEL,
	  .set = set_train_container },
	{ "nccl-debug", no_argument, "--nccl-debug",
	  "keep NCCL's log in DIR/nccl-debug and make training log there too", CLI_SEC_SMOKE, SEL_SMOKE,
	  CLI_FLAG(sel.smoke.nccl_debug) },
	{ "include", required_argument, "--include LIST",
	  "NCCL list syntax: eth,ens (prefixes), =eth1 (exact), ^docker (exclude)", CLI_SEC_POLICY,
	  SEL_DISC, .set = set_include },
	{ "exclude", required_argument, "--exclude LIST",
	  "interface names or prefixes to refuse (=name for exact)", CLI_SEC_POLICY, SEL_DISC,
	  .set = set_exclude },
	{ "cidr", required_argument, "--cidr CIDR", "only addresses inside CIDR", CLI_SEC_POLICY,
	  SEL_DISC, .set = set_cidr },
	{ "family", required_argument, "--family inet|inet6", "only this address family",
	  CLI_SEC_POLICY, SEL_DISC, .set = set_family },
	{ "min-speed", required_argument, "--min-speed MBPS",
	  "refuse slower links and links of unknown speed", CLI_SEC_POLICY, SEL_DISC, .set = set_min_speed },
	{ "expect", required_argument, "--expect N",
	  "pods in the job (env NICPICK_EXPECT; default: the Job's completions)", CLI_SEC_AGREE, SEL,
	  .set = set_expect },
	{ "selector", required_argument, "--selector SEL",
	  "label selector of the job's pods (default: from this pod's labels)", CLI_SEC_AGREE, SEL,
	  CLI_STR(sel.ex.selector) },
	{ "leader-selector", required_argument, "--leader-selector SEL",
	  "the pod that gathers the reports (default: the job's index 0)", CLI_SEC_AGREE, SEL,
	  CLI_STR(sel.ex.leader_selector) },
	{ "probe-port", required_argument, "--probe-port PORT",
	  "TCP port of the ring probe (default 29417)", CLI_SEC_AGREE, SEL, .set = set_probe_port },
	{ "probe-throughput", optional_argument, "--probe-throughput[=BYTES]",
	  "measure throughput to rank networks of equal speed (default 16 MiB)", CLI_SEC_AGREE, SEL,
	  .set = set_probe_throughput },
	{ "rails", required_argument, "--rails N|auto",
	  "use up to N networks of the same quality together (NCCL and\n"
	  "Gloo get one interface on each); 1: one network (default auto:\n"
	  "every network as fast and as good as the best, on every pod)",
	  CLI_SEC_AGREE, SEL, .set = set_rails },
	{ "log-interval", required_argument, "--log-interval SEC",
	  "progress lines while waiting (default 5)", CLI_SEC_AGREE, SEL, .set = set_log_interval },
	{ "strict-env", no_argument, "--strict-env",
	  "fail (exit 2) when a container of this pod sets NCCL_SOCKET_IFNAME,\n"
	  "NCCL_IB_HCA, GLOO_SOCKET_IFNAME, NCCL_CONF_FILE or NCCL_SOCKET_FAMILY\n"
	  "to a value that overrides the outputs (default: a warning)",
	  CLI_SEC_AGREE, SEL, CLI_FLAG(sel.strict_env) },
	{ "strict", no_argument, "--strict",
	  "fail (exit 4) when the preferred network fails its probe, instead\n"
	  "of moving the job to the next network with a warning",
	  CLI_SEC_AGREE, SEL, CLI_FLAG(sel.ex.strict) },
	{ "require-same-versions", no_argument, "--require-same-versions",
	  "fail (exit 6) before the smoke test when the pods' NCCL, CUDA\n"
	  "driver or runtime, or GPU model differ (default: a warning)",
	  CLI_SEC_AGREE, SEL, CLI_FLAG(sel.ex.require_same_versions) },
	{ NULL, 0, "--api-server URL --ca-file F --token-file F --namespace NS --pod-name NAME",
	  "outside a cluster (default: in-cluster config, POD_NAME)", CLI_SEC_AGREE, SEL, .set = NULL },
	{ "api-server", required_argument, NULL, NULL, CLI_SEC_AGREE, SEL, CLI_STR(sel.k8s.api_server) },
	{ "ca-file", required_argument, NULL, NULL, CLI_SEC_AGREE, SEL, CLI_STR(sel.k8s.ca_file) },
	{ "token-file", required_argument, NULL, NULL, CLI_SEC_AGREE, SEL, CLI_STR(sel.k8s.token_file) },
	{ "namespace", required_argument, NULL, NULL, CLI_SEC_AGREE, SEL, CLI_STR(sel.k8s.namespace) },
	{ "pod-name", required_argument, NULL, NULL, CLI_SEC_AGREE, SEL, .set = set_pod_name },
	{ "insecure-skip-tls-verify", no_argument, "--insecure-skip-tls-verify",
	  "labs only: do not verify the API server's certificate", CLI_SEC_AGREE, SEL, CLI_FLAG(sel.k8s.insecure_skip_tls_verify) },
	{ "snapshot", required_argument, "--snapshot FILE",
	  "decide from a saved `nicpick discover --json`", CLI_SEC_SOURCES, SEL_DISC, CLI_STR(sel.snapshot) },
	{ "sysfs", required_argument, "--sysfs DIR", "read sysfs from DIR instead of /sys",
	  CLI_SEC_SOURCES, SEL_DISC, CLI_STR(sel.src.sysfs_root) },
	{ "netlink-json", required_argument, "--netlink-json FILE",
	  "read links and addresses from FILE (`ip -d -j addr show`)\ninstead of netlink",
	  CLI_SEC_SOURCES, SEL_DISC, CLI_STR(sel.src.netlink_json) },
	CLI_OPT_END,
};

/* A multi-line table: as it is in text, one record in JSON. */
static void emit_table(const char *what, const char *table)
{
	if (cli_log_fmt == NP_LOG_TEXT) {
		fputs(table, stderr);
		return;
	}
	struct np_log_field f = { "table", table };
	cli_emit("info", "select", false, what, &f, 1);
}

static void emit_env_warnings(const struct jobs_env_warnings *w)
{
	for (size_t i = 0; i < w->n; i++) {
		char text[1024];
		jobs_env_warning_text(&w->v[i], text, sizeof(text));
		struct np_log_field f[] = { { "container", w->v[i].container },
					    { "variable", w->v[i].var },
					    { "value", w->v[i].value },
					    { "nicpick", w->v[i].want } };
		cli_emit("warning", "envcheck", true, text, f, 4);
	}
}

/* Exit 4: which pod lacked what. */
static void print_pod_table(FILE *out, const struct agree_decision *d)
{
	if (!d->n_table)
		return;
	fprintf(out, "%-32s %-48s %s\n", "POD", "CANDIDATES", "WHY");
	for (size_t i = 0; i < d->n_table; i++)
		fprintf(out, "%-32s %-48s %s\n", d->table[i].pod, d->table[i].cands, d->table[i].why);
	if (d->table_total > d->n_table)
		fprintf(out, "... and %zu more pods\n", d->table_total - d->n_table);
}

/* What made the choice fail, beyond the error line; true when it showed
 * the table the error line may point at. */
static bool report_failure(const struct select_result *r, const np_error *err)
{
	bool shown = false;
	emit_env_warnings(&r->env_warnings);
	/* This pod's table, when it is this pod's interfaces that failed (a
	 * follower told that its gatherer failed has its own usable). */
	if (err->status == NP_ENOIFACE && r->ranking.n_usable == 0 && r->nics.n > 0) {
		char *t = select_render_table(&r->nics, &r->ranking);
		if (t)
			emit_table("the interface table: why each was refused", t);
		shown = t != NULL;
		free(t);
	}
	if (err->status == NP_ENOCOMMON && r->ex.has_decision) {
		char *t = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&t, &len);
		if (m) {
			print_pod_table(m, &r->ex.decision);
			fclose(m);
		}
		if (t && *t) {
			emit_table("the pods' candidates: which network each lacks", t);
			shown = true;
		}
		free(t);
	}
	return shown;
}

static void report_choice(const struct select_result *r, const char *out_dir)
{
	emit_env_warnings(&r->env_warnings);
	const struct nic *n = &r->nics.v[r->chosen];
	const struct policy_verdict *v = &r->ranking.v[r->chosen];
	const char *ifname = n->name;
	const char *cls = nic_class_name(n->cls);
	const char *addr = v->addr >= 0 ? n->addrs[v->addr].text : "no address";
	char line[NP_ERR_MSG_MAX + 64] = "";
	if (r->smoke.status == SMOKE_SKIPPED)
		smoke_report_summary(&r->smoke, line, sizeof(line));
	if (cli_log_fmt == NP_LOG_TEXT) {
		fprintf(stderr, "nicpick: chose %s (%s, %s) — wrote %s/nccl.env, nccl.conf, decision.json\n",
			ifname, cls, addr, out_dir);
		if (line[0])
			fprintf(stderr, "nicpick: %s\n", line);
		return;
	}
	char msg[1024];
	snprintf(msg, sizeof(msg), "chose %s (%s, %s)", ifname, cls, addr ? addr : "-");
	struct np_log_field f[] = { { "interface", ifname }, { "class", cls },
				    { "address", addr ? addr : "" }, { "out_dir", out_dir } };
	if (line[0])
		cli_emit("info", "smoke", true, line, NULL, 0);
	cli_emit("info", "outputs", true, msg, f, 4);
}

static int run(int argc, char **argv)
{
	struct cli cli;
	int rc = cli_parse(argc, argv, &cli_select, &cli);
	if (rc)
		return rc;
	if (!cli.sel.out_dir)
		return cli_usage_error("%s is required", "select: --out-dir DIR");
	np_error err = { 0 };
	struct select_result r;
	cli.sel.ctx.deadline_ms = np_now_ms() + cli.timeout * 1000;
	cli.sel.ctx.log = cli_log_line;
	cli.sel.ctx.cancel = cli_catch_signals();
	cli_smoke_env(&cli.sel.smoke);
	if (select_run(&cli.sel, &r, &err) < 0) {
		bool shown = report_failure(&r, &err);
		select_result_free(&r);
		return cli_fail_shown(&err, shown);
	}
	report_choice(&r, cli.sel.out_dir);
	select_result_free(&r);
	return 0;
}

const struct cli_verb cli_select = {
	.name = "select",
	.bit = CLI_SELECT,
	.synopsis = { "nicpick select --out-dir DIR [--peers k8s|none] [OPTIONS...]" },
	.opts = opts,
	.run = run,
};
