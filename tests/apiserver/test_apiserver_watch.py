"""Watches: initial events, resume, timeoutSeconds, bookmarks, selector
transitions, 410 and 504, dropped streams, Table output, many watches at once."""

import json
import socket
import ssl
import threading
import time

import pytest

from apiclient import Api, pod, wait_for
from apicommon import NS, PODS


def test_watch_initial_added_then_live_events(server, api):
    server.create_pod(NS, pod("a"))
    w = api.watch(PODS + "?watch=1&timeoutSeconds=3")
    assert w.status == 200 and w.r.getheader("Transfer-Encoding") == "chunked"
    e = w.next()
    assert e["type"] == "ADDED" and e["object"]["kind"] == "Pod"
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    e = w.next()
    assert e["type"] == "MODIFIED" and e["object"]["metadata"]["labels"] == {"x": "1"}
    server.delete_object(NS, "a")
    e = w.next()
    assert e["type"] == "DELETED"
    w.close()


def test_watch_resume_gets_exactly_missed_events(server, api):
    server.create_pod(NS, pod("a"))
    server.create_pod(NS, pod("c"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    server.patch_object(NS, "a", {"metadata": {"annotations": {"k": "1"}}})
    server.create_pod(NS, pod("b"))
    api.req("POST", f"/api/v1/namespaces/{NS}/events", {"metadata": {"name": "e"}})
    server.delete_object(NS, "c")
    w = api.watch(PODS + f"?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    evs = w.events()
    w.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == \
        [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "c")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_watch_timeout_seconds_ends_cleanly(api):
    t = time.monotonic()
    w = api.watch(PODS + "?watch=1&timeoutSeconds=1")
    assert w.events() == []
    assert 0.9 <= time.monotonic() - t < 3
    w.close()


def test_watch_bookmarks_arrive(server, api):
    server.configure(bookmark_interval=0.2)
    server.create_pod(NS, pod("a"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}&allowWatchBookmarks=true"
                  "&timeoutSeconds=1")
    evs = w.events()
    w.close()
    bms = [e for e in evs if e["type"] == "BOOKMARK"]
    assert len(bms) >= 3 and len(bms) == len(evs)
    assert bms[0]["object"] == {"kind": "Pod", "apiVersion": "v1", "metadata": {
        "resourceVersion": rv, "creationTimestamp": None}, "spec": {"containers": None},
        "status": {}}
    # Without allowWatchBookmarks there are none.
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert w.events() == []
    w.close()


def test_watch_send_initial_events_ends_with_annotated_bookmark(server, api):
    server.create_pod(NS, pod("a"))
    w = api.watch(PODS + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                  "&allowWatchBookmarks=true&timeoutSeconds=1")
    evs = w.events(2)
    w.close()
    assert evs[0]["type"] == "ADDED"
    assert evs[1]["type"] == "BOOKMARK"
    assert evs[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_label_selector_transitions(server, api):
    """Real: an object entering the selector is ADDED, one leaving it is DELETED."""
    server.create_pod(NS, pod("a", {"role": "x"}))
    server.create_pod(NS, pod("b", {"role": "y"}))
    w = api.watch(PODS + "?watch=1&labelSelector=role%3Dx&timeoutSeconds=3")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in w.events(1)] == [("ADDED", "a")]
    server.patch_object(NS, "b", {"metadata": {"labels": {"role": "x"}}})
    server.patch_object(NS, "a", {"metadata": {"labels": {"role": "z"}}})
    server.patch_object(NS, "b", {"metadata": {"annotations": {"k": "v"}}})
    evs = w.events(3)
    w.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == \
        [("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b")]
    assert evs[1]["object"]["metadata"]["labels"] == {"role": "x"}   # its last matching state


def test_watch_field_selector_single_object(server, api):
    server.create_pod(NS, pod("a"))
    server.create_pod(NS, pod("b"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    w = api.watch(PODS + f"?watch=1&fieldSelector=metadata.name%3Db&resourceVersion={rv}"
                  "&timeoutSeconds=1")
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    server.patch_object(NS, "b", {"metadata": {"labels": {"x": "1"}}})
    evs = w.events()
    w.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("MODIFIED", "b")]


def test_watch_too_old_resource_version_is_error_event(make_server):
    s = make_server(history=3)
    api = Api(s)
    s.create_pod(NS, pod("a"))
    old = int(api.get(PODS).body["metadata"]["resourceVersion"])
    for i in range(5):
        s.patch_object(NS, "a", {"metadata": {"labels": {"i": str(i)}}})
    w = api.watch(PODS + f"?watch=1&resourceVersion={old}")
    assert w.status == 200                       # Real: 200 + one ERROR event, then the end
    evs = w.events()
    w.close()
    floor = int(s.state()["floor"])
    assert evs == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {old} ({floor})", "reason": "Expired",
        "code": 410}}]
    # From the floor itself the watch works.
    w = api.watch(PODS + f"?watch=1&resourceVersion={floor}&timeoutSeconds=1")
    assert [e["type"] for e in w.events()] == ["MODIFIED"] * 3
    w.close()


def test_watch_expire_fault_forces_410(server, api):
    server.create_pod(NS, pod("a"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    server.add_fault(kind="expire_watch")
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}")
    e = w.events()
    w.close()
    assert e[0]["type"] == "ERROR" and e[0]["object"]["code"] == 410
    assert e[0]["object"]["message"].startswith(f"too old resource version: {rv} (")
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert w.events() == []
    w.close()


def test_watch_future_resource_version_times_out_504(server, api):
    rv = int(api.get(PODS).body["metadata"]["resourceVersion"])
    t = time.monotonic()
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv + 100}")
    e = w.events()
    w.close()
    assert 2.5 < time.monotonic() - t < 6
    assert e[0]["type"] == "ERROR" and e[0]["object"]["code"] == 504
    assert e[0]["object"]["message"] == f"Too large resource version: {rv + 100}, current: {rv}"


def _raw_get(server, path, timeout=10):
    """GET over a fresh TLS socket, returning every byte until the server closes."""
    ctx = ssl.create_default_context(cafile=server.ca_path)
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}"
                      "\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except (ssl.SSLError, ConnectionResetError):
                    break
                if not chunk:
                    break
                data += chunk
            return data


