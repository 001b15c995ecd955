"""The probe port under hostNetwork is open to every host on the node's
networks.  These tests put a hostile host on both of the cluster's networks
(the fast switch and management, cluster.py) and attack every pod's probe
port while the job agrees:

  liar    claims a 16 GiB payload (in the old syntax and with a made-up
          token), then sends one byte every 4 s, and reconnects when closed;
  idle    keeps 20 silent connections open to every pod, reopened at once;
  late    opens a connection every 2 ms and holds it silently, so that
          some land just after each real probe, while listeners stop (a
          pod listens only while its round probes: at 4 pods, some 10 ms).

What must hold (docs/security.md, "Ports on a hostNetwork node"): the job
still agrees on the fast network, and no pod exits later than --timeout
plus one second, whatever the job's outcome.  A network that really fails
its probe is a warning on every pod, in its Event and in decision.json,
and --strict turns it into exit 4.  Two interfaces on one subnet: the pod
gets the one the kernel routes through, and a probe that fails on the route
tries that interface before the network is given up."""
import ctypes
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

import cluster as C

FAST_NET = ipaddress.ip_network(C.FAST_NET + ".0/24")
MGMT_NET = ipaddress.ip_network(C.MGMT_NET + ".0/24")
PORT = 29417
COMMON = ("--expect", "4", "--log-interval", "2")
ATTACKER_FAST = C.FAST_NET + ".99"
ATTACKER_MGMT = C.MGMT_NET + ".99"


@pytest.fixture
def make_cluster(clusters):
    return lambda **kw: clusters(seed=True, **kw)


def diag(c):
    return c.logs()


def attacker_ns(c):
    """A hostile host on the fast switch and on the management network."""
    ns = c.factory.new("attacker")
    sw = c.switch
    sw.ip("link", "add", "name", "fatk", "link", "fpar", "type", "macvlan", "mode", "bridge")
    sw.move("fatk", ns)
    ns.addr("fatk", ATTACKER_FAST + "/24")
    ns.up("fatk")
    C.netns_mod.veth(ns, "matk", sw, "m-atk")
    sw.enslave("m-atk", "mgmtbr")
    ns.addr("matk", ATTACKER_MGMT + "/24")
    ns.wait_all_carrier()
    return ns


class Attack:
    """Threads inside the attacker's namespace that attack every target
    address's probe port until stop()."""

    def __init__(self, ns, targets, kinds=("liar", "idle", "late")):
        self.ns, self.targets, self.kinds = ns, targets, kinds
        self.stopping = threading.Event()
        self.threads = []
        self.connections = 0
        self.by_target = {}
        self.lock = threading.Lock()
        self.socks = set()

    def _enter(self):
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{self.ns.name}", os.O_RDONLY)
        try:
            if libc.setns(fd, C.CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)

    def _connect(self, addr):
        s = socket.socket()
        s.settimeout(0.5)
        try:
            s.connect((addr, PORT))
        except OSError:
            s.close()
            return None
        s.setblocking(False)
        with self.lock:
            self.connections += 1
            self.by_target[addr] = self.by_target.get(addr, 0) + 1
            self.socks.add(s)
        return s

    def _drop(self, s):
        with self.lock:
            self.socks.discard(s)
        s.close()

    @staticmethod
    def _alive(s):
        try:
            return s.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def _liar(self, addr):
        lines = [f"NICPICK-PROBE 1 {addr} 17179869184\n",
                 f"NICPICK-PROBE 2 {'ab' * 16} {ATTACKER_FAST} 17179869184\n"]
        held, i = [], 0
        while not self.stopping.is_set():
            held = [s for s in held if self._alive(s) or self._drop(s)]
            while len(held) < 2 and not self.stopping.is_set():
                s = self._connect(addr)
                if s is None:
                    break
                try:
                    s.send(lines[i % 2].encode())
                except OSError:
                    pass
                i += 1
                held.append(s)
            for s in held:
                try:
                    s.send(b"x")
                except OSError:
                    pass
            self.stopping.wait(4)

    def _idle(self, addr):
        held = []
        while not self.stopping.is_set():
            held = [s for s in held if self._alive(s) or self._drop(s)]
            while len(held) < 20 and not self.stopping.is_set():
                s = self._connect(addr)
                if s is None:
                    break
                held.append(s)
            self.stopping.wait(0.1)

    def _late(self, addr):
        held = []
        while not self.stopping.is_set():
            s = self._connect(addr)
            if s is not None:
                held.append(s)
            if len(held) > 50:
                self._drop(held.pop(0))
            self.stopping.wait(0.002)

    def _run(self, kind, addr):
        self._enter()
        getattr(self, "_" + kind)(addr)

    def start(self):
        for addr in self.targets:
            for kind in self.kinds:
                t = threading.Thread(target=self._run, args=(kind, addr), daemon=True)
                t.start()
                self.threads.append(t)
        return self

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(10)
        with self.lock:
            for s in list(self.socks):
                s.close()
            self.socks.clear()


