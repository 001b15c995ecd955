/* One HTTP attempt of a client (k8s_perform: the multi driven until this
 * transfer is done, the deadline and the cancel flag checked between
 * calls) and the retry loop around it (k8s_request).  client.c makes and
 * sets up the clients. */
#include "k8s/k8s_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cancel.h"
#include "util/cleanup.h"
#include "util/jsonmem.h"
#include "util/jsonread.h"

#ifndef NICPICK_VERSION
#define NICPICK_VERSION "dev"
#endif

size_t k8s_page_max(size_t limit)
{
	size_t n = limit ? limit : K8S_LIST_PAGE;
	if (n > K8S_MAX_LIST / K8S_MAX_LIST_ITEM)
		return K8S_MAX_LIST;
	n *= K8S_MAX_LIST_ITEM;
	return n < K8S_MAX_OBJECT ? K8S_MAX_OBJECT : n;
}

size_t k8s_page_fit(size_t limit, size_t items, size_t used)
{
	if (!items || !used)
		return limit;
	size_t each = used / items + (used % items != 0);
	size_t fit = (K8S_PARSE_MAX / 4 * 3) / each;
	if (fit < 1)
		fit = 1;
	return fit < limit ? fit : limit;
}

size_t k8s_parse_budget(size_t len, size_t max_parse)
{
	size_t b = len > (SIZE_MAX - K8S_PARSE_SLACK) / K8S_PARSE_FACTOR
			   ? SIZE_MAX
			   : len * K8S_PARSE_FACTOR + K8S_PARSE_SLACK;
	return b < max_parse ? b : max_parse;
}

json_t *k8s_json_parse_used(const char *buf, size_t len, size_t max_parse, json_error_t *jerr,
			    bool *over, size_t *used)
{
	return np_json_loadb_budget(buf ? buf : "", buf ? len : 0, JSON_ALLOW_NUL,
				    k8s_parse_budget(len, max_parse), jerr, over, used);
}

json_t *k8s_json_parse(const char *buf, size_t len, size_t max_parse, json_error_t *jerr,
		       bool *over)
{
	return k8s_json_parse_used(buf, len, max_parse, jerr, over, NULL);
}

const char *k8s_size_text(size_t n, char *buf, size_t len)
{
	if (n >= (1u << 20))
		snprintf(buf, len, n % (1u << 20) ? "%.1f MiB" : "%.0f MiB", (double)n / (1u << 20));
	else if (n >= 1024)
		snprintf(buf, len, n % 1024 ? "%.1f KiB" : "%.0f KiB", (double)n / 1024);
	else
		snprintf(buf, len, "%zu bytes", n);
	return buf;
}

size_t k8s_status_body_append(struct k8s_buf *b, const char *p, size_t n, bool *cut)
{
	size_t keep = b->len < K8S_MAX_STATUS ? K8S_MAX_STATUS - b->len : 0;
	if (keep > n)
		keep = n;
	if (keep && k8s_buf_append(b, p, keep) < 0)
		return 0;
	if (keep == n)
		return n;
	*cut = true;
	return 0;
}

/* The body of a transfer without write_fn: a 2xx answer up to max_body
 * (refused past it, or at once when its Content-Length says it will be),
 * any other up to K8S_MAX_STATUS (the rest is not needed for its message).
 * Returning short of n ends the transfer with CURLE_WRITE_ERROR. */
static size_t collect(char *p, size_t size, size_t nmemb, void *ud)
{
	struct k8s_xfer *x = ud;
	struct k8s_buf *b = &x->resp;
	size_t n = size * nmemb;
	long http = 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &http);
	if (http < 200 || http >= 300)
		return k8s_status_body_append(b, p, n, &x->status_cut);
	size_t max = x->max_body ? x->max_body : K8S_MAX_OBJECT;
	curl_off_t cl = -1;
	/* Its Content-Length says it will be too large: refused before a
	 * byte of it is kept. */
	bool too_long = b->len == 0 &&
			curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK &&
			cl > 0 && (uint64_t)cl > max;
	if (too_long || n > max - b->len) {
		x->oversize = true;
		return 0;
	}
	if (k8s_buf_append(b, p, n) < 0)
		return 0;
	return n;
}

