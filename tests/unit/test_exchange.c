/* The exchange's messages (writer and strict reader), the follower's next
 * step and the gatherer's bookkeeping, from tables of structs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "exchange/exchange_priv.h"
#include "exchange/gather_priv.h"
#include "exchange/message.h"

/* ---- messages ---- */

static struct exchange_part part(const char *ifname, const char *addr, const char *next_pod,
				 const char *next_addr, int rank, int world)
{
	struct exchange_part p;
	memset(&p, 0, sizeof(p));
	snprintf(p.net, sizeof(p.net), "10.9.0.0/24");
	snprintf(p.ifname, sizeof(p.ifname), "%s", ifname);
	snprintf(p.addr, sizeof(p.addr), "%s", addr);
	snprintf(p.next_pod, sizeof(p.next_pod), "%s", next_pod);
	snprintf(p.next_addr, sizeof(p.next_addr), "%s", next_addr);
	snprintf(p.prev_addr, sizeof(p.prev_addr), "%s", next_addr[0] ? "10.9.0.2" : "");
	p.rank = rank;
	p.world = world;
	snprintf(p.root, sizeof(p.root), "10.9.0.1");
	p.min_mbps = 100000;
	return p;
}

static struct exchange_assignment assignment(enum exchange_state st, size_t n_parts)
{
	struct exchange_assignment a;
	memset(&a, 0, sizeof(a));
	snprintf(a.leader, sizeof(a.leader), "uid-0");
	snprintf(a.leader_pod, sizeof(a.leader_pod), "job-0");
	a.epoch = 2;
	a.state = st;
	a.n_pods = 4;
	for (size_t i = 0; i < n_parts; i++)
		a.parts[a.n_parts++] = part("ens3f0", "10.9.0.3", "job-3", "10.9.0.4", 2, 4);
	if (st == EXCHANGE_FAILED) {
		a.status = NP_EK8S;
		snprintf(a.reason, sizeof(a.reason), "5 pods of the job exist — too many");
	} else {
		snprintf(a.versions, sizeof(a.versions), "NCCL 2.21.5 on job-3 (node-d), 2.28.3 on the other 3 pods");
		snprintf(a.smoke_skip, sizeof(a.smoke_skip), "job-2: no-gpu");
		snprintf(a.token, sizeof(a.token), "0123456789abcdef0123456789abcdef");
		snprintf(a.warning, sizeof(a.warning),
			 "the preferred network 10.8.0.0/24 failed its probe (job-1: cannot connect)");
		snprintf(a.floor, sizeof(a.floor),
			 "NCCL 2.21.5 on job-3 ignores NCCL_CONF_FILE (read from 2.23.4): source /nicpick/nccl.env "
			 "in the command, or use NCCL >= 2.23.4");
	}
	return a;
}

static void test_assignment_round_trips_in_every_state(void **state)
{
	static const struct {
		enum exchange_state st;
		size_t parts;
	} cases[] = { { EXCHANGE_PROBE, 1 }, { EXCHANGE_MEASURE, 3 }, { EXCHANGE_FAILED, 0 } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct exchange_assignment a = assignment(cases[i].st, cases[i].parts), b;
		char *s = NULL;
		np_error err = { 0 };
		assert_int_equal(exchange_assignment_to_json(&a, &s, &err), 0);
		assert_int_equal(exchange_assignment_parse(s, strlen(s), &b, &err), 0);
		assert_memory_equal(&a, &b, sizeof(a));
		free(s);
	}
}

/* Rails: a probe round carries one part per rail; an old follower of one
 * rail reads the same single-part assignment as before. */
