/* core/v1 Events on the pod, so `kubectl describe pod` shows the decision. */
#include "k8s/k8s_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/jsonread.h"

#define EVENT_MESSAGE_MAX 1024
#define REPORTING_INSTANCE_MAX 128

/* Cut s to at most max bytes without splitting a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

static json_t *meta_str(const json_t *pod, const char *key)
{
	const char *v = np_json_cstr(json_object_get(json_object_get(pod, "metadata"), key));
	return v ? json_string(v) : NULL;
}

json_t *k8s_event_build(const json_t *pod, const char *ns, const char *reason,
			const char *message, const char *type, const char *instance,
			const struct timespec *now)
{
	const char *pod_name =
		np_json_cstr(json_object_get(json_object_get(pod, "metadata"), "name"));
	if (!pod_name || !reason || !*reason)
		return NULL;
	struct tm tm;
	gmtime_r(&now->tv_sec, &tm);
	char secs[64], stamp[72], micro[96], name[300];
	strftime(secs, sizeof(secs), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(stamp, sizeof(stamp), "%sZ", secs);
	/* eventTime is a MicroTime: RFC 3339 with exactly six fraction digits. */
	snprintf(micro, sizeof(micro), "%s.%06dZ", secs, (int)(now->tv_nsec / 1000 % 1000000));
	/* client-go's naming: "<object>.<unique hex>", within 253 characters. */
	snprintf(name, sizeof(name), "%.*s.%llx", 230, pod_name,
		 (unsigned long long)now->tv_sec * 1000000000ull + (unsigned long long)now->tv_nsec);

	const char *node =
		np_json_cstr(json_object_get(json_object_get(pod, "spec"), "nodeName"));
	json_t *involved = json_pack("{s:s, s:s, s:s, s:s}", "apiVersion", "v1", "kind", "Pod",
				     "namespace", ns, "name", pod_name);
	json_t *source = json_pack("{s:s}", "component", "nicpick");
	if (!involved || !source) {
		json_decref(involved);
		json_decref(source);
		return NULL;
	}
	json_t *uid = meta_str(pod, "uid");
	if (uid)
		json_object_set_new(involved, "uid", uid);
	if (node)
		json_object_set_new(source, "host", json_string(node));

	const char *msg = message ? message : "";
	const char *inst = instance ? instance : pod_name;
	return json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s#, s:s, s:o, s:s, s:s, s:i,"
			 " s:s, s:s, s:s, s:s#}",
			 "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
			 "namespace", ns, "involvedObject", involved, "reason", reason,
			 "message", msg, (int)utf8_cut(msg, EVENT_MESSAGE_MAX), "type",
			 type ? type : "Normal", "source", source, "firstTimestamp", stamp,
			 "lastTimestamp", stamp, "count", 1, "eventTime", micro, "action",
			 reason, "reportingComponent", "nicpick", "reportingInstance", inst,
			 (int)utf8_cut(inst, REPORTING_INSTANCE_MAX));
}

int k8s_create_event(struct k8s_client *c, const char *ns, const json_t *pod,
		     const char *reason, const char *message, const char *type,
		     np_error *err)
{
	if (type && strcmp(type, "Normal") && strcmp(type, "Warning"))
		return np_error_set(err, NP_EINTERNAL, 0, "event type must be Normal or Warning, "
				    "not \"%s\"", type);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	json_t *ev = k8s_event_build(pod, ns, reason, message, type, c->reporting_instance,
				     &now);
	if (!ev)
		return np_error_set(err, NP_EINTERNAL, 0,
				    "building the event: pod without metadata.name, no reason, "
				    "or out of memory");
	cleanup_free char *path = k8s_object_path("/api/v1", ns, "events", NULL);
	int rc = path ? k8s_create(c, path, ev, NULL, err)
		      : np_error_set(err, NP_EINTERNAL, ENOMEM, "event path");
	json_decref(ev);
	if (rc < 0)
		return np_error_wrap(err, "creating event %s", reason);
	return 0;
}
