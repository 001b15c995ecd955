"""Server: the Python API tests and benchmarks use, in-process or as a child
process driven through the admin endpoint."""

import copy
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from .core import ApiServer
from .errors import ApiError
from .rbac import load_manifests
from .tls import kubeconfig_text
from .util import dumps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Server:
    """Test helper: runs the API server in a thread (default) or as a subprocess.

        s = Server(state_dir=tmp).start()        # or Server(..., subprocess=True)
        s.port, s.url, s.ca_path, s.token, s.admin_token, s.kubeconfig_path
        s.create_pod("ns", {...}); s.set_faults([...]); s.counters(); s.stop()
    """

    def __init__(self, state_dir=None, subprocess=False, max_lifetime=3600, python=None,
                 **kw):
        import tempfile
        self._tmp = None
        if state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kubeapi-")
            state_dir = self._tmp.name
        self.state_dir = os.path.abspath(state_dir)
        self.kw, self.use_subprocess, self.max_lifetime = kw, subprocess, max_lifetime
        self.python = python or sys.executable
        self.core = self.proc = None

    def start(self):
        if not self.use_subprocess:
            self.core = ApiServer(self.state_dir, **self.kw).start()
            self.openssl = ssl.OPENSSL_VERSION
            self._adopt(self.core.port, self.core.url)
            return self
        kw = self.kw
        args = [self.python, "-m", "tools.kubeapi", "--state-dir", self.state_dir,
                "--port", str(kw.get("port", 0)), "--listen", kw.get("listen", "127.0.0.1"),
                "--lifeline-stdin", "--max-lifetime", str(self.max_lifetime)]
        for k, flag in (("token", "--token"), ("user", "--user"), ("admin_token", "--admin-token"),
                        ("history", "--history"), ("bookmark_interval", "--bookmark-interval"),
                        ("watch_timeout", "--watch-timeout"), ("namespace", "--namespace"),
                        ("authorization", "--authorization-mode"),
                        ("compact_interval", "--compact-interval"),
                        ("history_seconds", "--history-seconds")):
            if kw.get(k) is not None:
                args += [flag, str(kw[k])]
        for k, flag in (("anonymous_auth", "--anonymous-auth"),
                        ("graceful_delete", "--graceful-delete"),
                        ("realistic_pods", "--realistic-pods"),
                        ("managed_fields_opt_out", "--managed-fields-opt-out")):
            if kw.get(k):
                args.append(flag)
        if kw.get("event_namespace_rule") is False:
            args.append("--no-event-namespace-rule")
        if kw.get("http2") is False:
            args.append("--no-http2")
        for s in kw.get("sans") or ():
            args += ["--san", s]
        for f in kw.get("faults") or ():
            args += ["--fault", json.dumps(f)]
        for k, flag in (("rbac", "--rbac"), ("tokens", "--tokens"), ("seed", "--seed-json")):
            if kw.get(k):
                args += [flag, json.dumps(kw[k])]
        if kw.get("verbose"):
            args.append("--verbose")
        self._log = open(os.path.join(self.state_dir, "server.log"), "ab")
        # The child imports this package from the repository root, wherever it runs.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        # KUBEAPI_LIBSSL_DIR: a folder with libssl.so.3 and libcrypto.so.3
        # that the server's Python loads instead of the system's (same
        # soname, same ABI).  With OpenSSL 3.5 the server negotiates
        # X25519MLKEM768, as kube-apiserver does since Go 1.24 made it the
        # first of crypto/tls's default curve preferences
        # (scripts/bench-openssl.sh builds one; bench/README.md).
        libssl = os.environ.get("KUBEAPI_LIBSSL_DIR")
        if libssl:
            env["LD_LIBRARY_PATH"] = libssl
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, env=env)
        deadline = time.monotonic() + 30
        line = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line or line.startswith(b"READY "):
                break
        if not line.startswith(b"READY "):
            self.stop()
            raise RuntimeError(f"kubeapi subprocess did not start; see {self._log.name}")
        info = json.load(open(os.path.join(self.state_dir, "ready")))
        self.openssl = info.get("openssl", "")
        self._adopt(info["port"], info["url"])
        return self

    def _adopt(self, port, url):
        self.port, self.url = port, url
        p = lambda n: os.path.join(self.state_dir, n)   # noqa: E731
        self.ca_path, self.kubeconfig_path = p("ca.crt"), p("kubeconfig")
        self.token = open(p("token")).read().strip()
        self.admin_token = open(p("admin-token")).read().strip()
        self.ssl_context = ssl.create_default_context(cafile=self.ca_path)

    def stop(self):
        if self.core is not None:
            self.core.stop()
            self.core = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                f.close()
            self._log.close()
            self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def admin(self, op, payload=None, method=None, **query):
        method = method or ("POST" if payload is not None else "GET")
        if self.core is not None:
            return json.loads(dumps(self.core.admin(method, op, payload or {},
                                                    {k: str(v) for k, v in query.items()})))
        url = f"{self.url}/_admin/{op}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        req = urllib.request.Request(url, method=method,
                                     data=json.dumps(payload).encode() if payload else None,
                                     headers={"Authorization": f"Bearer {self.admin_token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ssl_context, timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:     # same exception as in-process mode
            st = json.load(e)
            raise ApiError(st.get("code", e.code), st.get("message", ""), st.get("reason"),
                           st.get("details")) from None

    # convenience wrappers
    def create_pod(self, namespace, obj):
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["namespace"] = namespace
        obj.setdefault("spec", {}).setdefault("containers", [{"name": "main", "image": "busybox"}])
        return self.admin("seed", {"pods": [obj]})["items"][0]

    def seed(self, spec):
        return self.admin("seed", spec)["items"]

    def apply_manifests(self, path, namespace=None):
        """Store the objects of a YAML file (e.g. deploy/rbac.yaml) as `kubectl apply -n
        NAMESPACE -f PATH` would; namespaced objects without a namespace go to namespace
        (default: the server's). Needs PyYAML."""
        objs = load_manifests(path)
        if namespace:
            for o in objs:
                o.setdefault("metadata", {}).setdefault("namespace", namespace)
        return self.seed({"objects": objs})

    def patch_object(self, namespace, name, patch, resource="pods", group=""):
        return self.admin("objects", {"op": "patch", "resource": resource, "group": group,
                                      "namespace": namespace, "name": name, "patch": patch})

    def get_object(self, namespace, name, resource="pods", group=""):
        return self.admin("objects", {"op": "get", "resource": resource, "group": group,
                                      "namespace": namespace, "name": name})

    def delete_object(self, namespace, name, resource="pods", group="", graceful=False,
                      grace_period=None):
        """Immediate by default; graceful=True deletes a pod as kube-apiserver does
        (deletionTimestamp, removed after the grace period; see README)."""
        req = {"op": "delete", "resource": resource, "group": group, "namespace": namespace,
               "name": name}
        if graceful:
            req["graceful"] = True
        if grace_period is not None:
            req["gracePeriodSeconds"] = int(grace_period)
        return self.admin("objects", req)

    def set_faults(self, faults, replace=True):
        return self.admin("faults", {"faults": list(faults), "replace": replace})["faults"]

    def add_fault(self, **fault):
        return self.set_faults([fault], replace=False)

    def clear_faults(self):
        return self.admin("faults", method="DELETE")

    def faults(self):
        return self.admin("faults")["faults"]

    def set_rbac(self, deny=None, allow=None):
        return self.admin("rbac", {"deny": deny or [], "allow": allow})

    def set_tokens(self, tokens, replace=False, remove=(), write_token=None):
        p = {"tokens": tokens, "replace": replace, "remove": list(remove)}
        if write_token:
            p["write_token"] = write_token
            self.token = write_token
        return self.admin("tokens", p)["tokens"]

    def counters(self, reset=False):
        return self.admin("counters", reset="1") if reset else self.admin("counters")

    def reset_counters(self):
        return self.admin("counters/reset", {})

    def requests(self, clear=False):
        return self.admin("requests", clear="1")["requests"] if clear else \
            self.admin("requests")["requests"]

    def compact(self, history=None, resource_version=None):
        """Drop the watch history (up to resource_version, default all of it)."""
        p = {"history": history} if history else {}
        if resource_version is not None:
            p["resourceVersion"] = str(resource_version)
        return self.admin("compact", p)

    def state(self):
        return self.admin("state")

    def configure(self, **cfg):
        return self.admin("config", cfg)

    def write_kubeconfig(self, path, token=None, namespace=None):
        """Write a kubeconfig for this server with another token (e.g. a wrong one)."""
        with open(path, "w") as f:
            f.write(kubeconfig_text(self.url, self.ca_path, token or self.token,
                                    namespace or self.kw.get("namespace") or "default"))
        return path
