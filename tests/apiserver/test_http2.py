"""tools/kubeapi over HTTP/2, as kube-apiserver serves it (Go's net/http with
golang.org/x/net/http2; ALPN "h2", "http/1.1": apiserver/pkg/server/secure_serving.go
tlsConfig): checked with kubectl (client-go negotiates h2), the curl CLI (nghttp2), the
Python kubernetes client (urllib3: HTTP/1.1 only) and a small client on the h2 library
for what the others cannot show (settings, windows, frames, resets)."""

import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import pytest

from apiclient import pod, wait_for, ROOT
from apicommon import NS, PODS, status_shape

from tools import kubeapi


# ---- helpers
def alpn(server, offer):
    """The protocol the server picks for a client offering `offer` (None: no ALPN)."""
    ctx = ssl.create_default_context(cafile=server.ca_path)
    if offer is not None:
        ctx.set_alpn_protocols(offer)
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=10),
                         server_hostname="127.0.0.1") as s:
        return s.selected_alpn_protocol()


def curl(server, *args, token=None, timeout=60, input=None):
    return subprocess.run(["curl", "-sS", "--cacert", server.ca_path, "-H",
                           f"Authorization: Bearer {token or server.token}", *args],
                          capture_output=True, text=True, timeout=timeout, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)


def conns_of(server, token):
    return server.counters()["connections"]["by_token"].get(token)


