/* Client-side rate limits: a token bucket for requests and one for new
 * watches, so that no state of nicpick, however stuck, loads the API
 * server more than a few requests a second.
 *
 * The request bucket is client-go's default for every client it makes:
 * QPS 5, burst 10 (kubernetes/client-go rest/config.go: DefaultQPS = 5.0,
 * DefaultBurst = 10; the bucket is util/flowcontrol's
 * NewTokenBucketRateLimiter, which waits for a token rather than fail).
 * A request that finds the bucket empty reserves the next token and
 * sleeps until it is due, as golang.org/x/time/rate's Wait does. */
#include "k8s/k8s_priv.h"

#include <errno.h>
#include <stdlib.h>

void k8s_bucket_init(struct k8s_bucket *b, double qps, int burst)
{
	b->qps = qps;
	b->burst = burst > 0 ? burst : 1;
	b->tokens = b->burst;
	b->last_ms = 0;
}

long k8s_bucket_take(struct k8s_bucket *b, int64_t now_ms)
{
	if (b->qps <= 0)
		return 0; /* unlimited */
	if (b->last_ms == 0)
		b->last_ms = now_ms;
	if (now_ms > b->last_ms) {
		b->tokens += (double)(now_ms - b->last_ms) * b->qps / 1000.0;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
		b->last_ms = now_ms;
	}
	b->tokens -= 1.0;
	if (b->tokens >= 0)
		return 0;
	/* reserved: due when the deficit has refilled */
	double ms = -b->tokens * 1000.0 / b->qps;
	return (long)ms + (ms > (double)(long)ms);
}

int k8s_limiter_new(struct k8s_limiter **out, double qps, int burst, np_error *err)
{
	struct k8s_limiter *l = calloc(1, sizeof(*l));
	if (!l)
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "rate limiter");
	k8s_bucket_init(&l->b, qps, burst);
	pthread_mutex_init(&l->mu, NULL);
	*out = l;
	return 0;
}

void k8s_limiter_free(struct k8s_limiter *l)
{
	if (!l)
		return;
	pthread_mutex_destroy(&l->mu);
	free(l);
}

void k8s_limiter_add_burst(struct k8s_limiter *l, int extra)
{
	pthread_mutex_lock(&l->mu);
	l->b.burst += extra;
	l->b.tokens += extra;
	pthread_mutex_unlock(&l->mu);
}

void k8s_client_set_limiter(struct k8s_client *c, struct k8s_limiter *l)
{
	c->lim = l ? l : &c->own_lim;
}

int k8s_limit_wait(struct k8s_client *c, struct k8s_limiter *l, const char *what, np_error *err)
{
	pthread_mutex_lock(&l->mu);
	long ms = k8s_bucket_take(&l->b, k8s_mono_ms());
	pthread_mutex_unlock(&l->mu);
	if (ms <= 0)
		return 0;
	c->stats.throttled_ms += (uint64_t)ms;
	return k8s_wait(c, ms, what, err);
}
