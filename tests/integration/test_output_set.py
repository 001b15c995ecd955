"""nccl.env, nccl.conf and decision.json change together (issue 14, "three
outputs, one change"): concurrent runs on one out dir take turns, a kill at
any point leaves the old set or the new one, and the three files always
name the same decision.  Each run decides alone from a saved snapshot, so
these tests need neither namespaces nor an API server."""
import os
import pathlib
import signal
import subprocess
import threading

import pytest

from outset import OUT_FILES, assert_one_set, documented, ids, set_id

ROOT = pathlib.Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "fuzz" / "corpus" / "snapshot" / "pod-plain"
# The kill points of the output set, in the order a run reaches them
# (lib/util/testhook.h).
POINTS = ["mid-outputs", "outputs-written", "outputs-linked", "outputs-swapped"]


def argv(nicpick_bin, out_dir):
    return [nicpick_bin, "select", "--peers", "none", "--smoke", "off", "--snapshot",
            str(SNAPSHOT), "--out-dir", str(out_dir)]


def run(nicpick_bin, out_dir, kill_at=None):
    env = dict(os.environ)
    env.pop("NICPICK_TEST_KILL_AT", None)
    if kill_at:
        env["NICPICK_TEST_KILL_AT"] = kill_at
    return subprocess.run(argv(nicpick_bin, out_dir), env=env, capture_output=True, text=True,
                          timeout=30)


def hooks_built(nicpick_bin):
    return "np_test_point" in subprocess.run(["nm", nicpick_bin], capture_output=True,
                                             text=True).stdout


def test_300_concurrent_pairs_leave_one_whole_set(nicpick_bin, tmp_path):
    """Two runs at once on one out dir, 300 times: both succeed (they take
    turns on the lock), and what stays is one set whose three files name
    the same decision."""
    pairs = 300
    dirs = [tmp_path / f"out{i}" for i in range(pairs)]
    wave = 16
    for start in range(0, pairs, wave):
        procs = []
        for d in dirs[start:start + wave]:
            for _ in range(2):
                procs.append((d, subprocess.Popen(argv(nicpick_bin, d), stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.PIPE, text=True)))
        for d, p in procs:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, f"{d}: exit {p.returncode}: {err}"
    for d in dirs:
        assert_one_set(d)


def test_a_reader_never_sees_a_mix(nicpick_bin, tmp_path):
    """While runs replace the set, a reader that resolves `current` once
    reads three files of one decision, and each documented path reads a
    whole file of some decision."""
    out = tmp_path / "out"
    assert run(nicpick_bin, out).returncode == 0
    stop = threading.Event()
    seen, bad = set(), []

    def reader():
        while not stop.is_set():
            try:
                target = os.path.join(out, os.readlink(out / "current"))
                got = ids([os.path.join(target, f) for f in OUT_FILES])
            except (FileNotFoundError, ValueError):
                continue  # the set was removed after a newer one came into force
            if None in got:
                continue  # removed between two reads: gone, not mixed
            if len(set(got)) != 1:
                bad.append(got)
            seen.add(got[0])
            for f in OUT_FILES:
                one = ids([out / g if g == f else "/nonexistent" for g in OUT_FILES])
                if not [i for i in one if i]:
                    bad.append((f, "no decision id: a partial file"))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(60):
            p = run(nicpick_bin, out)
            assert p.returncode == 0, p.stderr
    finally:
        stop.set()
        t.join()
    assert not bad, bad[:5]
    assert len(seen) > 1, "the reader saw only one decision: the test did not race"
    assert_one_set(out)


