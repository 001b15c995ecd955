"""One gatherer, always: two pods of a job that each believe they gather
notice it from each other's claim (nicpick.io/gatherer, written with the
report) or, for a PyTorchJob's worker 0, from the Master pod itself; then
every pod exits 5 within seconds, long before its deadline, naming both
pods and why each gathers.  One test for each way it happens (the rule is
lib/jobs/rule.c and the README's "Which pod gathers")."""
import time

import pytest

import cluster as C
from test_jobs_e2e import KindPod, PT_OWNER, batch_labels, diag, pt_labels, seed

TIMEOUT = 60
# Well before the deadline: detection is one watch event, the failure one
# write per pod; what is left is process start-up and the first requests.
WELL_BEFORE = 15
COMMON = ("--expect", "3", "--log-interval", "2", "--timeout", str(TIMEOUT))


@pytest.fixture
def cluster3(clusters):
    return clusters(n_nodes=3)


def all_fail_fast(c, gatherers):
    start = time.monotonic()
    c.wait_all(timeout=TIMEOUT + 30)
    took = time.monotonic() - start
    assert [p.rc for p in c.pods] == [5] * len(c.pods), diag(c)
    assert took < WELL_BEFORE, (took, diag(c))
    for p in c.pods:
        # every pod says it, from its own gatherer, naming both
        assert "two pods gather this job" in p.stderr_text, p.describe()
        for g in gatherers:
            assert g in p.stderr_text, (g, p.describe())
    # Two gatherers no longer hand out rounds in turn until the deadline:
    # each pod's whole run is a handful of requests and one watch.
    cnt = c.server.counters()["by_token"]
    for p in c.pods:
        t = cnt[p.token]
        print(f"two gatherers: {p.name}: {t['requests']} requests, "
              f"{t['verbs'].get('watch', 0)} watches in {took:.2f} s")
        assert t["requests"] <= 15 and t["verbs"].get("watch", 0) <= 2, (p.name, t)
    return {p.name: p.stderr_text for p in c.pods}


def test_pytorchjob_without_master_addr(cluster3):
    """The operator put no MASTER_ADDR in the containers: the Master
    gathers by the rule, and worker 0 thinks the job has no Master."""
    c = cluster3
    seed(c, [KindPod(c, 0, "pt-master-0", pt_labels("master", 0), (), PT_OWNER),
             KindPod(c, 1, "pt-worker-0", pt_labels("worker", 0), (), PT_OWNER),
             KindPod(c, 2, "pt-worker-1", pt_labels("worker", 1), (), PT_OWNER)])
    c.start_all(*COMMON)
    errs = all_fail_fast(c, ["pt-master-0", "pt-worker-0"])
    # why each gathers: worker 0 by the Workers-only rule, for want of MASTER_ADDR
    assert "no MASTER_ADDR" in errs["pt-worker-0"], errs["pt-worker-0"]
    assert "master 0" in errs["pt-master-0"], errs["pt-master-0"]


def test_wrong_leader_selector(cluster3):
    """One pod is given a --leader-selector naming itself; the others
    follow the rule (completion index 0)."""
    c = cluster3
    seed(c, [KindPod(c, i, f"train-{i}-ab", batch_labels(i),
                     owner={"apiVersion": "batch/v1", "kind": "Job", "name": "train"})
             for i in range(3)])
    wrong = "batch.kubernetes.io/job-name=train,batch.kubernetes.io/job-completion-index=2"
    c.pods[0].start(*COMMON)
    c.pods[1].start(*COMMON)
    c.pods[2].start(*COMMON, "--leader-selector", wrong)
    errs = all_fail_fast(c, ["train-0-ab", "train-2-ab"])
    assert "--leader-selector " + wrong in errs["train-2-ab"], errs["train-2-ab"]
    assert "completion index 0" in errs["train-0-ab"], errs["train-0-ab"]


def test_two_pods_with_index_0_after_a_restart(cluster3):
    """The Job made a second pod for index 0 while the first still runs
    (its node went unreachable, say): both match the gatherer's labels.
    The rule prefers the newest pod of an index, as the gatherer counts
    it: the newer one gathers, the job agrees without the older one, and
    the older one exits 5 at once, saying it was replaced."""
    c = cluster3
    own = {"apiVersion": "batch/v1", "kind": "Job", "name": "train"}
    old = KindPod(c, 0, "train-0-old", batch_labels(0), owner=own)
    seed(c, [old])
    time.sleep(1.1)  # creationTimestamp has whole seconds
    seed(c, [KindPod(c, 1, "train-0-new", batch_labels(0), owner=own),
             KindPod(c, 2, "train-1-ab", batch_labels(1), owner=own)])
    start = time.monotonic()
    c.start_all("--expect", "2", "--log-interval", "2", "--timeout", str(TIMEOUT))
    c.wait_all(timeout=TIMEOUT + 30)
    assert time.monotonic() - start < WELL_BEFORE, diag(c)
    assert [p.rc for p in c.pods] == [5, 0, 0], diag(c)
    assert "train-0-new has this pod's job index and is newer" in old.stderr_text, old.describe()
    for p in c.pods[1:]:
        assert C.decision_of(p)["agreement"]["pods"] == 2, p.describe()
