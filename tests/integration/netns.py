"""Network namespaces as stand-in nodes, pods and switches.

Every namespace gets a unique name (np-<8 hex>) so parallel or leftover runs
never collide, and a NetnsFactory deletes every namespace it made, even when
the test failed.  Every command runs with a timeout so a hung tool fails the
test instead of hanging the suite.
"""
import json
import os
import subprocess
import tempfile
import time
import uuid

IP = "ip"
TIMEOUT = 60  # seconds; a sanity bound for any one command, not a measurement


class NetnsError(RuntimeError):
    pass


def _run(argv, timeout=TIMEOUT, check=True, **kw):
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, text=True,
                           errors="surrogateescape", **kw)
    except subprocess.TimeoutExpired as e:
        raise NetnsError(f"timed out after {timeout}s: {argv!r}") from e
    if check and p.returncode != 0:
        raise NetnsError(f"{argv!r} exited {p.returncode}: {p.stderr.strip()}")
    return p


class Netns:
    """One network namespace and the interfaces in it."""

    def __init__(self, name, role):
        self.name = name
        self.role = role

    def __repr__(self):
        return f"Netns({self.name!r}, role={self.role!r})"

    # -- raw commands -------------------------------------------------------
    def ip(self, *args, check=True, timeout=TIMEOUT):
        return _run([IP, "-n", self.name, *args], timeout=timeout, check=check)

    def batch(self, lines, timeout=TIMEOUT):
        """Run many `ip` commands in one process (`ip -n NS -batch FILE`):
        creating 1,000 interfaces one fork at a time takes minutes."""
        with tempfile.NamedTemporaryFile("w", prefix="np-batch-", suffix=".ip") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            return _run([IP, "-n", self.name, "-batch", f.name], timeout=timeout)

    def exec(self, argv, timeout=TIMEOUT, check=False, **kw):
        """Run argv inside the namespace.  `ip netns exec` also remounts /sys,
        so sysfs shows this namespace's interfaces."""
        return _run([IP, "netns", "exec", self.name, *argv], timeout=timeout,
                    check=check, **kw)

    # -- building -----------------------------------------------------------
    def up(self, ifname):
        self.ip("link", "set", "dev", ifname, "up")

    def down(self, ifname):
        self.ip("link", "set", "dev", ifname, "down")

    def addr(self, ifname, cidr, nodad=False):
        extra = ["nodad"] if nodad and ":" in cidr else []
        self.ip("addr", "add", cidr, "dev", ifname, *extra)

    def rename(self, old, new):
        # The kernel renames only a down interface; restore the state after.
        was_up = self.is_up(old)
        self.down(old)
        self.ip("link", "set", "dev", old, "name", new)
        if was_up:
            self.up(new)
            self.wait_carrier(new)

    def add_bridge(self, name, cidr=None, up=True):
        self.ip("link", "add", "name", name, "type", "bridge")
        if cidr:
            self.addr(name, cidr)
        if up:
            self.up(name)

    def enslave(self, ifname, bridge):
        self.ip("link", "set", "dev", ifname, "master", bridge)

    def add_macvlan(self, name, parent, cidr=None, up=True, mode="bridge"):
        self.ip("link", "add", "name", name, "link", parent, "type", "macvlan", "mode", mode)
        if cidr:
            self.addr(name, cidr)
        if up:
            self.up(name)

    def add_vxlan(self, name, vni, local, dev=None, cidr=None, up=True):
        args = ["link", "add", "name", name, "type", "vxlan", "id", str(vni),
                "dstport", "4789", "local", local]
        if dev:
            args += ["dev", dev]
        self.ip(*args)
        if cidr:
            self.addr(name, cidr)
        if up:
            self.up(name)

    def add_tap(self, name, cidr=None, up=True):
        self.ip("tuntap", "add", "dev", name, "mode", "tap")
        if cidr:
            self.addr(name, cidr)
        if up:
            self.up(name)

    def move(self, ifname, other):
        self.ip("link", "set", "dev", ifname, "netns", other.name)

    # -- reading ------------------------------------------------------------
    def links(self):
        return json.loads(self.ip("-j", "-d", "link", "show").stdout)

    def link_names(self):
        return [l["ifname"] for l in self.links()]

    def is_up(self, ifname):
        l = json.loads(self.ip("-j", "link", "show", "dev", ifname).stdout)[0]
        return "UP" in l.get("flags", [])

    def wait_carrier(self, ifname, timeout=10.0):
        """Wait until the kernel reports carrier: a veth gets it a moment
        after both ends are up (linkwatch), and nicpick rightly refuses an
        interface without it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            l = json.loads(self.ip("-j", "link", "show", "dev", ifname).stdout)[0]
            if "LOWER_UP" in l.get("flags", []):
                return
            time.sleep(0.05)
        raise NetnsError(f"{self.name}/{ifname}: no carrier after {timeout}s")

    def wait_all_carrier(self, timeout=30.0):
        """wait_carrier for every interface that is up (one dump per poll)."""
        deadline = time.monotonic() + timeout
        while True:
            waiting = [l["ifname"] for l in self.links()
                       if "UP" in l.get("flags", []) and "LOWER_UP" not in l.get("flags", [])
                       and l["ifname"] != "lo"]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise NetnsError(f"{self.name}: no carrier on {waiting[:10]}")
            time.sleep(0.1)

    def wait_no_tentative(self, ifname, timeout=10.0):
        """Wait until no IPv6 address on ifname is still in DAD."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "tentative" not in self.ip("addr", "show", "dev", ifname).stdout:
                return
            time.sleep(0.1)
        raise NetnsError(f"{self.name}/{ifname}: IPv6 address still tentative")


