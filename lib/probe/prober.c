/* The prober: connects to the ring neighbour, presents the round's token
 * and the address this pod published, and reads back what the neighbour
 * saw (probe.h).  One state machine that never blocks (probe_op), and
 * probe_peer, the loop that waits for it. */
#include "probe/probe_priv.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"

/* A connect attempt waits at most this for the peer's answer to its SYN. */
#define PROBE_CONNECT_SLICE_MS 2000

enum op_state { OP_PAUSE, OP_CONNECT, OP_SEND, OP_RECV, OP_DONE };

struct probe_op {
	enum op_state state;
	int fd;
	struct sockaddr_storage ss;
	socklen_t len;
	char self[PROBE_ADDR_MAX], peer[PROBE_ADDR_MAX];
	int port;
	long bytes;	  /* the payload */
	int64_t deadline; /* the whole probe's */
	int64_t until;	  /* the pause's end, or the connect attempt's */
	int attempt;
	int last; /* how the last attempt ended: 0, or -errno */
	bool connected, exchanged;
	int64_t start, t0, t1;
	char hello[PROBE_LINE_MAX];
	size_t hello_len, sent; /* of the hello and the payload */
	char line[PROBE_ADDR_MAX + 16];
	size_t got;
};

static void close_fd(struct probe_op *op)
{
	if (op->fd >= 0)
		close(op->fd);
	op->fd = -1;
}

static void finish(struct probe_op *op, int last)
{
	close_fd(op);
	op->last = last;
	op->t1 = np_now_ms();
	op->state = OP_DONE;
}

/* The attempt ended without an answer: the peer may not be listening yet,
 * or may be moving its listener from one round to the next (a connection
 * it accepted is then reset).  Try again after a pause, until the
 * deadline. */
static void retry(struct probe_op *op, int last)
{
	int64_t left = np_left_ms(op->deadline);
	if (left < 100) {
		finish(op, last);
		return;
	}
	close_fd(op);
	op->last = last;
	int64_t pause = probe_retry_ms(op->attempt++);
	op->until = np_now_ms() + (pause < left ? pause : left);
	op->state = OP_PAUSE;
}

static void connect_start(struct probe_op *op)
{
	int fd = socket(op->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		retry(op, -errno);
		return;
	}
	if (connect(fd, (const struct sockaddr *)&op->ss, op->len) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		retry(op, -e);
		return;
	}
	op->fd = fd;
	int64_t slice = np_now_ms() + PROBE_CONNECT_SLICE_MS;
	op->until = slice < op->deadline ? slice : op->deadline;
	op->state = OP_CONNECT;
}

static bool ready(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };
	return poll(&p, 1, 0) > 0;
}

