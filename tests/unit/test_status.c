/* nicpick.io/outcome (writer and strict reader) and `nicpick status`'s view
 * of a job, built from Pod objects whose annotations come from nicpick's
 * own writers (exchange_*_to_json, exchange_outcome_to_json). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/exchange.h"
#include "exchange/message.h"
#include "status/status.h"

/* ---- the outcome message ---- */

static void test_outcome_round_trips(void **state)
{
	struct exchange_outcome o = { .ok = false, .status = 6, .epoch = 2,
				      .smoke = EXCHANGE_SMOKE_FAILED, .has_busbw = true,
				      .busbw = 0.25, .min_busbw = 1.5, .nccl = 22809,
				      .warnings = 1, .n_slow_nodes = 1, .slow_nodes = { 2 },
				      .n_slow_link_ends = 2, .slow_link_ends = { 0, 4 } };
	snprintf(o.reason, sizeof(o.reason), "smoke all-reduce failed: slow network");
	snprintf(o.suspect, sizeof(o.suspect),
		 "slow node: job-2 (node node-c, 10.9.0.3) (rank 2), both its ring links are slow; "
		 "slow link end: job-0 (rank 0); slow link end: job-4 (rank 4)");
	snprintf(o.warning, sizeof(o.warning), "container train sets NCCL_SOCKET_IFNAME='eth0'");
	char *s = NULL;
	np_error err = { 0 };
	assert_int_equal(exchange_outcome_to_json(&o, &s, &err), 0);
	struct exchange_outcome back;
	assert_int_equal(exchange_outcome_parse(s, strlen(s), &back, &err), 0);
	assert_false(back.ok);
	assert_int_equal(back.status, 6);
	assert_int_equal(back.epoch, 2);
	assert_int_equal(back.smoke, EXCHANGE_SMOKE_FAILED);
	assert_true(back.has_busbw);
	assert_true(back.busbw == 0.25 && back.min_busbw == 1.5);
	assert_int_equal(back.n_slow_nodes, 1);
	assert_int_equal(back.slow_nodes[0], 2);
	assert_int_equal(back.n_slow_link_ends, 2);
	assert_int_equal(back.slow_link_ends[0], 0);
	assert_int_equal(back.slow_link_ends[1], 4);
	assert_string_equal(back.reason, o.reason);
	assert_string_equal(back.suspect, o.suspect);
	assert_string_equal(back.warning, o.warning);
	free(s);

	/* ok: no reason, no busbw when the test did not run */
	struct exchange_outcome ok = { .ok = true, .smoke = EXCHANGE_SMOKE_SKIPPED };
	assert_int_equal(exchange_outcome_to_json(&ok, &s, &err), 0);
	assert_null(strstr(s, "reason"));
	assert_null(strstr(s, "slow_"));
	assert_null(strstr(s, "\"busbw\""));
	assert_int_equal(exchange_outcome_parse(s, strlen(s), &back, &err), 0);
	assert_true(back.ok && !back.has_busbw && !back.n_slow_nodes && !back.n_slow_link_ends);
	free(s);
}

