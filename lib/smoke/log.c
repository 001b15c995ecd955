/* NCCL's own log, read to confirm which network NCCL used.
 *
 * NCCL_DEBUG=INFO lines look like
 *   host:1234:1290 [0] NCCL INFO NET/Socket : Using [0]eth1:10.1.0.11<0>
 * (2.26 and later may put a timestamp in front).  The messages read here,
 * with the NCCL source that prints them (tests/fixtures/nccl-logs/README.md
 * cites tag, file and line for each version):
 *   NCCL version 2.28.9+cuda13.0                         init.cc showVersion
 *   NET/Socket : Using [0]eth1:10.1.0.11<0> [1]...       transport/net_socket.cc
 *   NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth1:10.1.0.11<0>   transport/net_ib.cc
 *     (2.20-2.23 merged: " [0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB}")
 *   NET/IB : No device found.                            transport/net_ib.cc
 *   Failed to open libibverbs.so[.1]                     misc/ibvsymbols.cc
 *   Failed to initialize NET plugin IB                   plugin/net.cc (2.28)
 *   Bootstrap : Using eth1:10.1.0.11<0>                  bootstrap.cc (< 2.24)
 *   Bootstrap: Using eth1:10.1.0.11<0>                   bootstrap.cc (2.24+)
 *   Bootstrap: Using mlx5_0:1                            bootstrap.cc (2.24+, OOB over the net)
 *   Using network Socket                                 init.cc
 *   Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0  transport/net.cc
 *   ... Init COMPLETE                                    init.cc
 * An address is printed as host<port>, IPv6 without brackets.  Names are
 * kept as NCCL printed them: Linux allows ';', ',' and any byte above
 * 0x7f in an interface name, but no blank, ':' or '/'. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "smoke/smoke.h"
#include "util/cleanup.h"

#define LOG_FILE_MAX (8L << 20) /* read at most this much of one debug file */

/* A control byte cannot be part of anything NCCL names; everything else
 * is kept so that names compare byte for byte with the agreed ones. */
