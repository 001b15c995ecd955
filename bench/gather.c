/* bench/gather: the real gatherer process of a job of N pods against the
 * test API server (tools/kubeapi), with the other N-1 pods' reports and
 * probe results seeded in the server.
 *
 * For each N it starts a fresh server, seeds N pods of an Indexed Job
 * (batch.kubernetes.io/job-name, job-completion-index; index 0 gathers),
 * gives pods 1..N-1 their report (nicpick.io/report, 4 candidates: the fast
 * network, management, the cni0 decoy with the same address everywhere, a
 * VLAN) and their probe result for round 1 of this gatherer
 * (nicpick.io/probe), and runs `nicpick select --peers k8s` as pod 0.  What
 * the gatherer does is what it does in a job: list the job's pods (in
 * pages), wait for every report, decide, hand each pod its part (N
 * patches), probe its own ring neighbour, wait for every probe result,
 * declare the round final, write its outputs.  Its ring neighbour (pod 1)
 * answers the probe for real: the gatherer runs in a network namespace with
 * a veth to a second one, where this program answers on pod 1's address,
 * as pod 1 would: with the round's token from pod 1's assignment, for the
 * probe of the neighbour the assignment names (lib/probe authenticates).
 *
 * Printed per N: the gatherer's CPU seconds (user + system) and peak RSS
 * (its own, as bench-peak reports them: bench/peak.c), its wall time, its API traffic (the
 * server's counters), the server's own CPU; then a table with CPU per pod
 * and the ratio of CPU to the smallest N's (linear: the ratio of the N).
 * Goals (printed, not asserted): 2,048 pods <= 3 s CPU and <= 96 MiB;
 * 16,384 pods <= 30 s CPU and <= 128 MiB.
 *
 * Environment: NICPICK (build/nicpick), BENCH_SIZES (1024,2048,4096,16384),
 * BENCH_EVENTS (1: the reports are published while the gatherer watches
 * and the probe results once it has handed out round 1, as in a job, so
 * that it reads them as watch events; 0: all seeded before it starts),
 * BENCH_CANDS (candidates per report, 4), BENCH_TIMEOUT (the gatherer's
 * --timeout, 900), BENCH_REALISTIC (1: pods of realistic size, with
 * managedFields, when the server offers --realistic-pods; 0: minimal
 * pods), BENCH_DROP_MANAGED_FIELDS (1: the server honours nicpick's Accept
 * drop=metadata.managedFields, as kube-apiserver with the ManagedFieldsOptOut
 * feature gate, alpha in v1.38; 0, the default: it ignores it, as without
 * the gate), BENCH_POD_ENV (environment variables of each pod's container,
 * 0: a training pod carries dozens, each in its managedFields too, which
 * makes a pod of 11-15 KB), PYTHON (/usr/bin/python3), BENCH_LOGS (a folder to keep the
 * gatherer's log in).  Run from the repository root, as root (namespaces).
 * Exit 0 when it ran, 1 on errors; namespaces and the server are removed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agree/agree.h"
#include "exchange/exchange.h"
#include "exchange/message.h"
#include "k8s/k8s.h"
#include "probe/probe.h"
#include "util/clock.h"

#define NS "bench"
#define JOB "bench"
#define GATHERER_ADDR "10.9.0.1"
#define NEIGHBOUR_ADDR "10.9.0.2"
#define SEED_CHUNK 1024
#define MAX_SIZES 16

static char ns_a[64], ns_b[64], tmpdir[256];
/* build/bench-peak, beside this program: the gatherer's launcher. */
static char peak_launcher[4096];
static pid_t server_pid;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void cleanup(void)
{
	char cmd[600];
	if (server_pid > 0) {
		kill(server_pid, SIGTERM);
		waitpid(server_pid, NULL, 0);
		server_pid = 0;
	}
	for (int i = 0; i < 2; i++) {
		const char *n = i ? ns_b : ns_a;
		if (n[0]) {
			snprintf(cmd, sizeof(cmd), "ip netns delete %s 2>/dev/null", n);
			if (system(cmd) != 0) {
				/* already gone */
			}
		}
	}
	ns_a[0] = ns_b[0] = '\0';
	if (tmpdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0) {
			/* nothing more to do */
		}
		tmpdir[0] = '\0';
	}
}

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
	va_list ap;
	fputs("bench/gather: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	cleanup();
	exit(1);
}

