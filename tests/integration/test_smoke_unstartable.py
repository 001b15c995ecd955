"""A smoke companion that is there but cannot start, as nicpick-smoke (it
needs glibc's loader) beside the static nicpick in the scratch release
image: --smoke auto skips and says why, --smoke required fails with 6."""
import json
import os


def unstartable(tmp_path):
    """An executable whose interpreter does not exist: execve says ENOENT,
    exactly as for an ELF whose ld-linux is missing."""
    f = tmp_path / "bin" / "nicpick-smoke"
    f.parent.mkdir()
    f.write_text("#!/nonexistent/ld-linux-x86-64.so.2\n")
    f.chmod(0o755)
    return f


def test_auto_skips_a_companion_that_cannot_start(nicpick_bin, node, out_dir, tmp_path):
    env = dict(os.environ, NICPICK_SMOKE_BIN=str(unstartable(tmp_path)))
    p = node.exec([nicpick_bin, "select", "--peers", "none", "--out-dir", str(out_dir),
                   "--smoke", "auto"], env=env)
    assert p.returncode == 0, p.stderr
    smoke = json.loads((out_dir / "decision.json").read_text())["smoke"]
    assert smoke["status"] == "skipped", smoke
    assert "No such file or directory (it needs glibc" in smoke["reason"], smoke
    assert "smoke all-reduce skipped" in p.stderr
    assert not [n for n in os.listdir(out_dir) if n.startswith(".nicpick-smoke")]


def test_required_fails_on_a_companion_that_cannot_start(nicpick_bin, node, out_dir, tmp_path):
    env = dict(os.environ, NICPICK_SMOKE_BIN=str(unstartable(tmp_path)))
    p = node.exec([nicpick_bin, "select", "--peers", "none", "--out-dir", str(out_dir),
                   "--smoke", "required"], env=env)
    assert p.returncode == 6, p.stderr
    assert "cannot run" in p.stderr.strip().splitlines()[-1]
    assert os.listdir(out_dir) == [], "a failed run leaves no outputs"