/* The id of the output set the pod wrote, as DIR/decision-ID names it. */
static void test_outcome_carries_the_decision_id(void **state)
{
	struct exchange_outcome o = { .ok = true, .smoke = EXCHANGE_SMOKE_PASSED, .epoch = 1 };
	snprintf(o.decision_id, sizeof(o.decision_id), "20261201T145000Z-1a2b3c4d");
	char *s = NULL;
	np_error err = { 0 };
	assert_int_equal(exchange_outcome_to_json(&o, &s, &err), 0);
	assert_non_null(strstr(s, "\"decision_id\":\"20261201T145000Z-1a2b3c4d\""));
	struct exchange_outcome back;
	assert_int_equal(exchange_outcome_parse(s, strlen(s), &back, &err), 0);
	assert_string_equal(back.decision_id, "20261201T145000Z-1a2b3c4d");
	free(s);

	/* What the nicpick before it wrote, without the field: still read
	 * (a job may mix the two during a rolling upgrade), with no id. */
	static const char old[] = "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\","
				  "\"busbw\":21.4,\"min_busbw\":0.6,\"nccl\":22809,\"warnings\":0}";
	memset(&back, 0x55, sizeof(back));
	assert_int_equal(exchange_outcome_parse(old, strlen(old), &back, &err), 0);
	assert_true(back.ok && back.has_busbw && back.busbw == 21.4);
	assert_string_equal(back.decision_id, "");

	/* A failed run wrote no set: the writer leaves the id out. */
	struct exchange_outcome failed = { .ok = false, .status = 4 };
	snprintf(failed.reason, sizeof(failed.reason), "no shared network");
	snprintf(failed.decision_id, sizeof(failed.decision_id), "20261201T145000Z-1a2b3c4d");
	assert_int_equal(exchange_outcome_to_json(&failed, &s, &err), 0);
	assert_null(strstr(s, "decision_id"));
	free(s);

	/* An id that is not an output set's is the caller's bug: refused,
	 * never written for every reader to refuse. */
	snprintf(o.decision_id, sizeof(o.decision_id), "../etc");
	s = (char *)"unchanged";
	assert_int_equal(exchange_outcome_to_json(&o, &s, &err), -1);
	assert_null(s);
	assert_int_equal(err.status, NP_EINTERNAL);
}

static void test_outcome_reader_is_strict(void **state)
{
	static const struct {
		const char *json, *why;
	} bad[] = {
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"extra\":1}", "extra" },
		{ "{\"v\":1,\"ok\":true,\"status\":6,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0}", "\"ok\" is true with \"status\" 6" },
		{ "{\"v\":1,\"ok\":false,\"status\":6,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0}", "reason" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"maybe\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0}", "\"smoke\" is \"maybe\"" },
		{ "{\"v\":2,\"ok\":true}", "version 2" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"slow_nodes\":[1]}", "without \"suspect\"" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"suspect\":\"slow node: x\",\"slow_nodes\":[],\"slow_link_ends\":[]}",
		  "names no rank" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"suspect\":\"slow node: x\",\"slow_nodes\":[1,1]}",
		  "names rank 1 twice" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"suspect\":\"slow node: x\",\"slow_link_ends\":[-1]}",
		  "\"slow_link_ends\"[0] is not a rank" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"suspect\":\"slow node: x\",\"slow_nodes\":2}",
		  "\"slow_nodes\" is not an array" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"decision_id\":\"a/b\"}",
		  "\"decision_id\" has characters that are not allowed" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"decision_id\":\"\"}",
		  "\"decision_id\" has length 0" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"decision_id\":\"20261201T145000Z-1a2b3c4d-and-far-too-long\"}",
		  "\"decision_id\" has length 42" },
		{ "{\"v\":1,\"ok\":true,\"status\":0,\"epoch\":1,\"smoke\":\"passed\",\"min_busbw\":0,"
		  "\"nccl\":0,\"warnings\":0,\"decision_id\":7}",
		  "\"decision_id\" is not a string" },
		{ "{\"v\":1,\"ok\":false,\"status\":4,\"reason\":\"x\",\"epoch\":1,\"smoke\":\"skipped\","
		  "\"min_busbw\":0,\"nccl\":0,\"warnings\":0,\"decision_id\":\"20261201T145000Z-1a2b3c4d\"}",
		  "\"decision_id\" given with \"ok\" false" },
		{ "[1]", "not a JSON object" },
		{ "{", "not JSON" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct exchange_outcome o;
		np_error err = { 0 };
		assert_int_equal(exchange_outcome_parse(bad[i].json, strlen(bad[i].json), &o, &err), -1);
		assert_int_equal(err.status, NP_EK8S);
		if (!strstr(err.msg, bad[i].why))
			fail_msg("%s: '%s' does not say '%s'", bad[i].json, err.msg, bad[i].why);
	}
}

/* ---- the job's view ---- */

static json_t *pod(const char *name, const char *node, const char *labels_json)
{
	json_error_t je;
	json_t *labels = json_loads(labels_json, 0, &je);
	assert_non_null(labels);
	json_t *p = json_pack("{s:{s:s, s:s, s:o, s:{}}, s:{s:s, s:[{s:s}]}, s:{s:s}}", "metadata",
			      "name", name, "uid", name, "labels", labels, "annotations", "spec",
			      "nodeName", node, "containers", "name", "main", "status", "phase",
			      "Running");
	assert_non_null(p);
	return p;
}