static void on_signal(int sig)
{
	(void)sig;
	die("interrupted");
}

__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		die("`%s` failed", cmd);
}

static void enter_netns(const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
		die("entering %s: %s", name, strerror(errno));
	close(fd);
}

/* A: the gatherer (eth0 10.9.0.1/16) and the server on its loopback;
 * B: pod 1's address, where the gatherer's ring probe lands. */
static void make_namespaces(void)
{
	unsigned r = (unsigned)getpid() ^ (unsigned)time(NULL);
	snprintf(ns_a, sizeof(ns_a), "np-bg%06x", r & 0xffffff);
	snprintf(ns_b, sizeof(ns_b), "np-bgp%06x", r & 0xffffff);
	sh("ip netns add %s && ip netns add %s", ns_a, ns_b);
	sh("ip -n %s link add eth0 type veth peer name eth0 netns %s", ns_a, ns_b);
	sh("ip -n %s link set lo up && ip -n %s addr add %s/16 dev eth0 && ip -n %s link set eth0 up",
	   ns_a, ns_a, GATHERER_ADDR, ns_a);
	sh("ip -n %s link set lo up && ip -n %s addr add %s/16 dev eth0 && ip -n %s link set eth0 up",
	   ns_b, ns_b, NEIGHBOUR_ADDR, ns_b);
	for (int i = 0; i < 100; i++) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "ip -n %s link show eth0 | grep -q LOWER_UP", ns_a);
		if (system(cmd) == 0)
			return;
		usleep(100000);
	}
	die("no carrier on the veth between %s and %s", ns_a, ns_b);
}

/* Pod 1's probe listener, in namespace B (a socket stays in the namespace
 * it was made in; the thread that makes it enters B first), for one round:
 * its token and the neighbour that probes it come from pod 1's part. */
struct neighbour {
	struct probe_server *s;
	int port;
	char token[PROBE_TOKEN_MAX];
	char peer[PROBE_ADDR_MAX];
	int64_t deadline_ms;
	np_error err;
	int rc;
};

static void *neighbour_start(void *arg)
{
	struct neighbour *n = arg;
	enter_netns(ns_b);
	struct probe_server_opts o = { .addr = NEIGHBOUR_ADDR, .port = n->port, .token = n->token,
				       .peer_addr = n->peer, .deadline_ms = n->deadline_ms };
	n->rc = probe_server_start(&o, &n->s, &n->err);
	return NULL;
}

static void neighbour_listen(struct neighbour *n)
{
	pthread_t th;
	if (pthread_create(&th, NULL, neighbour_start, n) != 0 || pthread_join(th, NULL) != 0)
		die("cannot start the neighbour's probe listener");
	if (n->rc < 0)
		die("the neighbour's probe listener: %s", n->err.msg);
}

static void pod_name(size_t i, char *buf, size_t len)
{
	snprintf(buf, len, "%s-%05zu", JOB, i);
}

static void pod_addr(size_t i, char *buf, size_t len)
{
	uint32_t a = (10u << 24) | (9u << 16);
	a += (uint32_t)i + 1;
	struct in_addr in = { .s_addr = htonl(a) };
	inet_ntop(AF_INET, &in, buf, (socklen_t)len);
}

static void cand(struct agree_report *r, const char *ifname, const char *cls, const char *addr, int plen,
		 long mbps, long score)
{
	struct agree_cand *c = &r->c[r->n++];
	snprintf(c->ifname, sizeof(c->ifname), "%s", ifname);
	snprintf(c->cls, sizeof(c->cls), "%s", cls);
	c->family = AF_INET;
	inet_pton(AF_INET, addr, c->addr);
	snprintf(c->addr_text, sizeof(c->addr_text), "%s", addr);
	c->prefixlen = plen;
	c->mbps = mbps;
	c->score = score;
	c->mtu = 1500;
}

/* Pod i's report: the fast network first (the gatherer's own), then
 * management, the cni0 decoy (the same address on every pod), VLANs. */
