#!/usr/bin/python3
"""kubeapi: a small Kubernetes API server for nicpick's tests.

Standard library only (Debian's /usr/bin/python3, 3.11). It serves the part of
the Kubernetes API that nicpick uses -- pods, core/v1 events, namespaces and
batch/v1 jobs -- over HTTPS with bearer tokens, and follows kube-apiserver's
wire behaviour: Status objects, resourceVersions, label/field selectors, merge
and strategic-merge patches, watch streams with bookmarks and 410 Expired,
chunked lists. Faults (5xx, 429, slow responses, dropped watches, forced 410),
RBAC denials and token changes can be injected at run time through an admin
endpoint, and per-token / per-User-Agent request and byte counters read back.

Stand-alone:  /usr/bin/python3 tests/apiserver/kubeapi.py --state-dir DIR
In tests:     from kubeapi import Server   (see README.md beside this file)

Where a behaviour mirrors a kube-apiserver detail the comment says "Real:".
"""

import argparse
import base64
import bisect
import collections
import copy
import datetime
import http.server
import json
import os
import random
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.error
import urllib.request
import uuid

SERVER_VERSION = {
    "major": "1", "minor": "33", "gitVersion": "v1.33.0-nicpick-test",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64",
}
MAX_BODY = 3 * 1024 * 1024          # Real: apiserver rejects bodies > 3 MiB (413)
MAX_ANNOTATIONS = 256 * 1024        # Real: total annotation size limit 262144 bytes
PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
           413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           504: "Timeout"}


# --------------------------------------------------------------------------- resources

class Resource:
    def __init__(self, group, plural, kind, namespaced, short=(), fields=(), status=True,
                 create_on_update=False, generation=True, verbs=None):
        self.group, self.version, self.plural, self.kind = group, "v1", plural, kind
        self.namespaced, self.short, self.status = namespaced, list(short), status
        self.create_on_update, self.generation = create_on_update, generation
        self.api_version = f"{group}/v1" if group else "v1"
        self.key = f"{plural}.{group}" if group else plural   # Real: GroupResource.String()
        # Real: only these field labels are accepted in fieldSelector (else 400).
        self.fields = {"metadata.name", "metadata.namespace"} | set(fields)
        self.verbs = verbs or ["create", "delete", "deletecollection", "get", "list",
                               "patch", "update", "watch"]


