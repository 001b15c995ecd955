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
        self.acct = self.req = self.late = None

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
        late, self.late = self.late, None
        if late is not None and code < 300:
            # A committed write answered as timed out (the commit_timeout fault).
            code, obj, headers = late.code, late.status(), late.headers
        body = dumps(obj)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_text(self, code, text, headers=None):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
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
        self.req = self.acct = self.late = None
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
        self.acct = (token or "", ua, self.client_address[0])
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