@pytest.mark.parametrize("point", POINTS)
def test_killed_at_any_point_leaves_the_old_set_or_the_new(nicpick_bin, tmp_path, point):
    if not hooks_built(nicpick_bin):
        pytest.fail(f"{nicpick_bin} has no test hooks: build with `make` (TEST_HOOKS=1)")
    out = tmp_path / "out"
    # A first decision in force, then a run killed at the point.
    assert run(nicpick_bin, out).returncode == 0
    old = assert_one_set(out)
    p = run(nicpick_bin, out, kill_at=point)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
    now = set_id(out)
    if point == "outputs-swapped":
        assert now and now != old, "the new set is in force once current was swapped"
    else:
        assert now == old, f"killed at {point}: the old set must stay in force"
    assert documented(out) == set(OUT_FILES)
    # The next run cleans up what the killed one left, and only that.
    assert run(nicpick_bin, out).returncode == 0
    assert assert_one_set(out) not in (old, now)


@pytest.mark.parametrize("point", POINTS)
def test_killed_at_any_point_on_a_fresh_dir_leaves_no_set_or_the_new(nicpick_bin, tmp_path,
                                                                    point):
    if not hooks_built(nicpick_bin):
        pytest.fail(f"{nicpick_bin} has no test hooks: build with `make` (TEST_HOOKS=1)")
    out = tmp_path / "out"
    p = run(nicpick_bin, out, kill_at=point)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
    if point == "outputs-swapped":
        assert set_id(out) and documented(out) == set(OUT_FILES)
    else:
        assert documented(out) == set(), "no set was in force: no documented path may read"
    assert run(nicpick_bin, out).returncode == 0
    assert_one_set(out)


def test_an_earlier_plain_layout_is_adopted(nicpick_bin, tmp_path):
    """A directory an earlier nicpick filled with plain files: the new set
    replaces them with the links, and a kill before the swap leaves the
    earlier files' contents readable at their paths."""
    out = tmp_path / "out"
    out.mkdir()
    for f, text in zip(OUT_FILES, ["# decision old\n", "# decision old\n",
                                   '{"decision_id": "old"}\n']):
        (out / f).write_text(text)
    if hooks_built(nicpick_bin):
        p = run(nicpick_bin, out, kill_at="outputs-linked")
        assert p.returncode == -signal.SIGKILL
        assert set_id(out) == "old"
    assert run(nicpick_bin, out).returncode == 0
    assert assert_one_set(out) != "old"


def run_with_lock_held(nicpick_bin, tmp_path, *extra):
    """nicpick while this test holds the out-dir's lock: (the run, seconds
    it took); the lock is never let go, and nothing may be written."""
    import fcntl
    import time
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".nicpick.lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        t0 = time.monotonic()
        p = subprocess.run(argv(nicpick_bin, out) + list(extra), capture_output=True, text=True,
                           timeout=30)
        took = time.monotonic() - t0
    assert p.returncode == 1, p.stderr
    assert documented(out) == set()
    return p, took


def test_a_held_lock_is_waited_for_then_refused(nicpick_bin, tmp_path):
    """A writer that never lets go of the lock (here: this test) is waited
    for a bounded time, then refused with a line that names the lock."""
    p, took = run_with_lock_held(nicpick_bin, tmp_path)
    assert ".nicpick.lock" in p.stderr and "another nicpick" in p.stderr, p.stderr
    assert 9 < took < 15, took


def test_a_held_lock_is_waited_for_no_longer_than_timeout(nicpick_bin, tmp_path):
    """--timeout bounds every step, the wait for the lock too."""
    p, took = run_with_lock_held(nicpick_bin, tmp_path, "--timeout", "2")
    assert "another nicpick holds" in p.stderr and "the deadline came first" in p.stderr, p.stderr
    assert 1.5 < took < 5, took


def test_a_lock_file_another_user_made_does_not_refuse_the_run(nicpick_bin, tmp_path):
    """Training images run as another user than an earlier root run: the
    lock file that run left (0644) must not make the next one fail."""
    import shutil
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run nicpick as another user")
    import tempfile
    base = pathlib.Path(tempfile.mkdtemp(prefix="nicpick-lock-"))  # tmp_path is root's 0700
    try:
        os.chmod(base, 0o755)
        out = base / "out"
        out.mkdir()
        os.chmod(out, 0o777)
        (out / ".nicpick.lock").touch(mode=0o644)
        binary = base / "nicpick"
        shutil.copy(nicpick_bin, binary)
        snap = base / "snapshot"
        shutil.copy(SNAPSHOT, snap)
        cmd = argv(str(binary), out)
        cmd[cmd.index(str(SNAPSHOT))] = str(snap)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd,
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert len(documented(out)) == 3
    finally:
        shutil.rmtree(base)