RESOURCES = [
    Resource("", "pods", "Pod", True, ["po"], [
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"]),
    Resource("", "events", "Event", True, ["ev"], [
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"],
        status=False, create_on_update=True, generation=False),
    Resource("", "namespaces", "Namespace", False, ["ns"], ["status.phase"], generation=False,
             verbs=["create", "delete", "get", "list", "patch", "update", "watch"]),
    Resource("batch", "jobs", "Job", True, [], ["status.successful"]),
]
BY_PATH = {(r.group, r.plural): r for r in RESOURCES}
BY_KIND = {(r.api_version, r.kind): r for r in RESOURCES}


def field_value(res, obj, label):
    if res.kind == "Event" and label == "source":   # Real: "source" is source.component
        return (obj.get("source") or {}).get("component", "")
    cur = obj
    for part in label.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


# --------------------------------------------------------------------------- errors

class ApiError(Exception):
    def __init__(self, code, message, reason=None, details=None, headers=None):
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details, self.headers = details, headers or {}

    def status(self):
        # Real: metav1.Status, fields in the order kube-apiserver's encoder emits them.
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason}
        if self.details is not None:
            st["details"] = self.details
        st["code"] = self.code
        return st


def _details(res, name=None, **extra):
    d = {}
    if name:
        d["name"] = name
    if res.group:
        d["group"] = res.group
    d["kind"] = res.plural
    d.update(extra)
    return d


def not_found(res, name):
    return ApiError(404, f'{res.key} "{name}" not found', details=_details(res, name))


def already_exists(res, name):
    return ApiError(409, f'{res.key} "{name}" already exists', "AlreadyExists",
                    _details(res, name))


def conflict(res, name, why="the object has been modified; please apply your changes "
             "to the latest version and try again"):
    return ApiError(409, f'Operation cannot be fulfilled on {res.key} "{name}": {why}',
                    details=_details(res, name))


def invalid(res, name, causes):
    """Real: NewInvalid uses the Kind (not the resource) and lists causes."""
    msgs = [f"{f}: {m}" for f, m, _ in causes]
    msg = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    det = {"name": name} if name else {}
    if res.group:
        det["group"] = res.group
    det["kind"] = res.kind
    det["causes"] = [{"reason": r, "message": m, "field": f} for f, m, r in causes]
    return ApiError(422, f'{res.kind} "{name}" is invalid: {msg}', "Invalid", det)


def expired(message):
    return ApiError(410, message, "Expired")


def forbidden(res, verb, user, ns, name, sub=""):
    """Real: k8s.io/apiserver/pkg/endpoints/handlers/responsewriters.forbiddenMessage."""
    what = res.plural + ("/" + sub if sub else "")
    where = f'in the namespace "{ns}"' if ns else "at the cluster scope"
    why = f'User "{user}" cannot {verb} resource "{what}" in API group "{res.group}" {where}'
    head = f'{res.key} "{name}"' if name else res.key
    return ApiError(403, f"{head} is forbidden: {why}", details=_details(res, name))


# --------------------------------------------------------------------------- selectors

_QNAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LVALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def qualified_name_error(key):
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS1123.match(prefix)):
        return "prefix part a lowercase RFC 1123 subdomain must consist of lower case " \
               "alphanumeric characters, '-' or '.', and must start and end with an " \
               "alphanumeric character"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QNAME.match(name):
        return "name part must consist of alphanumeric characters, '-', '_' or '.', and " \
               "must start and end with an alphanumeric character (e.g. 'MyName',  or " \
               "'my.name',  or '123-abc', regex used for validation is " \
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    return None


class LabelSelector:
    """Real: k8s.io/apimachinery/pkg/labels.Parse. Terms are ANDed:
    k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k, k>N, k<N.
    Real: != and notin also match objects that do not have the key."""
    TOKEN = re.compile(r"\s*(!=|==|=|>|<|\(|\)|,|!|[^\s!=<>(),]+)")

    def __init__(self, text):
        self.reqs = []
        text = text or ""
        toks, pos = [], 0
        while pos < len(text):
            m = self.TOKEN.match(text, pos)
            if not m:
                if text[pos:].strip() == "":
                    break
                raise ApiError(400, f"unable to parse requirement: invalid label selector: {text!r}")
            toks.append(m.group(1))
            pos = m.end()
        i = 0

        def bad(why):
            return ApiError(400, f"unable to parse requirement: {why}")
        while i < len(toks):
            neg = toks[i] == "!"
            if neg:
                i += 1
            if i >= len(toks) or toks[i] in "!=,()<>" or toks[i] in ("==", "!="):
                raise bad(f"found '{toks[i] if i < len(toks) else ''}', expected: identifier")
            key = toks[i]
            err = qualified_name_error(key)
            if err:
                raise bad(f'key: Invalid value: "{key}": {err}')
            i += 1
            op, vals = ("!" if neg else "exists"), []
            if not neg and i < len(toks) and toks[i] != ",":
                op = toks[i]
                i += 1
                if op in ("in", "notin"):
                    if i >= len(toks) or toks[i] != "(":
                        raise bad("found '', expected: '('")
                    i += 1
                    while i < len(toks) and toks[i] != ")":
                        if toks[i] != ",":
                            vals.append(toks[i])
                        i += 1
                    if i >= len(toks):
                        raise bad("found '', expected: ')'")
                    i += 1
                elif op in ("=", "==", "!=", ">", "<"):
                    if i < len(toks) and toks[i] not in ",()":
                        vals.append(toks[i])
                        i += 1
                    else:
                        vals.append("")
                    if op in (">", "<") and not re.match(r"^-?\d+$", vals[0]):
                        raise bad("for 'Gt', 'Lt' operators, the value must be an integer")
                else:
                    raise bad(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
            for v in vals:
                if len(v) > 63 or not _LVALUE.match(v):
                    raise bad(f'values[0][{key}]: Invalid value: "{v}": a valid label must '
                              "be an empty string or consist of alphanumeric characters, "
                              "'-', '_' or '.', and must start and end with an alphanumeric "
                              "character")
            self.reqs.append((key, op, vals))
            if i < len(toks):
                if toks[i] != ",":
                    raise bad(f"found '{toks[i]}', expected: ',' or 'end of string'")
                i += 1

    def matches(self, labels):
        labels = labels or {}
        for key, op, vals in self.reqs:
            have = key in labels
            v = labels.get(key)
            if op == "exists" and not have or op == "!" and have:
                return False
            if op in ("=", "==", "in") and (not have or v not in vals):
                return False
            if op in ("!=", "notin") and have and v in vals:
                return False
            if op in (">", "<"):
                try:
                    n = int(v)
                except (TypeError, ValueError):
                    return False
                if (op == ">" and not n > int(vals[0])) or (op == "<" and not n < int(vals[0])):
                    return False
        return True


class FieldSelector:
    """Real: k8s.io/apimachinery/pkg/fields.ParseSelector: k=v, k==v, k!=v, ANDed by
    commas; backslash escapes ',', '=', '!' and '\\'. Unknown labels are a 400."""

    def __init__(self, res, text):
        self.reqs = []
        for term in self._split(text or "", ","):
            if not term:
                continue
            m = re.match(r"^(.*?)(!=|==|=)(.*)$", term.replace("\\=", "\x00").replace("\\!", "\x01"))
            if not m:
                raise ApiError(400, f"invalid selector: '{text}'; can't understand '{term}'")
            key, op, val = (s.replace("\x00", "=").replace("\x01", "!").replace("\\\\", "\\")
                            for s in m.groups())
            if key not in res.fields:
                raise ApiError(400, f'field label not supported: {key}')
            self.reqs.append((key, op != "!=", val))

    @staticmethod
    def _split(text, sep):
        out, cur, esc = [], "", False
        for ch in text:
            if esc:
                cur += ("\\" + ch) if ch in "=!\\" else ch
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == sep:
                out.append(cur)
                cur = ""
            else:
                cur += ch
        out.append(cur)
        return out

    def exact(self, key):
        for k, eq, v in self.reqs:
            if k == key and eq:
                return v
        return None

    def matches(self, res, obj):
        return all((field_value(res, obj, k) == v) == eq for k, eq, v in self.reqs)


# --------------------------------------------------------------------------- patches

def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (null deletes a key, arrays are replaced)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# Real: patchMergeKey of the core/v1 and batch/v1 list fields nicpick's objects carry.
SMP_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
            "volumes": "name", "env": "name", "volumeMounts": "mountPath",
            "ports": "containerPort", "conditions": "type", "containerStatuses": "name",
            "initContainerStatuses": "name", "ephemeralContainerStatuses": "name",
            "ownerReferences": "uid", "imagePullSecrets": "name", "podIPs": "ip",
            "hostIPs": "ip", "readinessGates": "conditionType", "resourceClaims": "name"}
SMP_SETS = {"finalizers"}


def strategic_merge_patch(target, patch):
    """A subset of strategic merge patch: maps merge as in RFC 7386; lists with a known
    patchMergeKey merge by that key ($patch: delete removes an element); finalizers merge
    as a set; $patch: replace/delete on maps and $deleteFromPrimitiveList/ are honoured;
    other lists are replaced; other directives ($retainKeys, $setElementOrder) ignored."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            out[f] = [x for x in out.get(f) or [] if x not in v]
        elif k.startswith("$"):
            continue
        elif v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            if v.get("$patch") == "delete":
                out.pop(k, None)
            else:
                out[k] = strategic_merge_patch(out.get(k), v)
        elif isinstance(v, list) and isinstance(out.get(k), list) and k in SMP_KEYS:
            mk, merged = SMP_KEYS[k], [copy.deepcopy(x) for x in out[k]]
            for item in v:
                if not isinstance(item, dict) or mk not in item:
                    merged = copy.deepcopy(v)
                    break
                idx = next((i for i, x in enumerate(merged)
                            if isinstance(x, dict) and x.get(mk) == item[mk]), None)
                if item.get("$patch") == "delete":
                    if idx is not None:
                        del merged[idx]
                elif idx is None:
                    merged.append(strategic_merge_patch({}, item))
                else:
                    merged[idx] = strategic_merge_patch(merged[idx], item)
            out[k] = merged
        elif isinstance(v, list) and isinstance(out.get(k), list) and k in SMP_SETS:
            out[k] = list(out[k]) + [x for x in v if x not in out[k]]
        else:
            out[k] = copy.deepcopy(v)
    return out


def json_patch(doc, ops):
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    doc = copy.deepcopy(doc)

    def parse(ptr):
        if ptr == "":
            return []
        if not ptr.startswith("/"):
            raise ValueError(f"invalid JSON pointer {ptr!r}")
        return [p.replace("~1", "/").replace("~0", "~") for p in ptr[1:].split("/")]

    def walk(parts):
        cur = doc
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur, parts[-1]

    def get(parts):
        cur = doc
        for p in parts:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur

    def add(parts, val):
        parent, last = walk(parts)
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), val)
        else:
            parent[last] = val

    def remove(parts):
        parent, last = walk(parts)
        return parent.pop(int(last) if isinstance(parent, list) else last)

    if not isinstance(ops, list):
        raise ValueError("json patch must be a list of operations")
    for op in ops:
        kind, path = op.get("op"), parse(op.get("path", ""))
        try:
            if kind == "add":
                add(path, copy.deepcopy(op["value"]))
            elif kind == "remove":
                remove(path)
            elif kind == "replace":
                get(path)
                remove(path)
                add(path, copy.deepcopy(op["value"]))
            elif kind == "move":
                add(path, remove(parse(op["from"])))
            elif kind == "copy":
                add(path, copy.deepcopy(get(parse(op["from"]))))
            elif kind == "test":
                if get(path) != op.get("value"):
                    raise ValueError(f"testing value {op.get('path')} failed")
            else:
                raise ValueError(f"Unexpected kind: {kind}")
        except (KeyError, IndexError, TypeError) as e:
            raise ValueError(f"{kind} operation does not apply: doc is missing path: "
                             f"\"{op.get('path')}\": missing value") from e
    return doc


# --------------------------------------------------------------------------- helpers

def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def human_duration(seconds):
    """Real: k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m" if s % 60 == 0 else f"{m}m{s % 60}s"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h" if m % 60 == 0 else f"{h}h{m % 60}m"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d" if h % 24 == 0 else f"{h // 24}d{h % 24}h"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    return f"{h // 24 // 365}y"


def age(ts):
    if not ts:
        return "<unknown>"
    try:
        t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds())


def parse_bool(v):
    return v in ("1", "t", "T", "true", "TRUE", "True")   # Real: strconv.ParseBool


def dumps(obj):
    # Real: the apiserver's JSON encoder writes compact JSON and a trailing newline.
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


# --------------------------------------------------------------------------- store

class Event:
    __slots__ = ("rv", "type", "res", "ns", "name", "obj", "prev", "cache")

    def __init__(self, rv, typ, res, ns, name, obj, prev):
        self.rv, self.type, self.res, self.ns, self.name = rv, typ, res, ns, name
        self.obj, self.prev, self.cache = obj, prev, {}


class Watcher:
    def __init__(self, res, ns, name, match=None):
        self.res, self.ns, self.name = res, ns, name
        self.match = match   # the watch's selectors; None: every object of res in ns
        self.wake = threading.Event()

    def wants(self, obj, prev):
        """Whether a change can concern this watch.  Real: the watch cache
        filters before it dispatches; waking hundreds of watcher threads for
        every commit would cost more than the requests themselves."""
        if self.match is None:
            return True
        return (obj is not None and self.match(obj)) or (prev is not None and self.match(prev))


class Store:
    """All objects plus a bounded event history; one lock. Stored object dicts are never
    mutated after being stored, so events and readers can share them."""

    def __init__(self, history=5000):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)   # notified on every write (rv waits)
        self.rv = 1
        self.objects = {r.key: {} for r in RESOURCES}
        self.history, self.capacity = [], max(1, history)
        self.floor = self.rv            # events with rv > floor are in history
        self.watchers = set()
        self.wlock = threading.Lock()

    def get(self, res, ns, name):
        return self.objects[res.key].get((ns, name))

    def items(self, res, ns=None):
        objs = self.objects[res.key]
        keys = sorted(k for k in objs if ns is None or k[0] == ns)
        return [objs[k] for k in keys]

    def commit(self, res, typ, ns, name, obj, prev):
        """Store a change under a new resourceVersion and record its event."""
        with self.lock:
            self.rv += 1
            if typ == "DELETED":
                obj = copy.deepcopy(prev)
                self.objects[res.key].pop((ns, name), None)
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            if typ != "DELETED":
                self.objects[res.key][(ns, name)] = obj
            self.history.append(Event(self.rv, typ, res, ns, name, obj, prev))
            if len(self.history) > self.capacity:
                drop = len(self.history) - self.capacity
                self.floor = self.history[drop - 1].rv
                del self.history[:drop]
            self.cond.notify_all()
        with self.wlock:
            for w in self.watchers:
                if w.res is res and (w.ns is None or w.ns == ns) and \
                        (w.name is None or w.name == name) and \
                        w.wants(obj if typ != "DELETED" else None, prev):
                    w.wake.set()
        return obj

    def since(self, rv):
        """Events with resourceVersion > rv; raises 410 when rv predates the history."""
        if rv < self.floor:
            # Real: watch cache getAllEventsSinceLocked.
            raise expired(f"too old resource version: {rv} ({self.floor})")
        i = bisect.bisect_right(self.history, rv, key=lambda e: e.rv)
        return self.history[i:]

    def compact(self):
        with self.lock:
            self.history.clear()
            self.floor = self.rv

    def snapshot(self, res, ns, rv):
        """Objects of res as they were at resourceVersion rv (undoing later events)."""
        with self.lock:
            state = {k: v for k, v in self.objects[res.key].items()
                     if ns is None or k[0] == ns}
            if rv >= self.rv:
                return state
            for e in reversed(self.since(rv)):
                if e.res is not res or (ns is not None and e.ns != ns):
                    continue
                if e.type == "ADDED":
                    state.pop((e.ns, e.name), None)
                else:
                    state[(e.ns, e.name)] = e.prev
            return state

    def add_watcher(self, w):
        with self.wlock:
            self.watchers.add(w)

    def remove_watcher(self, w):
        with self.wlock:
            self.watchers.discard(w)

    def wake_all(self):
        with self.wlock:
            for w in self.watchers:
                w.wake.set()
        with self.lock:
            self.cond.notify_all()


