/* Watching pods: a newline-delimited JSON stream, resumed from the latest
 * resourceVersion, re-listed after 410.  curl's write callback only
 * buffers the stream (k8s_wbuf); the events are parsed and delivered
 * between curl_multi_perform calls (http.c, drive), so that a callback
 * may make requests on the watch's twin over the same connection. */
#include "k8s/k8s_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/jsonread.h"

static const char *const type_names[] = {
	[K8S_WATCH_ADDED] = "ADDED",	   [K8S_WATCH_MODIFIED] = "MODIFIED",
	[K8S_WATCH_DELETED] = "DELETED",   [K8S_WATCH_BOOKMARK] = "BOOKMARK",
	[K8S_WATCH_RELIST] = "RELIST",	   [K8S_WATCH_RELIST_BEGIN] = "RELIST_BEGIN",
	[K8S_WATCH_RELIST_END] = "RELIST_END",
};

const char *k8s_watch_type_name(enum k8s_watch_type type)
{
	if ((unsigned)type < sizeof(type_names) / sizeof(type_names[0]))
		return type_names[type];
	return "?";
}

int k8s_linebuf_feed(struct k8s_linebuf *lb, const char *data, size_t n, k8s_line_fn fn,
		     void *ud)
{
	size_t max = lb->max_line ? lb->max_line : K8S_MAX_LINE;
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t part = nl ? (size_t)(nl - data) : n;
		if (lb->pending.len + part > max)
			return K8S_LINEBUF_OVERFLOW;
		if (!nl) {
			if (k8s_buf_append(&lb->pending, data, n) < 0)
				return K8S_LINEBUF_NOMEM;
			return 0;
		}
		const char *line = data;
		size_t len = part;
		/* Only a line split across chunks is copied. */
		if (lb->pending.len) {
			if (k8s_buf_append(&lb->pending, data, part) < 0)
				return K8S_LINEBUF_NOMEM;
			line = lb->pending.data;
			len = lb->pending.len;
		}
		if (len && line[len - 1] == '\r')
			len--;
		int rc = len ? fn(line, len, ud) : 0;
		lb->pending.len = 0;
		data = nl + 1;
		n -= part + 1;
		if (rc)
			return rc;
	}
	return 0;
}

void k8s_linebuf_free(struct k8s_linebuf *lb)
{
	k8s_buf_free(&lb->pending);
}

int k8s_wbuf_take(struct k8s_wbuf *b, const char *p, size_t n, bool can_pause)
{
	size_t max = b->max ? b->max : K8S_WBUF_MAX;
	size_t hard = b->hard_max ? b->hard_max : K8S_WBUF_HARD_MAX;
	/* Some bytes always go in: a chunk larger than max is taken whole
	 * into an empty buffer, so that a paused transfer always moves on. */
	if (b->raw.len > 0 && b->raw.len + n > max && can_pause) {
		b->paused = true;
		return K8S_WBUF_PAUSE;
	}
	if (b->raw.len + n > hard || k8s_buf_append(&b->raw, p, n) < 0)
		return K8S_WBUF_FULL;
	return K8S_WBUF_TAKEN;
}

int k8s_wbuf_drain(struct k8s_wbuf *b, int (*fn)(const char *p, size_t n, void *ud),
		   void (*resume)(void *ud), void *ud)
{
	for (;;) {
		while (b->raw.len > 0) {
			/* fn may drive the multi, which appends to raw: it reads
			 * a buffer of its own meanwhile (the two are swapped, so
			 * that neither is allocated again). */
			struct k8s_buf cur = b->raw;
			b->raw = b->spare;
			b->raw.len = 0;
			if (b->raw.data)
				b->raw.data[0] = '\0';
			int rc = fn(cur.data, cur.len, ud);
			cur.len = 0;
			b->spare = cur;
			if (rc)
				return rc;
		}
		if (!b->paused)
			return 0;
		b->paused = false;
		if (resume)
			resume(ud); /* curl may hand over what it held at once */
		if (b->raw.len == 0 && !b->paused)
			return 0;
	}
}

