/* The decision reader: the gatherer's annotation, read by every follower.
 * A decision it accepts is written back the same (a fixed point), and
 * checking it against a report never crashes. */
#include "fuzz.h"

#include "agree/agree.h"

static const char own_report[] =
	"{\"v\":1,\"pod\":\"job-w-1\",\"uid\":\"u1\",\"node\":\"n1\",\"c\":["
	"{\"if\":\"eth1\",\"cls\":\"physical\",\"fam\":4,\"addr\":\"10.9.0.2\",\"plen\":24,"
	"\"mbps\":100000,\"score\":10011,\"mtu\":9000}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct agree_report mine;
	static int have_mine;
	struct agree_decision d1 = { 0 }, d2 = { 0 };
	np_error err = { 0 };

	if (!have_mine) {
		if (agree_report_parse(own_report, sizeof(own_report) - 1, &mine, &err) < 0)
			abort();
		have_mine = 1;
	}
	if (agree_decision_parse((const char *)data, size, &d1, &err) < 0) {
		FUZZ_CHECK(err.msg[0] && !strchr(err.msg, '\n'), "error '%s'", err.msg);
		agree_decision_free(&d1);
		return 0;
	}
	char *j1 = NULL, *j2 = NULL;
	FUZZ_CHECK(agree_decision_to_json(&d1, &j1, &err) == 0, "%s", err.msg);
	FUZZ_CHECK(agree_decision_parse(j1, strlen(j1), &d2, &err) == 0, "%s: %s", err.msg, j1);
	FUZZ_CHECK(agree_decision_to_json(&d2, &j2, &err) == 0, "%s", err.msg);
	FUZZ_CHECK(strcmp(j1, j2) == 0, "%s != %s", j1, j2);
	struct agree_own own;
	if (agree_decision_check_own(&d1, &mine, &own, &err) == 0) {
		FUZZ_CHECK(own.n_rails == d1.n_rails, "%zu rails, %zu own", d1.n_rails, own.n_rails);
		for (size_t i = 0; i < own.n_rails; i++)
			FUZZ_CHECK(own.cand[i] < mine.n, "candidate %zu of %zu", own.cand[i], mine.n);
	}
	free(j1);
	free(j2);
	agree_decision_free(&d1);
	agree_decision_free(&d2);
	return 0;
}
