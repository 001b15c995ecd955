/* Writes the seed corpora's generated files (reports made by nicpick
 * itself).  `make fuzz-seeds` runs it; the output is committed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree/agree.h"

static void put(const char *dir, const char *name, const char *s)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f || fputs(s, f) < 0 || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *base = argc > 1 ? argv[1] : "tests/fuzz/corpus";
	char rdir[256];
	snprintf(rdir, sizeof(rdir), "%s/report", base);
	static const char *reports[] = {
		"{\"v\":1,\"pod\":\"job-w-0\",\"uid\":\"u0\",\"node\":\"n0\",\"host\":\"h0\",\"c\":["
		"{\"if\":\"ens3f0\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.1\",\"plen\":24,"
		"\"gw\":\"10.9.0.254\",\"mbps\":100000,\"score\":10011,\"rdma\":\"mlx5_0:1\",\"mtu\":9000},"
		"{\"if\":\"cni0\",\"cls\":\"bridge\",\"fam\":4,\"addr\":\"10.244.0.1\",\"plen\":24,"
		"\"mbps\":10000,\"score\":1001,\"mtu\":1500}]}",
		"{\"v\":1,\"pod\":\"job-w-1\",\"uid\":\"u1\",\"node\":\"n1\",\"c\":["
		"{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.2\",\"plen\":24,"
		"\"mbps\":100000,\"score\":10011,\"mtu\":9000},"
		"{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":6,\"addr\":\"fd00::2\",\"plen\":64,"
		"\"mbps\":100000,\"score\":10010,\"mtu\":9000},"
		"{\"if\":\"cni0\",\"cls\":\"bridge\",\"fam\":4,\"addr\":\"10.244.0.1\",\"plen\":24,"
		"\"mbps\":-1,\"score\":1001,\"mtu\":0}]}",
		"{\"v\":1,\"pod\":\"job-w-2\",\"uid\":\"\",\"node\":\"\",\"c\":["
		"{\"if\":\"net1\",\"cls\":\"macvlan\",\"fam\":4,\"addr\":\"10.8.1.3\",\"plen\":24,"
		"\"gw\":\"10.8.1.1\",\"mbps\":25000,\"score\":8011,\"mtu\":1500}]}",
	};
	struct agree_report r[3];
	np_error err = { 0 };
	for (int i = 0; i < 3; i++) {
		if (agree_report_parse(reports[i], strlen(reports[i]), &r[i], &err) < 0) {
			fprintf(stderr, "seed report %d: %s\n", i, err.msg);
			return 1;
		}
		char name[32];
		snprintf(name, sizeof(name), "gen-%d.json", i);
		put(rdir, name, reports[i]);
	}
	return 0;
}