static void annotate(json_t *p, const char *key, char *json)
{
	json_object_set_new(json_object_get(json_object_get(p, "metadata"), "annotations"), key,
			    json_string(json));
	free(json);
}

static json_t *batch_pod(int i)
{
	char name[32], labels[256];
	snprintf(name, sizeof(name), "train-%d", i);
	snprintf(labels, sizeof(labels),
		 "{\"batch.kubernetes.io/job-name\":\"train\",\"batch.kubernetes.io/job-completion-index\":\"%d\"}",
		 i);
	char node[16];
	snprintf(node, sizeof(node), "node-%c", 'a' + i);
	return pod(name, node, labels);
}

/* What nicpick writes on pod i of n in round 1 once the round is final. */
static void decided(json_t *p, int i, int n, bool with_outcome, int status)
{
	np_error err = { 0 };
	char *s = NULL;
	struct exchange_assignment a = { .epoch = 1, .state = EXCHANGE_PROBE, .n_pods = n, .n_parts = 1 };
	snprintf(a.leader, sizeof(a.leader), "train-0");
	snprintf(a.leader_pod, sizeof(a.leader_pod), "train-0");
	snprintf(a.token, sizeof(a.token), "0123456789abcdef0123456789abcdef");
	struct exchange_part *pt = &a.parts[0];
	snprintf(pt->net, sizeof(pt->net), "10.9.0.0/24");
	snprintf(pt->ifname, sizeof(pt->ifname), "eth%d", i + 1);
	snprintf(pt->addr, sizeof(pt->addr), "10.9.0.%d", 11 + i);
	snprintf(pt->next_pod, sizeof(pt->next_pod), "train-%d", (i + 1) % n);
	snprintf(pt->next_addr, sizeof(pt->next_addr), "10.9.0.%d", 11 + (i + 1) % n);
	snprintf(pt->prev_addr, sizeof(pt->prev_addr), "10.9.0.%d", 11 + (i + n - 1) % n);
	snprintf(pt->root, sizeof(pt->root), "10.9.0.11");
	pt->rank = i;
	pt->world = n;
	pt->min_mbps = 10000;
	assert_int_equal(exchange_assignment_to_json(&a, &s, &err), 0);
	annotate(p, EXCHANGE_ANN_ASSIGN, s);
	struct exchange_probe pr = { .epoch = 1, .n = 1, .t = { { .ok = true, .mbps = 9400 } } };
	snprintf(pr.leader, sizeof(pr.leader), "train-0");
	assert_int_equal(exchange_probe_to_json(&pr, &s, &err), 0);
	annotate(p, EXCHANGE_ANN_PROBE, s);
	if (i == 0) {
		struct exchange_round rd = { .epoch = 1, .state = EXCHANGE_FINAL };
		snprintf(rd.leader, sizeof(rd.leader), "train-0");
		assert_int_equal(exchange_round_to_json(&rd, &s, &err), 0);
		annotate(p, EXCHANGE_ANN_ROUND, s);
	}
	if (with_outcome) {
		struct exchange_outcome o = { .ok = status == 0, .status = status, .epoch = 1,
					      .smoke = status ? EXCHANGE_SMOKE_FAILED : EXCHANGE_SMOKE_PASSED,
					      .has_busbw = true, .busbw = 1.5 + i };
		if (status) {
			snprintf(o.reason, sizeof(o.reason), "smoke all-reduce failed: slow network");
			snprintf(o.suspect, sizeof(o.suspect),
				 "slow node: train-1 (node node-b) (rank 1), both its ring links are slow");
			o.slow_nodes[o.n_slow_nodes++] = 1;
		}
		if (!status)
			snprintf(o.decision_id, sizeof(o.decision_id), "20261201T14500%dZ-0000000%d", i, i);
		assert_int_equal(exchange_outcome_to_json(&o, &s, &err), 0);
		annotate(p, EXCHANGE_ANN_OUTCOME, s);
	}
}

