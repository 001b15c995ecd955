"""Rails end to end: every node of the fake cluster (cluster.py, rails=2)
has two fast NICs of the same kind on two networks, 10.9.0.0/24 and
10.10.0.0/24.  The job agrees on both, probes the ring on each, runs the
smoke all-reduce over both (the test double of libnccl, tests/doubles/
fakegpu.c) and gives NCCL and Gloo each pod's own two names."""
import ipaddress
import os
import re

import pytest

import cluster as C
from netns import source_env
from test_agree_e2e import COMMON, assert_all_exit, diag, gatherer, have, run_job

FAST_NET = ipaddress.ip_network(C.FAST_NET + ".0/24")
FAST2_NET = ipaddress.ip_network(C.FAST2_NET + ".0/24")


@pytest.fixture
def make_cluster(clusters):
    return lambda **kw: clusters(seed=True, rails=2, **kw)


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    fake = os.environ.get("NICPICK_FAKEGPU") or str(C.ROOT / "build" / "tests" / "libfakegpu.so")
    if not os.path.exists(fake):
        pytest.fail(f"{fake} is missing: build it with `make unit`")
    d = tmp_path / "fakegpu"
    d.mkdir()
    monkeypatch.setenv("NICPICK_NCCL_LIB", fake)
    monkeypatch.setenv("NICPICK_CUDART_LIB", fake)
    monkeypatch.setenv("FAKEGPU_DIR", str(d))
    return d


