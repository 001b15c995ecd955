"""nicpick against the real API server's behaviours that the test server
has as options (tools/kubeapi/README.md, "Fidelity options", each with its
fidelity test and the real source in tests/apiserver/test_fidelity_*.py):
a re-list after 410 in any phase, a terminating gatherer beside its
replacement (graceful deletion), an Event POST that committed before its
504, anonymous requests answered 403, APF's plain-text 429s, answers
without managedFields (ManagedFieldsOptOut), and answers of metadata only
(as=PartialObjectMetadata and PartialObjectMetadataList): to a write whose
answer nicpick does not read, and to a follower's list and watch."""
import time
import urllib.parse

import pytest

import cluster as C
from test_jobs_e2e import KindPod, batch_labels, diag, seed

NS = C.NAMESPACE
ARGS = ("--expect", "2", "--log-interval", "2", "--timeout", "40")


@pytest.fixture
def cluster(clusters):
    return lambda n=2: clusters(n_nodes=n)


def agreed(c, pods=None):
    pods = c.pods if pods is None else pods
    c.wait_all(pods=pods, timeout=90)
    assert [p.rc for p in pods] == [0] * len(pods), diag(c)
    for p in pods:
        assert C.decision_of(p)["agreement"]["pods"] == 2, p.describe()


def test_a_relist_after_410_in_every_phase(cluster):
    """Before each of the first watches of each pod, the history is
    compacted: every watch that resumes from a resourceVersion (the
    gatherer's probe phase, a follower after its probe) starts with 410
    and must list again."""
    c = cluster()
    pods = c.seed_pods(2)
    c.server.set_faults([{"kind": "compact", "verb": "watch", "count": 6}])
    c.start_all(*ARGS)
    agreed(c)
    reqs = c.server.requests()
    gone = [r for r in reqs if r.get("watch_error") == 410 and r["token"] in {p.token for p in pods}]
    assert gone, diag(c)
    for r in gone:  # each 410 is followed by a list of the same pod's
        later = [q for q in reqs if q["time"] > r["time"] and q["token"] == r["token"]]
        assert any(q["verb"] == "list" for q in later), (r, diag(c))


def test_a_terminating_gatherer_beside_its_replacement(cluster):
    """The gatherer's pod is being deleted (graceful: deletionTimestamp,
    still patchable, what an earlier run left on it still there) while its
    replacement, index 0 again, runs: the replacement gathers and every
    follower follows it, not the pod on its way out."""
    c = cluster(3)
    c.server.configure(graceful_delete=True)
    own = {"apiVersion": "batch/v1", "kind": "Job", "name": "train"}
    old = KindPod(c, 0, "train-0-old", batch_labels(0), owner=own)
    old.uid = c.server.create_pod(NS, old.object())["metadata"]["uid"]
    # what a run of the old pod's nicpick left: a claim and a round
    c.server.admin("objects", {"op": "patch", "resource": "pods", "namespace": NS,
                               "name": old.name, "patch": {"metadata": {"annotations": {
                                   "nicpick.io/gatherer": '{"leader":"%s","pod":"train-0-old",'
                                                          '"v":1,"why":"x"}' % old.uid,
                                   "nicpick.io/round": '{"epoch":1,"leader":"%s","state":"probe",'
                                                       '"v":1}' % old.uid}}}})
    c.server.delete_object(NS, old.name, graceful=True, grace_period=120)
    assert c.get_pod(old.name)["metadata"].get("deletionTimestamp")
    time.sleep(1.1)  # the replacement is newer
    seed(c, [KindPod(c, 1, "train-0-new", batch_labels(0), owner=own),
             KindPod(c, 2, "train-1-ab", batch_labels(1), owner=own)])
    c.start_all(*ARGS)
    agreed(c)
    for p in c.pods:
        assert C.decision_of(p)["agreement"]["gatherer"] == (p.name == "train-0-new"), p.describe()


def test_an_event_post_that_committed_before_its_504(cluster):
    """The API server commits the first Event POST and still answers 504:
    the retry's 409 AlreadyExists means the Event is there."""
    c = cluster()
    pods = c.seed_pods(2)
    c.server.set_faults([{"kind": "commit_timeout", "verb": "create", "resource": "events",
                          "count": 2}])
    c.start_all(*ARGS)
    agreed(c)
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelected"]
    assert sorted(e["involvedObject"]["name"] for e in evs) == sorted(p.name for p in pods), evs
    for p in pods:
        assert "AlreadyExists" not in p.stderr_text and "warning: cannot" not in p.stderr_text, \
            p.describe()


def test_an_anonymous_request_is_told_apart_from_a_role(cluster):
    """No token (none given, no service-account directory): the real API
    server runs the request as system:anonymous and answers 403; nicpick
    says that no credentials were accepted, not which Role rule to add."""
    c = cluster()
    c.server.configure(anonymous_auth=True)
    pods = c.seed_pods(2)
    p = pods[0]
    argv = p.argv
    p.argv = lambda extra=(): [a for i, a in enumerate(argv(extra))
                               if a != "--token-file" and (i == 0 or argv(extra)[i - 1] != "--token-file")]
    p.start(*ARGS)
    assert p.wait(60) == 5, p.describe()
    assert "system:anonymous" in p.stderr_text, p.describe()
    assert "without credentials it accepted" in p.stderr_text, p.describe()
    assert "needs \"get\"" not in p.stderr_text, p.describe()