static void test_a_decided_job_exits_0_with_every_pods_part(void **state)
{
	json_t *pods = json_array();
	for (int i = 0; i < 3; i++) {
		json_t *p = batch_pod(i);
		decided(p, i, 3, true, 0);
		json_array_append_new(pods, p);
	}
	/* a pod of another job, and one of a JobSet's Job of a similar name */
	json_array_append_new(pods, pod("other-0", "node-a",
					"{\"batch.kubernetes.io/job-name\":\"other\","
					"\"batch.kubernetes.io/job-completion-index\":\"0\"}"));
	struct status_job j;
	np_error err = { 0 };
	assert_int_equal(status_build(pods, NULL, "ml", "train", STATUS_KIND_JOB, &j, &err), 0);
	assert_int_equal(j.n_pods, 3);
	assert_int_equal(j.state, STATUS_DECIDED);
	assert_int_equal(j.exit_code, 0);
	assert_string_equal(j.network, "10.9.0.0/24");
	assert_int_equal(j.round, 1);
	assert_string_equal(j.smoke, "passed");
	assert_true(j.has_busbw && j.busbw == 1.5); /* the job's is its slowest pod's */
	assert_string_equal(j.gatherer, "train-0");
	assert_string_equal(j.pods[2].ifname, "eth3");
	assert_int_equal(j.pods[2].state, STATUS_POD_DONE);
	char *t = status_text(&j, false);
	assert_non_null(t);
	assert_non_null(strstr(t, "Job train (Indexed Job, 3/3 pods, gatherer train-0): decided; "
				  "network 10.9.0.0/24, round 1; smoke passed, busbw 1.50 GB/s\n"));
	assert_non_null(strstr(t, "POD        NODE     STATE   INTERFACE   ADDRESS     PROBE"));
	assert_non_null(strstr(t, "train-0*   node-a   done    eth1        10.9.0.11   ok 9400Mb/s"));
	assert_null(strstr(t, "DECISION"));
	free(t);
	/* -o wide: each pod's output set, by the id its volume names it by */
	t = status_text(&j, true);
	assert_non_null(t);
	assert_non_null(strstr(t, "   NEXT      DECISION                    DETAIL\n"));
	assert_non_null(strstr(t, "   train-2   20261201T145001Z-00000001   -\n"));
	free(t);
	char *js = status_json(&j);
	json_t *doc = json_loads(js, 0, NULL);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "job"), "state")),
			    "decided");
	assert_int_equal(json_array_size(json_object_get(doc, "pods")), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(doc, "pods"), 2),
							      "decisionId")),
			    "20261201T145002Z-00000002");
	json_decref(doc);
	free(js);
	status_job_free(&j);
	json_decref(pods);
}

/* make demo's test double, or a throttled link: MB/s, never "0.00 GB/s". */
static void test_a_slow_busbw_shows_in_the_unit_that_suits_it(void **state)
{
	json_t *pods = json_array();
	for (int i = 0; i < 2; i++) {
		json_t *p = batch_pod(i);
		decided(p, i, 2, false, 0);
		struct exchange_outcome o = { .ok = true, .epoch = 1, .smoke = EXCHANGE_SMOKE_PASSED,
					      .has_busbw = true, .busbw = i ? 0.0171 : 0.005 };
		char *s = NULL;
		np_error err = { 0 };
		assert_int_equal(exchange_outcome_to_json(&o, &s, &err), 0);
		annotate(p, EXCHANGE_ANN_OUTCOME, s);
		json_array_append_new(pods, p);
	}
	struct status_job j;
	np_error err = { 0 };
	assert_int_equal(status_build(pods, NULL, "ml", "train", STATUS_KIND_JOB, &j, &err), 0);
	char *t = status_text(&j, false);
	assert_non_null(t);
	assert_non_null(strstr(t, "; smoke passed, busbw 5.00 MB/s\n"));
	assert_non_null(strstr(t, "   ok 9400Mb/s   5.00MB/s   -"));
	assert_non_null(strstr(t, "   ok 9400Mb/s   17.1MB/s   -"));
	assert_null(strstr(t, "0.00"));
	free(t);
	status_job_free(&j);
	json_decref(pods);
}

/* The job's view of pods (taken): waiting (exit 5), pod `at` in state
 * `st`, and what it waits for in these words. */