class H2Client:
    """A bare HTTP/2 client (h2 library) that records frames, windows and resets."""

    def __init__(self, server, token=None, window=None, ack=True):
        ctx = ssl.create_default_context(cafile=server.ca_path)
        ctx.set_alpn_protocols(["h2"])
        self.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port),
                                                             timeout=10),
                                    server_hostname="127.0.0.1")
        assert self.sock.selected_alpn_protocol() == "h2"
        self.token = token or server.token
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8"))
        self.c.initiate_connection()
        if window is not None:
            self.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.ack = ack
        self.streams, self.settings, self.terminated, self.eof = {}, {}, None, False
        self.flush()

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method, path, body=None, ctype="application/json", headers=()):
        sid = self.c.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "https"),
                (":authority", "127.0.0.1"), ("accept", "application/json"),
                ("user-agent", "h2-test")]
        if self.token:
            hdrs.append(("authorization", f"Bearer {self.token}"))
        if body is not None:
            body = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs += [("content-type", ctype), ("content-length", str(len(body)))]
        hdrs += list(headers)
        self.streams[sid] = {"headers": None, "data": bytearray(), "frames": [],
                             "ended": False, "reset": None}
        self.c.send_headers(sid, hdrs, end_stream=body is None)
        if body is not None:
            self._send_body(sid, body)
        self.flush()
        return sid

    def _send_body(self, sid, body):
        off = 0
        while off < len(body):
            room = min(self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size)
            if room <= 0:
                self.flush()
                self.pump(lambda: self.c.local_flow_control_window(sid) > 0, 10)
                continue
            self.c.send_data(sid, body[off:off + room], end_stream=off + room >= len(body))
            off += room
        self.flush()

    def pump(self, until, timeout=10.0):
        """Read frames until until() holds (or the connection ends); False on timeout."""
        deadline = time.monotonic() + timeout
        while not until():
            if self.eof or time.monotonic() > deadline:
                return until()
            self.sock.settimeout(max(0.01, min(0.2, deadline - time.monotonic())))
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, ssl.SSLWantReadError):
                continue
            except (ConnectionResetError, ssl.SSLError, OSError):
                data = b""
            if not data:
                self.eof = True
                continue
            for ev in self.c.receive_data(data):
                self.event(ev)
            self.flush()
        return True

    def event(self, ev):
        st = self.streams.get(getattr(ev, "stream_id", None) or 0)
        if isinstance(ev, h2.events.ResponseReceived):
            st["headers"] = dict(ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            st["data"] += ev.data
            st["frames"].append(len(ev.data))
            if self.ack:
                self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            st["ended"] = True
        elif isinstance(ev, h2.events.StreamReset):
            st["reset"] = ev.error_code
        elif isinstance(ev, h2.events.RemoteSettingsChanged):
            self.settings.update({k: v.new_value for k, v in ev.changed_settings.items()})
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.terminated = ev

    def done(self, sid):
        st = self.streams[sid]
        return lambda: st["ended"] or st["reset"] is not None

    def get(self, path, timeout=10):
        sid = self.request("GET", path)
        assert self.pump(self.done(sid), timeout), f"no answer to GET {path}"
        return self.answer(sid)

    def answer(self, sid):
        st = self.streams[sid]
        return int(st["headers"][":status"]), st["headers"], bytes(st["data"])

    def events(self, sid):
        return [json.loads(line) for line in bytes(self.streams[sid]["data"]).splitlines()
                if line.strip()]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


@pytest.fixture
def h2c(server):
    clients = []

    def make(**kw):
        clients.append(H2Client(server, **kw))
        return clients[-1]
    yield make
    for c in clients:
        c.close()


# ---- negotiation and settings
def test_alpn_prefers_h2_and_still_speaks_http11(server, api):
    # Real: NextProtos {"h2", "http/1.1"} (secure_serving.go tlsConfig); Go's net/http
    # serves HTTP/1.1 to a client that picks http/1.1 or offers no ALPN at all.
    assert alpn(server, ["h2", "http/1.1"]) == "h2"
    assert alpn(server, ["http/1.1", "h2"]) == "h2"      # the server's preference
    assert alpn(server, ["http/1.1"]) == "http/1.1"
    assert alpn(server, None) is None
    assert api.get(PODS).status == 200                     # http.client: no ALPN, 1.1
    c = server.counters()["connections"]
    assert c["h2"] == 2 and c["h1"] == 3 and c["opened"] == 5


def test_settings_are_kube_apiservers(h2c):
    # Real: secure_serving.go Serve: MaxConcurrentStreams 100 (the default of
    # --http2-max-streams-per-connection), MaxReadFrameSize and MaxReceiveBufferPerStream
    # 256 KiB, connection window 256 KiB * 100 (x/net/http2 serverConn.serve sends it as
    # a WINDOW_UPDATE after SETTINGS); MaxHeaderListSize = 1 MiB + 320.
    c = h2c()
    assert c.pump(lambda: c.settings and c.c.outbound_flow_control_window > 65535)
    S = h2.settings.SettingCodes
    assert c.settings[S.MAX_CONCURRENT_STREAMS] == 100
    assert c.settings[S.MAX_FRAME_SIZE] == 256 * 1024
    assert c.settings[S.INITIAL_WINDOW_SIZE] == 256 * 1024
    assert c.settings[S.MAX_HEADER_LIST_SIZE] == (1 << 20) + 320
    assert c.c.outbound_flow_control_window == 256 * 1024 * 100


# ---- real clients
def test_curl_http2_and_http11(server):
    server.create_pod(NS, pod("a"))
    server.reset_counters()
    r = curl(server, "--http2", "-w", "\n%{http_version}", server.url + PODS + "/a")
    assert r.stdout.endswith("\n2"), r.stderr
    assert json.loads(r.stdout.rsplit("\n", 1)[0])["metadata"]["name"] == "a"
    r = curl(server, "--http1.1", "-w", "\n%{http_version}", server.url + PODS + "/a")
    assert r.stdout.endswith("\n1.1"), r.stderr
    c = conns_of(server, server.token)
    assert (c["connections"], c["h2"], c["h1"], c["streams"]) == (2, 1, 1, 2)
    assert [r["protocol"] for r in server.requests()[-2:]] == ["h2", "h1"]


def test_curl_http2_bodies(server):
    # PATCH and POST bodies as DATA (nghttp2, as nicpick's libcurl will send them); a
    # body beyond the 256 KiB stream window needs the server's WINDOW_UPDATEs.
    server.create_pod(NS, pod("a"))
    big = "y" * (1024 * 1024)
    patch = json.dumps({"spec": {"big": big}})          # no schema: unknown fields stay
    r = curl(server, "--http2", "-X", "PATCH", "-H",
             "Content-Type: application/merge-patch+json", "--data-binary", "@-",
             "-w", "\n%{http_version} %{http_code}", server.url + PODS + "/a", input=patch)
    assert r.stdout.endswith("\n2 200"), r.stderr
    assert server.get_object(NS, "a")["spec"]["big"] == big
    r = curl(server, "--http2", "-H", "Content-Type: application/json", "-d",
             json.dumps(pod("b")), "-w", "\n%{http_version} %{http_code}", server.url + PODS)
    assert r.stdout.endswith("\n2 201"), r.stderr
    r = curl(server, "--http2", "-X", "DELETE", "-w", "\n%{http_version} %{http_code}",
             server.url + PODS + "/b")
    assert r.stdout.endswith("\n2 200"), r.stderr
    reqs = server.requests()[-3:]
    assert [(x["verb"], x["protocol"], x["status"]) for x in reqs] == \
        [("patch", "h2", 200), ("create", "h2", 201), ("delete", "h2", 200)]


def test_curl_parallel_watch_and_get_share_one_connection(server):
    # Real: one HTTP/2 connection carries a watch and other requests at once (client-go
    # multiplexes every request of a process over one connection).
    server.create_pod(NS, pod("a"))
    server.reset_counters()
    r = curl(server, "--http2", "--parallel", "-w", "%{http_version} %{http_code}\n",
             server.url + PODS + "?watch=1&timeoutSeconds=2", server.url + PODS + "/a")
    assert r.stdout.count("2 200\n") == 2, (r.stdout, r.stderr)
    assert '"type":"ADDED"' in r.stdout
    c = server.counters()["connections"]
    mine = c["by_token"][server.token]
    assert (mine["connections"], mine["h2"], mine["h1"], mine["streams"]) == (1, 1, 0, 2)
    assert [(x["protocol"], x["streams"], x["max_concurrent"]) for x in c["list"]] == \
        [("h2", 2, 2)]


def test_kubectl_uses_http2(kc, server):
    # Real: client-go offers h2 (Go's http2 transport) and kube-apiserver accepts it.
    server.create_pod(NS, pod("a", {"app": "x"}))
    server.reset_counters()
    out = json.loads(kc("get", "pods", "-o", "json", check=True).stdout)
    assert [i["metadata"]["name"] for i in out["items"]] == ["a"]
    assert kc("get", "pod", "a", "-o", "name", check=True).stdout.strip() == "pod/a"
    kc("patch", "pod", "a", "--type", "merge", "-p",
       '{"metadata":{"annotations":{"k":"v"}}}', check=True)
    kc("patch", "pod", "a", "--type", "json", "-p",
       '[{"op":"add","path":"/metadata/labels/j","value":"1"}]', check=True)
    kc("patch", "pod", "a", "-p", '{"metadata":{"labels":{"s":"2"}}}', check=True)
    got = server.get_object(NS, "a")["metadata"]
    assert got["annotations"] == {"k": "v"} and got["labels"] == {"app": "x", "j": "1", "s": "2"}
    # a watch that the server ends at timeoutSeconds: END_STREAM, kubectl exits 0
    r = kc("get", "--raw", PODS + "?watch=1&timeoutSeconds=1", check=True)
    assert json.loads(r.stdout.splitlines()[0])["type"] == "ADDED"
    reqs = [r for r in server.requests() if r["user_agent"].startswith("kubectl")]
    assert reqs and {r["protocol"] for r in reqs} == {"h2"}
    # Real: client-go sends every request of a process (discovery included) over one
    # HTTP/2 connection: 6 kubectl processes, 6 connections that carried requests (a
    # connection Go's transport dials in a race and closes unused has no token).
    c = conns_of(server, server.token)
    assert (c["connections"], c["h2"], c["h1"]) == (6, 6, 0)
    assert c["streams"] == len(reqs)


def test_kubectl_watch_over_http2_sees_changes(kubectl, kc, server):
    server.create_pod(NS, pod("a"))
    w = subprocess.Popen([kubectl, "--cache-dir", kc.cache, "get", "pods", "-w", "-o", "name"],
                         env=kc.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert w.stdout.readline().strip() == "pod/a"        # the list
        server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
        assert w.stdout.readline().strip() == "pod/a"        # the watch's MODIFIED
    finally:
        w.kill()
        w.wait()
    watches = [r for r in server.requests() if r["verb"] == "watch"]
    assert watches and watches[-1]["protocol"] == "h2"


def test_python_client_stays_on_http11(server):
    # Real: urllib3 offers ALPN http/1.1 only; the server answers it in HTTP/1.1.
    from kubernetes import client, config
    server.create_pod(NS, pod("a"))
    server.reset_counters()
    ac = config.new_client_from_config(config_file=server.kubeconfig_path)
    try:
        core = client.CoreV1Api(ac)
        assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["a"]
        core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"x": "1"}}})
    finally:
        ac.close()
    c = conns_of(server, server.token)
    assert c["h2"] == 0 and c["h1"] >= 1 and c["streams"] == 2
    assert {r["protocol"] for r in server.requests()} == {"h1"}


