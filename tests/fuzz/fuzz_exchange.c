/* The exchange's messages (lib/exchange/message.h): assignment, probe,
 * round, progress and outcome, all written by other pods onto Pod objects.
 * The first byte picks the reader ('o': the outcome, else its value mod 4); whatever it accepts it writes back the same
 * (parse -> write -> parse -> write is a fixed point), and a refusal is a
 * one-line NP_EK8S error. */
#include "fuzz.h"

#include "exchange/message.h"

#define FIXED_POINT(type, parse, write)                                                    \
	do {                                                                               \
		static struct type a, b;                                                   \
		char *j1 = NULL, *j2 = NULL;                                               \
		if (parse(s, n, &a, &err) < 0)                                             \
			break;                                                             \
		FUZZ_CHECK(write(&a, &j1, &err) == 0, "%s", err.msg);                      \
		FUZZ_CHECK(parse(j1, strlen(j1), &b, &err) == 0, "%s: %s", err.msg, j1);   \
		FUZZ_CHECK(write(&b, &j2, &err) == 0, "%s", err.msg);                      \
		FUZZ_CHECK(strcmp(j1, j2) == 0, "%s != %s", j1, j2);                       \
		free(j1);                                                                  \
		free(j2);                                                                  \
		return 0;                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *s = (const char *)data + 1;
	size_t n = size - 1;
	np_error err = { 0 };
	if (data[0] == 'o')
		FIXED_POINT(exchange_outcome, exchange_outcome_parse, exchange_outcome_to_json);
	else switch (data[0] % 4) {
	case 0:
		FIXED_POINT(exchange_assignment, exchange_assignment_parse, exchange_assignment_to_json);
		break;
	case 1:
		FIXED_POINT(exchange_probe, exchange_probe_parse, exchange_probe_to_json);
		break;
	case 2:
		FIXED_POINT(exchange_round, exchange_round_parse, exchange_round_to_json);
		break;
	default:
		FIXED_POINT(exchange_progress, exchange_progress_parse, exchange_progress_to_json);
		break;
	}
	FUZZ_CHECK(err.status == NP_EK8S && err.msg[0] && !strchr(err.msg, '\n'), "status %d '%s'",
		   err.status, err.msg);
	return 0;
}
