/* Probe exchange and route lookup over loopback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>

#include <cmocka.h>

#include "probe/probe.h"
#include "util/clock.h"

#define TOKEN "00112233445566778899aabbccddeeff"

/* A listener on addr for the round TOKEN, open for 30 s. */
static struct probe_server *listen_on(const char *addr, int port, const char *peer, long max_payload)
{
	np_error err = { 0 };
	struct probe_server *s = NULL;
	struct probe_server_opts o = { .addr = addr, .port = port, .token = TOKEN, .peer_addr = peer,
				       .max_payload = max_payload, .deadline_ms = np_now_ms() + 30000 };
	assert_int_equal(probe_server_start(&o, &s, &err), 0);
	return s;
}

static struct probe_server_counts counts(struct probe_server *s)
{
	struct probe_server_counts c;
	probe_server_counts(s, &c);
	return c;
}

static void probe_reports_the_source_address_the_peer_saw(void **state)
{
	np_error err = { 0 };
	struct probe_server *s = listen_on("127.0.0.1", 0, "127.0.0.1", 0);
	struct probe_result res;
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", probe_server_port(s), TOKEN,
				    np_now_ms() + 3000, 0, &res, &err), 0);
	assert_true(res.connected);
	assert_true(res.source_ok);
	assert_string_equal(res.seen, "127.0.0.1");
	assert_string_equal(res.detail, "");
	assert_int_equal(counts(s).answered, 1);
	assert_int_equal(counts(s).mismatched, 0);
	probe_server_stop(s);
}

static void probe_flags_a_published_address_the_peer_did_not_see(void **state)
{
	np_error err = { 0 };
	struct probe_server *s = listen_on("127.0.0.1", 0, NULL, 0);
	struct probe_result res;
	/* The kernel sends from 127.0.0.1; claiming 127.0.0.9 is a lie the
	 * listener must expose, as it would expose NAT. */
	assert_int_equal(probe_peer("127.0.0.9", "127.0.0.1", probe_server_port(s), TOKEN,
				    np_now_ms() + 3000, 0, &res, &err), 0);
	assert_true(res.connected);
	assert_false(res.source_ok);
	assert_non_null(strstr(res.detail, "saw this pod as 127.0.0.1, not 127.0.0.9"));
	assert_int_equal(counts(s).mismatched, 1);
	probe_server_stop(s);
}

static void probe_gives_up_at_the_deadline_when_nobody_listens(void **state)
{
	np_error err = { 0 };
	/* Take a free port, then close it so that nothing listens there. */
	struct probe_server *s = listen_on("127.0.0.1", 0, NULL, 0);
	int port = probe_server_port(s);
	probe_server_stop(s);
	struct probe_result res;
	int64_t t0 = np_now_ms();
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", port, TOKEN, t0 + 600, 0, &res, &err), 0);
	int64_t took = np_now_ms() - t0;
	assert_false(res.connected);
	assert_non_null(strstr(res.detail, "cannot connect"));
	assert_true(took < 2000);
}

/* A peer that takes the connection and never answers: each step returns
 * at once, saying what it waits for, and the probe stops when freed. */
static void probe_steps_never_block_on_a_silent_peer(void **state)
{
	np_error err = { 0 };
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 4), 0); /* the kernel accepts; nobody answers */
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	struct probe_op *op = NULL;
	int64_t t0 = np_now_ms();
	assert_int_equal(probe_op_start("127.0.0.1", "127.0.0.1", ntohs(sa.sin_port), TOKEN, t0 + 10000, 0, &op,
				       &err), 0);
	struct probe_result res;
	struct np_wait w;
	for (int i = 0; i < 5; i++) {
		int64_t s0 = np_now_ms();
		assert_int_equal(probe_op_step(op, &w, &res), 0);
		assert_true(np_now_ms() - s0 < 50);
		np_wait_block(&w, 100);
	}
	/* connected, the hello sent: it waits for the answer, until the deadline */
	assert_true(w.fd >= 0);
	assert_int_equal(w.events, POLLIN);
	assert_int_equal(w.until_ms, t0 + 10000);
	probe_op_free(op);
	assert_true(np_now_ms() - t0 < 1000);
	close(l);
}

