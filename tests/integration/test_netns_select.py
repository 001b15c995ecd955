"""`nicpick select --peers none` on namespaced "nodes": the decision, the
refusal reasons and the files the training container reads."""
import os
import time

import pytest

from netns import candidate, read_outputs, reasons_text, source_env, veth
from outset import assert_one_set

OUT_FILES = {"nccl.env", "nccl.conf", "decision.json"}


def select_ok(nicpick, node, out_dir, *args):
    p = nicpick.select(out_dir, *args, ns=node)
    assert p.returncode == 0, f"select exited {p.returncode}\nstdout:{p.stdout}\nstderr:{p.stderr}"
    return read_outputs(out_dir)


def sh_quote(s):
    """POSIX single quoting as outputs.h documents it: 'it'\\''s'."""
    return "'" + s.replace("'", "'\\''") + "'"


def assert_chose(out_dir, name, address=None):
    env, conf, dec = read_outputs(out_dir)
    assert dec["choice"]["interface"] == name, dec["choice"]
    if address is not None:
        assert dec["choice"]["address"] == address, dec["choice"]
    assert f"export NCCL_SOCKET_IFNAME={sh_quote('=' + name)}" in env.splitlines(), env
    assert f"NCCL_SOCKET_IFNAME=={name}" in conf.splitlines(), conf
    assert source_env(out_dir, "NCCL_SOCKET_IFNAME")["NCCL_SOCKET_IFNAME"] == "=" + name
    return env, conf, dec


def table_row(text, name):
    """The refusal table's row for interface `name` (first column)."""
    rows = [l for l in text.splitlines() if l.split() and l.split()[0] == name]
    assert len(rows) == 1, f"expected one row for {name!r} in:\n{text}"
    return rows[0]


def test_decoy_bridges_are_refused_and_the_real_link_chosen(netns, nicpick, out_dir):
    node, pod, switch = netns.new("node"), netns.new("pod"), netns.new("switch")
    node.add_bridge("cni0", "10.244.0.1/24")
    veth(node, "veth1a2b", pod, "eth0", None, "10.244.0.5/24")
    node.enslave("veth1a2b", "cni0")
    node.add_bridge("docker0", "172.17.0.1/16")
    veth(node, "ens3f0", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")

    select_ok(nicpick, node, out_dir)
    env, conf, dec = assert_chose(out_dir, "ens3f0", "10.9.0.1")
    assert isinstance(dec["policy"], dict), dec.get("policy")
    for bridge in ("cni0", "docker0"):
        c = candidate(dec, bridge)
        assert c["class"] == "bridge", c
        assert c["usable"] is False, c
        assert "bridge" in reasons_text(c), c
    chosen = candidate(dec, "ens3f0")
    assert chosen["usable"] is True and chosen["class"] == "veth", chosen
    assert candidate(dec, "lo")["usable"] is False
    # every interface of the node is judged, with the documented members
    assert {c["name"] for c in dec["candidates"]} == set(node.link_names())
    for c in dec["candidates"]:
        assert {"name", "class", "usable", "score", "reasons"} <= set(c), c


def test_link_local_helper_and_down_nic_are_refused(netns, nicpick, out_dir):
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "ens3f0", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    veth(node, "llhelper", switch, "sw1", "169.254.1.1/16")
    veth(node, "ens4", switch, "sw2", "10.8.0.1/24", "10.8.0.2/24")
    node.down("ens4")

    select_ok(nicpick, node, out_dir)
    _, _, dec = assert_chose(out_dir, "ens3f0", "10.9.0.1")
    ll = candidate(dec, "llhelper")
    assert ll["usable"] is False and "link-local" in reasons_text(ll), ll
    down = candidate(dec, "ens4")
    assert down["usable"] is False and "down" in reasons_text(down), down


def test_ipv6_only_node_writes_af_inet6(netns, nicpick, out_dir):
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "ens3f0", switch, "sw0", "2001:db8::1/64", "2001:db8::2/64", nodad=True)
    node.wait_no_tentative("ens3f0")

    env, conf, _ = select_ok(nicpick, node, out_dir)
    _, _, dec = assert_chose(out_dir, "ens3f0", "2001:db8::1")
    assert "export NCCL_SOCKET_FAMILY='AF_INET6'" in env.splitlines(), env
    assert "NCCL_SOCKET_FAMILY=AF_INET6" in conf.splitlines(), conf
    assert source_env(out_dir, "NCCL_SOCKET_FAMILY")["NCCL_SOCKET_FAMILY"] == "AF_INET6"


