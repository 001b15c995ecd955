"""`make demo` (scripts/demo.py): the four-node job in network namespaces,
run as a user runs it, and what it prints."""
import os
import re
import subprocess

import pytest

from test_smoke import fakegpu  # noqa: F401  (fixture)

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def demo(nicpick_bin, fake):
    import netns
    why = netns.netns_unavailable_reason()
    if why:
        pytest.skip(why)
    p = subprocess.run(["/usr/bin/python3", str(ROOT / "scripts" / "demo.py"), "--nicpick", nicpick_bin,
                        "--fakegpu", fake], capture_output=True, text=True, timeout=300)
    made = set(re.findall(r"np-[0-9a-f]{8}", p.stdout + p.stderr))
    after = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    assert not (made & after), "the demo left namespaces behind"
    assert p.stdout.rstrip().splitlines()[-1].startswith("cleaned up: 6 network namespaces"), p.stdout
    return p


def status_rows(out):
    lines = out.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("$ "))
    job, head = lines[i + 1], lines[i + 2]
    cols = [(m.start(), m.group()) for m in re.finditer(r"\S+", head)]
    rows = {}
    for l in lines[i + 3:i + 7]:
        r = {n: l[s:(cols[k + 1][0] if k + 1 < len(cols) else None)].strip()
             for k, (s, n) in enumerate(cols)}
        rows[r["POD"].rstrip("*")] = r
    return job, rows


def test_demo_names_the_slow_node_through_the_smoke_step(nicpick_bin, fakegpu):  # noqa: F811
    p = demo(nicpick_bin, fakegpu)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert re.search(r"node-c \(np-\w+\): fast enp65s0f0np0 10.9.0.13/24, throttled to 200mbit \(tc tbf\)",
                     out), out
    assert out.count("decoys cni0 10.244.0.1/24, docker0 172.17.0.1/16") == 4, out
    for pod, nic in (("job-w-0", "eth1"), ("job-w-1", "ens3f0"), ("job-w-2", "enp65s0f0np0"),
                     ("job-w-3", "ibp12s0")):
        assert re.search(rf"{pod} on node-.: exit 0 after .* NCCL_SOCKET_IFNAME='={nic}'", out), out
    job, rows = status_rows(out)
    assert "decided; network 10.9.0.0/24, round 1; smoke passed, busbw " in job, job
    # the slow node itself, not the ends of one of its links
    assert ("suspect: slow node: job-w-2 (node node-c, 10.9.0.13) (rank 2), both its ring links"
            " are slow") in job, job
    assert rows["job-w-2"]["NODE"] == "node-c" and rows["job-w-2"]["SUSPECT"] == "slow-node", rows
    assert [r["SUSPECT"] for n, r in rows.items() if n != "job-w-2"] == ["-"] * 3, rows
    assert [r["STATE"] for r in rows.values()] == ["done"] * 4, rows
    assert "(exit 0)" in out
    # The double's links run at MB/s (the slow node's at kB/s): each figure
    # in the unit that suits it, never "0.00 GB/s".
    shown = out[out.index("$ kubectl"):]
    assert not re.search(r"(?<![0-9.])0\.00(?![0-9])", shown), shown
    assert re.search(r"\(\d[\d.]*/\d[\d.]* [kMG]?B/s from rank 1, \d[\d.]*/\d[\d.]* [kMG]?B/s to rank 3", job), job
    assert re.search(r"the fastest ring link carries [1-9][\d.]* [kMG]?B/s", job), job
    assert all(re.fullmatch(r"[1-9][\d.]*[kMG]?B/s", r["BUSBW"]) for r in rows.values()), rows


def test_demo_without_the_smoke_step_shows_the_decision_and_every_pod(nicpick_bin, tmp_path):
    p = demo(nicpick_bin, str(tmp_path / "no-libfakegpu.so"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "nicpick skips it" in p.stdout
    job, rows = status_rows(p.stdout)
    assert "decided; network 10.9.0.0/24, round 1; smoke skipped" in job, job
    assert sorted(rows) == ["job-w-0", "job-w-1", "job-w-2", "job-w-3"], rows
    assert {r["INTERFACE"] for r in rows.values()} == {"eth1", "ens3f0", "enp65s0f0np0", "ibp12s0"}
