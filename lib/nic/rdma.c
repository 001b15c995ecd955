/* RDMA ports from class/infiniband, attached to the interfaces they serve.
 *
 * class/infiniband is walked once.  A port belongs to the netdevs that its
 * GID table names (ports/N/gid_attrs/ndevs/IDX: RoCE, including VLANs and
 * bonds over the port); a port whose table names none (InfiniBand, IPoIB)
 * belongs to the netdevs on the same PCI device as the HCA. */
#include "nic/nic.h"
#include "nic/nic_priv.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/grow.h"

struct names {
	char **v;
	size_t n, cap;
};

static void names_free(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

static int names_add(struct names *s, const char *name)
{
	if (np_grow(&s->v, &s->cap, s->n, sizeof(*s->v), 8) < 0)
		return -1;
	if (!(s->v[s->n] = strdup(name)))
		return -1;
	s->n++;
	return 0;
}

static bool names_has(const struct names *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return true;
	return false;
}

static int cmp_version(const void *a, const void *b)
{
	/* mlx5_2 before mlx5_10; GID 2 before GID 10. */
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* Entries of rootfd/rel (no dot entries), sorted; 0 with none when the
 * directory is missing. */
static int list_dir(int rootfd, const char *rel, struct names *out)
{
	int dfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -1;
	}
	int rc = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.' && names_add(out, e->d_name) < 0) {
			rc = -1;
			break;
		}
	closedir(d);
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(char *), cmp_version);
	return rc;
}

/* "100 Gb/sec (4X EDR)" -> 100000; "2.5 Gb/sec (1X SDR)" -> 2500. */
long nicp_parse_rate(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	/* NaN fails every comparison; past 100 Tb/s is not a link rate, and
	 * scaled to Mb/s it may not fit a long ("1e30 Gb/sec" did not). */
	if (end == s || !(v > 0 && v < 1e8))
		return -1;
	while (*end == ' ')
		end++;
	if (strncmp(end, "Gb/s", 4) == 0)
		return (long)(v * 1000 + 0.5);
	if (strncmp(end, "Mb/s", 4) == 0)
		return (long)(v + 0.5);
	return -1;
}

/* The netdev's first IPv4 address as the IPv4-mapped GID. */
static bool mapped_gid(const struct nic *n, unsigned char gid[16])
{
	for (size_t i = 0; i < n->n_addrs; i++) {
		if (n->addrs[i].family != AF_INET)
			continue;
		memset(gid, 0, 10);
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, n->addrs[i].bytes, 4);
		return true;
	}
	return false;
}

/* Lowest GID index of type "RoCE v2" that carries n's first IPv4 address
 * (and, where the table says, belongs to n). */
static int rocev2_index(int rootfd, const char *portdir, const struct nic *n,
			const struct names *idx, bool have_ndevs)
{
	unsigned char want[16], got[16];
	char rel[PATH_MAX], buf[128];

	if (!mapped_gid(n, want))
		return -1;
	for (size_t k = 0; k < idx->n; k++) {
		const char *i = idx->v[k];
		if (have_ndevs) {
			nicp_pathf(rel, sizeof(rel), "%s/gid_attrs/ndevs/%s", portdir, i);
			if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) < 0 ||
			    strcmp(buf, n->name) != 0)
				continue;
		}
		nicp_pathf(rel, sizeof(rel), "%s/gid_attrs/types/%s", portdir, i);
		if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) < 0 ||
		    strcasecmp(buf, "RoCE v2") != 0)
			continue;
		nicp_pathf(rel, sizeof(rel), "%s/gids/%s", portdir, i);
		if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) < 0 ||
		    inet_pton(AF_INET6, buf, got) != 1 || memcmp(got, want, 16) != 0)
			continue;
		long v;
		if (nicp_parse_long(i, &v) && v >= 0 && v <= INT_MAX)
			return (int)v;
	}
	return -1;
}

static int attach(struct nic *n, const struct nic_rdma_port *p)
{
	for (size_t i = 0; i < n->n_rdma; i++)
		if (n->rdma[i].port == p->port && strcmp(n->rdma[i].hca, p->hca) == 0)
			return 0;
	struct nic_rdma_port *v = realloc(n->rdma, (n->n_rdma + 1) * sizeof(*v));
	if (!v)
		return -1;
	n->rdma = v;
	n->rdma[n->n_rdma++] = *p;
	return 0;
}

/* Port number of an interface on a multi-port HCA, from dev_port (0-based);
 * 0 when unknown. */
static int netdev_port(int rootfd, const struct nic *n)
{
	char rel[PATH_MAX], buf[32];
	long v;
	snprintf(rel, sizeof(rel), "class/net/%s/dev_port", n->name);
	if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) < 0 || !nicp_parse_long(buf, &v) ||
	    v < 0 || v > 255)
		return 0;
	return (int)v + 1;
}

