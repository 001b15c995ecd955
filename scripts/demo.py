#!/usr/bin/python3
"""`make demo`: nicpick on a four-node job made of network namespaces on
this machine, ending with `kubectl nicpick status` for the job.

Every node has a fast NIC under its own name (eth1, ens3f0, enp65s0f0np0,
ibp12s0: a macvlan on one "fast switch", as a Multus secondary network
looks from a pod), the management network (eth0), and the decoys a real
node has: cni0 and docker0 with the same addresses on every node.  Node c's
fast link is throttled with tc tbf.  The test API server (tools/kubeapi)
holds the job's Pod objects; nicpick runs for each pod as its init
container would (`nicpick select --peers k8s`), and the pods agree through
the server.  The smoke all-reduce runs on the NCCL/CUDA test double
(tests/doubles/fakegpu.c) when there is no GPU: the double sums across the
pods but moves no bytes over the links, so it is told what NCCL would see
there, that node c is slow (both of its ring links).  Without the double the
smoke step is skipped (it says why) and the status shows the decision.

Everything it made (namespaces, processes, the server, its files) is
removed at the end, also on failure or Ctrl-C.  Root only."""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import cluster as C  # noqa: E402
import netns as N  # noqa: E402

SLOW_NODE = 2       # node-c
SLOW_RATE = "200mbit"


def say(msg=""):
    print(msg, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nicpick", default=str(ROOT / "build" / "nicpick"))
    ap.add_argument("--fakegpu", default=str(ROOT / "build" / "tests" / "libfakegpu.so"))
    ap.add_argument("--kubectl", default=str(ROOT / "build" / "tools" / "kubectl"))
    a = ap.parse_args()
    why = N.netns_unavailable_reason()
    if why:
        print(f"nicpick demo: {why}", file=sys.stderr)
        return 2
    nicpick = os.path.abspath(a.nicpick)
    if not os.access(nicpick, os.X_OK):
        print(f"nicpick demo: {nicpick} is missing: run make", file=sys.stderr)
        return 2
    smoke = os.path.isfile(a.fakegpu)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="nicpick-demo-"))
    factory = N.NetnsFactory()
    c = C.Cluster(factory, tmp, nicpick, n_nodes=4)
    made = 0
    try:
        rc = run(c, tmp, nicpick, a, smoke)
    finally:
        made = len(factory.made)
        try:
            c.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        say(f"cleaned up: {made} network namespaces, the nicpick processes, the API server, {tmp}")
    return rc


def run(c, tmp, nicpick, a, smoke):
    say("nicpick demo: a four-pod Indexed Job on four \"nodes\" (network namespaces)")
    c.build()
    slow = c.nodes[SLOW_NODE]
    c.tc(slow, "qdisc", "add", "dev", slow.fast_if, "root", "tbf", "rate", SLOW_RATE, "burst",
         "32kbit", "latency", "100ms")
    for n in c.nodes:
        extra = f", throttled to {SLOW_RATE} (tc tbf)" if n is slow else ""
        say(f"  {n.name} ({n.ns.name}): fast {n.fast_if} {n.fast_addr}/24{extra}; management eth0 {n.mgmt_addr}/24;"
            f" decoys cni0 10.244.0.1/24, docker0 172.17.0.1/16")
    c.start_api()
    c.seed_pods()
    say(f"  API server (tools/kubeapi) at {c.api_url}, pods {', '.join(p.name for p in c.pods)} "
        f"in namespace {C.NAMESPACE}")
    args = ["--expect", "4", "--timeout", "60"]
    if smoke:
        fake = tmp / "fakegpu"
        fake.mkdir()
        env = {"NICPICK_NCCL_LIB": a.fakegpu, "NICPICK_CUDART_LIB": a.fakegpu, "FAKEGPU_DIR": str(fake),
               # node c (rank 2) is slow: both ring links it touches
               "FAKEGPU_MODE": "slow-link", "FAKEGPU_SLOW_RANK": str(SLOW_NODE)}
        for p in c.pods:
            p.proc_env = env
        args += ["--smoke", "auto", "--smoke-bytes", "64K"]
        say("  smoke all-reduce: on the NCCL/CUDA test double (no GPU here), told that node-c"
            " is slow")
    else:
        args += ["--smoke", "auto"]
        say(f"  smoke all-reduce: no GPU and no test double at {a.fakegpu}: nicpick skips it")
    say()
    say("running `nicpick select --peers k8s` for every pod, as its init container would ...")
    t0 = time.monotonic()
    c.start_all(*args)
    rcs = c.wait_all(timeout=120)
    for p in c.pods:
        chosen = ""
        if (p.out_dir / "nccl.env").exists():
            chosen = [l for l in (p.out_dir / "nccl.env").read_text().splitlines()
                      if "NCCL_SOCKET_IFNAME" in l][0]
        say(f"  {p.name} on {p.node.name}: exit {p.rc} after {p.elapsed:.1f} s  {chosen}")
    say(f"  ({time.monotonic() - t0:.1f} s in all)")
    if any(rcs):
        say(c.logs())
    say()
    kc = tmp / "kubeconfig"
    c.server.write_kubeconfig(str(kc), namespace=C.NAMESPACE)
    plugins = tmp / "plugins"
    plugins.mkdir()
    subprocess.run([nicpick, "install", str(plugins)], check=True, capture_output=True)
    env = dict(os.environ, KUBECONFIG=str(kc), PATH=f"{plugins}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    if os.access(a.kubectl, os.X_OK):
        argv, shown = [a.kubectl, "nicpick", "status", C.JOB, "-o", "wide"], "kubectl"
    else:
        # no kubectl here (make tools fetches it): the same plugin, as kubectl would run it
        argv, shown = [str(plugins / "kubectl-nicpick"), "status", C.JOB, "-o", "wide"], "kubectl-nicpick"
    say(f"$ {shown}{' nicpick' if shown == 'kubectl' else ''} status {C.JOB} -o wide")
    p = c.api_ns.exec(argv, env=env, timeout=60)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    say(f"(exit {p.returncode})")
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
