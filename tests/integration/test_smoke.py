"""The smoke all-reduce on CPU-only CI.

Real NCCL runs on the GPU machine (tests/gpu).  Here nicpick-smoke loads a
test double of libnccl.so.2 and libcudart.so (tests/doubles/fakegpu.c) that
behaves as NCCL and CUDA do, good and bad: an all-reduce that really sums
across processes, an init that never completes, init errors, wrong sums, a
log that names another device, a peer that dies, a slow link, no driver, no
GPU.  Every case asserts the exit code, the one-line message, and what was
(not) written."""
import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import time

import pytest
from outset import LOCK

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def fakegpu():
    path = os.environ.get("NICPICK_FAKEGPU") or str(ROOT / "build" / "tests" / "libfakegpu.so")
    if not os.path.isfile(path):
        if os.environ.get("CI") or os.environ.get("NICPICK_FAKEGPU"):
            pytest.fail(f"the NCCL/CUDA test double is missing at {path} (make builds it)")
        pytest.skip(f"{path} missing: run `make integration`")
    return path


@pytest.fixture
def gpu_env(fakegpu, tmp_path, monkeypatch):
    """The environment of a pod whose NCCL and CUDA are the test double."""
    d = tmp_path / "fakegpu"
    d.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "FAKEGPU_", "NICPICK_NCCL", "NICPICK_CUDART"))}
    env = {k: v for k, v in env.items()
           if k not in ("NICPICK_NVML_LIB", "NICPICK_CUDA_LIB", "NICPICK_DRIVER_ROOT",
                        "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES")}
    # NVML and libcuda too, as on a GPU node: the versions step reads them
    # (lib/gpu/nvml.c, procfs.c).  The driver's /proc and /dev are not this
    # machine's: an empty tree, so NVML answers unless a test builds one
    # (driver_tree).
    env.update(NICPICK_NCCL_LIB=fakegpu, NICPICK_CUDART_LIB=fakegpu, NICPICK_NVML_LIB=fakegpu,
               NICPICK_CUDA_LIB=fakegpu, NICPICK_DRIVER_ROOT=str(tmp_path / "no-driver"),
               FAKEGPU_DIR=str(d))
    return env