static void expect_waiting(json_t *pods, enum status_kind kind, size_t at, enum status_pod_state st,
			   const char *waiting)
{
	struct status_job j;
	np_error err = { 0 };
	assert_int_equal(status_build(pods, NULL, "ml", "train", kind, &j, &err), 0);
	assert_int_equal(j.state, STATUS_WAITING);
	assert_int_equal(j.exit_code, 5);
	assert_int_equal(j.pods[at].state, st);
	assert_string_equal(j.waiting, waiting);
	status_job_free(&j);
	json_decref(pods);
}

static void test_a_round_still_proving_waits_and_a_failed_smoke_exits_6(void **state)
{
	json_t *pods = json_array();
	for (int i = 0; i < 3; i++) {
		json_t *p = batch_pod(i);
		decided(p, i, 3, i != 2, 0);
		json_array_append_new(pods, p);
	}
	expect_waiting(pods, STATUS_KIND_ANY, 2, STATUS_POD_PROVING,
		       "round 1 final: the smoke test and the outputs on 1 of 3 pods");

	pods = json_array();
	struct status_job j;
	np_error err = { 0 };
	for (int i = 0; i < 3; i++) {
		json_t *p = batch_pod(i);
		decided(p, i, 3, true, i == 1 ? 0 : 6);
		json_array_append_new(pods, p);
	}
	assert_int_equal(status_build(pods, NULL, "ml", "train", STATUS_KIND_JOB, &j, &err), 0);
	assert_int_equal(j.state, STATUS_FAILED);
	assert_int_equal(j.exit_code, 6);
	assert_string_equal(j.smoke, "failed");
	/* the slow node itself, not its ring neighbours */
	assert_int_equal(j.pods[1].suspect, STATUS_SUSPECT_NODE);
	assert_int_equal(j.pods[0].suspect, STATUS_SUSPECT_NONE);
	assert_int_equal(j.pods[2].suspect, STATUS_SUSPECT_NONE);
	assert_non_null(strstr(j.suspect, "slow node: train-1"));
	assert_string_equal(j.reason, "train-0: smoke all-reduce failed: slow network");
	status_job_free(&j);
	json_decref(pods);
}

/* Before the gatherer's account of its progress is published, the pods'
 * own states say what the job waits for, in the gatherer's words. */
static void test_without_the_gatherers_account_the_pods_say_who_is_missing(void **state)
{
	json_t *pods = json_array();
	for (int i = 0; i < 4; i++) {
		json_t *p = batch_pod(i);
		if (i != 2) {
			struct agree_report *r = calloc(1, sizeof(*r));
			assert_non_null(r);
			snprintf(r->pod, sizeof(r->pod), "train-%d", i);
			snprintf(r->uid, sizeof(r->uid), "train-%d", i);
			snprintf(r->node, sizeof(r->node), "node-%c", 'a' + i);
			char *s = NULL;
			np_error err = { 0 };
			assert_int_equal(agree_report_to_json(r, &s, &err), 0);
			annotate(p, EXCHANGE_ANN_REPORT, s);
			free(r);
		}
		json_array_append_new(pods, p);
	}
	expect_waiting(pods, STATUS_KIND_JOB, 2, STATUS_POD_STARTING, "3/4 pods reported; missing: train-2");
}

