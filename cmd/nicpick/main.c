/* nicpick: argument parsing, subcommands and exit codes — nothing else.
 * The work is done in lib/; every failure comes back as an np_error whose
 * status is the exit code. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "install/install.h"
#include "policy/policy.h"
#include "probe/probe.h"
#include "util/arena.h"
#include "util/clock.h"
#include "select/select.h"
#include "smoke/smoke.h"
#include "util/err.h"
#include "util/log.h"

#ifndef NICPICK_VERSION
#define NICPICK_VERSION "0.0.0"
#endif
#ifndef NICPICK_GITREV
#define NICPICK_GITREV "unknown"
#endif

static const char usage_text[] =
	"usage: nicpick discover [--json] [SOURCE...]\n"
	"       nicpick select --out-dir DIR [--peers k8s|none] [OPTIONS...]\n"
	"       nicpick smoke --out-dir DIR [OPTIONS...]\n"
	"       nicpick smoke --rank R --world-size N --comm-id ADDR:PORT [--interface IF]\n"
	"       nicpick install DIR\n"
	"       nicpick version\n"
	"\n"
	"select:\n"
	"  --out-dir DIR          write nccl.env, nccl.conf and decision.json into DIR\n"
	"  --peers k8s|none       agree with the job's pods through the Kubernetes API,\n"
	"                         or decide on this node alone (default: none)\n"
	"  --timeout SEC          overall deadline (default 300); nicpick never waits longer\n"
	"  --smoke off|auto|required\n"
	"                         the NCCL smoke all-reduce over the agreed network before\n"
	"                         anything is written (default auto: run when this pod has\n"
	"                         a GPU, its driver and libnccl, else skip and say why)\n"
	"smoke (select and smoke):\n"
	"  --smoke-port PORT      NCCL_COMM_ID port on the gatherer's agreed address (default 29418)\n"
	"  --smoke-bytes BYTES    the largest all-reduce, e.g. 64M (default 64M)\n"
	"  --smoke-timeout SEC    the smoke step's own bound within --timeout (default 60)\n"
	"  --min-busbw GBPS       slower is a failure (default: 5% of the slowest agreed link)\n"
	"  --nccl-debug           keep NCCL's log in DIR/nccl-debug and make training log there too\n"
	"  --rank R --world-size N --comm-id ADDR:PORT [--interface IF]\n"
	"                         smoke outside Kubernetes: NCCL_COMM_ID semantics, rank 0\n"
	"                         hosts the bootstrap; NCCL settings from the environment\n"
	"policy (discover and select):\n"
	"  --include LIST         NCCL list syntax: eth,ens (prefixes), =eth1 (exact), ^docker (exclude)\n"
	"  --exclude LIST         interface names or prefixes to refuse (=name for exact)\n"
	"  --cidr CIDR            only addresses inside CIDR\n"
	"  --family inet|inet6    only this address family\n"
	"  --min-speed MBPS       refuse slower links and links of unknown speed\n"
	"agreement (--peers k8s):\n"
	"  --expect N             pods in the job (env NICPICK_EXPECT; default: the Job's completions)\n"
	"  --selector SEL         label selector of the job's pods (default: from this pod's labels)\n"
	"  --leader-selector SEL  the pod that gathers the reports (default: the job's index 0)\n"
	"  --probe-port PORT      TCP port of the ring probe (default 29417)\n"
	"  --probe-throughput[=BYTES]\n"
	"                         measure throughput to rank networks of equal speed (default 16 MiB)\n"
	"  --log-interval SEC     progress lines while waiting (default 5)\n"
	"  --strict-env           fail (exit 2) when a container of this pod sets NCCL_SOCKET_IFNAME,\n"
	"                         NCCL_IB_HCA, GLOO_SOCKET_IFNAME, NCCL_CONF_FILE or NCCL_SOCKET_FAMILY\n"
	"                         to a value that overrides the outputs (default: a warning)\n"
	"  --require-same-versions\n"
	"                         fail (exit 6) before the smoke test when the pods' NCCL, CUDA\n"
	"                         driver or runtime, or GPU model differ (default: a warning)\n"
	"  --api-server URL --ca-file F --token-file F --namespace NS --pod-name NAME\n"
	"                         outside a cluster (default: in-cluster config, POD_NAME)\n"
	"  --insecure-skip-tls-verify\n"
	"                         labs only: do not verify the API server's certificate\n"
	"logging:\n"
	"  --log-format text|json text (default), or one JSON object per line: time, level,\n"
	"                         pod, phase, message, fields\n"
	"install:\n"
	"  DIR                    copy nicpick, and nicpick-smoke when it is beside it,\n"
	"                         into the existing directory DIR (a shared volume)\n"
	"sources (tests, offline replay):\n"
	"  --snapshot FILE        decide from a saved `nicpick discover --json`\n"
	"  --sysfs DIR            read sysfs from DIR instead of /sys\n"
	"  --netlink-json FILE    read links and addresses from FILE (`ip -d -j addr show`)\n"
	"                         instead of netlink\n"
	"\n"
	"exit codes: 0 ok, 1 runtime error, 2 usage, 3 no usable interface,\n"
	"            4 no common network, 5 Kubernetes API error or deadline, 6 smoke failed\n";

static enum np_log_format log_fmt = NP_LOG_TEXT;
static int64_t started_ms;

/* The pod this process runs for, as far as it is known (--pod-name, else
 * POD_NAME from the downward API). */
