"""An init container killed with SIGKILL at any step, then run again (same
pod, same uid, as the kubelet restarts it): the job reaches the decision it
would have reached, and the killed pod's output directory ends with the
three whole files and nothing else.

The kill comes from nicpick itself: built with NICPICK_TEST_HOOKS (every
build but a release one), it kills itself at the step named by
NICPICK_TEST_KILL_AT (lib/util/testhook.h)."""
import ipaddress
import json
import os
import signal
import subprocess
import time

import pytest

import cluster as C
from outset import assert_one_set, documented
from test_agree_e2e import COMMON, FAST_NET, assert_all_exit, assert_on_network, diag, make_cluster  # noqa: F401

OUT_FILES = {"nccl.env", "nccl.conf", "decision.json"}
STEPS = ["before-report", "after-report", "after-decision", "after-probe", "mid-outputs",
         "outputs-written", "outputs-linked", "outputs-swapped"]


def hooks_built(nicpick_bin):
    return subprocess.run(["nm", nicpick_bin], capture_output=True, text=True).stdout.count(
        "np_test_point") > 0


def start_killed_at(pod, step, *args):
    os.environ["NICPICK_TEST_KILL_AT"] = step
    try:
        pod.start(*args)
    finally:
        del os.environ["NICPICK_TEST_KILL_AT"]


@pytest.mark.parametrize("who", ["follower", "gatherer"])
@pytest.mark.parametrize("step", STEPS)
def test_killed_at_a_step_and_run_again_reaches_the_same_decision(make_cluster, nicpick_bin,
                                                                  step, who):
    if not hooks_built(nicpick_bin):
        pytest.fail(f"{nicpick_bin} has no test hooks: build with `make` (TEST_HOOKS=1)")
    c = make_cluster()
    victim = c.pods[0] if who == "gatherer" else c.pods[2]
    args = (*COMMON, "--timeout", "60")
    start_killed_at(victim, step, *args)
    c.start_all(*args, pods=[p for p in c.pods if p is not victim])
    assert victim.wait(60) == -signal.SIGKILL, victim.describe()
    # Whatever it left: no set at all, or (killed once the new set was in
    # force) the whole new set, never a file of it under a documented path
    # before then.
    left = set(os.listdir(victim.out_dir))
    if not step.startswith("outputs-") and step != "mid-outputs":
        assert left == set(), left
    elif step == "outputs-swapped":
        assert documented(victim.out_dir) == OUT_FILES, left
        assert "export NCCL_SOCKET_IFNAME=" in (victim.out_dir / "nccl.env").read_text()
    else:
        assert documented(victim.out_dir) == set(), left

    # The kubelet runs the init container again: same pod, same uid.
    victim.rc = None
    victim.start(*args)
    c.wait_all(timeout=90)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    assert_one_set(victim.out_dir)
    d = C.decision_of(victim)
    assert d["choice"]["address"] == victim.node.fast_addr, d["choice"]
    assert ipaddress.ip_address(d["choice"]["address"]) in FAST_NET


def test_killed_mid_smoke_then_the_job_run_again_passes(make_cluster, nicpick_bin, monkeypatch):
    """A pod killed while its smoke all-reduce runs (its nicpick-smoke dies
    with it): the other pods' smoke tests end at their bound with exit 6 and
    write nothing; run again, as the kubelet restarts every failed init
    container, the job reaches the same decision and passes."""
    if not hooks_built(nicpick_bin):
        pytest.fail(f"{nicpick_bin} has no test hooks: build with `make` (TEST_HOOKS=1)")
    fake = os.environ.get("NICPICK_FAKEGPU") or str(C.ROOT / "build" / "tests" / "libfakegpu.so")
    c = make_cluster()
    fakedir = c.tmp / "fakegpu"
    fakedir.mkdir()
    monkeypatch.setenv("NICPICK_NCCL_LIB", fake)
    monkeypatch.setenv("NICPICK_CUDART_LIB", fake)
    monkeypatch.setenv("FAKEGPU_DIR", str(fakedir))
    victim = c.pods[2]
    args = (*COMMON, "--timeout", "60", "--smoke", "required", "--smoke-bytes", "64K",
            "--smoke-timeout", "5")
    start_killed_at(victim, "mid-smoke", *args)
    others = [p for p in c.pods if p is not victim]
    c.start_all(*args, pods=others)
    assert victim.wait(60) == -signal.SIGKILL, victim.describe()
    c.wait_all(pods=others, timeout=60)
    assert [p.rc for p in others] == [6] * len(others), diag(c)
    for p in c.pods:
        assert not any(f in OUT_FILES for f in os.listdir(p.out_dir)), (p.name, os.listdir(p.out_dir))
    # Every failed init container runs again.  They do not restart in step
    # (a restarted gatherer decides again and its followers probe again),
    # so the smoke step's bound must cover the skew, as its default does.
    for f in fakedir.iterdir():
        f.unlink()
    for p in c.pods:
        p.rc = None
    c.start_all(*args[:-2], "--smoke-timeout", "45")
    c.wait_all(timeout=90)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    for p in c.pods:
        s = C.decision_of(p)["smoke"]
        assert s["status"] == "passed", (p.name, s)
        assert_one_set(p.out_dir)