static void test_probe_assignment_with_rails(void **state)
{
	struct exchange_assignment a = assignment(EXCHANGE_PROBE, 0), b;
	a.parts[a.n_parts++] = part("ens3f0", "10.9.0.3", "job-3", "10.9.0.4", 2, 4);
	a.parts[a.n_parts] = part("ens3f1", "10.10.0.3", "job-3", "10.10.0.4", 2, 4);
	snprintf(a.parts[a.n_parts++].net, sizeof(a.parts[0].net), "10.10.0.0/24");
	char *s = NULL;
	np_error err = { 0 };
	assert_int_equal(exchange_assignment_to_json(&a, &s, &err), 0);
	assert_int_equal(exchange_assignment_parse(s, strlen(s), &b, &err), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	free(s);
	/* two rails on one interface, or on one network: no nicpick writes it */
	snprintf(a.parts[1].ifname, sizeof(a.parts[1].ifname), "ens3f0");
	assert_int_equal(exchange_assignment_to_json(&a, &s, &err), 0);
	assert_int_equal(exchange_assignment_parse(s, strlen(s), &b, &err), -1);
	assert_non_null(strstr(err.msg, "two rails on one network or one interface"));
	free(s);
	a.parts[1] = a.parts[0];
	snprintf(a.parts[1].ifname, sizeof(a.parts[1].ifname), "ens3f1");
	assert_int_equal(exchange_assignment_to_json(&a, &s, &err), 0);
	assert_int_equal(exchange_assignment_parse(s, strlen(s), &b, &err), -1);
	free(s);
	/* more than EXCHANGE_PARTS_MAX rails */
	a = assignment(EXCHANGE_PROBE, 1);
	char buf[8192], *one = NULL;
	assert_int_equal(exchange_assignment_to_json(&a, &one, &err), 0);
	const char *open = strstr(one, "\"parts\":[") + strlen("\"parts\":[");
	const char *close = strchr(open, '}') + 1;
	int n = snprintf(buf, sizeof(buf), "%.*s", (int)(open - one), one);
	for (int i = 0; i < EXCHANGE_PARTS_MAX + 1; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s%.*s", i ? "," : "", (int)(close - open), open);
	snprintf(buf + n, sizeof(buf) - (size_t)n, "%s", close);
	assert_int_equal(exchange_assignment_parse(buf, strlen(buf), &b, &err), -1);
	assert_non_null(strstr(err.msg, "\"parts\" is not an array of 1..4 parts for state probe"));
	free(one);
}

static void test_probe_round_and_progress_round_trip(void **state)
{
	np_error err = { 0 };
	char *s = NULL;
	struct exchange_probe p = { .epoch = 3, .n = 2 }, p2;
	snprintf(p.leader, sizeof(p.leader), "uid-0");
	p.t[0] = (struct exchange_trial){ .ok = true, .mbps = 9400.5, .detail = "connected" };
	p.t[1] = (struct exchange_trial){ .ok = false, .mbps = 0, .detail = "refused\n" };
	assert_int_equal(exchange_probe_to_json(&p, &s, &err), 0);
	assert_int_equal(exchange_probe_parse(s, strlen(s), &p2, &err), 0);
	free(s);
	assert_true(p2.t[0].ok);
	assert_true(p2.t[0].mbps == 9400.5);
	assert_false(p2.t[1].ok);
	assert_string_equal(p2.t[1].detail, "refused "); /* control characters are not sent */

	struct exchange_round r = { .epoch = 1, .state = EXCHANGE_FINAL }, r2;
	snprintf(r.leader, sizeof(r.leader), "uid-0");
	assert_int_equal(exchange_round_to_json(&r, &s, &err), 0);
	assert_int_equal(exchange_round_parse(s, strlen(s), &r2, &err), 0);
	free(s);
	assert_memory_equal(&r, &r2, sizeof(r));

	struct exchange_progress g = { .phase = EXCHANGE_GATHERING, .expect = 8, .created = 7, .done = 5,
				       .missing_total = 2, .n_missing = 2 },
				 g2;
	snprintf(g.leader, sizeof(g.leader), "uid-0");
	snprintf(g.leader_pod, sizeof(g.leader_pod), "job-0");
	snprintf(g.missing[0], sizeof(g.missing[0]), "job-3");
	snprintf(g.missing[1], sizeof(g.missing[1]), "job-6");
	snprintf(g.refused, sizeof(g.refused), "job-3: bad report: unknown key \"x\"");
	assert_int_equal(exchange_progress_to_json(&g, &s, &err), 0);
	assert_int_equal(exchange_progress_parse(s, strlen(s), &g2, &err), 0);
	free(s);
	assert_memory_equal(&g, &g2, sizeof(g));
}

#define TOK "0123456789abcdef0123456789abcdef"

/* Each line is refused by the reader named, with the reason quoted. */
static void test_readers_refuse_what_no_nicpick_writes(void **state)
{
	static const char part_ok[] = "{\"net\":\"10.9.0.0/24\",\"if\":\"eth1\",\"addr\":\"10.9.0.2\","
				      "\"next_pod\":\"job-2\",\"next_addr\":\"10.9.0.3\",\"prev_addr\":\"10.9.0.1\",\"rank\":1,"
				      "\"world\":4,\"root\":\"10.9.0.1\",\"min_mbps\":100000}";
	char buf[2048];
	static const struct {
		const char *head, *tail, *why;
	} as[] = {
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"n\":4,\"parts\":[", "]", NULL },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"n\":4,\"x\":1,\"parts\":[", "]", "unknown key \"x\"" },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"n\":4,\"versions\":\"NCCL 2.21.5 on job-3\",\"smoke_skip\":\"job-2: no-gpu\",\"parts\":[",
		  "]", NULL },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"n\":4,\"versions\":\"\",\"parts\":[", "]", "\"versions\" has length 0" },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"n\":4,\"smoke_skip\":3,\"parts\":[", "]", "\"smoke_skip\" is not a string" },
		{ "\"state\":\"failed\",\"n\":4,\"status\":6,\"reason\":\"x\",\"floor\":\"NCCL 2.21.5 on job-3\",\"parts\":[",
		  "]", "in a failed assignment" },
		{ "\"state\":\"failed\",\"n\":4,\"status\":6,\"reason\":\"x\",\"smoke_skip\":\"job-2: no-gpu\",\"parts\":[",
		  "]", "\"versions\" or \"smoke_skip\" in a failed assignment" },
		{ "\"state\":\"final\",\"n\":4,\"parts\":[", "]", "\"state\" is \"final\"" },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"n\":4,\"parts\":[", ",", "not JSON" },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"n\":5,\"parts\":[", "]", "a part of 4 pods in a round of 5" },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"n\":4,\"status\":5,\"parts\":[", "]", "without a failure" },
		{ "\"state\":\"failed\",\"n\":4,\"status\":5,\"reason\":\"x\",\"parts\":[", "]",
		  "\"parts\" is not an array of 0..0" },
		{ "\"state\":\"failed\",\"n\":4,\"status\":9,\"reason\":\"x\",\"parts\":[", "]", "\"status\"" },
		/* The round's token: in every state but failed, 32 lowercase hex digits. */
		{ "\"state\":\"probe\",\"n\":4,\"parts\":[", "]", "\"token\" is missing" },
		{ "\"state\":\"probe\",\"token\":\"0123456789ABCDEF0123456789abcdef\",\"n\":4,\"parts\":[", "]",
		  "\"token\" is malformed" },
		{ "\"state\":\"probe\",\"token\":\"0123\",\"n\":4,\"parts\":[", "]", "\"token\" is malformed" },
		{ "\"state\":\"failed\",\"token\":\"" TOK "\",\"n\":4,\"status\":5,\"reason\":\"x\",\"parts\":[",
		  "]", "in a failed assignment" },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"warning\":\"x\",\"n\":4,\"parts\":[", "]", NULL },
		{ "\"state\":\"probe\",\"token\":\"" TOK "\",\"warning\":7,\"n\":4,\"parts\":[", "]",
		  "\"warning\" is not a string" },
	};
	for (size_t i = 0; i < sizeof(as) / sizeof(as[0]); i++) {
		snprintf(buf, sizeof(buf), "{\"v\":1,\"leader\":\"u\",\"leader_pod\":\"job-0\",\"epoch\":1,%s%s%s}",
			 as[i].head, part_ok, as[i].tail);
		struct exchange_assignment a;
		np_error err = { 0 };
		int r = exchange_assignment_parse(buf, strlen(buf), &a, &err);
		if (!as[i].why) {
			assert_int_equal(r, 0);
			continue;
		}
		assert_int_equal(r, -1);
		assert_int_equal(err.status, NP_EK8S);
		if (!strstr(err.msg, as[i].why))
			fail_msg("case %zu: '%s' does not say '%s'", i, err.msg, as[i].why);
	}
	static const struct {
		const char *from, *to, *why;
	} parts[] = {
		{ "\"rank\":1", "\"rank\":4", "\"rank\" is 4" },
		{ "\"10.9.0.2\"", "\"10.9.0.999\"", "\"addr\" is not an address" },
		{ "\"10.9.0.0/24\"", "\"10.9.0.0/33\"", "\"net\" is not a network" },
		{ "\"next_addr\":\"10.9.0.3\"", "\"next_addr\":\"\"", "ring neighbour" },
		{ "\"prev_addr\":\"10.9.0.1\"", "\"prev_addr\":\"\"", "ring neighbour" },
		{ "\"prev_addr\":\"10.9.0.1\"", "\"prev_addr\":\"evil\"", "\"prev_addr\" is not an address" },
		{ "\"min_mbps\":100000", "\"min_mbps\":\"fast\"", "\"min_mbps\" is not an integer" },
	};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		char p[600];
		const char *at = strstr(part_ok, parts[i].from);
		assert_non_null(at);
		snprintf(p, sizeof(p), "%.*s%s%s", (int)(at - part_ok), part_ok, parts[i].to,
			 at + strlen(parts[i].from));
		snprintf(buf, sizeof(buf),
			 "{\"v\":1,\"leader\":\"u\",\"leader_pod\":\"job-0\",\"epoch\":1,\"state\":\"probe\","
			 "\"token\":\"" TOK "\",\"n\":4,\"parts\":[%s]}",
			 p);
		struct exchange_assignment a;
		np_error err = { 0 };
		assert_int_equal(exchange_assignment_parse(buf, strlen(buf), &a, &err), -1);
		if (!strstr(err.msg, parts[i].why))
			fail_msg("part case %zu: '%s' does not say '%s'", i, err.msg, parts[i].why);
	}
	struct exchange_round r;
	np_error err = { 0 };
	const char *newer = "{\"v\":2,\"leader\":\"u\",\"epoch\":1,\"state\":\"final\"}";
	assert_int_equal(exchange_round_parse(newer, strlen(newer), &r, &err), -1);
	assert_non_null(strstr(err.msg, "version 2"));
	char *big = malloc(EXCHANGE_MSG_MAX_BYTES + 2);
	memset(big, ' ', EXCHANGE_MSG_MAX_BYTES + 1);
	big[EXCHANGE_MSG_MAX_BYTES + 1] = '\0';
	struct exchange_progress pg;
	assert_int_equal(exchange_progress_parse(big, strlen(big), &pg, &err), -1);
	assert_non_null(strstr(err.msg, "more than"));
	free(big);
	const char *names = "{\"v\":1,\"leader\":\"u\",\"leader_pod\":\"j\",\"phase\":\"gather\",\"round\":0,"
			    "\"expect\":2,\"created\":2,\"done\":1,\"missing\":[\"a b\"],\"missing_total\":1,"
			    "\"probe\":\"\",\"refused\":\"\"}";
	assert_int_equal(exchange_progress_parse(names, strlen(names), &pg, &err), -1);
	assert_non_null(strstr(err.msg, "not a pod name"));
	const char *probe = "{\"v\":1,\"leader\":\"u\",\"epoch\":1,\"trials\":[{\"ok\":1,\"mbps\":0,\"detail\":\"\"}]}";
	struct exchange_probe pr;
	assert_int_equal(exchange_probe_parse(probe, strlen(probe), &pr, &err), -1);
	assert_non_null(strstr(err.msg, "\"ok\" is not a boolean"));
	/* route_if names an interface, and only in a trial that failed. */
	const char *rt_ok = "{\"v\":1,\"leader\":\"u\",\"epoch\":1,\"trials\":[{\"ok\":false,\"mbps\":0,"
			    "\"detail\":\"\",\"route_if\":\"eth1\"}]}";
	assert_int_equal(exchange_probe_parse(rt_ok, strlen(rt_ok), &pr, &err), 0);
	assert_string_equal(pr.t[0].route_if, "eth1");
	const char *rt_passed = "{\"v\":1,\"leader\":\"u\",\"epoch\":1,\"trials\":[{\"ok\":true,\"mbps\":0,"
				"\"detail\":\"\",\"route_if\":\"eth1\"}]}";
	assert_int_equal(exchange_probe_parse(rt_passed, strlen(rt_passed), &pr, &err), -1);
	assert_non_null(strstr(err.msg, "in a trial that passed"));
	const char *rt_bad = "{\"v\":1,\"leader\":\"u\",\"epoch\":1,\"trials\":[{\"ok\":false,\"mbps\":0,"
			     "\"detail\":\"\",\"route_if\":\"a/b\"}]}";
	assert_int_equal(exchange_probe_parse(rt_bad, strlen(rt_bad), &pr, &err), -1);
}