# --------------------------------------------------------------------------- tables

def pod_row(o):
    spec, st = o.get("spec") or {}, o.get("status") or {}
    cs = st.get("containerStatuses") or []
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cs)
    reason = st.get("reason") or st.get("phase") or "Pending"
    for c in cs:
        w = (c.get("state") or {}).get("waiting") or (c.get("state") or {}).get("terminated")
        if w and w.get("reason"):
            reason = w["reason"]
    if (o.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates")
    return [o["metadata"]["name"], f"{ready}/{len(spec.get('containers') or [])}", reason,
            str(restarts), age(o["metadata"].get("creationTimestamp")),
            st.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            st.get("nominatedNodeName") or "<none>", str(len(gates)) if gates else "<none>"]


def event_row(o):
    io = o.get("involvedObject") or {}
    src = (o.get("source") or {}).get("component") or o.get("reportingComponent") or ""
    last = o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
    return [age(last), o.get("type", ""), o.get("reason", ""),
            f"{(io.get('kind') or '').lower()}/{io.get('name', '')}",
            io.get("fieldPath", ""), src, o.get("message", ""),
            age(o.get("firstTimestamp") or last), str(o.get("count") or 1), o["metadata"]["name"]]


def col(name, priority=0, fmt=""):
    return {"name": name, "type": "string", "format": fmt, "description": name,
            "priority": priority}


# Real: the columns of k8s.io/kubernetes/pkg/printers/internalversion for these kinds.
TABLES = {
    "Pod": ([col("Name", 0, "name"), col("Ready"), col("Status"), col("Restarts"), col("Age"),
             col("IP", 1), col("Node", 1), col("Nominated Node", 1), col("Readiness Gates", 1)],
            pod_row),
    "Event": ([col("Last Seen"), col("Type"), col("Reason"), col("Object"),
               col("Subobject", 1), col("Source", 1), col("Message"), col("First Seen", 1),
               col("Count", 1), col("Name", 1, "name")], event_row),
    "Namespace": ([col("Name", 0, "name"), col("Status"), col("Age")],
                  lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""),
                             age(o["metadata"].get("creationTimestamp"))]),
    "Job": ([col("Name", 0, "name"), col("Completions"), col("Age")],
            lambda o: [o["metadata"]["name"], "%s/%s" % ((o.get("status") or {}).get(
                "succeeded", 0), (o.get("spec") or {}).get("completions", 1)),
                       age(o["metadata"].get("creationTimestamp"))]),
}


def partial_meta(obj):
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata", {})}


def to_table(res, objs, list_meta, include="Metadata", headers=True):
    cols, rowf = TABLES[res.kind]
    rows = []
    for o in objs:
        row = {"cells": rowf(o)}
        if include == "Object":
            row["object"] = dict(o, kind=res.kind, apiVersion=res.api_version)
        elif include != "None":
            row["object"] = partial_meta(o)
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
            "columnDefinitions": cols if headers else None, "rows": rows}


# --------------------------------------------------------------------------- faults, rbac

class FaultSet:
    """Faults, consumed in order. Each is a dict; see README.md."""

    def __init__(self):
        self.lock = threading.Lock()
        self.faults = []

    def set(self, faults, replace=True):
        with self.lock:
            if replace:
                self.faults = []
            for f in faults:
                f = dict(f)
                if f.get("kind") not in ("error", "delay", "drop_watch", "expire_watch", "reset"):
                    raise ApiError(400, f"unknown fault kind {f.get('kind')!r}")
                f.setdefault("count", 1)
                f.setdefault("hits", 0)
                self.faults.append(f)

    def list(self):
        with self.lock:
            return [dict(f) for f in self.faults]

    def take(self, req, kinds):
        """Consume and return the faults matching request req, of the given kinds."""
        out = []
        with self.lock:
            for f in list(self.faults):
                if f["kind"] not in kinds or not self._match(f, req):
                    continue
                f["hits"] += 1
                if f["count"] is not None and f["count"] >= 0:
                    f["count"] -= 1
                    if f["count"] <= 0:
                        self.faults.remove(f)
                out.append(dict(f))
                if f["kind"] in ("error", "reset"):
                    break
        return out

    @staticmethod
    def _match(f, req):
        if f["kind"] in ("drop_watch", "expire_watch") and req["verb"] != "watch":
            return False
        for key in ("method", "verb", "resource", "namespace", "name", "token", "user"):
            want = f.get(key)
            if want is not None and want != "*" and \
                    req.get(key) not in (want if isinstance(want, list) else [want]):
                return False
        if f.get("path") and not re.search(f["path"], req["path"]):
            return False
        if f.get("user_agent") and not re.search(f["user_agent"], req.get("user_agent", "")):
            return False
        return True


def rule_matches(rule, req):
    def ok(key, val):
        want = rule.get(key)
        return want is None or "*" in want or val in want
    res = req["resource"] + ("/" + req["subresource"] if req.get("subresource") else "")
    return (ok("verbs", req["verb"]) and ok("apiGroups", req["group"]) and
            (ok("resources", res)) and ok("namespaces", req["namespace"]) and
            ok("users", req["user"]) and
            (not rule.get("resourceNames") or req["name"] in rule["resourceNames"]))


# --------------------------------------------------------------------------- certificates

