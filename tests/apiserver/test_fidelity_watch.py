"""Watch history and content negotiation of watches, as kube-apiserver's watch cache
serves them.

Real sources (kubernetes/kubernetes):
- staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go: eventFreshDuration = 75 s
  ("time duration of events we want to keep"), watch_cache.go / watch_cache_history:
  an event older than that is dropped once the cache is full; a watch from a dropped
  resourceVersion gets "too old resource version" (410 Expired);
- cacher.go: bookmarkFrequency = time.Minute (the test server's bookmark_interval);
- staging/src/k8s.io/apiserver/pkg/endpoints/handlers/response.go, transformObject /
  asPartialObjectMetadata: Accept as=PartialObjectMetadata turns each watch object into
  kind PartialObjectMetadata, apiVersion meta.k8s.io/v1, with the full metadata."""

import time

import json

from apiclient import Api, pod
from fidelity import META_ONE, NS, PODS, py_core


def test_history_seconds_expires_old_resource_versions(make_server):
    s = make_server(history_seconds=2)
    api = Api(s)
    s.create_pod(NS, pod("a"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    s.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    # within the window the watch resumes from rv
    w = api.watch(f"{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert [e["type"] for e in w.events(1)] == ["MODIFIED"]
    w.close()
    time.sleep(2.3)
    s.patch_object(NS, "a", {"metadata": {"labels": {"x": "2"}}})  # a write after the window
    w = api.watch(f"{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    ev = w.events(1)[0]
    w.close()
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
    assert ev["object"]["reason"] == "Expired"
    assert ev["object"]["message"].startswith(f"too old resource version: {rv} (")


def test_history_window_is_for_watches_only_lists_read_etcd(make_server):
    # Real: a continue token or an Exact list is served from etcd (storage/etcd3), whose
    # history only compaction (5 min) shortens, not the watch cache's window.
    s = make_server(history_seconds=0.3)
    api = Api(s)
    for i in range(3):
        s.create_pod(NS, pod(f"p{i}"))
    first = api.get(PODS + "?limit=1").body
    s.patch_object(NS, "p1", {"metadata": {"labels": {"x": "1"}}})
    time.sleep(0.5)
    s.patch_object(NS, "p2", {"metadata": {"labels": {"x": "1"}}})
    assert int(s.state()["watch_floor"]) > int(first["metadata"]["resourceVersion"])
    rest = api.get(PODS + "?continue=" + first["metadata"]["continue"])
    assert rest.status == 200
    assert [p["metadata"]["name"] for p in rest.body["items"]] == ["p1", "p2"]
    assert "labels" not in rest.body["items"][0]["metadata"] or \
        rest.body["items"][0]["metadata"]["labels"] == {}       # the snapshot's state
    rv = first["metadata"]["resourceVersion"]
    assert api.get(f"{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact").status == 200


def test_history_seconds_default_is_the_real_75_seconds(make_server, monkeypatch):
    monkeypatch.delenv("KUBEAPI_FIDELITY", raising=False)
    assert make_server().configure()["history_seconds"] == 75
    assert make_server(history_seconds=0).configure()["history_seconds"] == 0


def test_python_client_watch_gets_410_after_history_window(make_server):
    import pytest
    from kubernetes import client, watch
    s = make_server(history_seconds=0.3)
    v1, c = py_core(s)
    s.create_pod(NS, pod("a"))
    rv = v1.list_namespaced_pod(NS).metadata.resource_version
    s.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    time.sleep(0.5)
    s.patch_object(NS, "a", {"metadata": {"labels": {"x": "2"}}})
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(v1.list_namespaced_pod, NS, resource_version=rv,
                                  timeout_seconds=2))
    assert ei.value.status == 410
    c.close()


def test_metadata_only_watch(server):
    api = Api(server)
    server.create_pod(NS, pod("a", {"app": "x"}))
    c = api.conn()
    c.request("GET", PODS + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=2",
              headers=api.headers({"Accept": META_ONE}))
    r = c.getresponse()
    assert r.status == 200
    first = json.loads(r.readline())
    server.patch_object(NS, "a", {"metadata": {"labels": {"app": "y"}}})
    second = json.loads(r.readline())
    bm = None
    while bm is None:
        e = json.loads(r.readline())
        if e["type"] == "BOOKMARK":
            bm = e
    c.close()
    for e, typ in ((first, "ADDED"), (second, "MODIFIED")):
        assert e["type"] == typ
        o = e["object"]
        assert o["kind"] == "PartialObjectMetadata" and o["apiVersion"] == "meta.k8s.io/v1"
        assert set(o) == {"kind", "apiVersion", "metadata"}
        assert o["metadata"]["name"] == "a" and o["metadata"]["uid"]
    assert second["object"]["metadata"]["labels"] == {"app": "y"}
    assert bm["object"]["kind"] == "PartialObjectMetadata"
    assert bm["object"]["metadata"]["resourceVersion"]


def test_metadata_only_watch_error_event_stays_a_status(server):
    api = Api(server)
    server.create_pod(NS, pod("a"))
    server.compact()
    c = api.conn()
    c.request("GET", PODS + "?watch=1&resourceVersion=1&timeoutSeconds=2",
              headers=api.headers({"Accept": META_ONE}))
    r = c.getresponse()
    e = json.loads(r.readline())
    c.close()
    assert e["type"] == "ERROR" and e["object"]["kind"] == "Status"
    assert e["object"]["code"] == 410


def test_bookmark_interval_defaults_to_the_real_minute(make_server, monkeypatch):
    monkeypatch.delenv("KUBEAPI_FIDELITY", raising=False)
    assert make_server(bookmark_interval=None).configure()["bookmark_interval"] == 60
    s = make_server(bookmark_interval=60)
    api = Api(s)
    s.create_pod(NS, pod("a"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    w = api.watch(f"{PODS}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
                  "&timeoutSeconds=2", timeout=10)
    assert w.events() == []       # no bookmark within 2 s, as a real server's 60 s
    w.close()


def test_a_pod_that_finishes_leaves_a_metadata_watch_by_phase_as_deleted(server, api):
    """nicpick's watches of a job's pods: metadata only, fieldSelector
    status.phase!=Succeeded,status.phase!=Failed.  Real: the cacher filters the whole
    object, before the handler turns it into PartialObjectMetadata
    (storage/cacher/cache_watcher.go, convertToWatchEvent: an object that stops passing
    the filter is a Deleted event of its previous state; endpoints/handlers/response.go
    converts what is sent); the selectable fields of a pod include status.phase
    (pkg/registry/core/pod/strategy.go, PodToSelectableFields).  A list with the same
    selector leaves finished pods out."""
    sel = "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"
    for name in ("a", "b", "done"):
        server.create_pod(NS, pod(name, {"app": "x"}))
    server.patch_object(NS, "done", {"status": {"phase": "Succeeded"}})
    lst = api.get(f"{PODS}?{sel}", headers={"Accept": META_ONE.replace(
        "PartialObjectMetadata", "PartialObjectMetadataList")}).body
    assert sorted(p["metadata"]["name"] for p in lst["items"]) == ["a", "b"]
    rv = lst["metadata"]["resourceVersion"]
    c = api.conn()
    c.request("GET", f"{PODS}?watch=1&{sel}&resourceVersion={rv}&timeoutSeconds=2",
              headers=api.headers({"Accept": META_ONE}))
    r = c.getresponse()
    assert r.status == 200
    server.patch_object(NS, "a", {"metadata": {"labels": {"step": "1"}}})
    server.patch_object(NS, "a", {"status": {"phase": "Failed"}})
    server.patch_object(NS, "b", {"metadata": {"labels": {"step": "1"}}})
    evs = [json.loads(r.readline()) for _ in range(3)]
    c.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == \
        [("MODIFIED", "a"), ("DELETED", "a"), ("MODIFIED", "b")]
    gone = evs[1]["object"]
    assert gone["kind"] == "PartialObjectMetadata" and "status" not in gone
    assert gone["metadata"]["labels"] == {"app": "x", "step": "1"}  # its last matching state
