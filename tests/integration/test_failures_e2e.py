"""Issue 14, "no silent failures" and "inputs the API allows", end to end
with four pods in their own namespaces and the test API server (the
topology of cluster.py)."""
import json

import cluster as C
from test_agree_e2e import (COMMON, FAST_NET, assert_all_exit, assert_on_network, diag,  # noqa: F401
                            make_cluster, run_job)


def test_a_nul_in_annotations_nicpick_does_not_use_is_ignored(make_cluster):
    """The API accepts "\\u0000" in any annotation (a string), and any pod
    of the namespace may write one on the job's pods: it must not fail
    the job (it used to: exit 5 on every pod, the JSON reader refused the
    whole pod)."""
    c = make_cluster()
    # Values only: keys are qualified names, which the API validates
    # (kubernetes/kubernetes, apimachinery/pkg/api/validation/objectmeta.go,
    # ValidateAnnotations -> IsQualifiedName); a value is any string.
    for p in c.pods:
        c.server.patch_object(C.NAMESPACE, p.name, {"metadata": {"annotations": {
            "example.com/note": "before\u0000after"}}})
    got = c.get_pod(c.pods[0].name)["metadata"]["annotations"]
    assert got["example.com/note"] == "before\u0000after", got
    run_job(c, *COMMON, "--timeout", "40")
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)


def test_a_nul_in_nicpicks_own_annotation_is_refused_with_a_reason(make_cluster):
    """Where the value is used, a NUL is refused, named, not read as a
    shorter text."""
    c = make_cluster()
    started = c.pods[:3]
    c.server.patch_object(C.NAMESPACE, c.pods[3].name, {"metadata": {"annotations": {
        "nicpick.io/report": json.dumps({"v": 1, "pod": c.pods[3].name}) + "\u0000junk"}}})
    run_job(c, *COMMON, "--timeout", "8", pods=started, timeout=30)
    assert_all_exit(c, 5, started)
    for p in started:
        err = [l for l in p.describe().splitlines() if "error:" in l]
        assert err and "refused: job-w-3" in err[-1] and "NUL" in err[-1], p.describe()
