"""Fixtures for the kubeapi fidelity tests: servers, an HTTP client, kubectl."""

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from apiclient import Api  # noqa: E402

from tools import kubeapi  # noqa: E402

# scripts/fetch-k8s-tools.sh installs into $NICPICK_TOOLS_DIR (default build/tools).
KUBECTL = os.path.join(os.environ.get("NICPICK_TOOLS_DIR") or os.path.join(ROOT, "build", "tools"),
                       "kubectl")
FETCH = os.path.join(ROOT, "scripts", "fetch-k8s-tools.sh")


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """One CA and server certificate for the whole session (copied into each state dir)."""
    d = str(tmp_path_factory.mktemp("certs"))
    kubeapi.ensure_certs(d, [])
    return d


@pytest.fixture
def make_server(certs, tmp_path):
    """Factory: make_server(**kw) starts a Server (in-process unless subprocess=True);
    every server is stopped when the test ends."""
    servers = []

    def make(**kw):
        state = tmp_path / f"state{len(servers)}"
        state.mkdir()
        for n in ("ca.crt", "ca.key", "server.crt", "server.key", "sans"):
            shutil.copy(os.path.join(certs, n), state / n)
        kw.setdefault("bookmark_interval", 0.3)
        s = kubeapi.Server(str(state), **kw)
        servers.append(s)
        return s.start()

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def server(make_server):
    return make_server()


@pytest.fixture
def api(server):
    return Api(server)


@pytest.fixture(scope="session")
def kubectl():
    """The real kubectl, fetched by scripts/fetch-k8s-tools.sh when missing; the kubectl
    tests skip (with the reason) when it cannot be had."""
    def works():
        return os.access(KUBECTL, os.X_OK) and subprocess.run(
            [KUBECTL, "version", "--client"], capture_output=True).returncode == 0
    if not works():
        try:
            r = subprocess.run(["bash", FETCH], capture_output=True, text=True, timeout=600,
                               stdin=subprocess.DEVNULL)
            why = (r.stderr or r.stdout).strip()[-500:]
        except subprocess.TimeoutExpired:
            why = "fetch-k8s-tools.sh timed out"
        if not works():
            msg = f"kubectl unavailable (scripts/fetch-k8s-tools.sh failed): {why}"
            print(msg, file=sys.stderr)
            pytest.skip(msg)
    return KUBECTL


@pytest.fixture
def kc(kubectl, server, tmp_path):
    """kc(*args, kubeconfig=None, timeout=30) runs kubectl against the server."""
    cache = tmp_path / "kcache"

    def run(*args, kubeconfig=None, timeout=30, check=False):
        env = dict(os.environ, HOME=str(tmp_path), KUBECONFIG=kubeconfig or server.kubeconfig_path)
        r = subprocess.run([kubectl, "--cache-dir", str(cache), *args], capture_output=True,
                           text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
        if check:
            assert r.returncode == 0, r.stderr
        return r
    run.cache = str(cache)
    run.env = dict(os.environ, HOME=str(tmp_path), KUBECONFIG=server.kubeconfig_path)
    return run