void k8s_xfer_reset(struct k8s_xfer *x)
{
	k8s_buf_free(&x->resp);
	x->cc = CURLE_OK;
	x->http = 0;
	x->retry_after = 0;
	x->deadline_hit = false;
	x->tls_refused = false;
	x->oversize = false;
	x->status_cut = false;
	x->errbuf[0] = '\0';
	np_wait_none(&x->pump_wait);
}

static void account(struct k8s_client *c)
{
	long req_hdr = 0, resp_hdr = 0, conns = 0;
	curl_off_t up = 0, down = 0;
	curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &conns);
	curl_easy_getinfo(c->curl, CURLINFO_REQUEST_SIZE, &req_hdr);
	curl_easy_getinfo(c->curl, CURLINFO_HEADER_SIZE, &resp_hdr);
	curl_easy_getinfo(c->curl, CURLINFO_SIZE_UPLOAD_T, &up);
	curl_easy_getinfo(c->curl, CURLINFO_SIZE_DOWNLOAD_T, &down);
	c->stats.requests++;
	c->stats.connects += (uint64_t)conns;
	c->stats.bytes_sent += (uint64_t)req_hdr + (uint64_t)up;
	c->stats.bytes_received += (uint64_t)resp_hdr + (uint64_t)down;
}

/* Every DONE message of the multi goes to its client, whichever transfer
 * is being driven: a twin's may end while this one runs. */
static void reap(CURLM *m)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(m, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		struct k8s_client *o = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&o);
		if (o) {
			o->done = true;
			o->result = msg->data.result;
		}
	}
}

/* Cancellation and ticks are looked at between waits of at most this;
 * a signal cuts the wait short (poll returns EINTR, which curl's
 * Curl_poll takes for a timeout). */
#define K8S_DRIVE_SLICE_MS 500

/* Run c's easy handle in its multi until its transfer ends: the multi's
 * other transfers (a twin's watch) are driven along.  No curl callback
 * of nicpick's does more than copy bytes: the watch's events, the ticks
 * and cancellation are dealt with here, between curl_multi_perform calls,
 * so that what they do may drive the same multi (curl refuses a
 * curl_multi_perform from inside its own callbacks, CURLM_RECURSIVE_API_CALL). */
