"""Watch streams: initial events, resumption from a resourceVersion, bookmarks,
selector transitions, 410 Expired, injected drops."""

import copy
import time

from .errors import ApiError, expired
from .httpd import Dropped
from .selectors import FieldSelector, LabelSelector
from .store import Watcher
from .tables import TABLES, partial_meta, to_table, without_managed_fields
from .util import dumps, parse_bool


class WatchMixin:
    """ApiServer's watch streams."""

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
        fmt = self.output_format(h.headers.get("Accept", "") or "*/*")
        table = fmt == "table" and res.kind in TABLES
        # Real: as=PartialObjectMetadata turns every object of the stream (bookmarks too,
        # not the ERROR Status) into metadata only (handlers/response.go, transformObject).
        partial = fmt == "partial"
        # Real: with ManagedFieldsOptOut on, every object of the stream is encoded
        # without managedFields (the negotiated ExcludeManagedFields serializer).
        strip = self.managed_fields_opt_out and \
            self.drops_managed_fields(h.headers.get("Accept", ""))
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
            elif partial and typ != "ERROR" and obj.get("kind") != "PartialObjectMetadata":
                obj, raw = partial_meta(obj), None
            if strip and raw is None and not table and typ != "ERROR":
                obj = without_managed_fields(obj)
            raw = raw or self.encode_event(typ, obj)
            if after is not None and drop.get("partial") and sent[0] >= after:
                cut(raw)
            h.send_chunk(raw)
            sent[0] += 1
            if after is not None and not drop.get("partial") and sent[0] >= after:
                cut()

        def cut(next_raw=None):
            # The transport drops the stream (HTTP/1.1: the connection; HTTP/2: as the
            # fault's "h2" says), the next event cut in half when "partial".
            h.abort(drop, next_raw if drop and drop.get("partial") else None)

        try:
            h.watch_wake = w.wake      # HTTP/2: a reset stream wakes the loop below
            h.begin_chunks(200, "application/json")
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
                        self.store.since(int(rv_param), watch=True)
                        last = int(rv_param)
                    except ApiError as e:
                        err = e
                elif err is None:
                    # Real: no resourceVersion / "0" / sendInitialEvents: current state as
                    # synthetic ADDED events, then changes after it.
                    initial = [o for o in self.store.items(res, ns) if matches(o)]
            if err is not None:
                # Real: after authn/authz, watch errors are an ERROR event in a 200 stream.
                req["watch_error"] = err.code
                send("ERROR", err.status())
                return h.end_chunks()
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
                        evs = self.store.since(last, watch=True)
                    except ApiError as e:   # Real: a watcher that fell behind is expired
                        req["watch_error"] = e.code
                        send("ERROR", e.status())
                        break
                    last = self.store.rv
                for e in evs:
                    out = self.filter_event(e, res, matches, not table, partial, strip)
                    if out:
                        send(*out)
                now = time.monotonic()
                if h.cancelled:
                    raise Dropped()
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
            h.end_chunks()
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

    def filter_event(self, e, res, matches, encode=True, partial=False, strip=False):
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
        key = (typ, "partial") if partial else typ
        if strip:
            skey = (key, "strip")
            obj, raw = e.cache.get(skey, (None, None))
            if obj is None:
                obj = without_managed_fields(self.filter_event(e, res, matches, False, partial)[1])
            if encode and raw is None:
                raw = self.encode_event(typ, obj)
            e.cache[skey] = (obj, raw)
            return typ, obj, raw
        obj, raw = e.cache.get(key, (None, None))
        if obj is None and partial:
            full = self.filter_event(e, res, matches, False)[1]
            obj = partial_meta(full)
            e.cache[key] = (obj, None)
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
            e.cache[key] = (obj, raw)
        return typ, obj, raw
