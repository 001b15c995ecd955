"""Issue 14, "no silent failures" and "inputs the API allows", end to end
with four pods in their own namespaces and the test API server (the
topology of cluster.py)."""
import json
import re

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


def test_a_gatherer_that_fails_early_ends_its_followers_at_once_with_its_reason(make_cluster):
    """The gatherer's fast interface is down and the job is pinned to that
    network (--cidr): it has no usable interface (exit 3) before it ever
    publishes a report.  It still says so on its pod (result annotation,
    NetworkSelectionFailed Event), and marks its round failed, so its
    followers exit at once with its reason instead of waiting out
    --timeout and blaming a gatherer that "has not started"."""
    import time
    from test_agree_e2e import error_line
    c = make_cluster()
    g = c.pods[0]
    g.node.ns.down(g.node.fast_if)
    t0 = time.monotonic()
    run_job(c, *COMMON, "--cidr", C.FAST_NET + ".0/24", "--timeout", "40", timeout=60)
    took = time.monotonic() - t0
    assert g.rc == 3, g.describe()
    assert [p.rc for p in c.pods[1:]] == [3, 3, 3], diag(c)
    assert took < 15, f"{took:.1f} s: the followers waited for their deadline\n{diag(c)}"
    for p in c.pods[1:]:
        err = error_line(p)
        assert f"the gatherer {g.name} failed: no usable network interface" in err, p.describe()
        assert "(exit 3)" in err, err
    assert "no usable network interface" in (c.annotation(g.name, "nicpick.io/result") or "")
    evs = [e for e in c.events() if e["involvedObject"]["name"] == g.name]
    assert [e["reason"] for e in evs] == ["NetworkSelectionFailed"], evs
    assert evs[0]["type"] == "Warning" and "no usable network interface" in evs[0]["message"], evs


def wait_for_log(p, text, timeout=20):
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        p._err.flush()
        with open(p._err.name) as f:
            if text in f.read():
                return
        time.sleep(0.05)
    raise AssertionError(f"{p.name}: no {text!r} in its log within {timeout} s")


import pytest  # noqa: E402


