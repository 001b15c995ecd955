"""A fake cluster in network namespaces for the job-wide agreement tests.

Topology (every namespace named np-<hex> by netns.NetnsFactory, all deleted
at teardown):

    api ns ── veth ──┐
                     │ switch ns: bridge "mgmtbr"   192.168.100.0/24 (management)
    node a  eth0 ────┤            veth "fpar"/"fparp", macvlans on fpar
    node b  eth0 ────┤            (the fast network 10.9.0.0/24)
    ...              │
    node X  <fast NIC> = a macvlan (mode bridge) on "fpar", moved into the node
                         and renamed: eth1, ens3f0, enp65s0f0np0, ibp12s0, ...

Why the fast network wins over management, for a reason a user accepts:
both are 10 Gb/s (veth and macvlan-over-veth report the same sysfs speed), so
the decision falls to the policy score.  The fast NIC is a macvlan whose lower
device lives in another namespace, which is exactly what a Multus secondary
network looks like from inside a pod; nicpick ranks it above a plain veth
(lib/policy/rank.c: PTS_POD_SECONDARY 800 > PTS_VETH 500), and the job-wide
decision breaks a speed tie by worst-case score (lib/agree/decide.c,
cmp_quality).  No --include/--exclude is needed.

With rails=2 every node has a second fast NIC of the same kind (a macvlan
on another parent "fpar2", FAST2_NAMES) on a second network 10.10.0.0/24:
the same speed and score as the first, so the job uses both as rails.

Decoys on every node: a "cni0" bridge 10.244.0.1/24 (the same address on every
node) with a veth port, a "docker0" bridge 172.17.0.1/16 (same everywhere, no
port), and a link-local helper "ll0" 169.254.<i>.1/16.

The test API server (tools/kubeapi) runs in this process, but its
listening socket is created inside the api namespace (a helper thread enters
it with setns(2) before binding), so it is reachable only over the
management network at 192.168.100.1, while the tests still reach its admin
API in-process.
"""
import ctypes
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import netns as netns_mod  # noqa: E402

MGMT_NET = "192.168.100"
API_ADDR = MGMT_NET + ".1"
FAST_NET = "10.9.0"
NAMESPACE = "train"
JOB = "job-w"
FAST_NAMES = ["eth1", "ens3f0", "enp65s0f0np0", "ibp12s0", "eno2", "enp3s0f1", "eth5", "ens7"]
FAST2_NET = "10.10.0"
FAST2_NAMES = ["eth2", "ens3f1", "enp65s0f1np1", "ibp13s0", "eno3", "enp3s0f2", "eth6", "ens8"]
CLONE_NEWNET = 0x40000000
PROC_TIMEOUT = 120  # sanity bound for one nicpick process; tests pass --timeout
# The pods' tokens are the ServiceAccount of this manifest, and the server
# enforces its Role: an API call nicpick makes without a rule there fails.
RBAC_YAML = ROOT / "deploy" / "rbac.yaml"
SERVICE_ACCOUNT = "nicpick"


class ClusterError(RuntimeError):
    pass


def in_netns(ns_name, fn):
    """Run fn() in a thread that first enters network namespace ns_name; the
    namespace is per thread, so sockets fn creates live there for good."""
    out = {}

    def body():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{ns_name}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"setns({ns_name}): {os.strerror(e)}")
            finally:
                os.close(fd)
            out["value"] = fn()
        except BaseException as e:  # handed to the caller
            out["error"] = e

    t = threading.Thread(target=body, name=f"netns-{ns_name}")
    t.start()
    t.join(120)
    if t.is_alive():
        raise ClusterError(f"entering {ns_name} timed out")
    if "error" in out:
        raise out["error"]
    return out.get("value")


class Node:
    """One node: its namespace, management and fast addresses, NIC name."""

    def __init__(self, index, ns, fast_if, mgmt_addr, fast_addr):
        self.index, self.ns = index, ns
        self.name = f"node-{chr(ord('a') + index)}"
        self.fast_if, self.mgmt_addr, self.fast_addr = fast_if, mgmt_addr, fast_addr
        self.mgmt_if = "eth0"
        self.fast2_if = self.fast2_addr = None  # rails=2: the second fast NIC

    def __repr__(self):
        return f"Node({self.name}, {self.ns.name}, fast={self.fast_if}:{self.fast_addr})"