void k8s_wbuf_free(struct k8s_wbuf *b)
{
	k8s_buf_free(&b->raw);
	k8s_buf_free(&b->spare);
	b->paused = false;
}

enum w_outcome { W_NONE, W_STOP, W_CBERR, W_RELIST, W_RETRY, W_FATAL };

struct watch {
	struct k8s_client *c;
	k8s_watch_cb cb;
	int (*side)(void *ud, struct np_wait *w); /* k8s_watch_opts.side */
	void *ud;
	np_error *err;
	const char *path; /* the current watch request */
	/* the Accept header's value of its lists and of the watch requests
	 * (NULL: whole objects, K8S_ACCEPT_JSON) */
	const char *list_accept, *watch_accept;
	char *rv;
	struct k8s_linebuf lb;
	struct k8s_wbuf wb;     /* received, not yet delivered */
	int can_pause;          /* -1: not known yet on this connection */
	struct k8s_buf errbody; /* body of a non-200 answer */
	struct k8s_xfer *x;     /* the current connection's transfer */
	enum w_outcome outcome;
	int cb_rc;
	unsigned events; /* in the current connection */
	char last[NP_ERR_MSG_MAX / 2];
};

static int set_rv(struct watch *w, const json_t *obj)
{
	const char *rv = np_json_cstr(
		json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
	if (!rv || !*rv)
		return 0;
	char *d = strdup(rv);
	if (!d)
		return -1;
	free(w->rv);
	w->rv = d;
	return 0;
}

/* What the consumer's callback or side work returned. */
static void settle(struct watch *w, int r)
{
	if (r > 0) {
		w->outcome = W_STOP;
	} else if (r < 0) {
		w->outcome = W_CBERR;
		w->cb_rc = r;
	}
}

static void deliver(struct watch *w, enum k8s_watch_type t, json_t *obj)
{
	settle(w, w->cb(t, obj, w->ud));
}

static void error_event(struct watch *w, json_t *status)
{
	json_int_t code = json_integer_value(json_object_get(status, "code"));
	if (code == 410) {
		/* Expired/Gone: our resourceVersion is too old; list again. */
		w->outcome = W_RELIST;
		return;
	}
	cleanup_free char *body = json_dumps(status, JSON_COMPACT);
	np_error tmp = { 0 };
	k8s_status_error(&tmp, "GET", w->path, (long)code, body, body ? strlen(body) : 0,
			 w->c->cfg.token_file);
	if (code == 429 || code >= 500 || code == 0) {
		snprintf(w->last, sizeof(w->last), "ERROR event: %.400s", tmp.msg);
		w->outcome = W_RETRY;
		return;
	}
	if (w->err)
		*w->err = tmp;
	w->outcome = W_FATAL;
}

int k8s_watch_event_decode(const char *line, size_t len, struct k8s_watch_event *out)
{
	json_error_t je;
	memset(out, 0, sizeof(*out));
	out->ev = k8s_json_parse(line, len, K8S_PARSE_MAX, &je, &out->oversize);
	if (out->oversize) {
		char a[32], b[32];
		snprintf(out->why, sizeof(out->why),
			 "an event of %s would take more than %s of memory to parse",
			 k8s_size_text(len, a, sizeof(a)),
			 k8s_size_text(k8s_parse_budget(len, K8S_PARSE_MAX), b, sizeof(b)));
		return K8S_EVENT_MALFORMED;
	}
	const char *type = np_json_cstr(json_object_get(out->ev, "type"));
	out->object = json_object_get(out->ev, "object");
	if (!out->ev || !type || !json_is_object(out->object)) {
		snprintf(out->why, sizeof(out->why), "%s", out->ev ? "no type or object" : je.text);
		out->object = NULL;
		return K8S_EVENT_MALFORMED;
	}
	if (!strcmp(type, "ERROR"))
		return K8S_EVENT_ERROR;
	/* An unknown type is skipped: newer servers may add some. */
	for (int i = K8S_WATCH_ADDED; i <= K8S_WATCH_BOOKMARK; i++) {
		if (!strcmp(type, type_names[i])) {
			out->type = i;
			return K8S_EVENT_TYPED;
		}
	}
	return K8S_EVENT_UNKNOWN;
}

static int watch_line(const char *line, size_t len, void *ud)
{
	struct watch *w = ud;
	struct k8s_watch_event e;
	switch (k8s_watch_event_decode(line, len, &e)) {
	case K8S_EVENT_MALFORMED:
		if (e.oversize)
			np_error_set(w->err, NP_EK8S, 0,
				     "watch %s: %s, which no object of the API does (that many values, "
				     "that small): refused",
				     w->path, e.why);
		else
			np_error_set(w->err, NP_EK8S, 0, "watch %s: malformed event: %s", w->path,
				     e.why);
		w->outcome = W_FATAL;
		break;
	case K8S_EVENT_ERROR:
		error_event(w, e.object);
		break;
	case K8S_EVENT_TYPED:
		w->events++;
		if (set_rv(w, e.object) < 0) {
			np_error_set(w->err, NP_EINTERNAL, ENOMEM, "watch");
			w->outcome = W_FATAL;
		} else {
			deliver(w, e.type, e.object);
		}
		break;
	default:
		break;
	}
	json_decref(e.ev);
	return w->outcome != W_NONE;
}

/* Whether this transfer may be paused without holding up its twin's on
 * the same connection: always over HTTP/1.1 (a connection of its own). */
static bool may_pause(struct watch *w)
{
	if (w->can_pause < 0) {
		long v = 0;
		curl_easy_getinfo(w->c->curl, CURLINFO_HTTP_VERSION, &v);
		w->can_pause = v != CURL_HTTP_VERSION_2_0 || k8s_curl_h2_pause_ok();
	}
	return w->can_pause;
}

/* curl's write callback: bytes are only kept (k8s_wbuf); watch_pump
 * delivers them. */
static size_t watch_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct watch *w = ud;
	size_t n = size * nmemb;
	long http = 0;
	curl_easy_getinfo(w->c->curl, CURLINFO_RESPONSE_CODE, &http);
	if (http != 200)
		return k8s_status_body_append(&w->errbody, p, n, &w->x->status_cut);
	if (w->outcome != W_NONE)
		return 0; /* ends the transfer: what is left is not needed */
	switch (k8s_wbuf_take(&w->wb, p, n, may_pause(w))) {
	case K8S_WBUF_TAKEN:
		return n;
	case K8S_WBUF_PAUSE:
		w->c->watch_pauses++;
		return CURL_WRITEFUNC_PAUSE; /* curl keeps the bytes, hands them on when resumed */
	default:
		/* Nobody read the stream for that long (a callback busy with
		 * something else): this connection goes, the watch resumes
		 * from the last event delivered and loses nothing. */
		snprintf(w->last, sizeof(w->last), "watch stream: more than %u MiB of events unread",
			 K8S_WBUF_HARD_MAX >> 20);
		w->outcome = W_RETRY;
		return 0;
	}
}

