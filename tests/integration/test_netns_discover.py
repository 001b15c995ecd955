"""`nicpick discover` inside network namespaces: what it lists and how it
classifies, from real kernel interfaces (netlink + the namespace's sysfs)."""
import json
import pathlib
import re
import tempfile

from netns import veth

CLASSES = {"physical", "sriov-vf", "bond", "vlan", "macvlan", "ipvlan", "ipoib", "veth",
           "bridge", "tunnel", "tuntap", "loopback", "virtual"}


def by_name(arr):
    names = [o["name"] for o in arr]
    assert len(names) == len(set(names)), f"duplicate names in discover --json: {names}"
    return {o["name"]: o for o in arr}


def mixed_node(netns):
    """A node with one interface of every kind a namespace can hold, named so
    that a name-based guess would be wrong (a bridge called eth9, a veth
    called br-x)."""
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "ens3f0", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    node.addr("ens3f0", "2001:db8::1/64", nodad=True)
    veth(node, "br-x", switch, "sw1", "10.8.0.1/24")
    node.add_bridge("eth9", "10.244.0.1/24")
    node.add_macvlan("mv0", "ens3f0", "10.9.0.5/24")
    node.add_vxlan("vx0", 42, "10.9.0.1", dev="ens3f0", cidr="10.50.0.1/24")
    node.add_tap("tap0", "10.60.0.1/24")
    expected = {"lo": "loopback", "ens3f0": "veth", "br-x": "veth", "eth9": "bridge",
                "mv0": "macvlan", "vx0": "tunnel", "tap0": "tuntap"}
    return node, expected


def test_discover_json_lists_every_interface_with_its_class(netns, nicpick):
    node, expected = mixed_node(netns)
    arr = nicpick.discover_json(ns=node)
    assert isinstance(arr, list)
    got = by_name(arr)
    assert set(got) == set(node.link_names()), "discover must list exactly the kernel's links"
    for name, cls in expected.items():
        assert got[name]["class"] == cls, f"{name}: {got[name]}"
    for o in arr:
        assert o["class"] in CLASSES, o
        assert isinstance(o["usable"], bool), o
        assert isinstance(o["reasons"], list), o
        assert all(isinstance(r, str) and r for r in o["reasons"]), o
        if not o["usable"]:
            assert o["reasons"], f"{o['name']} refused without a reason"


def test_discover_json_addresses_and_speed(netns, nicpick):
    node, _ = mixed_node(netns)
    got = by_name(nicpick.discover_json(ns=node))
    addrs = got["ens3f0"]["addresses"]
    triples = {(a["family"], a["address"], a["prefixlen"]) for a in addrs}
    assert ("inet", "10.9.0.1", 24) in triples, addrs
    assert ("inet6", "2001:db8::1", 64) in triples, addrs
    # lo's 127.0.0.1 is host scope: not an address NCCL could use, and lo
    # must never be usable.
    assert got["lo"]["usable"] is False
    # The veth's speed is what the namespace's sysfs says (10000 on Linux).
    sysfs = node.exec(["cat", "/sys/class/net/ens3f0/speed"], check=True).stdout.strip()
    assert got["ens3f0"]["speed_mbps"] == int(sysfs)
    # The up, addressed veth with a live peer is usable; the bridge is not.
    assert got["ens3f0"]["usable"] is True, got["ens3f0"]
    assert got["eth9"]["usable"] is False, got["eth9"]


def test_discover_table_has_one_row_per_interface(netns, nicpick):
    node, expected = mixed_node(netns)
    p = nicpick.run("discover", ns=node)
    assert p.returncode == 0, p.stderr
    rows = {}
    for line in p.stdout.splitlines():
        tok = line.split()
        if tok and tok[0] in expected:
            rows.setdefault(tok[0], []).append(line)
    for name in expected:
        assert len(rows.get(name, [])) == 1, f"{name}: rows {rows.get(name)}\n{p.stdout}"
    # The row shows the class, so the table alone explains the verdicts.
    for name, cls in expected.items():
        assert re.search(r"\b" + re.escape(cls) + r"\b", rows[name][0]), rows[name][0]


def test_discover_1000_interfaces(netns, nicpick):
    """1,000 veth ends with an address each: all listed, all veth, and
    select picks the same one every time.  The timeout is a sanity bound
    only; bench/discover measures speed."""
    node = netns.new("node")
    lines = []
    for i in range(500):
        a, b = f"va{i}", f"vb{i}"
        third = f"{100 + i // 250}.{i % 250}"
        lines += [f"link add name {a} type veth peer name {b}",
                  f"addr add 10.{third}.1/24 dev {a}",
                  f"addr add 10.{third}.2/24 dev {b}",
                  f"link set dev {a} up", f"link set dev {b} up"]
    node.batch(lines, timeout=300)
    node.wait_all_carrier()
    arr = nicpick.discover_json(ns=node, timeout=120)
    got = by_name(arr)
    assert len(arr) == 1001
    assert got["lo"]["class"] == "loopback"
    wrong = [n for n, o in got.items() if n != "lo" and o["class"] != "veth"]
    assert not wrong, f"not classified veth: {wrong[:10]}"
    no_addr = [n for n, o in got.items() if n != "lo" and not o["addresses"]]
    assert not no_addr, f"addresses missing: {no_addr[:10]}"

    choices = []
    for _ in range(2):
        with tempfile.TemporaryDirectory(prefix="np-out-") as d:
            p = nicpick.select(d, ns=node, timeout=120)
            assert p.returncode == 0, p.stderr
            dec = json.loads((pathlib.Path(d) / "decision.json").read_text())
            assert len(dec["candidates"]) == 1001
            choices.append((dec["choice"]["interface"], dec["choice"]["address"]))
    assert choices[0] == choices[1], choices
    assert got[choices[0][0]]["class"] == "veth"


def test_discover_lists_a_non_utf8_name(netns, nicpick):
    """Linux names are bytes; one that is not UTF-8 (b'e\\xff1') must still
    be listed (escaped as the binary sees fit), never dropped silently."""
    node, switch = netns.new("node"), netns.new("switch")
    odd = b"e\xff1".decode("utf-8", "surrogateescape")
    veth(node, odd, switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    veth(node, "eth0", switch, "sw1", "10.8.0.1/24", "10.8.0.2/24")
    arr = nicpick.discover_json(ns=node)
    assert len(arr) == len(node.link_names()) == 3, [o["name"] for o in arr]