# ---- HTTP/1.1 only
def test_http11_only_server_refuses_h2(make_server):
    # Real: --disable-http2-serving (SecureServingInfo.DisableHTTP2): NextProtos
    # {"http/1.1"}; curl --http2 then speaks HTTP/1.1.
    s = make_server(http2=False)
    assert alpn(s, ["h2", "http/1.1"]) == "http/1.1"
    r = curl(s, "--http2", "-w", "\n%{http_version}", s.url + PODS)
    assert r.stdout.endswith("\n1.1"), r.stderr
    assert s.configure(http2=True)["http2"] is True        # from the next connection on
    r = curl(s, "--http2", "-w", "\n%{http_version}", s.url + PODS)
    assert r.stdout.endswith("\n2"), r.stderr
    s.configure(http2=False)
    assert alpn(s, ["h2", "http/1.1"]) == "http/1.1"


def test_http11_only_subprocess_and_environment(make_server, monkeypatch):
    s = make_server(http2=False, subprocess=True)
    assert alpn(s, ["h2", "http/1.1"]) == "http/1.1"
    assert s.configure()["http2"] is False
    monkeypatch.setenv("KUBEAPI_FIDELITY", '{"http2": false}')
    s = make_server(subprocess=True)
    assert alpn(s, ["h2", "http/1.1"]) == "http/1.1"


