"""Graceful pod deletion (the graceful_delete option).

Real sources (kubernetes/kubernetes):
- pkg/registry/core/pod/strategy.go, podStrategy.CheckGracefulDelete: the grace period
  is DeleteOptions.gracePeriodSeconds, else spec.terminationGracePeriodSeconds; 0 when
  the pod has no spec.nodeName or is Failed/Succeeded;
- staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go, BeforeDelete: sets
  metadata.deletionTimestamp (now + grace) and deletionGracePeriodSeconds; a second
  delete may only shorten it; staging/src/k8s.io/apiserver/pkg/registry/generic/
  registry/store.go, Delete/updateForGracefulDeletionAndFinalizers: the object is
  updated (a MODIFIED event) and stays until deleted with grace 0 (by the kubelet)."""

import calendar
import time

from apiclient import Api, pod, wait_for
from fidelity import NS, PODS, py_core, scheduled


def test_scheduled_pod_is_deleted_gracefully(make_server):
    s = make_server(graceful_delete=True)
    api = Api(s)
    s.create_pod(NS, scheduled("a", grace=2))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    w = api.watch(f"{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=6")
    r = api.req("DELETE", PODS + "/a")
    assert r.status == 200 and r.body["kind"] == "Pod"
    md = r.body["metadata"]
    assert md["deletionGracePeriodSeconds"] == 2 and md["deletionTimestamp"].endswith("Z")
    # still there, and annotation patches still succeed while it terminates
    got = api.get(PODS + "/a")
    assert got.status == 200 and got.body["metadata"]["deletionTimestamp"]
    p = api.req("PATCH", PODS + "/a", {"metadata": {"annotations": {"k": "v"}}},
                ctype="application/merge-patch+json")
    assert p.status == 200 and p.body["metadata"]["deletionTimestamp"] == md["deletionTimestamp"]
    # a patch cannot remove the deletionTimestamp
    p = api.req("PATCH", PODS + "/a", {"metadata": {"deletionTimestamp": None}},
                ctype="application/merge-patch+json")
    assert p.body["metadata"]["deletionTimestamp"] == md["deletionTimestamp"]
    evs = w.events(4)
    w.close()
    assert [e["type"] for e in evs] == ["MODIFIED", "MODIFIED", "DELETED"]
    assert evs[0]["object"]["metadata"]["deletionTimestamp"]
    assert api.get(PODS + "/a").status == 404


def test_unscheduled_or_finished_pods_and_grace_zero_are_deleted_at_once(make_server):
    s = make_server(graceful_delete=True)
    api = Api(s)
    s.create_pod(NS, pod("pending"))                       # no nodeName
    s.create_pod(NS, scheduled("done", phase="Succeeded"))
    s.create_pod(NS, scheduled("now"))
    assert api.req("DELETE", PODS + "/pending").status == 200
    assert api.req("DELETE", PODS + "/done").status == 200
    assert api.req("DELETE", PODS + "/now", {"gracePeriodSeconds": 0}).status == 200
    for n in ("pending", "done", "now"):
        assert api.get(PODS + "/" + n).status == 404


def test_second_delete_only_shortens_the_grace(make_server):
    s = make_server(graceful_delete=True)
    api = Api(s)
    s.create_pod(NS, scheduled("a"))                       # default 30 s
    first = api.req("DELETE", PODS + "/a").body["metadata"]
    assert first["deletionGracePeriodSeconds"] == 30
    again = api.req("DELETE", PODS + "/a", {"gracePeriodSeconds": 60}).body["metadata"]
    assert again == first
    short = api.req("DELETE", PODS + "/a?gracePeriodSeconds=1").body["metadata"]
    assert short["deletionGracePeriodSeconds"] == 1
    assert wait_for(lambda: api.get(PODS + "/a").status == 404, timeout=5)


def test_python_client_and_kubectl_see_a_terminating_pod(make_server, kubectl, tmp_path):
    import os
    import subprocess
    from kubernetes import client
    s = make_server(graceful_delete=True)
    v1, c = py_core(s)
    s.create_pod(NS, scheduled("a", grace=30))
    v1.delete_namespaced_pod("a", NS, body=client.V1DeleteOptions())
    p = v1.read_namespaced_pod("a", NS)
    assert p.metadata.deletion_timestamp is not None
    assert p.metadata.deletion_grace_period_seconds == 30
    env = dict(os.environ, HOME=str(tmp_path), KUBECONFIG=s.kubeconfig_path)
    r = subprocess.run([kubectl, "get", "pod", "a", "--no-headers"], capture_output=True,
                       text=True, env=env, timeout=30)
    assert r.returncode == 0 and "Terminating" in r.stdout, r.stdout + r.stderr
    c.close()


def test_default_deletes_at_once_and_admin_delete_can_be_graceful(make_server, monkeypatch):
    monkeypatch.delenv("KUBEAPI_FIDELITY", raising=False)
    s = make_server()
    api = Api(s)
    s.create_pod(NS, scheduled("a"))
    assert api.req("DELETE", PODS + "/a").status == 200
    assert api.get(PODS + "/a").status == 404
    s.create_pod(NS, scheduled("b", grace=2))
    got = s.delete_object(NS, "b", graceful=True)
    assert got["metadata"]["deletionGracePeriodSeconds"] == 2
    assert api.get(PODS + "/b").status == 200
    assert wait_for(lambda: api.get(PODS + "/b").status == 404, timeout=6)
    # removed at the deletionTimestamp (to the second it is written with), not before
    assert time.time() >= calendar.timegm(time.strptime(
        got["metadata"]["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - 1
