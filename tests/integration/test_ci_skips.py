"""Under CI=true no test may skip silently: tests/conftest.py turns a skip into
a failure, unless the skip says the test does not apply ("not applicable")."""
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_suite(tmp_path, body, ci):
    d = tmp_path / "suite"
    d.mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", d / "conftest.py")
    (d / "test_one.py").write_text("import pytest\n\n\ndef test_it():\n    " + body + "\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-c", os.devnull, "--rootdir", str(d), str(d)],
                       capture_output=True, text=True, env=env, timeout=60)
    return r.returncode, r.stdout + r.stderr


def test_a_missing_prerequisite_skips_on_a_developer_machine(tmp_path):
    rc, out = run_suite(tmp_path, 'pytest.skip("kubectl unavailable")', ci=False)
    assert rc == 0 and "1 skipped" in out, out


def test_a_missing_prerequisite_fails_under_ci(tmp_path):
    rc, out = run_suite(tmp_path, 'pytest.skip("kubectl unavailable")', ci=True)
    assert rc == 1 and "1 failed" in out, out
    assert "CI=true, so a missing prerequisite fails the run: kubectl unavailable" in out, out


def test_a_skip_that_does_not_apply_still_skips_under_ci(tmp_path):
    rc, out = run_suite(tmp_path, 'pytest.skip("not applicable: an ASan build")', ci=True)
    assert rc == 0 and "1 skipped" in out, out