static int watch_feed(const char *p, size_t n, void *ud)
{
	struct watch *w = ud;
	int rc = k8s_linebuf_feed(&w->lb, p, n, watch_line, w);
	if (rc == K8S_LINEBUF_OVERFLOW || rc == K8S_LINEBUF_NOMEM) {
		char a[32];
		if (rc == K8S_LINEBUF_NOMEM)
			np_error_set(w->err, NP_EK8S, 0, "watch %s: out of memory", w->path);
		else
			np_error_set(w->err, NP_EK8S, 0,
				     "watch %s: an event larger than %s, the most one object can be: "
				     "refused without reading the rest",
				     w->path, k8s_size_text(w->lb.max_line, a, sizeof(a)));
		w->outcome = W_FATAL;
	}
	return w->outcome != W_NONE;
}

static void watch_resume(void *ud)
{
	struct watch *w = ud;
	curl_easy_pause(w->c->curl, CURLPAUSE_CONT);
}

/* Between curl_multi_perform calls: deliver every complete event received
 * so far, then let the consumer's side work go on; non-zero ends the
 * transfer (the callback or the side work stopped, or an error). */
static int watch_pump(void *ud)
{
	struct watch *w = ud;
	while (w->outcome == W_NONE) {
		k8s_wbuf_drain(&w->wb, watch_feed, watch_resume, w);
		if (w->outcome != W_NONE || !w->side)
			break;
		settle(w, w->side(w->ud, &w->x->pump_wait));
		/* Its requests on the twin drove the multi: what came for the
		 * watch meanwhile is delivered before anything waits. */
		if (!w->wb.raw.len && !w->wb.paused)
			break;
	}
	return w->outcome != W_NONE;
}