def veth(a, name_a, b, name_b, cidr_a=None, cidr_b=None, up=True, nodad=False):
    """A veth pair with one end in namespace a and the other in b (the same
    namespace is fine).  Both ends are created directly in their namespaces,
    so names never collide with the root namespace."""
    _run([IP, "link", "add", "name", name_a, "netns", a.name, "type", "veth",
          "peer", "name", name_b, "netns", b.name])
    if cidr_a:
        a.addr(name_a, cidr_a, nodad=nodad)
    if cidr_b:
        b.addr(name_b, cidr_b, nodad=nodad)
    if up:
        a.up(name_a)
        b.up(name_b)
        a.wait_carrier(name_a)
        b.wait_carrier(name_b)


class NetnsFactory:
    """Makes namespaces and deletes all of them in cleanup()."""

    def __init__(self):
        self.made = []

    def new(self, role="node"):
        ns = Netns("np-" + uuid.uuid4().hex[:8], role)
        # Recorded first: an interrupt during `ip netns add` still cleans up.
        self.made.append(ns)
        _run([IP, "netns", "add", ns.name])
        ns.up("lo")
        return ns

    def cleanup(self):
        errors = []
        for ns in reversed(self.made):
            if not os.path.exists(f"/run/netns/{ns.name}"):
                continue
            p = _run([IP, "netns", "del", ns.name], check=False)
            if p.returncode != 0 and os.path.exists(f"/run/netns/{ns.name}"):
                errors.append(f"{ns.name}: {p.stderr.strip()}")
        self.made.clear()
        if errors:
            raise NetnsError("could not delete namespaces: " + "; ".join(errors))


def netns_unavailable_reason():
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespace tests need root (euid %d)" % os.geteuid()
    name = "np-probe-" + uuid.uuid4().hex[:8]
    try:
        p = _run([IP, "netns", "add", name], check=False, timeout=20)
    except (OSError, NetnsError) as e:
        return f"`ip netns add` failed: {e}"
    if p.returncode != 0:
        return f"`ip netns add` failed: {p.stderr.strip()}"
    _run([IP, "netns", "del", name], check=False, timeout=20)
    return None


class Nicpick:
    """The binary under test, run in a namespace or in the current one."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, ns=None, timeout=TIMEOUT, **kw):
        argv = [self.path, *args]
        if ns is not None:
            return ns.exec(argv, timeout=timeout, **kw)
        return _run(argv, timeout=timeout, check=False, **kw)

    def select(self, out_dir, *args, ns=None, timeout=TIMEOUT):
        return self.run("select", "--peers", "none", "--smoke", "off",
                        "--out-dir", str(out_dir), *args, ns=ns, timeout=timeout)

    def discover_json(self, ns=None, timeout=TIMEOUT):
        p = self.run("discover", "--json", ns=ns, timeout=timeout)
        if p.returncode != 0:
            raise AssertionError(f"discover --json exited {p.returncode}: {p.stderr}")
        return json.loads(p.stdout)


def read_outputs(out_dir):
    """The three output files: (env text, conf text, decision dict)."""
    env = (out_dir / "nccl.env").read_text(errors="surrogateescape")
    conf = (out_dir / "nccl.conf").read_text(errors="surrogateescape")
    decision = json.loads((out_dir / "decision.json").read_text())
    return env, conf, decision


def source_env(out_dir, *names, shell="sh"):
    """Source nccl.env in a POSIX shell from out_dir and return the values of
    the named variables ("" for unset), exactly as the shell sees them."""
    script = ". ./nccl.env; " + "".join(
        f'printf "%s\\0" "${{{n}-}}"; ' for n in names)
    p = _run([shell, "-c", script], cwd=str(out_dir), timeout=20, check=False)
    if p.returncode != 0:
        raise AssertionError(f"sourcing nccl.env failed ({p.returncode}): {p.stderr}")
    vals = p.stdout.split("\0")[:-1]
    return dict(zip(names, vals))


def candidate(decision, name):
    for c in decision["candidates"]:
        if c["name"] == name:
            return c
    raise AssertionError(f"{name!r} not among candidates "
                         f"{[c['name'] for c in decision['candidates']]}")


def reasons_text(entry):
    return " | ".join(entry.get("reasons") or [])