static char *report_json(size_t i, const char *uid, size_t ncand)
{
	struct agree_report *r = calloc(1, sizeof(*r));
	char addr[64], name[64];
	np_error err = { 0 };
	char *js = NULL;
	if (!r)
		die("out of memory");
	pod_name(i, r->pod, sizeof(r->pod));
	snprintf(r->uid, sizeof(r->uid), "%s", uid);
	snprintf(r->node, sizeof(r->node), "gpu-node-%zu.cluster.example.com", i);
	pod_addr(i, addr, sizeof(addr));
	cand(r, "eth0", "veth", addr, 16, 10000, 1500);
	for (size_t k = 1; k < ncand && k < AGREE_CAND_MAX; k++) {
		if (k == 1)
			snprintf(addr, sizeof(addr), "192.168.%zu.%zu", i / 250, 1 + i % 250);
		else if (k == 2)
			snprintf(addr, sizeof(addr), "10.244.0.1");
		else
			snprintf(addr, sizeof(addr), "172.%zu.%zu.%zu", 16 + k % 16, i / 250, 1 + i % 250);
		snprintf(name, sizeof(name), k == 1 ? "eno1" : k == 2 ? "cni0" : "vlan%zu", k);
		cand(r, name, k == 2 ? "bridge" : "physical", addr, k == 2 ? 24 : 16, 25000, 1000 - (long)k);
	}
	if (agree_report_to_json(r, &js, &err) < 0)
		die("writing a report: %s", err.msg);
	free(r);
	return js;
}

static char *probe_json(const char *leader_uid)
{
	struct exchange_probe p = { .epoch = 1, .n = 1 };
	np_error err = { 0 };
	char *js = NULL;
	snprintf(p.leader, sizeof(p.leader), "%s", leader_uid);
	p.t[0].ok = true;
	snprintf(p.t[0].detail, sizeof(p.t[0].detail), "connected");
	if (exchange_probe_to_json(&p, &js, &err) < 0)
		die("writing a probe result: %s", err.msg);
	return js;
}

static json_t *admin(struct k8s_client *c, const char *op, json_t *body)
{
	char path[128];
	json_t *out = NULL;
	np_error err = { 0 };
	snprintf(path, sizeof(path), "/_admin/%s", op);
	int r = body ? k8s_create(c, path, body, &out, &err) : k8s_get(c, path, &out, &err);
	json_decref(body);
	if (r < 0)
		die("%s: %s", path, err.msg);
	return out;
}

static bool server_has(const char *python, const char *flag)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s -m tools.kubeapi --help 2>/dev/null | grep -q -- '%s'", python, flag);
	return system(cmd) == 0;
}

struct server {
	char dir[300], url[128];
	FILE *out;
	int lifeline;
};

/* What the test server models: pods of realistic size (BENCH_REALISTIC),
 * Accept's drop=metadata.managedFields honoured (BENCH_DROP_MANAGED_FIELDS). */
struct server_opts {
	bool realistic;
	bool drop_managed_fields;
	size_t pod_env; /* BENCH_POD_ENV: environment variables a pod's container has */
};

