/* One log line from one record: the text nicpick always printed, or one
 * JSON object per line for log aggregators (--log-format json).  Pure:
 * the caller gives the time and writes the line. */
#ifndef NP_LOG_H
#define NP_LOG_H

#include <stddef.h>
#include <stdint.h>

enum np_log_format { NP_LOG_TEXT, NP_LOG_JSON };

struct np_log_field {
	const char *key;
	const char *value;
};

struct np_log_record {
	int64_t time_ms;    /* wall clock, milliseconds since the epoch */
	int64_t elapsed_ms; /* since nicpick started; < 0: not shown in text */
	const char *level;  /* "info", "warning", "error" */
	const char *pod;    /* NULL or "": unknown */
	const char *phase;  /* "discover", "agree", "outputs", "envcheck", "exit" */
	const char *message;
	const struct np_log_field *fields;
	size_t n_fields;
};

/* "error" -> NP_LOG_TEXT etc.; -1 for anything else. */
int np_log_format_parse(const char *s);

/* The line, '\n'-terminated, malloc'd; NULL only when out of memory.
 * text: "nicpick: LEVEL: [S.mmms] MESSAGE" (no bracket when elapsed_ms < 0).
 * json: {"time": RFC 3339 UTC with milliseconds, "level", "pod" (null when
 * unknown), "phase", "message", "fields": {key: value}}, compact, on one
 * line; in a string that is not valid UTF-8, every non-ASCII byte becomes '?'. */
char *np_log_format_line(enum np_log_format f, const struct np_log_record *r);

#endif
