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


# ---- --help: the whole text, or one verb's ----------------------------------

VERB_SYNOPSIS = {
    "discover": ["nicpick discover "],
    "select": ["nicpick select "],
    "smoke": ["nicpick smoke --out-dir", "nicpick smoke --rank"],
    "install": ["nicpick install DIR"],
    "status": ["nicpick status JOB", "kubectl nicpick status JOB"],
    "version": ["nicpick version"],
}
# Options a verb takes (from its own table or shared) and ones it does not.
VERB_OPTS = {
    "discover": (["--json", "--include LIST", "--sysfs DIR", "--log-format"], ["--out-dir", "--expect", "--kubeconfig"]),
    "select": (["--out-dir DIR", "--include LIST", "--expect N", "--smoke-bytes", "--log-format"],
               ["--kubeconfig", "--rank R --world-size"]),
    "smoke": (["--out-dir DIR", "--rank R --world-size N", "--smoke-bytes", "--log-format"],
              ["--include", "--expect", "--kubeconfig"]),
    "install": (["DIR "], ["--out-dir", "--log-format"]),
    "status": (["--kubeconfig FILE", "-n, --namespace NS", "-o, --output wide|json"],
               ["--out-dir", "--include", "--expect"]),
    "version": ([], ["--out-dir", "--log-format"]),
}


