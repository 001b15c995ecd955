"""deploy/krew/nicpick.yaml, checked as krew checks a plugin manifest
(sigs.k8s.io/krew internal/index/validation/validate.go, ValidatePlugin and
validatePlatform: apiVersion, kind, a safe name equal to the file's, a
one-line shortDescription, a semver version with its "v", and per platform
a uri, a 64-hex sha256, a bin, well-formed files and an os/arch selector),
plus what it must say about nicpick: this VERSION, the archive that
scripts/krew-archive.sh makes, a bin that is the plugin's name; and the
README's krew commands, run as written, give krew a manifest whose sha256
is the archive's."""
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import tarfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "krew" / "nicpick.yaml"
# krew's internal/installation/semver: a "v" and major.minor.patch
SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def manifest():
    return yaml.safe_load(MANIFEST.read_text())


def test_manifest_is_what_krew_validates():
    m = manifest()
    assert m["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert m["kind"] == "Plugin"
    name = m["metadata"]["name"]
    assert re.fullmatch(r"[\w-]+", name) and name == MANIFEST.stem == "nicpick"
    spec = m["spec"]
    assert spec["shortDescription"] and not re.search(r"[\r\n]", spec["shortDescription"])
    # krew-index's review asks for a short one (the `krew search` column)
    assert len(spec["shortDescription"]) <= 50, spec["shortDescription"]
    assert SEMVER.match(spec["version"]), spec["version"]
    assert spec["homepage"].startswith("https://")
    assert spec["platforms"], "should have a platform specified"
    for pl in spec["platforms"]:
        assert pl["uri"].startswith("https://") and pl["uri"].endswith(".tar.gz"), pl
        assert re.fullmatch(r"[a-f0-9]{64}", pl["sha256"]), pl
        assert pl["bin"], pl
        files = pl.get("files")
        assert files is None or (files and all(f.get("from") and f.get("to") for f in files)), pl
        sel = pl["selector"]
        labels = sel.get("matchLabels") or {}
        exprs = sel.get("matchExpressions") or []
        assert labels or exprs, "empty selector is not supported"
        assert set(labels) | {e["key"] for e in exprs} <= {"os", "arch"}, sel


def test_manifest_names_this_release_and_the_static_binary():
    spec = manifest()["spec"]
    version = (ROOT / "VERSION").read_text().strip()
    assert spec["version"] == f"v{version}"
    # the static binary is x86-64 Linux (make static): that one platform
    assert [pl["selector"]["matchLabels"] for pl in spec["platforms"]] == \
        [{"os": "linux", "arch": "amd64"}]
    pl = spec["platforms"][0]
    assert pl["bin"] == "kubectl-nicpick"
    assert pl["uri"].endswith(f"/v{version}/kubectl-nicpick_v{version}_linux_amd64.tar.gz"), pl["uri"]
    assert [f["from"] for f in pl["files"]] == ["kubectl-nicpick"]
    assert "kubectl nicpick status JOB" in spec["caveats"]
    assert "deploy/rbac-status.yaml" in spec["caveats"]


def test_archive_script_makes_the_uris_file_and_fills_the_sha256(tmp_path, nicpick_bin):
    m = tmp_path / "nicpick.yaml"
    m.write_text(MANIFEST.read_text())
    p = subprocess.run([str(ROOT / "scripts" / "krew-archive.sh"), "--manifest", str(m), nicpick_bin,
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    archive, digest = p.stdout.split()
    archive = pathlib.Path(archive)
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest
    pl = yaml.safe_load(m.read_text())["spec"]["platforms"][0]
    assert pl["sha256"] == digest and pl["uri"].endswith("/" + archive.name)
    with tarfile.open(archive) as t:
        members = t.getmembers()
        assert [x.name for x in members] == ["kubectl-nicpick"]
        assert members[0].mode == 0o755 and members[0].uid == 0 and members[0].mtime == 0
        assert t.extractfile(members[0]).read() == pathlib.Path(nicpick_bin).read_bytes()
    # reproducible: the same binary, the same archive
    q = subprocess.run([str(ROOT / "scripts" / "krew-archive.sh"), nicpick_bin, str(tmp_path / "again")],
                       capture_output=True, text=True, timeout=60)
    assert q.returncode == 0 and q.stdout.split()[1] == digest, q.stderr


def readme_krew_block():
    """README's sh block that installs the plugin with krew, its lines with
    continuations joined."""
    readme = (ROOT / "README.md").read_text()
    (block,) = [b for b in re.findall(r"^```sh\n(.*?)^```$", readme, re.M | re.S)
                if "kubectl krew install" in b]
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def krew_installs(manifest, archive, dest):
    """What `kubectl krew install --manifest=M --archive=A` does on linux/amd64
    (sigs.k8s.io/krew internal/installation: the platform whose selector
    matches, the archive's sha256 checked against the manifest's, the files
    moved, the bin linked): the installed bin's path, or an AssertionError."""
    m = yaml.safe_load(manifest.read_text())
    (pl,) = [pl for pl in m["spec"]["platforms"]
             if pl["selector"].get("matchLabels") == {"os": "linux", "arch": "amd64"}]
    got = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert got == pl["sha256"], f"checksum does not match: manifest {pl['sha256']}, archive {got}"
    extract, plugin = dest / "extract", dest / "plugin"
    plugin.mkdir(parents=True)
    with tarfile.open(archive) as t:
        for member in t.getmembers():
            assert member.isfile() and "/" not in member.name and member.name != "..", member.name
        t.extractall(extract)
    for f in pl["files"]:
        found = sorted(extract.glob(f["from"]))
        assert found, f"no file in the archive matches {f['from']}"
        for src in found:
            shutil.copy2(src, plugin / src.name if f["to"] == "." else plugin / f["to"])
    bin_path = dest / "plugin" / pl["bin"]
    assert os.access(bin_path, os.X_OK), bin_path
    return bin_path


def test_readme_krew_commands_install_the_plugin(tmp_path, nicpick_bin):
    """The README's commands, run as written on a copy of the tree with this
    build as build/static/nicpick, give krew a manifest and an archive that
    it installs: the sha256 matches, the plugin is this nicpick."""
    lines = readme_krew_block()
    assert lines[0] == "make static"
    (install,) = [x for x in lines if x.startswith("kubectl krew install")]
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "krew-archive.sh", tree / "scripts")
    shutil.copytree(ROOT / "deploy" / "krew", tree / "deploy" / "krew")
    shutil.copy2(ROOT / "VERSION", tree)
    (tree / "build" / "static").mkdir(parents=True)
    shutil.copy2(nicpick_bin, tree / "build" / "static" / "nicpick")
    steps = [x for x in lines if x not in ("make static", install)]
    p = subprocess.run(["sh", "-euc", "\n".join(steps)], cwd=tree, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    manifest = re.search(r"--manifest=(\S+)", install).group(1)
    archive = re.search(r"--archive=(\S+)", install).group(1)
    assert (tree / "deploy" / "krew" / "nicpick.yaml").read_text() == MANIFEST.read_text()
    installed = krew_installs(tree / manifest, tree / archive, tmp_path / "krew")
    assert installed.read_bytes() == pathlib.Path(nicpick_bin).read_bytes()


def test_krew_refuses_the_manifest_as_shipped(tmp_path, nicpick_bin):
    """deploy/krew/nicpick.yaml's sha256 is the release's, not a local
    build's: krew would refuse it beside a local archive."""
    p = subprocess.run([str(ROOT / "scripts" / "krew-archive.sh"), nicpick_bin, str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    archive = pathlib.Path(p.stdout.split()[0])
    with pytest.raises(AssertionError, match="checksum does not match"):
        krew_installs(MANIFEST, archive, tmp_path / "krew")
