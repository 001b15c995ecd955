/* Probe exchange and route lookup over loopback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>

#include <cmocka.h>

#include "probe/probe.h"
#include "util/clock.h"

static void probe_reports_the_source_address_the_peer_saw(void **state)
{
	np_error err = { 0 };
	struct probe_server *s;
	assert_int_equal(probe_server_start("127.0.0.1", 0, &s, &err), 0);
	struct probe_result res;
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", probe_server_port(s),
				    np_now_ms() + 3000, 0, &res, &err), 0);
	assert_true(res.connected);
	assert_true(res.source_ok);
	assert_string_equal(res.seen, "127.0.0.1");
	assert_string_equal(res.detail, "");
	int answered, mismatched;
	probe_server_counts(s, &answered, &mismatched);
	assert_int_equal(answered, 1);
	assert_int_equal(mismatched, 0);
	probe_server_stop(s);
}

static void probe_flags_a_published_address_the_peer_did_not_see(void **state)
{
	np_error err = { 0 };
	struct probe_server *s;
	assert_int_equal(probe_server_start("127.0.0.1", 0, &s, &err), 0);
	struct probe_result res;
	/* The kernel sends from 127.0.0.1; claiming 127.0.0.9 is a lie the
	 * listener must expose, as it would expose NAT. */
	assert_int_equal(probe_peer("127.0.0.9", "127.0.0.1", probe_server_port(s),
				    np_now_ms() + 3000, 0, &res, &err), 0);
	assert_true(res.connected);
	assert_false(res.source_ok);
	assert_non_null(strstr(res.detail, "saw this pod as 127.0.0.1, not 127.0.0.9"));
	int answered, mismatched;
	probe_server_counts(s, &answered, &mismatched);
	assert_int_equal(mismatched, 1);
	probe_server_stop(s);
}

static void probe_gives_up_at_the_deadline_when_nobody_listens(void **state)
{
	np_error err = { 0 };
	struct probe_server *s;
	/* Take a free port, then close it so that nothing listens there. */
	assert_int_equal(probe_server_start("127.0.0.1", 0, &s, &err), 0);
	int port = probe_server_port(s);
	probe_server_stop(s);
	struct probe_result res;
	int64_t t0 = np_now_ms();
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", port, t0 + 600, 0, &res, &err), 0);
	int64_t took = np_now_ms() - t0;
	assert_false(res.connected);
	assert_non_null(strstr(res.detail, "cannot connect"));
	assert_true(took < 2000);
}

static void probe_measures_throughput_when_asked(void **state)
{
	np_error err = { 0 };
	struct probe_server *s;
	assert_int_equal(probe_server_start("::1", 0, &s, &err), 0);
	struct probe_result res;
	assert_int_equal(probe_peer("::1", "0:0::1", probe_server_port(s), np_now_ms() + 5000,
				    8 << 20, &res, &err), 0);
	assert_true(res.source_ok);
	assert_true(res.mbps > 0);
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
	assert_int_equal(probe_server_start("192.0.2.1", 0, &s, &err), -1);
	assert_null(s);
	assert_non_null(strstr(err.msg, "cannot listen on 192.0.2.1"));
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
	np_error err = { 0 };
	probe_server_start("127.0.0.1", f->port, &f->real, &err);
	return NULL;
}

static void probe_retries_a_peer_that_resets_while_it_moves(void **state)
{
	struct flaky f = { .listen_fd = socket(AF_INET, SOCK_STREAM, 0) };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int one = 1;
	setsockopt(f.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(f.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f.listen_fd, 4), 0);
	getsockname(f.listen_fd, (struct sockaddr *)&sa, &len);
	f.port = ntohs(sa.sin_port);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, flaky_peer, &f), 0);
	np_error err = { 0 };
	struct probe_result res;
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", f.port, np_now_ms() + 5000, 0, &res, &err), 0);
	pthread_join(t, NULL);
	assert_true(res.source_ok);
	assert_string_equal(res.detail, "");
	assert_non_null(f.real);
	probe_server_stop(f.real);
}

/* Anyone who reaches the probe port may connect.  The listener answers one
 * connection at a time, so a client that claims a payload and then goes
 * silent must not hold it: it is dropped after 5 s of silence, and a claim
 * beyond what --probe-throughput can send is refused at once. */
static void silent_client_does_not_hold_the_listener(void **state)
{
	np_error err = { 0 };
	struct probe_server *s;
	assert_int_equal(probe_server_start("127.0.0.1", 0, &s, &err), 0);
	static const char *claims[] = { "NICPICK-PROBE 1 127.0.0.1 999999999999999\n",
					"NICPICK-PROBE 1 127.0.0.1 1073741824\n" };
	int fds[2];
	for (int i = 0; i < 2; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons((uint16_t)probe_server_port(s)) };
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(fds[i], (struct sockaddr *)&a, sizeof(a)), 0);
		assert_int_equal(write(fds[i], claims[i], strlen(claims[i])), (ssize_t)strlen(claims[i]));
	}
	int64_t t0 = np_now_ms();
	struct probe_result res;
	assert_int_equal(probe_peer("127.0.0.1", "127.0.0.1", probe_server_port(s),
				    np_now_ms() + 9000, 0, &res, &err), 0);
	assert_true(res.connected);
	assert_true(res.source_ok);
	assert_true(np_now_ms() - t0 < 8000);
	close(fds[0]);
	close(fds[1]);
	probe_server_stop(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(probe_reports_the_source_address_the_peer_saw),
		cmocka_unit_test(probe_flags_a_published_address_the_peer_did_not_see),
		cmocka_unit_test(probe_gives_up_at_the_deadline_when_nobody_listens),
		cmocka_unit_test(probe_measures_throughput_when_asked),
		cmocka_unit_test(route_to_loopback_leaves_through_lo),
		cmocka_unit_test(server_refuses_an_address_it_cannot_bind),
		cmocka_unit_test(probe_retries_a_peer_that_resets_while_it_moves),
		cmocka_unit_test(silent_client_does_not_hold_the_listener),
	};
	return cmocka_run_group_tests_name("probe", tests, NULL, NULL);
}
