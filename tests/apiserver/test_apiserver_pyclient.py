"""tools/kubeapi against the Python kubernetes client: selectors, reads, strategic
merge patches, events, watches, 410 after compaction, pagination, 401."""

import os
import threading

import pytest

from apiclient import pod, wait_for
from apicommon import NS


@pytest.fixture
def core(server):
    from kubernetes import client, config
    api_client = config.new_client_from_config(config_file=server.kubeconfig_path)
    yield client.CoreV1Api(api_client)
    api_client.close()


def test_py_list_with_label_and_field_selector(core, server):
    server.create_pod(NS, pod("a", {"job": "j", "role": "w"}, phase="Running"))
    server.create_pod(NS, pod("b", {"job": "j", "role": "m"}, phase="Pending"))
    server.create_pod(NS, pod("c", {"job": "k"}, phase="Running"))
    r = core.list_namespaced_pod(NS, label_selector="job=j")
    assert [p.metadata.name for p in r.items] == ["a", "b"]
    r = core.list_namespaced_pod(NS, label_selector="job in (j,k),role!=m",
                                 field_selector="status.phase=Running")
    assert [p.metadata.name for p in r.items] == ["a", "c"]
    r = core.list_namespaced_pod(NS, field_selector="metadata.name=b")
    assert [p.metadata.name for p in r.items] == ["b"]


def test_py_read_pod(core, server):
    created = server.create_pod(NS, pod("a", {"x": "1"}, node="n1"))
    p = core.read_namespaced_pod("a", NS)
    assert p.metadata.uid == created["metadata"]["uid"]
    assert p.spec.node_name == "n1" and p.metadata.labels == {"x": "1"}


def test_py_patch_sends_strategic_merge_and_merges_annotations(core, server):
    server.create_pod(NS, pod("a", annotations={"keep": "1"}))
    p = core.patch_namespaced_pod("a", NS, {"metadata": {"annotations": {"new": "2"}}})
    assert p.metadata.annotations == {"keep": "1", "new": "2"}
    assert [r["content_type"] for r in server.requests() if r["method"] == "PATCH"] == \
        ["application/strategic-merge-patch+json"]
    # A list body is sent as a JSON patch.
    p = core.patch_namespaced_pod("a", NS, [{"op": "remove", "path": "/metadata/annotations/keep"}])
    assert p.metadata.annotations == {"new": "2"}
    assert server.requests()[-1]["content_type"] == "application/json-patch+json"


def test_py_create_event(core, server):
    from kubernetes import client
    server.create_pod(NS, pod("a"))
    ev = core.create_namespaced_event(NS, client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="a.1"), reason="R", message="M", type="Normal",
        involved_object=client.V1ObjectReference(kind="Pod", name="a", namespace=NS)))
    assert ev.metadata.uid and ev.metadata.namespace == NS
    got = core.list_namespaced_event(NS, field_selector="involvedObject.name=a,reason=R")
    assert [e.metadata.name for e in got.items] == ["a.1"]


def test_py_watch_added_modified_bookmark(core, server):
    from kubernetes import watch
    server.create_pod(NS, pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    threading.Timer(0.2, lambda: server.create_pod(NS, pod("b"))).start()
    threading.Timer(0.4, lambda: server.patch_object(NS, "a", {"metadata": {
        "labels": {"m": "1"}}})).start()
    seen = []
    for e in watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv,
                                  allow_watch_bookmarks=True, timeout_seconds=2):
        seen.append((e["type"], e["raw_object"]["metadata"].get("name")))
    assert [x for x in seen if x[0] != "BOOKMARK"] == [("ADDED", "b"), ("MODIFIED", "a")], seen
    assert ("BOOKMARK", None) in seen


def test_py_watch_too_old_resource_version_raises_410(core, server):
    from kubernetes import client, watch
    server.create_pod(NS, pod("a"))
    old = core.list_namespaced_pod(NS).metadata.resource_version
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    server.compact()
    # With timeout_seconds the client does not retry: the ERROR event raises at once.
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=old,
                                  timeout_seconds=5))
    assert ei.value.status == 410
    assert "Expired: too old resource version: %s" % old in ei.value.reason
    # Without it, the client retries once from the same resourceVersion, then raises.
    server.requests(clear=True)
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=old))
    assert ei.value.status == 410
    assert len([r for r in server.requests() if r["verb"] == "watch"]) == 2


def test_py_watch_start_after_compaction_raises_410(core, server):
    """A compaction between the client's list and its watch (the "compact" fault:
    another write, then the history is dropped): the watch starts with 410."""
    from kubernetes import client, watch
    server.create_pod(NS, pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    server.add_fault(kind="compact", verb="watch")
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv,
                                  timeout_seconds=5))
    assert ei.value.status == 410
    assert int(server.state()["floor"]) > int(rv)
    # Nothing else is injected: an exact list from that resourceVersion is gone too.
    with pytest.raises(client.ApiException) as ei:
        core.list_namespaced_pod(NS, resource_version=rv, resource_version_match="Exact")
    assert ei.value.status == 410


def test_py_periodic_compaction_expires_a_lagging_resource_version(core, make_server):
    from kubernetes import client, config, watch
    s = make_server(compact_interval=0.2)
    c = config.new_client_from_config(config_file=s.kubeconfig_path)
    v1 = client.CoreV1Api(c)
    s.create_pod(NS, pod("a"))
    rv = v1.list_namespaced_pod(NS).metadata.resource_version
    s.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    wait_for(lambda: int(s.state()["floor"]) > int(rv), timeout=5)
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(v1.list_namespaced_pod, NS, resource_version=rv,
                                  timeout_seconds=5))
    assert ei.value.status == 410
    c.close()


def test_py_list_pagination(core, server):
    for i in range(5):
        server.create_pod(NS, pod(f"p{i}"))
    first = core.list_namespaced_pod(NS, limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    server.create_pod(NS, pod("p10"))    # after the snapshot: not in the continued list
    second = core.list_namespaced_pod(NS, limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in second.items] == ["p2", "p3", "p4"]
    assert second.metadata.resource_version == first.metadata.resource_version


def test_py_wrong_token_401(server):
    from kubernetes import client, config
    cfg = server.write_kubeconfig(os.path.join(server.state_dir, "bad"), token="bad")
    c = config.new_client_from_config(config_file=cfg)
    with pytest.raises(client.ApiException) as ei:
        client.CoreV1Api(c).list_namespaced_pod(NS)
    assert ei.value.status == 401
    c.close()