static CURLcode drive(struct k8s_client *c, struct k8s_xfer *x, long timeout_ms)
{
	CURLM *m = c->multi->m;
	c->done = false;
	c->result = CURLE_OK;
	CURLMcode mc = curl_multi_add_handle(m, c->curl);
	if (mc != CURLM_OK) {
		snprintf(x->errbuf, sizeof(x->errbuf), "curl_multi_add_handle: %s", curl_multi_strerror(mc));
		return CURLE_FAILED_INIT;
	}
	/* curl's own timer (CURLOPT_TIMEOUT_MS) ends the transfer; this one
	 * ends a transfer curl left waiting for a connection past it
	 * (curl/curl#13227, queued PIPEWAIT transfers that did not time out). */
	int64_t give_up = k8s_mono_ms() + timeout_ms + 2000;
	CURLcode cc = CURLE_OK;
	for (;;) {
		int running = 0;
		mc = curl_multi_perform(m, &running);
		if (mc != CURLM_OK) {
			snprintf(x->errbuf, sizeof(x->errbuf), "curl_multi_perform: %s", curl_multi_strerror(mc));
			cc = CURLE_RECV_ERROR;
			break;
		}
		reap(m);
		/* Deliver what came, also the end of a stream that is done. */
		if (x->pump && x->pump(x->pump_ud)) {
			cc = c->done ? c->result : CURLE_WRITE_ERROR;
			break;
		}
		if (c->done) {
			cc = c->result;
			break;
		}
		if (np_cancelled(c->cancel)) {
			cc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
		int64_t now = k8s_mono_ms();
		if (c->tick && now >= c->next_tick) {
			c->next_tick = now + c->tick_ms;
			c->tick(c->tick_ud); /* may drive the multi itself */
			if (c->done)
				continue;
			now = k8s_mono_ms();
		}
		if (now >= give_up) {
			snprintf(x->errbuf, sizeof(x->errbuf), "Operation timed out after %ld milliseconds",
				 timeout_ms);
			cc = CURLE_OPERATION_TIMEDOUT;
			break;
		}
		long wait = K8S_DRIVE_SLICE_MS;
		if (c->tick && c->next_tick - now < wait)
			wait = c->next_tick - now > 0 ? (long)(c->next_tick - now) : 0;
		/* ... and for what the pump waits for besides (a watch's side
		 * work), or the caller's idle work beside a request */
		struct np_wait iw;
		np_wait_none(&iw);
		if (!x->pump && c->idle)
			c->idle(c->idle_ud, &iw);
		const struct np_wait *pw = x->pump ? &x->pump_wait : &iw;
		struct curl_waitfd extra = {
			.fd = pw->fd,
			.events = (short)((pw->events & POLLIN ? CURL_WAIT_POLLIN : 0) |
					  (pw->events & POLLOUT ? CURL_WAIT_POLLOUT : 0)),
		};
		unsigned n_extra = pw->fd >= 0;
		wait = np_wait_ms(pw, wait);
		curl_multi_poll(m, n_extra ? &extra : NULL, n_extra, (int)wait, NULL);
	}
	/* Ends the transfer if it runs still (a watch its callback stopped:
	 * an HTTP/2 stream is reset, the connection stays). */
	curl_multi_remove_handle(m, c->curl);
	return cc;
}

int k8s_perform(struct k8s_client *c, struct k8s_xfer *x, np_error *err)
{
	if (np_cancelled(c->cancel))
		return np_error_cancelled(err, np_cancelled(c->cancel), "talking to the API server");
	int64_t remaining = k8s_remaining_ms(c);
	if (remaining <= 0) {
		x->deadline_hit = true;
		return np_error_set(err, NP_EK8S, 0, "deadline exceeded before %s %s", x->method,
				    x->path);
	}
	char what[160];
	snprintf(what, sizeof(what), "waiting for the client's rate limit (%.0f requests/s) before %s",
		 c->lim->b.qps, x->method);
	if (k8s_limit_wait(c, c->lim, what, err) < 0)
		return -1;
	remaining = k8s_remaining_ms(c);
	if (k8s_token_refresh(c, false, err) < 0)
		return -1;

	cleanup_free char *url = NULL;
	cleanup_free char *auth = NULL;
	cleanup_free char *ctype = NULL;
	if (asprintf(&url, "%s%s", c->base_url ? c->base_url : c->cfg.server, x->path) < 0) {
		url = NULL;
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "request URL");
	}
	struct curl_slist *hdrs = NULL, *h;
	cleanup_free char *accept = NULL;
	if (asprintf(&accept, "Accept: %s", x->accept ? x->accept : K8S_ACCEPT_JSON) < 0)
		accept = NULL;
	h = accept ? curl_slist_append(hdrs, accept) : NULL;
	hdrs = h ? h : hdrs;
	/* No "Expect: 100-continue" round trip for small bodies. */
	h = curl_slist_append(hdrs, "Expect:");
	hdrs = h ? h : hdrs;
	const char *bearer = c->cred.token ? c->cred.token : c->token ? c->token : c->cfg.token;
	if (bearer && asprintf(&auth, "Authorization: Bearer %s", bearer) >= 0) {
		h = curl_slist_append(hdrs, auth);
		hdrs = h ? h : hdrs;
	}
	if (c->host_header) {
		h = curl_slist_append(hdrs, c->host_header);
		hdrs = h ? h : hdrs;
	}
	if (x->content_type && asprintf(&ctype, "Content-Type: %s", x->content_type) >= 0) {
		h = curl_slist_append(hdrs, ctype);
		hdrs = h ? h : hdrs;
	}
	if (!hdrs || (bearer && !auth)) {
		curl_slist_free_all(hdrs);
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "request headers");
	}

	long cap = x->cap_ms > 0 ? x->cap_ms : K8S_REQUEST_CAP_MS;
	long timeout = remaining < cap ? (long)remaining : cap;
	long connect = timeout < K8S_CONNECT_CAP_MS ? timeout : K8S_CONNECT_CAP_MS;

	CURL *e = c->curl;
	/* reset keeps the live connection, so keep-alive still works */
	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "nicpick/" NICPICK_VERSION);
	/* Twins: HTTP/2 where the server offers it by ALPN (h2, then
	 * http/1.1), as kube-apiserver does (Go's net/http), so that their
	 * requests and watch are streams of one connection; PIPEWAIT makes a
	 * transfer started while the twin's connection is still being set up
	 * wait for it to tell whether it multiplexes rather than open a
	 * second one (docs/libcurl/opts/CURLOPT_PIPEWAIT.md).  A lone client
	 * has nothing to multiplex: HTTP/1.1, no nghttp2 on its path. */
	if (c->twin && k8s_curl_has_http2()) {
		curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
		curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	} else {
		curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	}
	curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)c);
	/* An HTTP/1.1 server: a twin's first transfer (the watch's list)
	 * opens the connection it will need, rather than take its sibling's
	 * idle one and leave the sibling to open one at its next request,
	 * which comes from inside the watch, on the way to the outputs. */
	if (c->twin && c->stats.requests == 0 && c->multi->http_version > 0 &&
	    c->multi->http_version < CURL_HTTP_VERSION_2_0)
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	/* curl's smallest send buffer, 16 KiB instead of 64: a request body
	 * is a patch of a few KiB, and curl zeroes each buffer it allocates
	 * (bufq.c), 16 pages a transfer would touch for nothing. */
	curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
	if (c->cfg.ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, c->cfg.ca_file);
	/* kubeconfig data fields: PEM blobs, copied by curl */
	const char *cert_pem = c->cred.cert_pem ? c->cred.cert_pem : c->cfg.client_cert_pem;
	const char *key_pem = c->cred.key_pem ? c->cred.key_pem : c->cfg.client_key_pem;
	struct curl_blob blob;
	if (c->cfg.ca_pem) {
		blob = (struct curl_blob){ c->cfg.ca_pem, strlen(c->cfg.ca_pem), CURL_BLOB_COPY };
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
	}
	if (cert_pem) {
		blob = (struct curl_blob){ (void *)cert_pem, strlen(cert_pem), CURL_BLOB_COPY };
		curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &blob);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
	} else if (c->cfg.client_cert_file) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, c->cfg.client_cert_file);
	}
	if (key_pem) {
		/* + 1: mbedTLS parses a PEM key only with its NUL in the length,
		 * and curl passes a key blob on as it is (OpenSSL, the release
		 * build's and Debian's libcurl's, ignores the NUL). */
		blob = (struct curl_blob){ (void *)key_pem, strlen(key_pem) + 1, CURL_BLOB_COPY };
		curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &blob);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	} else if (c->cfg.client_key_file) {
		curl_easy_setopt(e, CURLOPT_SSLKEY, c->cfg.client_key_file);
	}
	/* An empty pass phrase: a key that became encrypted since the
	 * kubeconfig was read (k8s_pem_key_encrypted) fails to load instead of
	 * OpenSSL asking for one on the terminal (PEM_def_callback). */
	if (key_pem || c->cfg.client_key_file)
		curl_easy_setopt(e, CURLOPT_KEYPASSWD, "");
	if (c->connect_to)
		curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
	if (c->cfg.tls_groups && k8s_curl_is_openssl())
		curl_easy_setopt(e, CURLOPT_SSL_EC_CURVES, c->cfg.tls_groups);
	if (c->cfg.insecure_skip_tls_verify) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (strcmp(x->method, "GET") != 0)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, x->method);
	if (x->body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
	}
	if (x->write_fn) {
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, x->write_fn);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, x->write_ud);
	} else {
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	}
	x->easy = e;

	x->errbuf[0] = '\0';
	x->cc = drive(c, x, timeout);
	/* An error's body cut short is as good as whole: its status is what
	 * counts, and its message is in what was kept. */
	if (x->cc == CURLE_WRITE_ERROR && x->status_cut)
		x->cc = CURLE_OK;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &x->http);
	curl_easy_getinfo(e, CURLINFO_RETRY_AFTER, &x->retry_after);
	long hv = 0;
	if (curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &hv) == CURLE_OK && hv > 0)
		c->multi->http_version = hv;
	account(c);
	/* The handle must not keep pointers to our freed buffers. */
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(hdrs);
	if (np_cancelled(c->cancel))
		return np_error_cancelled(err, np_cancelled(c->cancel), "talking to the API server");
	if (x->cc == CURLE_OPERATION_TIMEDOUT && k8s_remaining_ms(c) <= 10)
		x->deadline_hit = true;
	if (!x->errbuf[0] && x->cc != CURLE_OK)
		snprintf(x->errbuf, sizeof(x->errbuf), "%s", curl_easy_strerror(x->cc));
	k8s_xfer_explain(x);
	return 0;
}