static void probe_measures_throughput_when_asked(void **state)
{
	np_error err = { 0 };
	struct probe_server *s = listen_on("::1", 0, "::1", 8 << 20);
	struct probe_result res;
	assert_int_equal(probe_peer("::1", "0:0::1", probe_server_port(s), TOKEN, np_now_ms() + 5000,
				    8 << 20, &res, &err), 0);
	assert_true(res.source_ok);
	assert_true(res.mbps > 0);
	assert_int_equal(counts(s).answered, 1);
	probe_server_stop(s);
}

static void route_to_loopback_leaves_through_lo(void **state)
{
	np_error err = { 0 };
	char dev[IF_NAMESIZE];
	assert_int_equal(probe_route_dev("127.0.0.1", dev, sizeof(dev), &err), 0);
	assert_string_equal(dev, "lo");
	assert_int_equal(probe_route_dev("not-an-address", dev, sizeof(dev), &err), -1);
	assert_non_null(strstr(err.msg, "invalid address"));
}

static void server_refuses_an_address_it_cannot_bind(void **state)
{
	np_error err = { 0 };
	struct probe_server *s = NULL;
	/* 192.0.2.1 (TEST-NET-1) is not on any interface here. */
	struct probe_server_opts o = { .addr = "192.0.2.1", .token = TOKEN };
	assert_int_equal(probe_server_start(&o, &s, &err), -1);
	assert_null(s);
	assert_non_null(strstr(err.msg, "cannot listen on 192.0.2.1"));
}

/* A plain TCP listener on 127.0.0.1, on a port the kernel picks: a peer
 * the test scripts itself. */
static int loopback_listener(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	getsockname(fd, (struct sockaddr *)&sa, &len);
	*port = ntohs(sa.sin_port);
	return fd;
}

struct flaky {
	int listen_fd;
	int port;
	struct probe_server *real;
};

/* A listener that resets its first connection, then gives way to a real
 * probe server on the same port: a peer moving between rounds. */
static void *flaky_peer(void *arg)
{
	struct flaky *f = arg;
	int c = accept(f->listen_fd, NULL, NULL);
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c); /* RST */
	close(f->listen_fd);
	usleep(100000);
	f->real = listen_on("127.0.0.1", f->port, NULL, 0);
	return NULL;
}

static void probe_retries_a_peer_that_resets_while_it_moves(void **state)
{
	struct flaky f = { 0 };
	f.listen_fd = loopback_listener(&f.port);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, flaky_peer, &f), 0);
	np_error err = { 0 };
	struct probe_result res;
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", f.port, TOKEN, np_now_ms() + 5000, 0, &res, &err),
			 0);
	pthread_join(t, NULL);
	assert_true(res.source_ok);
	assert_string_equal(res.detail, "");
	assert_non_null(f.real);
	probe_server_stop(f.real);
}

/* A peer that reads the hello and answers with `reply`, `step` bytes at a
 * time, `gap_us` apart, for each of `conns` connections, then closes. */
struct scripted {
	int listen_fd, port, conns;
	const char *reply;
	size_t step;
	useconds_t gap_us;
	int accepted;
};

static void *scripted_peer(void *arg)
{
	struct scripted *p = arg;
	for (int i = 0; i < p->conns; i++) {
		struct pollfd pl = { .fd = p->listen_fd, .events = POLLIN };
		if (poll(&pl, 1, 3000) != 1)
			break;
		int c = accept(p->listen_fd, NULL, NULL);
		if (c < 0)
			break;
		p->accepted++;
		char hello[256];
		if (read(c, hello, sizeof(hello)) <= 0) {
			close(c);
			continue;
		}
		for (size_t off = 0, len = strlen(p->reply); off < len; off += p->step) {
			size_t n = len - off < p->step ? len - off : p->step;
			if (write(c, p->reply + off, n) != (ssize_t)n)
				break;
			usleep(p->gap_us);
		}
		close(c);
	}
	return NULL;
}

static void scripted_probe(struct scripted *p, struct probe_result *res)
{
	p->listen_fd = loopback_listener(&p->port);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, scripted_peer, p), 0);
	np_error err = { 0 };
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", p->port, TOKEN, np_now_ms() + 1500, 0, res, &err),
			 0);
	shutdown(p->listen_fd, SHUT_RDWR);
	pthread_join(t, NULL);
	close(p->listen_fd);
}

