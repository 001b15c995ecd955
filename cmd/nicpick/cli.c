/* What the verbs share: option tables -> getopt and the usage text, the log
 * lines, and the exit codes. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policy/policy.h"
#include "probe/probe.h"
#include "smoke/smoke.h"
#include "util/clock.h"

enum np_log_format cli_log_fmt = NP_LOG_TEXT;
int64_t cli_started_ms;
/* The pod this process runs for, as far as it is known (--pod-name, else
 * POD_NAME from the downward API). */
const char *cli_log_pod_name;

/* ---- options every verb takes ---- */

static int set_log_format(struct cli *c, const char *arg)
{
	if (np_log_format_parse(arg) < 0)
		return cli_usage_error("--log-format '%s': expected text or json", arg);
	cli_log_fmt = (enum np_log_format)np_log_format_parse(arg);
	return 0;
}

static const struct cli_opt common_opts[] = {
	{ "log-format", required_argument, "--log-format text|json",
	  "text (default), or one JSON object per line: time, level,\npod, phase, message, fields",
	  CLI_SEC_LOG, CLI_ALL, .set = set_log_format },
	{ "help", no_argument, NULL, NULL, CLI_SEC_LOG, CLI_ALL, .kind = CLI_HELP },
	CLI_OPT_END,
};

/* ---- the usage text ---- */

static const char *const section_title[CLI_SEC_N] = {
	[CLI_SEC_SELECT] = "select:",
	[CLI_SEC_SMOKE] = "smoke (select and smoke):",
	[CLI_SEC_POLICY] = "policy (discover and select):",
	[CLI_SEC_AGREE] = "agreement (--peers k8s):",
	[CLI_SEC_LOG] = "logging:",
	[CLI_SEC_INSTALL] = "install:",
	[CLI_SEC_STATUS] = "status (also `kubectl nicpick status`):",
	[CLI_SEC_SOURCES] = "sources (tests, offline replay):",
};

/* Whose table holds each option, in the order the usage text walks them
 * within a section. */
static const struct cli_verb *const table_order[] = { &cli_select, &cli_smoke, &cli_discover,
						      &cli_install, &cli_status, NULL /* common_opts */ };
#define N_TABLES (sizeof(table_order) / sizeof(table_order[0]))

static const struct cli_opt *table(size_t i)
{
	return table_order[i] ? table_order[i]->opts : common_opts;
}

#define HELP_COL 25

static void usage_row(FILE *out, const struct cli_opt *o)
{
	size_t w = strlen(o->usage);
	if (w + 3 <= HELP_COL)
		fprintf(out, "  %-*s", HELP_COL - 2, o->usage);
	else
		fprintf(out, "  %s\n%*s", o->usage, HELP_COL, "");
	for (const char *p = o->help; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		fprintf(out, "%.*s\n", (int)n, p);
		if (!nl)
			break;
		p = nl + 1;
		fprintf(out, "%*s", HELP_COL, "");
	}
}

static const char exit_codes[] =
	"exit codes: 0 ok, 1 runtime error, 2 usage, 3 no usable interface,\n"
	"            4 no common network, 5 Kubernetes API error or deadline, 6 smoke failed\n";
static const char status_codes[] =
	"status:     0 decided and proven, 5 still waiting or an API error,\n"
	"            3/4/6 the job failed with that code, 2 usage\n";

/* A row of the usage text, for every verb (verb NULL) or for one: an
 * option it takes, or a row of its own table. */
static bool shown(const struct cli_opt *o, size_t t, const struct cli_verb *verb)
{
	return o->usage && o->help &&
	       (!verb || (o->verbs & verb->bit) || table_order[t] == verb);
}

static size_t section_rows(int s, const struct cli_verb *verb)
{
	size_t n = 0;
	for (size_t t = 0; t < N_TABLES; t++)
		for (const struct cli_opt *o = table(t); o->name || o->usage; o++)
			n += o->section == (enum cli_section)s && shown(o, t, verb);
	return n;
}

/* The whole text (verb NULL), or one verb's, from the same tables: the
 * whole text shows every section, a verb's the ones it has rows in. */
