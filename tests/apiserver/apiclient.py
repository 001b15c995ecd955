"""HTTP helpers for the test API server's own tests: a small client that
verifies TLS against the server's CA, a watch reader, and pod factories.
A module of its own (not conftest) so that test files can import it by a
name no other test directory uses."""


import http.client
import json
import os
import ssl
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The server on its own, as a user starts it from the repository root.
KUBEAPI = [sys.executable, "-m", "tools.kubeapi"]


def kubeapi_env():
    return dict(os.environ, PYTHONPATH=ROOT)


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