@pytest.fixture
def small_disk(tmp_path):
    """make(inodes): a fresh tmpfs of that many inodes, a node's disk that
    fills up at a chosen step of the write (mounting needs root)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    mounted = []

    def make(inodes):
        d = tmp_path / f"disk{len(mounted)}"
        d.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"nr_inodes={inodes},size=1m", "np-full",
                        str(d)], check=True, capture_output=True, timeout=30)
        mounted.append(d)
        return d

    yield make
    for d in mounted:
        subprocess.run(["umount", str(d)], capture_output=True, timeout=30)


def tree(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def fill_at_every_step(nicpick_bin, small_disk, prepare):
    """Run on disks of 2, 3, ... inodes until one is large enough: every
    run before it failed at one more step of the write.  Returns
    [(stderr, tree before, tree after)] of the failed runs."""
    failed = []
    for inodes in range(2, 24):
        disk = small_disk(inodes)
        out = disk / "a" / "b"
        try:
            prepare(out)
        except OSError:
            continue  # the disk cannot even hold what the test puts there first
        before = tree(disk)
        p = run(nicpick_bin, out)
        if p.returncode == 0:
            return failed
        assert p.returncode == 1, p.stderr
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("nicpick: error:")]
        assert len(lines) == 1 and "No space left on device" in lines[0], p.stderr
        failed.append((lines[0], before, tree(disk)))
    pytest.fail("no disk of up to 23 inodes took the output set")


def assert_every_step_failed(failed):
    """The failures reached each kind of step: the lock, the set's
    directory, a file of it, a link to it, and `current`."""
    said = " ".join(e for e, _, _ in failed)
    for what in (".nicpick.lock", "cannot create directory", "/nccl.conf:", "/decision.json:",
                 "/current:"):
        assert what in said, f"no run failed at {what}: {said}"


def test_a_full_disk_leaves_no_out_dir_of_its_own(nicpick_bin, small_disk):
    """The out dir nicpick had to make (a/b), on a disk that fills up at
    any step of the write: the run exits 1 naming the path and ENOSPC,
    and takes back everything it made, the lock file and the links
    included, so the disk is as it was."""
    failed = fill_at_every_step(nicpick_bin, small_disk, lambda out: None)
    assert_every_step_failed(failed)
    for err, before, after in failed:
        assert after == before == [], f"{err}: left {after}"


def test_a_full_disk_leaves_an_empty_volume_empty(nicpick_bin, small_disk):
    """The out dir a pod's emptyDir gives it, empty: a failed write leaves
    it empty (no lock file, no links pointing nowhere)."""
    failed = fill_at_every_step(nicpick_bin, small_disk, lambda out: out.mkdir(parents=True))
    assert_every_step_failed(failed)
    for err, before, after in failed:
        assert after == before == ["a", "a/b"], f"{err}: left {after}"


def test_a_full_disk_leaves_the_set_in_force(nicpick_bin, small_disk):
    """A disk just large enough for one set: the next run fails, and the
    set in force, every file of the directory, stays as it was."""
    failed = fill_at_every_step(nicpick_bin, small_disk, lambda out: None)
    disk = small_disk(len(failed) + 2)  # the first count that took a set
    out = disk / "a" / "b"
    assert run(nicpick_bin, out).returncode == 0
    first, before = set_id(out), tree(disk)
    p = run(nicpick_bin, out)
    assert p.returncode == 1 and "No space left on device" in p.stderr, p.stderr
    assert set_id(out) == first
    assert tree(disk) == before