static void print_usage(FILE *out, const struct cli_verb *verb)
{
	const char *lead = "usage: ";
	for (size_t v = 0; cli_verbs[v]; v++)
		for (size_t i = 0; i < 2 && cli_verbs[v]->synopsis[i]; i++)
			if (!verb || cli_verbs[v] == verb) {
				fprintf(out, "%s%s\n", lead, cli_verbs[v]->synopsis[i]);
				lead = "       ";
			}
	size_t rows = 0;
	for (int s = 0; s < CLI_SEC_N; s++)
		rows += section_rows(s, verb);
	/* version: its synopsis is all there is to say */
	if (verb && !rows)
		return;
	fputc('\n', out);
	for (int s = 0; s < CLI_SEC_N; s++) {
		if (verb && !section_rows(s, verb))
			continue;
		fprintf(out, "%s\n", section_title[s]);
		for (size_t t = 0; t < N_TABLES; t++)
			for (const struct cli_opt *o = table(t); o->name || o->usage; o++)
				if (o->section == (enum cli_section)s && shown(o, t, verb))
					usage_row(out, o);
	}
	fputc('\n', out);
	if (verb != &cli_status)
		fputs(exit_codes, out);
	if (!verb || verb == &cli_status)
		fputs(status_codes, out);
}

void cli_print_usage(FILE *out)
{
	print_usage(out, NULL);
}

void cli_help(const struct cli_verb *verb)
{
	print_usage(stdout, verb);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		np_error err = { 0 };
		np_error_set(&err, NP_EINTERNAL, errno ? errno : EIO, "cannot write to standard output");
		exit(cli_fail(&err));
	}
	exit(0);
}

/* ---- parsing ---- */

#define OPTS_MAX 96

/* With --nccl-debug NCCL's log is already kept: an error says where, not
 * "rerun with --nccl-debug" (set by cli_parse). */
static char smoke_kept[4200];

int cli_parse(int argc, char **argv, const struct cli_verb *verb, struct cli *c)
{
	memset(c, 0, sizeof(*c));
	policy_init(&c->sel.policy);
	c->sel.smoke.mode = SELECT_SMOKE_AUTO;
	c->sel.smoke.port = SMOKE_DEFAULT_PORT;
	c->sel.smoke.timeout_s = 60;
	c->rank = -1;
	c->timeout = 300;
	c->sel.ex.probe_port = PROBE_DEFAULT_PORT;
	c->sel.ex.log_interval_ms = 5000;
	c->sel.ex.agree.max_rails = AGREE_RAILS_AUTO; /* README: Rails */

	/* Every verb's options are known to getopt, so that one given to the
	 * wrong verb is named with the verb it belongs to. */
	static struct option lo[OPTS_MAX + 1];
	static const struct cli_opt *opt_of[OPTS_MAX];
	static const char *home_of[OPTS_MAX];
	size_t n = 0;
	for (size_t t = 0; t < N_TABLES; t++)
		for (const struct cli_opt *o = table(t); (o->name || o->usage) && n < OPTS_MAX; o++) {
			if (!o->name)
				continue;
			lo[n] = (struct option){ o->name, o->has_arg, NULL, 256 + (int)n };
			opt_of[n] = o;
			home_of[n] = table_order[t] ? table_order[t]->name : NULL;
			n++;
		}
	lo[n] = (struct option){ 0 };

	opterr = 0;
	optind = 1;
	int ch, rc;
	while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		if (ch >= 256) {
			const struct cli_opt *o = opt_of[ch - 256];
			if (!(o->verbs & verb->bit))
				return cli_usage_error("--%s is an option of '%s'", o->name, home_of[ch - 256]);
			if ((rc = cli_check_value(o->name, optarg)) != 0)
				return rc;
			if (o->kind == CLI_STRING)
				*(const char **)((char *)c + o->at) = optarg;
			else if (o->kind == CLI_TRUE)
				*(bool *)((char *)c + o->at) = true;
			else if (o->kind == CLI_HELP)
				cli_help(verb);
			else if ((rc = o->set(c, optarg)) != 0)
				return rc;
			continue;
		}
		switch (ch) {
		case 'h':
			cli_help(verb);
		case ':':
			return cli_usage_error("%s needs a value", argv[optind - 1]);
		default:
			return cli_unknown_option(argv[optind - 1], NULL);
		}
	}
	if (optind < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind]);
	/* NICPICK_EXPECT: --expect's value where the verb takes it and the
	 * flag is not given. */
	const char *env_expect = getenv("NICPICK_EXPECT");
	for (size_t i = 0; i < n && env_expect && *env_expect && !c->sel.ex.expect; i++) {
		if (strcmp(lo[i].name, "expect") != 0 || !(opt_of[i]->verbs & verb->bit))
			continue;
		long e;
		if (cli_parse_long(env_expect, 1, 100000, &e) < 0)
			return cli_usage_error("NICPICK_EXPECT='%s': expected a pod count, 1 to 100000",
					       env_expect);
		c->sel.ex.expect = (int)e;
	}
	if (c->sel.snapshot && (c->sel.src.sysfs_root || c->sel.src.netlink_json))
		return cli_usage_error("%s cannot be combined with --sysfs or --netlink-json", "--snapshot");
	/* NCCL_DEBUG_FILE names OUT/nccl-debug for the training container,
	 * which has another working directory. */
	if (c->sel.smoke.nccl_debug && c->sel.out_dir && c->sel.out_dir[0] != '/')
		return cli_usage_error("--nccl-debug needs an absolute --out-dir ('%s'): training reads "
				       "NCCL_DEBUG_FILE from its own working directory",
				       c->sel.out_dir);
	if (c->sel.smoke.nccl_debug && c->sel.out_dir)
		snprintf(smoke_kept, sizeof(smoke_kept),
			 "the smoke all-reduce failed or could not run; NCCL's log is in %s/nccl-debug",
			 c->sel.out_dir);
	return 0;
}