def suffix_node(netns):
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "eth1", switch, "sw1", "10.1.0.1/24", "10.1.0.2/24")
    node.down("eth1")
    veth(node, "eth10", switch, "sw10", "10.10.0.1/24", "10.10.0.2/24")
    return node


def test_suffix_names_exact_name_written(netns, nicpick, out_dir):
    node = suffix_node(netns)
    select_ok(nicpick, node, out_dir)
    assert_chose(out_dir, "eth10", "10.10.0.1")


def test_suffix_names_include_prefix_still_matches_eth10(netns, nicpick, out_dir):
    node = suffix_node(netns)
    select_ok(nicpick, node, out_dir, "--include", "eth1")
    assert_chose(out_dir, "eth10")


def test_suffix_names_include_exact_refuses_with_table(netns, nicpick, out_dir):
    node = suffix_node(netns)
    p = nicpick.select(out_dir, "--include", "=eth1", ns=node)
    assert p.returncode == 3, f"exit {p.returncode}\n{p.stderr}"
    assert os.listdir(out_dir) == [], "no file may be written when nothing is usable"
    assert "down" in table_row(p.stderr, "eth1")
    table_row(p.stderr, "eth10")  # refused by --include: still listed


# Names the kernel accepts (<= 15 bytes, no '/', ':' or whitespace) that
# would run commands or break quoting if written unquoted.  Each marker file
# name is distinct so we can tell which one fired.
HOSTILE = [
    "a$(>x1)",
    "b`>x2`",
    "c';>x3;'",
    "d\"$(>x4)\"",
    "e\\';>x5",
    "f;>x6",
    "g|>x7&",
    "h$HOME*",
    "i'$'\\''",
    "=e1",
    "^e2",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_interface_name_is_quoted(netns, nicpick, out_dir, name):
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, name, switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    assert name in node.link_names(), "kernel/iproute2 changed the name"

    select_ok(nicpick, node, out_dir)
    assert_one_set(out_dir)
    before = sorted(os.listdir(out_dir))
    _, conf, dec = assert_chose(out_dir, name, "10.9.0.1")
    for shell in ("sh", "bash"):
        vals = source_env(out_dir, "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", shell=shell)
        assert vals["NCCL_SOCKET_IFNAME"] == "=" + name, (shell, vals)
        # Gloo takes plain names, no '=' prefix
        assert vals["GLOO_SOCKET_IFNAME"] == name, (shell, vals)
    assert sorted(os.listdir(out_dir)) == before, "sourcing nccl.env created files"


def test_comma_name_alone_is_a_clear_refusal(netns, nicpick, out_dir):
    """NCCL's list syntax splits on ',', so `=a,b` would mean a or b: such a
    name cannot be written and must never be chosen."""
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "a,b", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    p = nicpick.select(out_dir, ns=node)
    # refused in ranking like any unusable interface: exit 3 and the table
    assert p.returncode == 3, f"exit {p.returncode}\n{p.stderr}"
    assert os.listdir(out_dir) == []
    row = table_row(p.stderr, "a,b")
    assert "refused" in row and "','" in row, f"refusal row gives no reason: {row!r}"


def test_comma_name_is_refused_with_a_reason_next_to_a_good_one(netns, nicpick, out_dir):
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "a,b", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    veth(node, "eth0", switch, "sw1", "10.8.0.1/24", "10.8.0.2/24")
    select_ok(nicpick, node, out_dir)
    _, _, dec = assert_chose(out_dir, "eth0", "10.8.0.1")
    c = candidate(dec, "a,b")
    assert c["usable"] is False and c["reasons"], c


def test_control_character_name_is_left_out_next_to_a_good_one(netns, nicpick, out_dir):
    """Linux allows a control character in a name; nccl.conf cannot carry
    one.  That interface is left out with its reason and the run goes on
    (it used to fail the whole run with exit 2)."""
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "ctl0", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    veth(node, "eth0", switch, "sw1", "10.8.0.1/24", "10.8.0.2/24")
    # iproute2's JSON carries the raw character, which Python's reader
    # refuses: rename and bring it up by hand.
    node.down("ctl0")
    node.ip("link", "set", "dev", "ctl0", "name", "a\x01b")
    node.up("a\x01b")
    for _ in range(100):  # carrier, so that only the name can leave it out
        line = node.ip("-o", "link", "show", "dev", "a\x01b").stdout
        if "LOWER_UP" in line:
            break
        time.sleep(0.05)
    assert "LOWER_UP" in line, line
    select_ok(nicpick, node, out_dir)
    _, _, dec = assert_chose(out_dir, "eth0", "10.8.0.1")
    c = candidate(dec, "a\x01b")
    assert c["usable"] is False and "name has a control character (0x01)" in reasons_text(c), c


def test_renamed_interface_outputs_replaced_atomically(netns, nicpick, out_dir):
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "ens3f0", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    select_ok(nicpick, node, out_dir)
    assert_chose(out_dir, "ens3f0")
    inodes = {f: os.stat(out_dir / f).st_ino for f in OUT_FILES}
    # Keep the old inodes alive (open), so the kernel cannot reuse a number
    # and make a replaced file look untouched.
    held = [open(out_dir / f, "rb") for f in OUT_FILES]
    try:
        node.rename("ens3f0", "ens3f1")
        select_ok(nicpick, node, out_dir)
        _, _, dec = assert_chose(out_dir, "ens3f1", "10.9.0.1")
        assert "ens3f0" not in {c["name"] for c in dec["candidates"]}
        for f in OUT_FILES:
            assert os.stat(out_dir / f).st_ino != inodes[f], f"{f} rewritten in place"
        assert_one_set(out_dir)  # nothing of the old set, no temporary
        # the old contents are intact: readers never saw a half-written file
        for h in held:
            assert h.read(), f"{h.name}: old file emptied in place"
    finally:
        for h in held:
            h.close()


def test_multus_macvlan_preferred_over_pod_eth0(netns, nicpick, out_dir):
    node, pod, switch = netns.new("node"), netns.new("pod"), netns.new("switch")
    node.add_bridge("cni0", "10.244.1.1/24")
    veth(node, "vethpod", pod, "eth0", None, "10.244.1.5/24")
    node.enslave("vethpod", "cni0")
    veth(node, "ens3f0", switch, "sw0", None, "10.9.0.2/24")
    node.add_macvlan("net1", "ens3f0", up=False)
    node.move("net1", pod)
    pod.addr("net1", "10.9.0.5/24")
    pod.up("net1")
    pod.wait_carrier("net1")

    select_ok(nicpick, pod, out_dir)
    _, _, dec = assert_chose(out_dir, "net1", "10.9.0.5")
    assert candidate(dec, "net1")["class"] == "macvlan"
    eth0 = candidate(dec, "eth0")
    assert eth0["class"] == "veth"
    if eth0["usable"]:
        assert eth0["score"] < candidate(dec, "net1")["score"], dec["candidates"]


def test_plain_pod_uses_eth0(netns, nicpick, out_dir):
    node, pod = netns.new("node"), netns.new("pod")
    node.add_bridge("cni0", "10.244.1.1/24")
    veth(node, "vethpod", pod, "eth0", None, "10.244.1.5/24")
    node.enslave("vethpod", "cni0")
    assert sorted(pod.link_names()) == ["eth0", "lo"]

    select_ok(nicpick, pod, out_dir)
    assert_chose(out_dir, "eth0", "10.244.1.5")


def two_link_node(netns):
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "ens3f0", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    veth(node, "ens4f0", switch, "sw1", "10.8.0.1/24", "10.8.0.2/24")
    return node


def test_cidr_narrows_the_choice(netns, nicpick, out_dir):
    node = two_link_node(netns)
    for cidr, want in (("10.8.0.0/16", "ens4f0"), ("10.9.0.0/24", "ens3f0")):
        select_ok(nicpick, node, out_dir, "--cidr", cidr)
        assert_chose(out_dir, want)


def test_exclude_refuses_the_named_interface(netns, nicpick, out_dir):
    node = two_link_node(netns)
    for excl, want in (("ens4", "ens3f0"), ("=ens3f0", "ens4f0")):
        select_ok(nicpick, node, out_dir, "--exclude", excl)
        _, _, dec = assert_chose(out_dir, want)
        other = "ens4f0" if want == "ens3f0" else "ens3f0"
        assert candidate(dec, other)["usable"] is False


def test_family_inet6_without_global_ipv6_exits_3(netns, nicpick, out_dir):
    node = two_link_node(netns)
    p = nicpick.select(out_dir, "--family", "inet6", ns=node)
    assert p.returncode == 3, f"exit {p.returncode}\n{p.stderr}"
    assert os.listdir(out_dir) == []
    table_row(p.stderr, "ens3f0")


def test_snapshot_replays_another_node(netns, nicpick, out_dir, tmp_path):
    """select --snapshot decides from the saved discover --json, not from the
    namespace it runs in (which here has nothing usable)."""
    node, switch, empty = netns.new("node"), netns.new("switch"), netns.new("empty")
    node.add_bridge("cni0", "10.244.0.1/24")
    veth(node, "ens3f0", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    p = nicpick.run("discover", "--json", ns=node)
    assert p.returncode == 0, p.stderr
    snap = tmp_path / "snap.json"
    snap.write_text(p.stdout)

    select_ok(nicpick, empty, out_dir, "--snapshot", str(snap))
    _, _, dec = assert_chose(out_dir, "ens3f0", "10.9.0.1")
    assert candidate(dec, "cni0")["usable"] is False


def test_non_utf8_name_does_not_break_the_run(netns, nicpick, out_dir):
    """An interface whose name is not UTF-8 cannot go into decision.json as
    is; it must be refused (or escaped), not abort the whole run."""
    node, switch = netns.new("node"), netns.new("switch")
    odd = b"e\xff1".decode("utf-8", "surrogateescape")
    veth(node, odd, switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    veth(node, "eth0", switch, "sw1", "10.8.0.1/24", "10.8.0.2/24")
    select_ok(nicpick, node, out_dir)
    _, _, dec = assert_chose(out_dir, "eth0", "10.8.0.1")
    assert len(dec["candidates"]) == 3, [c["name"] for c in dec["candidates"]]
    odd_c = [c for c in dec["candidates"] if c["name"] not in ("lo", "eth0")]
    assert odd_c and odd_c[0]["usable"] is False and odd_c[0]["reasons"], odd_c


def test_name_of_the_kernel_maximum_is_written_exactly(netns, nicpick, out_dir):
    """15 bytes is the longest name Linux allows (IFNAMSIZ - 1); it must be
    written whole, never cut."""
    name = "abcdefghij$(;1)"
    assert len(name.encode()) == 15
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, name, switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    select_ok(nicpick, node, out_dir)
    assert_chose(out_dir, name, "10.9.0.1")
    assert source_env(out_dir, "GLOO_SOCKET_IFNAME")["GLOO_SOCKET_IFNAME"] == name


def test_non_utf8_name_alone_exits_3_with_one_line_error(netns, nicpick, out_dir):
    node, switch = netns.new("node"), netns.new("switch")
    odd = b"e\xff1".decode("utf-8", "surrogateescape")
    veth(node, odd, switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    p = nicpick.select(out_dir, ns=node)
    assert p.returncode == 3, f"exit {p.returncode}\n{p.stderr}"
    assert os.listdir(out_dir) == []
    assert "UTF-8" in p.stderr, p.stderr
    errors = [l for l in p.stderr.splitlines() if "error:" in l]
    assert len(errors) == 1, p.stderr
