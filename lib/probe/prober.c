/* The prober: connects to the ring neighbour, presents the round's token
 * and the address this pod published, and reads back what the neighbour
 * saw (probe.h). */
#include "probe/probe_priv.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"

static int wait_fd(int fd, short events, int64_t deadline_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	for (;;) {
		int64_t left = np_left_ms(deadline_ms);
		if (left == 0)
			return -ETIMEDOUT;
		int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* Read the server's one '\n'-terminated line (without it), as many bytes
 * at a time as have arrived: the answer is the whole of what the server
 * sends before it closes, so anything after the newline is a wrong
 * answer, not the start of another. */
static int read_line(int fd, char *buf, size_t len, int64_t deadline_ms)
{
	size_t n = 0;
	while (n + 1 < len) {
		int w = wait_fd(fd, POLLIN, deadline_ms);
		if (w < 0)
			return w;
		ssize_t r = read(fd, buf + n, len - 1 - n);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		char *nl = memchr(buf + n, '\n', (size_t)r);
		n += (size_t)r;
		if (nl) {
			if (nl != buf + n - 1)
				return -EPROTO;
			*nl = '\0';
			return 0;
		}
	}
	return -EMSGSIZE;
}

static int write_all(int fd, const char *buf, size_t len, int64_t deadline_ms)
{
	while (len > 0) {
		int w = wait_fd(fd, POLLOUT, deadline_ms);
		if (w < 0)
			return w;
		ssize_t r = send(fd, buf, len, MSG_NOSIGNAL);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		buf += r;
		len -= (size_t)r;
	}
	return 0;
}

static int connect_once(const struct sockaddr_storage *ss, socklen_t len, int64_t deadline_ms,
			int *fd_out)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)ss, len) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	int w = wait_fd(fd, POLLOUT, deadline_ms);
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (w == 0)
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (w < 0 || soerr) {
		close(fd);
		return w < 0 ? w : -soerr;
	}
	*fd_out = fd;
	return 0;
}

int probe_retry_ms(int attempt)
{
	if (attempt < PROBE_RETRY_QUICK)
		return PROBE_RETRY_FIRST_MS;
	int ms = PROBE_RETRY_FIRST_MS;
	for (int i = PROBE_RETRY_QUICK - 1; i < attempt && ms < PROBE_RETRY_MAX_MS; i++)
		ms *= 2;
	return ms < PROBE_RETRY_MAX_MS ? ms : PROBE_RETRY_MAX_MS;
}

/* read_line's verdict on an answer that came, but wrong: more than one
 * line, or too long.  Asking again would get the same. */
static bool wrong_answer(int r)
{
	return r == -EPROTO || r == -EMSGSIZE;
}

/* One exchange on a connected socket; 0 with res filled, or -errno. */
static int exchange(int fd, const char *self_addr, const char *token, long throughput_bytes,
		    int64_t deadline_ms, char *line, size_t line_len, int64_t *t0)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	char hello[PROBE_LINE_MAX];
	snprintf(hello, sizeof(hello), PROBE_MAGIC "%s %s %ld\n", token, self_addr, throughput_bytes);
	*t0 = np_now_ms();
	int r = write_all(fd, hello, strlen(hello), deadline_ms);
	static const char zeros[65536];
	for (long left = throughput_bytes; r == 0 && left > 0;) {
		size_t chunk = (size_t)left < sizeof(zeros) ? (size_t)left : sizeof(zeros);
		r = write_all(fd, zeros, chunk, deadline_ms);
		left -= (long)chunk;
	}
	return r == 0 ? read_line(fd, line, line_len, deadline_ms) : r;
}

int probe_peer(const char *self_addr, const char *peer_addr, int port, const char *token,
	       int64_t deadline_ms, long throughput_bytes, struct probe_result *res, np_error *err)
{
	memset(res, 0, sizeof(*res));
	if (!probe_token_ok(token))
		return np_error_set(err, NP_EINTERNAL, 0, "probe: the round has no valid token");
	if (!self_addr || strlen(self_addr) >= PROBE_ADDR_MAX || !probe_is_addr(self_addr))
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid own address '%s'",
				    self_addr ? self_addr : "");
	struct sockaddr_storage ss;
	socklen_t len;
	if (probe_parse_sockaddr(peer_addr, port, &ss, &len) < 0)
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid peer address '%s'", peer_addr);

	/* The peer may not be listening yet, or may be moving its listener from
	 * one round to the next (a connection it accepted is then reset): try
	 * again until the deadline.  Only a silent or wrong answer is final. */
	char line[PROBE_ADDR_MAX + 16];
	int64_t start = np_now_ms(), t0 = start;
	int last = 0;
	bool exchanged = false;
	for (int attempt = 0;; attempt++) {
		int fd = -1;
		int64_t slice = np_now_ms() + 2000;
		last = connect_once(&ss, len, slice < deadline_ms ? slice : deadline_ms, &fd);
		if (last == 0) {
			res->connected = true;
			last = exchange(fd, self_addr, token, throughput_bytes, deadline_ms, line, sizeof(line),
					&t0);
			close(fd);
			exchanged = last == 0;
			if (exchanged || last == -ETIMEDOUT || wrong_answer(last))
				break;
		}
		int64_t left = np_left_ms(deadline_ms);
		if (left < 100)
			break;
		int64_t pause = probe_retry_ms(attempt);
		usleep((useconds_t)((pause < left ? pause : left) * 1000));
	}
	if (!exchanged) {
		if (!res->connected)
			snprintf(res->detail, sizeof(res->detail), "cannot connect to %s port %d: %s",
				 peer_addr, port, strerror(-last));
		else if (wrong_answer(last))
			snprintf(res->detail, sizeof(res->detail), "unexpected reply from %s (%s)", peer_addr,
				 last == -EPROTO ? "more than one line" : "a line too long");
		else
			snprintf(res->detail, sizeof(res->detail), "probe exchange with %s failed: %s",
				 peer_addr, last == -ETIMEDOUT ? "deadline reached" : strerror(-last));
		return 0;
	}
	int64_t t1 = np_now_ms();
	res->rtt_us = (t1 - start) * 1000;
	if (throughput_bytes > 0)
		res->mbps = (double)throughput_bytes * 8 / 1000.0 / (double)(t1 - t0 > 0 ? t1 - t0 : 1);
	if (strncmp(line, "SEEN ", 5) != 0) {
		snprintf(res->detail, sizeof(res->detail), "unexpected reply from %s", peer_addr);
		return 0;
	}
	/* The peer's text reaches logs and annotations: only an address is
	 * taken from it (listen.c writes "SEEN <address>"). */
	if (strlen(line + 5) >= PROBE_ADDR_MAX || !probe_is_addr(line + 5)) {
		snprintf(res->detail, sizeof(res->detail), "unexpected reply from %s (SEEN without an address)",
			 peer_addr);
		return 0;
	}
	snprintf(res->seen, sizeof(res->seen), "%s", line + 5);
	res->source_ok = probe_same_addr(res->seen, self_addr);
	if (!res->source_ok)
		snprintf(res->detail, sizeof(res->detail),
			 "%s saw this pod as %s, not %s (NAT or a route through another device)",
			 peer_addr, res->seen, self_addr);
	return 0;
}