def run(nicpick_bin, *args, env, timeout=60):
    return subprocess.run([nicpick_bin, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def ranks(nicpick_bin, env, world=2, extra=(), per_rank_env=None, comm_id="127.0.0.1:29999",
          timeout=60):
    """world `nicpick smoke` processes at once on loopback; returns
    [(proc, report or None, seconds)] in rank order."""
    procs = []
    for r in range(world):
        e = dict(env, NCCL_SOCKET_IFNAME="=lo", **(per_rank_env(r) if per_rank_env else {}))
        procs.append((time.monotonic(), subprocess.Popen(
            [nicpick_bin, "smoke", "--rank", str(r), "--world-size", str(world), "--comm-id",
             comm_id, "--smoke-bytes", "64K", "--json", *extra],
            env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    out = []
    for t0, p in procs:
        so, se = p.communicate(timeout=timeout)
        p.stderr_text = se
        out.append((p, json.loads(so) if so.strip() else None, time.monotonic() - t0))
    return out


def error_line(p):
    errs = [l for l in p.stderr_text.splitlines() if l.startswith("nicpick: error:")]
    assert len(errs) == 1, p.stderr_text
    return errs[0]


def test_two_ranks_sum_exactly_over_the_agreed_interface(nicpick_bin, gpu_env):
    res = ranks(nicpick_bin, gpu_env)
    for r, (p, rep, _) in enumerate(res):
        assert p.returncode == 0, p.stderr_text
        assert rep["status"] == "passed" and rep["correct"] is True
        assert rep["rank"] == r and rep["world"] == 2
        assert rep["nccl_log"]["net_socket"] == [{"interface": "lo", "address": f"10.0.0.{r + 1}"}]
        assert rep["nccl"]["version"] == "2.28.9"
        assert rep["gpu"]["model"] == "Fake GPU (test double)"
        assert rep["sizes"][-1]["bytes"] == 65536 and rep["sizes"][-1]["wrong"] == 0
        assert "smoke all-reduce passed: 2 pods, exact sums" in p.stderr_text


def test_init_that_never_completes_ends_at_the_smoke_timeout(nicpick_bin, gpu_env):
    env = dict(gpu_env, FAKEGPU_MODE="hang-init")
    res = ranks(nicpick_bin, env, extra=("--smoke-timeout", "2", "--timeout", "60"))
    for p, rep, secs in res:
        assert p.returncode == 6, p.stderr_text
        line = error_line(p)
        assert "failed in init: communicator init did not finish by the deadline" in line
        assert "hosts the bootstrap at 127.0.0.1:29999" in line
        assert secs < 10, f"took {secs:.1f} s for a 2 s smoke timeout"
        assert rep["status"] == "failed"


def test_nccl_init_error_carries_nccls_own_text(nicpick_bin, gpu_env):
    res = ranks(nicpick_bin, dict(gpu_env, FAKEGPU_MODE="init-error"), world=1)
    p, rep, _ = res[0]
    assert p.returncode == 6
    line = error_line(p)
    assert "unhandled system error" in line and "Connection refused" in line


def test_wrong_sums_are_a_failure(nicpick_bin, gpu_env):
    for p, rep, _ in ranks(nicpick_bin, dict(gpu_env, FAKEGPU_MODE="wrong-sums")):
        assert p.returncode == 6, p.stderr_text
        assert "gave wrong sums: 1 of 16384 elements differ" in error_line(p)
        assert rep["correct"] is False


def test_nccl_using_another_device_is_a_failure(nicpick_bin, gpu_env):
    # The smoke step bootstraps through NCCL_COMM_ID, where NCCL picks the
    # bootstrap interface by rank 0's subnet, so the data path names it.
    env = dict(gpu_env, FAKEGPU_MODE="wrong-if", FAKEGPU_IF="cni0")
    for p, rep, _ in ranks(nicpick_bin, env):
        assert p.returncode == 6, p.stderr_text
        assert "NCCL used NET/Socket on cni0:" in error_line(p)
        assert "not the agreed lo" in error_line(p)
        assert rep["nccl_log"]["bootstrap"]["interface"] == "cni0"


def dgx_select(nicpick_bin, out_dir, env):
    d = ROOT / "tests" / "fixtures" / "dgx-h100"
    return run(nicpick_bin, "select", "--peers", "none", "--out-dir", str(out_dir), "--smoke",
               "required", "--smoke-bytes", "64K", "--sysfs", str(d / "sys"), "--netlink-json",
               str(d / "ip.json"), env=env)


def test_rdma_agreed_and_used_passes(nicpick_bin, gpu_env, tmp_path):
    p = dgx_select(nicpick_bin, tmp_path / "out", gpu_env)
    assert p.returncode == 0, p.stderr
    d = json.loads((tmp_path / "out" / "decision.json").read_text())
    hcas = d["choice"]["ib_hca"].lstrip("=").split(",")
    assert len(hcas) > 1, d["choice"]
    assert d["smoke"]["nccl_log"]["net_ib"] == hcas
    assert d["smoke"]["nccl_log"]["network"] == "IB"


def test_rdma_agreed_but_sockets_used_is_exit_6_quoting_nccl(nicpick_bin, gpu_env, tmp_path):
    # No /dev/infiniband in the container: NCCL says so in an INFO line and
    # runs on sockets; the proof must not pass.
    p = dgx_select(nicpick_bin, tmp_path / "out", dict(gpu_env, FAKEGPU_MODE="ib-absent"))
    assert p.returncode == 6, p.stderr
    p.stderr_text = p.stderr
    line = error_line(p)
    assert "NCCL fell back to sockets although nicpick chose the HCAs mlx5_0:1" in line, line
    assert '"NET/IB : No device found."' in line, line
    assert not (tmp_path / "out" / "nccl.env").exists()


def test_a_bootstrap_by_rank_0s_subnet_is_not_a_false_alarm(nicpick_bin, gpu_env):
    # Another interface on rank 0's subnet carries the smoke step's
    # bootstrap (ncclFindInterfaceMatchSubnet); the data used the agreed one.
    env = dict(gpu_env, FAKEGPU_MODE="subnet-boot", FAKEGPU_IF="eth0")
    for p, rep, _ in ranks(nicpick_bin, env):
        assert p.returncode == 0, p.stderr_text
        assert rep["nccl_log"]["bootstrap"]["interface"] == "eth0"
        assert rep["nccl_log"]["net_socket"][0]["interface"] == "lo"


def test_no_channel_over_the_network_is_not_proven(nicpick_bin, gpu_env):
    # nicpick smoke is required: a run the log cannot prove exits 6.
    for p, rep, _ in ranks(nicpick_bin, dict(gpu_env, FAKEGPU_MODE="local-only")):
        assert p.returncode == 6, p.stderr_text
        assert "--smoke required: not proven: no channel ran over the network" in error_line(p)
        assert rep["nccl_log"]["channels"] == 0 and rep["nccl_log"]["channels_local"] == 1


def test_a_peer_that_dies_mid_test_does_not_hang_the_others(nicpick_bin, gpu_env):
    env = dict(gpu_env, FAKEGPU_MODE="die-mid", FAKEGPU_DIE_RANK="1")
    (p0, rep0, t0), (p1, rep1, t1) = ranks(nicpick_bin, env,
                                           extra=("--smoke-timeout", "3", "--timeout", "60"))
    assert p1.returncode == 6 and "nicpick-smoke exited 9 without a result" in error_line(p1)
    assert p0.returncode == 6, p0.stderr_text
    assert "failed in all-reduce: all-reduce of 1 MiB did not finish by the deadline" in \
        error_line(p0) or "all-reduce of 64 KiB did not finish" in error_line(p0)
    assert t0 < 15


def test_a_slow_network_is_a_failure_with_the_figures(nicpick_bin, gpu_env):
    env = dict(gpu_env, FAKEGPU_MODE="slow", FAKEGPU_SLOW_MS="50")
    for p, rep, _ in ranks(nicpick_bin, env, extra=("--min-busbw", "1")):
        assert p.returncode == 6, p.stderr_text
        line = error_line(p)
        assert "slow network: busbw 0.00 GB/s" in line and "< 1.00 GB/s (--min-busbw 1)" in line


def slow_ranks(links):
    return [n["rank"] for n in links["named"]]


@pytest.mark.parametrize("world,slow", [(3, 1), (4, 2), (5, 4)])
def test_a_slow_node_is_named_by_its_two_slow_ring_links(nicpick_bin, gpu_env, world, slow):
    # The double slows every link the node touches, and times a grouped
    # send/receive by its slower half, as real NCCL does: timing all ring
    # links at once made every link of a 3-pod ring look slow (issue 13).
    env = dict(gpu_env, FAKEGPU_MODE="slow-link", FAKEGPU_SLOW_RANK=str(slow))
    res = ranks(nicpick_bin, env, world=world)
    for r, (p, rep, _) in enumerate(res):
        assert p.returncode == 0, p.stderr_text
        links = rep["links"]
        assert len(links["ring"]) == world
        assert slow_ranks(links) == [slow], links
        assert links["named"][0]["why"] == "both ring links slow"
        # exactly the two links touching the slow node are slow
        assert [l["slow"] for l in links["ring"]] == \
            [k in ((slow - 1) % world, slow) for k in range(world)], links
        # ... and stayed slow when timed again (with the fastest link)
        assert all(l["rechecked"] for l in links["ring"] if l["slow"]), links
        assert sum(l["rechecked"] for l in links["ring"]) == 3, links
        assert f"slow node: rank {slow}, both its ring links are slow" in links["verdict"]
        assert links["on_slow"] == "warn"
        assert f"slow node: rank {slow}" in p.stderr_text
    if world != 3:
        return
    # Slow overall: the failure names the node too.
    res = ranks(nicpick_bin, env, world=3, extra=("--min-busbw", "1000"))
    for p, rep, _ in res:
        assert p.returncode == 6
        line = error_line(p)
        assert "slow network" in line and f"slow node: rank {slow}, both" in line, line


@pytest.mark.parametrize("world,link", [(3, 2), (4, 1)])
def test_one_bad_timing_of_a_healthy_link_names_nobody(nicpick_bin, gpu_env, world, link):
    # On the GPU machine one healthy 3-pod run timed link 2>0 at 0.59 GB/s
    # against a fastest of 1.49 and named pods 0 and 2 (docs/smoke.md).  The
    # double's noisy link is slow in its first timings only: the companion
    # times it again, with the fastest link, and the median counts.
    env = dict(gpu_env, FAKEGPU_MODE="noisy-link", FAKEGPU_NOISE_LINK=str(link))
    for p, rep, _ in ranks(nicpick_bin, env, world=world):
        assert p.returncode == 0, p.stderr_text
        ring = rep["links"]["ring"]
        assert rep["links"]["named"] == [] and not any(l["slow"] for l in ring), rep["links"]
        assert ring[link]["rechecked"], ring
        assert sum(l["rechecked"] for l in ring) == 2, ring  # it and the fastest
        assert "slow link end" not in p.stderr_text
    # The same link slow in every timing is a lone slow link: both ends named.
    env["FAKEGPU_NOISE_N"] = "100"
    for p, rep, _ in ranks(nicpick_bin, env, world=world):
        assert p.returncode == 0, p.stderr_text
        assert slow_ranks(rep["links"]) == [link, (link + 1) % world], rep["links"]
        assert rep["links"]["ring"][link]["rechecked"] and rep["links"]["ring"][link]["slow"]


def test_with_three_even_ranks_nobody_is_named(nicpick_bin, gpu_env):
    for p, rep, _ in ranks(nicpick_bin, gpu_env, world=3):
        assert p.returncode == 0, p.stderr_text
        assert len(rep["links"]["ring"]) == 3 and rep["links"]["named"] == [], rep["links"]
        assert not any(l["slow"] or l["rechecked"] for l in rep["links"]["ring"])


def test_a_hung_companion_is_killed_at_the_deadline(nicpick_bin, gpu_env, tmp_path):
    fake = tmp_path / "nicpick-smoke"
    fake.write_text("#!/bin/sh\nexec sleep 1000\n")
    fake.chmod(0o755)
    t0 = time.monotonic()
    p = run(nicpick_bin, "smoke", "--rank", "0", "--world-size", "1", "--comm-id",
            "127.0.0.1:29999", "--smoke-timeout", "1", env=dict(gpu_env, NICPICK_SMOKE_BIN=str(fake)))
    assert p.returncode == 6
    p.stderr_text = p.stderr
    assert "did not end by the deadline and was killed" in error_line(p)
    assert time.monotonic() - t0 < 15


def test_a_companion_that_prints_garbage_is_refused(nicpick_bin, gpu_env, tmp_path):
    fake = tmp_path / "nicpick-smoke"
    fake.write_text("#!/bin/sh\necho '{\"v\":1,\"ok\":true}'\n")
    fake.chmod(0o755)
    p = run(nicpick_bin, "smoke", "--rank", "0", "--world-size", "1", "--comm-id",
            "127.0.0.1:29999", env=dict(gpu_env, NICPICK_SMOKE_BIN=str(fake)))
    assert p.returncode == 6
    p.stderr_text = p.stderr
    assert "bad result from nicpick-smoke" in error_line(p)


@pytest.mark.parametrize("nccl,cudart,want", [
    ("/etc/passwd", None, "no usable libnccl.so.2: /etc/passwd ("),
    ("libc.so.6", None, "no usable libnccl.so.2: libc.so.6 (not the expected library)"),
    ("/nonexistent/libnccl.so.2", None, "no usable libnccl.so.2: /nonexistent/libnccl.so.2"),
    (None, "/etc/hostname", "no usable CUDA runtime: /etc/hostname ("),
])
def test_a_path_that_is_not_a_usable_library_is_a_clear_error(nicpick_bin, gpu_env, nccl, cudart,
                                                              want):
    env = dict(gpu_env)
    if nccl:
        env["NICPICK_NCCL_LIB"] = nccl
    if cudart:
        env["NICPICK_CUDART_LIB"] = cudart
    p = run(nicpick_bin, "smoke", "--rank", "0", "--world-size", "1", "--comm-id",
            "127.0.0.1:29999", env=env)
    assert p.returncode == 6, p.stderr
    p.stderr_text = p.stderr
    line = error_line(p)
    assert "cannot run here" in line and want in line, line


# ---- info: the versions step without a CUDA context ----

# The runtime calls that reach the driver: the first of them loads and
# initialises CUDA, 0.2 s of CPU on an H200 (docs/smoke.md).
DRIVER_CALLS = {"cudaDriverGetVersion", "cudaGetDeviceCount", "cudaGetDeviceProperties",
                "cudaDeviceGetPCIBusId", "cudaSetDevice"}
NO_NVML = {"NICPICK_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"}
UUID = "GPU-{:02x}4e0000-0000-4000-8000-00000000fa4e"  # the double's GPU i


def info(nicpick_bin, env, tmp_path, *args):
    """nicpick-smoke info under env: (exit code, result, the calls the
    double saw that reach the driver or NVML)."""
    trace = tmp_path / "trace"
    if trace.exists():
        trace.unlink()
    p = subprocess.run([str(pathlib.Path(nicpick_bin).with_name("nicpick-smoke")), "info", *args],
                       env=dict(env, FAKEGPU_TRACE=str(trace)), capture_output=True, text=True,
                       timeout=30)
    assert p.stdout.strip(), p.stderr
    return p.returncode, json.loads(p.stdout), trace.read_text().split() if trace.exists() else []


def driver_tree(root, n=1, names=None, *, absent=(), excluded=(), mig=(), caps=False,
                minors=None, edit=None):
    """/proc/driver/nvidia and /dev under root as the NVIDIA driver and the
    device plugin leave them for the double's n GPUs (GPU i at bus
    0x1a + 0x10 i, its UUID as the double's).  The file is in the format of
    open-gpu-kernel-modules' kernel-open/nvidia/nv-procfs.c
    (nv_procfs_read_gpu_info; tests/unit/test_gpu.c has an H200's byte for
    byte).  absent: GPUs whose /dev/nvidia<minor> this container lacks (the
    node's other GPUs, which procfs shows under CDI); mig: GPUs with a MIG
    GPU instance; caps: the MIG config and monitor capabilities and their
    /dev/nvidia-caps nodes, which a node with MIG off has too; minors[i]: GPU i's minor
    (default i); edit(i, text): GPU i's file rewritten."""
    names = names or ["Fake GPU (test double)"] * n
    minors = minors or list(range(n))
    (root / "dev").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        bus = f"0000:{0x1a + 0x10 * i:02x}:00.0"
        d = root / "proc/driver/nvidia/gpus" / bus
        d.mkdir(parents=True)
        text = (f"Model: \t\t {names[i]}\nIRQ:   \t\t {41 + i}\n"
                f"GPU UUID: \t {UUID.format(i)}\nVideo BIOS: \t 96.00.a5.00.1a\n"
                f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
                f"Bus Location: \t {bus}\nDevice Minor: \t {minors[i]}\n"
                f"GPU Firmware: \t 580.159.04\n"
                f"GPU Excluded:\t {'Yes' if i in excluded else 'No'}\n")
        (d / "information").write_text(edit(i, text) if edit else text)
        cap = root / f"proc/driver/nvidia/capabilities/gpu{minors[i]}/mig"
        cap.mkdir(parents=True)
        if i in mig:
            (cap / "gi1").mkdir()
            (cap / "gi1" / "access").write_text("DeviceFileMinor: 3\nDeviceFileMode: 292\n")
        if i not in absent:
            os.mknod(root / "dev" / f"nvidia{minors[i]}", 0o666 | stat.S_IFCHR,
                     os.makedev(195, minors[i]))
    if caps:  # the MIG config and monitor capabilities, as on the H200 with MIG off
        (root / "dev/nvidia-caps").mkdir()
        (root / "proc/driver/nvidia/capabilities/mig").mkdir()
        for m, name, mode in ((1, "config", 0o400), (2, "monitor", 0o444)):
            os.mknod(root / f"dev/nvidia-caps/nvidia-cap{m}", mode | stat.S_IFCHR,
                     os.makedev(241, m))
            (root / f"proc/driver/nvidia/capabilities/mig/{name}").write_text(
                f"DeviceFileMinor: {m}\nDeviceFileMode: {mode}\nDeviceFileModify: 1\n")
    return root


@pytest.mark.parametrize("extra,tree,args,bus", [
    ({}, {}, (), "0000:1A:00.0"),
    ({}, {"caps": True}, (), "0000:1A:00.0"),
    ({"FAKEGPU_GPUS": "4"}, {"n": 4, "minors": [3, 2, 1, 0]}, ("--gpu", "1"), "0000:2A:00.0"),
    ({"FAKEGPU_GPUS": "4", "CUDA_VISIBLE_DEVICES": "3,1"}, {"n": 4}, ("--gpu", "0"),
     "0000:4A:00.0"),
    ({"FAKEGPU_GPUS": "4", "CUDA_VISIBLE_DEVICES": UUID.format(2) + ",GPU-01"}, {"n": 4},
     ("--gpu", "1"), "0000:2A:00.0"),
    ({"FAKEGPU_GPUS": "3", "FAKEGPU_GPU_NAMES": "NVIDIA L4,NVIDIA H200,NVIDIA L4",
      "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, {"n": 3, "names": ["NVIDIA L4", "NVIDIA H200",
                                                             "NVIDIA L4"]},
     ("--gpu", "1"), "0000:2A:00.0"),
], ids=["one-gpu", "mig-off-capabilities", "minors-are-not-cuda-order", "indices",
        "uuid-and-prefix", "mixed-models-in-pci-order"])
def test_info_reads_the_drivers_files_and_libcuda_and_reports_what_the_runtime_would(
        nicpick_bin, gpu_env, tmp_path, extra, tree, args, bus):
    env = dict(gpu_env, NICPICK_DRIVER_ROOT=str(driver_tree(tmp_path / "drv", **tree)), **extra)
    rc, fast, calls = info(nicpick_bin, env, tmp_path, *args)
    assert rc == 0 and fast["ok"], fast
    # Neither NVML nor the runtime: libcuda's version call only.
    assert calls == ["cuDriverGetVersion"], calls
    assert fast["gpu"]["bus"] == bus, fast
    rc, slow, calls = info(nicpick_bin, dict(env, **NO_NVML, NICPICK_DRIVER_ROOT="/nonexistent"),
                           tmp_path, *args)
    assert rc == 0 and "cudaGetDeviceCount" in calls, calls
    assert fast == slow, "the driver's files and the runtime differ"


def test_info_counts_only_the_gpus_whose_device_node_this_container_has(nicpick_bin, gpu_env,
                                                                        tmp_path):
    """Under CDI procfs lists every GPU of the node; the device plugin puts
    only this container's /dev/nvidia<minor> in it.  The double's runtime
    sees GPU 2 alone through CUDA_VISIBLE_DEVICES, as the container would."""
    tree = driver_tree(tmp_path / "drv", 4, absent=(0, 1, 3))
    env = dict(gpu_env, NICPICK_DRIVER_ROOT=str(tree), FAKEGPU_GPUS="4")
    rc, got, calls = info(nicpick_bin, env, tmp_path)
    assert rc == 0 and calls == ["cuDriverGetVersion"], (got, calls)
    assert (got["gpu"]["bus"], got["gpu"]["count"]) == ("0000:3A:00.0", 1), got
    want = info(nicpick_bin, dict(env, **NO_NVML, NICPICK_DRIVER_ROOT="/nonexistent",
                                  CUDA_VISIBLE_DEVICES="2"), tmp_path)[1]
    assert got == want
    # an excluded GPU (NVreg_ExcludedGpus) is no CUDA device either
    tree = driver_tree(tmp_path / "drv2", 2, excluded=(0,))
    rc, got, calls = info(nicpick_bin, dict(env, NICPICK_DRIVER_ROOT=str(tree)), tmp_path)
    assert rc == 0 and calls == ["cuDriverGetVersion"] and got["gpu"]["count"] == 1, got
    assert got["gpu"]["bus"] == "0000:2A:00.0", got


def _bad_bus(i, text):
    return text.replace("Bus Location: \t 0000:1a:00.0", "Bus Location: \t 1a:00.0")


@pytest.mark.parametrize("extra,tree", [
    ({}, {"mig": (0,)}),
    ({"NVIDIA_VISIBLE_DEVICES": "MIG-" + UUID.format(0)}, {}),
    ({"CUDA_VISIBLE_DEVICES": "MIG-" + UUID.format(0) + "/1/0"}, {}),
    ({}, {"edit": _bad_bus}),
    ({}, {"edit": lambda i, t: t.replace("Device Minor", "Minor")}),
    ({}, {"edit": lambda i, t: t.replace(".0\nDevice", ".1\nDevice")}),
    ({}, {"absent": (0,)}),
    ({"FAKEGPU_MODE": "nodriver"}, {}),
    ({"NICPICK_CUDA_LIB": "/nonexistent/libcuda.so.1"}, {}),
    ({"FAKEGPU_GPUS": "2", "FAKEGPU_GPU_NAMES": "NVIDIA L4,NVIDIA H200"},
     {"n": 2, "names": ["NVIDIA L4", "NVIDIA H200"]}),
    ({"CUDA_VISIBLE_DEVICES": ""}, {}),
], ids=["mig-instance", "mig-nvidia-visible", "mig-cuda-visible", "bad-bus",
        "no-minor", "function-1", "no-device-node", "stub-libcuda", "no-libcuda",
        "mixed-models-fastest-first", "empty-visible"])
def test_info_leaves_what_the_drivers_files_cannot_settle_to_nvml(nicpick_bin, gpu_env, tmp_path,
                                                                  extra, tree):
    env = dict(gpu_env, NICPICK_DRIVER_ROOT=str(driver_tree(tmp_path / "drv", **tree)), **extra)
    rc, got, calls = info(nicpick_bin, env, tmp_path)
    assert "nvmlInit_v2" in calls, calls
    want = info(nicpick_bin, dict(env, NICPICK_DRIVER_ROOT="/nonexistent"), tmp_path)[:2]
    assert (rc, got) == want, "the same answer, the same error, as NVML's"


@pytest.mark.parametrize("extra,args,bus", [
    ({}, (), "0000:1A:00.0"),
    ({"FAKEGPU_GPUS": "4", "FAKEGPU_NVML_ORDER": "reverse"}, ("--gpu", "1"), "0000:2A:00.0"),
    ({"FAKEGPU_GPUS": "4", "CUDA_VISIBLE_DEVICES": "3,1"}, ("--gpu", "0"), "0000:4A:00.0"),
    ({"FAKEGPU_GPUS": "4", "FAKEGPU_NVML_ORDER": "reverse",
      "CUDA_VISIBLE_DEVICES": UUID.format(2) + ",GPU-01"},
     ("--gpu", "1"), "0000:2A:00.0"),
    ({"FAKEGPU_GPUS": "4", "CUDA_VISIBLE_DEVICES": "2," + UUID.format(0)}, ("--gpu", "1"),
     "0000:1A:00.0"),
    ({"FAKEGPU_GPUS": "3", "FAKEGPU_GPU_NAMES": "NVIDIA L4,NVIDIA H200,NVIDIA L4",
      "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "FAKEGPU_NVML_ORDER": "reverse"}, ("--gpu", "1"),
     "0000:2A:00.0"),
], ids=["one-gpu", "nvml-order-is-not-cuda-order", "indices", "uuid-and-prefix",
        "index-and-uuid", "mixed-models-in-pci-order"])
def test_info_reads_nvml_without_a_cuda_context_and_reports_what_the_runtime_would(
        nicpick_bin, gpu_env, tmp_path, extra, args, bus):
    env = dict(gpu_env, **extra)
    rc, fast, calls = info(nicpick_bin, env, tmp_path, *args)
    assert rc == 0 and fast["ok"], fast
    assert not DRIVER_CALLS & set(calls), calls
    # The companion exits as soon as it has answered: NVML is left to the
    # process's exit (lib/gpu/gpu.h, gpu_info_env.exiting).
    assert calls == ["nvmlInit_v2"], calls
    assert fast["gpu"]["bus"] == bus, fast
    rc, slow, calls = info(nicpick_bin, dict(env, **NO_NVML), tmp_path, *args)
    assert rc == 0 and "cudaGetDeviceCount" in calls, calls
    assert fast == slow, "the NVML path and the runtime's differ"


@pytest.mark.parametrize("extra,args", [
    (NO_NVML, ()),
    ({"FAKEGPU_MIG": "1"}, ()),
    ({"FAKEGPU_GPUS": "2", "FAKEGPU_GPU_NAMES": "NVIDIA L4,NVIDIA H200"}, ("--gpu", "1")),
    ({"FAKEGPU_GPUS": "3", "CUDA_VISIBLE_DEVICES": "2,-1,0"}, ()),
    ({"FAKEGPU_GPUS": "2", "CUDA_VISIBLE_DEVICES": "GPU-0"}, ()),
    ({"CUDA_VISIBLE_DEVICES": "MIG-" + UUID.format(0) + "/1/0"}, ()),
    ({"CUDA_VISIBLE_DEVICES": ""}, ()),
    ({"FAKEGPU_GPUS": "2"}, ("--gpu", "2")),
    ({"FAKEGPU_MODE": "nogpu"}, ()),
    ({"FAKEGPU_MODE": "nodriver"}, ()),
], ids=["no-nvml", "mig", "mixed-models-fastest-first", "invalid-entry", "ambiguous-uuid",
        "mig-device", "empty", "no-such-gpu", "nogpu", "nodriver"])
def test_info_leaves_what_nvml_cannot_settle_to_the_runtime(nicpick_bin, gpu_env, tmp_path, extra,
                                                           args):
    env = dict(gpu_env, **extra)
    rc, got, calls = info(nicpick_bin, env, tmp_path, *args)
    assert "cudaGetDeviceCount" in calls, calls
    assert calls.count("nvmlInit_v2") <= 1 and ("nvmlInit_v2" in calls) == (extra is not NO_NVML)
    # NVML that did not settle it is shut down before the runtime answers.
    if "nvmlInit_v2" in calls and extra.get("FAKEGPU_MODE") != "nogpu":
        assert calls.index("nvmlShutdown") < calls.index("cudaGetDeviceCount"), calls
    want = info(nicpick_bin, dict(env, **NO_NVML), tmp_path, *args)[:2]
    assert (rc, got) == want, "the same answer, the same error, as without NVML"


# ---- select: auto, required, outputs ----

def select(nicpick, node, out_dir, env, *args):
    return nicpick.run("select", "--peers", "none", "--out-dir", str(out_dir), *args, ns=node,
                       env=env)


@pytest.mark.parametrize("mode,why", [("nodriver", "no CUDA driver"),
                                      ("nogpu", "no GPU visible")])
def test_auto_skips_on_a_node_without_a_gpu_and_says_why(nicpick, node, out_dir, gpu_env, mode,
                                                         why):
    p = select(nicpick, node, out_dir, dict(gpu_env, FAKEGPU_MODE=mode), "--smoke", "auto")
    assert p.returncode == 0, p.stderr
    d = json.loads((out_dir / "decision.json").read_text())
    assert d["smoke"]["status"] == "skipped" and why in d["smoke"]["reason"]
    assert f"smoke all-reduce skipped: " in p.stderr and why in p.stderr


@pytest.mark.parametrize("mode,why", [("nodriver", "cannot run here (no-driver)"),
                                      ("nogpu", "cannot run here (no-gpu)")])
def test_required_without_a_gpu_exits_6_and_writes_nothing(nicpick, node, out_dir, gpu_env, mode,
                                                           why):
    p = select(nicpick, node, out_dir, dict(gpu_env, FAKEGPU_MODE=mode), "--smoke", "required")
    assert p.returncode == 6, p.stderr
    p.stderr_text = p.stderr
    assert why in error_line(p)
    assert sorted(os.listdir(out_dir)) == [], "a failed run leaves no outputs"


def test_required_without_the_companion_exits_6(nicpick_bin, node, out_dir, gpu_env, tmp_path):
    lone = tmp_path / "bin" / "nicpick"
    lone.parent.mkdir()
    shutil.copy(nicpick_bin, lone)
    env = dict(gpu_env, PATH="/usr/bin:/bin")
    p = node.exec([str(lone), "select", "--peers", "none", "--out-dir", str(out_dir), "--smoke",
                   "required"], env=env)
    assert p.returncode == 6, p.stderr
    assert "nicpick-smoke not found beside nicpick or on PATH" in p.stderr
    assert os.listdir(out_dir) == []
    p = node.exec([str(lone), "select", "--peers", "none", "--out-dir", str(out_dir), "--smoke",
                   "auto"], env=env)
    assert p.returncode == 0, p.stderr
    d = json.loads((out_dir / "decision.json").read_text())
    assert d["smoke"]["status"] == "skipped" and "not found" in d["smoke"]["reason"]


def test_required_passes_on_one_pod_and_records_it(nicpick, node, out_dir, gpu_env):
    p = select(nicpick, node, out_dir, gpu_env, "--smoke", "required", "--smoke-bytes", "64K")
    assert p.returncode == 0, p.stderr
    s = json.loads((out_dir / "decision.json").read_text())["smoke"]
    assert s["status"] == "passed" and s["correct"] is True
    assert s["rank"] == 0 and s["world"] == 1 and s["comm_id"] == "10.77.0.1:29418"
    assert s["nccl_log"]["net_socket"][0]["interface"] == "eth1"
    assert s["gpu"]["model"] == "Fake GPU (test double)" and s["cuda"]["driver"] == "13.0"
    assert s["time_to_verdict_ms"] >= 0
    assert not [f for f in os.listdir(out_dir) if f.startswith(".") and f != LOCK], \
        "temporaries left behind"


def test_smoke_step_makes_an_out_dir_whose_parents_are_missing(nicpick, node, tmp_path, gpu_env):
    # The outputs make their directory like mkdir -p; so must the smoke
    # step, which runs first and keeps its log there.
    deep = tmp_path / "a" / "b" / "out"
    p = select(nicpick, node, deep, gpu_env, "--smoke", "required", "--smoke-bytes", "64K")
    assert p.returncode == 0, p.stderr
    assert json.loads((deep / "decision.json").read_text())["smoke"]["status"] == "passed"


def test_failed_smoke_in_select_leaves_no_outputs(nicpick, node, out_dir, gpu_env):
    p = select(nicpick, node, out_dir, dict(gpu_env, FAKEGPU_MODE="wrong-sums"), "--smoke",
               "auto", "--smoke-bytes", "64K")
    assert p.returncode == 6, p.stderr
    assert os.listdir(out_dir) == []


@pytest.mark.parametrize("mode,extra,kept", [
    # the all-reduce fails
    ("wrong-sums", (), None),
    # it cannot run here: NCCL wrote no log into OUT/nccl-debug either
    ("nogpu", ("--nccl-debug",), None),
    # NCCL's log is what --nccl-debug keeps: the out-dir stays for it
    ("wrong-sums", ("--nccl-debug",), ["nccl-debug"]),
])
def test_a_failed_run_removes_the_out_dir_it_made(nicpick, node, tmp_path, gpu_env, mode, extra,
                                                  kept):
    # The smoke step makes the out-dir (and its missing parents) to keep
    # its log there; a run that fails must not leave them behind, empty, as
    # if a result were on its way.  The user's directory above them stays.
    mine = tmp_path / "mine"
    mine.mkdir()
    out = mine / "a" / "out"
    p = select(nicpick, node, out, dict(gpu_env, FAKEGPU_MODE=mode), "--smoke", "required",
               "--smoke-bytes", "64K", *extra)
    assert p.returncode == 6, p.stderr
    if kept:
        assert sorted(os.listdir(out)) == kept
        assert any(f.startswith("nccl-debug.") for f in os.listdir(out / "nccl-debug"))
    else:
        assert os.listdir(mine) == [], "a failed run left the directories it made"


def test_a_run_stopped_during_the_smoke_test_removes_the_out_dir_it_made(nicpick_bin, node,
                                                                        tmp_path, gpu_env):
    # A pod deleted while its smoke test runs: SIGTERM, after the out-dir
    # was made and before any output was written.
    out = tmp_path / "new" / "out"
    p = subprocess.Popen(["ip", "netns", "exec", node.name, nicpick_bin, "select", "--peers",
                          "none", "--out-dir", str(out), "--smoke", "required", "--smoke-timeout",
                          "60"],
                         env=dict(gpu_env, FAKEGPU_MODE="hang-init"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not (out.is_dir() and any(f.startswith(".nicpick-smoke.") for f in os.listdir(out))):
            assert p.poll() is None and time.monotonic() - t0 < 20, "the smoke step never began"
            time.sleep(0.05)
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, err
    assert "stopped by SIGTERM" in err, err
    assert not (tmp_path / "new").exists(), os.listdir(tmp_path / "new")


def test_nccl_debug_keeps_the_log_and_makes_training_log_too(nicpick, node, out_dir, gpu_env):
    p = select(nicpick, node, out_dir, gpu_env, "--smoke", "required", "--smoke-bytes", "64K",
               "--nccl-debug")
    assert p.returncode == 0, p.stderr
    logs = os.listdir(out_dir / "nccl-debug")
    assert any(f.startswith("nccl-debug.") for f in logs), logs
    env = (out_dir / "nccl.env").read_text()
    assert "export NCCL_DEBUG='INFO'" in env
    assert f"export NCCL_DEBUG_FILE='{out_dir}/nccl-debug/train.%h.%p'" in env


def test_a_failure_under_nccl_debug_points_at_the_kept_log(nicpick, node, out_dir, gpu_env):
    p = select(nicpick, node, out_dir, dict(gpu_env, FAKEGPU_MODE="wrong-sums"), "--smoke",
               "required", "--smoke-bytes", "64K", "--nccl-debug")
    assert p.returncode == 6, p.stderr
    p.stderr_text = p.stderr
    line = error_line(p)
    assert "gave wrong sums" in line
    assert "rerun with --nccl-debug" not in line, line
    assert f"NCCL's log is in {out_dir}/nccl-debug" in line, line
    assert any(f.startswith("nccl-debug.") for f in os.listdir(out_dir / "nccl-debug"))
    # Without the flag, the hint stays.
    p = select(nicpick, node, out_dir, dict(gpu_env, FAKEGPU_MODE="wrong-sums"), "--smoke",
               "required", "--smoke-bytes", "64K")
    p.stderr_text = p.stderr
    assert "rerun with --nccl-debug to keep NCCL's log" in error_line(p)


def test_nccl_debug_reads_only_this_runs_log(nicpick, node, out_dir, gpu_env):
    # A file an earlier run left in OUT/nccl-debug names the decoy bridge;
    # were it read, this run would fail.  Training's own files stay.
    (out_dir / "nccl-debug").mkdir(parents=True)
    stale = out_dir / "nccl-debug" / "nccl-debug.old.1"
    stale.write_text("h:1:1 [0] NCCL INFO NET/Socket : Using [0]cni0:10.244.0.1<0>\n")
    train = out_dir / "nccl-debug" / "train.old.1"
    train.write_text("kept\n")
    p = select(nicpick, node, out_dir, gpu_env, "--smoke", "required", "--smoke-bytes", "64K",
               "--nccl-debug")
    assert p.returncode == 0, p.stderr
    assert not stale.exists()
    assert train.read_text() == "kept\n"
    s = json.loads((out_dir / "decision.json").read_text())["smoke"]
    assert [i["interface"] for i in s["nccl_log"]["net_socket"]] == ["eth1"], s


def test_an_out_dir_with_a_percent_sign_keeps_nccls_log(nicpick, node, tmp_path, gpu_env):
    # NCCL expands %h and %p in NCCL_DEBUG_FILE and reads %% as '%': an
    # out-dir named "a%hb" must not send NCCL's log (the smoke test's, then
    # training's) to another path.
    out_dir = tmp_path / "a%hb"
    p = select(nicpick, node, out_dir, gpu_env, "--smoke", "required", "--smoke-bytes", "64K",
               "--nccl-debug")
    assert p.returncode == 0, p.stderr
    logs = os.listdir(out_dir / "nccl-debug")
    assert any(f.startswith("nccl-debug.") for f in logs), (logs, os.listdir(tmp_path))
    env = (out_dir / "nccl.env").read_text()
    assert f"export NCCL_DEBUG_FILE='{tmp_path}/a%%hb/nccl-debug/train.%h.%p'" in env


def test_links_in_the_out_dir_are_not_followed(nicpick, node, out_dir, gpu_env, tmp_path):
    # The out-dir is shared with the training container.  A link named like
    # a killed run's log directory, or a link in place of OUT/nccl-debug,
    # must not make nicpick delete or write anything outside the out-dir.
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "important.txt").write_text("keep\n")
    (victim / "nccl-debug.old.1").write_text("keep\n")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / ".nicpick-smoke.old").symlink_to(victim)
    stale = out_dir / ".nicpick-smoke.killed"
    stale.mkdir()
    (stale / "nccl-debug.x.1").write_text("old\n")
    p = select(nicpick, node, out_dir, gpu_env, "--smoke", "required", "--smoke-bytes", "64K")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(victim)) == ["important.txt", "nccl-debug.old.1"]
    assert not stale.exists(), "a killed run's log directory stays"
    assert (out_dir / ".nicpick-smoke.old").is_symlink()

    os.unlink(out_dir / ".nicpick-smoke.old")
    os.symlink(victim, out_dir / "nccl-debug")
    before = sorted(os.listdir(out_dir))
    p = select(nicpick, node, out_dir, gpu_env, "--smoke", "required", "--smoke-bytes", "64K",
               "--nccl-debug")
    assert p.returncode == 1, p.stderr
    p.stderr_text = p.stderr
    assert f"{out_dir}/nccl-debug is not a directory" in error_line(p)
    assert sorted(os.listdir(victim)) == ["important.txt", "nccl-debug.old.1"]
    assert sorted(os.listdir(out_dir)) == before, "a failed run changed the out-dir"


def test_smoke_reads_a_finished_out_dir(nicpick, node, out_dir, gpu_env):
    assert select(nicpick, node, out_dir, gpu_env, "--smoke", "off").returncode == 0
    p = nicpick.run("smoke", "--out-dir", str(out_dir), "--smoke-bytes", "64K", ns=node,
                    env=gpu_env)
    assert p.returncode == 0, p.stderr
    assert "smoke all-reduce passed: 1 pods" in p.stderr and "on eth1" in p.stderr
    (out_dir / "decision.json").write_text('{"env": {}, "choice": {}}')
    p = nicpick.run("smoke", "--out-dir", str(out_dir), ns=node, env=gpu_env)
    assert p.returncode == 2
    assert "decision.json" in p.stderr and "was it written by nicpick select?" in p.stderr


def test_smoke_on_a_finished_out_dir_judges_against_the_slowest_agreed_link(nicpick, node, out_dir,
                                                                          gpu_env):
    # select judges the all-reduce against 5% of the agreed network's slowest
    # link (decision.json "agreement"."min_mbps"), not this pod's own link:
    # `nicpick smoke --out-dir` must take the same threshold.
    assert select(nicpick, node, out_dir, gpu_env, "--smoke", "off").returncode == 0
    d = json.loads((out_dir / "decision.json").read_text())
    own = d["choice"]["effective_speed_mbps"]
    d["agreement"] = {"network": "10.77.0.0/24", "min_mbps": 1000}
    (out_dir / "decision.json").write_text(json.dumps(d))
    p = nicpick.run("smoke", "--out-dir", str(out_dir), "--smoke-bytes", "8M", "--json", ns=node,
                    env=gpu_env)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["min_busbw"]["why"] == "5% of the slowest agreed link, 1000 Mb/s", (own, s)
    assert s["min_busbw"]["gbps"] == pytest.approx(1000 * 0.05 / 8 / 1000)


@pytest.mark.parametrize("args,want", [
    (["--rank", "0"], "--rank, --world-size and --comm-id go together"),
    (["--rank", "2", "--world-size", "2", "--comm-id", "h:1"], "--rank 2 is not below --world-size 2"),
    (["--rank", "0", "--world-size", "1", "--comm-id", "nohost"], "expected ADDR:PORT"),
    (["--rank", "0", "--world-size", "1", "--comm-id", "h:99999"], "the port must be 1 to 65535"),
    (["--rank", "0", "--world-size", "1", "--comm-id", "h:1", "--smoke-bytes", "1"], "--smoke-bytes '1'"),
    (["--out-dir", "/x", "--include", "eth"], "--include is an option of 'select'"),
    ([], "smoke: --out-dir DIR (a finished select) or --rank"),
])
def test_smoke_usage_errors(nicpick_bin, gpu_env, args, want):
    p = run(nicpick_bin, "smoke", *args, env=gpu_env)
    assert p.returncode == 2, p.stderr
    p.stderr_text = p.stderr
    assert want in error_line(p)


# ---- the whole job: agreement through the API server, then the smoke test ----

from test_agree_e2e import make_cluster, diag, run_job, assert_all_exit  # noqa: E402,F401
import cluster as C  # noqa: E402


def test_job_agrees_then_proves_the_network_with_ranks_from_the_agreement(make_cluster, gpu_env,
                                                                          monkeypatch):
    for k, v in gpu_env.items():
        monkeypatch.setenv(k, v)
    c = make_cluster()
    run_job(c, "--expect", "4", "--smoke", "required", "--smoke-bytes", "64K", "--timeout", "60")
    assert_all_exit(c, 0)
    decs = [C.decision_of(p) for p in c.pods]
    root = decs[0]["choice"]["address"]
    assert sorted(d["smoke"]["rank"] for d in decs) == list(range(len(c.pods)))
    assert decs[0]["smoke"]["rank"] == 0, "the gatherer hosts the bootstrap"
    for p, d in zip(c.pods, decs):
        s = d["smoke"]
        assert s["status"] == "passed" and s["correct"] is True, (p.name, s)
        assert s["world"] == len(c.pods) and s["comm_id"] == f"{root}:29418", (p.name, s)
        # NCCL's log names this pod's own interface for the agreed network.
        assert s["nccl_log"]["net_socket"][0]["interface"] == d["choice"]["interface"], (p.name, s)
        result = c.annotation(p.name, "nicpick.io/result")
        assert "smoke all-reduce passed" in result, result
        assert len(s["links"]["ring"]) == len(c.pods), (p.name, s)
        assert "ring links GB/s: 0>1 " in result, result


def test_job_under_auto_warns_when_the_log_cannot_prove_the_network(make_cluster, gpu_env,
                                                                    monkeypatch):
    for k, v in gpu_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FAKEGPU_MODE", "local-only")
    c = make_cluster()
    run_job(c, "--expect", str(len(c.pods)), "--smoke", "auto", "--smoke-bytes", "64K", "--timeout", "60")
    assert_all_exit(c, 0)
    for p in c.pods:
        s = C.decision_of(p)["smoke"]
        assert s["status"] == "passed", (p.name, s)
        assert s["not_proven"].startswith("not proven: no channel ran over the network"), s
        result = c.annotation(p.name, "nicpick.io/result")
        assert "smoke all-reduce passed" in result and "not proven: " in result, result


def test_job_names_the_slow_node_on_every_pod(make_cluster, gpu_env, monkeypatch):
    for k, v in gpu_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FAKEGPU_MODE", "slow-link")
    monkeypatch.setenv("FAKEGPU_SLOW_RANK", "2")
    c = make_cluster(n_nodes=3)
    run_job(c, "--expect", "3", "--smoke", "required", "--smoke-bytes", "64K", "--timeout", "60")
    assert_all_exit(c, 0)
    decs = [C.decision_of(p) for p in c.pods]
    slow = next(p for p, d in zip(c.pods, decs) if d["smoke"]["rank"] == 2)
    addr = next(d["choice"]["address"] for d in decs if d["smoke"]["rank"] == 2)
    want = f"slow node: {slow.name} (node {slow.node.name}, {addr}) (rank 2), both its ring links are slow"
    for p, d in zip(c.pods, decs):
        links = d["smoke"]["links"]
        assert [n["rank"] for n in links["named"]] == [2], (p.name, links)
        assert want in links["verdict"], (p.name, links["verdict"])
        # A warning by default: on the pod's log and in its result annotation.
        assert want in p.stderr_text, diag(c)
        assert want in c.annotation(p.name, "nicpick.io/result")


def test_job_smoke_failure_exits_6_everywhere_and_writes_nothing(make_cluster, gpu_env,
                                                                 monkeypatch):
    for k, v in gpu_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FAKEGPU_MODE", "wrong-sums")
    c = make_cluster(n_nodes=2)
    run_job(c, "--expect", "2", "--smoke", "required", "--smoke-bytes", "64K", "--timeout", "60")
    assert_all_exit(c, 6)
    for p in c.pods:
        assert "gave wrong sums" in p.stderr_text, diag(c)
        assert not (p.out_dir / "nccl.env").exists()
        assert "wrong sums" in c.annotation(p.name, "nicpick.io/result")


def job_env(gpu_env, monkeypatch):
    for k, v in gpu_env.items():
        monkeypatch.setenv(k, v)


def test_job_warns_every_pod_of_the_pod_whose_nccl_differs(make_cluster, gpu_env, monkeypatch):
    job_env(gpu_env, monkeypatch)
    c = make_cluster()
    odd = c.pods[3]
    odd.proc_env = {"FAKEGPU_NCCL_VERSION": "22105"}
    run_job(c, "--expect", "4", "--smoke", "required", "--smoke-bytes", "64K", "--timeout", "60")
    assert_all_exit(c, 0)
    want = f"NCCL 2.21.5 on {odd.name} ({odd.node.name}), 2.28.9 on the other 3 pods"
    for p in c.pods:
        assert f"the job's pods differ: {want}" in p.stderr_text, diag(c)
        d = C.decision_of(p)
        assert d["agreement"]["versions_warning"] == want, (p.name, d["agreement"])
        assert d["smoke"]["status"] == "passed", (p.name, d["smoke"])
        assert "smoke: rank" in p.stderr_text, diag(c)
        assert want in c.annotation(p.name, "nicpick.io/result")


def test_job_with_require_same_versions_fails_everywhere_before_the_smoke_test(make_cluster, gpu_env,
                                                                              monkeypatch):
    job_env(gpu_env, monkeypatch)
    c = make_cluster(n_nodes=3)
    odd = c.pods[1]
    odd.proc_env = {"FAKEGPU_NCCL_VERSION": "22105"}
    run_job(c, "--expect", "3", "--smoke", "required", "--smoke-bytes", "64K", "--timeout", "60",
            "--require-same-versions")
    assert_all_exit(c, 6)
    want = f"--require-same-versions: the job's pods differ: NCCL 2.21.5 on {odd.name} ({odd.node.name})"
    for p in c.pods:
        assert want in p.stderr_text, diag(c)
        assert "smoke: rank" not in p.stderr_text, diag(c)  # no all-reduce started
        assert not (p.out_dir / "nccl.env").exists() and not (p.out_dir / "decision.json").exists()
        assert want in c.annotation(p.name, "nicpick.io/result")


@pytest.mark.parametrize("mode,rc", [("auto", 0), ("required", 6)])
def test_job_without_a_gpu_on_one_pod_decides_for_every_pod(make_cluster, gpu_env, monkeypatch,
                                                            mode, rc):
    job_env(gpu_env, monkeypatch)
    c = make_cluster(n_nodes=3)
    odd = c.pods[2]
    odd.proc_env = {"FAKEGPU_MODE": "nogpu"}
    run_job(c, "--expect", "3", "--smoke", mode, "--smoke-bytes", "64K", "--timeout", "60")
    assert_all_exit(c, rc)
    want = f"the smoke test cannot run on every pod of the job: {odd.name}: no-gpu"
    for p in c.pods:
        if rc == 0:
            s = C.decision_of(p)["smoke"]
            assert s["status"] == "skipped" and want in s["reason"], (p.name, s)
            # the pod itself adds its own reason, from nicpick-smoke info
            assert ("; here: " in s["reason"]) == (p is odd), (p.name, s)
        else:
            assert f"--smoke required: {want}" in p.stderr_text, diag(c)
            assert not (p.out_dir / "nccl.env").exists()


def test_the_dlopen_tables_match_the_real_nccl_and_cuda_headers(tmp_path):
    """lib/gpu/gpu_api.h declares NCCL's and CUDA's prototypes itself
    (neither header ships in Debian); where the real headers exist, the
    companion's code must compile against them unchanged, -Werror."""
    import glob
    incs = [d for d in sorted(glob.glob("/usr/local/cuda*/include"))
            if os.path.isfile(os.path.join(d, "nccl.h"))
            and os.path.isfile(os.path.join(d, "cuda_runtime_api.h"))]
    if not incs:
        pytest.skip("not applicable: no nccl.h and cuda_runtime_api.h under /usr/local/cuda*/include")
    for src in ("lib/gpu/load.c", "lib/gpu/run.c", "lib/gpu/nvml.c"):
        p = subprocess.run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
                            "-Wno-format-truncation", "-D_GNU_SOURCE", "-DNICPICK_REAL_GPU_HEADERS",
                            "-Ilib", "-I" + incs[-1], "-c", src, "-o", str(tmp_path / "x.o")],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"{src} against {incs[-1]}:\n{p.stderr}"


def test_job_init_timeout_names_the_bootstrap_pod(make_cluster, gpu_env, monkeypatch):
    for k, v in gpu_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FAKEGPU_MODE", "hang-init")
    c = make_cluster(n_nodes=2)
    run_job(c, "--expect", "2", "--smoke", "required", "--smoke-bytes", "64K",
            "--smoke-timeout", "3", "--timeout", "60")
    assert_all_exit(c, 6)
    for p in c.pods:
        assert "failed in init" in p.stderr_text, diag(c)
        assert "rank 0 (job-w-0) hosts the bootstrap at" in p.stderr_text, p.stderr_text


# ---- delivery: the proof runs NCCL the way the training container will ----

def file_only_spec(pod):
    """The file-only pattern: the training container reads nicpick's
    nccl.conf through NCCL_CONF_FILE and does not source nccl.env."""
    return {
        "initContainers": [{"name": "nicpick", "image": "nicpick",
                            "volumeMounts": [{"name": "nicpick", "mountPath": str(pod.out_dir)}]}],
        "containers": [{"name": "train", "image": "pytorch", "command": ["torchrun", "train.py"],
                        "env": [{"name": "NCCL_CONF_FILE", "value": "/nicpick/nccl.conf"},
                                {"name": "NCCL_SOCKET_NTHREADS", "value": "4"},
                                {"name": "NCCL_NSOCKS_PERTHREAD",
                                 "valueFrom": {"configMapKeyRef": {"name": "nccl", "key": "socks"}}}],
                        "volumeMounts": [{"name": "nicpick", "mountPath": "/nicpick"}]}],
        "volumes": [{"name": "nicpick", "emptyDir": {}}],
    }


def file_cluster(make_cluster, gpu_env, monkeypatch, n_nodes=2):
    job_env(gpu_env, monkeypatch)
    c = make_cluster(seed=False, n_nodes=n_nodes)
    c.pod_spec = file_only_spec
    c.seed_pods()
    return c


# 2.23.4 reads NCCL_CONF_FILE but, before 2.26.2, reads '#' lines as keys
# too (the double does both): nicpick's comment lines hold no '='.
@pytest.mark.parametrize("version", ["22809", "22304"])
def test_job_with_file_delivery_proves_what_nccl_reads_from_the_file(make_cluster, gpu_env,
                                                                      monkeypatch, version):
    monkeypatch.setenv("FAKEGPU_NCCL_VERSION", version)
    c = file_cluster(make_cluster, gpu_env, monkeypatch)
    run_job(c, "--expect", "2", "--smoke", "required", "--smoke-bytes", "64K", "--timeout", "60")
    assert_all_exit(c, 0)
    for p in c.pods:
        d = C.decision_of(p)
        s, want = d["smoke"], d["choice"]["interface"]
        assert s["nccl"]["version"] == {"22809": "2.28.9", "22304": "2.23.4"}[version]
        dl = s["delivery"]
        assert dl["tested"] == "file" and dl["container"] == "train", dl
        assert "sets NCCL_CONF_FILE=/nicpick/nccl.conf and does not source nccl.env" in dl["why"]
        src = {v["variable"]: (v["value"], v["from"]) for v in dl["variables"]}
        assert src["NCCL_SOCKET_IFNAME"] == ("=" + want, "nccl.conf"), src
        assert src["NCCL_SOCKET_NTHREADS"] == ("4", "container"), src
        assert "GLOO_SOCKET_IFNAME" not in src  # not in nccl.conf: training has none either
        assert dl["unknown_to_the_proof"] == ["NCCL_NSOCKS_PERTHREAD (valueFrom)"], dl
        # The double read the conf copy (NCCL 2.28.9 reads NCCL_CONF_FILE) and used the network.
        assert s["nccl_log"]["net_socket"][0]["interface"] == want, s["nccl_log"]
        assert s["nccl_log"]["bootstrap"]["interface"] == want, s["nccl_log"]
        assert "delivered as file to container train" in p.stderr_text


def test_job_with_file_delivery_and_nccl_2_21_fails_everywhere_before_the_all_reduce(
        make_cluster, gpu_env, monkeypatch):
    c = file_cluster(make_cluster, gpu_env, monkeypatch, n_nodes=3)
    old = c.pods[2]
    old.proc_env = {"FAKEGPU_NCCL_VERSION": "22105"}
    run_job(c, "--expect", "3", "--smoke", "required", "--smoke-bytes", "64K", "--timeout", "60")
    assert_all_exit(c, 6)
    want = (f"NCCL 2.21.5 on {old.name} ignores NCCL_CONF_FILE (read from 2.23.4): "
            "source /nicpick/nccl.env in the command, or use NCCL >= 2.23.4")
    for p in c.pods:
        assert want in error_line(p), diag(c)
        assert "smoke: rank" not in p.stderr_text, diag(c)  # no all-reduce started
        assert not (p.out_dir / "nccl.env").exists()
        assert want in c.annotation(p.name, "nicpick.io/result")


@pytest.mark.parametrize("mode", ["off", "auto"])
def test_job_with_file_delivery_and_nccl_2_21_warns_every_pod(make_cluster, gpu_env, monkeypatch,
                                                              mode):
    c = file_cluster(make_cluster, gpu_env, monkeypatch)
    old = c.pods[1]
    old.proc_env = {"FAKEGPU_NCCL_VERSION": "22105"}
    run_job(c, "--expect", "2", "--smoke", mode, "--smoke-bytes", "64K", "--timeout", "60")
    want = (f"NCCL 2.21.5 on {old.name} ignores NCCL_CONF_FILE (read from 2.23.4): "
            "source /nicpick/nccl.env in the command, or use NCCL >= 2.23.4")
    for p in c.pods:
        assert want in p.stderr_text, diag(c)
        assert want in (c.annotation(p.name, "nicpick.io/result") or ""), diag(c)
        if p.rc == 0:
            assert C.decision_of(p)["smoke"]["delivery"]["nccl_floor_warning"] == want
    if mode == "off":
        assert_all_exit(c, 0)
        return
    # auto: the proof itself fails where NCCL ignores the file, as training
    # would: that NCCL picked an interface by itself.
    assert c.pods[0].rc == 0 and old.rc == 6, diag(c)
    assert "not the agreed" in error_line(old), diag(c)
