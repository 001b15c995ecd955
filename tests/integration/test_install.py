"""`nicpick install DIR`: how a first init container hands nicpick (and the
smoke companion beside it) to the training image through a shared volume."""
import os
import shutil
import stat
import subprocess


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_install_copies_itself_executable_and_identical(nicpick_bin, tmp_path):
    alone = tmp_path / "alone"  # no companion beside it
    alone.mkdir()
    shutil.copy(nicpick_bin, alone / "nicpick")
    dest = tmp_path / "shared"
    dest.mkdir()
    p = run([str(alone / "nicpick"), "install", str(dest)])
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(dest)) == ["kubectl-nicpick", "nicpick"], \
        "no temporaries, no companion that was not there"
    st = (dest / "nicpick").stat()
    assert stat.S_IMODE(st.st_mode) == 0o755
    with open(nicpick_bin, "rb") as a, open(dest / "nicpick", "rb") as b:
        assert a.read() == b.read()
    assert f"installed {dest}/nicpick" in p.stderr
    v = run([str(dest / "nicpick"), "version"])
    assert v.returncode == 0 and v.stdout.startswith("nicpick ")
    # kubectl's plugin name: a relative link, so it survives the volume
    # being mounted elsewhere, and the same program under that name.
    assert os.readlink(dest / "kubectl-nicpick") == "nicpick"
    assert f"installed {dest}/kubectl-nicpick" in p.stderr
    h = run([str(dest / "kubectl-nicpick"), "--help"])
    assert h.returncode == 0 and "kubectl nicpick status JOB" in h.stdout
    u = run([str(dest / "kubectl-nicpick")])
    assert u.returncode == 2 and u.stderr.startswith("usage: kubectl nicpick status JOB"), u.stderr


def test_install_takes_the_smoke_companion_beside_it(nicpick_bin, tmp_path):
    # A release directory: nicpick and nicpick-smoke side by side, reached
    # through a symbolic link (the companion is found beside the real file).
    rel = tmp_path / "release"
    rel.mkdir()
    shutil.copy(nicpick_bin, rel / "nicpick")
    (rel / "nicpick-smoke").write_bytes(b"#!/bin/sh\necho smoke\n")
    (rel / "nicpick-smoke").chmod(0o700)
    os.symlink(rel / "nicpick", tmp_path / "link")
    dest = tmp_path / "shared"
    dest.mkdir()
    (dest / "nicpick-smoke").write_bytes(b"old")  # replaced, as a restart would
    p = run([str(tmp_path / "link"), "install", str(dest) + "/"])
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(dest)) == ["kubectl-nicpick", "nicpick", "nicpick-smoke"]
    assert (dest / "nicpick-smoke").read_bytes() == b"#!/bin/sh\necho smoke\n"
    assert stat.S_IMODE((dest / "nicpick-smoke").stat().st_mode) == 0o755
    assert run([str(dest / "nicpick-smoke")]).stdout == "smoke\n"


def test_install_into_a_missing_directory_is_a_usage_error(nicpick_bin, tmp_path):
    p = run([nicpick_bin, "install", str(tmp_path / "nope")])
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1
    assert f"install: directory {tmp_path}/nope: No such file or directory" in p.stderr
    assert not (tmp_path / "nope").exists(), "a mistyped mount path is not created"


def test_install_into_a_file_is_a_usage_error(nicpick_bin, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    p = run([nicpick_bin, "install", str(f)])
    assert p.returncode == 2
    assert "Not a directory" in p.stderr
    assert f.read_text() == "x"


def test_install_arguments(nicpick_bin, tmp_path):
    for argv, msg in (([], "DIR is required"), ([str(tmp_path), "x"], "expected one DIR"),
                      (["--force"], "takes no options")):
        p = run([nicpick_bin, "install", *argv])
        assert p.returncode == 2, argv
        assert msg in p.stderr


def test_install_that_cannot_write_leaves_the_directory_as_it_was(nicpick_bin, tmp_path):
    dest = tmp_path / "shared"
    (dest / "nicpick").mkdir(parents=True)  # in the way of the rename
    p = run([nicpick_bin, "install", str(dest)])
    assert p.returncode == 1
    assert f"cannot write {dest}/nicpick: Is a directory" in p.stderr
    assert os.listdir(dest) == ["nicpick"] and (dest / "nicpick").is_dir()