/* Texts of a handshake the server refused: mbedTLS (a system libcurl built
 * with it: MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE, MBEDTLS_ERR_SSL_HANDSHAKE_FAILURE,
 * MBEDTLS_ERR_SSL_BAD_PROTOCOL_VERSION) and OpenSSL (the release build's and
 * Debian's libcurl: an
 * alert received reads "tlsv1 alert protocol version", "sslv3 alert
 * handshake failure", "tlsv13 alert certificate required"; "unsupported
 * protocol", "no protocols available").  A reset or an EOF
 * during the handshake is none of these, and stays worth a retry. */
static const char *const tls_refusals[] = {
	"fatal alert message was received", "handshake negotiation failed",
	"bad protocol version", " alert ", "unsupported protocol", "no protocols available",
	"wrong version number",
};

void k8s_xfer_explain(struct k8s_xfer *x)
{
	if (x->cc == CURLE_OK || !x->errbuf[0])
		return;
	/* mbedTLS's verify texts (curl 8) end with a newline. */
	size_t n = strlen(x->errbuf);
	while (n > 0 && (x->errbuf[n - 1] == '\n' || x->errbuf[n - 1] == ' '))
		x->errbuf[--n] = '\0';
	char orig[sizeof(x->errbuf)];
	snprintf(orig, sizeof(orig), "%s", x->errbuf);
	if (x->cc == CURLE_COULDNT_RESOLVE_HOST ||
	    (x->cc == CURLE_OPERATION_TIMEDOUT && strcasestr(orig, "resolv"))) {
		if (strncmp(orig, "DNS: ", 5) != 0)
			snprintf(x->errbuf, sizeof(x->errbuf), "DNS: %s", orig);
		return;
	}
	/* With TLS 1.3 the client's side of the handshake may complete before
	 * the server's alert arrives: then it comes with the first read. */
	if (x->cc != CURLE_SSL_CONNECT_ERROR && x->cc != CURLE_RECV_ERROR)
		return;
	for (size_t i = 0; i < sizeof(tls_refusals) / sizeof(tls_refusals[0]); i++) {
		if (!strcasestr(orig, tls_refusals[i]))
			continue;
		x->tls_refused = true;
#ifdef K8S_CURL_STATIC
		/* The release build: libcurl and OpenSSL linked in. */
		const char *tls = curl_version_info(CURLVERSION_NOW)->ssl_version;
#else
		const char *tls = "the system's libcurl";
#endif
		snprintf(x->errbuf, sizeof(x->errbuf),
			 "the API server refused the TLS handshake (%s): it requires a TLS "
			 "version, cipher suite or client certificate that nicpick does not offer "
			 "(this build: %s), which retrying cannot change",
			 orig, tls);
		return;
	}
}

