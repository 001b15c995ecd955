/* The result message nicpick-smoke prints, read by nicpick: whatever the
 * reader takes, the writer writes back and the reader takes again the same
 * (parse -> write -> parse -> write is a fixed point); a refusal is exit 6
 * with one line. */
#include "fuzz.h"

#include "smoke/smoke.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct smoke_result r1, r2;
	np_error err = { 0 };
	if (smoke_result_parse((const char *)data, size, &r1, &err) < 0) {
		FUZZ_CHECK(err.status == NP_ESMOKE && err.msg[0], "status %d", err.status);
		FUZZ_CHECK(!strchr(err.msg, '\n'), "two-line error: %s", err.msg);
		return 0;
	}
	FUZZ_CHECK(r1.n_sizes <= SMOKE_SIZES_MAX && r1.n_links <= SMOKE_RING_MAX &&
		   r1.n_labels <= SMOKE_LABELS_MAX, "%zu/%zu",
		   r1.n_sizes, r1.n_links);
	FUZZ_CHECK(r1.rank >= 0 && r1.rank < r1.world, "rank %d of %d", r1.rank, r1.world);
	char *j1 = NULL, *j2 = NULL;
	FUZZ_CHECK(smoke_result_to_json(&r1, &j1, &err) == 0, "%s", err.msg);
	FUZZ_CHECK(smoke_result_parse(j1, strlen(j1), &r2, &err) == 0, "%s: %s", err.msg, j1);
	FUZZ_CHECK(smoke_result_to_json(&r2, &j2, &err) == 0, "%s", err.msg);
	FUZZ_CHECK(strcmp(j1, j2) == 0, "%s != %s", j1, j2);
	free(j1);
	free(j2);
	return 0;
}