int cli_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int cli_long(const char *name, const char *a, long min, long max, const char *expect, long *dst)
{
	if (cli_parse_long(a, min, max, dst) < 0)
		return cli_usage_error("--%s '%s': %s", name, a, expect);
	return 0;
}

int cli_int(const char *name, const char *a, long min, long max, const char *expect, int *dst)
{
	long v;
	int rc = cli_long(name, a, min, max, expect, &v);
	if (rc == 0)
		*dst = (int)v;
	return rc;
}

int cli_word(const char *name, const char *a, const char *const *words, int *dst)
{
	size_t n = 0;
	for (; words[n]; n++)
		if (strcmp(a, words[n]) == 0) {
			*dst = (int)n;
			return 0;
		}
	char expect[128] = "";
	for (size_t i = 0; i < n; i++)
		snprintf(expect + strlen(expect), sizeof(expect) - strlen(expect), "%s%s",
			 i == 0 ? "" : i + 1 == n ? " or " : ", ", words[i]);
	return cli_usage_error("--%s '%s': expected %s", name, a, expect);
}

int cli_parse_bytes(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	int shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M' || *end == 'm')
		shift = 20, end++;
	else if (*end == 'G' || *end == 'g')
		shift = 30, end++;
	if (errno || end == s || *end || v < 0 || v > (max >> shift))
		return -1;
	v <<= shift;
	if (v < min)
		return -1;
	*out = v;
	return 0;
}

/* ---- log lines and exit codes ---- */

static const char *log_pod(void)
{
	if (cli_log_pod_name)
		return cli_log_pod_name;
	return getenv("POD_NAME") ? getenv("POD_NAME") : "";
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_emit(const char *level, const char *phase, bool elapsed, const char *msg,
	      const struct np_log_field *fields, size_t n_fields)
{
	struct np_log_record rec = {
		.time_ms = wall_ms(),
		.elapsed_ms = elapsed ? np_now_ms() - cli_started_ms : -1,
		.level = level,
		.pod = log_pod(),
		.phase = phase,
		.message = msg,
		.fields = fields,
		.n_fields = n_fields,
	};
	char *line = np_log_format_line(cli_log_fmt, &rec);
	if (line)
		fputs(line, stderr);
	else
		fprintf(stderr, "nicpick: %s: %s\n", level, msg);
	free(line);
}

/* One line per event, with the time since start: a reader of the pod's log
 * sees at once where the waiting went. */
void cli_log_line(void *ud, enum exchange_log_level level, const char *msg)
{
	(void)ud;
	cli_emit(level == EXCHANGE_WARN ? "warning" : "info", "agree", true, msg, NULL, 0);
}

/* One line that says what to do next, per exit code; for 3 and 4 the
 * table the line points at, when it was shown, else where to find it. */
static const char *const next_step[] = {
	[NP_EINTERNAL] = "fix what the message names, then run again with the same flags",
	[NP_EUSAGE] = "see 'nicpick --help'",
	[NP_ENOIFACE] = "the table above says why each was refused; fix the links or widen "
			"--include/--exclude/--cidr/--family/--min-speed",
	[NP_ENOCOMMON] = "the pods share no usable network: see the table above",
	[NP_EK8S] = "check the API server, the Role, --expect and --timeout",
	[NP_ESMOKE] = "the smoke all-reduce failed or could not run; rerun with --nccl-debug to keep NCCL's log",
};
static const char *const next_step_no_table[] = {
	[NP_ENOIFACE] = "'nicpick discover' on the node named says why each interface was refused",
	[NP_ENOCOMMON] = "the gatherer's log has the table of which network each pod lacks",
};

/* The signal that stopped the run (0 none). */
static volatile sig_atomic_t stop_signal;

static void on_backstop(int sig)
{
	(void)sig;
	static const char msg[] = "nicpick: error: stopped by a signal, and the run did not end "
				  "within a second: ended at once\n";
	ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)w;
	_exit(128 + stop_signal);
}

