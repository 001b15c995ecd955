"""Injected faults: errors, delays, resets, dropped and expired watches."""

import re
import threading

from .errors import ApiError

# What a reset or drop_watch does to an HTTP/2 stream (http2.py, Stream.abort).
H2_HOW = ("close", "goaway", "rst_stream", "refused_stream")


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
                if f.get("kind") not in ("error", "delay", "drop_watch", "expire_watch", "reset",
                                         "commit_timeout",
                                         "compact"):
                    raise ApiError(400, f"unknown fault kind {f.get('kind')!r}")
                how = f.get("h2", "close")
                if how not in H2_HOW:
                    raise ApiError(400, f"unknown h2 {how!r}: one of {', '.join(H2_HOW)}")
                if how == "refused_stream" and f["kind"] != "reset":
                    # Real: Go's server refuses a stream before any handler runs
                    # (x/net/http2 server.go processHeaders), never one it answered.
                    raise ApiError(400, "h2 \"refused_stream\" is for kind \"reset\" only: "
                                   "a stream is refused before its answer starts")
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
