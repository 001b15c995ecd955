"""One connection per process: nicpick's requests and its watch share one
HTTP/2 connection when the API server offers h2 by ALPN, as client-go's do
(one transport, one connection per host, every request and watch a stream
of it), and a server that speaks HTTP/1.1 only still gets a working job
over two connections.  The test API server's connection counters (by the
token of a connection's first request, by protocol) tell what each pod
opened; its faults drop a watch the ways a real server does (GOAWAY, a
dropped connection, RST_STREAM, REFUSED_STREAM).  lib/k8s/client.c (the twins) and
http.c (the multi driver) are the code.  The tests that matter to the libcurl underneath run with both
builds: the dev one (Debian 12's libcurl 7.88, dlopen'ed) and the release one
(`make static`: libcurl 8.14 and nghttp2 linked in), which `make test` builds
before the integration suite (its image target); without it they skip, and
fail under CI=true, as tests/integration/test_static.py does."""
import ctypes
import os
import re
import signal
import time

import pytest

import cluster as C

COMMON = ("--log-interval", "2", "--timeout", "40")
STATIC = os.environ.get("NICPICK_STATIC") or str(C.ROOT / "build" / "static" / "nicpick")


@pytest.fixture(params=["dev", "release"])
def binary(request, nicpick_bin):
    """The nicpick under test: the dev build (NICPICK, build/nicpick) or the
    release one (build/static/nicpick)."""
    if request.param == "dev":
        return nicpick_bin
    if not os.access(STATIC, os.X_OK):
        msg = f"{STATIC} not found: run `make static`"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return STATIC


@pytest.fixture
def make_cluster(clusters):
    def make(n=2, http2=True, nicpick=None):
        c = clusters(n_nodes=n)
        if nicpick:
            c.nicpick = nicpick
        if not http2:
            c.server.configure(http2=False)
        c.seed_pods()
        c.server.reset_counters()
        return c

    return make


def diag(c):
    cn = c.server.counters()["connections"]
    conns = [{k: r.get(k) for k in ("id", "protocol", "token", "streams", "max_concurrent",
                                    "resumed", "open")} for r in cn["list"]]
    return c.logs() + f"\n--- connections: {conns}"


def run(c, *extra, timeout=60, started=False):
    """Run the job (or, started, wait for the pods already started); the
    connection counters once every pod agreed and exited 0."""
    if not started:
        c.start_all("--expect", str(len(c.pods)), *COMMON, *extra)
    c.wait_all(timeout=timeout)
    assert [p.rc for p in c.pods] == [0] * len(c.pods), diag(c)
    decisions = [C.decision_of(p)["agreement"]["decision"] for p in c.pods
                 if C.decision_of(p)["agreement"]["gatherer"]]
    assert len(decisions) == 1 and decisions[0]["ok"], diag(c)
    return c.server.counters()["connections"]


def by_token(conns, p):
    return conns["by_token"].get(p.token) or {"connections": 0, "h1": 0, "h2": 0, "streams": 0}


def pod_conns(conns, p):
    return [r for r in conns["list"] if r["token"] == p.token]


def test_a_follower_and_the_gatherer_each_open_one_h2_connection(make_cluster):
    c = make_cluster()
    # The gatherer starts once the follower's watch is open, so that the
    # assignment reaches the follower through it.  When both start at once,
    # the follower may find its part in the list its watch starts from
    # (ex_watch lists, then watches) and write its probe result before the
    # watch stream opens: one stream at a time (seen once, on a loaded VM).
    follower_then_gatherer(c)
    conns = run(c, started=True)
    for p in c.pods:
        t = by_token(conns, p)
        # Every request of the process (its pod, the job, its report, the
        # list, the watch, the probe result, the result and its Event) is
        # a stream of one TLS connection.
        assert (t["connections"], t["h2"], t["h1"]) == (1, 1, 0), (p.name, t, diag(c))
        assert t["streams"] >= 6, (p.name, t)
        # TLS 1.3 with the suite kube-apiserver's crypto/tls picks from
        # nicpick's offer (the test server picks as Go does: its README)
        assert [(r["tls_version"], r["cipher"]) for r in pod_conns(conns, p)] == \
            [("TLSv1.3", "TLS_AES_128_GCM_SHA256")], (p.name, diag(c))
    # The follower wrote its probe result while its watch was open: two
    # streams at once on its one connection.
    follower = c.pods[1]
    rec = pod_conns(conns, follower)
    assert len(rec) == 1 and rec[0]["max_concurrent"] >= 2, (rec, diag(c))