/* Wait ms before the next connection, the side work going on meanwhile:
 * 1 when it stopped the watch (w->outcome says how). */
static int watch_wait(struct watch *w, long ms, const char *what)
{
	if (!w->side)
		return k8s_wait(w->c, ms, what, w->err);
	for (int64_t end = k8s_mono_ms() + (ms > 0 ? ms : 0);;) {
		struct np_wait sw;
		np_wait_none(&sw);
		int r = w->side(w->ud, &sw);
		if (r != 0) {
			w->outcome = W_NONE; /* how the last connection ended is done with */
			settle(w, r);
			return 1;
		}
		int64_t left = end - k8s_mono_ms();
		r = k8s_wait_also(w->c, left > 0 ? (long)left : 0, what, &sw, w->err);
		if (r <= 0)
			return r;
	}
}

static int relist(struct watch *w, const char *ns, const char *lsel, const char *fsel)
{
	json_t *list = NULL;
	if (k8s_list_pods_as(w->c, ns, lsel, fsel, w->list_accept, &list, w->err) < 0)
		return np_error_wrap(w->err, "re-listing pods for the watch");
	int rc = set_rv(w, list);
	if (rc < 0)
		np_error_set(w->err, NP_EINTERNAL, ENOMEM, "watch");
	else
		deliver(w, K8S_WATCH_RELIST, list);
	json_decref(list);
	return rc;
}

/* A paged re-list: each page's items go to the consumer one by one. */
static int relist_page(json_t *list, void *ud)
{
	struct watch *w = ud;
	json_t *items = json_object_get(list, "items"), *it;
	size_t i;
	json_array_foreach(items, i, it) {
		if (!json_is_object(it))
			continue;
		deliver(w, K8S_WATCH_ADDED, it);
		if (w->outcome != W_NONE)
			return 1;
	}
	return 0;
}

static void relist_restart(void *ud)
{
	struct watch *w = ud;
	json_t *empty = json_object();
	deliver(w, K8S_WATCH_RELIST_BEGIN, empty);
	json_decref(empty);
}

static int relist_paged(struct watch *w, const char *ns, const char *lsel, const char *fsel,
			size_t limit)
{
	char *rv = NULL;
	relist_restart(w);
	if (w->outcome != W_NONE)
		return 0;
	int rc = k8s_list_pods_paged_as(w->c, ns, lsel, fsel, w->list_accept, limit, relist_page,
					relist_restart, w, &rv, w->err);
	if (rc < 0) {
		free(rv);
		return np_error_wrap(w->err, "re-listing pods for the watch");
	}
	if (w->outcome != W_NONE) {
		free(rv);
		return 0;
	}
	json_t *md = json_pack("{s:{s:s}}", "metadata", "resourceVersion", rv ? rv : "");
	free(rv);
	if (!md || set_rv(w, md) < 0) {
		json_decref(md);
		return np_error_set(w->err, NP_EINTERNAL, ENOMEM, "watch");
	}
	deliver(w, K8S_WATCH_RELIST_END, md);
	json_decref(md);
	return 0;
}

static char *watch_path(struct watch *w, const char *ns, const char *lsel, const char *fsel,
			long tsec)
{
	char ts[32];
	snprintf(ts, sizeof(ts), "%ld", tsec);
	char *path = k8s_object_path("/api/v1", ns, "pods", NULL);
	if (!path || k8s_query_add(&path, "watch", "1") < 0 ||
	    k8s_query_add(&path, "allowWatchBookmarks", "true") < 0 ||
	    k8s_query_add(&path, "resourceVersion", w->rv) < 0 ||
	    k8s_query_add(&path, "timeoutSeconds", ts) < 0 ||
	    (lsel && *lsel && k8s_query_add(&path, "labelSelector", lsel) < 0) ||
	    (fsel && *fsel && k8s_query_add(&path, "fieldSelector", fsel) < 0)) {
		free(path);
		return NULL;
	}
	return path;
}

