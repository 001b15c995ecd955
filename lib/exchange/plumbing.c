/* The exchange's plumbing, shared by the gatherer (gather.c) and the
 * follower (follow.c): logging, this pod's annotations, the watch, the
 * deadline and label matching. */
#include "exchange/exchange.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "exchange/exchange_priv.h"
#include "util/clock.h"
#include "util/jsonread.h"

void ex_log(struct ex *x, enum exchange_log_level lvl, const char *fmt, ...)
{
	if (!x->o->log)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	x->o->log(x->o->log_ud, lvl, msg);
}

static const json_t *annotation(const json_t *pod, const char *key)
{
	return json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), key);
}

/* The API allows a NUL in any string: read as a C string such a value
 * would be a shorter text than the one written, so it is none (NULL). */
const char *ex_annotation(const json_t *pod, const char *key)
{
	return np_json_cstr(annotation(pod, key));
}

bool ex_annotation_nul(const json_t *pod, const char *key)
{
	const json_t *v = annotation(pod, key);
	return json_is_string(v) && !np_json_cstr(v);
}

const char *ex_meta(const json_t *obj, const char *key)
{
	return np_json_cstr(json_object_get(json_object_get(obj, "metadata"), key));
}

const char *ex_label(const json_t *pod, const char *key)
{
	return np_json_cstr(
		json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"), key));
}

int ex_patch_annotations(struct ex *x, const char *pod, json_t *annotations, np_error *err)
{
	json_t *patch = json_pack("{s:{s:o}}", "metadata", "annotations", annotations);
	int r = k8s_patch_pod(x->k, x->ns, pod, patch, NULL, err);
	json_decref(patch);
	if (r < 0)
		return np_error_wrap(err, "cannot annotate pod %s", pod);
	return 0;
}

int ex_annotate_self(struct ex *x, const char *key, const char *json, np_error *err)
{
	json_t *a = json_object();
	if (!a || json_object_set_new(a, key, json_string(json)) < 0) {
		json_decref(a);
		return np_error_set(err, NP_EINTERNAL, 0, "out of memory");
	}
	return ex_patch_annotations(x, x->name, a, err);
}

void ex_fail(struct ex *x, const np_error *e)
{
	x->err = *e;
	x->failed = true;
}

/* The API client's timers may fire a little before the clock reaches the
 * deadline: what ends that close to it ended because of it. */
#define EX_DEADLINE_SLACK_MS 250

bool ex_past_deadline(const struct ex *x)
{
	return np_now_ms() + EX_DEADLINE_SLACK_MS >= x->o->deadline_ms;
}

struct tick_ctx {
	struct ex *x;
	void (*tick)(struct ex *);
};

static void on_tick(void *ud)
{
	struct tick_ctx *t = ud;
	t->tick(t->x);
}

/* One watch until the callback asks to act, an error, or the deadline; the
 * client's progress ticks say every log_interval_ms what it waits for, so
 * the connection stays open however long the wait (a follower's traffic
 * must not grow with the time the job takes to gather). */
int ex_watch(struct ex *x, const char *label_sel, const char *field_sel, k8s_watch_cb cb,
	     void (*tick)(struct ex *), np_error *err)
{
	if (x->failed)
		return -1;
	if (np_now_ms() >= x->o->deadline_ms)
		return np_error_set(err, NP_EK8S, 0, "deadline reached");
	struct tick_ctx t = { .x = x, .tick = tick };
	k8s_client_set_deadline(x->w, x->o->deadline_ms);
	k8s_client_set_tick(x->w, x->o->log_interval_ms, tick ? on_tick : NULL, &t);
	k8s_client_set_idle(x->w, ex_probing_idle, x);
	x->stop = false;
	struct k8s_watch_opts wo = { .page_limit = x->list_page, .metadata_only = x->watch_meta,
				     .side = x->watch_side };
	int r = k8s_watch_pods_opt(x->w, x->ns, label_sel, field_sel, x->rv[0] ? x->rv : NULL, &wo, cb, x,
				   err);
	k8s_client_set_tick(x->w, 0, NULL, NULL);
	k8s_client_set_idle(x->w, NULL, NULL);
	if (x->failed) {
		*err = x->err;
		return -1;
	}
	if (x->stop)
		return 0;
	return r < 0 ? -1 : np_error_set(err, NP_EK8S, 0, "the watch ended early");
}

/* Keep the newest resourceVersion seen, so that a resumed watch loses nothing. */
void ex_note_rv(struct ex *x, enum k8s_watch_type type, json_t *obj)
{
	const char *rv = ex_meta(obj, "resourceVersion");
	if (rv && strlen(rv) < sizeof(x->rv))
		snprintf(x->rv, sizeof(x->rv), "%s", rv);
	(void)type;
}

/* Walk the key=value terms of a selector against a pod's labels: each key
 * must be a label, and with `values` carry the term's value. */
static bool labels_match(const json_t *pod, const char *selector, bool values)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", selector);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq && values)
			return false;
		if (eq)
			*eq = '\0';
		const char *v = ex_label(pod, t);
		if (!v || (values && strcmp(v, eq + 1) != 0))
			return false;
	}
	return true;
}

bool ex_pod_matches(const json_t *pod, const char *selector)
{
	return labels_match(pod, selector, true);
}

bool ex_pod_has_labels(const json_t *pod, const char *selector)
{
	return labels_match(pod, selector, false);
}

void ex_result_rails(struct exchange_result *res, const struct exchange_part *parts, size_t n)
{
	res->n_rails = 0;
	for (size_t i = 0; i < n && i < EXCHANGE_RAILS_MAX; i++) {
		const struct exchange_part *p = &parts[i];
		struct exchange_rail *r = &res->rails[res->n_rails++];
		snprintf(r->network, sizeof(r->network), "%s", p->net);
		snprintf(r->ifname, sizeof(r->ifname), "%s", p->ifname);
		snprintf(r->addr, sizeof(r->addr), "%s", p->addr);
		snprintf(r->next_pod, sizeof(r->next_pod), "%s", p->next_pod);
		snprintf(r->next_addr, sizeof(r->next_addr), "%s", p->next_addr);
		snprintf(r->root_addr, sizeof(r->root_addr), "%s", p->root);
	}
	if (!n)
		return;
	const struct exchange_part *p = &parts[0];
	snprintf(res->network, sizeof(res->network), "%s", p->net);
	snprintf(res->ifname, sizeof(res->ifname), "%s", p->ifname);
	snprintf(res->addr, sizeof(res->addr), "%s", p->addr);
	snprintf(res->next_pod, sizeof(res->next_pod), "%s", p->next_pod);
	snprintf(res->next_addr, sizeof(res->next_addr), "%s", p->next_addr);
	res->family = strchr(res->addr, ':') ? AF_INET6 : AF_INET;
	res->rank = p->rank;
	res->world = p->world;
	snprintf(res->root_addr, sizeof(res->root_addr), "%s", p->root);
	res->min_mbps = p->min_mbps;
}