def test_an_http1_only_server_gets_the_same_job_over_two_connections(make_cluster):
    # A server without h2 in its ALPN (an old proxy in front of the API
    # server): the watch keeps a connection of its own, as before.
    c = make_cluster(http2=False)
    conns = run(c)
    follower = c.pods[1]
    t = by_token(conns, follower)
    assert (t["connections"], t["h1"], t["h2"]) == (2, 2, 0), (t, diag(c))
    g = by_token(conns, c.pods[0])
    print(f"HTTP/1.1 server: follower {t}, gatherer {g}")
    assert g["h2"] == 0 and g["connections"] >= 2, (g, diag(c))
    # The second connection resumes the first one's TLS session.
    assert t["tls_resumed"] >= 1, t


@pytest.mark.parametrize("how", ["goaway", "close", "rst_stream"])
def test_a_watch_the_server_drops_is_watched_again_and_the_job_agrees(make_cluster, how):
    # GOAWAY (a server going away), the connection shut (every stream on it
    # ends), or RST_STREAM on the watch only: the follower's watch reopens
    # with the watch backoff and the job agrees all the same.
    c = make_cluster()
    follower = c.pods[1]
    c.server.add_fault(kind="drop_watch", token=follower.token, after_events=1, h2=how, count=1)
    conns = run(c)
    cnt = c.server.counters()["by_token"][follower.token]
    assert cnt["verbs"].get("watch", 0) >= 2, (cnt, diag(c))
    t = by_token(conns, follower)
    want = 1 if how == "rst_stream" else 2  # the stream only: the connection stays
    assert t["connections"] == want and t["h1"] == 0, (how, t, diag(c))


def test_sigterm_during_an_h2_watch_ends_within_a_second(make_cluster):
    c = make_cluster(n=3)
    f = c.pods[2]  # its gatherer never starts: the follower waits on its watch
    f.start("--expect", "3", *COMMON)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        cnt = c.server.counters()["by_token"].get(f.token) or {"verbs": {}}
        if cnt["verbs"].get("watch"):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"no watch within 20 s\n{diag(c)}")
    time.sleep(0.5)
    t0 = time.monotonic()
    f.proc.send_signal(signal.SIGTERM)
    rc = f.wait(10)
    took = time.monotonic() - t0
    assert rc == 143, f.describe()
    assert took < 1.0, f"{took:.2f} s\n{f.describe()}"
    assert "stopped by SIGTERM" in f.stderr_text, f.describe()
    conns = c.server.counters()["connections"]
    t = by_token(conns, f)
    # The exchange's one h2 connection; the result and the Event after the
    # stop go over a client of its own (exchange_publish_result), HTTP/1.1.
    assert (t["connections"], t["h2"], t["h1"]) == (2, 1, 1), (t, diag(c))


