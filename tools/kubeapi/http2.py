"""HTTP/2 over TLS (ALPN "h2"), as kube-apiserver serves it through Go's net/http
and golang.org/x/net/http2: many streams on one connection, each request on a
stream of its own, a watch as DATA frames (one per event) that ends with
END_STREAM, flow control in both directions.

The protocol state machine is Debian's python3-h2 (hyper-h2, sans-IO). Per
connection, one thread owns the TLS socket (OpenSSL objects must not be read and
written from two threads at once) and feeds h2; every stream runs its request
in a thread of its own (Exchange.dispatch, as HTTP/1.1 does) and hands frames
to h2 under the connection's lock. A stream that has no send window left, or
finds more than OUT_LIMIT bytes still queued for the socket, waits for the
client's WINDOW_UPDATE or for the socket: nothing is buffered without bound.
"""

import collections
import email.utils
import select
import socket
import ssl
import sys
import threading
import time
import uuid

from .errors import ApiError
from .httpd import MAX_BODY, Dropped, Exchange, _cert_user

try:
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.exceptions
    import h2.settings
    AVAILABLE = True
except ImportError:         # the server refuses to start with http2 on (core.check_http2)
    AVAILABLE = False

# Settings as kube-apiserver's (staging/src/k8s.io/apiserver/pkg/server/secure_serving.go,
# Serve, at commit 0072a2a): MaxConcurrentStreams = --http2-max-streams-per-connection,
# 100 when 0 (line 193, "match http2.initialMaxConcurrentStreams used by clients"; a
# plain golang.org/x/net/http2 server would say 250, defaultMaxStreams);
# resourceBody99Percentile = 256 KiB (line 185) is MaxReceiveBufferPerStream (the
# stream's initial window, line 200) and MaxReadFrameSize (line 201); the connection's
# receive window is 256 KiB * MaxConcurrentStreams (line 203), granted by one
# WINDOW_UPDATE after SETTINGS (x/net/http2 server.go serverConn.serve:
# initialConnRecvWindowSize - initialWindowSize).
MAX_CONCURRENT_STREAMS = 100
MAX_READ_FRAME_SIZE = 256 * 1024
STREAM_RECV_WINDOW = 256 * 1024
CONN_RECV_WINDOW = STREAM_RECV_WINDOW * MAX_CONCURRENT_STREAMS
DEFAULT_WINDOW = 65535                  # RFC 9113 6.9.2: every window starts here
# x/net/http2 server.go maxHeaderListSize: http.Server.MaxHeaderBytes (1 << 20 in
# secure_serving.go line 169) + 10 typical headers * 32 bytes of per-field overhead.
MAX_HEADER_LIST_SIZE = (1 << 20) + 10 * 32
# secure_serving.go line 172: IdleTimeout 90 s, also the HTTP/2 idle timeout: a
# connection without open streams for that long gets GOAWAY and is closed.
IDLE_TIMEOUT = 90.0
OUT_LIMIT = 1 << 20         # bytes queued for the socket before a stream waits
SEND_MAX = 256 * 1024       # bytes per TLS write


class _Workers:
    """Threads for the streams, reused: starting a thread per stream costs more than
    the h2 work of a small request. A stream waits for no other (a watch keeps its
    thread); an idle thread ends after a minute."""

    def __init__(self):
        self.lock, self.idle = threading.Lock(), []

    def run(self, fn):
        with self.lock:
            if self.idle:
                slot = self.idle.pop()
                slot[1] = fn
                slot[0].set()
                return
        slot = [threading.Event(), fn]
        threading.Thread(target=self._loop, args=(slot,), name="kubeapi-h2-stream",
                         daemon=True).start()

    def _loop(self, slot):
        while True:
            fn, slot[1] = slot[1], None
            try:
                fn()
            except Exception:   # noqa: BLE001 -- Stream.run answers its own errors
                pass
            slot[0].clear()
            with self.lock:
                self.idle.append(slot)
            if not slot[0].wait(60.0):
                with self.lock:
                    if any(x is slot for x in self.idle):
                        self.idle = [x for x in self.idle if x is not slot]
                        return
                slot[0].wait()      # handed a stream just before it would end


_WORKERS = _Workers()


class Headers(dict):
    """Request headers, lower-case names (HTTP/2 has no others); .get ignores case."""

    def get(self, name, default=None):
        return dict.get(self, name.lower(), default)


def _frame_bytes(frame):
    """Bytes of a stream's HEADERS/CONTINUATION/DATA frame on the wire (9-byte header,
    payload with padding and priority fields)."""
    n = 9 + len(getattr(frame, "data", b""))
    if "PADDED" in frame.flags:
        n += 1 + getattr(frame, "pad_length", 0)
    if "PRIORITY" in frame.flags:
        n += 5
    return n