def ensure_certs(state_dir, sans):
    """CA + server cert via the openssl CLI; regenerated only when missing or SANs change."""
    p = lambda n: os.path.join(state_dir, n)   # noqa: E731
    ips = ["127.0.0.1", "::1"]
    dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
           "kubernetes.default.svc.cluster.local"]
    for s in sans:
        is_ip = re.match(r"^[\d.]+$", s) or ":" in s
        (ips if is_ip else dns).append(s)
    san = ",".join([f"IP:{i}" for i in ips] + [f"DNS:{d}" for d in dns])

    def run(*args):
        r = subprocess.run(["openssl", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args)} failed: {r.stderr}")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    if not (os.path.exists(p("ca.crt")) and os.path.exists(p("ca.key"))):
        run("req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "3650",
            "-subj", "/CN=nicpick-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        for n in ("server.crt", "sans"):
            if os.path.exists(p(n)):
                os.unlink(p(n))
    old = open(p("sans")).read() if os.path.exists(p("sans")) else None
    if old != san or not os.path.exists(p("server.crt")):
        with open(p("server.ext"), "w") as f:
            f.write(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,"
                    f"keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName={san}\n"
                    "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
        run("req", "-new", *ec, "-keyout", p("server.key"), "-out", p("server.csr"),
            "-subj", "/CN=kube-apiserver")
        run("x509", "-req", "-in", p("server.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
            "-set_serial", str(random.randrange(1, 2 ** 62)), "-days", "3650",
            "-out", p("server.crt"), "-extfile", p("server.ext"))
        with open(p("sans"), "w") as f:
            f.write(san)
    return p("server.crt"), p("server.key"), p("ca.crt")


def kubeconfig_text(url, ca_path, token, namespace):
    """A kubeconfig (YAML) that kubectl and the Python client read as they are."""
    return (f"apiVersion: v1\nkind: Config\nclusters:\n- name: kubeapi\n  cluster:\n"
            f"    server: {url}\n    certificate-authority: {ca_path}\n"
            f"contexts:\n- name: kubeapi\n  context:\n    cluster: kubeapi\n"
            f"    user: kubeapi\n    namespace: {namespace}\n"
            f"current-context: kubeapi\nusers:\n- name: kubeapi\n  user:\n"
            f"    token: {token}\n")


# --------------------------------------------------------------------------- HTTP plumbing

class _CountingReader:
    def __init__(self, f):
        self.f, self.n = f, 0

    def readline(self, *a):
        b = self.f.readline(*a)
        self.n += len(b)
        return b

    def read(self, *a):
        b = self.f.read(*a)
        self.n += len(b)
        return b

    def close(self):
        self.f.close()


class _CountingWriter:
    def __init__(self, f, handler):
        self.f, self.h = f, handler

    @property
    def closed(self):
        return self.f.closed

    def write(self, b):
        self.f.write(b)
        self.h.count_out(len(b))
        return len(b)

    def flush(self):
        self.f.flush()

    def close(self):
        self.f.close()


class _Dropped(Exception):
    """The connection was closed on purpose (fault) or by the stopping server."""


class HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, addr, handler, api):
        self.api = api
        if ":" in addr[0]:
            self.address_family = socket.AF_INET6
        super().__init__(addr, handler)

    def server_bind(self):
        # http.server's server_bind does a reverse DNS lookup (getfqdn); skip it.
        import socketserver
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request, client_address):
        if self.api.verbose:
            super().handle_error(request, client_address)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: with Nagle on, the second
    # waits for the client's delayed ACK (~40 ms per request), which the real
    # apiserver (Go sets TCP_NODELAY) never does.
    disable_nagle_algorithm = True
    timeout = 300            # idle keep-alive connections are closed after this

    # ---- connection setup: TLS handshake in this thread, not the accept loop
    def setup(self):
        api = self.server.api
        self.request.settimeout(10)
        self.request = api.ssl_ctx.wrap_socket(self.request, server_side=True)
        self.connection = self.request
        api.track(self.request, True)
        super().setup()
        self.rfile = _CountingReader(self.rfile)
        self.wfile = _CountingWriter(self.wfile, self)
        self.acct = self.req = None

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.api.track(self.request, False)
            # socketserver closes the socket it accepted, which wrap_socket detached: the
            # TLS socket must be closed here or the client never sees the end.
            self.request.close()
            self.rfile = self.wfile = None

    def log_message(self, fmt, *args):
        if self.server.api.verbose:
            sys.stderr.write("kubeapi: %s %s\n" % (self.address_string(), fmt % args))

    def send_response(self, code, message=None):
        # Real: no Server header; Audit-Id and Cache-Control are always sent.
        self.log_request(code)
        self.headers_sent = True
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        if self.req is not None:
            self.req["status"] = code

    def count_out(self, n):
        if self.acct:
            self.server.api.account(self.acct, 0, n)

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def send_json(self, code, obj, headers=None):
        body = dumps(obj)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_text(self, code, text):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                n = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(n))
                self.rfile.readline()
            return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            left = n if n <= 16 * MAX_BODY else 0     # drain it so the client reads the 413
            while left > 0:
                got = self.rfile.read(min(left, 1 << 16))
                if not got:
                    break
                left -= len(got)
            self.close_connection = True
            raise ApiError(413, f"Request entity too large: limit is {MAX_BODY}")
        return self.rfile.read(n) if n else b""

    def dispatch(self):
        api = self.server.api
        self.req = self.acct = None
        self.headers_sent = False
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        try:
            body = self.read_body()
        except ApiError as e:
            return self.send_json(e.code, e.status())
        bytes_in = self.rfile.n
        self.rfile.n = 0
        if path.startswith("/_admin"):
            return api.handle_admin(self, path, q, body)
        auth = self.headers.get("Authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        ua = self.headers.get("User-Agent", "")
        self.acct = (token or "", ua)
        with api.tokens_lock:
            user = api.tokens.get(token) if token else None
        req = self.req = {"time": time.time(), "method": self.command, "path": path,
                          "query": url.query, "token": token or "", "user": user or "",
                          "user_agent": ua, "content_type": self.headers.get("Content-Type", ""),
                          "accept": self.headers.get("Accept", ""), "status": None}
        req.update(api.route_info(self.command, path, q))
        api.account(self.acct, bytes_in + len(body), 0, user=user, verb=req["verb"],
                    request=True)
        with api.log_lock:
            api.request_log.append(req)
        try:
            api.handle_api(self, req, q, body, token, user)
        except ApiError as e:
            self.send_json(e.code, e.status(), e.headers)
        except _Dropped:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        except Exception as e:   # noqa: BLE001 -- a server bug: answer like the real one
            if api.verbose:
                import traceback
                traceback.print_exc()
            if self.headers_sent:
                self.close_connection = True
            else:
                err = ApiError(500, f"Internal error occurred: {type(e).__name__}: {e}")
                self.send_json(500, err.status())


# --------------------------------------------------------------------------- the server core

class ApiServer:
    def __init__(self, state_dir, listen="127.0.0.1", port=0, sans=(), token=None,
                 user="system:serviceaccount:default:default", tokens=None, admin_token=None,
                 history=5000, bookmark_interval=1.0, watch_timeout=1800.0, faults=None,
                 rbac=None, seed=None, verbose=False, log_size=10000, namespace="default"):
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
        self.bookmark_interval, self.watch_timeout = bookmark_interval, watch_timeout
        self.faults = FaultSet()
        self.faults.set(faults or [])
        self.rbac = {"deny": [], "allow": None}
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
    def start(self):
        crt, key, self.ca_path = ensure_certs(self.state_dir, self.sans)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        ctx.set_alpn_protocols(["http/1.1"])     # no h2: clients fall back to HTTP/1.1
        self.ssl_ctx = ctx
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
        ready = {"port": self.port, "url": self.url, "pid": os.getpid(),
                 "env": {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": str(self.port)},
                 "kubeconfig": self.kubeconfig_path, "ca": self.ca_path,
                 "token": self.path("token"), "admin_token": self.path("admin-token")}
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
                             "by_user_agent": {}, "since": time.time()}

    @staticmethod
    def _zero():
        return {"requests": 0, "bytes_in": 0, "bytes_out": 0, "verbs": {}}

    def account(self, acct, bin_, bout, user=None, verb=None, request=False):
        token, ua = acct
        with self.counters_lock:
            c = self.counters
            t = c["by_token"].get(token)
            if t is None:
                t = c["by_token"][token] = self._zero()
                t["user"] = user or ""
            buckets = [c["total"], t, c["by_user_agent"].setdefault(ua, self._zero()),
                       c["by_user"].setdefault(t["user"], self._zero())]
            for b in buckets:
                b["bytes_in"] += bin_
                b["bytes_out"] += bout
                if request:
                    b["requests"] += 1
                    b["verbs"][verb] = b["verbs"].get(verb, 0) + 1

    def get_counters(self, reset=False):
        with self.counters_lock:
            out = copy.deepcopy(self.counters)
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
        elif len(parts) >= 3 and parts[0] == "apis" and parts[2] == "v1":
            group, rest = parts[1], parts[3:]
        else:
            return info
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
        if user is None and path != "/version":
            # Real: anonymous requests reach only /version and health checks.
            raise ApiError(401, "Unauthorized")
        for f in self.faults.take(req, ("delay",)):
            time.sleep(f.get("ms", 0) / 1000.0)
        for f in self.faults.take(req, ("error", "reset")):
            if f["kind"] == "reset":
                socket.socket.shutdown(h.connection, socket.SHUT_RDWR)
                raise _Dropped()
            code = int(f.get("code", 500))
            msg = f.get("message")
            det, hdr = None, {}
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
        if path == "/apis":
            return h.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                     "groups": [self.api_group("batch")]})
        if path == "/apis/batch":
            return h.send_json(200, self.api_group("batch", True))
        if path in ("/api/v1", "/apis/batch/v1"):
            return h.send_json(200, self.resource_list("batch" if "batch" in path else ""))
        if path == "/openapi/v3":
            return h.send_json(200, {"paths": {
                gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={SERVER_VERSION['gitVersion']}"}
                for gv in ("api/v1", "apis/batch/v1")}})
        if path in ("/openapi/v3/api/v1", "/openapi/v3/apis/batch/v1"):
            return h.send_json(200, self.openapi_v3("batch" if "batch" in path else ""))
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
        if verb == "list":
            objs, meta = self.list(res, ns or None, q)
            return h.send_json(200, self.render_list(res, objs, meta, fmt, q))
        if verb == "get":
            obj = self.get(res, ns, name)
            return h.send_json(200, self.render_one(res, obj, fmt, q))
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
            return h.send_json(201, self.render_one(res, obj, fmt, q))
        if verb == "update":
            obj, created = self.update(res, ns, name, data, req["subresource"])
            return h.send_json(201 if created else 200, self.render_one(res, obj, fmt, q))
        if verb == "patch":
            obj, created = self.patch(res, ns, name, ctype, data, req["subresource"], q)
            return h.send_json(201 if created else 200, self.render_one(res, obj, fmt, q))
        if verb == "delete":
            try:
                opts = json.loads(body) if body else {}
            except ValueError:
                opts = {}
            obj = self.delete(res, ns, name, opts.get("preconditions") or {})
            return h.send_json(200, self.render_one(res, obj, fmt, q))
        if verb == "deletecollection":
            objs, meta = self.list(res, ns, q)
            gone = [self.delete(res, ns, o["metadata"]["name"], {}) for o in objs]
            return h.send_json(200, self.render_list(res, gone, meta, "json", q))
        raise ApiError(405, "the server does not allow this method on the requested resource")

    @staticmethod
    def openapi_v3(group):
        """A skeleton OpenAPI v3 document: operations with their GVK and query parameters
        but no schemas. Real: kubectl reads it to learn that the server does server-side
        field validation (fieldValidation on PATCH); with /openapi/v3 a 404, `kubectl
        create -f` fails unless --validate=false. /openapi/v2 stays a 404."""
        paths = {}
        base = f"/apis/{group}/v1" if group else "/api/v1"
        params = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for n in ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")]
        for r in RESOURCES:
            if r.group != group:
                continue
            coll = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced \
                else f"{base}/{r.plural}"

            def op(action, plist=()):
                return {"operationId": f"{action}{r.kind}", "parameters": list(plist),
                        "x-kubernetes-action": action, "x-kubernetes-group-version-kind": {
                            "group": r.group, "version": "v1", "kind": r.kind},
                        "responses": {"200": {"description": "OK"}}}
            paths[coll] = {"get": op("list"), "post": op("post", params)}
            paths[coll + "/{name}"] = {"get": op("get"), "put": op("put", params),
                                       "patch": op("patch", params), "delete": op("delete")}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes",
                                             "version": SERVER_VERSION["gitVersion"]},
                "paths": paths, "components": {"schemas": {}}}

    def api_group(self, name, full=False):
        g = {"name": name, "versions": [{"groupVersion": f"{name}/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": f"{name}/v1", "version": "v1"}}
        return dict({"kind": "APIGroup", "apiVersion": "v1"}, **g) if full else g

    def resource_list(self, group):
        out = []
        for r in RESOURCES:
            if r.group != group:
                continue
            out.append({"name": r.plural, "singularName": r.kind.lower(),
                        "namespaced": r.namespaced, "kind": r.kind, "verbs": r.verbs,
                        "shortNames": r.short} if r.short else
                       {"name": r.plural, "singularName": r.kind.lower(),
                        "namespaced": r.namespaced, "kind": r.kind, "verbs": r.verbs})
            if r.kind in ("Pod", "Job"):
                out[-1]["categories"] = ["all"]
            if r.status:
                out.append({"name": r.plural + "/status", "singularName": "",
                            "namespaced": r.namespaced, "kind": r.kind,
                            "verbs": ["get", "patch", "update"]})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/v1" if group else "v1", "resources": out}

    def authorize(self, req):
        with self.tokens_lock:
            deny, allow = self.rbac["deny"], self.rbac["allow"]
        if any(rule_matches(r, req) for r in deny) or \
                (allow is not None and not any(rule_matches(r, req) for r in allow)):
            raise forbidden(req["res"], req["verb"], req["user"], req["namespace"],
                            req["name"], req["subresource"])

    def set_rbac(self, rbac):
        with self.tokens_lock:
            self.rbac = {"deny": list(rbac.get("deny") or []), "allow": rbac.get("allow")}

    # ---- rendering
    @staticmethod
    def output_format(accept):
        first = accept.split(",")[0]
        if "as=Table" in first:
            return "table"
        if "as=PartialObjectMetadata" in first:
            return "partial"
        return "json"

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

    # ---- CRUD
    def ensure_namespace(self, ns):
        res = BY_PATH[("", "namespaces")]
        if ns and self.store.get(res, "", ns) is None:
            with self.store.lock:
                if self.store.get(res, "", ns) is None:
                    self.store.commit(res, "ADDED", "", ns, self.new_meta(res, "", {
                        "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                        "spec": {"finalizers": ["kubernetes"]},
                        "status": {"phase": "Active"}}), None)

    def get(self, res, ns, name):
        if res.kind == "Namespace":
            self.ensure_namespace(name)     # any namespace exists implicitly
        obj = self.store.get(res, ns, name)
        if obj is None:
            raise not_found(res, name)
        return obj

    def wait_rv(self, rv, timeout=3.0):
        """Real: the watch cache waits up to 3 s for a future resourceVersion."""
        end = time.monotonic() + timeout
        with self.store.cond:
            while self.store.rv < rv and not self.stopping:
                left = end - time.monotonic()
                if left <= 0:
                    raise ApiError(504, f"Too large resource version: {rv}, current: "
                                   f"{self.store.rv}", "Timeout", {"causes": [{
                                       "reason": "ResourceVersionTooLarge",
                                       "message": "Too large resource version"}],
                                       "retryAfterSeconds": 1})
                self.store.cond.wait(left)

    def list(self, res, ns, q):
        lsel = LabelSelector(q.get("labelSelector"))
        fsel = FieldSelector(res, q.get("fieldSelector"))
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise ApiError(400, f'limit: Invalid value: "{q["limit"]}": must be an integer')
        start, snap_rv = None, None
        if q.get("continue"):
            try:
                tok = json.loads(base64.urlsafe_b64decode(q["continue"] + "=="))
                snap_rv, start = int(tok["rv"]), tok["start"]
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "continue key is not valid: incorrect encoded start "
                               "resourceVersion (version meta.k8s.io/v1)")
        rv_param, match = q.get("resourceVersion", ""), q.get("resourceVersionMatch", "")
        if rv_param not in ("", "0") and snap_rv is None:
            try:
                want = int(rv_param)
            except ValueError:
                raise ApiError(400, f'resourceVersion: Invalid value: "{rv_param}": must be '
                               "a non-negative integer")
            if match == "Exact":
                snap_rv = want
            self.wait_rv(want)
        with self.store.lock:
            if snap_rv is not None:
                try:
                    state = self.store.snapshot(res, ns, snap_rv)
                except ApiError:
                    if q.get("continue"):
                        raise expired("The provided continue parameter is too old to display "
                                      "a consistent list result. You can start a new list "
                                      "without the continue parameter.")
                    raise expired("The resourceVersion for the provided list is too old.")
                objs, rv = [state[k] for k in sorted(state)], snap_rv
            else:
                objs, rv = self.store.items(res, ns), self.store.rv
        if start:
            start = tuple(start)
            objs = [o for o in objs if (o["metadata"].get("namespace", ""),
                                        o["metadata"]["name"]) > start]
        objs = [o for o in objs if lsel.matches(o["metadata"].get("labels"))
                and fsel.matches(res, o)]
        meta = {"resourceVersion": str(rv)}
        if limit > 0 and len(objs) > limit:
            last = objs[limit - 1]["metadata"]
            tok = {"v": "meta.k8s.io/v1", "rv": rv,
                   "start": [last.get("namespace", ""), last["name"]]}
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps(tok).encode()).decode().rstrip("=")
            if not lsel.reqs and not fsel.reqs:
                meta["remainingItemCount"] = len(objs) - limit
            objs = objs[:limit]
        return objs, meta

    def new_meta(self, res, ns, obj):
        md = obj.setdefault("metadata", {})
        md.pop("resourceVersion", None)
        if ns:
            md["namespace"] = ns
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_rfc3339()
        if res.generation:
            md["generation"] = 1
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        return obj

    def validate(self, res, obj, old=None):
        md, causes = obj.get("metadata") or {}, []
        name = md.get("name", "")
        if not name:
            causes.append(("metadata.name", "Required value: name or generateName is required",
                           "FieldValueRequired"))
        elif len(name) > 253 or not _DNS1123.match(name):
            causes.append(("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 '
                           "subdomain must consist of lower case alphanumeric characters, '-' "
                           "or '.', and must start and end with an alphanumeric character (e.g. "
                           "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*"
                           "[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')", "FieldValueInvalid"))
        for k, v in (md.get("labels") or {}).items():
            err = qualified_name_error(k)
            if err:
                causes.append(("metadata.labels", f'Invalid value: "{k}": {err}',
                               "FieldValueInvalid"))
            if not isinstance(v, str) or len(v) > 63 or not _LVALUE.match(v):
                causes.append(("metadata.labels", f'Invalid value: "{v}": a valid label must '
                               "be an empty string or consist of alphanumeric characters, "
                               "'-', '_' or '.', and must start and end with an alphanumeric "
                               "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
                               "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
                               "[A-Za-z0-9])?')", "FieldValueInvalid"))
        ann = md.get("annotations") or {}
        for k, v in ann.items():
            err = qualified_name_error(k)
            if err:
                causes.append(("metadata.annotations", f'Invalid value: "{k}": {err}',
                               "FieldValueInvalid"))
            if not isinstance(v, str):
                raise ApiError(400, "json: cannot unmarshal non-string into Go struct field "
                               "ObjectMeta.metadata.annotations of type string")
        if sum(len(k) + len(v) for k, v in ann.items()) > MAX_ANNOTATIONS:
            causes.append(("metadata.annotations",
                           f"Too long: may not be more than {MAX_ANNOTATIONS} bytes",
                           "FieldValueTooLong"))
        if res.kind == "Pod" and not (obj.get("spec") or {}).get("containers"):
            causes.append(("spec.containers", "Required value", "FieldValueRequired"))
        if res.kind == "Event":
            ions = (obj.get("involvedObject") or {}).get("namespace", "")
            if ions and ions != md.get("namespace"):
                causes.append(("involvedObject.namespace", f'Invalid value: "{ions}": does not '
                               "match event.namespace", "FieldValueInvalid"))
        if old is not None and md.get("uid") and md["uid"] != old["metadata"]["uid"]:
            raise conflict(res, name, f"Precondition failed: UID in precondition: {md['uid']}, "
                           f"UID in object meta: {old['metadata']['uid']}")
        if causes:
            raise invalid(res, name, causes)

    def check_body(self, res, ns, name, data):
        if not isinstance(data, dict):
            raise ApiError(400, "the body of the request could not be decoded as an object")
        if data.get("kind") not in (None, "", res.kind) or \
                data.get("apiVersion") not in (None, "", res.api_version):
            raise ApiError(400, f"the API version in the data ({data.get('apiVersion')}) does "
                           f"not match the expected API version ({res.api_version})"
                           if data.get("kind") in (None, "", res.kind) else
                           f"the kind in the data ({data.get('kind')}) does not match the "
                           f"expected kind ({res.kind})")
        md = data.get("metadata") or {}
        if res.namespaced and md.get("namespace") and md["namespace"] != ns:
            raise ApiError(400, "the namespace of the provided object does not match the "
                           "namespace sent on the request")
        if name is not None and md.get("name") != name:
            raise ApiError(400, f"the name of the object ({md.get('name')}) does not match "
                           f"the name on the URL ({name})")

    def create(self, res, ns, data, raw=False, dry=False):
        """raw=True (admin seeding) keeps the given status and skips validation."""
        self.check_body(res, ns, None, data)
        obj = copy.deepcopy(data)
        md = obj.setdefault("metadata", {})
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + "".join(
                random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        for k in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            md.pop(k, None)
        if res.namespaced:
            md["namespace"] = ns
        if not raw:
            if res.kind == "Pod":          # Real: podStrategy.PrepareForCreate resets status
                obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
                spec = obj.setdefault("spec", {})
                for k, v in (("restartPolicy", "Always"), ("dnsPolicy", "ClusterFirst"),
                             ("schedulerName", "default-scheduler"),
                             ("terminationGracePeriodSeconds", 30),
                             ("serviceAccountName", "default"), ("securityContext", {})):
                    spec.setdefault(k, v)
            elif res.kind == "Namespace":
                obj["status"] = {"phase": "Active"}
            self.validate(res, obj)
        elif res.kind == "Pod":
            obj.setdefault("status", {"phase": "Pending"})
        name = md.get("name")
        if not name:
            raise invalid(res, "", [("metadata.name", "Required value: name or generateName "
                                     "is required", "FieldValueRequired")])
        if res.namespaced:
            self.ensure_namespace(ns)
        if res.kind == "Namespace":
            md.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        with self.store.lock:
            if self.store.get(res, ns, name) is not None:
                raise already_exists(res, name)
            obj = self.new_meta(res, ns, obj)
            if dry:
                return obj
            return self.store.commit(res, "ADDED", ns, name, obj, None)

    def _write_new(self, res, ns, name, old, new, subresource, raw=False):
        """Common tail of update/patch: preconditions, subresource rules, no-op detection."""
        md = new.setdefault("metadata", {})
        want_rv = md.get("resourceVersion")
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        new.pop("kind", None)
        new.pop("apiVersion", None)
        if not raw:
            if subresource == "status":       # Real: status updates change only .status
                new = dict(copy.deepcopy(old), status=new.get("status", old.get("status")))
            elif res.status:                  # Real: main resource ignores .status
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            md = new.setdefault("metadata", {})
            for k in ("uid", "creationTimestamp", "namespace", "name", "generation",
                      "deletionTimestamp"):
                if k in old["metadata"]:
                    md[k] = old["metadata"][k]
                else:
                    md.pop(k, None)
            self.validate(res, new, old)
        md = new.setdefault("metadata", {})
        md["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old                        # Real: a no-op write keeps the resourceVersion
        if res.generation and new.get("spec") != old.get("spec"):
            md["generation"] = int(old["metadata"].get("generation") or 0) + 1
        return self.store.commit(res, "MODIFIED", ns, name, new, old)

    def update(self, res, ns, name, data, subresource="", raw=False):
        self.check_body(res, ns, name, data)
        with self.store.lock:
            old = self.store.get(res, ns, name)
            if old is None:
                if res.create_on_update and not subresource:
                    return self.create(res, ns, data, raw), True
                raise not_found(res, name)
            return self._write_new(res, ns, name, old, copy.deepcopy(data), subresource, raw), \
                False

    def patch(self, res, ns, name, ctype, data, subresource="", q=None, raw=False):
        with self.store.lock:
            old = self.store.get(res, ns, name)
            if ctype == "application/apply-patch+yaml":
                # Real: server-side apply. Here: JSON body only, merged like a merge patch,
                # no managedFields; creates the object when missing.
                if not (q or {}).get("fieldManager"):
                    raise ApiError(422, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                                   "Required value: is required for apply patch", "Invalid")
                if old is None:
                    return self.create(res, ns, data, raw), True
            if old is None:
                raise not_found(res, name)
            try:
                if ctype == "application/json-patch+json":
                    new = json_patch(dict(old, kind=res.kind, apiVersion=res.api_version), data)
                elif ctype == "application/strategic-merge-patch+json":
                    if not isinstance(data, dict):
                        raise ValueError("strategic merge patch must be a JSON object")
                    new = strategic_merge_patch(old, data)
                else:
                    if not isinstance(data, dict):
                        raise ValueError("merge patch must be a JSON object")
                    new = merge_patch(copy.deepcopy(old), data)
            except ValueError as e:
                raise ApiError(422, str(e), "Invalid")
            new = copy.deepcopy(new)
            md = new.get("metadata") or {}
            if md.get("name") != name or (res.namespaced and md.get("namespace") != ns):
                raise ApiError(400, f"the name of the object ({md.get('name')}) does not match "
                               f"the name on the URL ({name})")
            return self._write_new(res, ns, name, old, new, subresource, raw), False

    def delete(self, res, ns, name, pre):
        with self.store.lock:
            old = self.store.get(res, ns, name)
            if old is None:
                raise not_found(res, name)
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise conflict(res, name, f"Precondition failed: UID in precondition: "
                               f"{pre['uid']}, UID in object meta: {old['metadata']['uid']}")
            if pre.get("resourceVersion") and \
                    pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(res, name, "Precondition failed: ResourceVersion in "
                               f"precondition: {pre['resourceVersion']}, ResourceVersion in "
                               f"object meta: {old['metadata']['resourceVersion']}")
            # Real: pods without a node are deleted at once; here every delete is immediate.
            return self.store.commit(res, "DELETED", ns, name, None, old)

    # ---- watch
    def serve_watch(self, h, req, res, ns, q):
        lsel = LabelSelector(q.get("labelSelector"))
        fsel = FieldSelector(res, q.get("fieldSelector"))
        rv_param = q.get("resourceVersion", "")
        if rv_param not in ("", "0") and not rv_param.isdigit():
            raise ApiError(400, f'resourceVersion: Invalid value: "{rv_param}": must be a '
                           "non-negative integer")
        bookmarks = parse_bool(q.get("allowWatchBookmarks", ""))
        initial_events = parse_bool(q.get("sendInitialEvents", ""))
        try:
            timeout = float(q.get("timeoutSeconds") or 0)
        except ValueError:
            raise ApiError(400, "timeoutSeconds must be a number")
        if timeout <= 0:      # Real: 0 / absent means the server's own (long) timeout
            timeout = self.watch_timeout
        table = self.output_format(h.headers.get("Accept", "") or "*/*") == "table" \
            and res.kind in TABLES
        include = q.get("includeObject", "Metadata")
        force_expire = self.faults.take(req, ("expire_watch",))
        drops = self.faults.take(req, ("drop_watch",))
        drop = drops[0] if drops else None
        def matches(o):
            return (ns is None or o["metadata"].get("namespace") == ns) and \
                lsel.matches(o["metadata"].get("labels")) and fsel.matches(res, o)

        w = Watcher(res, ns, fsel.exact("metadata.name"), matches)
        self.store.add_watcher(w)
        started = time.monotonic()
        deadline = started + timeout
        sent = [0, table]     # events sent, whether Table headers are still due

        after = None if not drop or drop.get("after_events") is None else \
            int(drop["after_events"])

        def send(typ, obj, raw=None):
            """Write one event as one chunk; obj is a dict, raw its cached encoding."""
            if table and typ in ("ADDED", "MODIFIED", "DELETED"):
                obj = to_table(res, [obj], {"resourceVersion": obj["metadata"].get(
                    "resourceVersion", "")}, include, headers=sent[1])
                sent[1], raw = False, None
            raw = raw or self.encode_event(typ, obj)
            if after is not None and drop.get("partial") and sent[0] >= after:
                cut(raw)
            h.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
            sent[0] += 1
            if after is not None and not drop.get("partial") and sent[0] >= after:
                cut()

        def cut(next_raw=None):
            if drop and drop.get("partial") and next_raw:
                half = next_raw[:max(1, len(next_raw) // 2)]
                h.wfile.write(b"%x\r\n%s" % (len(next_raw), half))
            socket.socket.shutdown(h.connection, socket.SHUT_RDWR)
            raise _Dropped()

        try:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            if after == 0 and not drop.get("partial"):
                cut()
            err, initial = None, []
            if rv_param not in ("", "0") and not initial_events:
                try:
                    self.wait_rv(int(rv_param))
                except ApiError as e:
                    err = e
            with self.store.lock:
                last = self.store.rv
                if force_expire:
                    err = expired(f"too old resource version: {rv_param or 0} "
                                  f"({self.store.floor})")
                elif err is None and rv_param not in ("", "0") and not initial_events:
                    try:
                        self.store.since(int(rv_param))
                        last = int(rv_param)
                    except ApiError as e:
                        err = e
                elif err is None:
                    # Real: no resourceVersion / "0" / sendInitialEvents: current state as
                    # synthetic ADDED events, then changes after it.
                    initial = [o for o in self.store.items(res, ns) if matches(o)]
            if err is not None:
                # Real: after authn/authz, watch errors are an ERROR event in a 200 stream.
                send("ERROR", err.status())
                return h.wfile.write(b"0\r\n\r\n")
            for o in initial:
                send("ADDED", dict({"kind": res.kind, "apiVersion": res.api_version}, **o))
            if initial_events:
                # Real: WatchList ends the initial state with an annotated BOOKMARK.
                send("BOOKMARK", self.bookmark(res, last, True))
            next_bm = time.monotonic() + self.bookmark_interval
            after_s = None if not drop or drop.get("after_seconds") is None else \
                started + float(drop["after_seconds"])
            while True:
                # Scan first (a resumed watch gets its backlog at once), then wait.
                # The wake flag is cleared before the scan, so no commit is missed.
                w.wake.clear()
                with self.store.lock:
                    try:
                        evs = self.store.since(last)
                    except ApiError as e:   # Real: a watcher that fell behind is expired
                        send("ERROR", e.status())
                        break
                    last = self.store.rv
                for e in evs:
                    out = self.filter_event(e, res, matches, not table)
                    if out:
                        send(*out)
                now = time.monotonic()
                if self.stopping or (after_s is not None and now >= after_s):
                    cut()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bm:
                    send("BOOKMARK", self.bookmark(res, last))
                    next_bm = now + self.bookmark_interval
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, next_bm - now)
                if after_s is not None:
                    wait = min(wait, after_s - now)
                w.wake.wait(max(0.0, wait))
            h.wfile.write(b"0\r\n\r\n")
        finally:
            self.store.remove_watcher(w)

    def bookmark(self, res, rv, initial_end=False):
        # Real: a BOOKMARK object is an empty object of the kind with only its
        # resourceVersion (and the initial-events-end annotation for WatchList).
        md = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            md["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": res.kind, "apiVersion": res.api_version, "metadata": md}
        if res.kind == "Pod":
            obj.update(spec={"containers": None}, status={})
        return obj

    @staticmethod
    def encode_event(typ, obj):
        return dumps({"type": typ, "object": obj})

    def filter_event(self, e, res, matches, encode=True):
        """Real: cacheWatcher.convertToWatchEvent. An object that starts matching the
        selector is ADDED, one that stops matching is DELETED (its previous state)."""
        if e.res is not res:
            return None
        cur = e.type != "DELETED" and matches(e.obj)
        old = e.prev is not None and matches(e.prev)
        if e.type == "ADDED":
            typ = "ADDED" if cur else None
        elif e.type == "DELETED":
            typ = "DELETED" if old else None
        else:
            typ = "MODIFIED" if cur and old else "ADDED" if cur else "DELETED" if old else None
        if typ is None:
            return None
        # Encodings are cached on the event: N watchers cost one json.dumps.
        obj, raw = e.cache.get(typ, (None, None))
        if obj is None:
            if typ == "DELETED" and e.type == "MODIFIED":
                o = copy.deepcopy(e.prev)
                o["metadata"]["resourceVersion"] = str(e.rv)
            else:
                o = e.obj
            obj = dict({"kind": res.kind, "apiVersion": res.api_version}, **o)
            e.cache[typ] = (obj, None)
        if encode and raw is None:
            raw = self.encode_event(typ, obj)
            e.cache[typ] = (obj, raw)
        return typ, obj, raw

    # ---- admin
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
            if act == "delete":
                return self.delete(r, ns, name, {})
            raise ApiError(400, f"unknown objects op {act!r}")
        if op == "compact":
            if payload.get("history"):
                with self.store.lock:
                    self.store.capacity = int(payload["history"])
            self.store.compact()
            return {"resourceVersion": str(self.store.rv), "floor": str(self.store.floor)}
        if op == "state":
            with self.store.wlock:
                nw = len(self.store.watchers)
            return {"resourceVersion": str(self.store.rv), "floor": str(self.store.floor),
                    "history": len(self.store.history), "watchers": nw,
                    "connections": len(self.conns),
                    "objects": {k: len(v) for k, v in self.store.objects.items()}}
        if op == "config":
            if method == "POST":
                if "bookmark_interval" in payload:
                    self.bookmark_interval = float(payload["bookmark_interval"])
                if "watch_timeout" in payload:
                    self.watch_timeout = float(payload["watch_timeout"])
            return {"bookmark_interval": self.bookmark_interval,
                    "watch_timeout": self.watch_timeout}
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


# --------------------------------------------------------------------------- Python API

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
            self._adopt(self.core.port, self.core.url)
            return self
        kw = self.kw
        args = [self.python, os.path.abspath(__file__), "--state-dir", self.state_dir,
                "--port", str(kw.get("port", 0)), "--listen", kw.get("listen", "127.0.0.1"),
                "--lifeline-stdin", "--max-lifetime", str(self.max_lifetime)]
        for k, flag in (("token", "--token"), ("user", "--user"), ("admin_token", "--admin-token"),
                        ("history", "--history"), ("bookmark_interval", "--bookmark-interval"),
                        ("watch_timeout", "--watch-timeout"), ("namespace", "--namespace")):
            if kw.get(k) is not None:
                args += [flag, str(kw[k])]
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
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log)
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

    def patch_object(self, namespace, name, patch, resource="pods", group=""):
        return self.admin("objects", {"op": "patch", "resource": resource, "group": group,
                                      "namespace": namespace, "name": name, "patch": patch})

    def get_object(self, namespace, name, resource="pods", group=""):
        return self.admin("objects", {"op": "get", "resource": resource, "group": group,
                                      "namespace": namespace, "name": name})

    def delete_object(self, namespace, name, resource="pods", group=""):
        return self.admin("objects", {"op": "delete", "resource": resource, "group": group,
                                      "namespace": namespace, "name": name})

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

    def compact(self, history=None):
        return self.admin("compact", {"history": history} if history else {})

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


# --------------------------------------------------------------------------- command line

def _json_arg(text):
    if text.startswith("@"):
        with open(text[1:]) as f:
            return json.load(f)
    return json.loads(text)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="kubeapi.py", description="Test Kubernetes API server (pods, events, namespaces, "
        "batch/v1 jobs; watch, selectors, patches, fault injection). See README.md.")
    ap.add_argument("--listen", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    ap.add_argument("--state-dir", required=True, help="where ca.crt, token, admin-token, "
                    "kubeconfig, serviceaccount/ and ready are written")
    ap.add_argument("--san", action="append", default=[], help="extra certificate SAN "
                    "(IP or DNS name); repeatable")
    ap.add_argument("--token", help="the default bearer token (random if not given)")
    ap.add_argument("--user", default="system:serviceaccount:default:default",
                    help="identity of the default token")
    ap.add_argument("--tokens", type=_json_arg, help='more tokens: JSON {"token": "user"} '
                    "or @file")
    ap.add_argument("--admin-token", help="token for /_admin (random if not given)")
    ap.add_argument("--namespace", default="default", help="namespace written to "
                    "kubeconfig and serviceaccount/namespace")
    ap.add_argument("--history", type=int, default=5000, help="watch history length in "
                    "events (default 5000); older resourceVersions get 410 Expired")
    ap.add_argument("--bookmark-interval", type=float, default=1.0,
                    help="seconds between BOOKMARK events (default 1)")
    ap.add_argument("--watch-timeout", type=float, default=1800.0,
                    help="watch duration when the client gives no timeoutSeconds")
    ap.add_argument("--fault", action="append", type=_json_arg, default=[],
                    help="a fault as JSON (see README); repeatable")
    ap.add_argument("--rbac", type=_json_arg, help='RBAC rules: JSON {"deny": [...], '
                    '"allow": [...]} or @file')
    ap.add_argument("--seed", type=lambda p: _json_arg("@" + p), dest="seed_file", metavar="FILE",
                    help="JSON file of objects to create at start (see README)")
    ap.add_argument("--seed-json", type=_json_arg, help=argparse.SUPPRESS)
    ap.add_argument("--max-lifetime", type=float, default=0,
                    help="exit after this many seconds (0: never)")
    ap.add_argument("--lifeline-stdin", action="store_true",
                    help="exit when standard input reaches EOF (parent died)")
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    a = ap.parse_args(argv)
    if a.seed_file is not None and not isinstance(a.seed_file, dict):
        ap.error("--seed wants a JSON object")
    seed = a.seed_json or {}
    if a.seed_file:
        seed = dict(seed, **a.seed_file)
    try:
        api = ApiServer(a.state_dir, a.listen, a.port, a.san, a.token, a.user, a.tokens,
                        a.admin_token, a.history, a.bookmark_interval, a.watch_timeout,
                        a.fault, a.rbac, seed, a.verbose, namespace=a.namespace).start()
    except (ApiError, RuntimeError, OSError) as e:
        print(f"kubeapi: {e}", file=sys.stderr)
        return 1
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    if a.lifeline_stdin:
        def lifeline():
            try:   # raw reads: a thread blocked in sys.stdin would stall interpreter exit
                while os.read(0, 4096):
                    pass
            except OSError:
                pass
            done.set()
        threading.Thread(target=lifeline, daemon=True).start()
    print(f"READY port={api.port} url={api.url} kubeconfig={api.kubeconfig_path}", flush=True)
    done.wait(a.max_lifetime if a.max_lifetime > 0 else None)
    api.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
