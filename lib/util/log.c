#include "util/log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int np_log_format_parse(const char *s)
{
	if (strcmp(s, "text") == 0)
		return NP_LOG_TEXT;
	if (strcmp(s, "json") == 0)
		return NP_LOG_JSON;
	return -1;
}

/* A JSON string even from bytes that are not UTF-8 (an interface name may
 * be anything): those bytes become '?'. */
static json_t *str(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	char *c = strdup(s);
	if (!c)
		return NULL;
	for (char *p = c; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	j = json_string(c);
	free(c);
	return j;
}

static void rfc3339(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03dZ", (int)(ms % 1000));
}

static char *json_line(const struct np_log_record *r)
{
	char when[40];
	rfc3339(r->time_ms, when, sizeof(when));
	json_t *fields = json_object();
	for (size_t i = 0; fields && i < r->n_fields; i++)
		json_object_set_new(fields, r->fields[i].key, str(r->fields[i].value ? r->fields[i].value : ""));
	json_t *o = json_object();
	json_object_set_new(o, "time", json_string(when));
	json_object_set_new(o, "level", str(r->level));
	json_object_set_new(o, "pod", r->pod && *r->pod ? str(r->pod) : json_null());
	json_object_set_new(o, "phase", str(r->phase ? r->phase : ""));
	json_object_set_new(o, "message", str(r->message ? r->message : ""));
	json_object_set_new(o, "fields", fields);
	char *body = o && fields ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (!body)
		return NULL;
	char *line = NULL;
	if (asprintf(&line, "%s\n", body) < 0)
		line = NULL;
	free(body);
	return line;
}

char *np_log_format_line(enum np_log_format f, const struct np_log_record *r)
{
	if (f == NP_LOG_JSON)
		return json_line(r);
	char *line = NULL;
	int n;
	if (r->elapsed_ms >= 0)
		n = asprintf(&line, "nicpick: %s: [%lld.%03llds] %s\n", r->level, (long long)(r->elapsed_ms / 1000),
			     (long long)(r->elapsed_ms % 1000), r->message ? r->message : "");
	else
		n = asprintf(&line, "nicpick: %s: %s\n", r->level, r->message ? r->message : "");
	return n < 0 ? NULL : line;
}
