/* The peer report reader: another pod wrote it into the API, so it is the
 * first thing an attacker in the namespace controls.  Whatever it reads it
 * writes back the same: parse -> write -> parse -> write is a fixed point. */
#include "fuzz.h"

#include "agree/agree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct agree_report r1, r2;
	np_error err = { 0 };
	if (agree_report_parse((const char *)data, size, &r1, &err) < 0) {
		FUZZ_CHECK(err.status == NP_EK8S && err.msg[0], "status %d", err.status);
		FUZZ_CHECK(!strchr(err.msg, '\n'), "a two-line error: %s", err.msg);
		return 0;
	}
	FUZZ_CHECK(r1.n <= AGREE_CAND_MAX, "%zu candidates", r1.n);
	char *j1 = NULL, *j2 = NULL;
	FUZZ_CHECK(agree_report_to_json(&r1, &j1, &err) >= 0, "%s", err.msg);
	FUZZ_CHECK(strlen(j1) <= AGREE_REPORT_MAX_BYTES, "%zu bytes", strlen(j1));
	FUZZ_CHECK(agree_report_parse(j1, strlen(j1), &r2, &err) == 0, "%s: %s", err.msg, j1);
	FUZZ_CHECK(agree_report_to_json(&r2, &j2, &err) >= 0, "%s", err.msg);
	FUZZ_CHECK(strcmp(j1, j2) == 0, "%s != %s", j1, j2);
	free(j1);
	free(j2);
	return 0;
}