class Pod:
    """One pod object and the nicpick process that runs for it."""

    def __init__(self, cluster, index, node, token):
        self.cluster, self.index, self.node, self.token = cluster, index, node, token
        self.name = f"{JOB}-{index}"
        self.dir = cluster.tmp / self.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.token_file = self.dir / "token"
        self.token_file.write_text(token + "\n")
        self.out_dir = self.dir / "out"
        self.proc = None
        self.rc = None
        self.stderr_text = ""
        self.started = self.ended = None
        self.uid = None
        self.proc_env = {}  # additions to the environment of this pod's nicpick

    def object(self):
        return {
            "metadata": {
                "name": self.name,
                "labels": {
                    "batch.kubernetes.io/job-name": JOB,
                    "batch.kubernetes.io/job-completion-index": str(self.index),
                    "job-name": JOB,
                },
            },
            "spec": dict({"nodeName": self.node.name,
                          "containers": [{"name": "main", "image": "busybox"}]},
                         **(self.cluster.pod_spec(self) if self.cluster.pod_spec else {})),
            "status": {"phase": "Running"},
        }

    def argv(self, extra=()):
        c = self.cluster
        return [c.nicpick, "select", "--peers", "k8s", "--smoke", "off",
                "--out-dir", str(self.out_dir), "--api-server", c.api_url,
                "--ca-file", c.ca_path, "--token-file", str(self.token_file),
                "--namespace", NAMESPACE, "--pod-name", self.name, *extra]

    def start(self, *extra):
        """Start nicpick inside the pod's node namespace (`ip netns exec`
        execs it, so the pid is nicpick's own and its /sys is the node's)."""
        self.out_dir.mkdir(exist_ok=True)
        self.rc, self.stderr_text, self.ended = None, "", None
        self._err = open(self.dir / f"stderr.{int(time.time() * 1000)}", "w+")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.node.ns.name,
                                      *self.argv(extra)], stdout=subprocess.DEVNULL,
                                     stderr=self._err,
                                     env=dict(os.environ, **self.proc_env) if self.proc_env else None)
        self.cluster.procs.append(self)
        return self

    def wait(self, timeout=PROC_TIMEOUT):
        if self.proc is None:
            raise ClusterError(f"{self.name}: not started")
        if self.rc is None:
            try:
                self.rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise ClusterError(f"{self.name}: nicpick still running after {timeout}s")
            self.ended = time.monotonic()
            self._err.seek(0)
            self.stderr_text = self._err.read()
            self._err.close()
        return self.rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        if self.proc is not None and self.rc is None:
            self.rc = self.proc.returncode
            self.ended = time.monotonic()
            self._err.seek(0)
            self.stderr_text = self._err.read()
            self._err.close()

    @property
    def elapsed(self):
        return None if self.ended is None else self.ended - self.started

    def outputs(self):
        return netns_mod.read_outputs(self.out_dir)

    def describe(self):
        return f"--- {self.name} on {self.node.name} rc={self.rc}\n{self.stderr_text}"