/* What to do after one watch connection ended: <0 fail, 0 done (stopped),
 * 1 reconnect now, 2 reconnect after *delay ms, 3 re-list. */
static int after_connection(struct watch *w, struct k8s_xfer *x, int64_t elapsed_ms,
			    bool *reauthed, long *delay)
{
	struct k8s_client *c = w->c;
	switch (w->outcome) {
	case W_STOP:
		return 0;
	case W_CBERR:
		if (w->err && w->err->status == NP_OK)
			np_error_set(w->err, NP_EK8S, 0, "watch callback failed (%d)", w->cb_rc);
		return -1;
	case W_FATAL:
		return -1;
	case W_RELIST:
		return 3;
	case W_RETRY:
		return 2;
	case W_NONE:
		break;
	}
	if (x->deadline_hit)
		return np_error_set(w->err, NP_EK8S, 0, "deadline exceeded while watching %s",
				    w->path);
	if (x->http == 200) {
		/* The server ends every watch after timeoutSeconds: go on. */
		if (x->cc == CURLE_OK && (w->events || elapsed_ms >= 1000))
			return 1;
		snprintf(w->last, sizeof(w->last), "watch stream ended: %s",
			 x->cc == CURLE_OK ? "closed at once" : x->errbuf);
		return 2;
	}
	if (x->cc != CURLE_OK) {
		if (!k8s_curl_retryable(x->cc) || x->tls_refused)
			return np_error_set(w->err, NP_EK8S, 0, "watch %s%s: %s", c->cfg.server,
					    w->path, x->errbuf);
		snprintf(w->last, sizeof(w->last), "%s", x->errbuf);
		return 2;
	}
	if (x->http == 410)
		return 3;
	if (x->http == 401 && !*reauthed && (c->cfg.token_file || c->cfg.exec)) {
		*reauthed = true;
		return k8s_token_refresh(c, true, w->err) < 0 ? -1 : 1;
	}
	if (x->http == 429 || (x->http >= 500 && x->http != 501)) {
		np_error tmp = { 0 };
		k8s_status_error(&tmp, "GET", w->path, x->http, w->errbody.data, w->errbody.len,
				 c->cfg.token_file);
		snprintf(w->last, sizeof(w->last), "%.400s", tmp.msg);
		json_t *st = k8s_json_parse(w->errbody.data, w->errbody.len, K8S_PARSE_MAX, NULL, NULL);
		*delay = k8s_retry_after_ms(x->retry_after, st);
		json_decref(st);
		return 2;
	}
	return k8s_status_error(w->err, "GET", w->path, x->http, w->errbody.data,
				w->errbody.len, c->cfg.token_file);
}

int k8s_watch_pods(struct k8s_client *c, const char *ns, const char *label_selector,
		   const char *field_selector, const char *resource_version, k8s_watch_cb cb,
		   void *ud, np_error *err)
{
	return k8s_watch_pods_opt(c, ns, label_selector, field_selector, resource_version, NULL, cb,
				  ud, err);
}

