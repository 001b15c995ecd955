"""HTTP plumbing: the threading HTTPS server, request reading and byte counting,
dispatch to the server core."""

import http.server
import socket
import ssl
import sys
import time
import urllib.parse
import uuid

from .errors import ApiError
from .util import dumps

MAX_BODY = 3 * 1024 * 1024          # Real: apiserver rejects bodies > 3 MiB (413)


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


class Dropped(Exception):
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


class Exchange:
    """One request and its answer, over either transport. The transport (Handler:
    HTTP/1.1, http2.Stream: one HTTP/2 stream) has headers, command, path,
    client_address, proto ("h1"/"h2"), conn_rec, and provides
      respond(code, [(name, value)], body)     a whole answer
      begin_chunks(code, content_type)          a streamed answer (watch) ...
      send_chunk(raw) / end_chunks()            ... one event / its normal end
      abort(fault=None, partial=None)           cut it (faults; raises Dropped)
      read_body(), bytes_read(), cert_user()
    HTTP/1.1 frames a stream with chunked encoding; HTTP/2 sends each chunk as
    DATA on the stream and ends it with END_STREAM."""

    cancelled = False       # HTTP/2: the client reset the stream (or the connection died)
    watch_wake = None       # set by a watch: woken when the exchange is cancelled

    def send_json(self, code, obj, headers=None):
        late, self.late = self.late, None
        if late is not None and code < 300:
            # A committed write answered as timed out (the commit_timeout fault).
            code, obj, headers = late.code, late.status(), late.headers
        body = dumps(obj)
        hdrs = [("Content-Type", "application/json")]
        hdrs += [(k, str(v)) for k, v in (headers or {}).items()]
        hdrs.append(("Content-Length", str(len(body))))
        self.respond(code, hdrs, body if self.command != "HEAD" else b"")

    def send_text(self, code, text, headers=None):
        body = text.encode()
        hdrs = [("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff")]
        hdrs += [(k, str(v)) for k, v in (headers or {}).items()]
        hdrs.append(("Content-Length", str(len(body))))
        self.respond(code, hdrs, body)

    def dispatch(self):
        api = self.server.api
        self.req = self.acct = self.late = None
        self.headers_sent = False
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        auth = self.headers.get("Authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        ua = self.headers.get("User-Agent", "")
        api.conn_request(self.conn_rec, token, ua, path.startswith("/_admin"))
        try:
            body = self.read_body()
        except ApiError as e:
            return self.send_json(e.code, e.status())
        bytes_in = self.bytes_read()
        if path.startswith("/_admin"):
            return api.handle_admin(self, path, q, body)
        self.acct = (token or "", ua, self.client_address[0])
        with api.tokens_lock:
            user = api.tokens.get(token) if token else None
        if token is None:
            user = self.cert_user()
        req = self.req = {"time": time.time(), "method": self.command, "path": path,
                          "query": url.query, "token": token or "", "user": user or "",
                          "user_agent": ua, "content_type": self.headers.get("Content-Type", ""),
                          "accept": self.headers.get("Accept", ""), "status": None,
                          "protocol": self.proto}
        req.update(api.route_info(self.command, path, q))
        # bytes_in: the request line, headers and body as read (HTTP/2: its frames).
        api.account(self.acct, bytes_in, 0, user=user, verb=req["verb"], request=True)
        with api.log_lock:
            api.request_log.append(req)
        try:
            api.handle_api(self, req, q, body, token, user)
        except ApiError as e:
            self.send_json(e.code, e.status(), e.headers)
        except Dropped:
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


class Handler(Exchange, http.server.BaseHTTPRequestHandler):
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
        # The context is chosen per connection: configure(http2=...) changes what
        # the next handshake offers (ALPN), as a restarted kube-apiserver would.
        self.request = api.ssl_context().wrap_socket(self.request, server_side=True)
        self.connection = self.request
        api.track(self.request, True)
        # Real: Go's net/http serves HTTP/2 when ALPN picked "h2", HTTP/1.1 for
        # "http/1.1" and for a client that offered no ALPN at all.
        self.proto = "h2" if self.request.selected_alpn_protocol() == "h2" else "h1"
        self.conn_rec = api.conn_opened(self.proto, self.request, self.client_address)
        super().setup()
        self.rfile = _CountingReader(self.rfile)
        self.wfile = _CountingWriter(self.wfile, self)
        self.acct = self.req = self.late = None

    def handle(self):
        if self.proto == "h2":
            from .http2 import H2Connection
            H2Connection(self).serve()
        else:
            super().handle()

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.api.track(self.request, False)
            self.server.api.conn_closed(self.conn_rec)
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

    # ---- the transport's side of Exchange (HTTP/1.1)
    def respond(self, code, headers, body):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def begin_chunks(self, code, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_chunk(self, raw):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))

    def end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")

    def abort(self, fault=None, partial=None):
        """Drop the connection (faults reset and drop_watch, a stopping server):
        the TCP connection is shut down; partial, the next chunk, is cut in half."""
        if partial:
            self.wfile.write(b"%x\r\n%s" % (len(partial), partial[:max(1, len(partial) // 2)]))
        socket.socket.shutdown(self.connection, socket.SHUT_RDWR)
        raise Dropped()

    def cert_user(self):
        return _cert_user(self.connection)

    def bytes_read(self):
        n, self.rfile.n = self.rfile.n, 0
        return n

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


def _cert_user(conn):
    """Real: x509 request authentication (k8s.io/apiserver pkg/authentication/request/x509,
    CommonNameUserConversion): the verified client certificate's CN is the user."""
    try:
        cert = conn.getpeercert()
    except (AttributeError, ValueError):
        return None
    for rdn in (cert or {}).get("subject", ()):
        for k, v in rdn:
            if k == "commonName" and v:
                return v
    return None
