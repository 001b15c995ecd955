"""The server's counters (by token, by user agent, exact bytes), token rotation
and the request log."""

import json
import os
import socket
import ssl

from apiclient import Api, pod
from apicommon import NS, PODS, USER


def test_counters_by_token_and_user_agent(server):
    server.set_tokens({"tok-a": "system:serviceaccount:ml:pod-a",
                       "tok-b": "system:serviceaccount:ml:pod-b"})
    server.reset_counters()
    a, b = Api(server, "tok-a", "nicpick/pod-a"), Api(server, "tok-b", "nicpick/pod-b")
    for _ in range(3):
        a.get(PODS)
    b.get(PODS + "/missing")
    c = server.counters()
    assert c["by_token"]["tok-a"]["requests"] == 3
    assert c["by_token"]["tok-a"]["user"] == "system:serviceaccount:ml:pod-a"
    assert c["by_token"]["tok-a"]["verbs"] == {"list": 3}
    assert c["by_token"]["tok-b"]["requests"] == 1
    assert c["by_user_agent"]["nicpick/pod-a"]["requests"] == 3
    assert c["by_user"]["system:serviceaccount:ml:pod-b"]["verbs"] == {"get": 1}
    assert c["total"]["requests"] == 4
    assert c["by_token"]["tok-a"]["bytes_out"] > 3 * 100
    c = server.counters(reset=True)
    assert c["total"]["requests"] == 4
    assert server.counters()["total"]["requests"] == 0


def test_counters_count_exact_bytes(server):
    server.reset_counters()
    req = (f"GET {PODS} HTTP/1.1\r\nHost: x\r\nUser-Agent: exact\r\n"
           f"Authorization: Bearer {server.token}\r\nConnection: close\r\n\r\n").encode()
    ctx = ssl.create_default_context(cafile=server.ca_path)
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)),
                         server_hostname="127.0.0.1") as s:
        s.sendall(req)
        resp = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            resp += d
    c = server.counters()["by_user_agent"]["exact"]
    assert c == {"requests": 1, "bytes_in": len(req), "bytes_out": len(resp),
                 "verbs": {"list": 1}}


def test_counters_count_a_request_body_once(server):
    server.reset_counters()
    body = json.dumps(pod("exact")).encode()
    req = (f"POST {PODS} HTTP/1.1\r\nHost: x\r\nUser-Agent: exact\r\n"
           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
           f"Authorization: Bearer {server.token}\r\nConnection: close\r\n\r\n").encode() + body
    ctx = ssl.create_default_context(cafile=server.ca_path)
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)),
                         server_hostname="127.0.0.1") as s:
        s.sendall(req)
        while s.recv(65536):
            pass
    assert server.counters()["by_user_agent"]["exact"]["bytes_in"] == len(req)


def test_counters_include_watch_stream_bytes(server, api):
    server.reset_counters()
    server.create_pod(NS, pod("a"))
    w = api.watch(PODS + "?watch=1&timeoutSeconds=1")
    evs = w.events()
    w.close()
    c = server.counters()["by_token"][server.token]
    assert c["verbs"] == {"watch": 1}
    assert c["bytes_out"] > len(json.dumps(evs[0]))


def test_token_rotation(server):
    old = server.token
    assert Api(server, old).get(PODS).status == 200
    server.set_tokens({"rotated": USER}, remove=[old], write_token="rotated")
    assert Api(server, old).get(PODS).status == 401
    assert Api(server, "rotated").get(PODS).status == 200
    with open(os.path.join(server.state_dir, "token")) as f:
        assert f.read().strip() == "rotated"
    with open(os.path.join(server.state_dir, "serviceaccount", "token")) as f:
        assert f.read() == "rotated"


def test_request_log_records_what_clients_send(server, api):
    api.req("POST", PODS, pod("a"))
    api.req("PATCH", PODS + "/a", {"metadata": {}}, ctype="application/merge-patch+json")
    log = server.requests()
    assert [(r["verb"], r["resource"], r["name"], r["status"]) for r in log] == \
        [("create", "pods", "", 201), ("patch", "pods", "a", 200)]