static void copy_field(char *dst, size_t len, const char *s, size_t n)
{
	if (n >= len)
		n = len - 1;
	for (size_t i = 0; i < n; i++)
		dst[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	dst[n] = '\0';
}

static bool starts(const char *s, const char *end, const char *prefix)
{
	size_t n = strlen(prefix);
	return (size_t)(end - s) >= n && memcmp(s, prefix, n) == 0;
}

static const char *find(const char *s, const char *end, const char *needle)
{
	size_t n = strlen(needle);
	for (; s + n <= end; s++)
		if (memcmp(s, needle, n) == 0)
			return s;
	return NULL;
}

static const char *rfind(const char *s, const char *end, const char *needle)
{
	const char *last = NULL, *p;
	while ((p = find(s, end, needle)) != NULL) {
		last = p;
		s = p + 1;
	}
	return last;
}

static const char *trim_end(const char *s, const char *end)
{
	while (end > s && (end[-1] == ' ' || end[-1] == '\r' || end[-1] == '\t'))
		end--;
	return end;
}

/* "eth1:10.1.0.11<0>" (up to end): the name before the first ':' (a Linux
 * name holds none), the address up to the last '<'. */
static void parse_name_addr(const char *s, const char *end, struct smoke_log_if *out)
{
	const char *colon = memchr(s, ':', (size_t)(end - s));
	if (!colon) {
		copy_field(out->name, sizeof(out->name), s, (size_t)(end - s));
		out->addr[0] = '\0';
		return;
	}
	copy_field(out->name, sizeof(out->name), s, (size_t)(colon - s));
	const char *a = colon + 1, *lt = rfind(a, end, "<");
	copy_field(out->addr, sizeof(out->addr), a, (size_t)((lt ? lt : end) - a));
}

/* "[12]" at s: the end of it, or NULL. */
static const char *index_tag(const char *s, const char *end)
{
	if (s >= end || *s != '[')
		return NULL;
	const char *d = s + 1;
	while (d < end && *d >= '0' && *d <= '9')
		d++;
	return d > s + 1 && d < end && *d == ']' ? d + 1 : NULL;
}

/* The end of a token: the next blank, or stop (0: none; a log may hold
 * NUL bytes). */
static const char *token_end(const char *s, const char *end, char stop)
{
	while (s < end && *s != ' ' && (!stop || *s != stop))
		s++;
	return s;
}

/* " [0]eth1:10.1.0.11<0> [1]eth2:...": each entry after "[n]". */
static size_t parse_socket_list(const char *s, const char *end, struct smoke_log_if *v, size_t max)
{
	size_t n = 0;
	while (s < end && n < max) {
		const char *open = memchr(s, '[', (size_t)(end - s));
		if (!open)
			break;
		const char *e = index_tag(open, end);
		if (!e) {
			s = open + 1;
			continue;
		}
		const char *te = token_end(e, end, '\0');
		if (te > e)
			parse_name_addr(e, te, &v[n++]);
		s = te;
	}
	return n;
}

/* "mlx5_0:1/RoCE", and the HPC-X plugin's "mlx5_0:1/IB/SHARP": keep
 * "mlx5_0:1" (a device name holds no '/'). */
static void ib_entry(const char *s, const char *end, struct smoke_log_if *out)
{
	const char *slash = memchr(s, '/', (size_t)(end - s));
	copy_field(out->name, sizeof(out->name), s, (size_t)((slash ? slash : end) - s));
	out->addr[0] = '\0';
}

/* " [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]" and, 2.20-2.23, the merged
 * " [0]={[0] mlx5_0:1/IB, [1] mlx5_1:1/IB}". */
static size_t parse_ib_list(const char *s, const char *end, struct smoke_log_if *v, size_t max,
			    bool *merged)
{
	size_t n = 0;
	while (s < end && n < max) {
		while (s < end && *s == ' ')
			s++;
		const char *e = index_tag(s, end);
		if (!e) {
			s = token_end(s, end, '\0');
			continue;
		}
		if (e + 1 < end && e[0] == '=' && e[1] == '{') {
			const char *close = memchr(e, '}', (size_t)(end - e));
			const char *ge = close ? close : end;
			*merged = true;
			for (const char *p = e + 2; p < ge && n < max;) {
				while (p < ge && (*p == ' ' || *p == ','))
					p++;
				const char *pe = index_tag(p, ge);
				if (!pe) {
					p = token_end(p, ge, ',');
					continue;
				}
				while (pe < ge && *pe == ' ')
					pe++;
				const char *te = token_end(pe, ge, ',');
				if (te > pe)
					ib_entry(pe, te, &v[n++]);
				p = te;
			}
			s = close ? close + 1 : end;
			continue;
		}
		const char *te = token_end(e, end, '\0');
		if (te > e)
			ib_entry(e, te, &v[n++]);
		s = te;
	}
	return n;
}

static void note_ib_absent(struct smoke_log *out, const char *m, const char *end)
{
	if (!out->ib_absent[0])
		copy_field(out->ib_absent, sizeof(out->ib_absent), m, (size_t)(trim_end(m, end) - m));
}

static void parse_bootstrap(const char *s, const char *end, struct smoke_log *out)
{
	while (s < end && *s == ' ')
		s++;
	const char *e = token_end(s, end, '\0');
	if (e == s)
		return;
	if (memchr(s, '<', (size_t)(e - s))) { /* name:address<port> */
		if (!out->has_bootstrap) {
			parse_name_addr(s, e, &out->bootstrap);
			out->has_bootstrap = true;
		}
	} else if (!out->has_boot_dev) {
		/* The net plugin's device:port: one of the net's own devices,
		 * which the NET/IB list already shows; kept apart so that it is
		 * not read as an interface. */
		copy_field(out->boot_dev.name, sizeof(out->boot_dev.name), s, (size_t)(e - s));
		out->has_boot_dev = true;
	}
}

static void parse_channel(const char *m, const char *end, struct smoke_log *out)
{
	const char *p = find(m, end, " via ");
	if (!p)
		return;
	p += strlen(" via ");
	if (!starts(p, end, "NET/")) {
		out->n_local++;
		return;
	}
	p += strlen("NET/");
	/* "NET/%s/%d...": the name runs to the '/' before the device number
	 * ("AWS Libfabric" holds a blank). */
	const char *e = p;
	while (e < end && !(*e == '/' && e + 1 < end && e[1] >= '0' && e[1] <= '9'))
		e++;
	char net[sizeof(out->channel_net)];
	copy_field(net, sizeof(net), p, (size_t)(trim_end(p, e) - p));
	if (!out->n_channels)
		memcpy(out->channel_net, net, sizeof(net));
	else if (strcmp(net, out->channel_net) != 0)
		out->channel_mixed = true;
	out->n_channels++;
}

static void parse_message(const char *m, const char *end, struct smoke_log *out)
{
	const char *p;
	if (starts(m, end, "NCCL version ")) {
		m += strlen("NCCL version ");
		const char *e = token_end(m, end, '\0');
		if (!out->version[0])
			copy_field(out->version, sizeof(out->version), m, (size_t)(e - m));
	} else if (starts(m, end, "NET/Socket : Using")) {
		if (!out->n_socket)
			out->n_socket = parse_socket_list(m + strlen("NET/Socket : Using"), end,
							  out->socket, SMOKE_LOG_IFS_MAX);
	} else if (starts(m, end, "NET/IB : Using")) {
		const char *oob = rfind(m, end, "; OOB ");
		if (!out->n_ib)
			out->n_ib = parse_ib_list(m + strlen("NET/IB : Using"), oob ? oob : end,
						  out->ib, SMOKE_LOG_IFS_MAX, &out->ib_merged);
		if (oob && !out->has_oob) {
			const char *s = oob + strlen("; OOB ");
			parse_name_addr(s, token_end(s, end, '\0'), &out->oob);
			out->has_oob = true;
		}
	} else if (starts(m, end, "NET/IB : No device found") ||
		   starts(m, end, "Failed to open libibverbs.so")) {
		note_ib_absent(out, m, end);
	} else if (starts(m, end, "Failed to initialize NET plugin ")) {
		const char *name = m + strlen("Failed to initialize NET plugin ");
		char net[64];
		copy_field(net, sizeof(net), name, (size_t)(trim_end(name, end) - name));
		if (smoke_net_family(net) == SMOKE_NET_IB)
			note_ib_absent(out, m, end);
	} else if (starts(m, end, "NCCL_IB_DISABLE set by environment to ")) {
		p = m + strlen("NCCL_IB_DISABLE set by environment to ");
		if (p < end && *p != '0')
			note_ib_absent(out, m, end);
	} else if (starts(m, end, "Bootstrap : Using") || starts(m, end, "Bootstrap: Using")) {
		parse_bootstrap(m + (m[9] == ' ' ? strlen("Bootstrap : Using") : strlen("Bootstrap: Using")),
				end, out);
	} else if (starts(m, end, "Using network ")) {
		m += strlen("Using network ");
		if (!out->network[0])
			copy_field(out->network, sizeof(out->network), m, (size_t)(trim_end(m, end) - m));
	} else if (starts(m, end, "Channel ")) {
		parse_channel(m, end, out);
	}
	if (find(m, end, "Init COMPLETE"))
		out->init_complete = true;
}

void smoke_log_parse(const char *buf, size_t len, struct smoke_log *out)
{
	const char *s = buf, *end = buf + len;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *le = nl ? nl : end;
		const char *m;
		if ((m = find(s, le, " NCCL INFO ")) != NULL) {
			parse_message(m + strlen(" NCCL INFO "), le, out);
		} else if ((m = find(s, le, " NCCL WARN ")) != NULL) {
			m += strlen(" NCCL WARN ");
			if (starts(m, le, "NET/IB : No IP interface found"))
				note_ib_absent(out, m, le);
			if (out->n_warn < SMOKE_LOG_LINES_KEEP) {
				copy_field(out->warn[out->n_warn], sizeof(out->warn[0]), m,
					   (size_t)(trim_end(m, le) - m));
				out->n_warn++;
			}
		}
		s = le + (nl ? 1 : 0);
	}
}

