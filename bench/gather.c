/* bench/gather: the gatherer's memory for a job of N pods, offline.
 *
 * It holds what the gatherer holds while it decides: N Pod objects as
 * jansson trees (as its watch keeps them), each carrying its report
 * annotation; it reads every report with the strict reader, decides,
 * writes the decision annotation and reads it back as a follower would.
 * Prints the wall time of each step and the peak RSS of the process
 * (getrusage).  Usage: gather [N [CANDIDATES]]  (default 1000 pods, 4
 * candidates each; 64 candidates is the most a report may carry). */
#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "agree/agree.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long maxrss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void die(const char *what, const np_error *err)
{
	fprintf(stderr, "bench/gather: %s: %s\n", what, err ? err->msg : "failed");
	exit(1);
}

/* Pod i's report: the fast network (10.9.0.0/16), management, the cni0
 * decoy with the same address everywhere, then fillers up to ncand. */
static void make_report(size_t i, size_t ncand, struct agree_report *r)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->pod, sizeof(r->pod), "train-job-worker-%zu", i);
	snprintf(r->uid, sizeof(r->uid), "8d7f0e52-5b1c-4c1e-9a57-%012zu", i);
	snprintf(r->node, sizeof(r->node), "gpu-node-%zu.cluster.example.com", i);
	for (size_t k = 0; k < ncand && k < AGREE_CAND_MAX; k++) {
		struct agree_cand *c = &r->c[r->n++];
		char addr[AGREE_ADDR_TEXT_MAX];
		c->family = AF_INET;
		c->mtu = 9000;
		if (k == 0) {
			snprintf(c->ifname, sizeof(c->ifname), "ens%zuf0np0", i % 8);
			snprintf(addr, sizeof(addr), "10.9.%zu.%zu", i / 250, 1 + i % 250);
			c->prefixlen = 16;
			c->mbps = 400000;
			snprintf(c->rdma, sizeof(c->rdma), "mlx5_%zu:1", i % 8);
		} else if (k == 1) {
			snprintf(c->ifname, sizeof(c->ifname), "eno1");
			snprintf(addr, sizeof(addr), "192.168.%zu.%zu", i / 250, 1 + i % 250);
			c->prefixlen = 16;
			c->mbps = 25000;
		} else if (k == 2) {
			snprintf(c->ifname, sizeof(c->ifname), "cni0");
			snprintf(addr, sizeof(addr), "10.244.0.1");
			c->prefixlen = 24;
			c->mbps = 10000;
		} else {
			snprintf(c->ifname, sizeof(c->ifname), "vlan%zu", k);
			snprintf(addr, sizeof(addr), "172.%zu.%zu.%zu", 16 + k % 16, i / 250, 1 + i % 250);
			c->prefixlen = 16;
			c->mbps = 100000;
		}
		snprintf(c->cls, sizeof(c->cls), "%s", k == 2 ? "bridge" : "physical");
		c->score = 10000 - (long)k;
		inet_pton(AF_INET, addr, c->addr);
		snprintf(c->addr_text, sizeof(c->addr_text), "%s", addr);
	}
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	size_t ncand = argc > 2 ? strtoul(argv[2], NULL, 10) : 4;
	np_error err = { 0 };
	long rss0 = maxrss_kib();
	double t0 = now();

	/* The watch's view: one Pod object per pod, report in an annotation. */
	json_t **pods = calloc(n, sizeof(*pods));
	struct agree_report *one = malloc(sizeof(*one));
	size_t report_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		char *js;
		make_report(i, ncand, one);
		if (agree_report_to_json(one, &js, &err) < 0)
			die("writing a report", &err);
		report_bytes += strlen(js);
		pods[i] = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:{s:s,s:s},s:{s:s}},s:{s:s},s:{s:s}}",
				    "apiVersion", "v1", "kind", "Pod", "metadata", "name", one->pod,
				    "uid", one->uid, "resourceVersion", "123456", "labels",
				    "batch.kubernetes.io/job-name", "train-job",
				    "batch.kubernetes.io/job-completion-index", "0", "annotations",
				    "nicpick.io/report", js, "spec", "nodeName", one->node, "status",
				    "phase", "Running");
		free(js);
	}
	double t1 = now();

	/* The gatherer reads every report. */
	struct agree_report *reports = calloc(n, sizeof(*reports));
	for (size_t i = 0; i < n; i++) {
		const char *js = json_string_value(json_object_get(
			json_object_get(json_object_get(pods[i], "metadata"), "annotations"),
			"nicpick.io/report"));
		if (agree_report_parse(js, strlen(js), &reports[i], &err) < 0)
			die("reading a report", &err);
	}
	double t2 = now();

	struct agree_decision d = { 0 }, back = { 0 };
	if (agree_decide(reports, n, NULL, &d, &err) < 0)
		die("deciding", &err);
	char *dj;
	if (agree_decision_to_json(&d, &dj, &err) < 0)
		die("writing the decision", &err);
	if (agree_decision_parse(dj, strlen(dj), &back, &err) < 0)
		die("reading the decision back", &err);
	double t3 = now();

	printf("gather: %zu pods, %zu candidates each: reports %zu bytes in all (%.0f per pod); "
	       "decision %zu bytes on %s\n",
	       n, ncand, report_bytes, (double)report_bytes / (double)n, strlen(dj),
	       d.rails[0].net.text);
	printf("gather: build %.3f s, read reports %.3f s, decide + write + read back %.3f s\n",
	       t1 - t0, t2 - t1, t3 - t2);
	printf("gather: peak RSS %.1f MiB (at start %.1f MiB; goal < 64 MiB)\n", maxrss_kib() / 1024.0,
	       rss0 / 1024.0);
	free(dj);
	agree_decision_free(&d);
	agree_decision_free(&back);
	for (size_t i = 0; i < n; i++)
		json_decref(pods[i]);
	free(pods);
	free(reports);
	free(one);
	return 0;
}