static int read_port(int rootfd, const char *hca, const char *port, struct nic_list *l,
		     const struct nicp_index *ix, const ssize_t *same_dev, size_t n_same,
		     size_t n_ports)
{
	char dir[PATH_MAX], rel[PATH_MAX], buf[128];
	struct nic_rdma_port p = { .rate_mbps = -1, .gid_index_v4_rocev2 = -1 };
	struct names ndevs = { 0 }, idx = { 0 };
	long v;
	int rc = -1;

	if (!nicp_parse_long(port, &v) || v <= 0 || v > INT_MAX)
		return 0;
	p.port = (int)v;
	snprintf(p.hca, sizeof(p.hca), "%s", hca);
	snprintf(dir, sizeof(dir), "class/infiniband/%s/ports/%s", hca, port);
	nicp_pathf(rel, sizeof(rel), "%s/state", dir);
	if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) >= 0)
		p.active = strtol(buf, NULL, 10) == 4; /* IB_PORT_ACTIVE */
	nicp_pathf(rel, sizeof(rel), "%s/link_layer", dir);
	if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) >= 0)
		nicp_copy(p.link_layer, sizeof(p.link_layer), buf);
	nicp_pathf(rel, sizeof(rel), "%s/rate", dir);
	if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) >= 0)
		p.rate_mbps = nicp_parse_rate(buf);

	/* Netdevs named by the GID table (unused entries fail to read). */
	nicp_pathf(rel, sizeof(rel), "%s/gid_attrs/ndevs", dir);
	if (list_dir(rootfd, rel, &idx) < 0)
		goto out;
	bool have_ndevs = idx.n > 0;
	for (size_t k = 0; k < idx.n; k++) {
		nicp_pathf(rel, sizeof(rel), "%s/gid_attrs/ndevs/%s", dir, idx.v[k]);
		if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) > 0 && !names_has(&ndevs, buf) &&
		    names_add(&ndevs, buf) < 0)
			goto out;
	}
	if (!have_ndevs) {
		nicp_pathf(rel, sizeof(rel), "%s/gid_attrs/types", dir);
		if (list_dir(rootfd, rel, &idx) < 0)
			goto out;
	}
	bool roce = strcasecmp(p.link_layer, "Ethernet") == 0;

	if (ndevs.n > 0) {
		for (size_t k = 0; k < ndevs.n; k++) {
			ssize_t pos = nicp_index_name(ix, ndevs.v[k]);
			if (pos < 0)
				continue;
			struct nic_rdma_port q = p;
			if (roce)
				q.gid_index_v4_rocev2 =
					rocev2_index(rootfd, dir, &l->v[pos], &idx, have_ndevs);
			if (attach(&l->v[pos], &q) < 0)
				goto out;
		}
	} else {
		for (size_t k = 0; k < n_same; k++) {
			struct nic *n = &l->v[same_dev[k]];
			/* On a multi-port HCA, dev_port tells which port is whose. */
			if (n_ports > 1) {
				int np = netdev_port(rootfd, n);
				if (np && np != p.port)
					continue;
			}
			struct nic_rdma_port q = p;
			if (roce)
				q.gid_index_v4_rocev2 = rocev2_index(rootfd, dir, n, &idx, false);
			if (attach(n, &q) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	names_free(&ndevs);
	names_free(&idx);
	return rc;
}

static int read_hca(int rootfd, const char *hca, struct nic_list *l,
		    const struct nicp_facts *fx, const struct nicp_index *ix)
{
	char rel[PATH_MAX];
	cleanup_free char *devpath = NULL;
	cleanup_free ssize_t *same = NULL;
	struct names ports = { 0 };
	size_t n_same = 0;
	int rc = -1;

	if (nicp_device_path(rootfd, "class/infiniband", hca, &devpath) == 0) {
		same = malloc((l->n + 1) * sizeof(*same));
		if (!same)
			return -1;
		for (size_t i = 0; i < l->n; i++)
			if (fx[i].devpath && strcmp(fx[i].devpath, devpath) == 0)
				same[n_same++] = (ssize_t)i;
	} else if (errno == ENOMEM) {
		return -1;
	}
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports", hca);
	if (list_dir(rootfd, rel, &ports) < 0)
		goto out;
	for (size_t k = 0; k < ports.n; k++)
		if (read_port(rootfd, hca, ports.v[k], l, ix, same, n_same, ports.n) < 0)
			goto out;
	rc = 0;
out:
	names_free(&ports);
	return rc;
}

int nicp_rdma_read(const char *root, struct nic_list *l, const struct nicp_facts *fx,
		   const struct nicp_index *ix, np_error *err)
{
	struct names hcas = { 0 };
	int rc = 0;

	cleanup_close int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return 0; /* reported by the sysfs reader already, or no /sys */
	if (list_dir(rootfd, "class/infiniband", &hcas) < 0) {
		rc = np_error_set(err, NP_EINTERNAL, errno, "%s/class/infiniband", root);
		goto out;
	}
	for (size_t k = 0; k < hcas.n; k++)
		if (read_hca(rootfd, hcas.v[k], l, fx, ix) < 0) {
			rc = np_error_set(err, NP_EINTERNAL, errno, "RDMA device %s", hcas.v[k]);
			goto out;
		}
out:
	names_free(&hcas);
	return rc;
}