def test_watch_dropped_after_events(server):
    for n in "abc":
        server.create_pod(NS, pod(n))
    server.add_fault(kind="drop_watch", after_events=2)
    t = time.monotonic()
    data = _raw_get(server, PODS + "?watch=1")
    assert time.monotonic() - t < 3
    head, body = data.split(b"\r\n\r\n", 1)
    assert b"200 OK" in head and b"Transfer-Encoding: chunked" in head
    assert body.count(b'"type":"ADDED"') == 2
    assert not body.endswith(b"0\r\n\r\n")                   # no terminating chunk
    # A clean end has the terminating chunk.
    body = _raw_get(server, PODS + "?watch=1&timeoutSeconds=1").split(b"\r\n\r\n", 1)[1]
    assert body.count(b'"type":"ADDED"') == 3 and body.endswith(b"0\r\n\r\n")


def test_watch_dropped_mid_event(server, api):
    server.create_pod(NS, pod("a"))
    server.add_fault(kind="drop_watch", after_events=0, partial=True)
    w = api.watch(PODS + "?watch=1")
    import http.client
    with pytest.raises((http.client.IncompleteRead, ValueError, OSError)):
        w.next()
    w.close()


def test_watch_dropped_after_seconds(server, api):
    server.add_fault(kind="drop_watch", after_seconds=0.5)
    t = time.monotonic()
    data = _raw_get(server, PODS + "?watch=1")
    assert 0.4 < time.monotonic() - t < 3
    assert not data.endswith(b"0\r\n\r\n")


def test_watch_table_for_kubectl_human_output(server, api):
    server.create_pod(NS, pod("a"))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    c = api.conn()
    c.request("GET", PODS + "?watch=1&timeoutSeconds=1", headers=api.headers({"Accept": accept}))
    r = c.getresponse()
    first = json.loads(r.readline())
    c.close()
    assert first["object"]["kind"] == "Table"
    assert first["object"]["columnDefinitions"][0]["name"] == "Name"
    assert first["object"]["rows"][0]["cells"][0] == "a"


def test_256_concurrent_watches_all_get_the_event(make_server):
    s = make_server(subprocess=True)
    s.create_pod(NS, pod("hub"))
    rv = Api(s).get(PODS).body["metadata"]["resourceVersion"]
    n, got, errors = 256, [], []
    ready = threading.Barrier(n + 1, timeout=60)
    lock = threading.Lock()

    def watcher(i):
        try:
            a = Api(s, user_agent=f"w{i}")
            w = a.watch(PODS + f"?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3Dhub"
                        "&timeoutSeconds=30", timeout=30)
            ready.wait()
            e = w.next()
            with lock:
                got.append((time.monotonic(), e["type"]))
            w.close()
        except Exception as e:   # noqa: BLE001
            errors.append(repr(e))
            try:
                ready.abort()
            except Exception:    # noqa: BLE001
                pass

    old = threading.stack_size(512 * 1024)
    threads = [threading.Thread(target=watcher, args=(i,), daemon=True) for i in range(n)]
    threading.stack_size(old)
    for t in threads:
        t.start()
    ready.wait()
    assert wait_for(lambda: s.state()["watchers"] >= n, timeout=30), s.state()
    t0 = time.monotonic()
    s.patch_object(NS, "hub", {"metadata": {"annotations": {"go": "1"}}})
    for t in threads:
        t.join(timeout=10)
    assert not errors, errors[:3]
    assert len(got) == n and all(typ == "MODIFIED" for _, typ in got)
    assert max(t for t, _ in got) - t0 < 3.0


def test_watch_resume_backlog_is_sent_at_once(make_server):
    s = make_server(bookmark_interval=30)
    api = Api(s)
    s.create_pod(NS, pod("a"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    s.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}&allowWatchBookmarks=true")
    t = time.monotonic()
    e = w.next()
    w.close()
    assert e["type"] == "MODIFIED" and time.monotonic() - t < 0.5
