/* When and how long the client waits before it tries again: exponential
 * backoff with jitter, Retry-After (the header or the Status body's
 * retryAfterSeconds), a wait that ends at the deadline or on a signal, and
 * which curl failures are worth another attempt.  The retry loops are in
 * http.c (a request) and watch.c (a watch). */
#include "k8s/k8s_priv.h"

#include "util/cancel.h"

/* base_ms doubled per attempt, at most cap_ms. */
static long backoff_ceil(unsigned attempt, long base_ms, long cap_ms)
{
	long ceil = base_ms;
	for (unsigned i = 0; i < attempt && ceil < cap_ms; i++)
		ceil *= 2;
	return ceil > cap_ms ? cap_ms : ceil;
}

long k8s_backoff_ms(unsigned attempt, long base_ms, long cap_ms, uint32_t rnd)
{
	long ceil = backoff_ceil(attempt, base_ms, cap_ms);
	if (ceil <= 0)
		return 0;
	return (long)(rnd % ((uint32_t)ceil + 1));
}

long k8s_retry_after_ms(curl_off_t header_s, const json_t *status)
{
	if (header_s > 0)
		return header_s > 3600 ? 3600000L : (long)header_s * 1000;
	json_t *ra = json_object_get(json_object_get(status, "details"), "retryAfterSeconds");
	if (json_is_integer(ra) && json_integer_value(ra) > 0) {
		json_int_t s = json_integer_value(ra);
		return s > 3600 ? 3600000L : (long)s * 1000;
	}
	return -1;
}

int k8s_wait(struct k8s_client *c, long ms, const char *what, np_error *err)
{
	if (!c->idle)
		return k8s_wait_also(c, ms, what, NULL, err);
	/* The caller's work beside the client goes on meanwhile. */
	for (int64_t end = k8s_mono_ms() + (ms > 0 ? ms : 0);;) {
		struct np_wait iw;
		np_wait_none(&iw);
		c->idle(c->idle_ud, &iw);
		int64_t left = end - k8s_mono_ms();
		int r = k8s_wait_also(c, left > 0 ? (long)left : 0, what, &iw, err);
		if (r <= 0)
			return r;
	}
}

int k8s_wait_also(struct k8s_client *c, long ms, const char *what, const struct np_wait *also,
		  np_error *err)
{
	if (ms < 0)
		ms = 0;
	/* Sleep to the deadline at most, and fail there: callers that slice
	 * their work by deadlines see every timeout at the deadline itself. */
	int64_t remaining = k8s_remaining_ms(c);
	bool too_long = ms >= remaining;
	if (too_long)
		ms = remaining > 0 ? (long)remaining : 0;
	struct np_wait none;
	np_wait_none(&none);
	/* In slices of 200 ms, so that a cancelled run ends within one. */
	for (int64_t end = k8s_mono_ms() + ms;;) {
		if (np_cancelled(c->cancel))
			return np_error_cancelled(err, np_cancelled(c->cancel), what);
		int64_t left = end - k8s_mono_ms();
		if (left <= 0)
			break;
		if (np_wait_block(also ? also : &none, left > 200 ? 200 : left))
			return 1;
	}
	if (too_long)
		return np_error_set(err, NP_EK8S, 0, "deadline exceeded while %s", what);
	return 0;
}

long k8s_backoff_jitter_ms(unsigned attempt, long base_ms, long cap_ms, uint32_t rnd)
{
	long d = backoff_ceil(attempt, base_ms, cap_ms);
	if (d <= 0)
		return 0;
	return d + (long)(rnd % ((uint32_t)d + 1));
}

/* What an HTTP/2 connection's failures come back as (curl's lib/http2.c,
 * curl-8_14_1, http2_handle_stream_close and cf_h2_recv; 7.88.1 alike):
 * RST_STREAM REFUSED_STREAM (the server did not process the stream) is
 * retried by curl itself on a new connection (data->state.refused_stream,
 * then Curl_retry_request in lib/transfer.c); any other RST_STREAM code
 * is CURLE_HTTP2_STREAM; a stream reset or beyond a GOAWAY's last stream,
 * or a connection closed under it, is CURLE_PARTIAL_FILE once body bytes
 * came, else CURLE_HTTP2.  All are retried here (a request) or resumed
 * with the watch backoff (a watch: watch.c, after_connection); the
 * connection a GOAWAY ended is not reused (connclose "GOAWAY received"). */
bool k8s_curl_retryable(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR: /* a reset during the handshake */
		return true;
	default:
		return false;
	}
}
