/* The probe listener: one thread, non-blocking sockets, one poll.  It
 * answers the round's probes with the source address it saw, and drops
 * everything else within its bounds (probe.h). */
#include "probe/probe_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"

#define PROBE_SLOTS (PROBE_PEER_SLOTS + PROBE_OTHER_SLOTS)

enum conn_phase { C_FREE, C_HELLO, C_PAYLOAD };

struct conn {
	int fd;
	enum conn_phase phase;
	bool peer_pool; /* from the expected peer's address */
	int64_t opened; /* accept time, for eviction (oldest first) */
	int64_t timer;	/* closed when it comes, unless done */
	int64_t payload_start;
	long left, got;
	bool mismatched;
	char seen[PROBE_ADDR_MAX];
	char line[PROBE_LINE_MAX];
	size_t n;
};

struct probe_server {
	int fd;
	int stop_pipe[2];
	int port;
	bool started;
	pthread_t thread;
	pthread_mutex_t lock;
	struct probe_server_counts counts;
	/* copies of the options */
	char token[PROBE_TOKEN_MAX];
	char peer[PROBE_ADDR_MAX];
	struct probe_server_opts o;
	struct conn c[PROBE_SLOTS];
	char sink[65536]; /* payload bytes, thrown away; last: not zeroed */
};
_Static_assert(offsetof(struct probe_server, sink) + sizeof(((struct probe_server *)0)->sink) ==
		       sizeof(struct probe_server),
	       "probe_server_start zeroes all but the sink: it must stay the last member");

static int64_t server_deadline(const struct probe_server *s)
{
	return s->o.deadline_ms > 0 ? s->o.deadline_ms : INT64_MAX;
}

static void count(struct probe_server *s, int *field_)
{
	pthread_mutex_lock(&s->lock);
	(*field_)++;
	pthread_mutex_unlock(&s->lock);
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->phase = C_FREE;
}

static void drop(struct probe_server *s, struct conn *c)
{
	count(s, &s->counts.dropped);
	conn_close(c);
}

/* The answer is one short line into an empty socket buffer: it never
 * blocks, and if it cannot go out at once the prober finds out. */
static void reply(struct conn *c)
{
	char r[PROBE_ADDR_MAX + 8];
	int n = snprintf(r, sizeof(r), "SEEN %s\n", c->seen);
	/* Not sent: the prober reads no answer and says so itself. */
	ssize_t sent = send(c->fd, r, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)sent;
	conn_close(c);
}

static void answered(struct probe_server *s, struct conn *c)
{
	/* Counted before the reply goes out, so that a peer that has its
	 * answer also finds it counted here. */
	pthread_mutex_lock(&s->lock);
	s->counts.answered++;
	if (c->mismatched)
		s->counts.mismatched++;
	pthread_mutex_unlock(&s->lock);
	reply(c);
}

/* A payload must keep up with PROBE_MIN_RATE_BPS after the grace. */
static void payload_timer(const struct probe_server *s, struct conn *c)
{
	int64_t t = c->payload_start + PROBE_RATE_GRACE_MS + c->got / (PROBE_MIN_RATE_BPS / 1000);
	c->timer = t < server_deadline(s) ? t : server_deadline(s);
}

static void payload_bytes(struct probe_server *s, struct conn *c, long n)
{
	c->got += n;
	c->left -= n;
	if (c->left <= 0)
		answered(s, c);
	else
		payload_timer(s, c);
}

static void on_hello(struct probe_server *s, struct conn *c)
{
	ssize_t r = recv(c->fd, c->line + c->n, sizeof(c->line) - 1 - c->n, MSG_DONTWAIT);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		drop(s, c);
		return;
	}
	c->n += (size_t)r;
	c->line[c->n] = '\0';
	char *nl = memchr(c->line, '\n', c->n);
	if (!nl) {
		if (c->n + 1 >= sizeof(c->line))
			drop(s, c);
		return;
	}
	*nl = '\0';
	long extra = (long)(c->n - (size_t)(nl + 1 - c->line)); /* payload already read */
	struct probe_hello_info info;
	switch (probe_hello_check(c->line, c->seen, &s->o, &info)) {
	case PROBE_HELLO_BAD:
		drop(s, c);
		return;
	case PROBE_HELLO_FOREIGN:
		count(s, &s->counts.foreign);
		reply(c);
		return;
	case PROBE_HELLO_OK:
		break;
	}
	c->mismatched = !probe_same_addr(info.claimed, c->seen);
	if (extra > info.payload) {
		drop(s, c); /* more than it claimed */
		return;
	}
	c->phase = C_PAYLOAD;
	c->payload_start = np_now_ms();
	c->left = info.payload;
	c->got = 0;
	payload_bytes(s, c, extra);
}