enum smoke_net_family smoke_net_family(const char *name)
{
	if (!name || !*name)
		return SMOKE_NET_NONE;
	if (strcmp(name, "Socket") == 0)
		return SMOKE_NET_SOCKET;
	if (strcmp(name, "IB") == 0 || strncmp(name, "IBext", 5) == 0)
		return SMOKE_NET_IB;
	if (strcmp(name, "AWS Libfabric") == 0 || strcmp(name, "Libfabric") == 0)
		return SMOKE_NET_OFI;
	return SMOKE_NET_OTHER;
}

static const char *family_text(enum smoke_net_family f)
{
	static const char *const t[] = { [SMOKE_NET_NONE] = "none", [SMOKE_NET_SOCKET] = "sockets",
					 [SMOKE_NET_IB] = "IB verbs", [SMOKE_NET_OFI] = "libfabric",
					 [SMOKE_NET_OTHER] = "an unknown plugin" };
	return t[f];
}

/* An NCCL_IB_HCA entry names a device ("mlx5_0") or one port of it
 * ("mlx5_0:1"); NCCL prints "mlx5_0:1". */
static bool hca_in(const char *list, const char *dev_port)
{
	const char *colon = strrchr(dev_port, ':');
	size_t full = strlen(dev_port), dev = colon ? (size_t)(colon - dev_port) : full;
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if ((len == full && memcmp(p, dev_port, full) == 0) ||
		    (len == dev && memcmp(p, dev_port, dev) == 0))
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

/* Every entry of the agreed list is among NCCL's devices. */
static const char *hca_missing(const char *list, const struct smoke_log *log, char *buf, size_t len)
{
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		snprintf(buf, len, "%.*s", (int)n, p);
		bool seen = false;
		for (size_t i = 0; i < log->n_ib && !seen; i++)
			seen = hca_in(buf, log->ib[i].name);
		if (n && !seen)
			return buf;
		p = comma ? comma + 1 : NULL;
	}
	return NULL;
}