/* The prober reads the answer as it arrives, a byte at a time or all at
 * once; an answer of more than one line, or a line longer than any
 * address, is wrong at once, not retried until the deadline. */
static void probe_reads_one_line_and_refuses_anything_after_it(void **state)
{
	(void)state;
	struct probe_result res;
	struct scripted slow = { .conns = 1, .reply = "SEEN 127.0.0.1\n", .step = 1, .gap_us = 2000 };
	scripted_probe(&slow, &res);
	assert_true(res.source_ok);
	assert_string_equal(res.seen, "127.0.0.1");
	assert_string_equal(res.detail, "");

	struct scripted two = { .conns = 3, .reply = "SEEN 127.0.0.1\nSEEN 127.0.0.9\n", .step = 64 };
	int64_t t0 = np_now_ms();
	scripted_probe(&two, &res);
	assert_false(res.source_ok);
	assert_string_equal(res.detail, "unexpected reply from 127.0.0.1 (more than one line)");
	assert_int_equal(two.accepted, 1);
	assert_true(np_now_ms() - t0 < 1000);

	char longline[400];
	memset(longline, 'a', sizeof(longline) - 2);
	longline[sizeof(longline) - 2] = '\n';
	longline[sizeof(longline) - 1] = '\0';
	struct scripted big = { .conns = 3, .reply = longline, .step = 400 };
	scripted_probe(&big, &res);
	assert_false(res.source_ok);
	assert_string_equal(res.detail, "unexpected reply from 127.0.0.1 (a line too long)");
	assert_int_equal(big.accepted, 1);

	/* What a peer says reaches the pod's log: only an address is taken,
	 * never its escape sequences ("all probes OK" over a failure). */
	struct scripted lie = { .conns = 1, .reply = "SEEN 9.9.9.9\r\033[2K\033[31mall probes OK\033[0m\a\n",
				.step = 64 };
	scripted_probe(&lie, &res);
	assert_false(res.source_ok);
	assert_string_equal(res.seen, "");
	assert_string_equal(res.detail, "unexpected reply from 127.0.0.1 (SEEN without an address)");
	assert_int_equal(lie.accepted, 1);
}

static void retries_start_within_milliseconds_and_slow_to_one_a_second(void **state)
{
	(void)state;
	/* The peer learns its part a few ms after this pod: the first retry
	 * must come well before the 50 ms the first one used to wait. */
	assert_true(PROBE_RETRY_FIRST_MS <= 5);
	int64_t waited = 0, quick = 0;
	int attempts = 0;
	for (int a = 0; a < 100; a++) {
		int ms = probe_retry_ms(a);
		assert_true(ms >= PROBE_RETRY_FIRST_MS && ms <= PROBE_RETRY_MAX_MS);
		if (a < PROBE_RETRY_QUICK) {
			assert_int_equal(ms, PROBE_RETRY_FIRST_MS);
			quick += ms;
		} else {
			assert_true(ms == PROBE_RETRY_MAX_MS || ms == 2 * probe_retry_ms(a - 1));
		}
		if (waited < 1000)
			attempts++;
		waited += ms;
	}
	/* The quick retries cover the first few tens of ms only; then the
	 * pause doubles: fewer than 20 attempts in the first second, and from
	 * then on one a second, however long the peer stays away. */
	assert_true(quick <= 20);
	assert_true(attempts < 20);
	assert_int_equal(probe_retry_ms(PROBE_RETRY_QUICK + 8), PROBE_RETRY_MAX_MS);
	assert_int_equal(probe_retry_ms(1 << 30), PROBE_RETRY_MAX_MS);
	assert_int_equal(PROBE_RETRY_MAX_MS, 1000);
}

/* A peer that starts listening a moment after the first attempt is
 * reached: the early retries are what a 2-pod job waits on. */
static void *late_listener(void *arg)
{
	struct flaky *f = arg;
	usleep(5000);
	f->real = listen_on("127.0.0.1", f->port, NULL, 0);
	return NULL;
}

