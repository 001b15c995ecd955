"""Fixtures for the kubeapi fidelity tests: servers, an HTTP client, kubectl."""

import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import kubeapi  # noqa: E402

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


class Resp:
    def __init__(self, status, headers, raw):
        self.status, self.headers, self.raw = status, headers, raw
        try:
            self.body = json.loads(raw) if raw else None
        except ValueError:
            self.body = None

    def __repr__(self):
        return f"Resp({self.status}, {self.raw[:300]!r})"


class Api:
    """A bare HTTPS client that verifies the server against ca.crt."""

    def __init__(self, server, token=None, user_agent="kubeapi-tests"):
        self.s = server
        self.token = server.token if token is None else token
        self.ua = user_agent
        self.ctx = ssl.create_default_context(cafile=server.ca_path)

    def conn(self, timeout=10):
        return http.client.HTTPSConnection("127.0.0.1", self.s.port, context=self.ctx,
                                           timeout=timeout)

    def headers(self, extra=None):
        h = {"Accept": "application/json", "User-Agent": self.ua}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(extra or {})
        return h

    def req(self, method, path, body=None, ctype="application/json", headers=None, timeout=10):
        data = body if body is None or isinstance(body, (bytes, str)) else json.dumps(body)
        h = self.headers(headers)
        if data is not None:
            h["Content-Type"] = ctype
        c = self.conn(timeout)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return Resp(r.status, r.headers, r.read())
        finally:
            c.close()

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def watch(self, path, timeout=10):
        return Watch(self, path, timeout)


class Watch:
    def __init__(self, api, path, timeout):
        self.c = api.conn(timeout)
        self.c.request("GET", path, headers=api.headers())
        self.r = self.c.getresponse()
        self.status = self.r.status

    def next(self):
        """The next event, or None when the stream ended cleanly."""
        line = self.r.readline()
        return json.loads(line) if line.strip() else None

    def events(self, n=None):
        out = []
        while n is None or len(out) < n:
            e = self.next()
            if e is None:
                break
            out.append(e)
        return out

    def close(self):
        self.c.close()


@pytest.fixture
def api(server):
    return Api(server)


def pod(name, labels=None, annotations=None, phase=None, node=None, ns="default"):
    p = {"metadata": {"name": name, "namespace": ns, "labels": labels or {}},
         "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    if annotations:
        p["metadata"]["annotations"] = annotations
    if node:
        p["spec"]["nodeName"] = node
    if phase:
        p["status"] = {"phase": phase}
    return p


def wait_for(cond, timeout=10.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


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