def wait_for_verb(c, p, verb, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cnt = c.server.counters()["by_token"].get(p.token) or {"verbs": {}}
        if cnt["verbs"].get(verb):
            return
        time.sleep(0.02)
    raise AssertionError(f"{p.name}: no {verb} within {timeout} s\n{diag(c)}")


def follower_then_gatherer(c, **fault):
    """Start the follower, add fault (if any) once its watch is open, then
    start the gatherer: what the fault hits comes from inside the
    follower's watch."""
    g, f = c.pods
    f.start("--expect", "2", *COMMON)
    wait_for_verb(c, f, "watch")
    if fault:
        c.server.add_fault(**fault)
    g.start("--expect", "2", *COMMON)


def statuses(c, p, verb):
    """Answers to p's requests of verb on pods (None: no answer, the stream refused)."""
    return [r["status"] for r in c.server.requests()
            if r["token"] == p.token and r["verb"] == verb and "/pods" in r["path"]]


# RST_STREAM REFUSED_STREAM: the server did not process the stream (RFC 9113
# 8.7; Go's server: x/net/http2 server.go processHeaders, "over_max_streams_race").
# libcurl, 7.88 and 8.14 alike, runs the request again itself on a fresh connection
# and keeps the refusing one for the transfers still on it (lib/http2.c
# http2_handle_stream_close: connclose "REFUSED_STREAM", state.refused_stream;
# lib/transfer.c Curl_retry_request, at most 5 times; then CURLE_SEND_ERROR, which
# lib/k8s retries with its backoff).  nicpick sees an answer, counts no retry, and
# its later requests go over the new connection.
@pytest.mark.parametrize("verb", ["get", "patch", "watch"])
def test_a_refused_stream_is_sent_again_and_the_job_agrees(make_cluster, binary, verb):
    # get: the follower's first request (its own pod); patch: its probe result,
    # written while its watch is open on the same connection; watch: the watch.
    c = make_cluster(nicpick=binary)
    g, f = c.pods
    fault = dict(kind="reset", h2="refused_stream", token=f.token, verb=verb, count=1)
    if verb == "patch":
        follower_then_gatherer(c, **fault)
        c.wait_all(timeout=60)
        assert [p.rc for p in c.pods] == [0, 0], diag(c)
        conns = c.server.counters()["connections"]
    else:
        c.server.add_fault(**fault)
        conns = run(c)
    assert c.server.faults() == [], diag(c)
    st = statuses(c, f, verb)
    # refused once (no answer), then answered; a patch: the report's came before
    want = [200, None, 200, 200] if verb == "patch" else [None, 200]
    assert st == want, (st, diag(c))
    agreement = C.decision_of(f)["agreement"]
    assert agreement["network"] == C.decision_of(g)["agreement"]["network"], diag(c)
    assert agreement["api"]["retries"] == 0, (agreement["api"], diag(c))
    assert "REFUSED" not in f.stderr_text and "retry" not in f.stderr_text, f.describe()
    t = by_token(conns, f)
    # The refused stream's connection, and the fresh one curl retried on.
    assert (t["connections"], t["h2"], t["h1"]) == (2, 2, 0), (t, diag(c))


def test_a_stream_refused_past_curls_retries_is_retried_after_a_wait(make_cluster, binary):
    # Six refusals in a row: curl sends the GET six times at once (5 retries), then
    # gives up with CURLE_SEND_ERROR ("Connection died, tried 5 times before giving
    # up"); lib/k8s counts one retry and sends it again after its backoff
    # (k8s_request: k8s_backoff_ms, full jitter, up to 100 ms first).
    c = make_cluster(nicpick=binary)
    g, f = c.pods
    c.server.add_fault(kind="reset", h2="refused_stream", token=f.token, verb="get", count=6)
    conns = run(c)
    gets = [r for r in c.server.requests() if r["token"] == f.token and r["verb"] == "get"
            and "/pods/" in r["path"]]
    assert [r["status"] for r in gets] == [None] * 6 + [200], diag(c)
    assert C.decision_of(f)["agreement"]["api"]["retries"] == 1, diag(c)
    t = by_token(conns, f)
    assert (t["connections"], t["h2"], t["h1"]) == (7, 7, 0), (t, diag(c))


def libcurl_version(binary):
    """(major, minor) of the libcurl binary runs with: the release build's is linked
    in (scripts/static-deps.sh, its headers under build/static/deps/prefix), the dev
    build dlopens the system's libcurl.so.4 (lib/k8s/curl.c)."""
    if binary == STATIC:
        h = C.ROOT / "build" / "static" / "deps" / "prefix" / "include" / "curl" / "curlver.h"
        m = re.search(r"#define LIBCURL_VERSION_NUM (0x[0-9a-f]+)", h.read_text())
        num = int(m.group(1), 16)
        return num >> 16, (num >> 8) & 0xff
    lib = ctypes.CDLL("libcurl.so.4")
    lib.curl_version.restype = ctypes.c_char_p
    m = re.match(rb"libcurl/(\d+)\.(\d+)", lib.curl_version())
    return int(m.group(1)), int(m.group(2))


PAD = 700 * 1024        # bytes of one watch event (its object's managedFields)
FLOOD = 40              # events: 28 MiB, past any stream window curl gives a watch


def big_managed_fields(i):
    """One managedFields entry of about PAD bytes (a manager of many fields; the
    annotations are no place for it: 256 KiB at most, and nicpick writes there)."""
    keys = {f"f:example.com/{i:04d}-{j:06d}-" + "k" * 230: {} for j in range(PAD // 256)}
    return {"manager": "flood", "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": keys}}}


def flood_while_the_follower_writes(c, events, hold_ms, retries=0):
    """Start the follower, hold its probe result's PATCH (its second: the first
    is its report) hold_ms at the server, and meanwhile write events big ones
    to the gatherer's pod, which the follower watches; returns when both exit."""
    g, f = c.pods
    follower_then_gatherer(c, kind="delay", ms=hold_ms, verb="patch", token=f.token, count=1)
    deadline = time.monotonic() + 20
    while c.server.counters()["by_token"][f.token]["verbs"].get("patch", 0) < 2:
        assert time.monotonic() < deadline, diag(c)
        time.sleep(0.01)
    t0 = time.monotonic()
    for i in range(events):
        c.server.patch_object(C.NAMESPACE, g.name, {"metadata": {"managedFields": [
            big_managed_fields(i)]}})
    took = time.monotonic() - t0
    c.wait_all(timeout=60)
    assert [p.rc for p in c.pods] == [0, 0], diag(c)
    assert took < hold_ms / 1000 - 0.5, f"the flood took {took:.1f} s, past the PATCH's hold"
    fd, gd = C.decision_of(f)["agreement"], C.decision_of(g)["agreement"]
    assert fd["network"] == gd["network"] and fd["api"]["retries"] == retries, (fd, diag(c))
    assert fd["api"]["bytes_received"] > events * PAD, fd["api"]
    t = by_token(c.server.counters()["connections"], f)
    assert (t["connections"], t["h2"], t["h1"]) == (1, 1, 0), (t, diag(c))
    return took, [r for r in c.server.requests() if r["token"] == f.token and r["verb"] == "watch"]


def test_a_flood_of_watch_events_while_the_follower_writes(make_cluster, binary):
    """The follower's watch gets 28 MiB of events while it writes its probe
    result beside its watch, between its events (the twin's PATCH, which the
    server holds 6 s): nobody drains the watch's buffer meanwhile (lib/k8s/watch.c,
    k8s_wbuf).  It reaches its bound, K8S_WBUF_MAX (1 MiB): libcurl >= 8.14
    pauses the watch's stream alone (curl/curl#16955; k8s_curl_h2_pause_ok),
    whose window then runs dry, so that the server waits for the client
    (the request record's window_stalls); libcurl 7.88 cannot pause one
    stream of a connection without holding up the others, so the buffer
    takes it all (up to K8S_WBUF_HARD_MAX, 64 MiB, past which the watch
    would be opened again) and the window never runs dry.  Either way the
    PATCH's answer comes over the same connection, every event is delivered
    (a chunk lost, doubled or out of place breaks a JSON line: a fatal
    "malformed event") without the watch opened again, and the job agrees."""
    pauses = libcurl_version(binary) >= (8, 14)
    c = make_cluster(nicpick=binary)
    took, watches = flood_while_the_follower_writes(c, FLOOD, 6000)
    assert [r["status"] for r in watches] == [200], diag(c)     # never opened again
    stalls = watches[0].get("window_stalls", 0)
    print(f"libcurl {libcurl_version(binary)}: flood {took:.2f} s, window stalls {stalls}")
    if pauses:
        assert stalls >= 1, diag(c)
    else:
        assert stalls == 0, diag(c)


def test_past_64_mib_unread_a_watch_that_cannot_pause_is_opened_again(make_cluster, nicpick_bin):
    """The dev build's libcurl (7.88) cannot pause the h2 watch: 70 MiB of
    events while the follower's PATCH is held fill its buffer past
    K8S_WBUF_HARD_MAX (64 MiB).  The watch ends ("more than 64 MiB of events
    unread"), is opened again after the watch backoff from the last event it
    delivered, on the same connection, and gets the rest: the job agrees.  A
    libcurl that pauses (>= 8.14) holds the stream instead, opened once."""
    c = make_cluster(nicpick=nicpick_bin)
    g = c.pods[0]
    rv0 = int(c.get_pod(g.name)["metadata"]["resourceVersion"])
    pauses = libcurl_version(nicpick_bin) >= (8, 14)
    # the watch opened again counts as one retry (watch.c, k8s_watch_pods_opt)
    took, watches = flood_while_the_follower_writes(c, 100, 10000, retries=0 if pauses else 1)
    last = int(c.get_pod(g.name)["metadata"]["resourceVersion"])
    print(f"libcurl {libcurl_version(nicpick_bin)}: flood {took:.2f} s, "
          f"watches {[(r['status'], r['query'][:90]) for r in watches]}")
    if pauses:
        assert [r["status"] for r in watches] == [200] and watches[0].get("window_stalls")
        return
    assert [r["status"] for r in watches] == [200, 200], diag(c)
    assert "window_stalls" not in watches[0], watches[0]
    again = re.search(r"resourceVersion=(\d+)", watches[1]["query"])
    assert again and rv0 <= int(again.group(1)) < last, (watches[1], rv0, last)