/* Random byte mutations of valid messages: every reader refuses or takes
 * them, never crashes, and what it takes it writes back readably. */
/* The gatherer's claim: what the writer writes the reader takes, control
 * characters in the reason included; anything else is refused. */
static void test_claim_round_trips_and_refuses_the_rest(void **state)
{
	struct exchange_claim c = { 0 }, back;
	snprintf(c.leader, sizeof(c.leader), "0b9e-11");
	snprintf(c.pod, sizeof(c.pod), "pt-worker-0");
	snprintf(c.why, sizeof(c.why), "it is worker 0\n(its containers carry no MASTER_ADDR)");
	char *s = NULL;
	np_error err = { 0 };
	assert_int_equal(exchange_claim_to_json(&c, &s, &err), 0);
	assert_int_equal(exchange_claim_parse(s, strlen(s), &back, &err), 0);
	assert_string_equal(back.leader, c.leader);
	assert_string_equal(back.pod, c.pod);
	assert_null(strchr(back.why, '\n'));
	assert_non_null(strstr(back.why, "no MASTER_ADDR"));
	free(s);
	static const struct {
		const char *json, *why;
	} bad[] = {
		{ "{\"v\":1,\"leader\":\"u\",\"pod\":\"p\"}", "why" },
		{ "{\"v\":1,\"leader\":\"u\",\"pod\":\"a b\",\"why\":\"\"}", "pod" },
		{ "{\"v\":1,\"leader\":\"u\",\"pod\":\"p\",\"why\":\"\",\"epoch\":1}", "epoch" },
		{ "{\"v\":2,\"leader\":\"u\",\"pod\":\"p\",\"why\":\"\"}", "version 2" },
		{ "[1]", "gatherer claim" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		np_error e = { 0 };
		assert_int_equal(exchange_claim_parse(bad[i].json, strlen(bad[i].json), &back, &e), -1);
		if (!strstr(e.msg, bad[i].why))
			fail_msg("claim case %zu: '%s' does not say '%s'", i, e.msg, bad[i].why);
	}
}

static void test_readers_survive_mutations(void **state)
{
	struct exchange_assignment a = assignment(EXCHANGE_MEASURE, 2);
	struct exchange_progress g = { .phase = EXCHANGE_PROBING, .round = 1, .expect = 3, .created = 3,
				       .done = 1, .missing_total = 2, .n_missing = 2, .probe = "x" };
	snprintf(g.leader, sizeof(g.leader), "u");
	snprintf(g.leader_pod, sizeof(g.leader_pod), "p");
	snprintf(g.missing[0], sizeof(g.missing[0]), "a");
	snprintf(g.missing[1], sizeof(g.missing[1]), "b");
	struct exchange_probe p = { .epoch = 1, .n = 1, .t = { { .ok = true, .mbps = 1.5, .detail = "d" } } };
	snprintf(p.leader, sizeof(p.leader), "u");
	struct exchange_round r = { .epoch = 2, .state = EXCHANGE_FAILED, .status = NP_ENOCOMMON,
				    .reason = "none" };
	snprintf(r.leader, sizeof(r.leader), "u");
	char *seed[4];
	np_error err = { 0 };
	assert_int_equal(exchange_assignment_to_json(&a, &seed[0], &err), 0);
	assert_int_equal(exchange_progress_to_json(&g, &seed[1], &err), 0);
	assert_int_equal(exchange_probe_to_json(&p, &seed[2], &err), 0);
	assert_int_equal(exchange_round_to_json(&r, &seed[3], &err), 0);
	static const char alphabet[] = "{}[]\":,0123456789-.eE \\ufalsetruenull\x01\xff";
	unsigned seedv = 7;
	size_t accepted = 0;
	for (int i = 0; i < 20000; i++) {
		int k = i % 4;
		size_t len = strlen(seed[k]);
		char buf[EXCHANGE_MSG_MAX_BYTES];
		memcpy(buf, seed[k], len + 1);
		for (int m = 0; m < 1 + (int)(rand_r(&seedv) % 3); m++)
			buf[rand_r(&seedv) % len] = alphabet[rand_r(&seedv) % (sizeof(alphabet) - 1)];
		np_error e = { 0 };
		char *again = NULL;
		int rc;
		if (k == 0) {
			struct exchange_assignment x;
			rc = exchange_assignment_parse(buf, len, &x, &e);
			if (rc == 0)
				assert_int_equal(exchange_assignment_to_json(&x, &again, &e), 0);
		} else if (k == 1) {
			struct exchange_progress x;
			rc = exchange_progress_parse(buf, len, &x, &e);
			if (rc == 0)
				assert_int_equal(exchange_progress_to_json(&x, &again, &e), 0);
		} else if (k == 2) {
			struct exchange_probe x;
			rc = exchange_probe_parse(buf, len, &x, &e);
			if (rc == 0)
				assert_int_equal(exchange_probe_to_json(&x, &again, &e), 0);
		} else {
			struct exchange_round x;
			rc = exchange_round_parse(buf, len, &x, &e);
			if (rc == 0)
				assert_int_equal(exchange_round_to_json(&x, &again, &e), 0);
		}
		if (rc == 0) {
			accepted++;
			free(again);
		} else {
			assert_int_equal(e.status, NP_EK8S);
			assert_true(strlen(e.msg) > 0);
		}
	}
	print_message("message fuzz: 20000 mutations, %zu accepted\n", accepted);
	for (int k = 0; k < 4; k++)
		free(seed[k]);
}

static void test_progress_text_names_missing_pods_and_pods_not_created(void **state)
{
	struct exchange_progress p = { .phase = EXCHANGE_GATHERING, .expect = 20, .created = 18, .done = 5 };
	for (int i = 0; i < 13; i++) {
		if (p.n_missing < EXCHANGE_MISSING_SHOWN)
			snprintf(p.missing[p.n_missing++], sizeof(p.missing[0]), "job-%d", i + 5);
		p.missing_total++;
	}
	char buf[1024];
	exchange_progress_text(&p, buf, sizeof(buf));
	assert_string_equal(buf, "5/20 pods reported; missing: job-5, job-6, job-7, job-8, job-9, job-10, "
				 "job-11, job-12, job-13, job-14 (+3 more); pods not created yet: 2 of 20");
	struct exchange_progress q = { .phase = EXCHANGE_PROBING, .round = 2, .expect = 4, .created = 4,
				       .done = 3, .missing_total = 1, .n_missing = 1,
				       .probe = "round 2: probing the ring on 10.9.0.0/24" };
	snprintf(q.missing[0], sizeof(q.missing[0]), "job-1");
	exchange_progress_text(&q, buf, sizeof(buf));
	assert_string_equal(buf, "round 2: 3/4 pods probed; missing: job-1; probe: round 2: probing the ring "
				 "on 10.9.0.0/24");
	char small[16];
	exchange_progress_text(&p, small, sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

/* ---- the follower's next step ---- */

enum { NONE = -1 };

static void test_follower_steps_from_a_table(void **state)
{
	static const struct {
		const char *name;
		int assign;  /* state, or NONE */
		int round;   /* state on the gatherer's pod, or NONE */
		int round_epoch;
		bool probed; /* this pod probed the assignment's epoch */
		bool stale_round; /* the round was written by another incarnation */
		enum follow_action want;
		int status;
	} cases[] = {
		{ "nothing yet", NONE, NONE, 0, false, false, FOLLOW_WAIT, 0 },
		{ "a part: probe it", EXCHANGE_PROBE, NONE, 0, false, false, FOLLOW_PROBE, 0 },
		{ "a measure part: probe it", EXCHANGE_MEASURE, EXCHANGE_MEASURE, 2, false, false, FOLLOW_PROBE, 0 },
		{ "probed, round open", EXCHANGE_PROBE, EXCHANGE_PROBE, 2, true, false, FOLLOW_WAIT, 0 },
		{ "probed, round final", EXCHANGE_PROBE, EXCHANGE_FINAL, 2, true, false, FOLLOW_DONE, 0 },
		{ "probed the round with another token", EXCHANGE_PROBE, EXCHANGE_PROBE, 2, true, false,
		  FOLLOW_PROBE, 0 },
		{ "final round of an older epoch", EXCHANGE_PROBE, EXCHANGE_FINAL, 1, true, false, FOLLOW_WAIT, 0 },
		{ "final round of another gatherer", EXCHANGE_PROBE, EXCHANGE_FINAL, 2, true, true, FOLLOW_WAIT, 0 },
		{ "restarted after the round ended", EXCHANGE_PROBE, EXCHANGE_FINAL, 2, false, false, FOLLOW_DONE, 0 },
		{ "restarted in a final measure round", EXCHANGE_MEASURE, EXCHANGE_FINAL, 2, false, false,
		  FOLLOW_PROBE, 0 },
		{ "failed part", EXCHANGE_FAILED, NONE, 0, false, false, FOLLOW_FAIL, NP_ENOCOMMON },
		{ "round failed after the probe", EXCHANGE_PROBE, EXCHANGE_FAILED, 2, true, false, FOLLOW_FAIL,
		  NP_ENOCOMMON },
		{ "job refused before any part", NONE, EXCHANGE_FAILED, 1, false, false, FOLLOW_FAIL, NP_EK8S },
		{ "failed round of another gatherer", NONE, EXCHANGE_FAILED, 1, false, true, FOLLOW_WAIT, 0 },
		{ "failed round older than the part", EXCHANGE_PROBE, EXCHANGE_FAILED, 1, true, false, FOLLOW_WAIT,
		  0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct follow_state s;
		memset(&s, 0, sizeof(s));
		s.leader_seen = true;
		snprintf(s.leader_pod, sizeof(s.leader_pod), "job-0");
		snprintf(s.round_uid, sizeof(s.round_uid), "%s", cases[i].stale_round ? "uid-old" : "uid-0");
		if (cases[i].assign != NONE) {
			s.has_assign = true;
			s.assign = assignment((enum exchange_state)cases[i].assign,
					      cases[i].assign == EXCHANGE_FAILED ? 0 : 1);
			if (cases[i].assign == EXCHANGE_FAILED)
				s.assign.status = NP_ENOCOMMON;
		}
		if (cases[i].round != NONE) {
			s.has_round = true;
			snprintf(s.round.leader, sizeof(s.round.leader), "uid-0");
			s.round.epoch = cases[i].round_epoch;
			s.round.state = (enum exchange_state)cases[i].round;
			if (s.round.state == EXCHANGE_FAILED) {
				s.round.status = cases[i].assign == NONE ? NP_EK8S : NP_ENOCOMMON;
				snprintf(s.round.reason, sizeof(s.round.reason), "why");
			}
		}
		if (cases[i].probed) {
			s.probed_epoch = s.assign.epoch;
			snprintf(s.probed_leader, sizeof(s.probed_leader), "%s", s.assign.leader);
			snprintf(s.probed_token, sizeof(s.probed_token), "%s", s.assign.token);
		}
		if (cases[i].probed && strstr(cases[i].name, "another token"))
			snprintf(s.probed_token, sizeof(s.probed_token), "ffffffffffffffffffffffffffffffff");
		np_error err = { 0 };
		enum follow_action got = follow_next(&s, &err);
		if (got != cases[i].want)
			fail_msg("%s: action %d, want %d", cases[i].name, got, cases[i].want);
		if (cases[i].want == FOLLOW_FAIL && err.status != cases[i].status)
			fail_msg("%s: status %d, want %d (%s)", cases[i].name, err.status, cases[i].status, err.msg);
	}
}

/* A part whose gatherer is gone is probed no further: that gatherer ends
 * no round, and the pod that replaces it hands out its own. */
static void test_follower_probes_no_part_of_a_gatherer_that_is_gone(void **state)
{
	struct follow_state s;
	np_error err = { 0 };
	memset(&s, 0, sizeof(s));
	s.has_assign = true;
	s.assign = assignment(EXCHANGE_PROBE, 1);
	s.leader_seen = true;
	snprintf(s.leader_pod, sizeof(s.leader_pod), "job-0");
	snprintf(s.round_uid, sizeof(s.round_uid), "uid-0");
	assert_int_equal(follow_next(&s, &err), FOLLOW_PROBE);
	/* deleted (or being deleted) */
	s.leader_seen = false;
	assert_int_equal(follow_next(&s, &err), FOLLOW_WAIT);
	/* replaced by a newer pod of its job index */
	s.leader_seen = true;
	snprintf(s.round_uid, sizeof(s.round_uid), "uid-new");
	assert_int_equal(follow_next(&s, &err), FOLLOW_WAIT);
	/* ... which hands out a part of its own */
	snprintf(s.assign.leader, sizeof(s.assign.leader), "uid-new");
	assert_int_equal(follow_next(&s, &err), FOLLOW_PROBE);
}

static void test_follower_says_what_it_waits_for(void **state)
{
	struct follow_state s;
	char buf[1024];
	memset(&s, 0, sizeof(s));
	follow_waiting_text(&s, "job=x,index=0", buf, sizeof(buf));
	assert_non_null(strstr(buf, "the gatherer (job=x,index=0), which does not exist: the gatherer pod "
				    "itself is missing"));
	s.leader_seen = true;
	snprintf(s.leader_pod, sizeof(s.leader_pod), "job-0");
	follow_waiting_text(&s, "job=x,index=0", buf, sizeof(buf));
	assert_non_null(strstr(buf, "job-0, which has published no progress"));
	s.has_progress = true;
	s.progress = (struct exchange_progress){ .phase = EXCHANGE_GATHERING, .expect = 4, .created = 3,
						 .done = 2, .missing_total = 1, .n_missing = 1 };
	snprintf(s.progress.missing[0], sizeof(s.progress.missing[0]), "job-2");
	follow_waiting_text(&s, "job=x,index=0", buf, sizeof(buf));
	assert_string_equal(buf, "the gatherer job-0: 2/4 pods reported; missing: job-2; pods not created "
				 "yet: 1 of 4");
}

/* ---- the gatherer's table ---- */

/* A live member of its own job index, through the setters that keep the
 * table's counts (as gather_member_update does). */
static struct member *member(struct gather *g, const char *name, bool report)
{
	struct member *m = gather_member(g, name, true);
	assert_non_null(m);
	gather_member_set(g, m, true, name, "2026-01-01T00:00:00Z");
	if (report) {
		static struct agree_report r;
		memset(&r, 0, sizeof(r));
		snprintf(r.pod, sizeof(r.pod), "%s", name);
		gather_member_set_report(g, m, &r);
		assert_true(m->has_report);
	}
	return m;
}

static void probed(struct gather *g, struct member *m, int epoch)
{
	struct exchange_probe p = { .epoch = epoch };
	gather_member_set_probe(g, m, &p);
}

static void test_gatherer_waits_for_every_report_and_names_the_missing(void **state)
{
	static const struct {
		int expect;
		const char *pods;     /* r: reported, -: exists without a report */
		bool ready;
		int created, done, missing;
		int count_error; /* more pods than expected */
	} cases[] = {
		{ 4, "rrrr", true, 4, 4, 0, 0 },  { 4, "rr-r", false, 4, 3, 1, 0 },
		{ 4, "rr", false, 2, 2, 0, 0 },	  { 4, "rrrrr", false, 5, 5, 0, 1 },
		{ 1, "r", true, 1, 1, 0, 0 },	  { 12, "------------", false, 12, 0, 12, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gather g;
		memset(&g, 0, sizeof(g));
		g.expect = cases[i].expect;
		for (size_t k = 0; cases[i].pods[k]; k++) {
			char name[16];
			snprintf(name, sizeof(name), "job-%zu", k);
			member(&g, name, cases[i].pods[k] == 'r');
		}
		assert_int_equal(gather_ready(&g, "job-0"), cases[i].ready);
		struct exchange_progress p;
		gather_progress(&g, "uid-job-0", "job-0", &p);
		assert_int_equal(p.created, cases[i].created);
		assert_int_equal(p.done, cases[i].done);
		assert_int_equal(p.missing_total, cases[i].missing);
		assert_true(p.n_missing <= EXCHANGE_MISSING_SHOWN);
		np_error err = { 0 };
		assert_int_equal(gather_check_count(&g, &err), cases[i].count_error ? -1 : 0);
		assert_string_equal(p.refused, "");
		if (cases[i].count_error) {
			assert_int_equal(err.status, NP_EK8S);
			assert_non_null(strstr(err.msg, "5 pods of the job exist"));
			assert_non_null(strstr(err.msg, "NICPICK_EXPECT"));
		}
		gather_free_members(&g);
	}
}

/* Missing pods are named by index as a person counts them (issue 14: the
 * API lists job-w-10 before job-w-2, and so did the message), and the
 * first ten of them are named whatever the order they were seen in. */
static void test_missing_pods_are_listed_by_index(void **state)
{
	struct gather g;
	memset(&g, 0, sizeof(g));
	g.expect = 16;
	/* the API's text order: 0, 1, 10, 11, ..., 15, 2, 3, ..., 9 */
	static const char *const order[] = { "job-w-0",  "job-w-1",  "job-w-10", "job-w-11",
					     "job-w-12", "job-w-13", "job-w-14", "job-w-15",
					     "job-w-2",  "job-w-3",  "job-w-4",  "job-w-5",
					     "job-w-6",  "job-w-7",  "job-w-8",  "job-w-9" };
	for (size_t k = 0; k < 16; k++) {
		struct member *m = member(&g, order[k], !strcmp(order[k], "job-w-0"));
		if (!strcmp(order[k], "job-w-12") || !strcmp(order[k], "job-w-3"))
			gather_member_set_why(m, "bad report");
	}
	struct exchange_progress p;
	gather_progress(&g, "uid-job-w-0", "job-w-0", &p);
	assert_int_equal(p.missing_total, 15);
	assert_int_equal(p.n_missing, EXCHANGE_MISSING_SHOWN);
	char text[1024];
	exchange_progress_text(&p, text, sizeof(text));
	if (!strstr(text, "missing: job-w-1, job-w-2, job-w-3, job-w-4, job-w-5, job-w-6, job-w-7, "
			  "job-w-8, job-w-9, job-w-10 (+5 more)"))
		fail_msg("%s", text);
	/* The refused pod named is the first by index too. */
	assert_string_equal(p.refused, "job-w-3: bad report");
	gather_free_members(&g);
}

static void test_gatherer_counts_one_pod_per_index_and_probes_per_epoch(void **state)
{
	struct gather g;
	memset(&g, 0, sizeof(g));
	g.expect = 2;
	member(&g, "job-0", true);
	struct member *old = member(&g, "job-1-old", true);
	struct member *now = member(&g, "job-1", true);
	gather_member_set(&g, old, true, "job-1", NULL); /* an earlier attempt of index 1 */
	gather_member_set(&g, now, true, "job-1", "2026-01-01T00:05:00Z");
	np_error err = { 0 };
	assert_int_equal(gather_check_count(&g, &err), 0);
	assert_true(gather_ready(&g, "job-0"));
	assert_false(old->selected);

	g.phase = PH_PROBE;
	g.epoch = 3;
	for (size_t i = 0; i < g.n; i++)
		gather_member_set_assigned(&g, &g.m[i], 3);
	probed(&g, gather_member(&g, "job-0", false), 3);
	probed(&g, now, 2); /* an earlier round's result */
	assert_false(gather_ready(&g, "job-0"));
	struct exchange_progress p;
	gather_progress(&g, "uid-job-0", "job-0", &p);
	assert_int_equal(p.phase, EXCHANGE_PROBING);
	assert_int_equal(p.missing_total, 1);
	assert_string_equal(p.missing[0], "job-1");
	gather_member_set_why(now, "bad probe result: \"ok\" is not a boolean");
	gather_progress(&g, "uid-job-0", "job-0", &p);
	assert_string_equal(p.refused, "job-1: bad probe result: \"ok\" is not a boolean");
	char text[512];
	exchange_progress_text(&p, text, sizeof(text));
	assert_non_null(strstr(text, "; refused: job-1: bad probe result"));
	probed(&g, now, 3);
	assert_true(gather_ready(&g, "job-0"));
	/* A pod restarted and lost its part: hand it out again. */
	gather_member_set_assigned(&g, now, 0);
	g.need_assign = false;
	assert_true(gather_ready(&g, "job-0"));
	assert_true(g.need_assign);
	gather_free_members(&g);
}

/* What the gatherer takes from a Pod object: the API's JSON, the boundary. */
static json_t *pod_json(const char *name, const char *uid, const char *index, const char *phase,
			const char *report, const char *assign, const char *probe)
{
	json_t *ann = json_object();
	if (report)
		json_object_set_new(ann, EXCHANGE_ANN_REPORT, json_string(report));
	if (assign)
		json_object_set_new(ann, EXCHANGE_ANN_ASSIGN, json_string(assign));
	if (probe)
		json_object_set_new(ann, EXCHANGE_ANN_PROBE, json_string(probe));
	json_t *pod = json_pack("{s:{s:s, s:s, s:s, s:{s:s}, s:o}, s:{s:s}}", "metadata", "name", name,
				"uid", uid, "creationTimestamp", "2026-01-01T00:00:00Z", "labels",
				"batch.kubernetes.io/job-completion-index", index, "annotations", ann,
				"status", "phase", phase);
	assert_non_null(pod);
	return pod;
}

static void test_gatherer_reads_pod_objects_from_a_table(void **state)
{
	struct agree_report r;
	memset(&r, 0, sizeof(r));
	snprintf(r.pod, sizeof(r.pod), "job-1");
	snprintf(r.uid, sizeof(r.uid), "u1");
	r.n = 1;
	snprintf(r.c[0].ifname, sizeof(r.c[0].ifname), "eth1");
	snprintf(r.c[0].cls, sizeof(r.c[0].cls), "physical");
	r.c[0].family = AF_INET;
	r.c[0].addr[0] = 10, r.c[0].addr[1] = 9, r.c[0].addr[3] = 2;
	snprintf(r.c[0].addr_text, sizeof(r.c[0].addr_text), "10.9.0.2");
	r.c[0].prefixlen = 24;
	r.c[0].mbps = 1000;
	char *rep = NULL, *as_mine = NULL, *as_other = NULL, *pr = NULL;
	np_error err = { 0 };
	assert_true(agree_report_to_json(&r, &rep, &err) >= 0);
	struct exchange_assignment a = assignment(EXCHANGE_PROBE, 1);
	snprintf(a.leader, sizeof(a.leader), "uid-g");
	a.epoch = 3;
	assert_int_equal(exchange_assignment_to_json(&a, &as_mine, &err), 0);
	snprintf(a.leader, sizeof(a.leader), "uid-old-gatherer");
	assert_int_equal(exchange_assignment_to_json(&a, &as_other, &err), 0);
	struct exchange_probe p = { .epoch = 3, .n = 1, .t = { { .ok = true } } };
	snprintf(p.leader, sizeof(p.leader), "uid-g");
	assert_int_equal(exchange_probe_to_json(&p, &pr, &err), 0);

	static const struct {
		const char *name, *uid, *phase;
		int report; /* 0 none, 1 ours */
		int assign; /* 0 none, 1 this gatherer's, 2 another's */
		const char *probe; /* NULL: none; "ok": ours */
		bool live, has_report, has_probe;
		int assigned_epoch;
		const char *why;
	} cases[] = {
		{ "job-1", "u1", "Running", 1, 1, "ok", true, true, true, 3, "" },
		{ "job-1", "u1", "Running", 1, 2, NULL, true, true, false, 0, "" },
		{ "job-1", "u2", "Running", 1, 0, NULL, true, false, false, 0, "earlier incarnation" },
		{ "job-1", "u1", "Succeeded", 1, 0, NULL, false, true, false, 0, "" },
		{ "job-1", "u1", "Running", 0, 0, "{\"v\":1}", true, false, false, 0, "bad probe result" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gather g;
		memset(&g, 0, sizeof(g));
		const char *probe = cases[i].probe && !strcmp(cases[i].probe, "ok") ? pr : cases[i].probe;
		json_t *pod = pod_json(cases[i].name, cases[i].uid, "1", cases[i].phase,
				       cases[i].report ? rep : NULL,
				       cases[i].assign == 1 ? as_mine : cases[i].assign == 2 ? as_other : NULL,
				       probe);
		gather_member_update(&g, "uid-g", pod);
		json_decref(pod);
		struct member *m = gather_member(&g, cases[i].name, false);
		assert_non_null(m);
		if (m->live != cases[i].live || m->has_report != cases[i].has_report ||
		    m->has_probe != cases[i].has_probe || m->assigned_epoch != cases[i].assigned_epoch ||
		    !strstr(gather_member_why(m), cases[i].why))
			fail_msg("case %zu: live %d report %d probe %d epoch %d why '%s'", i, m->live,
				 m->has_report, m->has_probe, m->assigned_epoch, gather_member_why(m));
		assert_string_equal(m->key, "1/");
		gather_free_members(&g);
	}
	free(rep);
	free(as_mine);
	free(as_other);
	free(pr);
}

/* Each annotation's refusal lasts as long as its text: a probe result or
 * a report that becomes readable, or goes, takes its refusal with it (it
 * stayed in the progress shown), and the other's refusal is kept. */
static void test_gatherer_forgets_a_refusal_once_the_text_is_readable(void **state)
{
	struct agree_report r;
	memset(&r, 0, sizeof(r));
	snprintf(r.pod, sizeof(r.pod), "job-1");
	snprintf(r.uid, sizeof(r.uid), "u1");
	char *rep = NULL, *pr = NULL;
	np_error err = { 0 };
	assert_true(agree_report_to_json(&r, &rep, &err) >= 0);
	struct exchange_probe p = { .epoch = 1, .n = 1, .t = { { .ok = true } } };
	snprintf(p.leader, sizeof(p.leader), "uid-g");
	assert_int_equal(exchange_probe_to_json(&p, &pr, &err), 0);
	static const char BAD_PROBE[] = "{\"v\":1}", BAD_REPORT[] = "{\"v\":1}", NUL[] = "";
	static const struct {
		const char *report, *probe; /* NULL: none; "rep"/"pr": readable; NUL: has a NUL */
		const char *why;            /* in the refusal; "": none */
	} steps[] = {
		{ "rep", BAD_PROBE, "bad probe result" },
		{ "rep", "pr", "" },
		{ "rep", NUL, "nicpick.io/probe annotation has a NUL" },
		{ "rep", "pr", "" },
		{ "rep", BAD_PROBE, "bad probe result" },
		{ "rep", NULL, "" },
		{ NUL, "pr", "nicpick.io/report annotation has a NUL" },
		{ NULL, "pr", "" },
		{ BAD_REPORT, BAD_PROBE, "report" },
		{ "rep", BAD_PROBE, "bad probe result" },
		{ "rep", "pr", "" },
	};
	struct gather g;
	memset(&g, 0, sizeof(g));
	g.epoch = 1;
	g.phase = PH_PROBE;
	g.expect = 1;
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		const char *rv = steps[i].report, *pv = steps[i].probe;
		json_t *pod = pod_json("job-1", "u1", "1", "Running",
				       rv == NUL ? NULL : rv && !strcmp(rv, "rep") ? rep : rv, NULL,
				       pv == NUL ? NULL : pv && !strcmp(pv, "pr") ? pr : pv);
		json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
		if (rv == NUL)
			json_object_set_new(ann, EXCHANGE_ANN_REPORT, json_stringn("{\0}", 3));
		if (pv == NUL)
			json_object_set_new(ann, EXCHANGE_ANN_PROBE, json_stringn("{\0}", 3));
		gather_member_update(&g, "uid-g", pod);
		json_decref(pod);
		struct member *m = gather_member(&g, "job-1", false);
		assert_non_null(m);
		const char *why = gather_member_why(m);
		bool ok = steps[i].why[0] ? strstr(why, steps[i].why) != NULL : why[0] == '\0';
		if (steps[i].why[0] && strcmp(steps[i].why, "report") == 0)
			ok = why[0] && !strstr(why, "probe");
		if (!ok)
			fail_msg("step %zu: why '%s', not '%s'", i, why, steps[i].why);
		if (i < 2) { /* the progress line says what the member says */
			struct exchange_progress pg;
			gather_progress(&g, "uid-g", "job-0", &pg);
			if (i == 0 ? !strstr(pg.refused, "job-1: bad probe result") : pg.refused[0] != '\0')
				fail_msg("step %zu: progress refused '%s'", i, pg.refused);
		}
	}
	gather_free_members(&g);
	free(rep);
	free(pr);
}

/* The gatherer's own probe result of a round reaches its pod only with
 * its next write there, which may be the next round's, after it probed
 * that one too: a pod's probe result of an older round never replaces a
 * newer one of the same gatherer; a newer one replaces it.  A result of a
 * round the gatherer has not reached (999: anyone who may patch pods can
 * write one) is held, but the current round's replaces it: it must not
 * keep the round waiting for a result that is already there. */
static void test_gatherer_keeps_the_newest_probe_result(void **state)
{
	np_error err = { 0 };
	static const int epochs[] = { 1, 2, 3, 4, 999 };
	char *pr[5] = { NULL };
	for (size_t i = 0; i < 5; i++) {
		struct exchange_probe p = { .epoch = epochs[i], .n = 1, .t = { { .ok = epochs[i] != 2 } } };
		snprintf(p.leader, sizeof(p.leader), "uid-g");
		assert_int_equal(exchange_probe_to_json(&p, &pr[i], &err), 0);
	}
	struct gather g;
	memset(&g, 0, sizeof(g));
	g.phase = PH_PROBE;
	static const struct {
		int round;    /* the gatherer's round */
		int seen;     /* the epoch of the probe on the pod now (an index of epochs) */
		int held;     /* the epoch the gatherer holds after it */
	} steps[] = { { 2, 0, 1 }, { 2, 1, 2 }, { 2, 0, 2 }, { 3, 2, 3 }, { 3, 1, 3 },
		      { 3, 4, 999 }, { 3, 2, 3 }, { 3, 1, 3 }, { 3, 3, 4 }, { 3, 2, 3 },
		      { 4, 3, 4 }, { 4, 2, 4 } };
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		g.epoch = steps[i].round;
		json_t *pod = pod_json("job-0", "u0", "0", "Running", NULL, NULL, pr[steps[i].seen]);
		gather_member_update(&g, "uid-g", pod);
		json_decref(pod);
		struct member *m = gather_member(&g, "job-0", false);
		assert_non_null(m);
		if (!m->has_probe || m->probe.epoch != steps[i].held)
			fail_msg("step %zu: round %d, saw %d, holds %d (has %d)", i, steps[i].round,
				 epochs[steps[i].seen], m->probe.epoch, m->has_probe);
		assert_int_equal(m->probe.ok[0], steps[i].held != 2);
	}
	gather_free_members(&g);
	for (size_t i = 0; i < 5; i++)
		free(pr[i]);
}

/* A new round is numbered after the round on the gatherer's pod and after
 * every part or probe result of this gatherer that the pods show (a
 * restart between the parts and the round), but a pod's annotation far
 * ahead of the gatherer's round (someone else's write) does not move it. */
static void test_gatherer_numbers_a_new_round_after_the_parts_out(void **state)
{
	np_error err = { 0 };
	static const struct {
		int epoch;	   /* the gatherer's round */
		int assign, probe; /* the pod's, of this gatherer (0: none) */
		const char *leader;
		int want;
	} cases[] = {
		{ 0, 0, 0, "uid-g", 1 },
		{ 3, 2, 2, "uid-g", 4 },	  /* behind: a pod of an earlier round */
		{ 3, 4, 0, "uid-g", 5 },	  /* its parts of round 4 were out */
		{ 3, 4, 4, "uid-g", 5 },	  /* and probed */
		{ 3, 3, 5, "uid-g", 6 },	  /* a probe two rounds ahead (two restarts) */
		{ 0, 1, 1, "uid-g", 2 },	  /* no round on its pod at all */
		{ 3, 9, 9, "uid-other", 4 },	  /* another gatherer's */
		{ 3, 3 + GATHER_EPOCH_SLACK, 0, "uid-g", 4 + GATHER_EPOCH_SLACK },
		{ 3, 4 + GATHER_EPOCH_SLACK, 0, "uid-g", 4 },
		{ 3, 0, 1000000, "uid-g", 4 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *as = NULL, *pr = NULL;
		if (cases[i].assign) {
			struct exchange_assignment a = assignment(EXCHANGE_PROBE, 1);
			snprintf(a.leader, sizeof(a.leader), "%s", cases[i].leader);
			a.epoch = cases[i].assign;
			assert_int_equal(exchange_assignment_to_json(&a, &as, &err), 0);
		}
		if (cases[i].probe) {
			struct exchange_probe p = { .epoch = cases[i].probe, .n = 1, .t = { { .ok = true } } };
			snprintf(p.leader, sizeof(p.leader), "%s", cases[i].leader);
			assert_int_equal(exchange_probe_to_json(&p, &pr, &err), 0);
		}
		struct gather g;
		memset(&g, 0, sizeof(g));
		g.epoch = cases[i].epoch;
		json_t *pod = pod_json("job-1", "u1", "1", "Running", NULL, as, pr);
		gather_member_update(&g, "uid-g", pod);
		json_decref(pod);
		if (gather_next_epoch(&g) != cases[i].want)
			fail_msg("case %zu: round %d, part %d, probe %d of %s: next %d, want %d", i, cases[i].epoch,
				 cases[i].assign, cases[i].probe, cases[i].leader, gather_next_epoch(&g),
				 cases[i].want);
		gather_free_members(&g);
		free(as);
		free(pr);
	}
}

/* The counts the gatherer keeps as events come are the counts a full
 * recount of the table gives, after any sequence of events: new pods,
 * replacements of a job index (newer creation), deletions, re-lists. */
static void test_gatherer_counts_match_a_recount_after_any_events(void **state)
{
	struct gather g;
	memset(&g, 0, sizeof(g));
	unsigned seed = 12345;
	for (int step = 0; step < 4000; step++) {
		seed = seed * 1103515245u + 12345u;
		unsigned r = seed >> 8;
		char name[32], uid[32], idx[16], created[32];
		unsigned pod = r % 97, attempt = (r >> 7) % 3;
		snprintf(name, sizeof(name), "job-%u-%u", pod % 41, attempt);
		snprintf(uid, sizeof(uid), "u-%u-%u-%u", pod % 41, attempt, (r >> 9) % 2);
		snprintf(idx, sizeof(idx), "%u", pod % 41);
		snprintf(created, sizeof(created), "2026-01-01T00:0%u:00Z", attempt);
		if ((r >> 12) % 50 == 0) {
			gather_members_relist(&g);
			continue;
		}
		if ((r >> 12) % 7 == 0) {
			gather_member_gone(&g, name, uid);
			continue;
		}
		if ((r >> 12) % 23 == 0)
			g.epoch++;
		json_t *pod_obj = json_pack("{s:{s:s, s:s, s:s, s:{s:s}, s:{}}, s:{s:s}}", "metadata", "name",
					    name, "uid", uid, "creationTimestamp", created, "labels",
					    "batch.kubernetes.io/job-completion-index", idx, "annotations",
					    "status", "phase", (r >> 15) % 9 == 0 ? "Failed" : "Running");
		gather_member_update(&g, "uid-g", pod_obj);
		json_decref(pod_obj);
		size_t sel = gather_selected(&g), unassigned = g.n_unassigned, reported = g.n_reported;
		size_t per_key = 0;
		gather_recount(&g);
		assert_int_equal(sel, g.n_selected);
		assert_int_equal(unassigned, g.n_unassigned);
		assert_int_equal(reported, g.n_reported);
		/* One member per job index with a live pod, the newest. */
		for (size_t i = 0; i < g.n; i++) {
			if (!g.m[i].selected)
				continue;
			per_key++;
			assert_true(g.m[i].live);
			for (size_t k = 0; k < g.n; k++)
				if (k != i && g.m[k].live && !strcmp(g.m[k].key, g.m[i].key))
					assert_true(strcmp(g.m[k].created, g.m[i].created) < 0 ||
						    (strcmp(g.m[k].created, g.m[i].created) == 0 &&
						     strcmp(g.m[k].name, g.m[i].name) < 0));
		}
		assert_int_equal(per_key, sel);
	}
	gather_free_members(&g);
}

/* The ring and the smoke ranks handed out in one pass over the rail are
 * the ones agree_rail_rank gives pod by pod. */
static void test_gatherer_parts_carry_the_ranks_of_agree_rail_rank(void **state)
{
	struct gather g;
	memset(&g, 0, sizeof(g));
	struct ex x;
	memset(&x, 0, sizeof(x));
	x.g = &g;
	x.name = "p3";
	enum { N = 10 };
	struct agree_assign as[N];
	memset(as, 0, sizeof(as));
	for (int i = 0; i < N; i++) {
		snprintf(as[i].pod, sizeof(as[i].pod), "p%d", i);
		snprintf(as[i].ifname, sizeof(as[i].ifname), "eth%d", i);
		snprintf(as[i].addr, sizeof(as[i].addr), "10.9.0.%d", i + 1);
		as[i].family = AF_INET;
		member(&g, as[i].pod, true);
	}
	struct agree_rail rail = { .min_mbps = 1000, .n_assign = N, .assign = as };
	snprintf(rail.net.text, sizeof(rail.net.text), "10.9.0.0/24");
	np_error err = { 0 };
	assert_int_equal(gather_rail_assign(&x, &rail, false, &err), 0);
	for (int i = 0; i < N; i++) {
		struct agree_rank rk;
		assert_int_equal(agree_rail_rank(&rail, "p3", as[i].pod, &rk, &err), 0);
		const struct member *m = gather_member(&g, as[i].pod, false);
		assert_int_equal(m->n_parts, 1);
		assert_int_equal(m->parts[0].rank, rk.rank);
		assert_int_equal(m->parts[0].world, rk.world);
		assert_string_equal(m->parts[0].root, rk.root_addr);
		assert_string_equal(m->parts[0].next_pod, as[(i + 1) % N].pod);
	}
	x.name = "not-on-the-rail";
	assert_int_equal(gather_rail_assign(&x, &rail, false, &err), -1);
	assert_int_equal(err.status, NP_EINTERNAL);
	gather_free_members(&g);
}

/* A probe result is kept compactly, but whole: every trial's verdict and
 * speed, and a failed trial's detail and the interface its route leaves
 * through (one per rail of a probe round, one per tied network of a
 * measure round). */
static void test_gatherer_keeps_every_trial_of_a_probe_result(void **state)
{
	struct exchange_probe p = { .epoch = 2, .n = 3 };
	snprintf(p.leader, sizeof(p.leader), "uid-g");
	p.t[0] = (struct exchange_trial){ .ok = true, .mbps = 9400.5 };
	p.t[1] = (struct exchange_trial){ .ok = false };
	snprintf(p.t[1].detail, sizeof(p.t[1].detail), "the route to 10.9.1.3 leaves through eth2, not eth1");
	snprintf(p.t[1].route_if, sizeof(p.t[1].route_if), "eth2");
	p.t[2] = (struct exchange_trial){ .ok = false };
	snprintf(p.t[2].detail, sizeof(p.t[2].detail), "cannot connect to 10.9.2.3");
	char *pr = NULL, *pr_ok = NULL;
	np_error err = { 0 };
	assert_int_equal(exchange_probe_to_json(&p, &pr, &err), 0);
	struct gather g;
	memset(&g, 0, sizeof(g));
	json_t *pod = pod_json("job-1", "u1", "1", "Running", NULL, NULL, pr);
	gather_member_update(&g, "uid-g", pod);
	json_decref(pod);
	struct member *m = gather_member(&g, "job-1", false);
	assert_non_null(m);
	assert_true(m->has_probe);
	assert_int_equal(m->probe.epoch, 2);
	assert_int_equal(m->probe.n, 3);
	assert_true(m->probe.ok[0]);
	assert_true(m->probe.mbps[0] > 9400 && m->probe.mbps[0] < 9401);
	assert_false(m->probe.ok[1]);
	assert_false(m->probe.ok[2]);
	assert_string_equal(gather_probe_detail(m, 0), "");
	assert_string_equal(gather_probe_route_if(m, 0), "");
	assert_string_equal(gather_probe_detail(m, 1), p.t[1].detail);
	assert_string_equal(gather_probe_route_if(m, 1), "eth2");
	assert_string_equal(gather_probe_detail(m, 2), p.t[2].detail);
	assert_string_equal(gather_probe_route_if(m, 2), "");
	assert_string_equal(gather_probe_detail(m, 3), ""); /* no such trial */

	/* Every trial passed: no text is kept at all. */
	p.n = 2;
	p.t[1] = p.t[0];
	assert_int_equal(exchange_probe_to_json(&p, &pr_ok, &err), 0);
	pod = pod_json("job-1", "u1", "1", "Running", NULL, NULL, pr_ok);
	gather_member_update(&g, "uid-g", pod);
	json_decref(pod);
	assert_int_equal(m->probe.n, 2);
	assert_true(m->probe.ok[0] && m->probe.ok[1]);
	assert_null(m->probe.text);
	assert_string_equal(gather_probe_detail(m, 1), "");
	gather_free_members(&g);
	free(pr);
	free(pr_ok);
}

static void cand_on(struct agree_cand *c, const char *ifname, unsigned char net, unsigned char host,
		    enum agree_route route)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->ifname, sizeof(c->ifname), "%s", ifname);
	snprintf(c->cls, sizeof(c->cls), "physical");
	c->family = AF_INET;
	c->addr[0] = 10, c->addr[1] = 9, c->addr[2] = net, c->addr[3] = host;
	snprintf(c->addr_text, sizeof(c->addr_text), "10.9.%u.%u", net, host);
	c->prefixlen = 24;
	c->mbps = 1000;
	c->route = route;
}

/* A pod pinned to the interface its route uses is decided on with that
 * interface as the routed one on that network, from the report as stored
 * (no copy per decision): also after it publishes its report again; a new
 * incarnation of the pod starts unpinned. */
static void test_gatherer_reads_a_pinned_pod_with_its_routed_interface(void **state)
{
	struct agree_report *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	snprintf(r->pod, sizeof(r->pod), "job-1");
	snprintf(r->uid, sizeof(r->uid), "u1");
	snprintf(r->node, sizeof(r->node), "node-1");
	r->n = 3;
	cand_on(&r->c[0], "eth1", 0, 2, AGREE_ROUTE_USED);
	cand_on(&r->c[1], "eth2", 0, 3, AGREE_ROUTE_UNUSED);
	cand_on(&r->c[2], "eth3", 1, 2, AGREE_ROUTE_UNKNOWN);
	char *rep = NULL, *rep2 = NULL, *rep3 = NULL;
	np_error err = { 0 };
	assert_int_equal(agree_report_to_json(r, &rep, &err), 0);
	struct gather g;
	memset(&g, 0, sizeof(g));
	json_t *pod = pod_json("job-1", "u1", "1", "Running", rep, NULL, NULL);
	gather_member_update(&g, "uid-g", pod);
	json_decref(pod);
	struct member *m = gather_member(&g, "job-1", false);
	assert_true(m->has_report);
	struct np_prefix net = { .family = AF_INET, .len = 24, .bytes = { 10, 9, 0, 0 } };
	assert_int_equal(gather_member_pin(m, "eth2", &net), 0);
	assert_int_equal(m->rep.c[0].route, AGREE_ROUTE_UNUSED);
	assert_int_equal(m->rep.c[1].route, AGREE_ROUTE_USED);
	assert_int_equal(m->rep.c[2].route, AGREE_ROUTE_UNKNOWN); /* another network */

	/* The pod publishes its report again (a new node name): still pinned. */
	snprintf(r->node, sizeof(r->node), "node-1b");
	assert_int_equal(agree_report_to_json(r, &rep2, &err), 0);
	pod = pod_json("job-1", "u1", "1", "Running", rep2, NULL, NULL);
	gather_member_update(&g, "uid-g", pod);
	json_decref(pod);
	assert_string_equal(m->rep.node, "node-1b");
	assert_int_equal(m->rep.c[0].route, AGREE_ROUTE_UNUSED);
	assert_int_equal(m->rep.c[1].route, AGREE_ROUTE_USED);

	/* A new incarnation: its report as it is. */
	snprintf(r->uid, sizeof(r->uid), "u2");
	assert_int_equal(agree_report_to_json(r, &rep3, &err), 0);
	pod = pod_json("job-1", "u2", "1", "Running", rep3, NULL, NULL);
	gather_member_update(&g, "uid-g", pod);
	json_decref(pod);
	assert_true(m->has_report);
	assert_null(m->pin);
	assert_int_equal(m->rep.c[0].route, AGREE_ROUTE_USED);
	assert_int_equal(m->rep.c[1].route, AGREE_ROUTE_UNUSED);
	gather_free_members(&g);
	free(rep);
	free(rep2);
	free(rep3);
	free(r);
}

/* The first round a restarted gatherer hands out keeps the token of the
 * round it handed out before only when every pod carries that very part
 * already (the epoch aside). */
static void test_gatherer_round_unchanged_only_when_every_part_is(void **state)
{
	struct gather g;
	memset(&g, 0, sizeof(g));
	struct ex x;
	memset(&x, 0, sizeof(x));
	x.g = &g;
	x.name = "job-0";
	snprintf(x.uid, sizeof(x.uid), "uid-g");
	g.epoch = 3; /* numbered after round 2, which the pods carry */
	g.n_pods = 2;
	g.state = EXCHANGE_PROBE;
	const char *tok = "0123456789abcdef0123456789abcdef";
	const char *names[2] = { "job-0", "job-1" }, *addrs[2] = { "10.9.0.1", "10.9.0.2" };
	for (size_t i = 0; i < 2; i++) {
		struct member *m = member(&g, names[i], true);
		m->parts = calloc(1, sizeof(*m->parts));
		assert_non_null(m->parts);
		m->parts[0] = part(i ? "eth1" : "eth0", addrs[i], names[1 - i], addrs[1 - i], (int)i, 2);
		m->n_parts = 1;
	}
	assert_false(gather_round_unchanged(&x, 2, tok)); /* no pod carries any part */
	for (size_t i = 0; i < 2; i++) {
		struct exchange_assignment a;
		memset(&a, 0, sizeof(a));
		snprintf(a.leader, sizeof(a.leader), "uid-g");
		snprintf(a.leader_pod, sizeof(a.leader_pod), "job-0");
		a.epoch = 2;
		a.n_pods = 2;
		a.state = EXCHANGE_PROBE;
		a.n_parts = 1;
		a.parts[0] = gather_member(&g, names[i], false)->parts[0];
		snprintf(a.token, sizeof(a.token), "%s", tok);
		char *js = NULL;
		np_error err = { 0 };
		assert_int_equal(exchange_assignment_to_json(&a, &js, &err), 0);
		gather_member(&g, names[i], false)->as_hash = gather_text_hash(js);
		free(js);
	}
	assert_true(gather_round_unchanged(&x, 2, tok));
	assert_false(gather_round_unchanged(&x, 1, tok));
	assert_false(gather_round_unchanged(&x, 2, "ffffffffffffffffffffffffffffffff"));
	g.state = EXCHANGE_MEASURE;
	assert_false(gather_round_unchanged(&x, 2, tok));
	g.state = EXCHANGE_PROBE;
	snprintf(g.warning, sizeof(g.warning), "the preferred network 10.8.0.0/24 failed its probe (...)");
	assert_false(gather_round_unchanged(&x, 2, tok));
	g.warning[0] = '\0';
	snprintf(gather_member(&g, "job-1", false)->parts[0].ifname, IFNAMSIZ, "eth2");
	assert_false(gather_round_unchanged(&x, 2, tok));
	gather_free_members(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_assignment_round_trips_in_every_state),
		cmocka_unit_test(test_probe_assignment_with_rails),
		cmocka_unit_test(test_probe_round_and_progress_round_trip),
		cmocka_unit_test(test_readers_refuse_what_no_nicpick_writes),
		cmocka_unit_test(test_readers_survive_mutations),
		cmocka_unit_test(test_claim_round_trips_and_refuses_the_rest),
		cmocka_unit_test(test_progress_text_names_missing_pods_and_pods_not_created),
		cmocka_unit_test(test_follower_steps_from_a_table),
		cmocka_unit_test(test_follower_probes_no_part_of_a_gatherer_that_is_gone),
		cmocka_unit_test(test_follower_says_what_it_waits_for),
		cmocka_unit_test(test_gatherer_waits_for_every_report_and_names_the_missing),
		cmocka_unit_test(test_gatherer_counts_one_pod_per_index_and_probes_per_epoch),
		cmocka_unit_test(test_missing_pods_are_listed_by_index),
		cmocka_unit_test(test_gatherer_reads_pod_objects_from_a_table),
		cmocka_unit_test(test_gatherer_forgets_a_refusal_once_the_text_is_readable),
		cmocka_unit_test(test_gatherer_keeps_the_newest_probe_result),
		cmocka_unit_test(test_gatherer_numbers_a_new_round_after_the_parts_out),
		cmocka_unit_test(test_gatherer_counts_match_a_recount_after_any_events),
		cmocka_unit_test(test_gatherer_parts_carry_the_ranks_of_agree_rail_rank),
		cmocka_unit_test(test_gatherer_keeps_every_trial_of_a_probe_result),
		cmocka_unit_test(test_gatherer_reads_a_pinned_pod_with_its_routed_interface),
		cmocka_unit_test(test_gatherer_round_unchanged_only_when_every_part_is),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
