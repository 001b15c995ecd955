#include "probe/probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/clock.h"

/* Wire format (one line each way, then the optional payload):
 *   client: "NICPICK-PROBE 2 <token> <published address> <payload bytes>\n" <payload>
 *   server: "SEEN <source address of the connection>\n"
 * The server answers only the round's token; anything else is closed
 * without a word (the client retries: the peer may be between rounds). */
#define PROBE_MAGIC "NICPICK-PROBE 2 "
#define PROBE_LINE_MAX 192
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

static bool is_addr(const char *a)
{
	unsigned char x[16];
	return inet_pton(AF_INET, a, x) == 1 || inet_pton(AF_INET6, a, x) == 1;
}

/* ---- the token ---- */

int probe_token_new(char token[PROBE_TOKEN_MAX], np_error *err)
{
	unsigned char b[PROBE_TOKEN_LEN / 2];
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t r = getrandom(b + got, sizeof(b) - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return np_error_set(err, NP_EINTERNAL, errno, "probe: no random bytes for the round's token");
		got += (size_t)r;
	}
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(token + 2 * i, 3, "%02x", b[i]);
	return 0;
}

bool probe_token_ok(const char *token)
{
	if (!token || strlen(token) != PROBE_TOKEN_LEN)
		return false;
	for (const char *p = token; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* Every byte compared, so that the time taken says nothing of the token. */
static bool token_equal(const char *a, const char *b)
{
	unsigned char diff = 0;
	for (size_t i = 0; i < PROBE_TOKEN_LEN; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

/* ---- the authentication check ---- */

/* The next space-separated field of *p (exactly one space between fields). */
static const char *field(const char **p, size_t *len)
{
	const char *s = *p, *e = s;
	while (*e && *e != ' ')
		e++;
	*len = (size_t)(e - s);
	*p = *e ? e + 1 : e;
	return s;
}

enum probe_hello probe_hello_check(const char *line, const char *seen,
				   const struct probe_server_opts *o, struct probe_hello_info *info)
{
	memset(info, 0, sizeof(*info));
	size_t ml = strlen(PROBE_MAGIC);
	if (strncmp(line, PROBE_MAGIC, ml) != 0 || !probe_token_ok(o->token))
		return PROBE_HELLO_BAD;
	const char *p = line + ml;
	size_t tl, al, pl;
	const char *tok = field(&p, &tl), *addr = field(&p, &al), *pay = field(&p, &pl);
	if (*p || tl != PROBE_TOKEN_LEN || al == 0 || al >= PROBE_ADDR_MAX || pl == 0 || pl > 12)
		return PROBE_HELLO_BAD;
	if (!token_equal(tok, o->token))
		return PROBE_HELLO_BAD;
	memcpy(info->claimed, addr, al);
	info->claimed[al] = '\0';
	if (!is_addr(info->claimed))
		return PROBE_HELLO_BAD;
	long payload = 0;
	for (size_t i = 0; i < pl; i++) {
		if (pay[i] < '0' || pay[i] > '9' || (i == 0 && pay[i] == '0' && pl > 1))
			return PROBE_HELLO_BAD;
		payload = payload * 10 + (pay[i] - '0');
	}
	/* A payload only in a round that measures, and no more than it asked. */
	if (payload > 0 && (o->max_payload <= 0 || payload > o->max_payload))
		return PROBE_HELLO_BAD;
	if (o->peer_addr && o->peer_addr[0] && !same_addr(seen, o->peer_addr))
		return PROBE_HELLO_FOREIGN;
	info->payload = payload;
	return PROBE_HELLO_OK;
}

/* ---- the listener: one thread, non-blocking sockets, one poll ---- */

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
	c->mismatched = !same_addr(info.claimed, c->seen);
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
	sockaddr_text(peer, seen, sizeof(seen));
	bool restricted = s->peer[0] != '\0';
	bool peer_pool = !restricted || same_addr(seen, s->peer);
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
	if (!o->addr || parse_sockaddr(o->addr, o->port, &ss, &len) < 0)
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid address '%s'", o->addr ? o->addr : "");
	if (!probe_token_ok(o->token))
		return np_error_set(err, NP_EINTERNAL, 0, "probe: the round has no valid token");
	if (o->peer_addr && o->peer_addr[0] && (strlen(o->peer_addr) >= PROBE_ADDR_MAX || !is_addr(o->peer_addr)))
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

/* ---- the prober ---- */

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
	if (!self_addr || strlen(self_addr) >= PROBE_ADDR_MAX || !is_addr(self_addr))
		return np_error_set(err, NP_EINTERNAL, 0, "probe: invalid own address '%s'",
				    self_addr ? self_addr : "");
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
	snprintf(res->seen, sizeof(res->seen), "%.*s", PROBE_ADDR_MAX - 1, line + 5);
	res->source_ok = same_addr(res->seen, self_addr);
	if (!res->source_ok)
		snprintf(res->detail, sizeof(res->detail),
			 "%s saw this pod as %s, not %s (NAT or a route through another device)",
			 peer_addr, res->seen, self_addr);
	return 0;
}
