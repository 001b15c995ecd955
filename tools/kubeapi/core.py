"""The server core: lifecycle, state files, counters, request routing, discovery
and rendering. Reads and writes, watches, authorization and the admin endpoint
are mixins of their own modules."""

import collections
import copy
import json
import os
import re
import secrets
import socket
import ssl
import threading
import time
import uuid

from .admin import AdminMixin
from .crud import CrudMixin
from .errors import ApiError, forbidden
from .faults import FaultSet
from .httpd import Handler, HTTPServer
from .patches import PATCH_TYPES
from .rbac import RbacMixin
from .resources import BY_PATH, GROUP_VERSIONS, RESOURCES, SERVER_VERSION
from .store import Store
from .tables import TABLES, partial_meta, to_table, without_managed_fields
from .tls import ensure_certs, go_tls13_order, kubeconfig_text
from .util import now_rfc3339, parse_bool
from .watch import WatchMixin


# The fidelity options (README "Fidelity options") and their defaults.
FIDELITY_OPTIONS = {"anonymous_auth": False, "graceful_delete": False, "history_seconds": 75.0,
                    "realistic_pods": False, "event_namespace_rule": True,
                    "bookmark_interval": 60.0, "http2": True, "managed_fields_opt_out": False}


class ApiServer(CrudMixin, WatchMixin, RbacMixin, AdminMixin):
    def __init__(self, state_dir, listen="127.0.0.1", port=0, sans=(), token=None,
                 user="system:serviceaccount:default:default", tokens=None, admin_token=None,
                 history=5000, bookmark_interval=None, watch_timeout=1800.0, faults=None,
                 rbac=None, seed=None, verbose=False, log_size=10000, namespace="default",
                 authorization=None, compact_interval=0.0, anonymous_auth=None,
                 graceful_delete=None, history_seconds=None, realistic_pods=None,
                 event_namespace_rule=None, http2=None, managed_fields_opt_out=None):
        self.state_dir = os.path.abspath(state_dir)
        os.makedirs(self.state_dir, exist_ok=True)
        self.listen, self.req_port, self.sans = listen, port, list(sans)
        self.verbose, self.namespace = verbose, namespace
        self.token = token or secrets.token_urlsafe(32)
        self.admin_token = admin_token or secrets.token_urlsafe(32)
        self.tokens_lock = threading.Lock()
        self.tokens = {self.token: user}
        self.tokens.update(tokens or {})
        self.store = Store(history)
        self.watch_timeout = watch_timeout
        self.faults = FaultSet()
        self.faults.set(faults or [])
        self.rbac = {"deny": [], "allow": None}
        self.authorization = self.check_mode(authorization)
        self.compact_interval = float(compact_interval or 0)
        # Fidelity options (README "Fidelity options"): each is a real kube-apiserver
        # behaviour that today's nicpick does not yet handle everywhere.
        # An option left unset takes its value from $KUBEAPI_FIDELITY (a JSON object,
        # e.g. {"graceful_delete": true}), so a whole test suite can run against the
        # real behaviours without editing its fixtures; else its default (off).
        env = json.loads(os.environ.get("KUBEAPI_FIDELITY") or "{}")
        unknown = set(env) - set(FIDELITY_OPTIONS)
        if unknown:
            raise ApiError(400, f"KUBEAPI_FIDELITY: unknown options {sorted(unknown)}")

        def opt(name, value):
            return env.get(name, FIDELITY_OPTIONS[name]) if value is None else value
        self.anonymous_auth = bool(opt("anonymous_auth", anonymous_auth))
        self.graceful_delete = bool(opt("graceful_delete", graceful_delete))
        self.store.window = float(opt("history_seconds", history_seconds) or 0)
        self.realistic_pods = bool(opt("realistic_pods", realistic_pods))
        self.event_namespace_rule = bool(opt("event_namespace_rule", event_namespace_rule))
        self.bookmark_interval = float(opt("bookmark_interval", bookmark_interval))
        # Real: Accept's drop=metadata.managedFields is honoured only with the
        # ManagedFieldsOptOut feature gate on (alpha, off by default, v1.38); without
        # it (and on every older server) the parameter is an unrecognized one, which
        # negotiation ignores (handlers/negotiation/negotiate.go, acceptMediaTypeOptions).
        self.managed_fields_opt_out = bool(opt("managed_fields_opt_out", managed_fields_opt_out))
        # Real: kube-apiserver serves HTTP/2 unless --disable-http2-serving (ALPN
        # "h2", "http/1.1": apiserver/pkg/server/secure_serving.go, tlsConfig).
        self.http2 = self.check_http2(opt("http2", http2))
        if rbac:
            self.set_rbac(rbac)
        self.counters_lock = threading.Lock()
        self.reset_counters()
        self.log_lock = threading.Lock()
        self.request_log = collections.deque(maxlen=log_size)
        self.conns, self.conns_lock = set(), threading.Lock()
        self.stopping = False
        self.httpd = None
        for ns in ("default", "kube-system", namespace):
            self.ensure_namespace(ns)
        if seed:
            self.seed(seed)

    # ---- lifecycle
    def _tls_context(self, crt, key, alpn):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        # $KUBEAPI_TLS_MIN_VERSION=VersionTLS13: a server that speaks TLS 1.3
        # only, as kube-apiserver --tls-min-version=VersionTLS13 does.
        if os.environ.get("KUBEAPI_TLS_MIN_VERSION") == "VersionTLS13":
            ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_cert_chain(crt, key)
        # Client certificates signed by the CA authenticate as their CN (user) and O
        # (groups), as kube-apiserver's --client-ca-file; offering none is fine.
        ctx.load_verify_locations(self.ca_path)
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.set_alpn_protocols(alpn)
        go_tls13_order(ctx)
        return ctx

    def start(self):
        crt, key, self.ca_path = ensure_certs(self.state_dir, self.sans)
        # Real: NextProtos []string{"h2", "http/1.1"} (secure_serving.go, tlsConfig,
        # line 51 at 0072a2a); with DisableHTTP2 only "http/1.1" (line 57).
        self.ssl_ctx_h1 = self._tls_context(crt, key, ["http/1.1"])
        self.ssl_ctx_h2 = self._tls_context(crt, key, ["h2", "http/1.1"])
        self.httpd = HTTPServer((self.listen, self.req_port), Handler, self)
        self.port = self.httpd.server_address[1]
        host = self.listen
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        self.url = f"https://[{host}]:{self.port}" if ":" in host else f"https://{host}:{self.port}"
        self.write_files()
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="kubeapi", daemon=True)
        self.thread.start()
        threading.Thread(target=self.compactor, name="kubeapi-compactor", daemon=True).start()
        ready = {"port": self.port, "url": self.url, "pid": os.getpid(),
                 "env": {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": str(self.port)},
                 "kubeconfig": self.kubeconfig_path, "ca": self.ca_path,
                 "token": self.path("token"), "admin_token": self.path("admin-token"),
                 "openssl": ssl.OPENSSL_VERSION}
        self._write(self.path("ready"), json.dumps(ready) + "\n")
        return self

    def stop(self):
        if self.stopping or self.httpd is None:
            return
        self.stopping = True
        self.store.wake_all()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                socket.socket.shutdown(c, socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            os.unlink(self.path("ready"))
        except OSError:
            pass

    def compactor(self):
        """Real: kube-apiserver compacts etcd every --etcd-compaction-interval (5 min)
        to the revision it saw one interval before, so one interval of history stays."""
        seen, last = self.store.rv, time.monotonic()
        while not self.stopping:
            time.sleep(0.05)
            every = self.compact_interval
            if every <= 0:
                seen, last = self.store.rv, time.monotonic()
                continue
            if time.monotonic() - last >= every:
                self.store.compact(seen)
                seen, last = self.store.rv, time.monotonic()

    def compact_now(self):
        """The "compact" fault: other clients write (in a cluster they always do), then
        the history is compacted, so a client's resourceVersion from before the
        request is gone when the request is served."""
        now = now_rfc3339()
        self.create(BY_PATH[("", "events")], "kube-system", {
            # unique: two faults served at once must not collide (409)
            "metadata": {"name": f"kubeapi.compaction.{uuid.uuid4().hex[:12]}"},
            "involvedObject": {"kind": "Namespace", "name": "kube-system",
                               "apiVersion": "v1"},
            "reason": "Compacted", "message": "watch history compacted", "type": "Normal",
            "source": {"component": "kubeapi"}, "firstTimestamp": now, "lastTimestamp": now,
            "count": 1}, raw=True)
        self.store.compact()

    def ssl_context(self):
        """The TLS context of the next connection: whether ALPN offers h2."""
        return self.ssl_ctx_h2 if self.http2 else self.ssl_ctx_h1

    @staticmethod
    def check_http2(on):
        on = bool(on)
        if on:
            from .http2 import AVAILABLE
            if not AVAILABLE:
                raise RuntimeError("HTTP/2 needs the Python h2 library (Debian: apt-get "
                                   "install python3-h2); or serve HTTP/1.1 only with "
                                   "--no-http2 / http2=False")
        return on

    def track(self, conn, add):
        with self.conns_lock:
            (self.conns.add if add else self.conns.discard)(conn)

    def path(self, name):
        return os.path.join(self.state_dir, name)

    @staticmethod
    def _write(path, text, mode=0o600):
        tmp = path + ".tmp"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as f:
            f.write(text)
        os.replace(tmp, path)

    def kubeconfig_text(self, token=None, namespace=None):
        return kubeconfig_text(self.url, self.ca_path, token or self.token,
                               namespace or self.namespace)

    def write_files(self):
        self.kubeconfig_path = self.path("kubeconfig")
        self._write(self.kubeconfig_path, self.kubeconfig_text())
        self._write(self.path("admin-token"), self.admin_token + "\n")
        self.write_token(self.token)
        # The in-cluster service-account layout, for programs that read it.
        sa = self.path("serviceaccount")
        os.makedirs(sa, exist_ok=True)
        self._write(os.path.join(sa, "ca.crt"), open(self.ca_path).read(), 0o644)
        self._write(os.path.join(sa, "namespace"), self.namespace)

    def write_token(self, token):
        self._write(self.path("token"), token + "\n")
        sa = self.path("serviceaccount")
        os.makedirs(sa, exist_ok=True)
        self._write(os.path.join(sa, "token"), token)

    # ---- counters
    def reset_counters(self):
        with self.counters_lock:
            self.counters = {"total": self._zero(), "by_token": {}, "by_user": {},
                             "by_user_agent": {}, "by_remote": {}, "since": time.time(),
                             "connections": self._zero_conns()}

    # ---- connection counters (README "Counters"): TLS connections opened since the
    # last reset, by negotiated protocol, and by the token of their first request.
    @staticmethod
    def _zero_conns():
        return {"opened": 0, "h1": 0, "h2": 0, "tls_full": 0, "tls_resumed": 0,
                "admin": 0, "streams": 0, "by_token": {}, "by_remote": {}, "list": []}

    def conn_opened(self, proto, sock, addr):
        try:
            resumed = bool(sock.session_reused)
        except (AttributeError, ValueError):
            resumed = False
        rec = {"protocol": proto, "alpn": sock.selected_alpn_protocol(),
               "tls_version": sock.version(), "cipher": (sock.cipher() or (None,))[0],
               "resumed": resumed, "remote": addr[0],
               "port": addr[1], "token": None, "user_agent": None, "admin": False,
               "streams": 0, "max_concurrent": 0, "open": True, "opened": time.time(),
               "closed": None}
        with self.counters_lock:
            c = self.counters["connections"]
            rec["id"] = c["opened"] + 1
            c["opened"] += 1
            c[proto] += 1
            c["tls_resumed" if resumed else "tls_full"] += 1
            if len(c["list"]) < 10000:
                c["list"].append(rec)
            rec["_counted"] = c
        return rec

    def conn_request(self, rec, token, ua, admin):
        """A request (HTTP/2: a stream) on connection rec; the first one names it."""
        with self.counters_lock:
            first = rec["streams"] == 0
            rec["streams"] += 1
            c = rec["_counted"]
            if c is not self.counters["connections"]:
                return          # opened before the last reset
            c["streams"] += 1
            if rec["protocol"] == "h1":
                rec["max_concurrent"] = 1       # one request at a time
            if first:
                rec["token"], rec["user_agent"], rec["admin"] = token or "", ua, admin
                if admin:
                    c["admin"] += 1
            if rec["admin"]:
                return
            for key, tab in ((rec["token"], c["by_token"]), (rec["remote"], c["by_remote"])):
                b = tab.get(key)
                if b is None:
                    b = tab[key] = {"connections": 0, "h1": 0, "h2": 0, "tls_resumed": 0,
                                    "streams": 0}
                if first:
                    b["connections"] += 1
                    b[rec["protocol"]] += 1
                    b["tls_resumed"] += rec["resumed"]
                b["streams"] += 1

    def conn_concurrent(self, rec, n):
        with self.counters_lock:
            rec["max_concurrent"] = max(rec["max_concurrent"], n)

    def conn_closed(self, rec):
        if rec is None:
            return
        with self.counters_lock:
            rec["open"], rec["closed"] = False, time.time()

    @staticmethod
    def _zero():
        return {"requests": 0, "bytes_in": 0, "bytes_out": 0, "verbs": {}}

    def account(self, acct, bin_, bout, user=None, verb=None, request=False):
        token, ua, remote = acct
        with self.counters_lock:
            c = self.counters
            t = c["by_token"].get(token)
            if t is None:
                t = c["by_token"][token] = self._zero()
                t["user"] = user or ""
            buckets = [c["total"], t, c["by_user_agent"].setdefault(ua, self._zero()),
                       c["by_remote"].setdefault(remote, self._zero()),
                       c["by_user"].setdefault(t["user"], self._zero())]
            for b in buckets:
                b["bytes_in"] += bin_
                b["bytes_out"] += bout
                if request:
                    b["requests"] += 1
                    b["verbs"][verb] = b["verbs"].get(verb, 0) + 1

    def get_counters(self, reset=False):
        with self.counters_lock:
            conns = self.counters["connections"]
            lst = [{k: v for k, v in r.items() if k != "_counted"} for r in conns["list"]]
            out = copy.deepcopy(dict(self.counters, connections=dict(conns, list=[])))
            out["connections"]["list"] = copy.deepcopy(lst)
        if reset:
            self.reset_counters()
        return out

    # ---- routing
    def route_info(self, method, path, q):
        """Real: k8s.io/apiserver/pkg/endpoints/request.RequestInfoFactory."""
        info = {"resource": "", "group": "", "namespace": "", "name": "", "subresource": "",
                "verb": method.lower(), "res": None}
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, rest = parts[1], parts[3:]
        else:
            return info
        version = parts[1] if group == "" else parts[2]
        if not rest:
            return info
        ns = ""
        if rest[0] == "namespaces" and len(rest) > 1:
            ns = rest[1]
            if len(rest) > 2 and rest[2] not in ("status", "finalize"):
                rest = rest[2:]
            else:
                rest = ["namespaces"] + rest[1:]
                ns = ""
        res = BY_PATH.get((group, rest[0]))
        if res is not None and res.version != version:
            res = None
        info.update(resource=rest[0], group=group, namespace=ns,
                    name=rest[1] if len(rest) > 1 else "",
                    subresource=rest[2] if len(rest) > 2 else "", res=res,
                    extra=len(rest) > 3)
        if rest[0] == "namespaces" and len(rest) > 1:
            info["namespace"] = rest[1]
        verb = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())
        if not info["name"]:
            if verb == "get":
                verb = "watch" if parse_bool(q.get("watch", "")) else "list"
                # Real: a list/watch with fieldSelector metadata.name=X is authorized on X.
                m = re.search(r"(?:^|,)metadata\.name==?([^,]*)", q.get("fieldSelector", ""))
                if m:
                    info["name"] = m.group(1)
            elif verb == "delete":
                verb = "deletecollection"
        info["verb"] = verb
        return info

    def handle_api(self, h, req, q, body, token, user):
        path = req["path"]
        if token is not None and user is None:
            raise ApiError(401, "Unauthorized")
        if path in ("/healthz", "/livez", "/readyz"):
            return h.send_text(200, "ok")
        anonymous = user is None and self.anonymous_auth
        if user is None and path != "/version" and not anonymous:
            # --anonymous-auth=false: a request without credentials is 401 (only /version
            # and the health checks answer).
            raise ApiError(401, "Unauthorized")
        if anonymous:
            # Real (--anonymous-auth=true, the default): no credentials authenticate as
            # system:anonymous / system:unauthenticated (apiserver/pkg/authentication/
            # request/anonymous); RBAC grants it only system:public-info-viewer (/version,
            # /healthz, /livez, /readyz), so everything else is 403 (responsewriters.Forbidden).
            user = req["user"] = "system:anonymous"
            if path != "/version":
                res = req["res"]
                if res is None:
                    raise ApiError(403, f'forbidden: User "{user}" cannot get path "{path}"',
                                   details={})
                raise forbidden(res, req["verb"], user, req["namespace"], req["name"],
                                req["subresource"])
        for f in self.faults.take(req, ("delay",)):
            time.sleep(f.get("ms", 0) / 1000.0)
        if self.faults.take(req, ("compact",)):
            self.compact_now()
        late = self.faults.take(req, ("commit_timeout",))
        if late:
            # Real: the write runs on and commits, but the request's deadline passed
            # first (handlers/finisher/finisher.go, finishRequest): the client gets 504.
            h.late = ApiError(504, "Timeout: request did not complete within requested "
                              "timeout - context deadline exceeded", "Timeout", {})
        for f in self.faults.take(req, ("error", "reset")):
            if f["kind"] == "reset":
                h.abort(f)      # raises Dropped (HTTP/2: as the fault's "h2" says)
            code = int(f.get("code", 500))
            msg = f.get("message")
            det, hdr = None, {}
            if code == 429 and f.get("plain"):
                # Real: API Priority and Fairness (and max-in-flight) reject with
                # http.Error: plain text, Retry-After: 1, no Status (apiserver/pkg/server/
                # filters/priority-and-fairness.go, maxinflight.go: tooManyRequests).
                h.send_text(429, "Too many requests, please try again later.\n",
                            {"Retry-After": str(f.get("retry_after", 1))})
                return
            if code == 429:
                ra = int(f.get("retry_after", 1))
                msg = msg or "Too many requests, please try again later."
                det, hdr = {"retryAfterSeconds": ra}, {"Retry-After": ra}
            elif code == 500:
                msg = "Internal error occurred: " + (msg or "injected fault")
                det = {"causes": [{"message": msg}]}
            elif code in (503, 504) and f.get("retry_after"):
                det = {"retryAfterSeconds": int(f["retry_after"])}
                hdr = {"Retry-After": int(f["retry_after"])}
            raise ApiError(code, msg or "injected fault", f.get("reason"), det, hdr)
        if path == "/version":
            return h.send_json(200, SERVER_VERSION)
        if path == "/api":
            return h.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                     "serverAddressByClientCIDRs": [{
                                         "clientCIDR": "0.0.0.0/0",
                                         "serverAddress": self.url.split("//", 1)[1]}]})
        gvs = {(f"/apis/{g}/{v}" if g else f"/api/{v}"): (g, v) for g, v in GROUP_VERSIONS}
        if path == "/apis":
            return h.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                self.api_group(g, v) for g, v in GROUP_VERSIONS if g]})
        if path.startswith("/apis/") and path.count("/") == 2:
            gv = next(((g, v) for g, v in GROUP_VERSIONS if g and path == f"/apis/{g}"), None)
            if gv:
                return h.send_json(200, self.api_group(*gv, full=True))
        if path in gvs:
            return h.send_json(200, self.resource_list(*gvs[path]))
        if path == "/openapi/v3":
            return h.send_json(200, {"paths": {
                gv[1:]: {"serverRelativeURL":
                         f"/openapi/v3{gv}?hash={SERVER_VERSION['gitVersion']}"}
                for gv in gvs}})
        if path.startswith("/openapi/v3/") and path[len("/openapi/v3"):] in gvs:
            return h.send_json(200, self.openapi_v3(*gvs[path[len("/openapi/v3"):]]))
        res = req["res"]
        if res is None or req.get("extra") or (req["subresource"] and (
                req["subresource"] != "status" or not res.status)):
            if path.startswith("/api"):
                raise ApiError(404, "the server could not find the requested resource",
                               details={})
            return h.send_text(404, "404 page not found\n")
        # Real: authorization happens before the handler; a denied request never sees 404.
        self.authorize(req)
        accept = h.headers.get("Accept", "") or "*/*"
        if not re.search(r"application/json|\*/\*|application/\*", accept):
            raise ApiError(406, "only the following media types are accepted: "
                           "application/json, application/yaml, "
                           "application/vnd.kubernetes.protobuf")
        verb, ns, name = req["verb"], req["namespace"], req["name"]
        if res.namespaced is False:
            ns = ""
        if verb == "watch":
            return self.serve_watch(h, req, res, ns or None, q)
        fmt = self.output_format(accept)
        strip = self.managed_fields_opt_out and self.drops_managed_fields(accept)

        def shape(body):
            return without_managed_fields(body) if strip else body
        if verb == "list":
            objs, meta = self.list(res, ns or None, q)
            return h.send_json(200, shape(self.render_list(res, objs, meta, fmt, q)))
        if verb == "get":
            obj = self.get(res, ns, name)
            return h.send_json(200, shape(self.render_one(res, obj, fmt, q)))
        if res.namespaced and not ns and verb in ("create", "update", "patch", "delete",
                                                  "deletecollection"):
            raise ApiError(405, "the server does not allow this method on the requested resource")
        data = None
        if verb in ("create", "update") or (verb == "patch"):
            ctype = (h.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if verb == "patch" and ctype not in PATCH_TYPES:
                raise ApiError(415, "the body of the request was in an unknown format - "
                               "accepted media types include: " + ", ".join(PATCH_TYPES))
            try:
                data = json.loads(body or b"null")
            except ValueError as e:
                raise ApiError(400, f"error decoding request body: {e}")
        if verb == "create":
            if req["subresource"]:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            obj = self.create(res, ns, data, dry=q.get("dryRun") == "All")
            return h.send_json(201, shape(self.render_one(res, obj, fmt, q)))
        if verb == "update":
            obj, created = self.update(res, ns, name, data, req["subresource"])
            return h.send_json(201 if created else 200, shape(self.render_one(res, obj, fmt, q)))
        if verb == "patch":
            obj, created = self.patch(res, ns, name, ctype, data, req["subresource"], q)
            return h.send_json(201 if created else 200, shape(self.render_one(res, obj, fmt, q)))
        if verb == "delete":
            try:
                opts = json.loads(body) if body else {}
            except ValueError:
                opts = {}
            grace = opts.get("gracePeriodSeconds") if isinstance(opts, dict) else None
            if grace is None and q.get("gracePeriodSeconds", "") != "":
                try:
                    grace = int(q["gracePeriodSeconds"])
                except ValueError:
                    raise ApiError(400, "gracePeriodSeconds must be an integer")
            obj = self.delete(res, ns, name, (opts.get("preconditions") if isinstance(
                opts, dict) else None) or {}, grace=grace)
            return h.send_json(200, shape(self.render_one(res, obj, fmt, q)))
        if verb == "deletecollection":
            objs, meta = self.list(res, ns, q)
            gone = [self.delete(res, ns, o["metadata"]["name"], {}) for o in objs]
            return h.send_json(200, shape(self.render_list(res, gone, meta, "json", q)))
        raise ApiError(405, "the server does not allow this method on the requested resource")

    @staticmethod
    def openapi_v3(group, version="v1"):
        """A skeleton OpenAPI v3 document: operations with their GVK and query parameters
        but no schemas. Real: kubectl reads it to learn that the server does server-side
        field validation (fieldValidation on PATCH); with /openapi/v3 a 404, `kubectl
        create -f` fails unless --validate=false. /openapi/v2 stays a 404."""
        paths = {}
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        params = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for n in ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")]
        for r in RESOURCES:
            if r.group != group or r.version != version:
                continue
            coll = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced \
                else f"{base}/{r.plural}"

            def op(action, plist=()):
                return {"operationId": f"{action}{r.kind}", "parameters": list(plist),
                        "x-kubernetes-action": action, "x-kubernetes-group-version-kind": {
                            "group": r.group, "version": r.version, "kind": r.kind},
                        "responses": {"200": {"description": "OK"}}}
            paths[coll] = {"get": op("list"), "post": op("post", params)}
            paths[coll + "/{name}"] = {"get": op("get"), "put": op("put", params),
                                       "patch": op("patch", params), "delete": op("delete")}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes",
                                             "version": SERVER_VERSION["gitVersion"]},
                "paths": paths, "components": {"schemas": {}}}

    def api_group(self, name, version="v1", full=False):
        gv = {"groupVersion": f"{name}/{version}", "version": version}
        g = {"name": name, "versions": [gv], "preferredVersion": dict(gv)}
        return dict({"kind": "APIGroup", "apiVersion": "v1"}, **g) if full else g

    def resource_list(self, group, version="v1"):
        out = []
        for r in RESOURCES:
            if r.group != group or r.version != version:
                continue
            out.append({"name": r.plural, "singularName": r.kind.lower(),
                        "namespaced": r.namespaced, "kind": r.kind, "verbs": r.verbs,
                        "shortNames": r.short} if r.short else
                       {"name": r.plural, "singularName": r.kind.lower(),
                        "namespaced": r.namespaced, "kind": r.kind, "verbs": r.verbs})
            if r.categories:
                out[-1]["categories"] = list(r.categories)
            if r.status:
                out.append({"name": r.plural + "/status", "singularName": "",
                            "namespaced": r.namespaced, "kind": r.kind,
                            "verbs": ["get", "patch", "update"]})
            if "scale" in r.subresources:       # Real: a CRD's scale subresource
                out.append({"name": f"{r.plural}/scale", "singularName": "",
                            "namespaced": r.namespaced, "group": "autoscaling",
                            "version": "v1", "kind": "Scale",
                            "verbs": ["get", "patch", "update"]})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": out}

    # ---- rendering
    @staticmethod
    def output_format(accept):
        first = accept.split(",")[0]
        if "as=Table" in first:
            return "table"
        if "as=PartialObjectMetadata" in first:
            return "partial"
        return "json"

    @staticmethod
    def drops_managed_fields(accept):
        """Whether the Accept header's first clause asks for drop=metadata.managedFields
        (real: a '+'-separated set of targets, unknown ones ignored;
        handlers/negotiation/negotiate_drop_test.go, KEP-5958)."""
        for param in accept.split(",")[0].split(";")[1:]:
            k, _, v = param.partition("=")
            if k.strip() == "drop" and "metadata.managedFields" in v.strip().split("+"):
                return True
        return False

    def render_one(self, res, obj, fmt, q):
        if fmt == "table" and res.kind in TABLES:
            return to_table(res, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]},
                            q.get("includeObject", "Metadata"))
        if fmt == "partial":
            return partial_meta(obj)
        # Real: single objects carry kind/apiVersion.
        return dict({"kind": res.kind, "apiVersion": res.api_version}, **obj)

    def render_list(self, res, objs, meta, fmt, q):
        if fmt == "table" and res.kind in TABLES:
            return to_table(res, objs, meta, q.get("includeObject", "Metadata"))
        if fmt == "partial":
            return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta, "items": [partial_meta(o) for o in objs]}
        # Real: items of a typed list carry no kind/apiVersion of their own.
        return {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": meta,
                "items": objs}