def targets(c):
    return [n.fast_addr for n in c.nodes] + [n.mgmt_addr for n in c.nodes]


def warning_lines(p):
    return [l for l in p.stderr_text.splitlines() if "warning:" in l]


def test_attacks_on_the_probe_port_leave_the_job_on_the_fast_network(make_cluster):
    """Slow, silent and lying clients on both networks, all through the
    agreement: every pod still agrees on the fast network in the first
    round, with no warning, well within the deadline."""
    c = make_cluster()
    # A pod listens only while its round probes, some 10 ms at 4 pods: each
    # one stays 2 s after its own probe, listening, so that every kind of
    # attack surely reaches every pod's listener, however slowly the
    # attacker's threads are scheduled (lib/util/testhook.h).
    for p in c.pods:
        p.proc_env["NICPICK_TEST_PAUSE_AT"] = "after-probe:2000"
    atk = Attack(attacker_ns(c), targets(c)).start()
    try:
        time.sleep(1)
        c.start_all(*COMMON, "--timeout", "40")
        c.wait_all(timeout=60)
    finally:
        atk.stop()
    assert [p.rc for p in c.pods] == [0] * 4, diag(c)
    assert all(p.elapsed >= 2 for p in c.pods), [(p.name, p.elapsed) for p in c.pods]
    assert all(atk.by_target.get(n.fast_addr, 0) >= 20 for n in c.nodes), atk.by_target
    for p in c.pods:
        dec = C.decision_of(p)
        assert dec["choice"]["interface"] == p.node.fast_if, (p.name, dec["choice"])
        assert dec["agreement"]["network"] == str(FAST_NET), (p.name, dec["agreement"])
        assert dec["agreement"]["round"] == 1, (p.name, dec["agreement"])
        assert not [w for w in dec["warnings"] if w.get("kind") == "probe"], dec["warnings"]
        assert p.elapsed < 25, (p.name, p.elapsed, p.describe())
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelected"]
    assert len(evs) == 4 and {e["type"] for e in evs} == {"Normal"}, evs


def test_attacks_never_move_an_exit_past_the_deadline(make_cluster):
    """A job that cannot finish: node b drops the real probe from its ring
    neighbour, so the round is still probing when the deadline comes, while
    the attacker holds connections to every listener.  Every pod exits by
    --timeout plus one second."""
    have("nft")
    c = make_cluster()
    a, b = c.nodes[0], c.nodes[1]
    c.nft(b, f"""table inet nicpick_hostile {{
        chain input {{ type filter hook input priority 0; policy accept;
            ip saddr {a.fast_addr} tcp dport {PORT} drop
        }}
    }}""")
    atk = Attack(attacker_ns(c), targets(c)).start()
    timeout = 12
    try:
        time.sleep(1)
        c.start_all(*COMMON, "--timeout", str(timeout))
        c.wait_all(timeout=60)
    finally:
        atk.stop()
    assert all(atk.by_target.get(n.fast_addr, 0) >= 20 for n in c.nodes), atk.by_target
    for p in c.pods:
        assert p.rc == 5, p.describe()
        assert p.elapsed <= timeout + 1, (p.name, round(p.elapsed, 2), p.describe())
        assert "deadline" in p.stderr_text, p.describe()


def have(tool):
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed")


def firewall_fast_probe(c, node):
    c.nft(node, f"""table inet nicpick_e2e {{
        chain input {{ type filter hook input priority 0; policy accept;
            ip daddr {node.fast_addr} tcp dport {PORT} drop
        }}
    }}""")


def test_a_failed_probe_is_a_warning_on_every_pod_before_the_fallback(make_cluster):
    """The fast network really fails its probe (node b drops it): the job
    moves to management, and every pod says why, in its log, its Event
    (type Warning) and its decision.json."""
    have("nft")
    c = make_cluster()
    firewall_fast_probe(c, c.nodes[1])
    c.start_all(*COMMON, "--timeout", "75")
    c.wait_all(timeout=120)
    assert [p.rc for p in c.pods] == [0] * 4, diag(c)
    for p in c.pods:
        dec = C.decision_of(p)
        assert dec["agreement"]["network"] == str(MGMT_NET), (p.name, dec["agreement"])
        probe = [w for w in dec["warnings"] if w.get("kind") == "probe"]
        assert len(probe) == 1, dec["warnings"]
        assert probe[0]["text"].startswith(
            "the preferred network 10.9.0.0/24 failed its probe ("), probe
        assert "job-w-0" in probe[0]["text"], probe
        assert any("the preferred network 10.9.0.0/24 failed its probe" in l
                   for l in warning_lines(p)), p.describe()
    evs = {e["involvedObject"]["name"]: e for e in c.events() if e.get("reason") == "NetworkSelected"}
    assert sorted(evs) == sorted(p.name for p in c.pods), evs
    for e in evs.values():
        assert e["type"] == "Warning", e
        assert "the preferred network 10.9.0.0/24 failed its probe" in e["message"], e


