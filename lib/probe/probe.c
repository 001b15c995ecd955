#include "probe/probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/clock.h"

/* Wire format (one line each way, then the optional payload):
 *   client: "NICPICK-PROBE 1 <published address> <payload bytes>\n" <payload>
 *   server: "SEEN <source address of the connection>\n"                      */
#define PROBE_MAGIC "NICPICK-PROBE 1 "
#define PROBE_IO_TIMEOUT_MS 5000
#define PROBE_PAYLOAD_MAX (1L << 34) /* --probe-throughput's largest */

struct probe_server {
	int fd;
	int stop_pipe[2];
	int port;
	pthread_t thread;
	pthread_mutex_t lock;
	int answered;
	int mismatched;
};

static int parse_sockaddr(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*len = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return 0;
	}
	return -1;
}

static void sockaddr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const void *src = ss->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
						   : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (!inet_ntop(ss->ss_family, src, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* Both texts name the same address (IPv6 has many spellings). */
static bool same_addr(const char *a, const char *b)
{
	unsigned char x[16], y[16];
	if (inet_pton(AF_INET, a, x) == 1 && inet_pton(AF_INET, b, y) == 1)
		return memcmp(x, y, 4) == 0;
	if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
		return memcmp(x, y, 16) == 0;
	return false;
}

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

/* Read one '\n'-terminated line (without it), byte by byte: lines are short
 * and the payload that may follow must stay in the socket. */
static int read_line(int fd, char *buf, size_t len, int64_t deadline_ms)
{
	size_t n = 0;
	while (n + 1 < len) {
		int w = wait_fd(fd, POLLIN, deadline_ms);
		if (w < 0)
			return w;
		char ch;
		ssize_t r = read(fd, &ch, 1);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (ch == '\n') {
			buf[n] = '\0';
			return 0;
		}
		buf[n++] = ch;
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

static void serve_one(struct probe_server *s, int fd, const struct sockaddr_storage *peer)
{
	int64_t deadline = np_now_ms() + PROBE_IO_TIMEOUT_MS;
	char line[160], seen[PROBE_ADDR_MAX], reply[PROBE_ADDR_MAX + 8];
	sockaddr_text(peer, seen, sizeof(seen));
	if (read_line(fd, line, sizeof(line), deadline) < 0 ||
	    strncmp(line, PROBE_MAGIC, strlen(PROBE_MAGIC)) != 0)
		return;
	char claimed[PROBE_ADDR_MAX];
	long payload = 0;
	if (sscanf(line + strlen(PROBE_MAGIC), "%63s %ld", claimed, &payload) != 2 || payload < 0 ||
	    payload > PROBE_PAYLOAD_MAX)
		return;
	/* The payload is bounded by the client's own deadline; ours is
	 * extended in proportion so that a slow link still finishes.  The
	 * server answers one connection at a time, so a client that goes
	 * silent is dropped after PROBE_IO_TIMEOUT_MS whatever it claimed. */
	deadline = np_now_ms() + PROBE_IO_TIMEOUT_MS + payload / 10000;
	char sink[65536];
	while (payload > 0) {
		int64_t idle = np_now_ms() + PROBE_IO_TIMEOUT_MS;
		if (wait_fd(fd, POLLIN, idle < deadline ? idle : deadline) < 0)
			return;
		ssize_t r = read(fd, sink, (size_t)payload < sizeof(sink) ? (size_t)payload : sizeof(sink));
		if (r <= 0) {
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			return;
		}
		payload -= r;
	}
	/* Counted before the reply goes out, so that a peer that has its answer
	 * also finds it counted here. */
	pthread_mutex_lock(&s->lock);
	s->answered++;
	if (!same_addr(claimed, seen))
		s->mismatched++;
	pthread_mutex_unlock(&s->lock);
	snprintf(reply, sizeof(reply), "SEEN %s\n", seen);
	write_all(fd, reply, strlen(reply), deadline);
}

static void *serve(void *arg)
{
	struct probe_server *s = arg;
	struct pollfd p[2] = { { .fd = s->fd, .events = POLLIN }, { .fd = s->stop_pipe[0], .events = POLLIN } };
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(s->fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			continue;
		serve_one(s, fd, &peer);
		close(fd);
	}
	return NULL;
}

int probe_server_start(const char *addr, int port, struct probe_server **out, np_error *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (parse_sockaddr(addr, port, &ss, &len) < 0)
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid address '%s'", addr);
	struct probe_server *s = calloc(1, sizeof(*s));
	if (!s)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "probe");
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (s->fd < 0 || setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s->fd, (struct sockaddr *)&ss, len) < 0 || listen(s->fd, 64) < 0 ||
	    pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
		int e = errno;
		probe_server_stop(s);
		return np_error_set(err, NP_EINTERNAL, e, "probe: cannot listen on %s port %d", addr, port);
	}
	getsockname(s->fd, (struct sockaddr *)&ss, &len);
	s->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						: ((struct sockaddr_in6 *)&ss)->sin6_port);
	int e = pthread_create(&s->thread, NULL, serve, s);
	if (e) {
		close(s->stop_pipe[1]);
		s->stop_pipe[1] = -1;
		probe_server_stop(s);
		return np_error_set(err, NP_EINTERNAL, e, "probe: cannot start the listener thread");
	}
	*out = s;
	return 0;
}

int probe_server_port(const struct probe_server *s)
{
	return s->port;
}

void probe_server_counts(struct probe_server *s, int *answered, int *mismatched)
{
	pthread_mutex_lock(&s->lock);
	*answered = s->answered;
	*mismatched = s->mismatched;
	pthread_mutex_unlock(&s->lock);
}

void probe_server_stop(struct probe_server *s)
{
	if (!s)
		return;
	if (s->stop_pipe[1] >= 0) {
		/* A thread exists only when the pipe was made and start succeeded. */
		if (s->port > 0 && write(s->stop_pipe[1], "x", 1) == 1)
			pthread_join(s->thread, NULL);
		close(s->stop_pipe[1]);
	}
	if (s->stop_pipe[0] >= 0)
		close(s->stop_pipe[0]);
	if (s->fd >= 0)
		close(s->fd);
	pthread_mutex_destroy(&s->lock);
	free(s);
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

/* One exchange on a connected socket; 0 with res filled, or -errno. */
static int exchange(int fd, const char *self_addr, long throughput_bytes, int64_t deadline_ms,
		    char *line, size_t line_len, int64_t *t0)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	char hello[160];
	snprintf(hello, sizeof(hello), PROBE_MAGIC "%s %ld\n", self_addr, throughput_bytes);
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

int probe_peer(const char *self_addr, const char *peer_addr, int port, int64_t deadline_ms,
	       long throughput_bytes, struct probe_result *res, np_error *err)
{
	memset(res, 0, sizeof(*res));
	struct sockaddr_storage ss;
	socklen_t len;
	if (parse_sockaddr(peer_addr, port, &ss, &len) < 0)
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
			last = exchange(fd, self_addr, throughput_bytes, deadline_ms, line, sizeof(line), &t0);
			close(fd);
			exchanged = last == 0;
			if (exchanged || last == -ETIMEDOUT)
				break;
		}
		if (np_left_ms(deadline_ms) < 100)
			break;
		usleep((useconds_t)(attempt < 5 ? 50000 << attempt : 1000000));
	}
	if (!exchanged) {
		if (!res->connected)
			snprintf(res->detail, sizeof(res->detail), "cannot connect to %s port %d: %s",
				 peer_addr, port, strerror(-last));
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
	snprintf(res->seen, sizeof(res->seen), "%.*s", PROBE_ADDR_MAX - 1, line + 5);
	res->source_ok = same_addr(res->seen, self_addr);
	if (!res->source_ok)
		snprintf(res->detail, sizeof(res->detail),
			 "%s saw this pod as %s, not %s (NAT or a route through another device)",
			 peer_addr, res->seen, self_addr);
	return 0;
}
