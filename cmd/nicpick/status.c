/* nicpick status JOB (also `kubectl nicpick status JOB`): the job's network
 * at a glance.  Parses the options, reads kubeconfig, and maps the view to
 * the exit code: 0 decided and proven, 5 waiting or an API error, 3/4/6
 * when the job failed with those, 2 usage.  The work is lib/status. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "k8s/k8s.h"
#include "k8s/kubeconfig.h"
#include "status/status.h"
#include "util/clock.h"

#define ST CLI_STATUS

/* For the usage text and for naming the verb of an option given to
 * another one; status parses its own (it has kubectl's short -n and -o). */
static const struct cli_opt opts[] = {
	{ "kubeconfig", required_argument, "--kubeconfig FILE",
	  "this kubeconfig alone (default: $KUBECONFIG's files merged,\nelse ~/.kube/config)",
	  CLI_SEC_STATUS, ST, .set = NULL },
	{ "context", required_argument, "--context NAME", "the kubeconfig context (default: current-context)",
	  CLI_SEC_STATUS, ST, .set = NULL },
	{ NULL, 0, "-n, --namespace NS", "the job's namespace (default: the context's)", CLI_SEC_STATUS,
	  ST, .set = NULL },
	{ "kind", required_argument, "--kind KIND",
	  "Job, PyTorchJob, JobSet or TrainJob, when JOB names\npods of more than one kind (or has none yet)",
	  CLI_SEC_STATUS, ST, .set = NULL },
	{ "output", required_argument, "-o, --output wide|json", "more columns, or the JSON document",
	  CLI_SEC_STATUS, ST, .set = NULL },
	{ "watch", no_argument, "-w, --watch", "follow the pods until the job is decided or fails",
	  CLI_SEC_STATUS, ST, .set = NULL },
	{ "request-timeout", required_argument, "--request-timeout S",
	  "give up after S seconds (default 30; 0 with --watch: never)", CLI_SEC_STATUS, ST, .set = NULL },
	CLI_OPT_END,
};

enum out_fmt { OUT_TABLE, OUT_WIDE, OUT_JSON };

struct status_args {
	struct k8s_kubeconfig_opts kc;
	const char *job;
	enum status_kind kind;
	enum out_fmt out;
	bool watch;
	long timeout; /* -1: the default */
};

static int parse(int argc, char **argv, struct status_args *a)
{
	static const struct option lo[] = {
		{ "kubeconfig", required_argument, NULL, 'K' }, { "context", required_argument, NULL, 'C' },
		{ "namespace", required_argument, NULL, 'n' },	{ "kind", required_argument, NULL, 'k' },
		{ "output", required_argument, NULL, 'o' },	{ "watch", no_argument, NULL, 'w' },
		{ "request-timeout", required_argument, NULL, 'T' }, { "help", no_argument, NULL, 'h' },
		{ "log-format", required_argument, NULL, 'L' }, /* main.c has read it */
		{ NULL, 0, NULL, 0 },
	};
	memset(a, 0, sizeof(*a));
	a->timeout = -1;
	opterr = 0;
	optind = 1;
	int ch, k;
	while ((ch = getopt_long(argc, argv, ":n:o:wh", lo, NULL)) != -1) {
		const char *name = NULL;
		for (size_t i = 0; optarg && ch != ':' && ch != '?' && lo[i].name && !name; i++)
			if (lo[i].val == ch)
				name = lo[i].name;
		if (name && cli_check_value(name, optarg) != 0)
			return NP_EUSAGE;
		switch (ch) {
		case 'K':
			a->kc.path = optarg;
			break;
		case 'C':
			a->kc.context = optarg;
			break;
		case 'n':
			a->kc.namespace = optarg;
			break;
		case 'k':
			if ((k = status_kind_parse(optarg)) < 0)
				return cli_usage_error("--kind '%s': expected Job, PyTorchJob, JobSet or TrainJob",
						       optarg);
			a->kind = (enum status_kind)k;
			break;
		case 'o':
			if (strcmp(optarg, "wide") == 0)
				a->out = OUT_WIDE;
			else if (strcmp(optarg, "json") == 0)
				a->out = OUT_JSON;
			else
				return cli_usage_error("-o '%s': expected wide or json", optarg);
			break;
		case 'w':
			a->watch = true;
			break;
		case 'T':
			if (cli_long("request-timeout", optarg, 0, 86400, "expected seconds, 0 to 86400",
				     &a->timeout) != 0)
				return NP_EUSAGE;
			break;
		case 'L': /* its value was read before parsing (main.c); here it is checked */
			if (np_log_format_parse(optarg) < 0)
				return cli_usage_error("--log-format '%s': expected text or json", optarg);
			break;
		case 'h':
			cli_help(&cli_status);
		case ':':
			return cli_usage_error("%s needs a value", argv[optind - 1]);
		default:
			return cli_unknown_option(argv[optind - 1], "status");
		}
	}
	if (optind >= argc)
		return cli_usage_error("status: JOB is required (a Job, PyTorchJob, JobSet or TrainJob name)");
	if (optind + 1 < argc)
		return cli_usage_error("status: expected one JOB, got '%s' too", argv[optind + 1]);
	a->job = argv[optind];
	if (!*a->job)
		return cli_usage_error("status: JOB is empty");
	return 0;
}