static int connected(struct probe_op *op)
{
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (getsockopt(op->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		return -errno;
	if (soerr)
		return -soerr;
	int one = 1;
	setsockopt(op->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	op->connected = true;
	op->sent = op->got = 0;
	op->t0 = np_now_ms();
	return 0;
}

static int again(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

/* Send what the socket takes of the hello line and the payload: 0 when
 * all is sent, -EAGAIN when it takes no more now. */
static int send_some(struct probe_op *op)
{
	static const char zeros[65536];
	size_t total = op->hello_len + (size_t)op->bytes;
	while (op->sent < total) {
		const char *p = zeros;
		size_t n = total - op->sent < sizeof(zeros) ? total - op->sent : sizeof(zeros);
		if (op->sent < op->hello_len) {
			p = op->hello + op->sent;
			n = op->hello_len - op->sent;
		}
		ssize_t r = send(op->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return again();
		op->sent += (size_t)r;
	}
	return 0;
}

/* Read the server's one '\n'-terminated line (without it), as many bytes
 * at a time as have arrived: 0 once it is whole, -EAGAIN while it is not.
 * The answer is the whole of what the server sends before it closes, so
 * anything after the newline is a wrong answer, not the start of
 * another. */
static int recv_some(struct probe_op *op)
{
	size_t len = sizeof(op->line);
	while (op->got + 1 < len) {
		ssize_t r = recv(op->fd, op->line + op->got, len - 1 - op->got, MSG_DONTWAIT);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return again();
		char *nl = memchr(op->line + op->got, '\n', (size_t)r);
		op->got += (size_t)r;
		if (nl) {
			if (nl != op->line + op->got - 1)
				return -EPROTO;
			*nl = '\0';
			return 0;
		}
	}
	return -EMSGSIZE;
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

int probe_op_start(const char *self_addr, const char *peer_addr, int port, const char *token,
		   int64_t deadline_ms, long throughput_bytes, struct probe_op **out, np_error *err)
{
	*out = NULL;
	if (!probe_token_ok(token))
		return np_error_set(err, NP_EINTERNAL, 0, "probe: the round has no valid token");
	if (!self_addr || strlen(self_addr) >= PROBE_ADDR_MAX || !probe_is_addr(self_addr))
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid own address '%s'",
				    self_addr ? self_addr : "");
	struct probe_op *op = calloc(1, sizeof(*op));
	if (!op)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "probe: out of memory");
	if (probe_parse_sockaddr(peer_addr, port, &op->ss, &op->len) < 0) {
		free(op);
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid peer address '%s'", peer_addr);
	}
	op->fd = -1;
	snprintf(op->self, sizeof(op->self), "%s", self_addr);
	snprintf(op->peer, sizeof(op->peer), "%s", peer_addr);
	op->port = port;
	op->bytes = throughput_bytes > 0 ? throughput_bytes : 0;
	op->deadline = deadline_ms;
	op->hello_len = (size_t)snprintf(op->hello, sizeof(op->hello), PROBE_MAGIC "%s %s %ld\n", token,
					 self_addr, op->bytes);
	op->start = op->t0 = op->until = np_now_ms();
	op->state = OP_PAUSE; /* the first attempt at once */
	*out = op;
	return 0;
}

static void verdict(const struct probe_op *op, struct probe_result *res)
{
	memset(res, 0, sizeof(*res));
	res->connected = op->connected;
	const char *peer_addr = op->peer;
	int port = op->port, last = op->last;
	if (!op->exchanged) {
		if (!res->connected)
			snprintf(res->detail, sizeof(res->detail), "cannot connect to %s port %d: %s",
				 peer_addr, port, strerror(-last));
		else if (wrong_answer(last))
			snprintf(res->detail, sizeof(res->detail), "unexpected reply from %s (%s)", peer_addr,
				 last == -EPROTO ? "more than one line" : "a line too long");
		else
			snprintf(res->detail, sizeof(res->detail), "probe exchange with %s failed: %s",
				 peer_addr, last == -ETIMEDOUT ? "deadline reached" : strerror(-last));
		return;
	}
	res->rtt_us = (op->t1 - op->start) * 1000;
	if (op->bytes > 0)
		res->mbps = (double)op->bytes * 8 / 1000.0 / (double)(op->t1 - op->t0 > 0 ? op->t1 - op->t0 : 1);
	const char *line = op->line;
	if (strncmp(line, "SEEN ", 5) != 0) {
		snprintf(res->detail, sizeof(res->detail), "unexpected reply from %s", peer_addr);
		return;
	}
	/* The peer's text reaches logs and annotations: only an address is
	 * taken from it (listen.c writes "SEEN <address>"). */
	if (strlen(line + 5) >= PROBE_ADDR_MAX || !probe_is_addr(line + 5)) {
		snprintf(res->detail, sizeof(res->detail), "unexpected reply from %s (SEEN without an address)",
			 peer_addr);
		return;
	}
	snprintf(res->seen, sizeof(res->seen), "%s", line + 5);
	res->source_ok = probe_same_addr(res->seen, op->self);
	if (!res->source_ok)
		snprintf(res->detail, sizeof(res->detail),
			 "%s saw this pod as %s, not %s (NAT or a route through another device)",
			 peer_addr, res->seen, op->self);
}

/* Wait for the socket, or fail the exchange at the deadline: only a
 * silent or wrong answer is final, a reset one is tried again. */
static int wait_io(struct probe_op *op, short events, struct np_wait *w)
{
	if (np_now_ms() >= op->deadline) {
		finish(op, -ETIMEDOUT);
		return 1;
	}
	*w = (struct np_wait){ .fd = op->fd, .events = events, .until_ms = op->deadline };
	return 0;
}

int probe_op_step(struct probe_op *op, struct np_wait *w, struct probe_result *res)
{
	np_wait_none(w);
	for (;;) {
		int r;
		switch (op->state) {
		case OP_PAUSE:
			if (np_now_ms() < op->until) {
				w->until_ms = op->until;
				return 0;
			}
			connect_start(op);
			break;
		case OP_CONNECT:
			if (ready(op->fd, POLLOUT)) {
				r = connected(op);
				if (r < 0)
					retry(op, r);
				else
					op->state = OP_SEND;
			} else if (np_now_ms() >= op->until) {
				retry(op, -ETIMEDOUT);
			} else {
				*w = (struct np_wait){ .fd = op->fd, .events = POLLOUT, .until_ms = op->until };
				return 0;
			}
			break;
		case OP_SEND:
			r = send_some(op);
			if (r == 0)
				op->state = OP_RECV;
			else if (r != -EAGAIN)
				retry(op, r);
			else if (!wait_io(op, POLLOUT, w))
				return 0;
			break;
		case OP_RECV:
			r = recv_some(op);
			if (r == 0) {
				op->exchanged = true;
				finish(op, 0);
			} else if (wrong_answer(r)) {
				finish(op, r);
			} else if (r != -EAGAIN) {
				retry(op, r);
			} else if (!wait_io(op, POLLIN, w)) {
				return 0;
			}
			break;
		case OP_DONE:
			verdict(op, res);
			return 1;
		}
	}
}

void probe_op_free(struct probe_op *op)
{
	if (!op)
		return;
	close_fd(op);
	free(op);
}

int probe_peer(const char *self_addr, const char *peer_addr, int port, const char *token,
	       int64_t deadline_ms, long throughput_bytes, struct probe_result *res, np_error *err)
{
	memset(res, 0, sizeof(*res));
	struct probe_op *op;
	if (probe_op_start(self_addr, peer_addr, port, token, deadline_ms, throughput_bytes, &op, err) < 0)
		return -1;
	struct np_wait w;
	while (!probe_op_step(op, &w, res))
		np_wait_block(&w, 1000);
	probe_op_free(op);
	return 0;
}