def test_strict_makes_a_failed_preferred_network_exit_4(make_cluster):
    have("nft")
    c = make_cluster()
    firewall_fast_probe(c, c.nodes[1])
    c.start_all(*COMMON, "--timeout", "75", "--strict")
    c.wait_all(timeout=120)
    assert [p.rc for p in c.pods] == [4] * 4, diag(c)
    for p in c.pods:
        err = [l for l in p.stderr_text.splitlines() if "error:" in l]
        assert err and "--strict: the preferred network 10.9.0.0/24 failed its probe" in err[-1], \
            p.describe()
        assert not (p.out_dir / "nccl.env").exists(), p.name
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelectionFailed"]
    assert len(evs) == 4, evs


def route_dev(node, dst):
    out = node.ns.ip("-j", "route", "get", dst).stdout
    return json.loads(out)[0]["dev"]


def second_nic(c, node, name, addr):
    """Another macvlan of node on the fast switch: a second port on the
    same subnet."""
    tmp = "fx" + name[-2:] + str(node.index)
    c.switch.ip("link", "add", "name", tmp, "link", "fpar", "type", "macvlan", "mode", "bridge")
    c.switch.move(tmp, node.ns)
    node.ns.ip("link", "set", "dev", tmp, "name", name)
    node.ns.addr(name, addr + "/24")
    node.ns.up(name)
    node.ns.wait_all_carrier()


@pytest.mark.parametrize("same_address", [False, True], ids=["own-address", "same-address"])
def test_two_interfaces_on_one_subnet_the_routed_one_is_assigned(make_cluster, same_address):
    """Node b gets a second NIC on the fast subnet, named to sort first.
    The pod is assigned the interface the kernel routes the subnet through,
    the probe passes in the first round, and nothing is excluded."""
    c = make_cluster()
    b = c.nodes[1]
    second_nic(c, b, "aaa0", b.fast_addr if same_address else C.FAST_NET + ".112")
    routed = route_dev(b, c.nodes[2].fast_addr)
    assert routed in ("aaa0", b.fast_if)
    c.start_all(*COMMON, "--timeout", "40")
    c.wait_all(timeout=60)
    assert [p.rc for p in c.pods] == [0] * 4, diag(c)
    for p in c.pods:
        dec = C.decision_of(p)
        assert dec["agreement"]["network"] == str(FAST_NET), (p.name, dec["agreement"])
        assert dec["agreement"]["round"] == 1, (p.name, dec["agreement"])
    assert C.decision_of(c.pods[1])["choice"]["interface"] == routed
    rep = json.loads(c.annotation(c.pods[1].name, "nicpick.io/report"))
    flags = {x["if"]: x.get("rt") for x in rep["c"] if x["addr"].startswith(C.FAST_NET + ".")}
    assert flags == {routed: True, ({"aaa0", b.fast_if} - {routed}).pop(): False}, rep


def test_a_probe_failed_by_the_route_tries_the_routed_interface_first(make_cluster):
    """Node b's route to its ring neighbour (node c) leaves through its
    second NIC, while the subnet's route, which the report states, uses the
    first.  The probe fails on the route; the gatherer moves node b to the
    interface its probe found, on the same network, instead of excluding
    the network."""
    c = make_cluster()
    b, nxt = c.nodes[1], c.nodes[2]
    # Named to sort last: without the retry, node b keeps its first NIC and
    # the network is lost.
    second_nic(c, b, "zzz0", C.FAST_NET + ".112")
    b.ns.ip("route", "add", nxt.fast_addr + "/32", "dev", "zzz0")
    assert route_dev(b, C.FAST_NET + ".254") == b.fast_if
    c.start_all(*COMMON, "--timeout", "60")
    c.wait_all(timeout=90)
    assert [p.rc for p in c.pods] == [0] * 4, diag(c)
    g = c.pods[0].stderr_text
    assert re.search(r"round 1: job-w-1 routes 10\.9\.0\.0/24 through zzz0: trying that interface",
                     g), g
    for p in c.pods:
        dec = C.decision_of(p)
        assert dec["agreement"]["network"] == str(FAST_NET), (p.name, dec["agreement"])
        assert not [w for w in dec["warnings"] if w.get("kind") == "probe"], dec["warnings"]
    dec_b = C.decision_of(c.pods[1])
    assert dec_b["choice"]["interface"] == "zzz0", dec_b["choice"]
    assert dec_b["choice"]["address"] == C.FAST_NET + ".112", dec_b["choice"]