def test_plain_text_429s_are_retried_after_retry_after(cluster):
    """API Priority and Fairness rejects in plain text with Retry-After: 1,
    no Status: nicpick waits and retries as for a JSON 429."""
    c = cluster()
    pods = c.seed_pods(2)
    c.server.set_faults([{"kind": "error", "code": 429, "plain": True, "verb": "patch",
                          "count": 2}])
    start = time.monotonic()
    c.start_all(*ARGS)
    agreed(c)
    assert time.monotonic() - start >= 1.0  # Retry-After: 1 was honoured
    reqs = [r for r in c.server.requests() if r["status"] == 429]
    assert len(reqs) == 2, diag(c)


def test_no_managed_fields_asked_for_and_none_read(netns, nicpick_bin, tmp_path):
    """nicpick reads no managedFields, so every request asks, in each Accept
    clause, for drop=metadata.managedFields (KEP-5958).  A server without the
    ManagedFieldsOptOut gate ignores the parameter and the pods agree as
    ever; with the gate its answers leave the field out and a follower
    receives far fewer bytes (pods of a real cluster's size)."""
    got = {}
    for on in (False, True):
        c = C.Cluster(netns, tmp_path / f"gate-{on}", nicpick_bin, n_nodes=2)
        try:
            c.build().start_api()
            c.server.configure(realistic_pods=True, managed_fields_opt_out=on)
            pods = c.seed_pods(2)
            c.start_all(*ARGS)
            agreed(c)
            tokens = {p.token for p in pods}
            mine = [r for r in c.server.requests() if r["token"] in tokens]
            assert len(mine) >= 8, diag(c)
            for r in mine:
                clauses = r["accept"].split(",")
                assert all("drop=metadata.managedFields" in [p.strip() for p in x.split(";")[1:]]
                           for x in clauses), r
            by = c.server.counters()["by_token"]
            got[on] = min(by[t]["bytes_out"] for t in tokens)   # the follower
        finally:
            c.close()
    assert got[True] < 0.8 * got[False], got


def agreed_realistic(cluster):
    """Two pods of a real cluster's size agree: (the cluster, its pods,
    every request the server saw)."""
    c = cluster()
    c.server.configure(realistic_pods=True)
    pods = c.seed_pods(2)
    c.start_all(*ARGS)
    agreed(c)
    return c, pods, c.server.requests()


def accept_clauses(r):
    """A request's Accept header, clause by clause."""
    return [p.strip() for p in r["accept"].split(",")]


def test_writes_whose_answer_is_not_read_ask_for_metadata_only(cluster):
    """A pod's PATCHes (its report, its probe result, its result) and its
    Event read nothing of the answer, so each asks, as client-go's metadata
    client does for its Patch, for the object's metadata only
    (as=PartialObjectMetadata, then plain JSON); the server then encodes and
    sends no spec or status.  The GET of its own pod, which reads the spec,
    asks for the whole pod.  Pods of a real cluster's size, so the bytes
    saved are a real pod's."""
    c, pods, reqs = agreed_realistic(cluster)
    tokens = {p.token for p in pods}
    mine = [r for r in reqs if r["token"] in tokens]
    writes = [r for r in mine if r["method"] in ("PATCH", "POST")]
    assert len([r for r in writes if r["method"] == "PATCH"]) >= 6, diag(c)
    assert any(r["method"] == "POST" and "/events" in r["path"] for r in writes), diag(c)
    for r in writes:
        first, *rest = accept_clauses(r)
        assert "as=PartialObjectMetadata" in first.split(";")[1], r
        assert rest and rest[-1].split(";")[0] == "application/json", r
        assert 200 <= r["status"] < 300, r
    gets = [r for r in mine if r["method"] == "GET" and r["path"].endswith(
        tuple("/pods/" + p.name for p in pods))]
    assert gets and all("as=" not in r["accept"] for r in gets), gets


def test_lists_and_watches_ask_for_what_they_read(cluster):
    """A follower reads names, uids, labels and annotations of its own
    pod and its gatherer's, and the gatherer the same of its members: their
    lists ask for a PartialObjectMetadataList and their watches for
    PartialObjectMetadata, each with plain JSON as the last clause (as
    client-go's metadata client asks), and leave finished pods out with a
    field selector on status.phase, which metadata does not carry.  Every
    clause asks to leave managedFields out (lib/k8s/k8s_priv.h, K8S_DROP)."""
    c, (gatherer, follower), reqs = agreed_realistic(cluster)

    def of(pod, verb):
        got = [r for r in reqs if r["token"] == pod.token and r["verb"] == verb]
        assert got, (pod.name, verb, diag(c))
        return got

    def clauses(r):
        parts = accept_clauses(r)
        assert all("drop=metadata.managedFields" in p for p in parts), r
        return parts

    unfinished = "fieldSelector=" + urllib.parse.quote(
        "status.phase!=Succeeded,status.phase!=Failed", safe="")
    for verb, kind in (("list", "PartialObjectMetadataList"), ("watch", "PartialObjectMetadata")):
        for pod in (follower, gatherer):
            for r in of(pod, verb):
                first, *rest = clauses(r)
                assert f"as={kind};" in first + ";", r
                assert rest and rest[-1].split(";")[0] == "application/json", r
                assert unfinished in r["query"], r
