/* NCCL's own log, read to confirm which device NCCL used.
 *
 * NCCL_DEBUG=INFO lines look like
 *   host:1234:1290 [0] NCCL INFO NET/Socket : Using [0]eth1:10.1.0.11<0>
 * (2.26 and later may put a timestamp in front).  The messages read here,
 * with the NCCL source that prints them:
 *   NCCL version 2.28.9+cuda13.0                         init.cc showVersion
 *   NET/Socket : Using [0]eth1:10.1.0.11<0> [1]...       transport/net_socket.cc
 *   NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth1:10.1.0.11<0>   transport/net_ib
 *   Bootstrap : Using eth1:10.1.0.11<0>                  bootstrap.cc (< 2.23)
 *   Bootstrap: Using eth1:10.1.0.11<0>                   bootstrap.cc (2.23+, BOOTSTRAP)
 *   Using network Socket                                 net.cc
 *   Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0  transport.cc
 *   ... Init COMPLETE                                    init.cc
 * An address is printed as host<port>, IPv6 without brackets. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "smoke/smoke.h"
#include "util/cleanup.h"

#define LOG_FILE_MAX (8L << 20) /* read at most this much of one debug file */

static void copy_field(char *dst, size_t len, const char *s, size_t n)
{
	if (n >= len)
		n = len - 1;
	for (size_t i = 0; i < n; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
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

/* "eth1:10.1.0.11<0>" (up to end): the name before the first ':', the
 * address up to '<' or a blank. */
static void parse_name_addr(const char *s, const char *end, struct smoke_log_if *out)
{
	const char *colon = memchr(s, ':', (size_t)(end - s));
	if (!colon) {
		copy_field(out->name, sizeof(out->name), s, (size_t)(end - s));
		out->addr[0] = '\0';
		return;
	}
	copy_field(out->name, sizeof(out->name), s, (size_t)(colon - s));
	const char *a = colon + 1, *e = a;
	while (e < end && *e != '<' && *e != ' ' && *e != ';')
		e++;
	copy_field(out->addr, sizeof(out->addr), a, (size_t)(e - a));
}

/* " [0]eth1:10.1.0.11<0> [1]eth2:...": each entry after "[n]". */
static size_t parse_list(const char *s, const char *end, struct smoke_log_if *v, size_t max)
{
	size_t n = 0;
	while (s < end && n < max) {
		const char *open = memchr(s, '[', (size_t)(end - s));
		if (!open)
			break;
		const char *close = memchr(open, ']', (size_t)(end - open));
		if (!close)
			break;
		bool digits = close > open + 1;
		for (const char *d = open + 1; d < close; d++)
			digits = digits && *d >= '0' && *d <= '9';
		const char *e = close + 1;
		while (e < end && *e != ' ' && *e != ';')
			e++;
		if (digits && e > close + 1) {
			/* NET/IB entries are "mlx5_0:1/RoCE": keep "mlx5_0:1". */
			const char *slash = memchr(close + 1, '/', (size_t)(e - close - 1));
			if (slash && !memchr(close + 1, '<', (size_t)(e - close - 1))) {
				copy_field(v[n].name, sizeof(v[n].name), close + 1,
					   (size_t)(slash - close - 1));
				v[n].addr[0] = '\0';
			} else {
				parse_name_addr(close + 1, e, &v[n]);
			}
			n++;
		}
		s = e;
	}
	return n;
}

static void parse_message(const char *m, const char *end, struct smoke_log *out)
{
	const char *p;
	if (starts(m, end, "NCCL version ")) {
		m += strlen("NCCL version ");
		const char *e = m;
		while (e < end && *e != ' ')
			e++;
		if (!out->version[0])
			copy_field(out->version, sizeof(out->version), m, (size_t)(e - m));
	} else if (starts(m, end, "NET/Socket : Using")) {
		if (!out->n_socket)
			out->n_socket = parse_list(m + strlen("NET/Socket : Using"), end, out->socket,
						   SMOKE_LOG_IFS_MAX);
	} else if (starts(m, end, "NET/IB : Using")) {
		const char *oob = find(m, end, "; OOB ");
		if (!out->n_ib)
			out->n_ib = parse_list(m + strlen("NET/IB : Using"), oob ? oob : end, out->ib,
					       SMOKE_LOG_IFS_MAX);
		if (oob && !out->has_oob) {
			const char *s = oob + strlen("; OOB "), *e = s;
			while (e < end && *e != ' ')
				e++;
			parse_name_addr(s, e, &out->oob);
			out->has_oob = true;
		}
	} else if (starts(m, end, "Bootstrap : Using ") || starts(m, end, "Bootstrap: Using ")) {
		if (!out->has_bootstrap) {
			const char *s = m + (m[9] == ' ' ? strlen("Bootstrap : Using ")
							  : strlen("Bootstrap: Using "));
			const char *e = s;
			while (e < end && *e != ' ')
				e++;
			parse_name_addr(s, e, &out->bootstrap);
			out->has_bootstrap = true;
		}
	} else if (starts(m, end, "Using network ")) {
		m += strlen("Using network ");
		if (!out->network[0])
			copy_field(out->network, sizeof(out->network), m, (size_t)(end - m));
	} else if (starts(m, end, "Channel ") && (p = find(m, end, " via NET/")) != NULL) {
		p += strlen(" via NET/");
		const char *e = p;
		while (e < end && *e != '/' && *e != ' ' && *e != '(')
			e++;
		char net[sizeof(out->channel_net)];
		copy_field(net, sizeof(net), p, (size_t)(e - p));
		if (!out->n_channels)
			memcpy(out->channel_net, net, sizeof(net));
		else if (strcmp(net, out->channel_net) != 0)
			out->channel_mixed = true;
		out->n_channels++;
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
			if (out->n_warn < SMOKE_LOG_LINES_KEEP) {
				m += strlen(" NCCL WARN ");
				copy_field(out->warn[out->n_warn], sizeof(out->warn[0]), m,
					   (size_t)(le - m));
				out->n_warn++;
			}
		}
		s = le + (nl ? 1 : 0);
	}
}

static bool in_list(const char *list, const char *item)
{
	size_t n = strlen(item);
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == n && memcmp(p, item, n) == 0)
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

int smoke_log_check(const struct smoke_log *log, const char *want_if, const char *want_hca,
		    np_error *err)
{
	bool ib = strcmp(log->network, "IB") == 0 || (!log->network[0] && log->n_ib && !log->n_socket);
	if (log->has_bootstrap && strcmp(log->bootstrap.name, want_if) != 0)
		return np_error_set(err, NP_ESMOKE, 0,
				    "NCCL bootstrapped on %s:%s, not the agreed %s (\"Bootstrap: Using %s:%s\")",
				    log->bootstrap.name, log->bootstrap.addr, want_if,
				    log->bootstrap.name, log->bootstrap.addr);
	if (ib) {
		if (!want_hca)
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL used NET/IB (%s) although nicpick chose sockets on %s",
					    log->n_ib ? log->ib[0].name : "?", want_if);
		for (size_t i = 0; i < log->n_ib; i++)
			if (!in_list(want_hca, log->ib[i].name))
				return np_error_set(err, NP_ESMOKE, 0,
						    "NCCL used NET/IB device %s, not one of the agreed %s",
						    log->ib[i].name, want_hca);
		if (log->has_oob && strcmp(log->oob.name, want_if) != 0)
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL's IB out-of-band interface is %s, not the agreed %s",
					    log->oob.name, want_if);
	} else if (log->n_socket) {
		for (size_t i = 0; i < log->n_socket; i++)
			if (strcmp(log->socket[i].name, want_if) != 0)
				return np_error_set(err, NP_ESMOKE, 0,
						    "NCCL used NET/Socket on %s:%s, not the agreed %s (\"NET/Socket : Using [%zu]%s:%s\")",
						    log->socket[i].name, log->socket[i].addr, want_if, i,
						    log->socket[i].name, log->socket[i].addr);
	} else if (!log->has_bootstrap) {
		return np_error_set(err, NP_ESMOKE, 0,
				    "NCCL's log names no network device (was NCCL_DEBUG_SUBSYS overridden?)");
	}
	if (log->n_channels) {
		const char *want_net = ib ? "IB" : "Socket";
		if (strcmp(log->channel_net, want_net) != 0 || log->channel_mixed)
			return np_error_set(err, NP_ESMOKE, 0,
					    "NCCL's channels run via NET/%s%s, not NET/%s",
					    log->channel_net, log->channel_mixed ? " and others" : "",
					    want_net);
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
