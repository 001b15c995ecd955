/* The client: one curl easy handle driven through a curl multi handle
 * (its own, or its twins': one pool of connections), the deadline, one
 * HTTP attempt (k8s_perform) and the retry loop around it (k8s_request). */
#include "k8s/k8s_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "util/cancel.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/jsonread.h"

#ifndef NICPICK_VERSION
#define NICPICK_VERSION "dev"
#endif

/* The client's clock is nicpick's one monotonic clock (util/clock.h). */
int64_t k8s_mono_ms(void)
{
	return np_now_ms();
}

int k8s_buf_append(struct k8s_buf *b, const char *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

void k8s_buf_free(struct k8s_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* tls-server-name: curl verifies (and sends as SNI) the URL's host, so the
 * URL names tls-server-name, CONNECT_TO sends the connection to the
 * server's own host and port, and the Host header stays the server's. */
static int server_name_setup(struct k8s_client *c, np_error *err)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;
	cleanup_free char *map = NULL;
	int rc = -1;
	if (!u) {
		np_error_set(err, NP_EINTERNAL, ENOMEM, "kubernetes client");
		goto out;
	}
	if (curl_url_set(u, CURLUPART_URL, c->cfg.server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		np_error_set(err, NP_EUSAGE, 0, "kubernetes client: server %s is not a URL",
			     c->cfg.server);
		goto out;
	}
	/* Host: carries the port only when the URL names one (CURLUE_NO_PORT). */
	char *pin = NULL;
	bool default_port = curl_url_get(u, CURLUPART_PORT, &pin, 0) != CURLUE_OK;
	curl_free(pin);
	if (asprintf(&c->host_header, "Host: %s%s%s", host, default_port ? "" : ":",
		     default_port ? "" : port) < 0) {
		c->host_header = NULL;
		np_error_set(err, NP_EINTERNAL, ENOMEM, "kubernetes client");
		goto out;
	}
	if (asprintf(&map, "%s:%s:%s:%s", c->cfg.tls_server_name, port, host, port) < 0) {
		map = NULL;
		np_error_set(err, NP_EINTERNAL, ENOMEM, "kubernetes client");
		goto out;
	}
	if (!(c->connect_to = curl_slist_append(NULL, map)) ||
	    curl_url_set(u, CURLUPART_HOST, c->cfg.tls_server_name, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &c->base_url, 0) != CURLUE_OK) {
		np_error_set(err, NP_EUSAGE, 0, "kubernetes client: tls-server-name %s is not a host name",
			     c->cfg.tls_server_name);
		goto out;
	}
	/* curl_url_get gives "https://name:port/"; requests append the path. */
	size_t len = strlen(c->base_url);
	while (len > 0 && c->base_url[len - 1] == '/')
		c->base_url[--len] = '\0';
	rc = 0;
out:
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

/* One pool of connections.  CURLPIPE_MULTIPLEX (curl's default since
 * 7.62.0, set all the same): transfers of one multi share an HTTP/2
 * connection as streams (docs/libcurl/opts/CURLMOPT_PIPELINING.md). */
static struct k8s_multi *multi_new(void)
{
	struct k8s_multi *mu = calloc(1, sizeof(*mu));
	if (!mu || !(mu->m = curl_multi_init())) {
		free(mu);
		return NULL;
	}
	curl_multi_setopt(mu->m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	mu->refs = 1;
	return mu;
}

static void multi_release(struct k8s_multi *mu)
{
	if (!mu || --mu->refs > 0)
		return;
	curl_multi_cleanup(mu->m); /* closes its connections */
	free(mu);
}

/* A client on multi (one reference more), or on a multi of its own. */
static int client_new(struct k8s_client **out, const struct k8s_config *cfg, struct k8s_multi *multi,
		      np_error *err)
{
	*out = NULL;
	if (!cfg->server)
		return np_error_set(err, NP_EK8S, 0, "kubernetes client: no API server configured");
	if (k8s_curl_load(err) < 0)
		return -1;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return np_error_set(err, NP_EINTERNAL, 0, "curl_global_init failed");
	struct k8s_client *c = calloc(1, sizeof(*c));
	if (!c) {
		curl_global_cleanup();
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "kubernetes client");
	}
	c->curl = curl_easy_init();
	if (multi)
		multi->refs++;
	c->multi = multi ? multi : multi_new();
	pthread_mutex_init(&c->own_lim.mu, NULL);
	k8s_bucket_init(&c->own_lim.b, K8S_DEFAULT_QPS, K8S_DEFAULT_BURST);
	c->lim = &c->own_lim;
	k8s_bucket_init(&c->watch_opens, K8S_WATCH_OPEN_QPS, K8S_WATCH_OPEN_BURST);
	bool copied = k8s_config_copy(&c->cfg, cfg);
	char host[256] = "nicpick";
	if (!cfg->pod_name)
		gethostname(host, sizeof(host) - 1);
	c->reporting_instance = strdup(cfg->pod_name ? cfg->pod_name : host);
	if (!c->curl || !c->multi || !copied || !c->cfg.server || !c->reporting_instance ||
	    (cfg->namespace && !c->cfg.namespace)) {
		k8s_client_free(c);
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "kubernetes client");
	}
	if (c->cfg.tls_server_name && server_name_setup(c, err) < 0) {
		k8s_client_free(c);
		return -1;
	}
	/* The jitter only has to differ between pods, not be secret. */
	if (getrandom(&c->rng, sizeof(c->rng), GRND_NONBLOCK) != sizeof(c->rng))
		c->rng = (uint32_t)k8s_mono_ms() ^ ((uint32_t)getpid() << 16);
	if (!c->rng)
		c->rng = 0x9e3779b9u;
	*out = c;
	return 0;
}

int k8s_client_new(struct k8s_client **out, const struct k8s_config *cfg, np_error *err)
{
	return client_new(out, cfg, NULL, err);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
	struct k8s_share *s = ud;
	(void)h, (void)access;
	if ((unsigned)data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&s->mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
	struct k8s_share *s = ud;
	(void)h;
	if ((unsigned)data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&s->mu[data]);
}

static void share_release(struct k8s_share *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->refmu);
	int left = --s->refs;
	pthread_mutex_unlock(&s->refmu);
	if (left > 0)
		return;
	curl_share_cleanup(s->sh);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s->mu[i]);
	pthread_mutex_destroy(&s->refmu);
	free(s);
}

/* Join c to share s (one reference more). */
static int share_attach(struct k8s_client *c, struct k8s_share *s)
{
	if (curl_easy_setopt(c->curl, CURLOPT_SHARE, s->sh) != CURLE_OK)
		return -1;
	pthread_mutex_lock(&s->refmu);
	s->refs++;
	pthread_mutex_unlock(&s->refmu);
	c->share = s;
	return 0;
}

static struct k8s_share *share_new(void)
{
	struct k8s_share *s = calloc(1, sizeof(*s));
	if (!s || !(s->sh = curl_share_init())) {
		free(s);
		return NULL;
	}
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&s->mu[i], NULL);
	pthread_mutex_init(&s->refmu, NULL);
	if (curl_share_setopt(s->sh, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
	    curl_share_setopt(s->sh, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
	    curl_share_setopt(s->sh, CURLSHOPT_USERDATA, s) != CURLSHE_OK ||
	    curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK ||
	    curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK) {
		s->refs = 1;
		share_release(s);
		return NULL;
	}
	return s;
}

static int new_like(struct k8s_client **out, struct k8s_client *like, struct k8s_multi *multi,
		    np_error *err)
{
	if (client_new(out, &like->cfg, multi, err) < 0)
		return -1;
	struct k8s_client *c = *out;
	c->lim = like->lim;
	c->deadline_ms = like->deadline_ms;
	/* The share starts with the second client: a lone client needs none. */
	if (!like->share) {
		struct k8s_share *s = share_new();
		if (!s || share_attach(like, s) < 0) {
			if (s) {
				s->refs = 1;
				share_release(s);
			}
			return 0; /* no share: each connection its own handshake */
		}
	}
	share_attach(c, like->share);
	return 0;
}

int k8s_client_new_like(struct k8s_client **out, struct k8s_client *like, np_error *err)
{
	return new_like(out, like, NULL, err);
}

int k8s_client_new_twin(struct k8s_client **out, struct k8s_client *sib, np_error *err)
{
	if (new_like(out, sib, sib->multi, err) < 0)
		return -1;
	(*out)->twin = sib->twin = true;
	return 0;
}

void k8s_client_free(struct k8s_client *c)
{
	if (!c)
		return;
	/* The easy handle first: the multi's connections (a twin's too) stay
	 * in the multi until its last client goes. */
	if (c->curl)
		curl_easy_cleanup(c->curl);
	multi_release(c->multi);
	share_release(c->share);
	k8s_config_free(&c->cfg);
	k8s_exec_cred_free(&c->cred);
	free(c->base_url);
	curl_slist_free_all(c->connect_to);
	free(c->host_header);
	free(c->token);
	free(c->reporting_instance);
	pthread_mutex_destroy(&c->own_lim.mu);
	free(c);
	curl_global_cleanup();
}

void k8s_client_set_tick(struct k8s_client *c, int interval_ms, void (*tick)(void *ud), void *ud)
{
	c->tick = tick;
	c->tick_ud = ud;
	c->tick_ms = interval_ms > 0 ? interval_ms : 1000;
	c->next_tick = k8s_mono_ms() + c->tick_ms;
}

void k8s_client_set_cancel(struct k8s_client *c, const volatile sig_atomic_t *cancel)
{
	c->cancel = cancel;
}

void k8s_client_set_deadline(struct k8s_client *c, int64_t deadline_ms)
{
	c->deadline_ms = deadline_ms;
}

void k8s_client_set_timeout(struct k8s_client *c, double seconds)
{
	c->deadline_ms = seconds > 0 ? k8s_mono_ms() + (int64_t)(seconds * 1000.0) : 0;
}

void k8s_client_stats(const struct k8s_client *c, struct k8s_stats *st)
{
	*st = c->stats;
}

long k8s_client_last_http(const struct k8s_client *c)
{
	return c->last_http;
}

const struct k8s_config *k8s_client_config(const struct k8s_client *c)
{
	return &c->cfg;
}

int64_t k8s_remaining_ms(const struct k8s_client *c)
{
	if (!c->deadline_ms)
		return INT64_MAX;
	return c->deadline_ms - k8s_mono_ms();
}

uint32_t k8s_rand(struct k8s_client *c)
{
	/* xorshift32 */
	uint32_t x = c->rng;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	c->rng = x;
	return x;
}

static size_t collect(char *p, size_t size, size_t nmemb, void *ud)
{
	struct k8s_buf *b = ud;
	size_t n = size * nmemb;
	if (b->len + n > K8S_MAX_BODY || k8s_buf_append(b, p, n) < 0)
		return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
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
	x->errbuf[0] = '\0';
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
		curl_multi_poll(m, NULL, 0, (int)wait, NULL);
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
	if (asprintf(&accept, "Accept: %s", c->accept ? c->accept : "application/json") < 0)
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
	if (c->connect_to)
		curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
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
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &x->resp);
	}

	x->errbuf[0] = '\0';
	x->cc = drive(c, x, timeout);
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
	json_t *st = json_loadb(body ? body : "", len, 0, NULL);
	const char *reason = json_string_value(json_object_get(st, "reason"));
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
		json_t *st = json_loadb(body ? body : "", len, JSON_ALLOW_NUL, NULL);
		const char *reason = np_json_cstr(json_object_get(st, "reason"));
		bool retry = reason && !strcmp(reason, "Conflict");
		json_decref(st);
		return retry;
	}
	return false;
}

int k8s_request(struct k8s_client *c, const char *method, const char *path,
		const json_t *body, const char *content_type, json_t **out, np_error *err)
{
	cleanup_free char *payload = NULL;
	if (out)
		*out = NULL;
	if (body && !(payload = json_dumps(body, JSON_COMPACT)))
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "encoding %s %s", method, path);

	struct k8s_xfer x = { .method = method, .path = path, .body = payload,
			      .body_len = payload ? strlen(payload) : 0,
			      .content_type = payload ? content_type : NULL };
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
				/* NUL allowed: refused only where a value is used
				 * (np_json_cstr). */
				*out = json_loadb(x.resp.data ? x.resp.data : "", x.resp.len,
						  JSON_ALLOW_NUL, &jerr);
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
			json_t *st = json_loadb(x.resp.data ? x.resp.data : "", x.resp.len,
						JSON_ALLOW_NUL, NULL);
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