static void test_a_jobset_is_the_replicated_job_that_runs_nicpick(void **state)
{
	/* A TrainJob's JobSet: an initializer pod with no nicpick, two node pods. */
	json_t *pods = json_array();
	json_array_append_new(pods, pod("tj-dataset-initializer-0-0", "node-a",
					"{\"jobset.sigs.k8s.io/jobset-name\":\"tj\","
					"\"jobset.sigs.k8s.io/replicatedjob-name\":\"dataset-initializer\","
					"\"jobset.sigs.k8s.io/job-index\":\"0\","
					"\"batch.kubernetes.io/job-completion-index\":\"0\"}"));
	for (int i = 0; i < 2; i++) {
		char name[32];
		snprintf(name, sizeof(name), "tj-node-0-%d", i);
		char labels[512];
		snprintf(labels, sizeof(labels),
			 "{\"jobset.sigs.k8s.io/jobset-name\":\"tj\",\"jobset.sigs.k8s.io/replicatedjob-name\":\"node\","
			 "\"jobset.sigs.k8s.io/job-index\":\"0\",\"batch.kubernetes.io/job-completion-index\":\"%d\"}",
			 i);
		json_t *p = pod(name, "node-b", labels);
		annotate(p, EXCHANGE_ANN_REPORT, strdup("{}")); /* unreadable: a warning, still a member */
		json_array_append_new(pods, p);
	}
	struct status_job j;
	np_error err = { 0 };
	assert_int_equal(status_build(pods, NULL, "ml", "tj", STATUS_KIND_TRAINJOB, &j, &err), 0);
	assert_int_equal(j.n_pods, 2);
	assert_string_equal(j.pods[0].name, "tj-node-0-0");
	assert_true(j.pods[0].gatherer);
	assert_int_equal(j.pods[0].n_warn, 1);
	assert_non_null(strstr(j.pods[0].warn[0], "bad report"));
	assert_int_equal(j.state, STATUS_WAITING);
	assert_string_equal(j.kind_text, "JobSet");
	status_job_free(&j);
	json_decref(pods);
}

static void test_a_restarted_jobset_shows_its_latest_attempt(void **state)
{
	/* Attempt 0's pods, still terminating, carry reports; attempt 1's have
	 * not reported yet but run nicpick (its init container). */
	json_t *pods = json_array();
	for (int attempt = 0; attempt < 2; attempt++)
		for (int i = 0; i < 2; i++) {
			char name[32], labels[512];
			snprintf(name, sizeof(name), "js-node-0-%d-a%d", i, attempt);
			snprintf(labels, sizeof(labels),
				 "{\"jobset.sigs.k8s.io/jobset-name\":\"js\",\"jobset.sigs.k8s.io/replicatedjob-name\":\"node\","
				 "\"jobset.sigs.k8s.io/job-index\":\"0\",\"jobset.sigs.k8s.io/restart-attempt\":\"%d\","
				 "\"batch.kubernetes.io/job-completion-index\":\"%d\"}",
				 attempt, i);
			json_t *p = pod(name, "node-a", labels);
			if (attempt == 0)
				annotate(p, EXCHANGE_ANN_REPORT, strdup("{}"));
			else
				json_object_set_new(json_object_get(p, "spec"), "initContainers",
						    json_pack("[{s:s}]", "name", "nicpick"));
			json_array_append_new(pods, p);
		}
	struct status_job j;
	np_error err = { 0 };
	assert_int_equal(status_build(pods, NULL, "ml", "js", STATUS_KIND_JOBSET, &j, &err), 0);
	assert_int_equal(j.n_pods, 2);
	assert_string_equal(j.pods[0].name, "js-node-0-0-a1");
	assert_string_equal(j.pods[1].name, "js-node-0-1-a1");
	assert_non_null(strstr(j.selector, "restart-attempt=1"));
	status_job_free(&j);
	json_decref(pods);
}

static void test_kind_names(void **state)
{
	assert_int_equal(status_kind_parse("pytorchjob"), STATUS_KIND_PYTORCHJOB);
	assert_int_equal(status_kind_parse("TrainJob"), STATUS_KIND_TRAINJOB);
	assert_int_equal(status_kind_parse("Job"), STATUS_KIND_JOB);
	assert_int_equal(status_kind_parse("any"), -1);
	assert_int_equal(status_kind_parse("CronJob"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_outcome_round_trips),
		cmocka_unit_test(test_outcome_carries_the_decision_id),
		cmocka_unit_test(test_outcome_reader_is_strict),
		cmocka_unit_test(test_a_decided_job_exits_0_with_every_pods_part),
		cmocka_unit_test(test_a_slow_busbw_shows_in_the_unit_that_suits_it),
		cmocka_unit_test(test_a_round_still_proving_waits_and_a_failed_smoke_exits_6),
		cmocka_unit_test(test_without_the_gatherers_account_the_pods_say_who_is_missing),
		cmocka_unit_test(test_a_jobset_is_the_replicated_job_that_runs_nicpick),
		cmocka_unit_test(test_a_restarted_jobset_shows_its_latest_attempt),
		cmocka_unit_test(test_kind_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
