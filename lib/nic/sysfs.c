/* sysfs facts of network interfaces, read from a root that may be the real
 * /sys or a fixture tree.  A missing attribute means "unknown", never an
 * error.  Small files are read with open/read (no stdio) relative to one
 * directory fd per interface, to keep 1,000 interfaces cheap. */
#include "nic/nic.h"
#include "nic/nic_priv.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

ssize_t nicp_read_small(int dirfd, const char *path, char *buf, size_t len)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	ssize_t n;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	int saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return -1;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	return n;
}

bool nicp_pathf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < len;
}

void nicp_copy(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

bool nicp_parse_long(const char *s, long *out)
{
	char *end;
	if (!s || !*s)
		return false;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

void nicp_path_normalise(const char *in, char *out, size_t len)
{
	/* Component stack kept in `out` itself: append, or cut back on "..". */
	size_t o = 0;
	const char *p = in;

	if (len == 0)
		return;
	out[0] = '\0';
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		size_t cl = (size_t)(e - p);
		if (cl == 0 || (cl == 1 && p[0] == '.')) {
			/* nothing */
		} else if (cl == 2 && p[0] == '.' && p[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* the '/' itself */
			out[o] = '\0';
		} else if (o + (o ? 1 : 0) + cl < len) {
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, cl);
			o += cl;
			out[o] = '\0';
		}
		p = e;
	}
}

bool nicp_is_pci_addr(const char *s)
{
	/* domain:bus:device.function, e.g. 0000:a2:00.0 (domains may be
	 * longer than four digits behind VMD). */
	size_t i = 0, d = 0;
	for (; s[i] && s[i] != ':'; i++, d++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	if (d < 4 || s[i] != ':')
		return false;
	const char *t = s + i + 1;
	return isxdigit((unsigned char)t[0]) && isxdigit((unsigned char)t[1]) && t[2] == ':' &&
	       isxdigit((unsigned char)t[3]) && isxdigit((unsigned char)t[4]) && t[5] == '.' &&
	       t[6] >= '0' && t[6] <= '7' && t[7] == '\0';
}

static const char *basename_of(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* Symlink target as text, or NULL. */
static char *read_link(int dirfd, const char *path, char *buf, size_t len)
{
	ssize_t n = readlinkat(dirfd, path, buf, len - 1);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return buf;
}

/* Where a symlink at `dir/target` points, relative to the sysfs root.
 * Real sysfs links are relative; an absolute one (hand-made fixture) is
 * taken as relative to the root, minus a leading "/sys". */
static void join_link(const char *dir, const char *target, char *out, size_t len)
{
	char tmp[PATH_MAX * 2];
	if (target[0] == '/') {
		if (strncmp(target, "/sys/", 5) == 0)
			target += 4;
		snprintf(tmp, sizeof(tmp), "%s", target);
	} else {
		snprintf(tmp, sizeof(tmp), "%s/%s", dir, target);
	}
	nicp_path_normalise(tmp, out, len);
}

/* Resolve `class/X/NAME/device` without trusting the real filesystem's
 * idea of the root: class/X/NAME is usually a link into devices/, and the
 * `device` link is relative to where that lands. */
int nicp_device_path(int rootfd, const char *classdir, const char *name, char **out)
{
	char rel[PATH_MAX], tgt[PATH_MAX], base[PATH_MAX], full[PATH_MAX];

	*out = NULL;
	snprintf(rel, sizeof(rel), "%s/%s/device", classdir, name);
	if (!read_link(rootfd, rel, tgt, sizeof(tgt)))
		return -1;
	snprintf(rel, sizeof(rel), "%s/%s", classdir, name);
	char ltgt[PATH_MAX];
	if (read_link(rootfd, rel, ltgt, sizeof(ltgt)))
		join_link(classdir, ltgt, base, sizeof(base));
	else
		nicp_path_normalise(rel, base, sizeof(base));
	join_link(base, tgt, full, sizeof(full));
	*out = strdup(full);
	return *out ? 0 : -1;
}

/* PCI address of a device path: its last component when that is one (a
 * NIC), else the nearest PCI ancestor (virtio0 sits under its PCI device). */
static void pci_of(const char *devpath, char *out, size_t len)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", devpath);
	out[0] = '\0';
	for (;;) {
		char *slash = strrchr(tmp, '/');
		const char *comp = slash ? slash + 1 : tmp;
		if (nicp_is_pci_addr(comp)) {
			nicp_copy(out, len, comp);
			return;
		}
		if (!slash)
			return;
		*slash = '\0';
	}
}

static bool exists_at(int dirfd, const char *path)
{
	struct stat st;
	return fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Files of one interface, opened as "NAME/file" relative to class/net:
 * one path walk per file, no directory fd to open and close. */
struct iface {
	int netfd; /* class/net */
	const char *name;
};

static ssize_t if_read(const struct iface *c, const char *file, char *buf, size_t len)
{
	char rel[PATH_MAX];
	if (!nicp_pathf(rel, sizeof(rel), "%s/%s", c->name, file))
		return -1;
	return nicp_read_small(c->netfd, rel, buf, len);
}

static bool if_long(const struct iface *c, const char *file, long *v)
{
	char buf[64];
	return if_read(c, file, buf, sizeof(buf)) >= 0 && nicp_parse_long(buf, v);
}

static bool if_exists(const struct iface *c, const char *file)
{
	char rel[PATH_MAX];
	return nicp_pathf(rel, sizeof(rel), "%s/%s", c->name, file) && exists_at(c->netfd, rel);
}

bool nicp_uevent_devtype(const char *uevent, char *out, size_t len)
{
	for (const char *line = uevent; line && *line;) {
		const char *nl = strchrnul(line, '\n');
		if (strncmp(line, "DEVTYPE=", 8) == 0 && nl - line >= 8) {
			size_t n = (size_t)(nl - line) - 8;
			if (n >= len)
				n = len - 1;
			memcpy(out, line + 8, n);
			out[n] = '\0';
			return true;
		}
		line = *nl ? nl + 1 : NULL;
	}
	return false;
}

static void read_uevent_devtype(const struct iface *c, struct nic *n)
{
	char buf[1024];
	if (if_read(c, "uevent", buf, sizeof(buf)) >= 0)
		nicp_uevent_devtype(buf, n->devtype, sizeof(n->devtype));
}

long nicp_parse_speed(const char *s)
{
	long v;
	/* -1 (SPEED_UNKNOWN) or an old kernel's (u32)-1 mean unknown. */
	if (!nicp_parse_long(s, &v) || v <= 0 || v >= 100000000L)
		return -1;
	return v;
}

static int sysfs_one(int rootfd, int netfd, struct nic *n, struct nicp_facts *f, np_error *err)
{
	const struct iface c = { .netfd = netfd, .name = n->name };
	char buf[256], rel[PATH_MAX];
	long v;

	bool soft = nicp_kind_is_software(n->kind);

	/* Speed is read for every kind: vlan, macvlan, ipvlan and bond pass
	 * their lower devices' through, and veth's constant is what users
	 * see in sysfs too. */
	if (f->speed_known)
		; /* from the ethtool dump of the live node */
	else if (if_read(&c, "speed", buf, sizeof(buf)) >= 0)
		n->speed_mbps = nicp_parse_speed(buf);
	else if (errno == ENOENT && !if_exists(&c, "."))
		return 0; /* not in this sysfs: every fact stays unknown */
	if (!n->operstate[0]) {
		/* The link source said nothing about state: take sysfs's. */
		if (if_read(&c, "operstate", buf, sizeof(buf)) >= 0)
			nicp_copy(n->operstate, sizeof(n->operstate), buf);
		if (if_long(&c, "carrier", &v))
			n->carrier = v ? 1 : 0;
	}
	if (n->mtu <= 0 && if_long(&c, "mtu", &v))
		n->mtu = (int)v;
	if (n->arphrd < 0 && if_long(&c, "type", &v))
		n->arphrd = (int)v;
	/* The kind decides the class and there is no hardware behind it:
	 * skip the lookups that cannot change anything. */
	if (soft)
		return 0;
	read_uevent_devtype(&c, n);

	if (nicp_device_path(rootfd, "class/net", n->name, &f->devpath) == 0) {
		n->has_device = true;
		pci_of(f->devpath, n->pci, sizeof(n->pci));
		if (if_long(&c, "device/numa_node", &v) && v >= 0)
			n->numa_node = (int)v;
		if (nicp_pathf(rel, sizeof(rel), "%s/device/driver", n->name) &&
		    read_link(netfd, rel, buf, sizeof(buf)))
			nicp_copy(n->driver, sizeof(n->driver), basename_of(buf));
		n->is_vf = if_exists(&c, "device/physfn");
	} else if (errno == ENOMEM) {
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "sysfs %s", n->name);
	}
	if (!n->kind[0]) {
		f->has_bonding = if_exists(&c, "bonding");
		f->has_bridge = if_exists(&c, "bridge");
		f->has_tun_flags = if_exists(&c, "tun_flags");
	}
	return 0;
}

int nicp_sysfs_read(const char *root, struct nic_list *l, struct nicp_facts *fx, np_error *err)
{
	cleanup_close int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		if (errno == ENOENT && strcmp(root, "/sys") == 0)
			return 0; /* a container without /sys: netlink facts only */
		return np_error_set(err, NP_EUSAGE, errno, "sysfs root %s", root);
	}
	cleanup_close int netfd = openat(rootfd, "class/net", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (netfd < 0)
		return 0; /* a tree without network interfaces: all unknown */
	for (size_t i = 0; i < l->n; i++)
		if (sysfs_one(rootfd, netfd, &l->v[i], &fx[i], err) < 0)
			return -1;
	return 0;
}

/* ---- master/link fallbacks and `lower` ---- */

static void set_master(struct nic_list *l, const struct nicp_index *ix, const char *name,
		       int master, size_t *count)
{
	ssize_t p = nicp_index_name(ix, name);
	if (p >= 0 && l->v[p].master_ifindex == 0 && l->v[p].ifindex != master) {
		l->v[p].master_ifindex = master;
		(*count)++;
	}
}

static void slaves_from_sysfs(int rootfd, struct nic_list *l, const struct nicp_index *ix,
			      size_t i, size_t *count)
{
	struct nic *n = &l->v[i];
	char rel[PATH_MAX];

	if (n->cls == NIC_CLASS_BOND) {
		char buf[4096];
		snprintf(rel, sizeof(rel), "class/net/%s/bonding/slaves", n->name);
		if (nicp_read_small(rootfd, rel, buf, sizeof(buf)) < 0)
			return;
		char *save = NULL;
		for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
			set_master(l, ix, t, n->ifindex, count);
	} else if (n->cls == NIC_CLASS_BRIDGE) {
		snprintf(rel, sizeof(rel), "class/net/%s/brif", n->name);
		int dfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return;
		DIR *d = fdopendir(dfd);
		if (!d) {
			close(dfd);
			return;
		}
		for (struct dirent *e; (e = readdir(d));)
			if (e->d_name[0] != '.')
				set_master(l, ix, e->d_name, n->ifindex, count);
		closedir(d);
	}
}

static void link_from_sysfs(int rootfd, struct nic_list *l, const struct nicp_index *ix,
			    size_t i)
{
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "class/net/%s", l->v[i].name);
	int dfd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (strncmp(e->d_name, "lower_", 6) != 0)
			continue;
		ssize_t p = nicp_index_name(ix, e->d_name + 6);
		if (p >= 0 && (size_t)p != i) {
			l->v[i].link_ifindex = l->v[p].ifindex;
			break;
		}
	}
	closedir(d);
}

