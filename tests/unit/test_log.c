/* The log line formatter: the text nicpick always printed, and one JSON
 * object per line that a log aggregator can parse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static void text_is_the_familiar_line(void **state)
{
	struct np_log_record r = { .time_ms = 1, .elapsed_ms = 12345, .level = "info", .pod = "train-0",
				   .phase = "agree", .message = "3/4 pods reported; missing: train-2" };
	char *line = np_log_format_line(NP_LOG_TEXT, &r);
	assert_string_equal(line, "nicpick: info: [12.345s] 3/4 pods reported; missing: train-2\n");
	free(line);
	r.elapsed_ms = -1;
	r.level = "error";
	r.message = "no usable network interface among 3 (see above)";
	line = np_log_format_line(NP_LOG_TEXT, &r);
	assert_string_equal(line, "nicpick: error: no usable network interface among 3 (see above)\n");
	free(line);
}

static void json_is_one_object_on_one_line(void **state)
{
	struct np_log_field f[] = { { "pod", "train-2" }, { "count", "3" } };
	/* 2026-12-01T03:27:15.042Z */
	struct np_log_record r = { .time_ms = 1796095635042LL, .elapsed_ms = 5, .level = "warning",
				   .pod = "train-0", .phase = "agree",
				   .message = "line one\nline \"two\"\twith a tab",
				   .fields = f, .n_fields = 2 };
	char *line = np_log_format_line(NP_LOG_JSON, &r);
	size_t n = strlen(line);
	assert_true(n > 2 && line[n - 1] == '\n');
	assert_null(memchr(line, '\n', n - 1)); /* one line, whatever the message holds */
	json_error_t je;
	json_t *o = json_loads(line, 0, &je);
	assert_non_null(o);
	assert_true(json_is_object(o));
	assert_string_equal(json_string_value(json_object_get(o, "time")), "2026-12-01T03:27:15.042Z");
	assert_string_equal(json_string_value(json_object_get(o, "level")), "warning");
	assert_string_equal(json_string_value(json_object_get(o, "pod")), "train-0");
	assert_string_equal(json_string_value(json_object_get(o, "phase")), "agree");
	assert_string_equal(json_string_value(json_object_get(o, "message")), r.message);
	json_t *fields = json_object_get(o, "fields");
	assert_int_equal(json_object_size(fields), 2);
	assert_string_equal(json_string_value(json_object_get(fields, "pod")), "train-2");
	assert_string_equal(json_string_value(json_object_get(fields, "count")), "3");
	/* Keys in a fixed order: time first, as aggregators show them. */
	assert_memory_equal(line, "{\"time\":", 8);
	json_decref(o);
	free(line);
}

static void json_unknown_pod_is_null_and_bad_utf8_is_replaced(void **state)
{
	struct np_log_record r = { .time_ms = 0, .elapsed_ms = -1, .level = "info", .pod = NULL,
				   .phase = "discover", .message = "name \xff\xfe is not UTF-8" };
	char *line = np_log_format_line(NP_LOG_JSON, &r);
	json_t *o = json_loads(line, 0, NULL);
	assert_non_null(o);
	assert_true(json_is_null(json_object_get(o, "pod")));
	assert_string_equal(json_string_value(json_object_get(o, "message")), "name ?? is not UTF-8");
	assert_string_equal(json_string_value(json_object_get(o, "time")), "1970-01-01T00:00:00.000Z");
	assert_int_equal(json_object_size(json_object_get(o, "fields")), 0);
	json_decref(o);
	free(line);
}

static void format_names(void **state)
{
	assert_int_equal(np_log_format_parse("text"), NP_LOG_TEXT);
	assert_int_equal(np_log_format_parse("json"), NP_LOG_JSON);
	assert_int_equal(np_log_format_parse("JSON"), -1);
	assert_int_equal(np_log_format_parse(""), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(text_is_the_familiar_line),
		cmocka_unit_test(json_is_one_object_on_one_line),
		cmocka_unit_test(json_unknown_pod_is_null_and_bad_utf8_is_replaced),
		cmocka_unit_test(format_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