static void server_start(struct server *s, const char *python, size_t n, const struct server_opts *o)
{
	char hist[32];
	int out[2], in[2];
	snprintf(s->dir, sizeof(s->dir), "%s/api-%zu", tmpdir, n);
	mkdir(s->dir, 0700);
	/* The real watch cache holds 75 s of events (up to 100 Ki of them):
	 * enough for the gatherer's own N patches, so no 410 at every
	 * re-watch; a count is what the test server keeps. */
	snprintf(hist, sizeof(hist), "%zu", n * 4 + 10000);
	if (pipe(out) < 0 || pipe(in) < 0)
		die("pipe: %s", strerror(errno));
	server_pid = fork();
	if (server_pid < 0)
		die("fork: %s", strerror(errno));
	if (server_pid == 0) {
		dup2(out[1], 1);
		dup2(in[0], 0);
		close(out[0]);
		close(in[1]);
		char log[400];
		snprintf(log, sizeof(log), "%s/server.log", s->dir);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0)
			dup2(fd, 2);
		const char *argv[16] = { python, "-m", "tools.kubeapi", "--state-dir", s->dir, "--namespace", NS,
					 "--bookmark-interval", "60", "--history", hist, "--lifeline-stdin" };
		size_t k = 12;
		if (o->realistic)
			argv[k++] = "--realistic-pods";
		if (o->drop_managed_fields)
			argv[k++] = "--managed-fields-opt-out";
		execv(python, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(in[0]);
	s->lifeline = in[1];
	s->out = fdopen(out[0], "r");
	char line[512];
	if (!s->out || !fgets(line, sizeof(line), s->out) || strncmp(line, "READY ", 6) != 0)
		die("the test API server did not start (see %s/server.log)", s->dir);
	char *u = strstr(line, "url=");
	if (!u || sscanf(u, "url=%127s", s->url) != 1)
		die("the test API server said: %s", line);
}

static void server_stop(struct server *s)
{
	if (server_pid > 0) {
		kill(server_pid, SIGTERM);
		waitpid(server_pid, NULL, 0);
		server_pid = 0;
	}
	if (s->out)
		fclose(s->out);
	close(s->lifeline);
	s->out = NULL;
}

static double proc_cpu(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

struct fig {
	size_t n;
	double cpu, user, sys, wall, server_cpu, seed_s;
	double rss_mib;
	long requests, watches, lists, patches;
	double mib_in, mib_out;
	size_t pod_bytes;
};

static struct k8s_client *client(struct server *s, const char *token_file, struct k8s_config *cfg)
{
	char ca[400];
	struct k8s_client *c = NULL;
	np_error err = { 0 };
	snprintf(ca, sizeof(ca), "%s/ca.crt", s->dir);
	memset(cfg, 0, sizeof(*cfg));
	cfg->server = s->url;
	cfg->ca_file = strdup(ca);
	cfg->token_file = strdup(token_file);
	cfg->namespace = (char *)NS; /* never freed: the client keeps a copy */
	if (!cfg->ca_file || !cfg->token_file || k8s_client_new(&c, cfg, &err) < 0)
		die("API client: %s", err.msg[0] ? err.msg : "out of memory");
	k8s_client_set_timeout(c, 600);
	return c;
}

/* Seed the job's N pods; *uids gets the uids the server gave them. */
static void seed_pods(struct k8s_client *c, size_t n, size_t nenv, char ***uids_out,
		      size_t *pod_bytes)
{
	char **uids = calloc(n, sizeof(*uids));
	char name[64], idx[24], node[64];
	if (!uids)
		die("out of memory");
	/* The server takes 3 MiB a request: fewer pods when they are large. */
	size_t chunk = SEED_CHUNK / (1 + nenv / 16);
	for (size_t first = 0; first < n; first += chunk) {
		json_t *pods = json_array();
		for (size_t i = first; i < n && i < first + chunk; i++) {
			pod_name(i, name, sizeof(name));
			snprintf(idx, sizeof(idx), "%zu", i);
			snprintf(node, sizeof(node), "gpu-node-%zu.cluster.example.com", i);
			json_t *env = json_array();
			for (size_t e = 0; e < nenv; e++) {
				char k[32], v[64];
				snprintf(k, sizeof(k), "TRAIN_SETTING_%03zu", e);
				snprintf(v, sizeof(v), "value-%zu-of-pod-%zu", e, i);
				json_array_append_new(env, json_pack("{s:s,s:s}", "name", k, "value", v));
			}
			json_t *pod = json_pack("{s:{s:s, s:{s:s, s:s}}, s:{s:s, s:[{s:s, s:s}]}, s:{s:s}}",
						"metadata", "name", name, "labels", "batch.kubernetes.io/job-name",
						JOB, "batch.kubernetes.io/job-completion-index", idx, "spec",
						"nodeName", node, "containers", "name", "main", "image",
						"registry.example.com/train:latest", "status", "phase", "Running");
			if (nenv)
				json_object_set_new(json_array_get(json_object_get(json_object_get(pod, "spec"),
										   "containers"),
								   0),
						    "env", env);
			else
				json_decref(env);
			json_array_append_new(pods, pod);
		}
		json_t *out = admin(c, "seed", json_pack("{s:o}", "pods", pods));
		json_t *items = json_object_get(out, "items"), *it;
		size_t k;
		json_array_foreach(items, k, it) {
			const char *uid = json_string_value(json_object_get(json_object_get(it, "metadata"), "uid"));
			if (!uid || first + k >= n)
				die("the seed answer has no uid for pod %zu", first + k);
			uids[first + k] = strdup(uid);
			if (first + k == n - 1) {
				char *js = json_dumps(it, JSON_COMPACT);
				*pod_bytes = js ? strlen(js) : 0;
				free(js);
			}
		}
		json_decref(out);
	}
	*uids_out = uids;
}

/* Every pod but the gatherer publishes its report (probe NULL), or its
 * probe result of the gatherer's round: one write per pod, as in a job. */
static void seed_annotations(struct k8s_client *c, size_t n, size_t ncand, char **uids, const char *probe)
{
	char name[64];
	json_t *pods = json_array();
	size_t bytes = 0;
	for (size_t i = 1; i < n; i++) {
		char *rep = probe ? NULL : report_json(i, uids[i], ncand);
		pod_name(i, name, sizeof(name));
		bytes += strlen(probe ? probe : rep) + 128;
		json_array_append_new(pods, json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", name, "annotations",
						      probe ? EXCHANGE_ANN_PROBE : EXCHANGE_ANN_REPORT,
						      probe ? probe : rep));
		free(rep);
		/* The server takes request bodies of up to 3 MiB, as kube-apiserver. */
		if (bytes > (2u << 20) || json_array_size(pods) == SEED_CHUNK || i == n - 1) {
			json_decref(admin(c, "seed", json_pack("{s:o}", "pods", pods)));
			pods = json_array();
			bytes = 0;
		}
	}
	json_decref(pods);
}

/* Pod 1's part of round 1 of this gatherer: its token and the address of
 * the neighbour that probes it; false while it has none. */
static bool neighbour_part(struct k8s_client *c, const char *pod1, const char *uid, struct neighbour *nb)
{
	json_t *pod = admin(c, "objects", json_pack("{s:s, s:s, s:s, s:s}", "op", "get", "resource", "pods",
						     "namespace", NS, "name", pod1));
	const char *as = json_string_value(json_object_get(
		json_object_get(json_object_get(pod, "metadata"), "annotations"), EXCHANGE_ANN_ASSIGN));
	struct exchange_assignment *a = malloc(sizeof(*a));
	np_error e = { 0 };
	bool ok = a && as && exchange_assignment_parse(as, strlen(as), a, &e) == 0 && strcmp(a->leader, uid) == 0 &&
		  a->epoch == 1 && a->state == EXCHANGE_PROBE && a->n_parts == 1 &&
		  strcmp(a->parts[0].addr, NEIGHBOUR_ADDR) == 0;
	if (ok) {
		snprintf(nb->token, sizeof(nb->token), "%s", a->token);
		snprintf(nb->peer, sizeof(nb->peer), "%s", a->parts[0].prev_addr);
	}
	free(a);
	json_decref(pod);
	return ok;
}

/* The round the gatherer has handed out, from its pod: its epoch, or 0. */
static int round_out(struct k8s_client *c, const char *gatherer, const char *uid)
{
	json_t *pod = admin(c, "objects", json_pack("{s:s, s:s, s:s, s:s}", "op", "get", "resource", "pods",
						     "namespace", NS, "name", gatherer));
	const char *rd = json_string_value(json_object_get(
		json_object_get(json_object_get(pod, "metadata"), "annotations"), EXCHANGE_ANN_ROUND));
	struct exchange_round r;
	np_error e = { 0 };
	int epoch = rd && exchange_round_parse(rd, strlen(rd), &r, &e) == 0 && strcmp(r.leader, uid) == 0 &&
			    (r.state == EXCHANGE_PROBE || r.state == EXCHANGE_FINAL)
		    ? r.epoch
		    : 0;
	json_decref(pod);
	return epoch;
}

static long counter(json_t *c, const char *key)
{
	return (long)json_integer_value(json_object_get(c, key));
}

static void one_size(const char *nicpick, const char *python, const char *snap, size_t n, size_t ncand,
		     const struct server_opts *o, bool events, int probe_port, int timeout, struct fig *f)
{
	struct server s = { 0 };
	struct k8s_config acfg, gcfg;
	char admin_tok[400], tok[400], out_dir[400], log[400], nstr[24], tstr[24], pstr[24];
	memset(f, 0, sizeof(*f));
	f->n = n;
	server_start(&s, python, n, o);
	snprintf(admin_tok, sizeof(admin_tok), "%s/admin-token", s.dir);
	snprintf(tok, sizeof(tok), "%s/token", s.dir);
	struct k8s_client *ac = client(&s, admin_tok, &acfg);
	double t0 = now_s();
	char **uids = NULL;
	seed_pods(ac, n, o->pod_env, &uids, &f->pod_bytes);
	if (!events)
		seed_annotations(ac, n, ncand, uids, NULL);
	char *probe = probe_json(uids[0]);
	if (!events)
		seed_annotations(ac, n, ncand, uids, probe);
	f->seed_s = now_s() - t0;
	json_decref(admin(ac, "counters/reset", json_object()));
	double scpu0 = proc_cpu(server_pid);

	snprintf(out_dir, sizeof(out_dir), "%s/out-%zu", tmpdir, n);
	snprintf(log, sizeof(log), "%s/gatherer-%zu.log", tmpdir, n);
	snprintf(nstr, sizeof(nstr), "%zu", n);
	snprintf(tstr, sizeof(tstr), "%d", timeout);
	snprintf(pstr, sizeof(pstr), "%d", probe_port);
	char ca[400], name[64];
	snprintf(ca, sizeof(ca), "%s/ca.crt", s.dir);
	pod_name(0, name, sizeof(name));
	/* Started by bench-peak, which reports its peak RSS and CPU (the
	 * gatherer forked from this process would count its memory too:
	 * bench/peak.c). */
	int fig[2];
	if (pipe(fig) < 0)
		die("pipe: %s", strerror(errno));
	double w0 = now_s();
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
		}
		close(fig[0]);
		if (fig[1] != 3) {
			dup2(fig[1], 3);
			close(fig[1]);
		}
		execl(peak_launcher, peak_launcher, "3", nicpick, "select", "--peers", "k8s", "--smoke", "off", "--snapshot", snap,
		      "--out-dir", out_dir, "--api-server", s.url, "--ca-file", ca, "--token-file", tok,
		      "--namespace", NS, "--pod-name", name, "--expect", nstr, "--timeout", tstr,
		      "--probe-port", pstr, "--log-interval", "5", (char *)NULL);
		_exit(127);
	}
	close(fig[1]);
	int st = 0;
	struct rusage ru;
	pid_t done = 0;
	/* The other pods publish while the gatherer watches: their reports,
	 * then, once it has handed out round 1, their probes.  Pod 1 listens
	 * for the gatherer's probe with its part's token. */
	char pod1[64];
	struct neighbour nb = { .port = probe_port, .deadline_ms = np_now_ms() + (int64_t)timeout * 1000 };
	pod_name(1, pod1, sizeof(pod1));
	if (events)
		seed_annotations(ac, n, ncand, uids, NULL);
	while ((done = wait4(pid, &st, WNOHANG, &ru)) == 0 && round_out(ac, name, uids[0]) < 1)
		usleep(50000);
	if (done == 0) {
		if (!neighbour_part(ac, pod1, uids[0], &nb))
			die("N=%zu: round 1 is out, but %s has no part of it on %s", n, pod1, NEIGHBOUR_ADDR);
		neighbour_listen(&nb);
		if (events)
			seed_annotations(ac, n, ncand, uids, probe);
	}
	if (done == 0 && wait4(pid, &st, 0, &ru) < 0)
		die("wait4: %s", strerror(errno));
	if (nb.s)
		probe_server_stop(nb.s);
	f->wall = now_s() - w0;
	f->server_cpu = proc_cpu(server_pid) - scpu0;
	const char *logs = getenv("BENCH_LOGS");
	if (logs && *logs) {
		char cmd[1200];
		snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp '%s' '%s/'", logs, log, logs);
		if (system(cmd) != 0)
			fprintf(stderr, "bench/gather: could not keep %s\n", log);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "tail -n 15 '%s' >&2", log);
		if (system(cmd) != 0) {
			/* the log is gone too */
		}
		die("N=%zu: the gatherer exited %d (its log above)", n,
		    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	char line[128] = "";
	ssize_t got = read(fig[0], line, sizeof(line) - 1);
	close(fig[0]);
	long maxrss = 0;
	if (got <= 0 || sscanf(line, "%ld %lf %lf", &maxrss, &f->user, &f->sys) != 3)
		die("N=%zu: bench-peak gave no figures", n);
	f->cpu = f->user + f->sys;
	f->rss_mib = (double)maxrss / 1024.0;

	json_t *cnt = admin(ac, "counters", NULL);
	json_t *mine = NULL, *t;
	const char *key;
	/* The gatherer's token is the server's default one. */
	FILE *tf = fopen(tok, "r");
	char tokv[256] = "";
	if (tf) {
		if (fgets(tokv, sizeof(tokv), tf))
			tokv[strcspn(tokv, "\r\n")] = '\0';
		fclose(tf);
	}
	json_object_foreach(json_object_get(cnt, "by_token"), key, t)
		if (strcmp(key, tokv) == 0)
			mine = t;
	if (mine) {
		json_t *verbs = json_object_get(mine, "verbs");
		f->requests = counter(mine, "requests");
		f->watches = counter(verbs, "watch");
		f->lists = counter(verbs, "list");
		f->patches = counter(verbs, "patch");
		f->mib_in = (double)counter(mine, "bytes_in") / 1048576.0;
		f->mib_out = (double)counter(mine, "bytes_out") / 1048576.0;
	}
	json_decref(cnt);
	for (size_t i = 0; i < n; i++)
		free(uids[i]);
	free(uids);
	free(probe);
	k8s_client_free(ac);
	free(acfg.ca_file);
	free(acfg.token_file);
	(void)gcfg;
	server_stop(&s);
}