/* The error line with status's own next step (cli_fail's are select's). */
static int fail(const np_error *err)
{
	int st = err->status == NP_EUSAGE ? NP_EUSAGE : err->status == NP_EINTERNAL ? NP_EINTERNAL : NP_EK8S;
	const char *next = st == NP_EUSAGE ? "see nicpick --help and the kubeconfig"
			   : st == NP_EK8S ? "check the kubeconfig, the API server and your access"
					   : "check the message above";
	char code[8];
	snprintf(code, sizeof(code), "%d", st);
	if (cli_log_fmt == NP_LOG_JSON) {
		struct np_log_field f[] = { { "exit_code", code }, { "next", next } };
		cli_emit("error", "exit", false, err->msg, f, 2);
	} else {
		char msg[NP_ERR_MSG_MAX + 160];
		snprintf(msg, sizeof(msg), "%s (%s)", err->msg, next);
		cli_emit("error", "exit", false, msg, NULL, 0);
	}
	return st;
}

static int print_view(const struct status_job *j, void *ud)
{
	const struct status_args *a = ud;
	char *s = a->out == OUT_JSON ? status_json(j) : status_text(j, a->out == OUT_WIDE);
	if (!s)
		return 1;
	/* --watch -o json: one document per line, as `kubectl get -w -o json`
	 * prints them one after the other */
	fputs(s, stdout);
	if (a->out == OUT_JSON)
		fputc('\n', stdout);
	else if (a->watch)
		fputc('\n', stdout);
	fflush(stdout);
	free(s);
	return 0;
}

static int run(int argc, char **argv)
{
	struct status_args a;
	int rc = parse(argc, argv, &a);
	if (rc)
		return rc;
	np_error err = { 0 };
	struct k8s_config cfg = { 0 };
	struct k8s_client *k = NULL;
	if (k8s_kubeconfig_load(&cfg, &a.kc, &err) < 0 || k8s_client_new(&k, &cfg, &err) < 0) {
		k8s_config_free(&cfg);
		return fail(&err);
	}
	long t = a.timeout >= 0 ? a.timeout : a.watch ? 0 : 30;
	if (t > 0)
		k8s_client_set_timeout(k, (double)t);
	struct status_job j = { 0 };
	int code;
	if (a.watch) {
		if (status_watch(k, cfg.namespace, a.job, a.kind, print_view, &a, &err) < 0) {
			code = fail(&err);
		} else {
			/* the last view decides the exit code */
			code = status_read(k, cfg.namespace, a.job, a.kind, &j, &err) < 0 ? fail(&err)
											  : j.exit_code;
		}
	} else if (status_read(k, cfg.namespace, a.job, a.kind, &j, &err) < 0) {
		code = fail(&err);
	} else {
		print_view(&j, &a);
		code = j.exit_code;
	}
	status_job_free(&j);
	k8s_client_free(k);
	k8s_config_free(&cfg);
	return code;
}

const struct cli_verb cli_status = {
	.name = "status",
	.bit = CLI_STATUS,
	.synopsis = { "nicpick status JOB [-n NS] [--kind KIND] [-o wide|json] [-w]",
		      "kubectl nicpick status JOB ...   (the same, as a kubectl plugin)" },
	.opts = opts,
	.run = run,
};