static bool if_in(const struct smoke_log_want *w, const char *name)
{
	for (size_t i = 0; i < w->n_ifs; i++)
		if (w->ifs[i] && strcmp(w->ifs[i], name) == 0)
			return true;
	return false;
}

static void ifs_text(const struct smoke_log_want *w, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < w->n_ifs && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? "," : "", w->ifs[i] ? w->ifs[i] : "");
}

static int check_sockets(const struct smoke_log *log, const struct smoke_log_want *w,
			 const char *want, np_error *err)
{
	for (size_t i = 0; i < log->n_socket; i++)
		if (!if_in(w, log->socket[i].name))
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL used NET/Socket on %s:%s, not the agreed %s (\"NET/Socket : Using [%zu]%s:%s\")",
					    log->socket[i].name, log->socket[i].addr, want, i,
					    log->socket[i].name, log->socket[i].addr);
	for (size_t i = 0; i < w->n_ifs; i++) {
		bool seen = false;
		for (size_t j = 0; j < log->n_socket && !seen; j++)
			seen = strcmp(log->socket[j].name, w->ifs[i]) == 0;
		if (!seen)
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL's NET/Socket list leaves out the agreed %s (it uses %zu of the %zu agreed interfaces %s)",
					    w->ifs[i], log->n_socket, w->n_ifs, want);
	}
	return 0;
}

static int check_ib(const struct smoke_log *log, const struct smoke_log_want *w, const char *want,
		    np_error *err)
{
	char missing[128];
	for (size_t i = 0; i < log->n_ib; i++)
		if (!hca_in(w->hca, log->ib[i].name))
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL used NET/IB device %s, not one of the agreed %s",
					    log->ib[i].name, w->hca);
	if (log->n_ib && hca_missing(w->hca, log, missing, sizeof(missing)))
		return np_error_set(err, NP_ESMOKE, 0,
				    "NCCL's NET/IB list leaves out the agreed HCA %s (agreed: %s)",
				    missing, w->hca);
	if (log->has_oob && w->n_ifs && !if_in(w, log->oob.name))
		return np_error_set(err, NP_ESMOKE, 0,
				    "NCCL's IB out-of-band interface is %s, not the agreed %s (\"OOB %s:%s\")",
				    log->oob.name, want, log->oob.name, log->oob.addr);
	return 0;
}

