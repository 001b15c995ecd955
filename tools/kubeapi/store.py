"""The object store: every object, one global resourceVersion and a bounded
event history that watches and consistent lists read."""

import bisect
import copy
import threading
import time

from .errors import expired
from .resources import RESOURCES


class Event:
    __slots__ = ("rv", "type", "res", "ns", "name", "obj", "prev", "cache", "at")

    def __init__(self, rv, typ, res, ns, name, obj, prev):
        self.rv, self.type, self.res, self.ns, self.name = rv, typ, res, ns, name
        self.obj, self.prev, self.cache = obj, prev, {}
        self.at = time.monotonic()


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
        # Seconds of history a watch can resume from (0: no time limit, only the
        # capacity).  Real: the watch cache keeps eventFreshDuration = 75 s
        # (cacher/watch_cache.go); an older event is dropped once the cache is full,
        # which a busy cluster's is.  Lists (continue, Exact) read etcd, whose history
        # only compaction shortens: the events stay here for them.
        self.window = 0.0
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

    def watch_floor(self):
        """The oldest resourceVersion a watch can resume from: the history's floor, or,
        with a time window, the last event older than the window."""
        if self.window <= 0 or not self.history:
            return self.floor
        cut = time.monotonic() - self.window
        if self.history[0].at >= cut:
            return self.floor
        i = bisect.bisect_left(self.history, cut, key=lambda e: e.at)
        return max(self.floor, self.history[i - 1].rv)

    def since(self, rv, watch=False):
        """Events with resourceVersion > rv; raises 410 when rv predates the history
        (for a watch: the watch cache's window)."""
        floor = self.watch_floor() if watch else self.floor
        if rv < floor:
            # Real: watch cache getAllEventsSinceLocked.
            raise expired(f"too old resource version: {rv} ({floor})")
        i = bisect.bisect_right(self.history, rv, key=lambda e: e.rv)
        return self.history[i:]

    def compact(self, rv=None):
        """Drop the history up to rv (default: all of it), as etcd's compaction does:
        a watch or an exact list from an older resourceVersion then gets 410 Expired
        because the events are gone."""
        with self.lock:
            rv = self.rv if rv is None else min(int(rv), self.rv)
            if rv <= self.floor:
                return
            i = bisect.bisect_right(self.history, rv, key=lambda e: e.rv)
            del self.history[:i]
            self.floor = rv

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