/* A create retried after an attempt whose answer was lost (a 5xx, a
 * timeout, a dropped connection) finds the object that attempt made: the
 * real API server can commit a write and still answer 504. */
static bool created_before(const char *method, unsigned attempt, long http, const char *body,
			   size_t len)
{
	if (attempt == 0 || http != 409 || strcmp(method, "POST") != 0)
		return false;
	json_t *st = k8s_json_parse(body, len, K8S_PARSE_MAX, NULL, NULL);
	const char *reason = np_json_cstr(json_object_get(st, "reason"));
	bool exists = reason && !strcmp(reason, "AlreadyExists");
	json_decref(st);
	return exists;
}

static bool http_retryable(long http, const char *body, size_t len)
{
	if (http == 429 || (http >= 500 && http != 501))
		return true;
	if (http == 409) {
		/* Conflict (optimistic concurrency) may pass; AlreadyExists never will. */
		json_t *st = k8s_json_parse(body, len, K8S_PARSE_MAX, NULL, NULL);
		const char *reason = np_json_cstr(json_object_get(st, "reason"));
		bool retry = reason && !strcmp(reason, "Conflict");
		json_decref(st);
		return retry;
	}
	return false;
}

int k8s_request(struct k8s_client *c, const char *method, const char *path,
		const json_t *body, const char *content_type, const char *accept, json_t **out,
		np_error *err)
{
	return k8s_request_as(c, method, path, body, content_type, accept, NULL, out, err);
}