__attribute__((format(printf, 2, 3))) static int not_proven(np_error *err, const char *fmt, ...)
{
	char why[NP_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	np_error_set(err, NP_ESMOKE, 0, "not proven: %s", why);
	return 1;
}

int smoke_log_check(const struct smoke_log *log, const struct smoke_log_want *w, np_error *err)
{
	char want[SMOKE_LOG_IFS_MAX * 17 + 1];
	ifs_text(w, want, sizeof(want));
	/* The family NCCL used: its own word first, then its channels, then
	 * the device lines alone. */
	enum smoke_net_family used = smoke_net_family(log->network);
	if (used == SMOKE_NET_NONE)
		used = smoke_net_family(log->channel_net);
	if (used == SMOKE_NET_NONE)
		used = log->n_ib && !log->n_socket ? SMOKE_NET_IB
		       : log->n_socket		   ? SMOKE_NET_SOCKET
						   : SMOKE_NET_NONE;
	enum smoke_net_family expect = w->hca ? SMOKE_NET_IB : SMOKE_NET_SOCKET;
	const char *used_name = log->network[0] ? log->network : log->channel_net;

	if (w->boot == SMOKE_BOOT_IFNAME && w->n_ifs && log->has_bootstrap &&
	    !if_in(w, log->bootstrap.name))
		return np_error_set(err, NP_ESMOKE, 0,
				    "NCCL bootstrapped on %s:%s, not the agreed %s (\"Bootstrap: Using %s:%s\")",
				    log->bootstrap.name, log->bootstrap.addr, want,
				    log->bootstrap.name, log->bootstrap.addr);
	if (used == SMOKE_NET_NONE && !log->has_bootstrap)
		return np_error_set(err, NP_ESMOKE, 0,
				    "NCCL's log names no network device (was NCCL_DEBUG_SUBSYS overridden?)");

	if (expect == SMOKE_NET_IB && used == SMOKE_NET_SOCKET) {
		if (log->ib_absent[0])
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL fell back to sockets although nicpick chose the HCAs %s: \"%s\" (no /dev/infiniband, no libibverbs in the image, or no RDMA device requested?)",
					    w->hca, log->ib_absent);
		return np_error_set(err, NP_ESMOKE, 0,
				    "NCCL used sockets although nicpick chose the HCAs %s (\"Using network %s\")",
				    w->hca, used_name[0] ? used_name : "Socket");
	}
	if (expect == SMOKE_NET_SOCKET && used == SMOKE_NET_IB)
		return np_error_set(err, NP_ESMOKE, 0,
				    "NCCL used NET/IB (%s) although nicpick chose sockets on %s",
				    log->n_ib ? log->ib[0].name : used_name, want);
	/* Device and OOB lines, wherever a plugin prints them. */
	if (w->n_ifs && (log->n_socket || used == SMOKE_NET_SOCKET) && check_sockets(log, w, want, err) < 0)
		return -1;
	if (w->hca && check_ib(log, w, want, err) < 0)
		return -1;
	if (expect == SMOKE_NET_IB && used == SMOKE_NET_IB && !log->n_ib && log->ib_absent[0])
		return np_error_set(err, NP_ESMOKE, 0, "NCCL found none of the HCAs %s: \"%s\"",
				    w->hca, log->ib_absent);

	if (log->n_channels) {
		enum smoke_net_family ch = smoke_net_family(log->channel_net);
		if (log->channel_mixed || ((ch == SMOKE_NET_SOCKET || ch == SMOKE_NET_IB) && ch != expect))
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL's channels run via NET/%s%s, not over %s",
					    log->channel_net, log->channel_mixed ? " and others" : "",
					    family_text(expect));
		if (ch != expect)
			return not_proven(err,
					  "NCCL's channels run via NET/%s (%s), whose devices nicpick cannot see",
					  log->channel_net, family_text(ch));
	} else if (w->world > 1) {
		if (used != expect && used != SMOKE_NET_NONE)
			return not_proven(err,
					  "NCCL used the net plugin %s (%s) and its log shows no channel over it",
					  used_name, family_text(used));
		return not_proven(err,
				  "no channel ran over the network (%zu via P2P/SHM/NVLink, none via NET/), so the agreed %s carried no data",
				  log->n_local, w->hca ? w->hca : want[0] ? want : "network");
	}
	return 0;
}

int smoke_log_read_dir(const char *dir, struct smoke_log *log, np_error *err)
{
	memset(log, 0, sizeof(*log));
	DIR *d = opendir(dir);
	if (!d)
		return np_error_set(err, NP_ESMOKE, errno, "cannot read NCCL's log in %s", dir);
	struct dirent *de;
	int ret = 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "nccl-debug.", 11) != 0)
			continue;
		cleanup_close int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			ret = np_error_set(err, NP_ESMOKE, errno, "cannot read %s/%s", dir, de->d_name);
			break;
		}
		size_t len = st.st_size > LOG_FILE_MAX ? (size_t)LOG_FILE_MAX : (size_t)st.st_size;
		cleanup_free char *buf = malloc(len + 1);
		if (!buf) {
			ret = np_error_set(err, NP_EINTERNAL, ENOMEM, "reading NCCL's log");
			break;
		}
		size_t off = 0;
		while (off < len) {
			ssize_t r = read(fd, buf + off, len - off);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			off += (size_t)r;
		}
		smoke_log_parse(buf, off, log);
	}
	closedir(d);
	return ret;
}