static const char *log_pod_name;

static const char *log_pod(void)
{
	if (log_pod_name)
		return log_pod_name;
	return getenv("POD_NAME") ? getenv("POD_NAME") : "";
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Every line nicpick prints on stderr goes through here. */
static void emit(const char *level, const char *phase, bool elapsed, const char *msg,
		 const struct np_log_field *fields, size_t n_fields)
{
	struct np_log_record rec = {
		.time_ms = wall_ms(),
		.elapsed_ms = elapsed ? np_now_ms() - started_ms : -1,
		.level = level,
		.pod = log_pod(),
		.phase = phase,
		.message = msg,
		.fields = fields,
		.n_fields = n_fields,
	};
	char *line = np_log_format_line(log_fmt, &rec);
	if (line)
		fputs(line, stderr);
	else
		fprintf(stderr, "nicpick: %s: %s\n", level, msg);
	free(line);
}

/* One line that says what to do next, per exit code. */
static const char *const next_step[] = {
	[NP_EINTERNAL] = "check the message above; rerun with the same flags once it is fixed",
	[NP_EUSAGE] = "see 'nicpick --help'",
	[NP_ENOIFACE] = "the table above says why each was refused; fix the links or widen "
			"--include/--exclude/--cidr/--family/--min-speed",
	[NP_ENOCOMMON] = "the pods share no usable network: see the table above",
	[NP_EK8S] = "check the API server, the Role, --expect and --timeout",
	[NP_ESMOKE] = "the smoke all-reduce failed or could not run; rerun with --nccl-debug to keep NCCL's log",
};

/* With --nccl-debug the log is already kept: say where, not "rerun with". */
static char smoke_kept[4200];

static int fail(const np_error *err)
{
	int st = err->status > 0 && err->status <= NP_ESMOKE ? err->status : NP_EINTERNAL;
	const char *next = st == NP_ESMOKE && smoke_kept[0] ? smoke_kept : next_step[st];
	char code[8];
	snprintf(code, sizeof(code), "%d", st);
	if (log_fmt == NP_LOG_JSON) {
		struct np_log_field f[] = { { "exit_code", code }, { "next", next } };
		emit("error", "exit", false, err->msg, f, 2);
	} else {
		char *msg = NULL;
		if (asprintf(&msg, "%s (%s)", err->msg, next) < 0)
			msg = NULL;
		emit("error", "exit", false, msg ? msg : err->msg, NULL, 0);
		free(msg);
	}
	return st;
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	np_error err = { 0 };
	char msg[NP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	np_error_set(&err, NP_EUSAGE, 0, "%s", msg);
	return fail(&err);
}

enum {
	OPT_JSON = 256,
	OPT_OUT_DIR,
	OPT_PEERS,
	OPT_INCLUDE,
	OPT_EXCLUDE,
	OPT_CIDR,
	OPT_FAMILY,
	OPT_MIN_SPEED,
	OPT_SNAPSHOT,
	OPT_SYSFS,
	OPT_NETLINK_JSON,
	OPT_SMOKE,
	OPT_TIMEOUT,
	OPT_EXPECT,
	OPT_SELECTOR,
	OPT_LEADER_SELECTOR,
	OPT_API_SERVER,
	OPT_CA_FILE,
	OPT_TOKEN_FILE,
	OPT_NAMESPACE,
	OPT_POD_NAME,
	OPT_INSECURE,
	OPT_PROBE_PORT,
	OPT_PROBE_THROUGHPUT,
	OPT_LOG_INTERVAL,
	OPT_SMOKE_PORT,
	OPT_SMOKE_BYTES,
	OPT_SMOKE_TIMEOUT,
	OPT_MIN_BUSBW,
	OPT_NCCL_DEBUG,
	OPT_RANK,
	OPT_WORLD_SIZE,
	OPT_COMM_ID,
	OPT_INTERFACE,
	OPT_STRICT_ENV,
	OPT_REQUIRE_SAME_VERSIONS,
	OPT_HELP,
	OPT_LOG_FORMAT, /* discover and select */
};

static const struct option long_opts[] = {
	{ "json", no_argument, NULL, OPT_JSON },
	{ "out-dir", required_argument, NULL, OPT_OUT_DIR },
	{ "peers", required_argument, NULL, OPT_PEERS },
	{ "include", required_argument, NULL, OPT_INCLUDE },
	{ "exclude", required_argument, NULL, OPT_EXCLUDE },
	{ "cidr", required_argument, NULL, OPT_CIDR },
	{ "family", required_argument, NULL, OPT_FAMILY },
	{ "min-speed", required_argument, NULL, OPT_MIN_SPEED },
	{ "snapshot", required_argument, NULL, OPT_SNAPSHOT },
	{ "sysfs", required_argument, NULL, OPT_SYSFS },
	{ "netlink-json", required_argument, NULL, OPT_NETLINK_JSON },
	{ "smoke", required_argument, NULL, OPT_SMOKE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "expect", required_argument, NULL, OPT_EXPECT },
	{ "selector", required_argument, NULL, OPT_SELECTOR },
	{ "leader-selector", required_argument, NULL, OPT_LEADER_SELECTOR },
	{ "api-server", required_argument, NULL, OPT_API_SERVER },
	{ "ca-file", required_argument, NULL, OPT_CA_FILE },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "namespace", required_argument, NULL, OPT_NAMESPACE },
	{ "pod-name", required_argument, NULL, OPT_POD_NAME },
	{ "insecure-skip-tls-verify", no_argument, NULL, OPT_INSECURE },
	{ "probe-port", required_argument, NULL, OPT_PROBE_PORT },
	{ "probe-throughput", optional_argument, NULL, OPT_PROBE_THROUGHPUT },
	{ "log-interval", required_argument, NULL, OPT_LOG_INTERVAL },
	{ "smoke-port", required_argument, NULL, OPT_SMOKE_PORT },
	{ "smoke-bytes", required_argument, NULL, OPT_SMOKE_BYTES },
	{ "smoke-timeout", required_argument, NULL, OPT_SMOKE_TIMEOUT },
	{ "min-busbw", required_argument, NULL, OPT_MIN_BUSBW },
	{ "nccl-debug", no_argument, NULL, OPT_NCCL_DEBUG },
	{ "rank", required_argument, NULL, OPT_RANK },
	{ "world-size", required_argument, NULL, OPT_WORLD_SIZE },
	{ "comm-id", required_argument, NULL, OPT_COMM_ID },
	{ "interface", required_argument, NULL, OPT_INTERFACE },
	{ "strict-env", no_argument, NULL, OPT_STRICT_ENV },
	{ "require-same-versions", no_argument, NULL, OPT_REQUIRE_SAME_VERSIONS },
	{ "log-format", required_argument, NULL, OPT_LOG_FORMAT },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

enum mode { MODE_DISCOVER, MODE_SELECT, MODE_SMOKE };

struct cli {
	bool json;
	struct select_opts sel;
	long timeout;
	/* smoke outside Kubernetes */
	long rank, world;
	const char *comm_id;
	const char *interface;
};

static int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static bool smoke_only(int opt)
{
	return opt == OPT_RANK || opt == OPT_WORLD_SIZE || opt == OPT_COMM_ID || opt == OPT_INTERFACE;
}

static bool policy_opt(int opt)
{
	return opt == OPT_INCLUDE || opt == OPT_EXCLUDE || opt == OPT_CIDR || opt == OPT_FAMILY ||
	       opt == OPT_MIN_SPEED || opt == OPT_SNAPSHOT || opt == OPT_SYSFS ||
	       opt == OPT_NETLINK_JSON;
}

/* Which subcommand an option belongs to; NULL when it fits this one. */
static const char *misplaced(int opt, enum mode m)
{
	if (opt == 'h' || opt == OPT_HELP || opt == ':' || opt == '?' || opt < OPT_JSON ||
	    opt == OPT_LOG_FORMAT)
		return NULL;
	switch (m) {
	case MODE_DISCOVER:
		return opt == OPT_JSON || policy_opt(opt) ? NULL : smoke_only(opt) ? "smoke" : "select";
	case MODE_SELECT:
		return opt == OPT_JSON ? "discover" : smoke_only(opt) ? "smoke" : NULL;
	case MODE_SMOKE:
		return opt == OPT_JSON || smoke_only(opt) || opt == OPT_OUT_DIR || opt == OPT_TIMEOUT ||
				       opt == OPT_SMOKE_BYTES || opt == OPT_SMOKE_TIMEOUT || opt == OPT_MIN_BUSBW ||
				       opt == OPT_NCCL_DEBUG
			       ? NULL
			       : "select";
	}
	return NULL;
}

/* "64M", "1G", "65536": bytes, binary suffixes. */
static int parse_bytes(const char *s, long min, long max, long *out)
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

/* Returns 0, or an exit code. */
static int parse(int argc, char **argv, enum mode mode, struct cli *cli)
{
	np_error err = { 0 };
	memset(cli, 0, sizeof(*cli));
	policy_init(&cli->sel.policy);
	cli->sel.smoke_mode = "auto";
	cli->sel.smoke_port = SMOKE_DEFAULT_PORT;
	cli->sel.smoke_timeout_s = 60;
	cli->rank = -1;
	cli->timeout = 300;
	cli->sel.ex.probe_port = PROBE_DEFAULT_PORT;
	cli->sel.ex.log_interval_ms = 5000;
	const char *env_expect = getenv("NICPICK_EXPECT");
	if (env_expect && *env_expect) {
		long e;
		if (parse_long(env_expect, 1, 100000, &e) < 0)
			return usage_error("NICPICK_EXPECT='%s': expected a pod count", env_expect);
		cli->sel.ex.expect = (int)e;
	}

	opterr = 0;
	optind = 1;
	int c;
	long v;
	while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
		const char *other = misplaced(c, mode);
		if (other) {
			const char *name = "?";
			for (size_t i = 0; long_opts[i].name; i++)
				if (long_opts[i].val == c)
					name = long_opts[i].name;
			return usage_error("--%s is an option of '%s'", name, other);
		}
		switch (c) {
		case OPT_JSON:
			cli->json = true;
			break;
		case OPT_SMOKE_PORT:
			if (parse_long(optarg, 1, 65535, &v) < 0)
				return usage_error("--smoke-port '%s': expected 1 to 65535", optarg);
			cli->sel.smoke_port = (int)v;
			break;
		case OPT_SMOKE_BYTES:
			if (parse_bytes(optarg, SMOKE_MIN_BYTES, 1L << 34, &cli->sel.smoke_bytes) < 0)
				return usage_error("--smoke-bytes '%s': expected bytes (K, M, G suffixes), 4K to 16G",
						   optarg);
			break;
		case OPT_SMOKE_TIMEOUT:
			if (parse_long(optarg, 1, 86400, &v) < 0)
				return usage_error("--smoke-timeout '%s': expected seconds, 1 to 86400", optarg);
			cli->sel.smoke_timeout_s = (int)v;
			break;
		case OPT_MIN_BUSBW: {
			char *end;
			errno = 0;
			double g = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(g > 0) || g > 100000)
				return usage_error("--min-busbw '%s': expected GB/s, e.g. 2.5", optarg);
			cli->sel.min_busbw = g;
			break;
		}
		case OPT_NCCL_DEBUG:
			cli->sel.nccl_debug = true;
			break;
		case OPT_RANK:
			if (parse_long(optarg, 0, (1L << 20) - 1, &cli->rank) < 0)
				return usage_error("--rank '%s': expected 0 or more", optarg);
			break;
		case OPT_WORLD_SIZE:
			if (parse_long(optarg, 1, 1L << 20, &cli->world) < 0)
				return usage_error("--world-size '%s': expected 1 or more", optarg);
			break;
		case OPT_COMM_ID:
			cli->comm_id = optarg;
			break;
		case OPT_INTERFACE:
			cli->interface = optarg;
			break;
		case OPT_OUT_DIR:
			cli->sel.out_dir = optarg;
			break;
		case OPT_PEERS:
			if (strcmp(optarg, "none") != 0 && strcmp(optarg, "k8s") != 0)
				return usage_error("--peers '%s': expected k8s or none", optarg);
			cli->sel.peers_k8s = strcmp(optarg, "k8s") == 0;
			break;
		case OPT_EXPECT:
			if (parse_long(optarg, 1, 100000, &v) < 0)
				return usage_error("--expect '%s': expected a pod count, 1 to 100000", optarg);
			cli->sel.ex.expect = (int)v;
			break;
		case OPT_SELECTOR:
			cli->sel.ex.selector = optarg;
			break;
		case OPT_LEADER_SELECTOR:
			cli->sel.ex.leader_selector = optarg;
			break;
		case OPT_API_SERVER:
			cli->sel.k8s.api_server = optarg;
			break;
		case OPT_CA_FILE:
			cli->sel.k8s.ca_file = optarg;
			break;
		case OPT_TOKEN_FILE:
			cli->sel.k8s.token_file = optarg;
			break;
		case OPT_NAMESPACE:
			cli->sel.k8s.namespace = optarg;
			break;
		case OPT_POD_NAME:
			cli->sel.k8s.pod_name = optarg;
			log_pod_name = optarg;
			break;
		case OPT_INSECURE:
			cli->sel.k8s.insecure_skip_tls_verify = true;
			break;
		case OPT_PROBE_PORT:
			if (parse_long(optarg, 1, 65535, &v) < 0)
				return usage_error("--probe-port '%s': expected 1 to 65535", optarg);
			cli->sel.ex.probe_port = (int)v;
			break;
		case OPT_PROBE_THROUGHPUT:
			cli->sel.ex.probe_throughput_bytes = 16L << 20;
			if (optarg && parse_long(optarg, 1, 1L << 34, &cli->sel.ex.probe_throughput_bytes) < 0)
				return usage_error("--probe-throughput='%s': expected bytes", optarg);
			break;
		case OPT_LOG_INTERVAL:
			if (parse_long(optarg, 1, 3600, &v) < 0)
				return usage_error("--log-interval '%s': expected seconds", optarg);
			cli->sel.ex.log_interval_ms = (int)(v * 1000);
			break;
		case OPT_REQUIRE_SAME_VERSIONS:
			cli->sel.ex.require_same_versions = true;
			break;
		case OPT_STRICT_ENV:
			cli->sel.strict_env = true;
			break;
		case OPT_LOG_FORMAT:
			if (np_log_format_parse(optarg) < 0)
				return usage_error("--log-format '%s': expected text or json", optarg);
			log_fmt = (enum np_log_format)np_log_format_parse(optarg);
			break;
		case OPT_INCLUDE:
			if (policy_set_include(&cli->sel.policy, optarg, &err) < 0)
				return fail(&err);
			break;
		case OPT_EXCLUDE:
			if (policy_set_exclude(&cli->sel.policy, optarg, &err) < 0)
				return fail(&err);
			break;
		case OPT_CIDR:
			if (policy_set_cidr(&cli->sel.policy, optarg, &err) < 0)
				return fail(&err);
			break;
		case OPT_FAMILY:
			if (policy_set_family(&cli->sel.policy, optarg, &err) < 0)
				return fail(&err);
			break;
		case OPT_MIN_SPEED:
			if (policy_set_min_speed(&cli->sel.policy, optarg, &err) < 0)
				return fail(&err);
			break;
		case OPT_SNAPSHOT:
			cli->sel.snapshot = optarg;
			break;
		case OPT_SYSFS:
			cli->sel.src.sysfs_root = optarg;
			break;
		case OPT_NETLINK_JSON:
			cli->sel.src.netlink_json = optarg;
			break;
		case OPT_SMOKE:
			if (strcmp(optarg, "off") && strcmp(optarg, "auto") && strcmp(optarg, "required"))
				return usage_error("--smoke '%s': expected off, auto or required", optarg);
			cli->sel.smoke_mode = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_long(optarg, 1, 86400, &cli->timeout) < 0)
				return usage_error("--timeout '%s': expected seconds, 1 to 86400", optarg);
			break;
		case 'h':
		case OPT_HELP:
			fputs(usage_text, stdout);
			exit(0);
		case ':':
			return usage_error("%s needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (cli->sel.snapshot && (cli->sel.src.sysfs_root || cli->sel.src.netlink_json))
		return usage_error("%s cannot be combined with --sysfs or --netlink-json", "--snapshot");
	if (cli->sel.nccl_debug && cli->sel.out_dir)
		snprintf(smoke_kept, sizeof(smoke_kept),
			 "the smoke all-reduce failed or could not run; NCCL's log is in %s/nccl-debug",
			 cli->sel.out_dir);
	return 0;
}

/* jansson hands over many small pieces: gather them in one buffer and
 * write it in large blocks. */
struct outbuf {
	size_t len;
	bool failed;
	int error; /* errno of the failed write */
	size_t items; /* array elements written so far */
	char data[1 << 16];
};

static void out_flush(struct outbuf *b)
{
	for (size_t off = 0; off < b->len && !b->failed;) {
		ssize_t w = write(STDOUT_FILENO, b->data + off, b->len - off);
		if (w < 0 && errno != EINTR) {
			b->failed = true;
			b->error = errno;
		}
		else if (w > 0)
			off += (size_t)w;
	}
	b->len = 0;
}

static int write_out(const char *buf, size_t len, void *ud)
{
	struct outbuf *b = ud;
	if (b->len + len > sizeof(b->data))
		out_flush(b);
	if (len > sizeof(b->data)) {
		for (size_t off = 0; off < len; off += sizeof(b->data)) {
			size_t n = len - off < sizeof(b->data) ? len - off : sizeof(b->data);
			memcpy(b->data, buf + off, n);
			b->len = n;
			out_flush(b);
		}
		return b->failed ? -1 : 0;
	}
	memcpy(b->data + b->len, buf, len);
	b->len += len;
	return b->failed ? -1 : 0;
}

static int write_item(json_t *obj, void *ud)
{
	struct outbuf *b = ud;
	int r = (b->items++ ? write_out(",", 1, b) : 0) == 0 &&
				json_dump_callback(obj, write_out, b, JSON_COMPACT | JSON_PRESERVE_ORDER) == 0
			? 0
			: -1;
	np_json_arena_reset(); /* obj and all it holds are gone */
	return r;
}

static int cmd_discover(int argc, char **argv)
{
	struct cli cli;
	int rc = parse(argc, argv, MODE_DISCOVER, &cli);
	if (rc)
		return rc;
	np_error err = { 0 };
	struct select_result r;
	if (select_gather(&cli.sel, &r, &err) < 0) {
		select_result_free(&r);
		return fail(&err);
	}
	if (cli.json) {
		/* Streamed: one interface's object at a time, in an arena that
		 * is rewound after each, so a thousand interfaces touch the
		 * memory of one.  The bytes are those of the whole array
		 * dumped compactly. */
		static struct outbuf out;
		np_json_arena_begin();
		rc = write_out("[", 1, &out) == 0 &&
				     select_discover_each(&r.nics, &r.ranking, write_item, &out) == 0 &&
				     write_out("]\n", 2, &out) == 0
			     ? 0
			     : NP_EINTERNAL;
		np_json_arena_end();
		out_flush(&out);
		if (out.failed) {
			fprintf(stderr, "nicpick: error: cannot write to standard output: %s\n",
				strerror(out.error));
			rc = NP_EINTERNAL;
		}
	} else {
		char *t = select_render_table(&r.nics, &r.ranking);
		if (t)
			fputs(t, stdout);
		rc = t ? 0 : NP_EINTERNAL;
		free(t);
	}
	select_result_free(&r);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "nicpick: error: cannot write to standard output: %s\n", strerror(errno));
		return NP_EINTERNAL;
	}
	return rc;
}

