/* The client: one curl easy handle on a curl multi handle (its own, or
 * its twins': one pool of connections), the TLS server name, the share
 * that lets clients of one process reuse TLS sessions, and the settings
 * of its calls (deadline, timeout, cancel flag, tick).  http.c drives its
 * transfers. */
#include "k8s/k8s_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util/cleanup.h"
#include "util/clock.h"


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

void k8s_client_set_idle(struct k8s_client *c, void (*idle)(void *ud, struct np_wait *w), void *ud)
{
	c->idle = idle;
	c->idle_ud = ud;
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