static void on_stop(int sig)
{
	if (stop_signal) {
		/* A second one: the default, at once. */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop_signal = sig;
	alarm(1);
}

const volatile sig_atomic_t *cli_catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop };
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a wait in a system call returns at once. */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	struct sigaction bs = { .sa_handler = on_backstop };
	sigemptyset(&bs.sa_mask);
	sigaction(SIGALRM, &bs, NULL);
	return &stop_signal;
}

int cli_fail(const np_error *err)
{
	return cli_fail_shown(err, false);
}

int cli_fail_shown(const np_error *err, bool table_shown)
{
	int st = err->status > 0 && err->status <= NP_ESMOKE ? err->status : NP_EINTERNAL;
	const char *next = st == NP_ESMOKE && smoke_kept[0] ? smoke_kept : next_step[st];
	if (!table_shown && (st == NP_ENOIFACE || st == NP_ENOCOMMON))
		next = next_step_no_table[st];
	int sig = stop_signal;
	if (sig) {
		st = 128 + sig;
		next = sig == SIGINT ? "interrupted; run it again" : "the pod is being stopped";
	}
	char code[8];
	snprintf(code, sizeof(code), "%d", st);
	if (cli_log_fmt == NP_LOG_JSON) {
		struct np_log_field f[] = { { "exit_code", code }, { "next", next } };
		cli_emit("error", "exit", false, err->msg, f, 2);
	} else {
		char *msg = NULL;
		if (asprintf(&msg, "%s (%s)", err->msg, next) < 0)
			msg = NULL;
		cli_emit("error", "exit", false, msg ? msg : err->msg, NULL, 0);
		free(msg);
	}
	return st;
}

/* A value goes into logs, annotations and NCCL's variables: no control
 * character (a newline would forge a line of the log). */
int cli_check_value(const char *name, const char *value)
{
	for (const unsigned char *p = (const unsigned char *)value; p && *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return cli_usage_error("--%s: the value has a control character (0x%02x)", name, *p);
	return 0;
}

/* getopt's '?': an unknown long option is argv[optind - 1] as typed; an
 * unknown short one is optopt, also inside a bundle ("-xy"). */
int cli_unknown_option(const char *arg, const char *verb)
{
	char shortopt[3] = { '-', (char)optopt, '\0' };
	const char *what = optopt ? shortopt : arg;
	return verb ? cli_usage_error("unknown option '%s' of %s", what, verb)
		    : cli_usage_error("unknown option '%s'", what);
}

int cli_usage_error(const char *fmt, ...)
{
	np_error err = { 0 };
	char msg[NP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	np_error_set(&err, NP_EUSAGE, 0, "%s", msg);
	return cli_fail(&err);
}

static char self_exe[4096];

void cli_smoke_env(struct select_smoke_opts *o)
{
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	self_exe[n > 0 ? n : 0] = '\0';
	o->self_exe = self_exe;
	o->smoke_bin = getenv("NICPICK_SMOKE_BIN");
	o->path_env = getenv("PATH");
	o->base_env = environ;
}
