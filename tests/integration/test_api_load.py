"""Bounded API load in every waiting state: the test API server's
per-token counters (one token per pod) over a window while nicpick waits.
The goals (issue 15): at most 5 requests/s and one new watch per 5 s for
each pod, gatherers included.  The client's token bucket allows a burst of
10 requests and 3 watches on top (lib/k8s/limit.c), so over W seconds a
pod may send 5 W + 10 requests and open W / 5 + 3 watches; what nicpick
really sends is printed (pytest -s) and is far less."""
import json
import signal
import time

import pytest

from test_restart import hooks_built, start_killed_at

WINDOW = 20.0
SETTLE = 4.0  # start-up: the report, the first list and watch


@pytest.fixture
def cluster2(clusters):
    return clusters(n_nodes=2)


def token(p):
    return p.token


def measure(c, pods, during=None):
    """Per-pod requests and new watches over WINDOW seconds."""
    c.server.reset_counters()
    if during:
        during()
    time.sleep(WINDOW)
    cnt = c.server.counters()["by_token"]
    out = {}
    for p in pods:
        t = cnt.get(token(p)) or {"requests": 0, "verbs": {}}
        out[p.name] = (t["requests"], t["verbs"].get("watch", 0))
    return out


def assert_bounded(c, rates, state):
    for name, (req, watches) in rates.items():
        print(f"{state}: {name}: {req} requests ({req / WINDOW:.2f}/s), {watches} new watches "
              f"in {WINDOW:.0f} s")
        assert req <= 5 * WINDOW + 10, (state, name, req, c.logs())
        assert watches <= WINDOW / 5 + 3, (state, name, watches, c.logs())


def start(c, pods, expect):
    for p in pods:
        p.start("--expect", str(expect), "--log-interval", "5", "--timeout", "120")
    time.sleep(SETTLE)
    for p in pods:
        assert p.proc.poll() is None, p.describe()


def test_a_missing_pod(cluster2):
    """Three pods expected, two exist: the gatherer and a follower wait."""
    c = cluster2
    pods = c.seed_pods(2)
    start(c, pods, 3)
    assert_bounded(c, measure(c, pods), "missing pod")


def test_a_missing_gatherer(cluster2):
    """The gatherer's pod exists but its nicpick never starts."""
    c = cluster2
    pods = c.seed_pods(2)
    start(c, pods[1:], 2)
    assert_bounded(c, measure(c, pods[1:]), "missing gatherer")


def test_the_api_server_down_for_20_s(cluster2):
    """Every watch is cut after 2 s; then, for the whole window, every
    request of the pods' tokens has its connection reset (a server that
    refuses connections cannot count them)."""
    c = cluster2
    pods = c.seed_pods(2)
    c.server.set_faults([{"kind": "drop_watch", "count": -1, "after_seconds": 2}])
    start(c, pods, 3)
    rates = measure(c, pods, during=lambda: c.server.add_fault(
        kind="reset", count=-1, token=[p.token for p in pods]))
    c.server.clear_faults()
    assert_bounded(c, rates, "API server down")
    for name, (req, watches) in rates.items():
        assert req >= 2, (name, req)  # the pods did try


def test_repeated_410s(cluster2):
    """Every watch expires at once (410 Gone): each is a re-list and a new
    watch, and the new watches are rationed."""
    c = cluster2
    pods = c.seed_pods(2)
    c.server.set_faults([{"kind": "expire_watch", "count": -1}])
    c.server.reset_counters()
    start(c, pods, 3)
    rates = measure(c, pods)
    c.server.clear_faults()
    assert_bounded(c, rates, "repeated 410")
    for name, (req, watches) in rates.items():
        assert watches >= 2, (name, watches)  # the fault did reach the watches


def own_pod_patches(c, p):
    return [r for r in c.server.requests() if r["method"] == "PATCH" and r["token"] == p.token
            and r["path"].endswith(f"/pods/{p.name}")]


def test_the_gatherer_writes_its_own_pod_four_times_a_job(cluster2):
    """Every write on the gatherer's pod is an event on each follower's
    watch.  With every report in at its first list, the gatherer writes its
    pod four times for a job that agrees in one round: its report (and
    claim), the round with its own part, the final round with its own probe
    result, and its result.  No progress write (the round follows at once),
    no write of its own part apart from the round's, and none of its probe
    result apart from the final round's."""
    c = cluster2
    gatherer, follower = c.seed_pods(2)
    c.server.requests(clear=True)
    follower.start("--expect", "2", "--log-interval", "5", "--timeout", "60")
    deadline = time.monotonic() + 20
    while c.annotation(follower.name, "nicpick.io/report") is None:
        assert time.monotonic() < deadline and follower.proc.poll() is None, follower.describe()
        time.sleep(0.05)
    gatherer.start("--expect", "2", "--log-interval", "5", "--timeout", "60")
    c.wait_all()
    assert [p.rc for p in (gatherer, follower)] == [0, 0], c.logs()
    writes = own_pod_patches(c, gatherer)
    assert len(writes) == 4, (len(writes), writes, gatherer.describe())
    # The follower's own: its report, its probe result and its result.
    assert len(own_pod_patches(c, follower)) == 3, own_pod_patches(c, follower)
    # Its probe result is on its pod all the same, of the final round.
    rd = json.loads(c.annotation(gatherer.name, "nicpick.io/round"))
    pr = json.loads(c.annotation(gatherer.name, "nicpick.io/probe"))
    assert rd["state"] == "final" and pr["epoch"] == rd["epoch"], (rd, pr)
    assert pr["leader"] == rd["leader"] and [t["ok"] for t in pr["trials"]] == [True], pr


def test_a_gatherer_that_waits_for_probes_shows_its_own_with_its_progress(clusters):
    """Three pods; the last dies once it holds its part, before it probes
    (the kubelet has not restarted it yet): the gatherer, whose own probe
    of its neighbour passed, waits for the others' results.  Its own,
    held back for the round's end, goes onto its pod with its next progress
    write, so that `nicpick status` and `kubectl describe` show it while
    the round is open."""
    c = clusters(n_nodes=3)
    if not hooks_built(c.nicpick):
        pytest.fail(f"{c.nicpick} has no test hooks: build with `make` (TEST_HOOKS=1)")
    gatherer, neighbour, victim = c.seed_pods(3)
    args = ("--expect", "3", "--log-interval", "1", "--timeout", "60")
    start_killed_at(victim, "after-decision", *args)
    neighbour.start(*args)
    gatherer.start(*args)
    assert victim.wait(30) == -signal.SIGKILL, victim.describe()
    deadline = time.monotonic() + 15
    while c.annotation(gatherer.name, "nicpick.io/probe") is None:
        assert time.monotonic() < deadline and gatherer.proc.poll() is None, gatherer.describe()
        time.sleep(0.1)
    rd = json.loads(c.annotation(gatherer.name, "nicpick.io/round"))
    pr = json.loads(c.annotation(gatherer.name, "nicpick.io/probe"))
    progress = json.loads(c.annotation(gatherer.name, "nicpick.io/progress"))
    assert rd["state"] == "probe" and pr["epoch"] == rd["epoch"] == progress["round"], (rd, pr, progress)
    assert progress["phase"] == "probe" and victim.name in progress["missing"], progress
    assert [t["ok"] for t in pr["trials"]] == [True], pr  # it reached its neighbour
    assert gatherer.proc.poll() is None, gatherer.describe()