class Cluster:
    """Namespaces, the API server and the job's pods.  Use as a context
    manager or call close(); close() kills every process it started and
    deletes every namespace, whatever happened."""

    def __init__(self, factory, tmp, nicpick, n_nodes=4, fast=None, mgmt_plen=None,
                 rbac=RBAC_YAML, rails=1):
        """fast[i] False: node i has no fast NIC.  mgmt_plen[i]: prefix
        length of node i's management address (32: a node that reaches the
        API server by a device route only and shares no subnet).  rbac: the
        manifest whose Role the pods' tokens run under (deploy/rbac.yaml)."""
        self.factory, self.tmp, self.nicpick = factory, pathlib.Path(tmp), nicpick
        self.n = n_nodes
        self.fast = fast or [True] * n_nodes
        self.mgmt_plen = mgmt_plen or [24] * n_nodes
        self.nodes, self.pods, self.procs = [], [], []
        self.pod_spec = None  # pod -> more of its spec (containers, volumes), set before seeding
        self.server = None
        self.rbac = rbac
        self.rails = rails

    # -- topology -------------------------------------------------------------
    def build(self):
        f = self.factory
        self.switch = f.new("switch")
        self.api_ns = f.new("api")
        sw = self.switch
        sw.add_bridge("mgmtbr")
        netns_mod.veth(self.api_ns, "eth0", sw, "m-api", API_ADDR + "/24")
        sw.enslave("m-api", "mgmtbr")
        # The fast switch: macvlans in bridge mode on one veth end.
        netns_mod.veth(sw, "fpar", sw, "fparp")
        if self.rails > 1:
            netns_mod.veth(sw, "fpar2", sw, "fparp2")
        for i in range(self.n):
            ns = f.new("node")
            fast_if = FAST_NAMES[i % len(FAST_NAMES)]
            node = Node(i, ns, fast_if if self.fast[i] else None,
                        f"{MGMT_NET}.{11 + i}", f"{FAST_NET}.{11 + i}" if self.fast[i] else None)
            self.nodes.append(node)
            netns_mod.veth(ns, "eth0", sw, f"m-{i}")
            sw.enslave(f"m-{i}", "mgmtbr")
            plen = self.mgmt_plen[i]
            ns.addr("eth0", f"{node.mgmt_addr}/{plen}")
            if plen != 24:
                ns.ip("route", "add", f"{MGMT_NET}.0/24", "dev", "eth0", "src", node.mgmt_addr)
            if self.fast[i]:
                tmpname = f"fm{i}"
                sw.ip("link", "add", "name", tmpname, "link", "fpar", "type", "macvlan",
                      "mode", "bridge")
                sw.move(tmpname, ns)
                ns.ip("link", "set", "dev", tmpname, "name", fast_if)
                ns.addr(fast_if, f"{node.fast_addr}/24")
                ns.up(fast_if)
            if self.fast[i] and self.rails > 1:
                node.fast2_if = FAST2_NAMES[i % len(FAST2_NAMES)]
                node.fast2_addr = f"{FAST2_NET}.{11 + i}"
                sw.ip("link", "add", "name", f"fn{i}", "link", "fpar2", "type", "macvlan",
                      "mode", "bridge")
                sw.move(f"fn{i}", ns)
                ns.ip("link", "set", "dev", f"fn{i}", "name", node.fast2_if)
                ns.addr(node.fast2_if, f"{node.fast2_addr}/24")
                ns.up(node.fast2_if)
            # Decoys: the same addresses on every node.
            ns.add_bridge("cni0", "10.244.0.1/24")
            netns_mod.veth(ns, "vethc0", ns, "vethc1")
            ns.enslave("vethc0", "cni0")
            ns.add_bridge("docker0", "172.17.0.1/16")
            netns_mod.veth(ns, "ll0", ns, "ll1", f"169.254.{10 + i}.1/16")
        for node in self.nodes:
            node.ns.wait_all_carrier()
        return self

    # -- API server -----------------------------------------------------------
    def start_api(self):
        from tools.kubeapi import Server
        tokens = {}
        for i, node in enumerate(self.nodes):
            tokens[f"tok-{JOB}-{i}"] = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
        state = self.tmp / "apiserver"
        # The default token (kubectl, the tests' own reads) is system:admin,
        # which RBAC never checks, as in a real cluster.
        self.server = Server(state_dir=str(state), listen=API_ADDR, sans=[API_ADDR],
                             tokens=tokens, namespace=NAMESPACE, user="system:admin",
                             authorization="RBAC")
        in_netns(self.api_ns.name, self.server.start)
        self.server.apply_manifests(str(self.rbac), NAMESPACE)
        self.api_url, self.ca_path = self.server.url, self.server.ca_path
        return self

    def seed_pods(self, count=None):
        count = self.n if count is None else count
        for i in range(count):
            pod = Pod(self, i, self.nodes[i], f"tok-{JOB}-{i}")
            pod.uid = self.server.create_pod(NAMESPACE, pod.object())["metadata"]["uid"]
            self.pods.append(pod)
        return self.pods

    def recreate_pod(self, pod, new_name=None):
        """Delete the pod object and create it again: same name (or
        new_name, the same job index), new uid."""
        self.server.delete_object(NAMESPACE, pod.name)
        if new_name:
            pod.name = new_name
        pod.uid = self.server.create_pod(NAMESPACE, pod.object())["metadata"]["uid"]
        return pod.uid

    def get_pod(self, name):
        return self.server.get_object(NAMESPACE, name)

    def annotation(self, name, key):
        return ((self.get_pod(name).get("metadata") or {}).get("annotations") or {}).get(key)

    def events(self):
        lst = self.server.admin("objects", {"op": "list", "resource": "events",
                                            "namespace": NAMESPACE})
        return lst.get("items") or []

    def kubectl(self, *args, timeout=60):
        """Run kubectl (build/tools/kubectl) inside the api namespace, where
        the server's address is reachable."""
        kc = self.tmp / "kubeconfig"
        self.server.write_kubeconfig(str(kc), namespace=NAMESPACE)
        return self.api_ns.exec([str(ROOT / "build" / "tools" / "kubectl"),
                                 "--kubeconfig", str(kc), *args], timeout=timeout)

    # -- running --------------------------------------------------------------
    def start_all(self, *extra, pods=None):
        for p in (self.pods if pods is None else pods):
            p.start(*extra)
        return self

    def wait_all(self, pods=None, timeout=PROC_TIMEOUT):
        deadline = time.monotonic() + timeout
        for p in (self.pods if pods is None else pods):
            p.wait(max(1.0, deadline - time.monotonic()))
        return [p.rc for p in (self.pods if pods is None else pods)]

    def logs(self, pods=None):
        return "\n".join(p.describe() for p in (self.pods if pods is None else pods))

    def nft(self, node, ruleset):
        p = node.ns.exec(["nft", "-f", "-"], input=ruleset)
        if p.returncode != 0:
            raise ClusterError(f"nft in {node.ns.name}: {p.stderr}")

    def tc(self, node, *args):
        p = node.ns.exec(["tc", *args])
        if p.returncode != 0:
            raise ClusterError(f"tc in {node.ns.name}: {p.stderr}")

    def close(self):
        errors = []
        for p in self.procs:
            try:
                p.kill()
            except Exception as e:  # keep cleaning
                errors.append(f"{p.name}: {e}")
        if self.server is not None:
            try:
                self.server.stop()
            except Exception as e:
                errors.append(f"api server: {e}")
            self.server = None
        try:
            self.factory.cleanup()
        except Exception as e:
            errors.append(str(e))
        if errors:
            raise ClusterError("cleanup: " + "; ".join(errors))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def decision_of(pod):
    return json.loads((pod.out_dir / "decision.json").read_text())
