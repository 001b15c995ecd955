"""Reads and writes: get, list (selectors, pagination, resourceVersion), create,
update, patch, delete, with kube-apiserver's validation and preconditions."""

import base64
import copy
import json
import random
import threading
import time
import uuid

from .errors import ApiError, already_exists, conflict, expired, invalid, not_found
from .realism import decorate
from .patches import json_patch, merge_patch, strategic_merge_patch
from .resources import BY_PATH
from .selectors import DNS1123, LABEL_VALUE, FieldSelector, LabelSelector, qualified_name_error
from .util import now_rfc3339

MAX_ANNOTATIONS = 256 * 1024        # Real: total annotation size limit 262144 bytes


class CrudMixin:
    """ApiServer's reads and writes."""

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
            if snap_rv == -1:      # Real: the token of a 410: continue at the latest rv
                snap_rv = None
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
                        # Real: etcd3 store.go, handleCompactedErrorForPaging: 410 with a
                        # token of rv -1 in the Status' metadata that continues the list
                        # at the latest resourceVersion (an inconsistent remainder).
                        e = expired(
                            "The provided continue parameter is too old to display a "
                            "consistent list result. You can start a new list without the "
                            "continue parameter, or use the continue token in this response "
                            "to retrieve the remainder of the results. Continuing with the "
                            "provided token results in an inconsistent list - objects that "
                            "were created, modified, or deleted between the time the first "
                            "chunk was returned and now may show up in the list.")
                        e.list_meta = {"continue": self.continue_token(-1, start)}
                        raise e
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
            meta["continue"] = self.continue_token(rv, [last.get("namespace", ""),
                                                        last["name"]])
            if not lsel.reqs and not fsel.reqs:
                meta["remainingItemCount"] = len(objs) - limit
            objs = objs[:limit]
        return objs, meta

    @staticmethod
    def continue_token(rv, start):
        """Real: storage.EncodeContinue, base64 (URL alphabet, unpadded) of
        {"v":"meta.k8s.io/v1","rv":N,"start":...}; opaque to clients."""
        tok = {"v": "meta.k8s.io/v1", "rv": rv, "start": list(start)}
        return base64.urlsafe_b64encode(json.dumps(tok).encode()).decode().rstrip("=")

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
        elif len(name) > 253 or not DNS1123.match(name):
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
            if not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v):
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
            causes += self.event_causes(obj)
        if old is not None and md.get("uid") and md["uid"] != old["metadata"]["uid"]:
            raise conflict(res, name, f"Precondition failed: UID in precondition: {md['uid']}, "
                           f"UID in object meta: {old['metadata']['uid']}")
        if causes:
            raise invalid(res, name, causes)

    def event_causes(self, obj):
        """Real: core/v1 Events get legacyValidateEvent only (pkg/apis/core/validation/
        events.go, ValidateEventCreate returns after it for v1): without eventTime, the
        involvedObject's namespace must match; with eventTime (a "new" event, as nicpick
        writes), reportingComponent (Go: ReportingController) must be a qualified name,
        reportingInstance, action and reason are required and at most 128 bytes, and the
        message at most 1024 bytes."""
        md, io = obj.get("metadata") or {}, obj.get("involvedObject") or {}
        ns, ions = md.get("namespace", ""), io.get("namespace", "")
        out = []

        def bad(field, value, msg):
            out.append((field, f'Invalid value: "{value}": {msg}', "FieldValueInvalid"))

        def required(field):
            out.append((field, "Required value", "FieldValueRequired"))
        if not obj.get("eventTime"):
            if ions and ions != ns:
                bad("involvedObject.namespace", ions, "does not match event.namespace")
            elif not ions and ns not in ("", "default") and self.event_namespace_rule:
                bad("involvedObject.namespace", ions, "does not match event.namespace")
            return out
        if not ions and ns not in ("default", "kube-system"):
            bad("involvedObject.namespace", ions, "does not match event.namespace")
        ctl = obj.get("reportingComponent") or ""
        if not ctl:
            required("reportingController")
        err = qualified_name_error(ctl)
        if err:
            bad("reportingController", ctl, err)
        for field, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
            v = obj.get(field) or ""
            if not v:
                required(field)
            if len(v.encode()) > limit:
                bad(field, "", f"can have at most {limit} characters")
        if len((obj.get("message") or "").encode()) > 1024:
            bad("message", "", "can have at most 1024 characters")
        return out

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
        if res.kind == "Pod" and self.realistic_pods:
            obj = decorate(obj)
            md = obj["metadata"]
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
                      "deletionTimestamp", "deletionGracePeriodSeconds"):
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

    def delete(self, res, ns, name, pre, grace=None, graceful=None):
        """grace: DeleteOptions.gracePeriodSeconds; graceful: None follows the server's
        graceful_delete option (admin deletes pass False unless asked)."""
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
            if res.kind == "Pod" and (self.graceful_delete if graceful is None else graceful):
                period = self.grace_period(old, grace)
                if period > 0:
                    return self.delete_gracefully(res, ns, name, old, period)
            return self.store.commit(res, "DELETED", ns, name, None, old)

    @staticmethod
    def grace_period(pod, grace):
        """Real: podStrategy.CheckGracefulDelete (pkg/registry/core/pod/strategy.go): the
        DeleteOptions' gracePeriodSeconds, else spec.terminationGracePeriodSeconds; 0 for
        a pod not scheduled (no spec.nodeName) or already Failed/Succeeded; negative: 1."""
        spec, st = pod.get("spec") or {}, pod.get("status") or {}
        # (a seeded pod without the field: the defaulted 30, SetDefaults_PodSpec)
        period = grace if grace is not None else int(spec.get("terminationGracePeriodSeconds",
                                                              30) or 0)
        if not spec.get("nodeName") or st.get("phase") in ("Failed", "Succeeded"):
            period = 0
        return 1 if period < 0 else period

    def delete_gracefully(self, res, ns, name, old, period):
        """Real: rest.BeforeDelete (apiserver/pkg/registry/rest/delete.go) sets
        deletionTimestamp = now + grace and deletionGracePeriodSeconds, bumps the
        generation, and the store writes it (a MODIFIED event); the object stays
        until the kubelet has stopped its containers and deletes it with grace 0.
        Here that kubelet is a timer.  A second delete may only shorten the grace."""
        md = old["metadata"]
        if md.get("deletionTimestamp") and period >= int(md.get("deletionGracePeriodSeconds")
                                                          or 0):
            return old
        new = copy.deepcopy(old)
        nmd = new["metadata"]
        nmd["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                 time.gmtime(time.time() + period))
        nmd["deletionGracePeriodSeconds"] = period
        if int(nmd.get("generation") or 0) > 0:
            nmd["generation"] = int(nmd["generation"]) + 1
        obj = self.store.commit(res, "MODIFIED", ns, name, new, old)
        uid = nmd["uid"]

        def kubelet():
            if self.stopping:
                return
            with self.store.lock:
                cur = self.store.get(res, ns, name)
                if cur is not None and cur["metadata"]["uid"] == uid and \
                        cur["metadata"].get("deletionGracePeriodSeconds") == period:
                    self.store.commit(res, "DELETED", ns, name, None, cur)
        t = threading.Timer(period, kubelet)
        t.daemon = True
        t.start()
        return obj