int k8s_watch_pods_opt(struct k8s_client *c, const char *ns, const char *label_selector,
		       const char *field_selector, const char *resource_version,
		       const struct k8s_watch_opts *opts, k8s_watch_cb cb, void *ud, np_error *err)
{
	size_t page_limit = opts ? opts->page_limit : 0;
	bool meta = opts && opts->metadata_only;
	struct watch w = { .c = c, .cb = cb, .side = opts ? opts->side : NULL, .ud = ud, .err = err,
			   .list_accept = meta ? K8S_ACCEPT_META_LIST : NULL,
			   .watch_accept = meta ? K8S_ACCEPT_META : NULL };
	w.lb.max_line = K8S_MAX_LINE;
	w.wb.max = c->watch_buf_max;
	bool need_list = !resource_version || !*resource_version;
	if (!need_list && !(w.rv = strdup(resource_version)))
		return np_error_set(err, NP_EINTERNAL, ENOMEM, "watch");

	struct k8s_xfer x = { .method = "GET", .accept = w.watch_accept, .write_fn = watch_write,
			      .write_ud = &w };
	w.x = &x;
	unsigned failures = 0;
	bool reauthed = false;
	int rc = -1;
	for (;;) {
		if (need_list) {
			w.outcome = W_NONE;
			if ((page_limit ? relist_paged(&w, ns, label_selector, field_selector, page_limit)
					: relist(&w, ns, label_selector, field_selector)) < 0)
				break;
			if (w.outcome != W_NONE) {
				rc = after_connection(&w, &x, 0, &reauthed, NULL);
				break;
			}
			need_list = false;
		}
		/* However the last connection ended, new ones are rationed. */
		long due = k8s_bucket_take(&c->watch_opens, k8s_mono_ms());
		if (due > 0) {
			c->stats.throttled_ms += (uint64_t)due;
			char what[NP_ERR_MSG_MAX];
			snprintf(what, sizeof(what), "waiting %ld ms to open the next watch of pods in %s "
				 "(at most one every %.0f s)%s%s", due, ns, 1.0 / K8S_WATCH_OPEN_QPS,
				 w.last[0] ? "; last error: " : "", w.last);
			int r = watch_wait(&w, due, what);
			if (r != 0) {
				rc = r > 0 ? after_connection(&w, &x, 0, &reauthed, NULL) : -1;
				break;
			}
		}
		int64_t remaining = k8s_remaining_ms(c);
		if (remaining <= 0) {
			np_error_set(err, NP_EK8S, 0, "deadline exceeded while watching pods in %s",
				     ns);
			break;
		}
		long tsec = remaining / 1000 < K8S_WATCH_CAP_S ? (long)(remaining / 1000)
							       : K8S_WATCH_CAP_S;
		if (tsec < 1)
			tsec = 1;
		cleanup_free char *path = watch_path(&w, ns, label_selector, field_selector, tsec);
		if (!path) {
			np_error_set(err, NP_EINTERNAL, ENOMEM, "watch path");
			break;
		}
		w.path = path;
		w.outcome = W_NONE;
		w.events = 0;
		w.lb.pending.len = 0; /* a line cut by a dropped connection is gone */
		w.wb.raw.len = 0;
		w.wb.paused = false;
		w.can_pause = -1;
		k8s_buf_free(&w.errbody);
		k8s_xfer_reset(&x);
		x.path = path;
		x.cap_ms = tsec * 1000 + 5000;
		x.pump = watch_pump;
		x.pump_ud = &w;

		int64_t start = k8s_mono_ms();
		c->stats.watches++;
		if (k8s_perform(c, &x, err) < 0)
			break;
		long delay = -1;
		int next = after_connection(&w, &x, k8s_mono_ms() - start, &reauthed, &delay);
		if (next <= 0) {
			rc = next;
			break;
		}
		if (w.events) {
			failures = 0;
			reauthed = false;
		}
		if (next == 3) {
			need_list = true;
			continue;
		}
		if (next == 1)
			continue;
		if (delay < 0)
			delay = k8s_backoff_jitter_ms(failures, K8S_WATCH_BACKOFF_BASE_MS,
						      K8S_WATCH_BACKOFF_CAP_MS, k8s_rand(c));
		failures++;
		c->stats.retries++;
		char what[NP_ERR_MSG_MAX];
		snprintf(what, sizeof(what), "waiting %ld ms to resume the watch of pods in %s "
			 "(last error: %s)", delay, ns, w.last);
		int r = watch_wait(&w, delay, what);
		if (r != 0) {
			rc = r > 0 ? after_connection(&w, &x, 0, &reauthed, NULL) : -1;
			break;
		}
	}
	w.path = NULL;
	k8s_buf_free(&x.resp);
	k8s_buf_free(&w.errbody);
	k8s_linebuf_free(&w.lb);
	k8s_wbuf_free(&w.wb);
	free(w.rv);
	return rc;
}