@pytest.mark.parametrize("sig,code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_ends_the_run_within_a_second_and_says_so_on_the_pod(make_cluster, sig, code):
    """SIGTERM is how a pod is deleted, SIGINT a Ctrl-C: the run ends
    within a second with one error line, exit 128 + N as a shell reports
    it, the Event and the result annotation on its pod, and nothing left
    in its out dir.  Here a follower waits for a gatherer that never
    starts."""
    import os
    import signal
    import time
    c = make_cluster()
    f = c.pods[2]
    f.start(*COMMON, "--timeout", "60")
    wait_for_log(f, "published")
    t0 = time.monotonic()
    f.proc.send_signal(getattr(signal, sig))
    rc = f.wait(10)
    took = time.monotonic() - t0
    assert rc == code, f.describe()
    assert took < 1.0, f"{took:.2f} s\n{f.describe()}"
    errs = [l for l in f.stderr_text.splitlines() if "error:" in l]
    assert len(errs) == 1 and f"stopped by {sig}" in errs[0], f.describe()
    assert os.listdir(f.out_dir) == [], os.listdir(f.out_dir)
    assert f"stopped by {sig}" in (c.annotation(f.name, "nicpick.io/result") or "")
    evs = [e for e in c.events() if e["involvedObject"]["name"] == f.name]
    assert [e["reason"] for e in evs] == ["NetworkSelectionFailed"], evs


def test_a_gatherer_stopped_by_sigterm_ends_its_followers_at_once(make_cluster):
    import signal
    import time
    c = make_cluster()
    g, followers = c.pods[0], c.pods[1:3]  # job-w-3 never starts: the gatherer waits
    for p in (g, *followers):
        p.start(*COMMON, "--timeout", "60")
    wait_for_log(g, "published")
    for p in followers:
        wait_for_log(p, "published")
    t0 = time.monotonic()
    g.proc.send_signal(signal.SIGTERM)
    assert g.wait(10) == 143, g.describe()
    for p in followers:
        p.wait(20)
    took = time.monotonic() - t0
    assert [p.rc for p in followers] == [1, 1], diag(c, followers)
    assert took < 8, f"{took:.1f} s: the followers waited\n{diag(c, followers)}"
    for p in followers:
        err = [l for l in p.stderr_text.splitlines() if "error:" in l][-1]
        # The gatherer's own message, carried as it wrote it: when the
        # signal comes during a call to the API server, it names the call
        # ("re-listing pods for the watch: stopped by SIGTERM while talking
        # to the API server").
        assert re.search(rf"the gatherer {g.name} failed: (.+: )?stopped by SIGTERM", err) \
            and "(exit 143)" in err, err



def silence_probe_port(c, pod):
    """pod's node drops the probe port: its ring neighbour's probe of it
    waits up to 20 s for an answer that never comes."""
    from test_agree_e2e import have
    have("nft")
    c.nft(pod.node, f"""table inet nicpick_e2e {{
        chain input {{ type filter hook input priority 0; policy accept;
            ip daddr {pod.node.fast_addr} tcp dport 29417 drop
        }}
    }}""")


def start_probing_a_silent_peer(c):
    """Node c drops the probe port: job-w-1's probe of its ring neighbour
    job-w-2 waits up to 20 s for an answer that never comes.  Returns the
    gatherer and that prober once the round is out and the gatherer has
    probed its own neighbour."""
    import time
    g, prober, silent = c.pods[0], c.pods[1], c.pods[2]
    silence_probe_port(c, silent)
    c.start_all(*COMMON, "--timeout", "60")
    wait_for_log(g, f"probe {g.node.fast_addr} -> {prober.node.fast_addr} on {g.node.fast_if}: ok")
    time.sleep(1)
    assert prober.proc.poll() is None, prober.describe()
    return g, prober


def test_a_follower_probing_a_silent_peer_learns_of_the_gatherers_failure_at_once(make_cluster):
    """A follower's probe waits up to 20 s for a peer that never answers:
    it still reads its watch meanwhile, so when the gatherer fails the
    round (here: SIGTERM while it waits for that probe), the follower ends
    with the gatherer's reason within a second or two, not when its probe
    gives up."""
    import signal
    import time
    from test_agree_e2e import error_line
    c = make_cluster()
    g, prober = start_probing_a_silent_peer(c)
    g.proc.send_signal(signal.SIGTERM)
    assert g.wait(10) == 143, g.describe()
    t0 = time.monotonic()
    prober.wait(30)
    took = time.monotonic() - t0
    print(f"the prober exited {took:.2f} s after the gatherer")
    assert took < 2.5, f"{took:.1f} s after the gatherer's failure\n{diag(c)}"
    assert prober.rc == 1, prober.describe()
    err = error_line(prober)
    assert re.search(rf"the gatherer {g.name} failed: (.+: )?stopped by SIGTERM", err), err
    assert "probe stopped before its end: the job failed" in prober.stderr_text, prober.describe()
    # Its probe never finished: it published none for the round.
    assert c.annotation(prober.name, "nicpick.io/probe") is None, prober.describe()


def test_a_follower_probing_a_silent_peer_stops_when_its_gatherer_is_deleted(make_cluster):
    """The gatherer's pod goes away while a follower probes: that gatherer
    ends no round, so the follower stops its probe at once and waits for
    the pod that replaces it."""
    import time
    c = make_cluster()
    g, prober = start_probing_a_silent_peer(c)
    c.server.delete_object(C.NAMESPACE, g.name)
    t0 = time.monotonic()
    wait_for_log(prober, "probe stopped before its end: the gatherer that handed it out is gone",
                 timeout=10)
    took = time.monotonic() - t0
    print(f"the prober stopped {took:.2f} s after the gatherer's pod was deleted")
    assert took < 2.5, f"{took:.1f} s\n{diag(c)}"
    assert prober.proc.poll() is None, prober.describe()
    assert c.annotation(prober.name, "nicpick.io/probe") is None, prober.describe()


def recreate_and_restart(c, pod, new_name=None):
    """The pod's container is killed and its object replaced, as a
    controller replaces a lost pod: recreated under the same name with a
    new uid (a PyTorchJob's operator), or, with new_name, a new pod of the
    same job index (the Job controller's Indexed Job pods are named
    JOB-INDEX-RANDOM).  Its nicpick starts again.  Returns the monotonic
    time it started."""
    import time
    pod.kill()
    c.recreate_pod(pod, new_name)
    t0 = time.monotonic()
    pod.start(*COMMON, "--timeout", "60")
    return t0


def replaced_line(pod):
    """What the gatherer logs when pod replaced one of round 1."""
    return (f"round 1: pod {pod.name} (uid {pod.uid}) is not the pod the round was decided "
            f"with; deciding again")


@pytest.mark.parametrize("new_name", [None, "job-w-1-x7k2p"], ids=["same-name", "new-name"])
def test_a_pod_replaced_while_the_ring_is_probed_is_in_the_next_round(make_cluster, new_name):
    """A pod replaced while the round is probed (node 3 drops the probe
    port, so job-w-2's probe of it holds the round open), under its name
    or under a new one with the same job index: its part was the old pod's,
    and its report may differ, so the gatherer decides again with it and
    the job agrees.  Before, the new pod was handed a part without parts
    and exited 1 ("bad assignment")."""
    import time
    c = make_cluster()
    g, again, nxt, silent = c.pods
    silence_probe_port(c, silent)
    c.start_all(*COMMON, "--timeout", "60")
    wait_for_log(again, f"probe {again.node.fast_addr} -> {nxt.node.fast_addr} on "
                        f"{again.node.fast_if}: ok")
    time.sleep(0.5)
    recreate_and_restart(c, again, new_name)
    wait_for_log(g, replaced_line(again), timeout=10)
    c.wait_all(timeout=90)
    assert_all_exit(c, 0)
    nets = {p.name: C.decision_of(p)["agreement"]["network"] for p in c.pods}
    assert len(set(nets.values())) == 1 and str(FAST_NET) not in nets.values(), nets
    rep = json.loads(c.annotation(again.name, "nicpick.io/report"))
    assert rep["uid"] == again.uid and rep["pod"] == again.name, rep
    assert "bad assignment" not in again.stderr_text, again.describe()


def test_the_gatherer_probing_a_silent_peer_still_reads_its_watch(make_cluster):
    """The gatherer's own probe waits up to 20 s for a neighbour that never
    answers (node 1 drops the probe port).  It runs beside the gatherer's
    watch, as a follower's does: a pod recreated meanwhile is seen at once,
    the round decided again and the new pod probes its new part within
    seconds, while the gatherer's probe of that neighbour has not ended."""
    import time
    c = make_cluster()
    g, silent, again, after = c.pods
    silence_probe_port(c, silent)
    c.start_all(*COMMON, "--timeout", "60")
    probed = f"probe {again.node.fast_addr} -> {after.node.fast_addr} on {again.node.fast_if}: ok"
    wait_for_log(again, probed)
    time.sleep(0.5)
    t0 = recreate_and_restart(c, again)
    wait_for_log(again, probed, timeout=15)
    took = time.monotonic() - t0
    print(f"the recreated pod probed its part {took:.2f} s after it started")
    g._err.flush()
    with open(g._err.name) as f:
        gatherer_log = f.read()
    assert f"probe {g.node.fast_addr} -> {silent.node.fast_addr}" not in gatherer_log, \
        f"the gatherer's own probe ended first\n{diag(c)}"
    assert g.proc.poll() is None, g.describe()
    assert took < 5, f"{took:.1f} s\n{diag(c)}"
    assert replaced_line(again) in gatherer_log, gatherer_log
    c.wait_all(timeout=90)
    assert_all_exit(c, 0)
    nets = {p.name: C.decision_of(p)["agreement"]["network"] for p in c.pods}
    assert len(set(nets.values())) == 1 and str(FAST_NET) not in nets.values(), nets


@pytest.mark.parametrize("role", ["follower", "gatherer"])
def test_a_probe_goes_on_while_its_re_list_waits_on_the_api_server(make_cluster, role):
    """A pod (a follower, or the gatherer) probes a neighbour whose node
    drops the probe port for its first 6 s, when its watch ends (after
    4 s), the resume point has expired (410) and the re-list that follows
    takes the API server 25 s (a LIST under load).  Its probe goes on
    while it waits: it connects once the port opens and passes, long
    before the re-list is answered, instead of waking after its 20 s
    window with a failed probe of a healthy link (which made the job fall
    back to the management network)."""
    import time
    c = make_cluster()
    prober, silent = (c.pods[1], c.pods[2]) if role == "follower" else (c.pods[0], c.pods[1])
    other, after = c.pods[2], c.pods[3]
    silence_probe_port(c, silent)
    # Every watch of the prober ends after 4 s (the gatherer opens more
    # than one in the first second: the one open when the faults below are
    # set is the one whose end matters).
    c.server.set_faults([{"kind": "drop_watch", "after_seconds": 4, "h2": "rst_stream",
                          "verb": "watch", "token": prober.token, "count": -1}])
    t0 = time.monotonic()
    c.start_all(*COMMON, "--timeout", "90")
    # The round is out, so every pod has listed once.
    wait_for_log(other, f"probe {other.node.fast_addr} -> {after.node.fast_addr} on "
                        f"{other.node.fast_if}: ok")
    assert time.monotonic() - t0 < 3.5, diag(c)
    c.server.set_faults([{"kind": "expire_watch", "verb": "watch", "token": prober.token,
                          "count": 1},
                         {"kind": "delay", "ms": 25000, "verb": "list", "token": prober.token,
                          "count": 1}], replace=False)
    time.sleep(max(0.0, 6 - (time.monotonic() - t0)))
    c.nft(silent.node, "delete table inet nicpick_e2e")
    probed = f"probe {prober.node.fast_addr} -> {silent.node.fast_addr} on {prober.node.fast_if}: ok"
    try:
        wait_for_log(prober, probed, timeout=40)
    except AssertionError as e:
        prober._err.flush()
        with open(prober._err.name) as f:
            raise AssertionError(f"{e}\n{f.read()}\n{diag(c)}") from None
    took = time.monotonic() - t0
    print(f"the {role}'s probe passed {took:.2f} s after the start")
    lists = [r for r in c.server.requests() if r["token"] == prober.token and r["verb"] == "list"]
    assert len(lists) >= 2, f"no re-list\n{diag(c)}"
    assert took < 22, f"{took:.1f} s: the probe waited for the re-list\n{diag(c)}"
    c.wait_all(timeout=90)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    waiting = "waiting for the API server's list of the " + \
        ("pods" if role == "follower" else "job's pods")
    assert waiting in prober.stderr_text, prober.describe()
    if role == "gatherer":
        # What a re-list has seen so far is no progress: none is logged,
        # and none written on its pod (a watch event for every follower).
        assert "pods not created yet" not in prober.stderr_text, prober.describe()
        mine = [r for r in c.server.requests() if r["token"] == prober.token]
        relist = [i for i, r in enumerate(mine) if r["verb"] == "list"][1]
        during = [r for r in mine[relist + 1:] if r["time"] < mine[relist]["time"] + 24]
        assert not [r for r in during if r["verb"] == "patch"], \
            f"the gatherer wrote its pod while it re-listed: {during}\n{diag(c)}"
    if role == "follower":
        assert "the gatherer pod itself is missing" not in prober.stderr_text, prober.describe()


def finished_copy(c, pod, name, phase):
    """A pod of pod's job index that has finished (phase Succeeded or
    Failed, which a pod never leaves): what a Job leaves behind when it
    replaces a failed pod.  Its stale report would be refused if read."""
    obj = pod.object()
    obj["metadata"]["name"] = name
    obj["metadata"]["annotations"] = {"nicpick.io/report": '{"v":1,"pod":"stale"}'}
    obj["status"] = {"phase": phase}
    return c.server.create_pod(C.NAMESPACE, obj)["metadata"]["uid"]


@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
def test_a_finished_pod_of_the_job_takes_no_part(make_cluster, phase):
    """A finished pod beside the running one of the same index is no
    member: the gatherer's list and watch leave it out (a field selector
    on status.phase, as it watches the pods' metadata only), so it is not
    counted, its report is not read, and the job agrees."""
    c = make_cluster()
    finished_copy(c, c.pods[1], "job-w-1-old", phase)
    finished_copy(c, c.pods[0], "job-w-0-old", phase)
    run_job(c, *COMMON, "--timeout", "40")
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    for name in ("job-w-0-old", "job-w-1-old"):
        assert c.annotation(name, "nicpick.io/assignment") is None, diag(c)


def test_a_pod_that_fails_while_gathered_is_replaced_by_its_successor(make_cluster):
    """Three pods have reported; the fourth fails before its nicpick ran
    and the Job makes a new pod of its index.  The gatherer's watch sends
    the failed pod as deleted (it no longer matches the watch's field
    selector), so the gatherer waits for the new pod, not the failed one,
    and the job agrees with it."""
    import time
    c = make_cluster()
    started, last = c.pods[:3], c.pods[3]
    c.start_all(*COMMON, "--timeout", "60", pods=started)
    end = time.monotonic() + 20
    while time.monotonic() < end and not all(c.annotation(p.name, "nicpick.io/report")
                                             for p in started):
        time.sleep(0.1)
    assert all(c.annotation(p.name, "nicpick.io/report") for p in started), diag(c, started)
    g = c.pods[0]
    wait_for_log(g, "missing: job-w-3")
    c.server.patch_object(C.NAMESPACE, last.name, {"status": {"phase": "Failed"}})
    # gone, not a member that has not reported
    wait_for_log(g, "pods not created yet: 1 of 4", timeout=10)
    last.name = "job-w-3-r5t2x"
    last.uid = c.server.create_pod(C.NAMESPACE, last.object())["metadata"]["uid"]
    last.start(*COMMON, "--timeout", "60")
    c.wait_all(timeout=90)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    # the round was handed to the new pod, none to the failed one
    assert c.annotation("job-w-3-r5t2x", "nicpick.io/assignment"), diag(c)
    assert c.annotation("job-w-3", "nicpick.io/assignment") is None, diag(c)
