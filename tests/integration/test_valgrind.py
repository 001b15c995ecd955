"""nicpick is clean under valgrind: no invalid access, no leak, on the
paths every user runs (discover, select, a refused select, a snapshot)."""
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")


def valgrind(nicpick_bin, *args, expect_rc=0):
    if os.environ.get("NICPICK_SANITIZED"):
        pytest.skip("not applicable: this binary is built with ASan, which valgrind cannot run; "
                    "the plain build's run of this test covers it")
    if not shutil.which("valgrind"):
        pytest.fail("valgrind is missing: scripts/install-deps.sh installs it")
    r = subprocess.run(["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
                        "--errors-for-leak-kinds=definite,indirect", nicpick_bin, *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == expect_rc, r.stderr[-3000:]
    assert "==" not in r.stderr, r.stderr[-3000:]  # valgrind's own report lines
    return r


def fixture_args(name):
    d = os.path.join(FIX, name)
    return ["--sysfs", os.path.join(d, "sys"), "--netlink-json", os.path.join(d, "ip.json")]


def test_discover_on_this_node_is_valgrind_clean(nicpick_bin):
    r = valgrind(nicpick_bin, "discover", "--json")
    assert any(i["name"] == "lo" for i in json.loads(r.stdout))


def test_select_on_a_dgx_fixture_is_valgrind_clean(nicpick_bin, tmp_path):
    valgrind(nicpick_bin, "select", "--peers", "none", "--out-dir", str(tmp_path),
             *fixture_args("dgx-h100"))
    assert (tmp_path / "nccl.env").exists()


def test_refused_select_is_valgrind_clean(nicpick_bin, tmp_path):
    valgrind(nicpick_bin, "select", "--out-dir", str(tmp_path), "--include", "=nothing",
             *fixture_args("roce-v2"), expect_rc=3)
    assert list(tmp_path.iterdir()) == []


def test_snapshot_replay_is_valgrind_clean(nicpick_bin, tmp_path):
    snap = tmp_path / "snap.json"
    r = subprocess.run([nicpick_bin, "discover", "--json", *fixture_args("roce-v2")],
                       capture_output=True, text=True, timeout=60, check=True)
    snap.write_text(r.stdout)
    valgrind(nicpick_bin, "select", "--out-dir", str(tmp_path / "out"), "--snapshot", str(snap))


def test_agreement_of_a_one_pod_job_is_valgrind_clean(nicpick_bin, tmp_path):
    """The whole --peers k8s path (config, client, watch, decision, probe,
    outputs, Event) against the test API server, under valgrind."""
    # The test API server listens on this namespace's loopback, so nicpick
    # runs here too and needs a usable interface of this machine.
    probe = subprocess.run([nicpick_bin, "select", "--peers", "none", "--out-dir",
                            str(tmp_path / "pre")], capture_output=True, text=True, timeout=60)
    if probe.returncode == 3:
        pytest.skip("this machine has no usable interface for the one-pod job: "
                    + probe.stderr.strip().splitlines()[-1])
    from tools.kubeapi import Server
    srv = Server(state_dir=str(tmp_path / "api")).start()
    try:
        srv.create_pod("default", {
            "metadata": {"name": "job-0", "labels": {
                "batch.kubernetes.io/job-name": "job",
                "batch.kubernetes.io/job-completion-index": "0"}},
            "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"}})
        out = tmp_path / "out"
        valgrind(nicpick_bin, "select", "--peers", "k8s", "--out-dir", str(out),
                 "--api-server", srv.url, "--ca-file", srv.ca_path,
                 "--token-file", str(tmp_path / "api" / "token"), "--namespace", "default",
                 "--pod-name", "job-0", "--expect", "1", "--timeout", "60")
        assert (out / "nccl.env").exists()
        pod = srv.get_object("default", "job-0")
        assert "nicpick.io/result" in pod["metadata"]["annotations"]
    finally:
        srv.stop()


def test_select_with_the_smoke_step_is_valgrind_clean(nicpick_bin, tmp_path):
    """select with --smoke required (spawning nicpick-smoke, reading its
    result and NCCL's log), and nicpick-smoke itself, against the NCCL/CUDA
    test double; both under valgrind."""
    fake = os.environ.get("NICPICK_FAKEGPU") or os.path.join(ROOT, "build", "tests", "libfakegpu.so")
    assert os.path.isfile(fake), "make builds the NCCL/CUDA test double"
    env = dict(os.environ, NICPICK_NCCL_LIB=fake, NICPICK_CUDART_LIB=fake,
               FAKEGPU_DIR=str(tmp_path))
    os.environ.update(NICPICK_NCCL_LIB=fake, NICPICK_CUDART_LIB=fake, FAKEGPU_DIR=str(tmp_path))
    try:
        valgrind(nicpick_bin, "select", "--peers", "none", "--out-dir", str(tmp_path / "out"),
                 "--smoke", "required", "--smoke-bytes", "64K", *fixture_args("dgx-h100"))
        d = json.loads((tmp_path / "out" / "decision.json").read_text())
        assert d["smoke"]["status"] == "passed", d["smoke"]
        companion = os.path.join(os.path.dirname(nicpick_bin), "nicpick-smoke")
        r = subprocess.run(["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
                            "--errors-for-leak-kinds=definite,indirect", companion, "run",
                            "--rank", "0", "--world", "1", "--bytes", "65536", "--timeout-ms",
                            "60000"], env=dict(env, NCCL_COMM_ID="127.0.0.1:1"),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "==" not in r.stderr, r.stderr[-3000:]
        assert json.loads(r.stdout)["ok"] is True
    finally:
        for k in ("NICPICK_NCCL_LIB", "NICPICK_CUDART_LIB", "FAKEGPU_DIR"):
            os.environ.pop(k, None)


@pytest.mark.parametrize("nvml", ["driver", "fake", "/nonexistent/libnvidia-ml.so.1"],
                         ids=["driver-files", "nvml", "runtime"])
def test_companion_info_every_way_is_valgrind_clean(nicpick_bin, monkeypatch, tmp_path, nvml):
    """nicpick-smoke info through the driver's files and libcuda (a tree of
    four GPUs; libcuda is left to the exit), through NVML (dlopen, init,
    every GPU; NVML is left to the exit) and through the runtime when NVML
    is missing, against the test double with four GPUs and a
    CUDA_VISIBLE_DEVICES list."""
    from test_smoke import driver_tree
    fake = os.environ.get("NICPICK_FAKEGPU") or os.path.join(ROOT, "build", "tests", "libfakegpu.so")
    assert os.path.isfile(fake), "make builds the NCCL/CUDA test double"
    root = driver_tree(tmp_path / "drv", 4) if nvml == "driver" else tmp_path / "no-driver"
    for k, v in dict(NICPICK_NCCL_LIB=fake, NICPICK_CUDART_LIB=fake, NICPICK_CUDA_LIB=fake,
                     NICPICK_DRIVER_ROOT=str(root),
                     NICPICK_NVML_LIB=nvml if nvml.startswith("/") else fake, FAKEGPU_GPUS="4",
                     CUDA_VISIBLE_DEVICES="2,0", FAKEGPU_TRACE=str(tmp_path / "trace")).items():
        monkeypatch.setenv(k, v)
    companion = os.path.join(os.path.dirname(nicpick_bin), "nicpick-smoke")
    r = valgrind(companion, "info", "--gpu", "0")
    got = json.loads(r.stdout)
    assert got["ok"] is True and got["gpu"]["bus"] == "0000:3A:00.0" and got["gpu"]["count"] == 2, got
    calls = (tmp_path / "trace").read_text().split()
    assert calls[0] == {"driver": "cuDriverGetVersion", "fake": "nvmlInit_v2"}.get(
        nvml, "cudaDriverGetVersion"), calls
