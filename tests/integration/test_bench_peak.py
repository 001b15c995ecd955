"""build/bench-peak (bench/peak.c), the launcher bench/gather and bench/bounds
start nicpick with: the peak RSS it reports is the program's own, not the
memory of the process that started it, which wait4(2) of a direct child
counts (Linux's exec records the replaced memory's high-water mark in the
process's maxrss: fs/exec.c, exec_mmap, setmax_mm_hiwater_rss)."""
import os
import pathlib
import signal
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MIB = 1024


@pytest.fixture(scope="module")
def peak_bin():
    path = os.environ.get("NICPICK_BENCH_PEAK") or str(ROOT / "build" / "bench-peak")
    if not os.access(path, os.X_OK):
        if os.environ.get("NICPICK_BENCH_PEAK"):
            pytest.fail(f"NICPICK_BENCH_PEAK={path} is not an executable file")
        pytest.skip(f"{path} not built: run `make integration`")
    return path


# Runs in a child of pytest that first grows to 256 MiB, so that what it
# starts is forked from a large process, as bench/gather's gatherer is.
GROWN = r"""
import os, sys
big = bytearray(256 << 20)
for i in range(0, len(big), 4096):
    big[i] = 1
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    os.dup2(w, 3)
    os.execv(sys.argv[1], sys.argv[1:])
os.close(w)
_, status, ru = os.wait4(pid, 0)
line = os.read(r, 200).decode().strip()
print(ru.ru_maxrss, os.waitstatus_to_exitcode(status), line)
"""


def grown(*argv):
    """(wait4's maxrss KiB of the direct child, its exit code, bench-peak's line)."""
    p = subprocess.run([sys.executable, "-c", GROWN, *argv], capture_output=True, text=True,
                       timeout=60, check=True)
    direct, code, *line = p.stdout.split()
    return int(direct), int(code), line


def test_the_peak_is_the_programs_own_not_its_starters(peak_bin):
    direct, code, line = grown(peak_bin, "3", "/bin/true")
    assert code == 0
    # what a direct child of the 256 MiB process reports: the parent's memory
    assert direct >= 256 * MIB
    kib, user, sys_s = int(line[0]), float(line[1]), float(line[2])
    assert 0 < kib < 16 * MIB, line
    assert 0 <= user < 1 and 0 <= sys_s < 1


def test_a_program_that_grows_is_measured_at_its_peak(peak_bin):
    _, code, line = grown(peak_bin, "3", sys.executable, "-c",
                          "b = bytearray(96 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1")
    assert code == 0
    assert 96 * MIB <= int(line[0]) < 160 * MIB, line
    assert float(line[1]) + float(line[2]) > 0


def test_exit_status_and_signals_are_passed_through(peak_bin, tmp_path):
    _, code, line = grown(peak_bin, "3", "/bin/sh", "-c", "exit 7")
    assert code == 7 and line
    # SIGTERM to the launcher ends the program, and the launcher says so
    ready = tmp_path / "ready"
    r, w = os.pipe()
    p = subprocess.Popen([peak_bin, str(w), "/bin/sh", "-c", f"touch {ready}; exec sleep 30"],
                         pass_fds=(w,))
    os.close(w)
    try:
        for _ in range(500):
            if ready.exists():
                break
            subprocess.run(["sleep", "0.01"])
        assert ready.exists()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 128 + signal.SIGTERM
        assert os.read(r, 200).split()
    finally:
        p.kill()
        os.close(r)


def test_a_bad_call_is_refused(peak_bin):
    p = subprocess.run([peak_bin, "x", "/bin/true"], capture_output=True, text=True)
    assert p.returncode == 2 and "usage: bench-peak FD PROGRAM" in p.stderr
    r, w = os.pipe()
    p = subprocess.run([peak_bin, str(w), "/nonexistent/program"], capture_output=True,
                       text=True, pass_fds=(w,))
    os.close(w)
    assert p.returncode == 127 and "/nonexistent/program" in p.stderr
    os.close(r)