int main(void)
{
	const char *nicpick_env = getenv("NICPICK");
	const char *python = getenv("PYTHON") && *getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
	char nicpick[4096];
	if (!realpath(nicpick_env && *nicpick_env ? nicpick_env : "build/nicpick", nicpick) ||
	    access(nicpick, X_OK) != 0)
		die("%s is not an executable file: build it (make) or set NICPICK",
		    nicpick_env && *nicpick_env ? nicpick_env : "build/nicpick");
	if (geteuid() != 0)
		die("needs root (network namespaces)");
	if (access("tools/kubeapi/__main__.py", R_OK) != 0)
		die("run it from the repository root (tools/kubeapi is the test API server)");
	size_t sizes[MAX_SIZES], n_sizes = 0;
	const char *sz = getenv("BENCH_SIZES") && *getenv("BENCH_SIZES") ? getenv("BENCH_SIZES")
									 : "1024,2048,4096,16384";
	for (const char *p = sz; *p && n_sizes < MAX_SIZES;) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || v < 2 || v > 65536)
			die("BENCH_SIZES: a comma list of sizes 2..65536, not '%s'", sz);
		sizes[n_sizes++] = v;
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			die("BENCH_SIZES: a comma list of sizes 2..65536, not '%s'", sz);
	}
	size_t ncand = getenv("BENCH_CANDS") ? strtoul(getenv("BENCH_CANDS"), NULL, 10) : 4;
	int timeout = getenv("BENCH_TIMEOUT") ? atoi(getenv("BENCH_TIMEOUT")) : 900;
	bool want_real = !getenv("BENCH_REALISTIC") || strcmp(getenv("BENCH_REALISTIC"), "0") != 0;
	if (ncand < 1 || ncand > AGREE_CAND_MAX || timeout < 1)
		die("BENCH_CANDS must be 1..%d, BENCH_TIMEOUT positive", AGREE_CAND_MAX);
	struct server_opts opts = { .realistic = want_real && server_has(python, "--realistic-pods") };
	bool events = !getenv("BENCH_EVENTS") || strcmp(getenv("BENCH_EVENTS"), "0") != 0;
	const char *penv = getenv("BENCH_POD_ENV");
	if (penv && *penv) {
		char *end;
		unsigned long v = strtoul(penv, &end, 10);
		if (*end || v > 2000)
			die("BENCH_POD_ENV: a number of environment variables 0..2000, not '%s'", penv);
		opts.pod_env = v;
	}
	opts.drop_managed_fields = getenv("BENCH_DROP_MANAGED_FIELDS") &&
				   strcmp(getenv("BENCH_DROP_MANAGED_FIELDS"), "0") != 0;
	if (opts.drop_managed_fields && !server_has(python, "--managed-fields-opt-out"))
		die("BENCH_DROP_MANAGED_FIELDS: this test server has no --managed-fields-opt-out");

	ssize_t el = readlink("/proc/self/exe", peak_launcher, sizeof(peak_launcher) - 16);
	if (el <= 0)
		die("readlink /proc/self/exe: %s", strerror(errno));
	peak_launcher[el] = '\0';
	char *slash = strrchr(peak_launcher, '/');
	strcpy(slash ? slash + 1 : peak_launcher, "bench-peak");
	if (access(peak_launcher, X_OK) != 0)
		die("%s: %s (make %s builds it)", peak_launcher, strerror(errno), "build/bench-peak");
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/np-bench-gather-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		tmpdir[0] = '\0';
		die("mkdtemp: %s", strerror(errno));
	}
	make_namespaces();
	enter_netns(ns_a);
	/* The namespaces are this run's own: the default port is free there. */
	int probe_port = PROBE_DEFAULT_PORT;
	char snap[400], cmd[5000];
	snprintf(snap, sizeof(snap), "%s/snapshot.json", tmpdir);
	snprintf(cmd, sizeof(cmd), "'%s' discover --json > '%s'", nicpick, snap);
	if (system(cmd) != 0)
		die("`nicpick discover --json` failed in %s", ns_a);

	printf("gather: the real gatherer (%s select --peers k8s) against tools/kubeapi; %zu candidates a "
	       "report; %s; pods %s, %zu environment variables each; managedFields %s\n",
	       nicpick, ncand,
	       events ? "reports and probe results come as watch events while it gathers"
		      : "reports and probe results seeded before it starts",
	       opts.realistic ? "of realistic size (--realistic-pods: managedFields, defaults)"
			 : want_real ? "minimal (this test server has no --realistic-pods)" : "minimal",
	       opts.pod_env, opts.drop_managed_fields ? "left out where nicpick's Accept asks (--managed-fields-opt-out, as "
				     "kube-apiserver with ManagedFieldsOptOut)"
				   : "sent, as kube-apiserver without ManagedFieldsOptOut (BENCH_DROP_MANAGED_FIELDS=1: with it)");
	fflush(stdout);
	struct fig figs[MAX_SIZES];
	for (size_t i = 0; i < n_sizes; i++) {
		one_size(nicpick, python, snap, sizes[i], ncand, &opts, events, probe_port, timeout, &figs[i]);
		struct fig *f = &figs[i];
		printf("  N=%5zu: gatherer CPU %6.2f s (user %.2f, sys %.2f), peak RSS %6.1f MiB, wall %6.1f s; "
		       "API %ld requests (%ld lists, %ld watches, %ld patches), %.1f MiB in, %.1f MiB out; "
		       "server CPU %.1f s; a pod is %zu bytes; seeding took %.1f s\n",
		       f->n, f->cpu, f->user, f->sys, f->rss_mib, f->wall, f->requests, f->lists, f->watches,
		       f->patches, f->mib_in, f->mib_out, f->server_cpu, f->pod_bytes, f->seed_s);
		fflush(stdout);
	}
	printf("\n%7s %9s %8s %11s %13s %9s %12s\n", "N", "CPU s", "RSS MiB", "CPU ms/pod", "CPU / first",
	       "N / first", "req per pod");
	for (size_t i = 0; i < n_sizes; i++) {
		const struct fig *f = &figs[i];
		printf("%7zu %9.2f %8.1f %11.3f %12.2fx %8.2fx %12.2f\n", f->n, f->cpu, f->rss_mib,
		       1000.0 * f->cpu / (double)f->n, figs[0].cpu > 0 ? f->cpu / figs[0].cpu : 0.0,
		       (double)f->n / (double)figs[0].n, (double)f->requests / (double)f->n);
	}
	for (size_t i = 0; i < n_sizes; i++) {
		const struct fig *f = &figs[i];
		if (f->n == 2048)
			printf("gather: N=2048: %.2f s CPU (goal <= 3 s), %.1f MiB peak RSS (goal <= 96 MiB)\n", f->cpu,
			       f->rss_mib);
		if (f->n == 16384)
			printf("gather: N=16384: %.2f s CPU (goal <= 30 s), %.1f MiB peak RSS (goal <= 128 MiB)\n",
			       f->cpu, f->rss_mib);
	}
	cleanup();
	return 0;
}