/* One line per event, with the time since start: a reader of the pod's log
 * sees at once where the waiting went. */
static void log_line(void *ud, enum exchange_log_level level, const char *msg)
{
	(void)ud;
	emit(level == EXCHANGE_WARN ? "warning" : "info", "agree", true, msg, NULL, 0);
}

/* A multi-line table: as it is in text, one record in JSON. */
static void emit_table(const char *what, const char *table)
{
	if (log_fmt == NP_LOG_TEXT) {
		fputs(table, stderr);
		return;
	}
	struct np_log_field f = { "table", table };
	emit("info", "select", false, what, &f, 1);
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
		emit("warning", "envcheck", true, text, f, 4);
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

static char self_exe[4096];

/* Where nicpick-smoke is and what it inherits: read here, so lib/ reads
 * no environment of its own. */
static void smoke_env(struct select_opts *o)
{
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	self_exe[n > 0 ? n : 0] = '\0';
	o->self_exe = self_exe;
	o->smoke_bin = getenv("NICPICK_SMOKE_BIN");
	o->path_env = getenv("PATH");
	o->base_env = environ;
}

/* `nicpick smoke`: the all-reduce alone, from a finished out-dir or, outside
 * Kubernetes, from --rank/--world-size/--comm-id and the environment. */
static int cmd_smoke(int argc, char **argv)
{
	struct cli cli;
	int rc = parse(argc, argv, MODE_SMOKE, &cli);
	if (rc)
		return rc;
	bool standalone = cli.comm_id || cli.rank >= 0 || cli.world > 0;
	if (standalone && (!cli.comm_id || cli.rank < 0 || cli.world < 1))
		return usage_error("%s", "smoke: --rank, --world-size and --comm-id go together");
	if (standalone && cli.rank >= cli.world)
		return usage_error("smoke: --rank %ld is not below --world-size %ld", cli.rank, cli.world);
	if (!standalone && !cli.sel.out_dir)
		return usage_error("%s", "smoke: --out-dir DIR (a finished select) or --rank/--world-size/--comm-id");
	if (!standalone && cli.interface)
		return usage_error("%s", "smoke: --interface goes with --comm-id; --out-dir names its own");

	np_error err = { 0 };
	struct select_opts *o = &cli.sel;
	o->ex.deadline_ms = np_now_ms() + cli.timeout * 1000;
	o->ex.log = log_line;
	o->smoke_mode = "required"; /* nothing to skip to */
	smoke_env(o);

	struct smoke_outdir od;
	struct outputs_env env = { 0 };
	struct select_smoke_plan plan = { .min_mbps = -1, .root_pod = "" };
	char tmp_dir[256] = "";
	char ifbuf[IFNAMSIZ + 1] = "";
	if (standalone) {
		/* NCCL's settings are the environment's own; the device is
		 * checked against --interface, else NCCL_SOCKET_IFNAME when it
		 * names exactly one interface. */
		const char *want = cli.interface ? cli.interface : getenv("NCCL_SOCKET_IFNAME");
		if (want && *want == '=')
			want++;
		if (want && *want && !strchr(want, ',') && !strchr(want, '^') && strlen(want) < sizeof(ifbuf))
			snprintf(ifbuf, sizeof(ifbuf), "%s", want);
		plan.rank = (int)cli.rank;
		plan.world = (int)cli.world;
		plan.ifname = ifbuf[0] ? ifbuf : NULL;
		if (!o->out_dir) {
			const char *t = getenv("TMPDIR");
			snprintf(tmp_dir, sizeof(tmp_dir), "%s/nicpick-smoke.XXXXXX", t && *t ? t : "/tmp");
			if (!mkdtemp(tmp_dir)) {
				np_error_set(&err, NP_EINTERNAL, errno, "cannot create %s", tmp_dir);
				return fail(&err);
			}
			o->out_dir = tmp_dir;
		}
	} else {
		if (smoke_outdir_load(o->out_dir, &od, &err) < 0)
			return fail(&err);
		for (size_t i = 0; i < od.n_vars; i++) {
			env.vars[env.n].key = od.key[i];
			snprintf(env.vars[env.n++].value, sizeof(env.vars[0].value), "%s", od.value[i]);
		}
		plan.rank = od.rank;
		plan.world = od.world;
		plan.ifname = od.ifname;
		plan.ib_hca = od.ib_hca[0] ? od.ib_hca : NULL;
		plan.min_mbps = od.min_mbps;
	}
	struct smoke_report rep = { 0 };
	/* NCCL_COMM_ID is used as given (NCCL parses it); checked here only so
	 * that a malformed one is a usage error, not an NCCL failure. */
	const char *cid = standalone ? cli.comm_id : od.comm_id;
	const char *colon = strrchr(cid, ':');
	if (!colon || colon == cid || !colon[1])
		return usage_error("--comm-id '%s': expected ADDR:PORT or [IPV6]:PORT", cid);
	long port;
	if (parse_long(colon + 1, 1, 65535, &port) < 0)
		return usage_error("--comm-id '%s': the port must be 1 to 65535", cid);
	plan.comm_id = cid;
	rc = select_smoke(o, &plan, &env, &rep, &err);
	if (cli.json) {
		json_t *j = smoke_report_to_json(&rep);
		char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(j);
	}
	if (tmp_dir[0])
		rmdir(tmp_dir);
	if (rc < 0)
		return fail(&err);
	char line[NP_ERR_MSG_MAX + 64];
	smoke_report_summary(&rep, line, sizeof(line));
	if (log_fmt == NP_LOG_TEXT)
		fprintf(stderr, "nicpick: %s\n", line);
	else
		emit("info", "smoke", true, line, NULL, 0);
	return 0;
}

static int cmd_select(int argc, char **argv)
{
	struct cli cli;
	int rc = parse(argc, argv, MODE_SELECT, &cli);
	if (rc)
		return rc;
	if (!cli.sel.out_dir)
		return usage_error("%s is required", "select: --out-dir DIR");
	np_error err = { 0 };
	struct select_result r;
	cli.sel.ex.deadline_ms = np_now_ms() + cli.timeout * 1000;
	cli.sel.ex.log = log_line;
	smoke_env(&cli.sel);
	if (select_run(&cli.sel, &r, &err) < 0) {
		emit_env_warnings(&r.env_warnings);
		if (err.status == NP_ENOIFACE) {
			char *t = select_render_table(&r.nics, &r.ranking);
			if (t)
				emit_table("the interface table: why each was refused", t);
			free(t);
		}
		if (err.status == NP_ENOCOMMON && r.ex.has_decision) {
			char *t = NULL;
			size_t len = 0;
			FILE *m = open_memstream(&t, &len);
			if (m) {
				print_pod_table(m, &r.ex.decision);
				fclose(m);
			}
			if (t && *t)
				emit_table("the pods' candidates: which network each lacks", t);
			free(t);
		}
		select_result_free(&r);
		return fail(&err);
	}
	emit_env_warnings(&r.env_warnings);
	const struct nic *n = &r.nics.v[r.chosen];
	const struct policy_verdict *v = &r.ranking.v[r.chosen];
	const char *ifname = n->name;
	const char *cls = nic_class_name(n->cls);
	const char *addr = v->addr >= 0 ? n->addrs[v->addr].text : "no address";
	char line[NP_ERR_MSG_MAX + 64] = "";
	if (r.smoke.status == SMOKE_SKIPPED)
		smoke_report_summary(&r.smoke, line, sizeof(line));
	if (log_fmt == NP_LOG_TEXT) {
		fprintf(stderr, "nicpick: chose %s (%s, %s) — wrote %s/nccl.env, nccl.conf, decision.json\n",
			ifname, cls, addr, cli.sel.out_dir);
		if (line[0])
			fprintf(stderr, "nicpick: %s\n", line);
	} else {
		char msg[1024];
		snprintf(msg, sizeof(msg), "chose %s (%s, %s)", ifname, cls, addr ? addr : "-");
		struct np_log_field f[] = { { "interface", ifname }, { "class", cls },
					    { "address", addr ? addr : "" }, { "out_dir", cli.sel.out_dir } };
		if (line[0])
			emit("info", "smoke", true, line, NULL, 0);
		emit("info", "outputs", true, msg, f, 4);
	}
	select_result_free(&r);
	return 0;
}

static int cmd_install(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (argc != 2 || argv[1][0] == '-')
		return usage_error("%s", argc < 2 ? "install: DIR is required"
				   : argc > 2 ? "install: expected one DIR"
					      : "install takes no options");
	np_error err = { 0 };
	struct install_result r;
	if (install_self("/proc/self/exe", argv[1], &r, &err) < 0)
		return fail(&err);
	for (int i = 0; i < r.n; i++)
		fprintf(stderr, "nicpick: installed %s\n", r.paths[i]);
	return 0;
}

int main(int argc, char **argv)
{
	/* nicpick builds and frees one large JSON tree of small objects; with
	 * fastbins glibc spends more time consolidating them than jansson
	 * spends building (measured on 1,000 interfaces). */
#ifdef M_MXFAST /* glibc; musl's malloc has no fastbins */
	mallopt(M_MXFAST, 0);
#endif
	started_ms = np_now_ms();
	/* Before parsing, so that a usage error is already in the chosen format. */
	for (int i = 1; i < argc; i++) {
		const char *v = strncmp(argv[i], "--log-format=", 13) == 0 ? argv[i] + 13
				: strcmp(argv[i], "--log-format") == 0 && i + 1 < argc ? argv[i + 1]
											 : NULL;
		if (v && np_log_format_parse(v) >= 0)
			log_fmt = (enum np_log_format)np_log_format_parse(v);
	}
	if (argc < 2) {
		fputs(usage_text, stderr);
		return NP_EUSAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		printf("nicpick %s (%s)\n", NICPICK_VERSION, NICPICK_GITREV);
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (strcmp(cmd, "discover") == 0)
		return cmd_discover(argc - 1, argv + 1);
	if (strcmp(cmd, "select") == 0)
		return cmd_select(argc - 1, argv + 1);
	if (strcmp(cmd, "smoke") == 0)
		return cmd_smoke(argc - 1, argv + 1);
	if (strcmp(cmd, "install") == 0)
		return cmd_install(argc - 1, argv + 1);
	return usage_error("unknown command '%s'", cmd);
}
