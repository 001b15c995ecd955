"""The command line contract: subcommands, usage errors, exit codes, and what
a failed run leaves behind (nothing)."""
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
from netns import veth


def lines(text):
    return [l for l in text.splitlines() if l.strip()]


def assert_one_line_error(p, code, *needles):
    assert p.returncode == code, f"exit {p.returncode}, want {code}\n{p.stderr}"
    err = lines(p.stderr)
    assert len(err) == 1, f"want a one-line message, got:\n{p.stderr}"
    for n in needles:
        assert n in err[0], f"{n!r} not in {err[0]!r}"
    return err[0]


@pytest.fixture
def good_node(netns):
    """A node with one usable link, so a command that wrongly ignores an
    error would succeed (exit 0) instead of failing for another reason."""
    node, switch = netns.new("node"), netns.new("switch")
    veth(node, "ens3f0", switch, "sw0", "10.9.0.1/24", "10.9.0.2/24")
    return node


@pytest.fixture
def empty_node(netns):
    """Only lo: nothing usable."""
    return netns.new("node")


def test_version_prints_the_version(nicpick):
    p = nicpick.run("version")
    assert p.returncode == 0, p.stderr
    assert re.search(r"\d+\.\d+\.\d+", p.stdout), p.stdout
    want = (ROOT / "VERSION").read_text().strip() if (ROOT / "VERSION").exists() else None
    if want:
        assert want in p.stdout, f"VERSION says {want}, binary says {p.stdout!r}"


def test_bad_flag_is_usage_error(nicpick, good_node, out_dir):
    p = nicpick.select(out_dir, "--no-such-flag", ns=good_node)
    assert_one_line_error(p, 2, "--no-such-flag")
    assert os.listdir(out_dir) == []


def test_unknown_subcommand_is_usage_error(nicpick):
    p = nicpick.run("frobnicate")
    assert_one_line_error(p, 2, "frobnicate")


def test_select_without_out_dir_is_usage_error(nicpick, good_node, tmp_path):
    p = nicpick.run("select", "--peers", "none", "--smoke", "off", ns=good_node, cwd=str(tmp_path))
    assert_one_line_error(p, 2, "--out-dir")
    assert os.listdir(tmp_path) == [], "select without --out-dir wrote files somewhere"


@pytest.mark.parametrize("args", [
    ["--cidr", "bogus"],
    ["--cidr", "10.0.0.0/33"],
    ["--family", "foo"],
    ["--min-speed", "fast"],
    ["--peers", "nonsense"],
    ["--smoke", "maybe"],
], ids=lambda a: " ".join(a))
def test_bad_option_value_is_usage_error(nicpick, good_node, out_dir, args):
    p = nicpick.select(out_dir, *args, ns=good_node)
    assert_one_line_error(p, 2, args[1])
    assert os.listdir(out_dir) == []


def test_unwritable_out_dir_is_runtime_error(nicpick, good_node, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    target = blocker / "out"
    p = nicpick.select(target, ns=good_node)
    assert p.returncode == 1, f"exit {p.returncode}\n{p.stderr}"
    assert str(target) in p.stderr, p.stderr
    assert os.strerror(20) in p.stderr, p.stderr  # ENOTDIR: "Not a directory"
    assert blocker.read_text() == "not a directory\n"
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_nothing_usable_exits_3_with_table_and_no_files(nicpick, empty_node, out_dir):
    p = nicpick.select(out_dir, ns=empty_node)
    assert p.returncode == 3, f"exit {p.returncode}\n{p.stderr}"
    assert os.listdir(out_dir) == []
    lo_rows = [l for l in p.stderr.splitlines() if l.split() and l.split()[0] == "lo"]
    assert len(lo_rows) == 1, p.stderr
    assert "loopback" in lo_rows[0], lo_rows[0]


def test_missing_snapshot_names_the_path(nicpick, good_node, out_dir, tmp_path):
    missing = tmp_path / "missing.json"
    p = nicpick.select(out_dir, "--snapshot", str(missing), ns=good_node)
    # a --snapshot that cannot be read is bad input given by the user: 2
    assert p.returncode == 2, f"exit {p.returncode}\n{p.stderr}"
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0], p.stderr
    assert os.listdir(out_dir) == []


def test_failed_run_leaves_existing_outputs_untouched(nicpick, empty_node, out_dir):
    old = "export NCCL_SOCKET_IFNAME='=old0'\n"
    f = out_dir / "nccl.env"
    f.write_text(old)
    st = os.stat(f)
    p = nicpick.select(out_dir, ns=empty_node)
    assert p.returncode == 3, f"exit {p.returncode}\n{p.stderr}"
    assert f.read_text() == old
    st2 = os.stat(f)
    assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    assert os.listdir(out_dir) == ["nccl.env"]


def test_usage_error_leaves_existing_outputs_untouched(nicpick, good_node, out_dir):
    old = "export NCCL_SOCKET_IFNAME='=old0'\n"
    f = out_dir / "nccl.env"
    f.write_text(old)
    p = nicpick.select(out_dir, "--family", "foo", ns=good_node)
    assert p.returncode == 2
    assert f.read_text() == old
    assert os.listdir(out_dir) == ["nccl.env"]


def test_empty_out_dir_is_a_usage_error(nicpick, good_node):
    p = nicpick.run("select", "--peers", "none", "--smoke", "off", "--out-dir", "", ns=good_node)
    assert_one_line_error(p, 2, "--out-dir ''")


def test_version_to_a_full_device_fails_with_the_reason(nicpick_bin):
    import subprocess
    with open("/dev/full", "w") as full:
        p = subprocess.run([nicpick_bin, "version"], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=10)
    assert_one_line_error(p, 1, "cannot write to standard output", os.strerror(28))


def test_an_error_line_points_above_only_when_something_is_there(nicpick, good_node, tmp_path):
    """Exit 1 (an unwritable --out-dir) prints nothing above its line, so
    the line must not send the reader there."""
    blocker = tmp_path / "file"
    blocker.write_text("x\n")
    p = nicpick.select(blocker / "out", ns=good_node)
    line = assert_one_line_error(p, 1, str(blocker / "out"))
    assert "above" not in line, line
