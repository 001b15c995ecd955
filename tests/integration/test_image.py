"""The release image, built for real (`make image`: buildah, FROM scratch,
Dockerfile.release) and run with podman and runc in a network namespace
against the test API server, as a pod's init container runs it: non-root,
every capability dropped, read-only root, the kubelet's /etc/hosts and
/etc/resolv.conf."""
import io
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

import cluster as C
import podnet

ROOT = C.ROOT
STATIC = ROOT / "build" / "static" / "nicpick"
IMAGE_DIR = ROOT / "build" / "image"
ARCHIVE = IMAGE_DIR / "test-image.tar"  # `make image` writes nicpick-image.tar
VERSION = (ROOT / "VERSION").read_text().strip()
TAG = f"nicpick-test:{VERSION}"
SIZE_GOAL = 10 << 20


def require(cond, msg):
    if not cond:
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def image():
    """Build the image from build/static and return its OCI archive."""
    if os.geteuid() != 0:
        pytest.skip("buildah and podman with vfs storage need root here")
    for tool in ("buildah", "podman", "runc"):
        require(shutil.which(tool), f"{tool} is not installed: run scripts/install-deps.sh")
    require(STATIC.is_file(), f"{STATIC} not found: run `make static`")
    p = subprocess.run(["scripts/image.sh", TAG, VERSION, "test", str(ARCHIVE)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return ARCHIVE


def podman_env():
    env, opts = dict(os.environ), {}
    for line in (IMAGE_DIR / "env").read_text().splitlines():
        m = re.match(r"(?:export )?(\w+)='?(.*?)'?$", line)
        if m:
            opts[m.group(1)] = m.group(2)
    env["CONTAINERS_CONF"] = opts["CONTAINERS_CONF"]
    return env, opts["PODMAN_OPTS"].split()


def read_archive(path):
    with tarfile.open(path) as t:
        blob = lambda d: t.extractfile("blobs/" + d.replace(":", "/")).read()  # noqa: E731
        index = json.loads(t.extractfile("index.json").read())
        manifest = json.loads(blob(index["manifests"][0]["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        files, size = {}, 0
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=io.BytesIO(blob(layer["digest"]))) as lt:
                for m in lt.getmembers():
                    files[m.name] = m
                    size += m.size
        return config, files, index


def test_release_image_is_the_static_binary_alone(image):
    config, files, index = read_archive(image)
    c = config["config"]
    assert c["User"] == "65534:65534"
    assert c["Entrypoint"] == ["/usr/local/bin/nicpick"]
    labels = c["Labels"]
    assert labels["org.opencontainers.image.title"] == "nicpick"
    assert labels["org.opencontainers.image.description"]
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.revision"] == "test"
    regular = sorted(n for n, m in files.items() if m.isfile())
    want = ["usr/local/bin/nicpick"]
    if (ROOT / "build" / "static" / "nicpick-smoke").is_file():
        want.append("usr/local/bin/nicpick-smoke")
    assert regular == want
    with open(STATIC, "rb") as f:
        assert files["usr/local/bin/nicpick"].size == len(f.read())
    assert files["usr/local/bin/nicpick"].mode & 0o777 == 0o755
    # kubectl's plugin name, a link (no second copy of the binary)
    link = files["usr/local/bin/kubectl-nicpick"]
    assert link.issym() and link.linkname == "nicpick", link
    # The uncompressed layer size is the image's size.
    size = sum(m.size for m in files.values())
    assert size <= SIZE_GOAL, f"{size} bytes, over the {SIZE_GOAL} byte goal"
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == TAG


def release_stage(text, *drop):
    """The release stage's instructions, the COPY source made comparable."""
    stage = text.split("FROM scratch AS release", 1)[1].split("\nFROM ", 1)[0]
    lines = [l.strip() for l in stage.replace("\\\n", " ").splitlines()
             if l.strip() and not l.lstrip().startswith("#")]
    lines = [re.sub(r"^ARG (\w+)=.*", r"ARG \1", l) for l in lines]
    for d in drop:
        lines = [l.replace(d, "") for l in lines]
    return lines


def test_dockerfile_release_stage_is_dockerfile_release():
    full = release_stage((ROOT / "Dockerfile").read_text(), "--from=build ", "/src/")
    alone = release_stage((ROOT / "Dockerfile.release").read_text())
    assert [re.sub(r"\s+", " ", l) for l in full] == [re.sub(r"\s+", " ", l) for l in alone]
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert "tests" in ignore and "build" in ignore and "!build/static/nicpick" in ignore


@pytest.fixture
def net(netns, tmp_path):
    n = podnet.PodNet(netns, tmp_path).start()
    yield n
    n.close()


def podman_run(net, tmp_path, *args, mounts=(), timeout=120):
    env, opts = podman_env()
    argv = ["podman", *opts, "run", "--rm", "--network", f"ns:/run/netns/{net.node.name}",
            "--cap-drop", "all", "--security-opt", "no-new-privileges", "--read-only",
            "--add-host", f"{podnet.API_HOST}:{podnet.API_ADDR}", "--dns", podnet.DNS_ADDR,
            "--dns-search", f"{podnet.NAMESPACE}.svc.cluster.local",
            "--dns-option", "ndots:5", "--hostname", podnet.POD]
    for src, dst, mode in mounts:
        argv += ["-v", f"{src}:{dst}:{mode}"]
    return subprocess.run([*argv, TAG, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_release_image_runs_in_a_pod_network(image, net, tmp_path):
    sa = tmp_path / "sa"
    sa.mkdir()
    shutil.copy(net.ca_path, sa / "ca.crt")
    shutil.copy(net.token_path, sa / "token")
    for f in sa.iterdir():
        f.chmod(0o644)
    shared = tmp_path / "shared"  # an emptyDir: world-writable
    shared.mkdir()
    shared.chmod(0o777)
    sa_mount = (sa, "/" + podnet.SA_DIR, "ro")
    shared_mount = (shared, "/nicpick", "rw")

    p = podman_run(net, tmp_path, "discover")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^eth0 .*10\.78\.0\.2/24.*usable", p.stdout, re.M), p.stdout

    # The default --smoke auto: the companion beside nicpick needs glibc,
    # which a scratch image lacks, so the smoke step is skipped, not failed.
    p = podman_run(net, tmp_path, *net.select_args(smoke=None), "--timeout", "30",
                   mounts=(sa_mount, shared_mount))
    assert p.returncode == 0, p.stderr
    smoke = json.loads((shared / "decision.json").read_text())["smoke"]
    assert smoke["status"] == "skipped", smoke
    if (STATIC.parent / "nicpick-smoke").is_file():
        assert "it needs glibc" in smoke["reason"], smoke
    env = (shared / "nccl.env").read_text()
    assert "NCCL_SOCKET_IFNAME='=eth0'" in env, env
    assert os.stat(shared / "nccl.env").st_uid == 65534
    assert "eth0" in (net.result_annotation() or "")

    # The first init container's job: hand nicpick to the training image.
    p = podman_run(net, tmp_path, "install", "/nicpick", mounts=(shared_mount,))
    assert p.returncode == 0, p.stderr
    for name in ("nicpick", "nicpick-smoke"):
        src = STATIC.parent / name
        if name == "nicpick" or src.is_file():
            assert (shared / name).read_bytes() == src.read_bytes(), name
            assert f"installed /nicpick/{name}" in p.stderr