def usage_lines(text):
    """The synopsis lines at the top of a usage text."""
    out = []
    for l in text.splitlines():
        if not l.strip():
            break
        out.append(l[len("usage: "):] if l.startswith("usage: ") else l.strip())
    return out


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("verb", sorted(VERB_SYNOPSIS))
def test_verb_help_prints_that_verbs_usage_only(nicpick_bin, verb, flag):
    import subprocess
    p = subprocess.run([nicpick_bin, verb, flag], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and p.stderr == "", (p.returncode, p.stderr)
    assert p.stdout.startswith("usage: "), p.stdout
    syn = usage_lines(p.stdout)
    assert len(syn) == len(VERB_SYNOPSIS[verb]), syn
    for line, want in zip(syn, VERB_SYNOPSIS[verb]):
        assert line.startswith(want), (line, want)
    takes, not_takes = VERB_OPTS[verb]
    for o in takes:
        assert o in p.stdout, (verb, o, p.stdout)
    for o in not_takes:
        assert o not in p.stdout, (verb, o, p.stdout)
    if verb == "status":
        assert "status:     0 decided and proven" in p.stdout and "exit codes:" not in p.stdout
    elif verb != "version":
        assert "exit codes: 0 ok" in p.stdout and "decided and proven" not in p.stdout
    # `nicpick help VERB` is the same text
    h = subprocess.run([nicpick_bin, "help", verb], capture_output=True, text=True, timeout=10)
    assert (h.returncode, h.stdout) == (0, p.stdout)


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"]], ids=" ".join)
def test_help_alone_prints_the_whole_usage(nicpick_bin, args):
    import subprocess
    p = subprocess.run([nicpick_bin, *args], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    syn = usage_lines(p.stdout)
    assert len(syn) == sum(len(v) for v in VERB_SYNOPSIS.values()), syn
    for o in ("--out-dir DIR", "--rank R", "--kubeconfig FILE", "--include LIST", "DIR "):
        assert o in p.stdout, o
    assert "exit codes: 0 ok" in p.stdout and "status:     0 decided and proven" in p.stdout
    # every verb's rows are rows of the whole text
    for verb in VERB_SYNOPSIS:
        v = subprocess.run([nicpick_bin, verb, "--help"], capture_output=True, text=True, timeout=10)
        for line in v.stdout.splitlines():
            if line.startswith("  "):
                assert line in p.stdout.splitlines(), (verb, line)


def test_help_after_other_options_still_prints_usage_and_writes_nothing(nicpick_bin, tmp_path):
    import subprocess
    out = tmp_path / "out"
    p = subprocess.run([nicpick_bin, "select", "--out-dir", str(out), "--peers", "none", "--help"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and usage_lines(p.stdout)[0].startswith("nicpick select "), p.stdout
    assert not out.exists()


def test_help_of_an_unknown_verb_is_a_usage_error(nicpick):
    p = nicpick.run("help", "frobnicate")
    assert_one_line_error(p, 2, "frobnicate")


def test_verb_help_to_a_full_device_fails_with_the_reason(nicpick_bin):
    import subprocess
    with open("/dev/full", "w") as full:
        p = subprocess.run([nicpick_bin, "select", "--help"], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=10)
    assert_one_line_error(p, 1, "cannot write to standard output", os.strerror(28))


def test_kubectl_plugin_help(nicpick_bin, tmp_path):
    """kubectl-nicpick is nicpick under kubectl's plugin name: `kubectl
    nicpick --help` is the whole text, `kubectl nicpick status --help`
    status's; through kubectl itself when it is there."""
    import subprocess
    d = tmp_path / "plugins"
    d.mkdir()
    assert subprocess.run([nicpick_bin, "install", str(d)], capture_output=True, timeout=30).returncode == 0
    link = str(d / "kubectl-nicpick")
    whole = subprocess.run([link, "--help"], capture_output=True, text=True, timeout=10)
    assert whole.returncode == 0 and "nicpick select " in whole.stdout
    st = subprocess.run([link, "status", "--help"], capture_output=True, text=True, timeout=10)
    assert st.returncode == 0 and usage_lines(st.stdout)[0].startswith("nicpick status JOB"), st.stdout
    assert "--out-dir" not in st.stdout
    bare = subprocess.run([link], capture_output=True, text=True, timeout=10)
    assert bare.returncode == 2 and "kubectl nicpick status --help" in bare.stderr, bare.stderr
    kubectl = ROOT / "build" / "tools" / "kubectl"
    if not os.access(kubectl, os.X_OK):
        # tests/conftest.py turns this skip into a failure under CI=true
        pytest.skip(f"kubectl not found at {kubectl}: run `make tools`")
    env = {**os.environ, "PATH": f"{d}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")}
    k = subprocess.run([str(kubectl), "nicpick", "status", "--help"], capture_output=True, text=True,
                       timeout=30, env=env)
    assert (k.returncode, k.stdout) == (0, st.stdout), k.stderr


FIXTURE_SRC = ["--sysfs", str(ROOT / "tests" / "fixtures" / "roce-v2" / "sys"),
               "--netlink-json", str(ROOT / "tests" / "fixtures" / "roce-v2" / "ip.json")]


@pytest.mark.parametrize("args,named", [
    (["discover", "-xy"], "unknown option '-x'"),
    (["select", "--out-dir", "/nonexistent/o", "-xy"], "unknown option '-x'"),
    (["status", "-xy", "job"], "unknown option '-x' of status"),
    (["status", "--bogus", "job"], "unknown option '--bogus' of status"),
    (["version", "--bogus"], "unknown option '--bogus' of version"),
    (["version", "extra"], "unexpected argument 'extra'"),
    (["help", "select", "extra"], "unexpected argument 'extra'"),
    (["status", "job", "--log-format", "xml"], "--log-format 'xml'"),
])
def test_a_bad_argument_is_named_as_typed(nicpick_bin, args, named):
    # An unknown short option inside a bundle is the letter, not the
    # argument before it; verbs without options take no arguments either.
    import subprocess
    p = subprocess.run([nicpick_bin] + args, capture_output=True, text=True, timeout=10)
    assert_one_line_error(p, 2, named)


def test_nicpick_expect_is_read_only_where_expect_is(nicpick_bin, tmp_path):
    # NICPICK_EXPECT is --expect's value: a verb without --expect, --help,
    # and a command line that gives --expect do not read it.
    import subprocess
    env = dict(os.environ, NICPICK_EXPECT="abc")
    run = lambda *a: subprocess.run([nicpick_bin] + list(a), capture_output=True, text=True,
                                    timeout=30, env=env)
    p = run("discover", *FIXTURE_SRC)
    assert p.returncode == 0, p.stderr
    p = run("select", "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: nicpick select"), p.stderr
    out = tmp_path / "out"
    p = run("select", *FIXTURE_SRC, "--out-dir", str(out), "--smoke", "off", "--expect", "2")
    assert p.returncode == 0, p.stderr
    p = run("select", *FIXTURE_SRC, "--out-dir", str(tmp_path / "out2"), "--smoke", "off")
    assert_one_line_error(p, 2, "NICPICK_EXPECT='abc': expected a pod count")
    assert not (tmp_path / "out2").exists()


@pytest.mark.parametrize("fmt", [[], ["--json"], ["--json", "--log-format", "json"]])
def test_discover_to_a_full_device_says_so_once(nicpick_bin, fmt):
    import json
    import subprocess
    with open("/dev/full", "w") as full:
        p = subprocess.run([nicpick_bin, "discover"] + FIXTURE_SRC + fmt, stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=10)
    line = assert_one_line_error(p, 1, "cannot write to standard output", os.strerror(28))
    if "json" in fmt:
        assert json.loads(line)["fields"]["exit_code"] == "1"


def test_paths_that_cannot_work_are_refused_before_anything_is_made(nicpick_bin, tmp_path):
    # A snapshot that is a directory names the cause; an out-dir longer than
    # the paths nicpick makes under it can hold is refused before a single
    # directory of it is made; so is a TMPDIR too long for the smoke test's
    # own directory.
    import subprocess
    run = lambda *a, env=None: subprocess.run([nicpick_bin] + list(a), capture_output=True,
                                              text=True, timeout=30, env=env)
    p = run("select", "--snapshot", str(tmp_path), "--out-dir", str(tmp_path / "o"))
    assert_one_line_error(p, 2, f"snapshot {tmp_path}: {os.strerror(21)}")
    deep = tmp_path / "d" / ("x/" * 200)
    p = run("select", *FIXTURE_SRC, "--out-dir", str(deep), "--smoke", "off")
    assert_one_line_error(p, 2, "--out-dir: a path of", "at most 400")
    assert not (tmp_path / "d").exists()
    env = dict(os.environ, TMPDIR=str(tmp_path / ("t" * 240)))
    p = run("smoke", "--rank", "0", "--world", "1", "--comm-id", "127.0.0.1:29999", env=env)
    assert_one_line_error(p, 2, "TMPDIR is longer than")


def test_a_token_file_that_is_a_directory_says_so(nicpick_bin, tmp_path):
    import subprocess
    p = subprocess.run([nicpick_bin, "select", "--peers", "k8s", *FIXTURE_SRC,
                        "--token-file", str(tmp_path), "--api-server", "https://127.0.0.1:1",
                        "--insecure-skip-tls-verify", "--pod-name", "p", "--namespace", "n",
                        "--out-dir", str(tmp_path / "o"), "--smoke", "off", "--timeout", "5"],
                       capture_output=True, text=True, timeout=30)
    assert_one_line_error(p, 5, f"cannot read {tmp_path}: {os.strerror(21)}")


@pytest.mark.parametrize("args,named", [
    (["smoke", "--rank", "0", "--world", "1", "--comm-id", "host\nnicpick: error: x:1"],
     "--comm-id: the value has a control character (0x0a)"),
    (["select", "--out-dir", "/nonexistent/o", "--include", "ens\tx"],
     "--include: the value has a control character (0x09)"),
    (["status", "-n", "a\nb", "job"], "--namespace: the value has a control character"),
    (["select", "--out-dir", "rel/out", "--nccl-debug"],
     "--nccl-debug needs an absolute --out-dir ('rel/out')"),
])
def test_values_that_would_forge_or_misplace_output_are_refused(nicpick_bin, tmp_path, args, named):
    # A value goes into log lines, annotations and NCCL's variables: a
    # newline would forge a log line.  NCCL_DEBUG_FILE is read from the
    # training container's working directory.
    import subprocess
    p = subprocess.run([nicpick_bin] + args, capture_output=True, text=True, timeout=10,
                       cwd=tmp_path)
    assert_one_line_error(p, 2, named)
    assert os.listdir(tmp_path) == []