def test_http2_without_the_h2_library_fails_clearly(tmp_path, monkeypatch):
    from tools.kubeapi import http2
    monkeypatch.setattr(http2, "AVAILABLE", False)
    with pytest.raises(RuntimeError, match="python3-h2"):
        kubeapi.ApiServer(str(tmp_path / "a"))
    kubeapi.ApiServer(str(tmp_path / "b"), http2=False)     # 1.1 only needs nothing
    code = ("import sys; sys.modules['h2'] = None\n"
            "from tools.kubeapi.cli import main\nsys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "--state-dir", str(tmp_path / "c")],
                       capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 1 and "python3-h2" in r.stderr and "--no-http2" in r.stderr
    r = subprocess.run([sys.executable, "-c", code, "--state-dir", str(tmp_path / "d"),
                        "--no-http2", "--max-lifetime", "0.5"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0 and "READY" in r.stdout, r.stderr


# ---- streams, flow control, watches
def test_large_list_with_a_small_client_window_arrives_whole(server, h2c):
    big = "x" * (100 * 1024)
    server.seed({"pods": [pod(f"p{i:02d}", annotations={"big": big}) for i in range(40)]})
    c = h2c(window=16384, ack=False)
    sid = c.request("GET", PODS)
    st = c.streams[sid]
    # Real: Go's server sends no more than the client's window (RFC 9113 6.9) and
    # waits for WINDOW_UPDATE: without one, the answer stops at the window.
    assert not c.pump(lambda: st["ended"], 1.0)
    assert len(st["data"]) <= 65535
    c.ack = True
    for sid_, s in c.streams.items():
        c.c.acknowledge_received_data(len(s["data"]), sid_)
    c.flush()
    assert c.pump(lambda: st["ended"], 60)
    status, _, body = c.answer(sid)
    obj = json.loads(body)
    assert status == 200 and len(body) > 4_000_000
    assert [i["metadata"]["name"] for i in obj["items"]] == [f"p{i:02d}" for i in range(40)]
    assert max(st["frames"]) <= 16384       # the client's SETTINGS_MAX_FRAME_SIZE
    assert obj["items"][7]["metadata"]["annotations"]["big"] == big
    # the request record says the answer waited on the client's window (window_stalls)
    server.create_pod(NS, pod("small"))
    assert h2c().get(PODS + "/small")[0] == 200
    recs = {r["verb"]: r for r in server.requests() if r["verb"] in ("list", "get")}
    assert recs["list"].get("window_stalls", 0) >= 1 and "window_stalls" not in recs["get"]


def test_watch_ends_at_timeout_seconds_with_end_stream(server, h2c):
    # Real: the watch handler returns at timeoutSeconds; Go's server ends the stream
    # with END_STREAM (no RST_STREAM) and the connection stays open for more requests.
    server.create_pod(NS, pod("a"))
    c = h2c()
    t0 = time.monotonic()
    sid = c.request("GET", PODS + "?watch=1&timeoutSeconds=1&allowWatchBookmarks=true")
    assert c.pump(c.done(sid), 10)
    took = time.monotonic() - t0
    st = c.streams[sid]
    assert st["ended"] and st["reset"] is None and 0.9 < took < 5
    assert st["headers"][":status"] == "200"
    assert st["headers"]["content-type"] == "application/json"
    assert "transfer-encoding" not in st["headers"]        # forbidden in HTTP/2
    evs = c.events(sid)
    assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "a"
    assert {e["type"] for e in evs} <= {"ADDED", "BOOKMARK"}
    assert c.get(PODS + "/a")[0] == 200


def test_watch_get_and_patch_progress_on_one_connection(server, h2c):
    server.create_pod(NS, pod("a"))
    rv = server.get_object(NS, "a")["metadata"]["resourceVersion"]
    c = h2c()
    w = c.request("GET", PODS + f"?watch=1&resourceVersion={rv}&timeoutSeconds=30")
    assert c.pump(lambda: c.streams[w]["headers"] is not None)
    g = c.request("GET", PODS + "/a")
    p = c.request("PATCH", PODS + "/a", {"metadata": {"labels": {"x": "1"}}},
                  ctype="application/merge-patch+json")
    s = c.request("PATCH", PODS + "/a", {"metadata": {"labels": {"y": "2"}}},
                  ctype="application/strategic-merge-patch+json")
    j = c.request("PATCH", PODS + "/a", [{"op": "add", "path": "/metadata/labels/z",
                                          "value": "3"}], ctype="application/json-patch+json")
    a = c.request("PATCH", PODS + "/a?fieldManager=t", {"metadata": {"labels": {"w": "4"}}},
                  ctype="application/apply-patch+yaml")
    assert c.pump(lambda: all(c.done(x)() for x in (g, p, s, j, a)))
    assert [c.answer(x)[0] for x in (g, p, s, j, a)] == [200, 200, 200, 200, 200]
    assert c.pump(lambda: len(c.events(w)) >= 4)
    assert not c.streams[w]["ended"]                       # the watch is still open
    evs = c.events(w)
    assert [e["type"] for e in evs] == ["MODIFIED"] * 4
    assert evs[-1]["object"]["metadata"]["labels"] == {"x": "1", "y": "2", "z": "3", "w": "4"}
    post = c.request("POST", PODS, pod("b"))
    assert c.pump(c.done(post)) and c.answer(post)[0] == 201
    lst = c.get(PODS + "?limit=1")
    body = json.loads(lst[2])
    assert len(body["items"]) == 1 and body["metadata"]["continue"]
    code, _, rest = c.get(PODS + "?limit=1&continue=" + body["metadata"]["continue"])
    assert code == 200 and [i["metadata"]["name"] for i in json.loads(rest)["items"]] == ["b"]
    d = c.request("DELETE", PODS + "/b")
    assert c.pump(c.done(d)) and c.answer(d)[0] == 200
    assert c.pump(lambda: len(c.events(w)) >= 6)
    assert [e["type"] for e in c.events(w)[4:6]] == ["ADDED", "DELETED"]
    c.c.reset_stream(w, h2.errors.ErrorCodes.CANCEL)      # client-go closes a watch so
    c.flush()
    assert wait_for(lambda: server.state()["watchers"] == 0, 5)
    rec = server.counters()["connections"]["list"][-1]
    assert rec["protocol"] == "h2" and rec["streams"] == 10 and rec["max_concurrent"] >= 2


def test_errors_and_auth_over_http2(server, h2c):
    server.set_tokens({"denied": "system:serviceaccount:default:other"})
    server.set_rbac(deny=[{"users": ["system:serviceaccount:default:other"]}])
    c = h2c()
    code, _, body = c.get(PODS + "/missing")
    status_shape(json.loads(body), 404, "NotFound")
    big = c.request("POST", PODS, b"{" + b" " * (3 * 1024 * 1024 + 10) + b"}")
    assert c.pump(c.done(big), 30)
    code, _, body = c.answer(big)
    assert code == 413 and json.loads(body)["code"] == 413
    server.add_fault(kind="error", code=429, plain=True, verb="list")
    code, hdrs, body = c.get(PODS)
    assert (code, hdrs["retry-after"], body) == (
        429, "1", b"Too many requests, please try again later.\n")
    assert hdrs["content-type"] == "text/plain; charset=utf-8"
    server.add_fault(kind="error", code=429, retry_after=3, verb="list")
    code, hdrs, body = c.get(PODS)
    assert code == 429 and hdrs["retry-after"] == "3"
    assert status_shape(json.loads(body), 429, "TooManyRequests")["details"] == \
        {"retryAfterSeconds": 3}
    server.add_fault(kind="error", code=500, verb="get")
    code, _, body = c.get(PODS + "/x")
    status_shape(json.loads(body), 500, "InternalError")
    bad = h2c(token="nope")
    code, _, body = bad.get(PODS)
    status_shape(json.loads(body), 401, "Unauthorized")
    other = h2c(token="denied")
    code, _, body = other.get(PODS)
    status_shape(json.loads(body), 403, "Forbidden")
    assert {r["protocol"] for r in server.requests()} == {"h2"}


def test_admin_api_over_http2(server):
    server.reset_counters()
    r = curl(server, "--http2", "-w", "\n%{http_version}", server.url + "/_admin/health",
             token=server.admin_token)
    body, ver = r.stdout.rsplit("\n", 1)
    assert ver == "2" and json.loads(body)["ok"] is True
    r = curl(server, "--http2", "-X", "POST", "-d", '{"faults":[{"kind":"delay","ms":1}]}',
             server.url + "/_admin/faults", token=server.admin_token)
    assert json.loads(r.stdout)["faults"][0]["kind"] == "delay"
    c = server.counters()
    # Admin requests are not counted; their connections only under "admin".
    assert c["total"]["requests"] == 0 and c["connections"]["admin"] == 2
    assert c["connections"]["by_token"] == {} and c["connections"]["h2"] == 2


def test_counters_count_http2_stream_bytes(server, h2c):
    server.create_pod(NS, pod("a"))
    server.reset_counters()
    c = h2c()
    code, _, body = c.get(PODS + "/a")
    t = server.counters()["by_token"][server.token]
    # HEADERS + DATA + the empty END_STREAM... frames: the body and 9 bytes a frame
    assert t["requests"] == 1 and t["bytes_out"] >= len(body) + 2 * 9
    assert 9 < t["bytes_in"] < 1000


def test_tls_resumption_is_counted(server):
    ctx = ssl.create_default_context(cafile=server.ca_path)
    ctx.set_alpn_protocols(["h2"])

    def connect(session=None):
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=10),
                            server_hostname="127.0.0.1", session=session)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        s.sendall(c.data_to_send())
        s.recv(65536)               # the server's SETTINGS; TLS 1.3 tickets come first
        return s
    server.reset_counters()
    a = connect()
    session = a.session
    a.close()
    b = connect(session)
    assert b.session_reused
    b.close()
    c = server.counters()["connections"]
    assert (c["tls_full"], c["tls_resumed"]) == (1, 1)
    assert [x["resumed"] for x in c["list"]] == [False, True]


# ---- faults over HTTP/2
def _watch_and_victim(server, c, fault):
    """A watch on the connection, then a faulted GET beside it."""
    server.create_pod(NS, pod("a"))
    rv = server.get_object(NS, "a")["metadata"]["resourceVersion"]
    w = c.request("GET", PODS + f"?watch=1&resourceVersion={rv}&timeoutSeconds=20")
    assert c.pump(lambda: c.streams[w]["headers"] is not None)
    server.add_fault(verb="get", **fault)
    v = c.request("GET", PODS + "/a")
    return w, v


def test_fault_reset_drops_the_connection(server, h2c):
    c = h2c()
    w, v = _watch_and_victim(server, c, {"kind": "reset"})
    assert c.pump(lambda: c.eof, 5)
    # A dropped connection: no answer, no END_STREAM, no GOAWAY, on any stream.
    assert not any(c.streams[x]["ended"] for x in (w, v)) and c.terminated is None


def test_fault_reset_rst_stream_resets_only_its_stream(server, h2c):
    c = h2c()
    w, v = _watch_and_victim(server, c, {"kind": "reset", "h2": "rst_stream"})
    assert c.pump(c.done(v), 5)
    assert c.streams[v]["reset"] == h2.errors.ErrorCodes.INTERNAL_ERROR
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    assert c.pump(lambda: len(c.events(w)) == 1)           # the watch goes on
    assert c.get(PODS + "/a")[0] == 200 and not c.eof


def test_fault_reset_goaway(server, h2c):
    c = h2c()
    w, v = _watch_and_victim(server, c, {"kind": "reset", "h2": "goaway"})
    assert c.pump(lambda: c.eof, 5)
    assert c.terminated is not None and c.terminated.error_code == 0
    assert c.terminated.last_stream_id == v


# REFUSED_STREAM (0x7): the request was not processed and may be sent again (RFC 9113
# 8.7). Real: golang.org/x/net/http2 server.go (commit 0ca694d, v0.56.0+5),
# serverConn.processHeaders, answers a stream over its MAX_CONCURRENT_STREAMS with
# RST_STREAM REFUSED_STREAM while its SETTINGS are not yet acknowledged
# ("over_max_streams_race"; PROTOCOL_ERROR after), before any handler runs; after a
# graceful GOAWAY it drops a later stream's frames unanswered (processFrame), which a
# client's nghttp2 closes with REFUSED_STREAM too (nghttp2 v1.52.0 lib/nghttp2_session.c,
# session_close_stream_on_goaway).
def test_fault_reset_refused_stream_refuses_only_its_stream(server, h2c):
    c = h2c()
    w, v = _watch_and_victim(server, c, {"kind": "reset", "h2": "refused_stream"})
    assert c.pump(c.done(v), 5)
    st = c.streams[v]
    assert st["reset"] == h2.errors.ErrorCodes.REFUSED_STREAM
    assert st["headers"] is None and not st["data"]       # not a byte of an answer
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    assert c.pump(lambda: len(c.events(w)) == 1)           # the watch goes on
    assert c.get(PODS + "/a")[0] == 200 and not c.eof and c.terminated is None


def test_a_refused_write_is_not_done(server, h2c):
    server.create_pod(NS, pod("a"))
    server.add_fault(kind="reset", h2="refused_stream", verb="patch")
    c = h2c()
    sid = c.request("PATCH", PODS + "/a", {"metadata": {"labels": {"x": "1"}}},
                    ctype="application/merge-patch+json")
    assert c.pump(c.done(sid), 5)
    assert c.streams[sid]["reset"] == h2.errors.ErrorCodes.REFUSED_STREAM
    assert "x" not in (server.get_object(NS, "a")["metadata"].get("labels") or {})


def test_refused_stream_is_a_reset_fault_only(server):
    # A stream is refused before its answer starts: a watch is refused with
    # {"kind": "reset", "verb": "watch"}, not by drop_watch.
    with pytest.raises(kubeapi.ApiError, match="refused_stream"):
        server.add_fault(kind="drop_watch", after_events=0, h2="refused_stream")
    with pytest.raises(kubeapi.ApiError, match="unknown h2"):
        server.add_fault(kind="reset", h2="refuse")
    assert server.faults() == []


def test_curl_retries_a_refused_stream_on_a_fresh_connection(server):
    # Real: libcurl (Debian 12's 7.88.1 here; 8.14.1 the same) marks the connection
    # not to be reused and runs the request again on a new one (lib/http2.c
    # http2_handle_stream_close: connclose(..., "REFUSED_STREAM"),
    # data->state.refused_stream; lib/transfer.c Curl_retry_request: "REFUSED_STREAM,
    # retrying a fresh connect", at most CONN_MAX_RETRIES = 5 times).
    server.create_pod(NS, pod("a"))
    server.add_fault(kind="reset", h2="refused_stream", verb="get", name="a")
    server.reset_counters()
    r = curl(server, "--http2", "-v", "-w", "\n%{http_version} %{http_code} %{num_connects}",
             server.url + PODS + "/a")
    assert r.stdout.endswith("\n2 200 2"), (r.stdout[-200:], r.stderr)
    assert json.loads(r.stdout.rsplit("\n", 1)[0])["metadata"]["name"] == "a"
    assert "REFUSED_STREAM, retrying a fresh connect" in r.stderr, r.stderr
    c = conns_of(server, server.token)
    assert (c["connections"], c["h2"], c["streams"]) == (2, 2, 2), c
    gets = [x for x in server.requests() if x["verb"] == "get"]
    assert [x["status"] for x in gets] == [None, 200]       # refused, then answered
    # a PATCH, refused, is sent again whole and done once
    server.add_fault(kind="reset", h2="refused_stream", verb="patch")
    r = curl(server, "--http2", "-v", "-X", "PATCH", "-H",
             "Content-Type: application/merge-patch+json", "-d",
             '{"metadata":{"annotations":{"n":"1"}}}', "-w", "\n%{http_version} %{http_code}",
             server.url + PODS + "/a")
    assert r.stdout.endswith("\n2 200"), (r.stdout[-200:], r.stderr)
    assert "REFUSED_STREAM, retrying a fresh connect" in r.stderr, r.stderr
    assert server.get_object(NS, "a")["metadata"]["annotations"] == {"n": "1"}
    assert [x["status"] for x in server.requests() if x["verb"] == "patch"] == [None, 200]


def test_kubectl_retries_a_refused_stream_on_its_connection(kc, server):
    # Real: client-go's HTTP/2 transport (Go's net/http bundles golang.org/x/net/http2)
    # retries a request whose stream was refused at once, on the same connection, which
    # a stream error leaves usable (x/net/http2 transport_common.go roundTripViaPool,
    # canRetryError: ErrCodeRefusedStream).
    server.create_pod(NS, pod("a"))
    kc("get", "pod", "a", "-o", "name", check=True)          # discovery cached
    server.add_fault(kind="reset", h2="refused_stream", verb="get", name="a")
    server.reset_counters()
    server.requests(clear=True)
    r = kc("get", "pod", "a", "-o", "name", check=True)
    assert r.stdout.strip() == "pod/a"
    gets = [x for x in server.requests() if x["verb"] == "get" and x["path"].endswith("/a")]
    assert [(x["protocol"], x["status"]) for x in gets] == [("h2", None), ("h2", 200)]
    c = conns_of(server, server.token)
    assert (c["connections"], c["h2"]) == (1, 1), c
    # a watch, refused, is opened again as well
    server.add_fault(kind="reset", h2="refused_stream", verb="watch")
    r = kc("get", "--raw", PODS + "?watch=1&timeoutSeconds=1", check=True)
    assert json.loads(r.stdout.splitlines()[0])["type"] == "ADDED"
    watches = [x["status"] for x in server.requests() if x["verb"] == "watch"]
    assert watches == [None, 200], watches


def test_fault_drop_watch_over_http2(server, h2c):
    server.create_pod(NS, pod("a"))
    server.create_pod(NS, pod("b"))
    server.add_fault(kind="drop_watch", after_events=1)
    c = h2c()
    w = c.request("GET", PODS + "?watch=1")
    assert c.pump(lambda: c.eof, 5)
    assert len(c.events(w)) == 1 and not c.streams[w]["ended"]
    # partial, on its stream only: half an event, then RST_STREAM
    server.add_fault(kind="drop_watch", after_events=1, partial=True, h2="rst_stream")
    c = h2c()
    w = c.request("GET", PODS + "?watch=1")
    assert c.pump(c.done(w), 5)
    st = c.streams[w]
    assert st["reset"] == h2.errors.ErrorCodes.INTERNAL_ERROR
    first, rest = bytes(st["data"]).split(b"\n", 1)
    assert json.loads(first)["type"] == "ADDED" and rest and b"\n" not in rest
    with pytest.raises(ValueError):
        json.loads(rest)
    assert c.get(PODS)[0] == 200


def test_fault_expire_delay_commit_timeout_over_http2(server, h2c):
    server.create_pod(NS, pod("a"))
    c = h2c()
    server.add_fault(kind="expire_watch")
    w = c.request("GET", PODS + "?watch=1&resourceVersion=1")
    assert c.pump(c.done(w))
    evs = c.events(w)
    assert c.streams[w]["ended"] and [e["type"] for e in evs] == ["ERROR"]
    assert evs[0]["object"]["code"] == 410
    server.add_fault(kind="delay", ms=300, verb="get")
    t0 = time.monotonic()
    assert c.get(PODS + "/a")[0] == 200 and time.monotonic() - t0 >= 0.3
    server.add_fault(kind="commit_timeout", verb="create")
    p = c.request("POST", PODS, pod("b"))
    assert c.pump(c.done(p))
    code, _, body = c.answer(p)
    assert code == 504 and json.loads(body)["reason"] == "Timeout"
    assert server.get_object(NS, "b")["metadata"]["name"] == "b"     # it committed
    server.add_fault(kind="compact", verb="list")
    assert c.get(PODS)[0] == 200


def test_stopping_server_ends_http2_watches(make_server):
    s = make_server()
    c = H2Client(s)
    w = c.request("GET", PODS + "?watch=1")
    assert c.pump(lambda: c.streams[w]["headers"] is not None)
    threading.Thread(target=s.stop, daemon=True).start()
    assert c.pump(lambda: c.eof, 10)
    c.close()