int k8s_request_as(struct k8s_client *c, const char *method, const char *path,
		   const json_t *body, const char *content_type, const char *accept,
		   const struct k8s_answer_limits *lim, json_t **out, np_error *err)
{
	/* Unless told: one object for what names one of the API's objects
	 * or writes one (a POST's answer is what it made), a list in one
	 * answer for a GET of a collection, and for a path that is not the
	 * API's (a test server's own, which nicpick itself never asks). */
	struct k8s_rbac r;
	static const struct k8s_answer_limits object = { K8S_MAX_OBJECT, K8S_PARSE_MAX, "one object" };
	static const struct k8s_answer_limits list = { K8S_MAX_LIST, SIZE_MAX, "a list in one answer" };
	if (!lim)
		lim = k8s_rbac_from_request(method, path, &r) == 0 && (r.name[0] || strcmp(method, "GET"))
			      ? &object
			      : &list;
	c->last_oversize = false;
	c->last_parse_used = 0;
	cleanup_free char *payload = NULL;
	if (out)
		*out = NULL;
	if (body && !(payload = json_dumps(body, JSON_COMPACT)))
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "encoding %s %s", method, path);

	/* A write whose answer nobody reads (a patch of annotations, an
	 * Event) asks for the object's metadata only, as client-go's
	 * metadata client does for its Patch: the server then neither
	 * encodes nor sends the pod's spec and status, about half of a
	 * real pod's bytes.  The answer is still checked for its status. */
	struct k8s_xfer x = { .method = method, .path = path, .body = payload,
			      .body_len = payload ? strlen(payload) : 0,
			      .content_type = payload ? content_type : NULL,
			      .accept = accept ? accept : out ? K8S_ACCEPT_JSON : K8S_ACCEPT_META,
			      .max_body = lim->max_body };
	char sz[2][32];
	char last[NP_ERR_MSG_MAX / 2] = "";
	bool reauthed = false;
	int rc = -1;
	for (unsigned attempt = 0;; attempt++) {
		k8s_xfer_reset(&x);
		if (attempt > 0)
			c->stats.retries++;
		c->last_http = 0;
		if (k8s_perform(c, &x, err) < 0)
			goto fail;
		if (x.cc == CURLE_OK)
			c->last_http = x.http;
		long delay = -1;
		if (x.oversize) {
			/* Not retried: the server would send it again. */
			c->last_oversize = true;
			np_error_set(err, NP_EK8S, 0,
				     "%s %s: the answer is larger than %s, the most %s can be: refused "
				     "without reading the rest",
				     method, path, k8s_size_text(lim->max_body, sz[0], sizeof(sz[0])),
				     lim->what);
			goto fail;
		}
		if (x.cc != CURLE_OK) {
			if (x.deadline_hit) {
				np_error_set(err, NP_EK8S, 0, "deadline exceeded while %s %s: %s",
					     method, path, x.errbuf);
				goto fail;
			}
			if (!k8s_curl_retryable(x.cc) || x.tls_refused) {
				np_error_set(err, NP_EK8S, 0, "%s %s%s: %s", method, c->cfg.server,
					     path, x.errbuf);
				goto fail;
			}
			snprintf(last, sizeof(last), "%s", x.errbuf);
		} else if (x.http >= 200 && x.http < 300) {
			if (out) {
				json_error_t jerr;
				bool over = false;
				/* NUL allowed: refused only where a value is used
				 * (np_json_cstr). */
				*out = k8s_json_parse_used(x.resp.data, x.resp.len, lim->max_parse, &jerr,
							   &over, &c->last_parse_used);
				if (over) {
					c->last_oversize = true;
					np_error_set(err, NP_EK8S, 0,
						     "%s %s: the answer, %s of JSON, would take more than %s "
						     "of memory to parse, which no answer of the API does "
						     "(that many values, that small): refused",
						     method, path,
						     k8s_size_text(x.resp.len, sz[0], sizeof(sz[0])),
						     k8s_size_text(k8s_parse_budget(x.resp.len, lim->max_parse),
								   sz[1], sizeof(sz[1])));
					goto fail;
				}
				if (!*out) {
					np_error_set(err, NP_EK8S, 0,
						     "%s %s: invalid JSON in response: %s", method,
						     path, jerr.text);
					goto fail;
				}
			}
			rc = 0;
			goto done;
		} else if (!out && created_before(method, attempt, x.http, x.resp.data, x.resp.len)) {
			rc = 0; /* the first attempt committed it */
			goto done;
		} else if (x.http == 401 && !reauthed && (c->cfg.token_file || c->cfg.exec)) {
			/* Bound tokens rotate: re-read the file (or re-run the exec
			 * plugin, as client-go does) once and try again. */
			reauthed = true;
			if (k8s_token_refresh(c, true, err) < 0)
				goto fail;
			continue;
		} else if (http_retryable(x.http, x.resp.data, x.resp.len)) {
			np_error tmp = { 0 };
			k8s_status_error(&tmp, method, path, x.http, x.resp.data, x.resp.len,
					 c->cfg.token_file);
			snprintf(last, sizeof(last), "%.400s", tmp.msg);
			json_t *st = k8s_json_parse(x.resp.data, x.resp.len, K8S_PARSE_MAX, NULL, NULL);
			delay = k8s_retry_after_ms(x.retry_after, st);
			json_decref(st);
		} else {
			k8s_status_error(err, method, path, x.http, x.resp.data, x.resp.len,
					 c->cfg.token_file);
			/* A kubeconfig's credential was sent, not a token file's:
			 * say which one the server refused. */
			const char *sent = c->cfg.exec		  ? "the exec plugin's credential"
					   : c->cfg.token	  ? "the kubeconfig's token"
					   : c->cfg.client_cert_pem || c->cfg.client_cert_file
						   ? "the client certificate"
						   : NULL;
			if (x.http == 401 && !c->cfg.token_file && sent)
				np_error_set(err, NP_EK8S, 0,
					     "unauthorized: the API server rejected %s (HTTP 401)", sent);
			goto fail;
		}
		if (c->deadline_ms == 0 && attempt + 1 >= K8S_MAX_ATTEMPTS_NO_DEADLINE) {
			np_error_set(err, NP_EK8S, 0, "%s %s: giving up after %u attempts: %s",
				     method, path, attempt + 1, last);
			goto fail;
		}
		if (delay < 0)
			delay = k8s_backoff_ms(attempt, K8S_BACKOFF_BASE_MS, K8S_BACKOFF_CAP_MS,
					       k8s_rand(c));
		char what[NP_ERR_MSG_MAX];
		snprintf(what, sizeof(what), "waiting %ld ms to retry %s %s (last error: %s)",
			 delay, method, path, last);
		if (k8s_wait(c, delay, what, err) < 0)
			goto fail;
	}
fail:
	if (last[0] && err && !strstr(err->msg, "last error")) {
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof(err->msg) - n, " (last error: %s)", last);
	}
done:
	k8s_buf_free(&x.resp);
	return rc;
}
