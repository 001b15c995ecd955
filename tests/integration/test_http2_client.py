"""One connection per process: nicpick's requests and its watch share one
HTTP/2 connection when the API server offers h2 by ALPN, as client-go's do
(one transport, one connection per host, every request and watch a stream
of it), and a server that speaks HTTP/1.1 only still gets a working job
over two connections.  The test API server's connection counters (by the
token of a connection's first request, by protocol) tell what each pod
opened; its faults drop a watch the ways a real server does (GOAWAY, a
dropped connection, RST_STREAM).  lib/k8s/http.c (the twins) is the code."""
import signal
import time

import pytest

import cluster as C

COMMON = ("--log-interval", "2", "--timeout", "40")


@pytest.fixture
def make_cluster(clusters):
    def make(n=2, http2=True):
        c = clusters(n_nodes=n)
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


def run(c, *extra, timeout=60):
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
    conns = run(c)
    for p in c.pods:
        t = by_token(conns, p)
        # Every request of the process (its pod, the job, its report, the
        # list, the watch, the probe result, the result and its Event) is
        # a stream of one TLS connection.
        assert (t["connections"], t["h2"], t["h1"]) == (1, 1, 0), (p.name, t, diag(c))
        assert t["streams"] >= 6, (p.name, t)
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