static bool stacked(enum nic_class c)
{
	return c == NIC_CLASS_VLAN || c == NIC_CLASS_MACVLAN || c == NIC_CLASS_IPVLAN;
}

int nicp_links_build(const char *root, struct nic_list *l, const struct nicp_facts *fx,
		     const struct nicp_index *ix, bool masters_complete, np_error *err)
{
	cleanup_close int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cleanup_free size_t *count = calloc(l->n + 1, sizeof(size_t));
	if (!count)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "lower devices");

	for (size_t i = 0; i < l->n; i++) {
		ssize_t p = nicp_index_pos(ix, l->v[i].master_ifindex);
		if (p >= 0)
			count[p]++;
	}
	for (size_t i = 0; i < l->n; i++) {
		struct nic *n = &l->v[i];
		/* A saved dump may lack some members' "master": sysfs knows
		 * them.  Bonds and bridges are few, so this stays cheap. */
		if (rootfd >= 0 && !masters_complete)
			slaves_from_sysfs(rootfd, l, ix, i, &count[i]);
		if (rootfd >= 0 && stacked(n->cls) && n->link_ifindex == 0 && !fx[i].link_other_ns)
			link_from_sysfs(rootfd, l, ix, i);
	}
	/* The set_master calls above may have added members of masters seen
	 * earlier; recount from scratch. */
	memset(count, 0, (l->n + 1) * sizeof(size_t));
	for (size_t i = 0; i < l->n; i++) {
		ssize_t p = nicp_index_pos(ix, l->v[i].master_ifindex);
		if (p >= 0)
			count[p]++;
	}
	for (size_t i = 0; i < l->n; i++) {
		struct nic *n = &l->v[i];
		ssize_t lp = stacked(n->cls) ? nicp_index_pos(ix, n->link_ifindex) : -1;
		size_t want = count[i] + (lp >= 0 ? 1 : 0);
		free(n->lower);
		n->lower = NULL;
		n->n_lower = 0;
		if (!want)
			continue;
		n->lower = malloc(want * sizeof(int));
		if (!n->lower)
			return np_error_set(err, NP_EINTERNAL, ENOMEM, "lower devices");
		if (lp >= 0)
			n->lower[n->n_lower++] = l->v[lp].ifindex;
	}
	for (size_t i = 0; i < l->n; i++) {
		ssize_t p = nicp_index_pos(ix, l->v[i].master_ifindex);
		if (p >= 0 && l->v[p].lower)
			l->v[p].lower[l->v[p].n_lower++] = l->v[i].ifindex;
	}
	return 0;
}