def test_two_equal_networks_become_rails_on_every_pod(make_cluster, fake_gpu):
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "60", "--smoke", "required", "--smoke-bytes", "64K")
    assert_all_exit(c, 0)
    for p in c.pods:
        n = p.node
        # Same quality: the networks are in the order of their text,
        # 10.10.0.0/24 first, on every pod.
        want = [n.fast2_if, n.fast_if]
        env = source_env(p.out_dir, "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
        assert env["NCCL_SOCKET_IFNAME"] == "=" + ",".join(want), (p.name, env)
        # Gloo gets the same count on every pod, as PyTorch requires.
        assert env["GLOO_SOCKET_IFNAME"] == ",".join(want), (p.name, env)
        d = C.decision_of(p)
        assert d["choice"]["interface"] == n.fast2_if, d["choice"]
        assert d["choice"]["interfaces"] == want, d["choice"]
        rails = d["agreement"]["rails"]
        assert [r["network"] for r in rails] == [str(FAST2_NET), str(FAST_NET)], rails
        assert [r["interface"] for r in rails] == want, rails
        assert [r["address"] for r in rails] == [n.fast2_addr, n.fast_addr], rails
        # each rail probed around the ring
        assert all(r["probed_pod"] for r in rails), rails
        assert d["smoke"]["status"] == "passed", d["smoke"]
        assert d["smoke"]["nccl_log"]["net_socket"], d["smoke"]
    g = gatherer(c).stderr_text
    assert "4 pods on 10.10.0.0/24, 10.9.0.0/24 (rails); probing the ring" in g, g
    for p in c.pods:
        for ifname in (p.node.fast_if, p.node.fast2_if):
            assert re.search(rf"probe \S+ -> \S+ on {ifname}: ok", p.stderr_text), p.describe()
    dec = C.decision_of(gatherer(c))["agreement"]["decision"]
    assert [r["net"] for r in dec["rails"]] == [str(FAST2_NET), str(FAST_NET)], dec
    why = {n["net"]: n["why"] for n in dec["nets"]}
    assert why[str(FAST_NET)].startswith("rail 2:"), why
    # management is as fast on paper but a lesser kind of NIC: never a rail
    assert "score" in why[C.MGMT_NET + ".0/24"], why


def test_rails_1_keeps_one_network(make_cluster):
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "40", "--rails", "1")
    assert_all_exit(c, 0)
    for p in c.pods:
        env = source_env(p.out_dir, "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
        assert env["NCCL_SOCKET_IFNAME"] == "=" + p.node.fast2_if, (p.name, env)
        assert env["GLOO_SOCKET_IFNAME"] == p.node.fast2_if, (p.name, env)
        d = C.decision_of(p)
        assert d["choice"]["interfaces"] == [p.node.fast2_if], d["choice"]
        assert len(d["agreement"]["rails"]) == 1, d["agreement"]


def test_a_rail_that_fails_its_probe_is_dropped_and_the_other_stays(make_cluster):
    have("nft")
    c = make_cluster()
    b = c.nodes[1]
    c.nft(b, f"""table inet nicpick_rails {{
        chain input {{ type filter hook input priority 0; policy accept;
            ip daddr {b.fast2_addr} tcp dport 29417 reject with tcp reset
        }}
    }}""")
    run_job(c, *COMMON, "--timeout", "60", timeout=100)
    assert_all_exit(c, 0)
    g = gatherer(c).stderr_text
    assert "failed the probe" in g and "deciding again without it" in g, diag(c)
    for p in c.pods:
        env = source_env(p.out_dir, "NCCL_SOCKET_IFNAME")
        assert env["NCCL_SOCKET_IFNAME"] == "=" + p.node.fast_if, (p.name, env)
        d = C.decision_of(p)["agreement"]
        assert [r["network"] for r in d["rails"]] == [str(FAST_NET)], d
    dec = C.decision_of(gatherer(c))["agreement"]["decision"]
    assert str(FAST2_NET) in dec["excl"], dec


def test_usage_rails(nicpick_bin):
    import subprocess
    for bad in ("0", "5", "all", ""):
        p = subprocess.run([nicpick_bin, "select", "--rails", bad], capture_output=True, text=True)
        assert p.returncode == 2, (bad, p.stderr)
        assert "--rails" in p.stderr, (bad, p.stderr)


def tuned_vars(p):
    """The two variables as nccl.env sets them (unset ones left out)."""
    env = source_env(p.out_dir, "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD")
    assert "NCCL_SOCKET_NTHREADS" not in (p.out_dir / "nccl.env").read_text() or env, p.name
    return {k: v for k, v in env.items() if v}


TUNE = ("--smoke", "required", "--smoke-bytes", "1M", "--tune", "on", "--tune-budget", "10")


def test_tune_writes_the_best_only_when_it_beats_the_defaults(make_cluster, fake_gpu,
                                                                 monkeypatch):
    """The double's busbw model: 4 x 4 moves 3x what NCCL's defaults do.
    Every pod runs the same four runs (defaults, 4 x 4, 2 x 8, defaults)
    and writes the same choice, as nccl.env and nccl.conf deliver it."""
    monkeypatch.setenv("FAKEGPU_TUNE", "default=10,4x4=30")
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "90", *TUNE, timeout=120)
    assert_all_exit(c, 0)
    for p in c.pods:
        assert tuned_vars(p) == {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"}, p.name
        conf = (p.out_dir / "nccl.conf").read_text()
        assert "NCCL_SOCKET_NTHREADS=4\n" in conf and "NCCL_NSOCKS_PERTHREAD=4\n" in conf, conf
        t = C.decision_of(p)["tune"]
        assert t["status"] == "tuned", t
        assert t["chosen"] == {"NCCL_SOCKET_NTHREADS": 4, "NCCL_NSOCKS_PERTHREAD": 4}, t
        rows = [(r["nthreads"], r["nsocks_perthread"]) for r in t["table"]]
        assert rows == [(None, None), (4, 4), (2, 8), (None, None)], t
        assert all(r["ok"] for r in t["table"]), t
        by = {(r["nthreads"], r["nsocks_perthread"]): r["busbw_gbps"] for r in t["table"]}
        assert by[(4, 4)] > 1.15 * by[(2, 8)], t
        assert t["sweep_ms"] <= 10000, t
        assert "tuned NCCL's socket transport: 4 threads x 4 sockets" in p.stderr_text, p.describe()
    # every pod judged the same figures (the ranks' mean time)
    tables = [[r["busbw_gbps"] for r in C.decision_of(p)["tune"]["table"]] for p in c.pods]
    assert all(t == tables[0] for t in tables), tables


def test_tune_is_never_worse_than_nccls_defaults(make_cluster, fake_gpu, monkeypatch):
    monkeypatch.setenv("FAKEGPU_TUNE", "default=30,4x4=10,2x8=20")
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "90", *TUNE, timeout=120)
    assert_all_exit(c, 0)
    for p in c.pods:
        assert tuned_vars(p) == {}, p.name
        assert "NCCL_SOCKET_NTHREADS" not in (p.out_dir / "nccl.conf").read_text()
        t = C.decision_of(p)["tune"]
        assert t["status"] == "defaults" and t["chosen"] is None, t
        assert len(t["table"]) == 4, t
        assert "never worse" in t["reason"], t
        assert "NCCL's socket defaults stand" in p.stderr_text, p.describe()


def test_tune_off_writes_nothing_extra(make_cluster, fake_gpu, monkeypatch):
    monkeypatch.setenv("FAKEGPU_TUNE", "default=10,4x4=30")
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "60", "--smoke", "required", "--smoke-bytes", "1M")
    assert_all_exit(c, 0)
    for p in c.pods:
        assert tuned_vars(p) == {}, p.name
        assert "tune" not in C.decision_of(p), p.name
