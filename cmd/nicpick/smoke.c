/* nicpick smoke: the all-reduce alone, from a finished out-dir or, outside
 * Kubernetes, from --rank/--world-size/--comm-id and the environment. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "select/decision.h"
#include "util/clock.h"

static int set_rank(struct cli *c, const char *a)
{
	return cli_long("rank", a, 0, (1L << 20) - 1, "expected 0 or more", &c->rank);
}

static int set_world_size(struct cli *c, const char *a)
{
	return cli_long("world-size", a, 1, 1L << 20, "expected 1 or more", &c->world);
}

static const struct cli_opt opts[] = {
	{ NULL, 0, "--rank R --world-size N --comm-id ADDR:PORT [--interface IF]",
	  "smoke outside Kubernetes: NCCL_COMM_ID semantics, rank 0\n"
	  "hosts the bootstrap; NCCL settings from the environment",
	  CLI_SEC_SMOKE, CLI_SMOKE, .set = NULL },
	{ "rank", required_argument, NULL, NULL, CLI_SEC_SMOKE, CLI_SMOKE, .set = set_rank },
	{ "world-size", required_argument, NULL, NULL, CLI_SEC_SMOKE, CLI_SMOKE, .set = set_world_size },
	{ "comm-id", required_argument, NULL, NULL, CLI_SEC_SMOKE, CLI_SMOKE, CLI_STR(comm_id) },
	{ "interface", required_argument, NULL, NULL, CLI_SEC_SMOKE, CLI_SMOKE, CLI_STR(interface) },
	CLI_OPT_END,
};

static int check_args(const struct cli *c, bool standalone)
{
	if (standalone && (!c->comm_id || c->rank < 0 || c->world < 1))
		return cli_usage_error("%s", "smoke: --rank, --world-size and --comm-id go together");
	if (standalone && c->rank >= c->world)
		return cli_usage_error("smoke: --rank %ld is not below --world-size %ld", c->rank, c->world);
	if (!standalone && !c->sel.out_dir)
		return cli_usage_error("%s", "smoke: --out-dir DIR (a finished select) or --rank/--world-size/--comm-id");
	if (!standalone && c->interface)
		return cli_usage_error("%s", "smoke: --interface goes with --comm-id; --out-dir names its own");
	return 0;
}

static void print_json(const struct smoke_report *rep)
{
	json_t *j = select_decision_smoke_json(rep);
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	if (text)
		printf("%s\n", text);
	free(text);
	json_decref(j);
}

static int run(int argc, char **argv)
{
	struct cli cli;
	int rc = cli_parse(argc, argv, &cli_smoke, &cli);
	if (rc)
		return rc;
	bool standalone = cli.comm_id || cli.rank >= 0 || cli.world > 0;
	if ((rc = check_args(&cli, standalone)) != 0)
		return rc;

	np_error err = { 0 };
	struct select_opts *o = &cli.sel;
	struct select_ctx cx = { .deadline_ms = np_now_ms() + cli.timeout * 1000, .log = cli_log_line,
				 .cancel = cli_catch_signals() };
	o->smoke.mode = SELECT_SMOKE_REQUIRED; /* nothing to skip to */
	cli_smoke_env(&o->smoke);

	static struct select_smoke_alone s;
	char tmp_dir[256] = "";
	if (standalone) {
		if (!o->out_dir) {
			const char *t = getenv("TMPDIR");
			int len = snprintf(tmp_dir, sizeof(tmp_dir), "%s/nicpick-smoke.XXXXXX",
					   t && *t ? t : "/tmp");
			if (len < 0 || (size_t)len >= sizeof(tmp_dir))
				return cli_usage_error("TMPDIR is longer than %zu characters: set a shorter "
						       "one, or give --out-dir",
						       sizeof(tmp_dir) - 24);
			if (!mkdtemp(tmp_dir)) {
				np_error_set(&err, NP_EINTERNAL, errno, "cannot create %s", tmp_dir);
				return cli_fail(&err);
			}
			o->out_dir = tmp_dir;
		}
		rc = select_smoke_alone_args((int)cli.rank, (int)cli.world, cli.comm_id, cli.interface,
					     getenv("NCCL_SOCKET_IFNAME"), &s, &err);
	} else {
		rc = select_smoke_alone_outdir(o->out_dir, &s, &err);
	}
	if (rc < 0) {
		if (tmp_dir[0])
			rmdir(tmp_dir);
		return cli_fail(&err);
	}
	struct smoke_report rep = { 0 };
	rc = select_smoke(&o->smoke, &cx, o->out_dir, &s.plan, &s.env, &rep, &err);
	if (cli.json)
		print_json(&rep);
	if (tmp_dir[0])
		rmdir(tmp_dir);
	if (rc < 0)
		return cli_fail(&err);
	char line[NP_ERR_MSG_MAX + 64];
	smoke_report_summary(&rep, line, sizeof(line));
	if (cli_log_fmt == NP_LOG_TEXT)
		fprintf(stderr, "nicpick: %s\n", line);
	else
		cli_emit("info", "smoke", true, line, NULL, 0);
	return 0;
}

const struct cli_verb cli_smoke = {
	.name = "smoke",
	.bit = CLI_SMOKE,
	.synopsis = { "nicpick smoke --out-dir DIR [OPTIONS...]",
		      "nicpick smoke --rank R --world-size N --comm-id ADDR:PORT [--interface IF]" },
	.opts = opts,
	.run = run,
};