static void probe_reaches_a_peer_that_listens_a_moment_late(void **state)
{
	(void)state;
	/* Take a free port and close it: refused until late_listener binds it. */
	struct probe_server *s = listen_on("127.0.0.1", 0, NULL, 0);
	struct flaky f = { .port = probe_server_port(s) };
	probe_server_stop(s);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, late_listener, &f), 0);
	np_error err = { 0 };
	struct probe_result res;
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", f.port, TOKEN, np_now_ms() + 5000, 0, &res, &err),
			 0);
	pthread_join(t, NULL);
	assert_true(res.connected);
	assert_true(res.source_ok);
	assert_string_equal(res.detail, "");
	assert_int_equal(counts(f.real).answered, 1);
	probe_server_stop(f.real);
}

/* A client socket from `from` (a loopback address of this host standing in
 * for another host) connected to the listener. */
static int client(const char *from, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in b = { .sin_family = AF_INET };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	inet_pton(AF_INET, from, &b.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* What the listener answers on fd within ms: the line, "" for a close
 * without an answer, "(silence)" when it said nothing at all. */
static const char *answer(int fd, int ms, char *buf, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t n = 0;
	int64_t end = np_now_ms() + ms;
	while (n + 1 < len && np_left_ms(end) > 0) {
		if (poll(&p, 1, (int)np_left_ms(end)) <= 0)
			break;
		ssize_t r = read(fd, buf + n, len - 1 - n);
		if (r <= 0) {
			buf[n] = '\0';
			return buf;
		}
		n += (size_t)r;
		if (memchr(buf, '\n', n))
			break;
	}
	buf[n] = '\0';
	return n ? buf : "(silence)";
}

/* The authentication check as a table: the round's token from the expected
 * peer is a probe; the token from anyone else is answered (so NAT is still
 * seen) but never counted; anything else is not a probe of this round. */
static void hello_check_admits_only_the_rounds_token_from_the_expected_peer(void **state)
{
	struct probe_server_opts o = { .token = TOKEN, .peer_addr = "10.9.0.2", .max_payload = 1000 };
	struct probe_server_opts any = { .token = TOKEN, .max_payload = 0 };
	static const struct {
		const char *line, *seen;
		int opts; /* 0: o, 1: any */
		enum probe_hello want;
		long payload;
	} cases[] = {
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 0", "10.9.0.2", 0, PROBE_HELLO_OK, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 1000", "10.9.0.2", 0, PROBE_HELLO_OK, 1000 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 0", "::ffff:10.9.0.2", 0, PROBE_HELLO_FOREIGN, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 0", "10.9.0.66", 0, PROBE_HELLO_FOREIGN, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.66 0", "10.9.0.66", 1, PROBE_HELLO_OK, 0 },
		/* the wrong token, an old client, a claim beyond the round's, bad syntax */
		{ "NICPICK-PROBE 2 00112233445566778899aabbccddeefe 10.9.0.2 0", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 00112233445566778899AABBCCDDEEFF 10.9.0.2 0", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 1 10.9.0.2 0", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 1001", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 17179869184", "10.9.0.2", 1, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 1", "10.9.0.2", 1, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 -1", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 01", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2 0 x", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN "  10.9.0.2 0", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " not-an-address 0", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN " 10.9.0.2", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "NICPICK-PROBE 2 " TOKEN, "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
		{ "", "10.9.0.2", 0, PROBE_HELLO_BAD, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct probe_hello_info info;
		enum probe_hello got = probe_hello_check(cases[i].line, cases[i].seen, cases[i].opts ? &any : &o, &info);
		if (got != cases[i].want || (got == PROBE_HELLO_OK && info.payload != cases[i].payload))
			fail_msg("case %zu (%s from %s): %d, payload %ld", i, cases[i].line, cases[i].seen, got,
				 info.payload);
	}
	/* A listener without a valid token of its own admits nothing. */
	struct probe_server_opts none = { .token = "" };
	struct probe_hello_info info;
	assert_int_equal(probe_hello_check("NICPICK-PROBE 2 " TOKEN " 10.9.0.2 0", "10.9.0.2", &none, &info),
			 PROBE_HELLO_BAD);
	char t1[PROBE_TOKEN_MAX], t2[PROBE_TOKEN_MAX];
	np_error err = { 0 };
	assert_int_equal(probe_token_new(t1, &err), 0);
	assert_int_equal(probe_token_new(t2, &err), 0);
	assert_true(probe_token_ok(t1) && probe_token_ok(t2));
	assert_string_not_equal(t1, t2);
}

/* A connection with the wrong token, or from another address, is dropped
 * or answered without counting; the expected peer's probe still passes. */
static void listener_counts_only_the_expected_peer(void **state)
{
	np_error err = { 0 };
	struct probe_server *s = listen_on("127.0.0.1", 0, "127.0.0.1", 0);
	int port = probe_server_port(s);
	char buf[128];
	int a = client("127.0.0.2", port);
	const char *wrong = "NICPICK-PROBE 2 ffffffffffffffffffffffffffffffff 127.0.0.1 0\n";
	assert_int_equal(write(a, wrong, strlen(wrong)), (ssize_t)strlen(wrong));
	assert_string_equal(answer(a, 2000, buf, sizeof(buf)), "");
	close(a);
	int b = client("127.0.0.2", port);
	const char *stolen = "NICPICK-PROBE 2 " TOKEN " 127.0.0.1 0\n";
	assert_int_equal(write(b, stolen, strlen(stolen)), (ssize_t)strlen(stolen));
	assert_string_equal(answer(b, 2000, buf, sizeof(buf)), "SEEN 127.0.0.2\n");
	close(b);
	struct probe_result res;
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", port, TOKEN, np_now_ms() + 3000, 0, &res, &err), 0);
	assert_true(res.source_ok);
	struct probe_server_counts c = counts(s);
	assert_int_equal(c.answered, 1);
	assert_int_equal(c.foreign, 1);
	assert_int_equal(c.dropped, 1);
	/* A prober of another round is turned away and says so. */
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", port, "ffffffffffffffffffffffffffffffff",
				    np_now_ms() + 800, 0, &res, &err), 0);
	assert_false(res.source_ok);
	assert_true(res.connected);
	assert_non_null(strstr(res.detail, "probe exchange with 127.0.0.1 failed"));
	assert_int_equal(counts(s).answered, 1);
	probe_server_stop(s);
}

/* Anyone who reaches the probe port may connect.  Silent connections, from
 * other hosts or from the peer's own address, and lying claims must not
 * hold the listener: the real probe passes at once. */
static void silent_and_lying_clients_do_not_hold_the_listener(void **state)
{
	np_error err = { 0 };
	struct probe_server *s = listen_on("127.0.0.1", 0, "127.0.0.1", 0);
	int port = probe_server_port(s);
	int fds[64];
	size_t n = 0;
	/* More silent connections from another address than there are slots. */
	for (int i = 0; i < 40; i++)
		fds[n++] = client("127.0.0.3", port);
	/* A few from the peer's own address too (a local process), silent. */
	for (int i = 0; i < PROBE_PEER_SLOTS; i++)
		fds[n++] = client("127.0.0.1", port);
	/* Claims of 16 GiB in a round that measures nothing, old and new syntax. */
	static const char *claims[] = { "NICPICK-PROBE 1 127.0.0.1 17179869184\n",
					"NICPICK-PROBE 2 " TOKEN " 127.0.0.1 17179869184\n" };
	for (int i = 0; i < 2; i++) {
		fds[n] = client("127.0.0.1", port);
		assert_int_equal(write(fds[n], claims[i], strlen(claims[i])), (ssize_t)strlen(claims[i]));
		n++;
	}
	usleep(100000);
	int64_t t0 = np_now_ms();
	struct probe_result res;
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", port, TOKEN, np_now_ms() + 9000, 0, &res, &err), 0);
	assert_true(res.connected);
	assert_true(res.source_ok);
	assert_true(np_now_ms() - t0 < 1000);
	assert_int_equal(counts(s).answered, 1);
	char buf[64];
	assert_string_equal(answer(fds[n - 1], 1000, buf, sizeof(buf)), ""); /* the claims were closed */
	assert_string_equal(answer(fds[n - 2], 1000, buf, sizeof(buf)), "");
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	probe_server_stop(s);
}

/* The handshake has PROBE_HELLO_MS; a payload must keep PROBE_MIN_RATE_BPS. */
static void slow_clients_are_closed_at_the_stated_bounds(void **state)
{
	struct probe_server *s = listen_on("127.0.0.1", 0, "127.0.0.1", 16L << 20);
	int port = probe_server_port(s);
	char buf[64];
	/* Silent: closed at the handshake bound. */
	int a = client("127.0.0.1", port);
	int64_t t0 = np_now_ms();
	assert_string_equal(answer(a, PROBE_HELLO_MS + 1500, buf, sizeof(buf)), "");
	int64_t took = np_now_ms() - t0;
	assert_true(took >= PROBE_HELLO_MS - 100 && took < PROBE_HELLO_MS + 1000);
	close(a);
	/* The round's token and a 16 MiB claim, then a trickle. */
	int b = client("127.0.0.1", port);
	const char *hello = "NICPICK-PROBE 2 " TOKEN " 127.0.0.1 16777216\n";
	assert_int_equal(write(b, hello, strlen(hello)), (ssize_t)strlen(hello));
	t0 = np_now_ms();
	struct pollfd p = { .fd = b, .events = POLLIN };
	while (poll(&p, 1, 200) == 0 && np_now_ms() - t0 < 10000)
		if (write(b, "x", 1) != 1)
			break;
	took = np_now_ms() - t0;
	assert_true(took >= PROBE_RATE_GRACE_MS - 100 && took < PROBE_RATE_GRACE_MS + 1500);
	assert_string_equal(answer(b, 500, buf, sizeof(buf)), "");
	close(b);
	struct probe_server_counts c = counts(s);
	assert_int_equal(c.answered, 0);
	assert_int_equal(c.dropped, 2);
	probe_server_stop(s);
}

/* No connection outlives the listener's deadline, and stopping waits for
 * no peer, whatever the peers are doing. */
static void deadline_and_stop_never_wait_on_a_peer(void **state)
{
	np_error err = { 0 };
	struct probe_server *s = NULL;
	struct probe_server_opts o = { .addr = "127.0.0.1", .token = TOKEN, .peer_addr = "127.0.0.1",
				       .max_payload = 16L << 20, .deadline_ms = np_now_ms() + 1200 };
	assert_int_equal(probe_server_start(&o, &s, &err), 0);
	int port = probe_server_port(s);
	int b = client("127.0.0.1", port);
	const char *hello = "NICPICK-PROBE 2 " TOKEN " 127.0.0.1 16777216\n";
	assert_int_equal(write(b, hello, strlen(hello)), (ssize_t)strlen(hello));
	static char chunk[600000]; /* keeps up with the rate, never finishes in time */
	int64_t t0 = np_now_ms();
	for (int i = 0; i < 40; i++) {
		struct pollfd p = { .fd = b, .events = POLLIN };
		if (poll(&p, 1, 0) == 1)
			break;
		if (write(b, chunk, sizeof(chunk) / 4) < 0)
			break;
		usleep(100000);
	}
	int64_t took = np_now_ms() - t0;
	assert_true(took < 2500);
	close(b);
	int idle[20];
	for (int i = 0; i < 20; i++)
		idle[i] = client(i % 2 ? "127.0.0.1" : "127.0.0.4", port);
	t0 = np_now_ms();
	probe_server_stop(s);
	assert_true(np_now_ms() - t0 < 200);
	for (int i = 0; i < 20; i++)
		close(idle[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(probe_reports_the_source_address_the_peer_saw),
		cmocka_unit_test(probe_flags_a_published_address_the_peer_did_not_see),
		cmocka_unit_test(probe_gives_up_at_the_deadline_when_nobody_listens),
		cmocka_unit_test(probe_steps_never_block_on_a_silent_peer),
		cmocka_unit_test(probe_measures_throughput_when_asked),
		cmocka_unit_test(route_to_loopback_leaves_through_lo),
		cmocka_unit_test(server_refuses_an_address_it_cannot_bind),
		cmocka_unit_test(probe_retries_a_peer_that_resets_while_it_moves),
		cmocka_unit_test(probe_reads_one_line_and_refuses_anything_after_it),
		cmocka_unit_test(retries_start_within_milliseconds_and_slow_to_one_a_second),
		cmocka_unit_test(probe_reaches_a_peer_that_listens_a_moment_late),
		cmocka_unit_test(hello_check_admits_only_the_rounds_token_from_the_expected_peer),
		cmocka_unit_test(listener_counts_only_the_expected_peer),
		cmocka_unit_test(silent_and_lying_clients_do_not_hold_the_listener),
		cmocka_unit_test(slow_clients_are_closed_at_the_stated_bounds),
		cmocka_unit_test(deadline_and_stop_never_wait_on_a_peer),
	};
	return cmocka_run_group_tests_name("probe", tests, NULL, NULL);
}