def restart_and_agree_in_round(c, g, args, epoch):
    """The gatherer g runs again (same pod, same uid); the job agrees on
    the fast network in round `epoch`, which every pod's part carries."""
    g.rc = None
    g.start(*args)
    c.wait_all(timeout=90)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    rnd = json.loads(c.annotation(g.name, "nicpick.io/round"))
    assert rnd["state"] == "final" and rnd["leader"] == g.uid, rnd
    assert rnd["epoch"] == epoch, (rnd, g.stderr_text)
    for p in c.pods:
        a = json.loads(c.annotation(p.name, "nicpick.io/assignment"))
        assert a["epoch"] == epoch, (p.name, a)


@pytest.mark.parametrize("step,first_round", [("after-probe", 2), ("mid-outputs", 1)])
def test_a_restarted_gatherer_resumes_its_rounds_from_what_it_published(make_cluster, nicpick_bin,
                                                                       step, first_round):
    """The gatherer's container restarts (same pod, same uid).  Killed after
    its round was final (mid-outputs), its result stands: every follower has
    taken it and gone, so it hands out no new round and writes the same
    outputs.  Killed before (after-probe), the next round is numbered after
    the one it published: round 2, never round 1 again, so no message of
    the old round passes for one of the new."""
    if not hooks_built(nicpick_bin):
        pytest.fail(f"{nicpick_bin} has no test hooks: build with `make` (TEST_HOOKS=1)")
    c = make_cluster()
    g = c.pods[0]
    args = (*COMMON, "--timeout", "60")
    start_killed_at(g, step, *args)
    others = c.pods[1:]
    c.start_all(*args, pods=others)
    assert g.wait(60) == -signal.SIGKILL, g.describe()
    if step == "mid-outputs":
        c.wait_all(pods=others, timeout=60)
        assert_all_exit(c, 0, pods=others)
    restart_and_agree_in_round(c, g, args, first_round)
    assert f"round {1} was " in g.stderr_text, g.stderr_text
    if step == "mid-outputs":
        assert "round 1 stands" in g.stderr_text, g.stderr_text
    assert C.decision_of(g)["choice"]["address"] == g.node.fast_addr


def test_a_gatherer_restarted_before_its_round_numbers_the_next_after_the_parts(make_cluster,
                                                                              nicpick_bin):
    """The gatherer dies after every other pod got its part of round 1 but
    before round 1 reached its own pod (it writes the parts first): the
    other pods probe those parts with round 1's token, and some publish
    their results.  Restarted, the gatherer finds no round on its pod, yet
    its next round is round 2, after the parts it handed out, so that no
    result of the old parts passes for the new round."""
    if not hooks_built(nicpick_bin):
        pytest.fail(f"{nicpick_bin} has no test hooks: build with `make` (TEST_HOOKS=1)")
    c = make_cluster()
    g = c.pods[0]
    args = (*COMMON, "--timeout", "60")
    others = c.pods[1:]
    c.start_all(*args, pods=others)
    start_killed_at(g, "after-parts", *args)
    assert g.wait(60) == -signal.SIGKILL, g.describe()
    for p in others:
        a = json.loads(c.annotation(p.name, "nicpick.io/assignment"))
        assert a["epoch"] == 1 and a["leader"] == g.uid, (p.name, a)
    assert c.annotation(g.name, "nicpick.io/round") is None
    time.sleep(1)  # the other pods probe round 1's parts meanwhile
    restart_and_agree_in_round(c, g, args, 2)