static void on_payload(struct probe_server *s, struct conn *c)
{
	for (int i = 0; i < 16 && c->phase == C_PAYLOAD; i++) {
		size_t want = (size_t)c->left < sizeof(s->sink) ? (size_t)c->left : sizeof(s->sink);
		ssize_t r = recv(c->fd, s->sink, want, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			return;
		if (r <= 0) {
			drop(s, c);
			return;
		}
		payload_bytes(s, c, (long)r);
	}
}

/* A new connection takes a slot of its pool; when the pool is full, the
 * oldest connection still in its handshake there gives way (a prober sends
 * its hello at once, so a slot is held only by the slow or the silent). */
static void admit(struct probe_server *s, int fd, const struct sockaddr_storage *peer)
{
	char seen[PROBE_ADDR_MAX];
	probe_sockaddr_text(peer, seen, sizeof(seen));
	bool restricted = s->peer[0] != '\0';
	bool peer_pool = !restricted || probe_same_addr(seen, s->peer);
	size_t cap = !restricted ? PROBE_SLOTS : peer_pool ? PROBE_PEER_SLOTS : PROBE_OTHER_SLOTS;
	size_t used = 0;
	struct conn *free_slot = NULL, *oldest = NULL;
	for (size_t i = 0; i < PROBE_SLOTS; i++) {
		struct conn *c = &s->c[i];
		if (c->phase == C_FREE) {
			if (!free_slot)
				free_slot = c;
			continue;
		}
		if (c->peer_pool != peer_pool)
			continue;
		used++;
		if (c->phase == C_HELLO && (!oldest || c->opened < oldest->opened))
			oldest = c;
	}
	if (used >= cap || !free_slot) {
		if (!oldest) {
			count(s, &s->counts.dropped);
			close(fd);
			return;
		}
		drop(s, oldest);
		free_slot = oldest;
	}
	struct conn *c = free_slot;
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->phase = C_HELLO;
	c->peer_pool = peer_pool;
	c->opened = np_now_ms();
	int64_t t = c->opened + PROBE_HELLO_MS;
	c->timer = t < server_deadline(s) ? t : server_deadline(s);
	snprintf(c->seen, sizeof(c->seen), "%s", seen);
}

static void *serve(void *arg)
{
	struct probe_server *s = arg;
	struct pollfd p[2 + PROBE_SLOTS];
	struct conn *pc[2 + PROBE_SLOTS];
	for (;;) {
		int64_t now = np_now_ms(), next = server_deadline(s);
		for (size_t i = 0; i < PROBE_SLOTS; i++) {
			struct conn *c = &s->c[i];
			if (c->phase != C_FREE && now >= c->timer)
				drop(s, c); /* too slow, silent, or past the deadline */
			else if (c->phase != C_FREE && c->timer < next)
				next = c->timer;
		}
		nfds_t n = 0;
		p[n++] = (struct pollfd){ .fd = s->stop_pipe[0], .events = POLLIN };
		p[n++] = (struct pollfd){ .fd = s->fd, .events = POLLIN };
		for (size_t i = 0; i < PROBE_SLOTS; i++)
			if (s->c[i].phase != C_FREE) {
				pc[n] = &s->c[i];
				p[n++] = (struct pollfd){ .fd = s->c[i].fd, .events = POLLIN };
			}
		int64_t wait = next - now;
		if (wait > 1000)
			wait = 1000;
		if (wait < 0)
			wait = 0;
		if (poll(p, n, (int)wait) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			break;
		for (nfds_t i = 2; i < n; i++) {
			if (!p[i].revents || pc[i]->phase == C_FREE)
				continue;
			if (pc[i]->phase == C_HELLO)
				on_hello(s, pc[i]);
			else
				on_payload(s, pc[i]);
		}
		/* Accept what waits, a bounded number at a time. */
		for (int i = 0; (p[1].revents & POLLIN) && i < PROBE_SLOTS; i++) {
			struct sockaddr_storage peer;
			socklen_t plen = sizeof(peer);
			int fd = accept4(s->fd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (fd < 0)
				break;
			if (np_now_ms() >= server_deadline(s)) {
				count(s, &s->counts.dropped);
				close(fd);
				continue;
			}
			admit(s, fd, &peer);
		}
	}
	for (size_t i = 0; i < PROBE_SLOTS; i++)
		conn_close(&s->c[i]);
	return NULL;
}

int probe_server_start(const struct probe_server_opts *o, struct probe_server **out, np_error *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	*out = NULL;
	if (!o->addr || probe_parse_sockaddr(o->addr, o->port, &ss, &len) < 0)
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid address '%s'", o->addr ? o->addr : "");
	if (!probe_token_ok(o->token))
		return np_error_set(err, NP_EINTERNAL, 0, "probe: the round has no valid token");
	if (o->peer_addr && o->peer_addr[0] && (strlen(o->peer_addr) >= PROBE_ADDR_MAX || !probe_is_addr(o->peer_addr)))
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid peer address '%s'", o->peer_addr);
	/* All but the sink zeroed: the sink is only written by recv, and
	 * zeroing its 64 KiB would touch 16 pages a probe never uses. */
	struct probe_server *s = malloc(sizeof(*s));
	if (!s)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "probe");
	memset(s, 0, offsetof(struct probe_server, sink));
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	for (size_t i = 0; i < PROBE_SLOTS; i++)
		s->c[i].fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->o = *o;
	snprintf(s->token, sizeof(s->token), "%s", o->token);
	snprintf(s->peer, sizeof(s->peer), "%s", o->peer_addr ? o->peer_addr : "");
	s->o.token = s->token;
	s->o.peer_addr = s->peer;
	s->o.addr = NULL; /* not kept */
	s->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (s->fd < 0 || setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s->fd, (struct sockaddr *)&ss, len) < 0 || listen(s->fd, 128) < 0 ||
	    pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
		int e = errno;
		probe_server_stop(s);
		return np_error_set(err, NP_EINTERNAL, e, "probe: cannot listen on %s port %d", o->addr, o->port);
	}
	getsockname(s->fd, (struct sockaddr *)&ss, &len);
	s->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						: ((struct sockaddr_in6 *)&ss)->sin6_port);
	int e = pthread_create(&s->thread, NULL, serve, s);
	if (e) {
		probe_server_stop(s);
		return np_error_set(err, NP_EINTERNAL, e, "probe: cannot start the listener thread");
	}
	s->started = true;
	*out = s;
	return 0;
}

int probe_server_port(const struct probe_server *s)
{
	return s->port;
}

void probe_server_counts(struct probe_server *s, struct probe_server_counts *c)
{
	pthread_mutex_lock(&s->lock);
	*c = s->counts;
	pthread_mutex_unlock(&s->lock);
}

void probe_server_stop(struct probe_server *s)
{
	if (!s)
		return;
	/* The thread blocks on nothing but its poll, which the pipe wakes:
	 * the join waits for no peer. */
	if (s->stop_pipe[1] >= 0) {
		close(s->stop_pipe[1]); /* the read end polls as hung up */
		s->stop_pipe[1] = -1;
	}
	if (s->started)
		pthread_join(s->thread, NULL);
	for (size_t i = 0; i < PROBE_SLOTS; i++)
		conn_close(&s->c[i]);
	if (s->stop_pipe[1] >= 0)
		close(s->stop_pipe[1]);
	if (s->stop_pipe[0] >= 0)
		close(s->stop_pipe[0]);
	if (s->fd >= 0)
		close(s->fd);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
