"""The admin endpoint (/_admin/...) and the operations behind it, shared with the
in-process Python API."""

import copy
import json
import secrets

from .errors import ApiError
from .patches import merge_patch
from .resources import BY_KIND, BY_PATH
from .util import parse_bool


class AdminMixin:
    """ApiServer's admin operations."""

    def seed(self, spec):
        """Upsert objects: {"pods": [...], "events": [...], "jobs": [...],
        "namespaces": [...], "objects": [...with kind/apiVersion]}; status is kept."""
        out = []
        items = [(BY_PATH[g, p], o) for (g, p) in BY_PATH for o in spec.get(p) or []]
        for o in spec.get("objects") or []:
            r = BY_KIND.get((o.get("apiVersion", "v1"), o.get("kind")))
            if r is None:
                raise ApiError(400, f"unknown kind {o.get('apiVersion')}/{o.get('kind')}")
            items.append((r, o))
        for r, o in items:
            o = copy.deepcopy(o)
            o.pop("kind", None)
            o.pop("apiVersion", None)
            md = o.setdefault("metadata", {})
            ns = md.get("namespace", self.namespace) if r.namespaced else ""
            if r.namespaced:
                md["namespace"] = ns
            else:
                md.pop("namespace", None)   # Real: ignored on cluster-scoped objects
            with self.store.lock:
                if md.get("name") and self.store.get(r, ns, md["name"]) is not None:
                    old = self.store.get(r, ns, md["name"])
                    new = merge_patch(copy.deepcopy(old), o)
                    new["metadata"].pop("resourceVersion", None)
                    out.append(self._write_new(r, ns, md["name"], old, new, "", raw=True))
                else:
                    out.append(self.create(r, ns, o, raw=True))
        return [dict({"kind": r.kind, "apiVersion": r.api_version}, **o)
                for (r, _), o in zip(items, out)]

    def admin(self, method, op, payload, q=None):
        """The admin operations, shared by the HTTP endpoint and the in-process API."""
        q = q or {}
        if op == "health":
            return {"ok": True, "resourceVersion": str(self.store.rv)}
        if op == "faults":
            if method == "DELETE":
                self.faults.set([])
            elif method == "POST":
                self.faults.set(payload.get("faults") or [], payload.get("replace", True))
            return {"faults": self.faults.list()}
        if op == "rbac":
            if method == "POST":
                self.set_rbac(payload)
            with self.tokens_lock:
                return copy.deepcopy(self.rbac)
        if op == "tokens":
            if method == "POST":
                with self.tokens_lock:
                    if payload.get("replace"):
                        self.tokens = {}
                    self.tokens.update(payload.get("tokens") or {})
                    for t in payload.get("remove") or []:
                        self.tokens.pop(t, None)
                if payload.get("write_token"):
                    self.token = payload["write_token"]
                    self.write_token(self.token)
            with self.tokens_lock:
                return {"tokens": dict(self.tokens)}
        if op == "counters":
            return self.get_counters(reset=parse_bool(q.get("reset", "")) or method == "DELETE")
        if op == "counters/reset":
            self.reset_counters()
            return {"ok": True}
        if op == "requests":
            with self.log_lock:
                out = [dict(r, res=None) for r in self.request_log]
                if parse_bool(q.get("clear", "")) or method == "DELETE":
                    self.request_log.clear()
            for r in out:
                r.pop("res", None)
            return {"requests": out}
        if op == "seed":
            return {"items": self.seed(payload)}
        if op == "objects":
            r = BY_PATH.get((payload.get("group", ""), payload.get("resource", "pods")))
            if r is None:
                raise ApiError(400, "unknown resource")
            ns, name = payload.get("namespace", self.namespace) if r.namespaced else "", \
                payload.get("name")
            act = payload.get("op", "get")
            if act == "get":
                return dict({"kind": r.kind, "apiVersion": r.api_version},
                            **self.get(r, ns, name))
            if act == "list":
                return self.render_list(r, self.list(r, ns or None, payload)[0],
                                        {"resourceVersion": str(self.store.rv)}, "json", {})
            if act == "patch":      # merge patch that may also change status
                return self.patch(r, ns, name, "application/merge-patch+json",
                                  payload.get("patch") or {}, raw=True)[0]
            if act == "delete":     # immediate unless "graceful": true (pod strategy rules)
                return self.delete(r, ns, name, {}, grace=payload.get("gracePeriodSeconds"),
                                   graceful=bool(payload.get("graceful")))
            raise ApiError(400, f"unknown objects op {act!r}")
        if op == "compact":
            if payload.get("history"):
                with self.store.lock:
                    self.store.capacity = int(payload["history"])
            self.store.compact(payload.get("resourceVersion"))
            return {"resourceVersion": str(self.store.rv), "floor": str(self.store.floor)}
        if op == "state":
            with self.store.wlock:
                nw = len(self.store.watchers)
            with self.store.lock:
                wfloor = self.store.watch_floor()
            return {"resourceVersion": str(self.store.rv), "floor": str(self.store.floor),
                    "watch_floor": str(wfloor),
                    "history": len(self.store.history), "watchers": nw,
                    "connections": len(self.conns),
                    "objects": {k: len(v) for k, v in self.store.objects.items()}}
        if op == "config":
            if method == "POST":
                if "bookmark_interval" in payload:
                    self.bookmark_interval = float(payload["bookmark_interval"])
                if "watch_timeout" in payload:
                    self.watch_timeout = float(payload["watch_timeout"])
                if "compact_interval" in payload:
                    self.compact_interval = float(payload["compact_interval"] or 0)
                if "authorization" in payload:
                    self.authorization = self.check_mode(payload["authorization"])
                for k in ("anonymous_auth", "graceful_delete", "realistic_pods",
                          "event_namespace_rule", "managed_fields_opt_out"):
                    if k in payload:
                        setattr(self, k, bool(payload[k]))
                if "history_seconds" in payload:
                    with self.store.lock:
                        self.store.window = float(payload["history_seconds"] or 0)
                if "http2" in payload:      # ALPN of the connections opened from now on
                    try:
                        self.http2 = self.check_http2(payload["http2"])
                    except RuntimeError as e:
                        raise ApiError(400, str(e))
            return {"bookmark_interval": self.bookmark_interval,
                    "watch_timeout": self.watch_timeout, "authorization": self.authorization,
                    "compact_interval": self.compact_interval,
                    "anonymous_auth": self.anonymous_auth,
                    "graceful_delete": self.graceful_delete,
                    "history_seconds": self.store.window,
                    "realistic_pods": self.realistic_pods,
                    "event_namespace_rule": self.event_namespace_rule,
                    "managed_fields_opt_out": self.managed_fields_opt_out,
                    "http2": self.http2}
        raise ApiError(404, f"unknown admin endpoint {op!r}")

    def handle_admin(self, h, path, q, body):
        h.req = None
        auth = h.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or not secrets.compare_digest(
                auth[7:].strip(), self.admin_token):
            code = 403 if auth.startswith("Bearer ") else 401
            e = ApiError(code, "admin endpoint: " + ("forbidden" if code == 403 else "Unauthorized"))
            return h.send_json(code, e.status())
        try:
            payload = json.loads(body) if body else {}
            h.send_json(200, self.admin(h.command, path[len("/_admin/"):], payload, q))
        except ApiError as e:
            h.send_json(e.code, e.status())
        except (ValueError, KeyError, TypeError) as e:
            h.send_json(400, ApiError(400, f"bad admin request: {e}").status())