if AVAILABLE:
    class _H2(h2.connection.H2Connection):
        """h2's connection, counting each stream's inbound frame bytes (counters)."""

        _COUNTED = (0x0, 0x1, 0x9)     # DATA, HEADERS, CONTINUATION

        def __init__(self, config):
            super().__init__(config)
            self.in_bytes = {}

        def _receive_frame(self, frame):
            if frame.stream_id and frame.type in self._COUNTED:
                self.in_bytes[frame.stream_id] = \
                    self.in_bytes.get(frame.stream_id, 0) + _frame_bytes(frame)
            return super()._receive_frame(frame)


class Stream(Exchange):
    """One HTTP/2 stream: a request and its answer (the HTTP/2 side of Exchange)."""

    proto = "h2"

    def __init__(self, conn, sid, headers):
        self.c, self.sid = conn, sid
        self.server = conn.handler.server
        self.client_address = conn.handler.client_address
        self.conn_rec = conn.handler.conn_rec
        hd = Headers()
        for k, v in headers:
            k = k.lower()
            hd[k] = f"{hd[k]}, {v}" if k in hd and not k.startswith(":") else v
        if ":authority" in hd and "host" not in hd:
            hd["host"] = hd[":authority"]
        self.headers = hd
        self.command, self.path = hd.get(":method", "GET"), hd.get(":path", "/")
        self.body, self.body_len, self.too_large = [], 0, False
        self.acct = self.req = self.late = None
        self.headers_sent = self.ended = self.cancelled = self.close_connection = False
        self.started, self.watch_wake = False, None

    # ---- called by the connection thread, under its lock
    def add_body(self, data):
        if self.body_len + len(data) > MAX_BODY:
            self.too_large, self.body = True, []     # Real: 413, nothing kept
        elif not self.too_large:
            self.body.append(data)
        self.body_len += len(data)

    def cancel(self):
        self.cancelled = True
        if self.watch_wake is not None:
            self.watch_wake.set()

    # ---- the stream's thread
    def run(self):
        try:
            self.dispatch()
        finally:
            self.c.finish(self)

    def read_body(self):
        if self.too_large:
            raise ApiError(413, f"Request entity too large: limit is {MAX_BODY}")
        return b"".join(self.body)

    def bytes_read(self):
        with self.c.cond:
            return self.c.h2.in_bytes.pop(self.sid, 0)

    def cert_user(self):
        return self.c.cert_user

    def count_out(self, n):
        if self.acct:
            self.server.api.account(self.acct, 0, n)

    def _head(self, code, headers):
        self.headers_sent = True
        if self.req is not None:
            self.req["status"] = code
        if self.server.api.verbose:
            sys.stderr.write(f"kubeapi: {self.client_address[0]} h2 stream {self.sid} "
                             f"\"{self.command} {self.path}\" {code}\n")
        # Real: no Server header; Audit-Id and Cache-Control are always sent.
        return [(":status", str(code)), ("date", email.utils.formatdate(usegmt=True)),
                ("audit-id", str(uuid.uuid4())), ("cache-control", "no-cache, private")] + \
            [(k.lower(), v) for k, v in headers]

    def _call(self, fn, *args, **kw):
        """Run an h2 operation for this stream under the lock and queue its frames."""
        with self.c.cond:
            self.c.check(self)
            try:
                fn(*args, **kw)
            except h2.exceptions.H2Error as e:    # the stream is gone (reset, closed)
                raise ConnectionResetError(f"HTTP/2 stream {self.sid}: {e}") from None
            self.c.flush(self)

    def respond(self, code, headers, body):
        self._call(self.c.h2.send_headers, self.sid, self._head(code, headers),
                   end_stream=not body)
        if body:
            self._send(body, True)
        self.ended = True

    def begin_chunks(self, code, ctype):
        self._call(self.c.h2.send_headers, self.sid,
                   self._head(code, [("content-type", ctype)]))

    def send_chunk(self, raw):
        # Real: the watch handler writes and flushes each event: one DATA frame per
        # event while it fits the peer's SETTINGS_MAX_FRAME_SIZE and the windows.
        self._send(raw, False)

    def end_chunks(self):
        self._call(self.c.h2.end_stream, self.sid)     # empty DATA with END_STREAM
        self.ended = True

    def _send(self, data, end):
        """DATA frames within the peer's windows and frame size; waits for WINDOW_UPDATE."""
        c, view, off = self.c, memoryview(data), 0
        while off < len(data):
            with c.cond:
                stalled = False
                while True:
                    c.check(self)
                    room = min(c.h2.local_flow_control_window(self.sid),
                               c.h2.max_outbound_frame_size)
                    if room > 0 and c.out_len < OUT_LIMIT:
                        break
                    if not stalled and self._stream_window() <= 0:
                        stalled = True
                        self._count_stall()
                    c.cond.wait(1.0)
                n = min(room, len(data) - off)
                last = end and off + n == len(data)
                try:
                    c.h2.send_data(self.sid, bytes(view[off:off + n]), end_stream=last)
                except h2.exceptions.H2Error as e:
                    raise ConnectionResetError(f"HTTP/2 stream {self.sid}: {e}") from None
                off += n
                c.flush(self)

    def _stream_window(self):
        st = self.c.h2.streams.get(self.sid)
        return st.outbound_flow_control_window if st is not None else 1

    def _count_stall(self):
        """The request record's "window_stalls" (requests(), HTTP/2 only): how often
        its answer had data to send and a stream window of 0, the client holding back
        WINDOW_UPDATE. A stream starts with the client's SETTINGS_INITIAL_WINDOW_SIZE
        (libcurl 8.14: 64 KiB, 10 MiB once the answer's headers came; 7.88: 32 MiB); a
        watch read on and on never runs dry, one the client paused does (libcurl
        >= 8.14, lib/http2.c cf_h2_update_local_win: a paused stream's window is 0)."""
        if self.req is not None:
            with self.server.api.log_lock:
                self.req["window_stalls"] = self.req.get("window_stalls", 0) + 1

    def abort(self, fault=None, partial=None):
        """Faults reset and drop_watch, a stopping server. fault["h2"]:
        "close" (default): the TCP connection is shut down, every stream on it ends
          without END_STREAM (a dropped connection);
        "goaway": GOAWAY (NO_ERROR, the last stream the server saw), then the TCP
          connection is closed (a server that goes away);
        "rst_stream": RST_STREAM INTERNAL_ERROR on this stream only, the connection
          and its other streams go on (Go's server resets the stream of a handler
          that panics, e.g. with http.ErrAbortHandler);
        "refused_stream": RST_STREAM REFUSED_STREAM on this stream only, before any
          answer (faults.py allows it for kind "reset" only): the request was not
          processed and may be retried (RFC 9113 8.7). Real: golang.org/x/net/http2
          server.go, serverConn.processHeaders, refuses a stream that goes over
          MAX_CONCURRENT_STREAMS while its SETTINGS are not yet acknowledged
          ("over_max_streams_race"); a client's nghttp2 closes its streams above a
          GOAWAY's last stream id with the same code (nghttp2_session.c,
          session_close_stream_on_goaway).
        partial: this event is sent cut in half first."""
        how = (fault or {}).get("h2", "close")
        codes = {"rst_stream": h2.errors.ErrorCodes.INTERNAL_ERROR,
                 "refused_stream": h2.errors.ErrorCodes.REFUSED_STREAM}
        try:
            if partial:
                self._send(partial[:max(1, len(partial) // 2)], False)
            with self.c.cond:
                if how in codes and not self.c.closing:
                    self.c.h2.reset_stream(self.sid, codes[how])
                    self.ended = True
                else:
                    if how == "goaway" and not self.c.closing:
                        self.c.h2.close_connection(
                            h2.errors.ErrorCodes.NO_ERROR,
                            last_stream_id=self.c.h2.highest_inbound_stream_id)
                    self.c.closing = True
                self.c.flush(self)
        except (OSError, h2.exceptions.H2Error):
            pass
        raise Dropped()


class H2Connection:
    """One HTTP/2 connection: the thread that owns the TLS socket (this one) and the
    streams' threads."""

    def __init__(self, handler):
        self.handler, self.sock = handler, handler.request
        self.api = handler.server.api
        self.cond = threading.Condition(threading.Lock())
        # Inbound headers are checked (Go's server rejects malformed ones); ours are
        # built right, so h2's outbound checks would only cost time.
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8",
                                        validate_inbound_headers=True,
                                        validate_outbound_headers=False,
                                        normalize_outbound_headers=False)
        self.h2 = _H2(cfg)
        # One SETTINGS frame, as Go's server sends (x/net/http2 server.go, serve).
        self.h2.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_FRAME_SIZE: MAX_READ_FRAME_SIZE,
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_RECV_WINDOW})
        self.h2.max_inbound_frame_size = MAX_READ_FRAME_SIZE
        self.h2.decoder.max_header_list_size = MAX_HEADER_LIST_SIZE
        self.streams, self.running = {}, 0
        self.out, self.out_len = collections.deque(), 0
        self.closing = self.closed = self.goaway_seen = False
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        self.woken = False
        self.cert_user = _cert_user(self.sock)
        self.idle_since = time.monotonic()

    # ---- shared with the streams (under self.cond)
    def check(self, st):
        if st.cancelled or self.closed or self.closing:
            raise ConnectionResetError(f"HTTP/2 stream {st.sid} is closed")

    def flush(self, st=None):
        data = self.h2.data_to_send()
        if data:
            self.out.append(data)
            self.out_len += len(data)
            if st is not None:
                st.count_out(len(data))
        if (data or self.closing) and not self.woken:
            self.woken = True
            try:
                self.wake_w.send(b"x")
            except OSError:
                pass

    def finish(self, st):
        with self.cond:
            self.running -= 1
            self.streams.pop(st.sid, None)
            if self.running == 0:
                self.idle_since = time.monotonic()
                if self.goaway_seen:
                    self.closing = True
            if not (st.ended or st.cancelled or self.closing or self.closed):
                # A handler that failed mid-answer: Go resets the stream.
                try:
                    self.h2.reset_stream(st.sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
                except h2.exceptions.H2Error:
                    pass
            self.flush()
            self.cond.notify_all()

    # ---- the connection's thread
    def serve(self):
        sock = self.sock
        sock.setblocking(False)
        with self.cond:
            self.h2.initiate_connection()
            self.h2.increment_flow_control_window(CONN_RECV_WINDOW - DEFAULT_WINDOW)
            self.flush()
        poll, polled_out = select.poll(), False
        poll.register(sock, select.POLLIN)
        poll.register(self.wake_r, select.POLLIN)
        try:
            while True:
                with self.cond:
                    want_write, closing = bool(self.out), self.closing
                    idle = self.running == 0 and \
                        time.monotonic() - self.idle_since > IDLE_TIMEOUT
                    if idle and not closing:
                        self.h2.close_connection(h2.errors.ErrorCodes.NO_ERROR)
                        self.closing = True
                        self.flush()
                        continue
                if closing and not want_write:
                    break
                if want_write != polled_out:
                    polled_out = want_write
                    poll.modify(sock, select.POLLIN | (select.POLLOUT if want_write else 0))
                if sock.pending():
                    r, w = [sock], [sock] if want_write else []
                else:
                    # poll, not select: a busy server has file descriptors beyond 1024
                    ready = dict(poll.poll(1000))
                    r = [x for x in (sock, self.wake_r) if ready.get(x.fileno(), 0) &
                         (select.POLLIN | select.POLLHUP | select.POLLERR)]
                    w = [sock] if ready.get(sock.fileno(), 0) & select.POLLOUT else []
                if self.wake_r in r:
                    try:
                        while self.wake_r.recv(4096):
                            pass
                    except OSError:
                        pass
                    with self.cond:
                        self.woken = False
                if sock in r and not self._read():
                    break
                if w:
                    self._write()
        except (OSError, ssl.SSLError):
            pass
        finally:
            with self.cond:
                self.closed = True
                for st in list(self.streams.values()):
                    st.cancel()
                self.cond.notify_all()
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass
            self.wake_r.close()
            self.wake_w.close()

    def _read(self):
        try:
            data = self.sock.recv(65536)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return True
        if not data:
            return False
        with self.cond:
            try:
                events = self.h2.receive_data(data)
            except h2.exceptions.ProtocolError:
                # h2 queued GOAWAY with the error (e.g. more streams than advertised)
                self.closing = True
                self.flush()
                return True
            for ev in events:
                self._event(ev)
            self.flush()
        return True

    def _event(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            self.streams[ev.stream_id] = Stream(self, ev.stream_id, ev.headers)
        elif isinstance(ev, h2.events.DataReceived):
            st = self.streams.get(ev.stream_id)
            if st is not None:
                st.add_body(ev.data)
            try:
                # Real: Go returns the window as the handler reads the body; the body
                # is read whole here, so at once.
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            except h2.exceptions.H2Error:
                pass
        elif isinstance(ev, h2.events.StreamEnded):
            st = self.streams.get(ev.stream_id)
            if st is not None and not st.cancelled:
                st.started = True
                self.running += 1
                self.api.conn_concurrent(self.handler.conn_rec, self.running)
                _WORKERS.run(st.run)
        elif isinstance(ev, h2.events.StreamReset):
            st = self.streams.get(ev.stream_id)
            if st is not None:
                st.cancel()
                if not st.started:      # reset before its request was whole
                    self.streams.pop(ev.stream_id, None)
            self.cond.notify_all()
        elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self.cond.notify_all()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            # The client's GOAWAY: it opens no more streams; ours may finish.
            self.goaway_seen = True
            if self.running == 0:
                self.closing = True

    def _write(self):
        with self.cond:
            if not self.out:
                return
            if len(self.out) > 1:
                joined = b"".join(self.out)
                self.out.clear()
                self.out.append(joined)
            buf = self.out[0][:SEND_MAX]
        try:
            n = self.sock.send(buf)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
            return
        with self.cond:
            head = self.out.popleft()
            if n < len(head):
                self.out.appendleft(head[n:])
            self.out_len -= n
            self.cond.notify_all()
