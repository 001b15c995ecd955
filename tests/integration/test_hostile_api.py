"""An API server that lies: each test answers nicpick's first request with a
hostile response (truncated, wrong types, a body of a GiB, a byte a second,
a redirect elsewhere) and checks that nicpick exits 5 with one error line,
within its deadline, without reading the body into memory and without
following the redirect.  The node's interfaces come from a snapshot, so
nothing here depends on this machine's network."""
import json
import os
import pathlib
import resource
import socket
import ssl
import subprocess
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "fuzz" / "corpus" / "snapshot" / "roce-v2"
GIB = 1 << 30


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, capture_output=True)
    (d / "token").write_text("tok-hostile\n")
    return d


class Hostile:
    """A TLS server on 127.0.0.1 that answers every request with respond(conn).
    It records each request's first line and Authorization header, and the
    bytes it managed to send."""

    def __init__(self, tls, respond):
        self.respond, self.requests, self.sent = respond, [], 0
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(tls / "cert.pem"), str(tls / "key.pem"))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.ctx, self.stop = ctx, False
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(raw,), daemon=True).start()

    def _one(self, raw):
        try:
            conn = self.ctx.wrap_socket(raw, server_side=True)
            head = b""
            while b"\r\n\r\n" not in head:
                b = conn.recv(4096)
                if not b:
                    return
                head += b
            lines = head.decode("latin-1").split("\r\n")
            auth = [l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("authorization:")]
            self.requests.append((lines[0], auth[0] if auth else None))
            self.respond(self, conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                raw.close()
            except OSError:
                pass

    def send(self, conn, data):
        conn.sendall(data)
        self.sent += len(data)

    def close(self):
        self.stop = True
        self.sock.close()


def run_nicpick(nicpick_bin, tls, server, tmp_path, timeout=6):
    out = tmp_path / "out"
    argv = [nicpick_bin, "select", "--peers", "k8s", "--smoke", "off", "--snapshot", str(SNAPSHOT),
            "--out-dir", str(out), "--api-server", server.url, "--ca-file", str(tls / "cert.pem"),
            "--token-file", str(tls / "token"), "--namespace", "train", "--pod-name", "job-w-0",
            "--expect", "2", "--timeout", str(timeout)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout + 30)
    elapsed = time.monotonic() - t0
    maxrss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    server.close()
    errors = [l for l in p.stderr.splitlines() if "error:" in l]
    assert p.returncode == 5, f"exit {p.returncode}\n{p.stderr}"
    assert len(errors) == 1, p.stderr
    assert not out.exists() or os.listdir(out) == [], os.listdir(out)
    return p, elapsed, (maxrss_kib if maxrss_kib > before else None)


def header(status, length=None, extra=""):
    h = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
    if length is not None:
        h += f"Content-Length: {length}\r\n"
    return (h + "\r\n").encode()


def test_truncated_body_is_an_api_error(nicpick_bin, tls, tmp_path):
    def respond(s, conn):
        s.send(conn, header("200 OK", 4000) + b'{"kind":"Pod","metadata":{"na')
    p, elapsed, _ = run_nicpick(nicpick_bin, tls, Hostile(tls, respond), tmp_path)
    assert elapsed < 6 + 3, elapsed


@pytest.mark.parametrize("body", [b"[]", b'{"kind":"Pod","metadata":"job-w-0"}',
                                  b'{"kind":"Pod","metadata":{"name":7,"uid":[]}}',
                                  b"\xff\xfe not json"])
def test_wrong_types_are_an_api_error(nicpick_bin, tls, tmp_path, body):
    def respond(s, conn):
        s.send(conn, header("200 OK", len(body)) + body)
    run_nicpick(nicpick_bin, tls, Hostile(tls, respond), tmp_path)


def test_a_gib_body_is_cut_off_without_being_read_into_memory(nicpick_bin, tls, tmp_path):
    chunk = b" " * (1 << 20)

    def respond(s, conn):
        s.send(conn, header("200 OK", GIB) + b'{"kind":"Pod","metadata":{"name":"')
        while s.sent < GIB:
            s.send(conn, chunk)
    server = Hostile(tls, respond)
    p, elapsed, maxrss = run_nicpick(nicpick_bin, tls, server, tmp_path, timeout=20)
    # The client's bound is 64 MiB a response (lib/k8s/http.c K8S_MAX_BODY);
    # ASan's shadow memory and quarantine make RSS meaningless there.
    if not os.environ.get("NICPICK_SANITIZED"):
        assert maxrss is None or maxrss < 160 * 1024, f"peak RSS {maxrss} KiB"
    assert server.sent < GIB, "the whole GiB was read"


def test_a_byte_a_second_ends_at_the_deadline(nicpick_bin, tls, tmp_path):
    def respond(s, conn):
        s.send(conn, header("200 OK", 100000))
        while not s.stop:
            s.send(conn, b" ")
            time.sleep(1)
    p, elapsed, _ = run_nicpick(nicpick_bin, tls, Hostile(tls, respond), tmp_path, timeout=4)
    assert elapsed < 4 + 2, f"took {elapsed:.1f}s with --timeout 4"
    assert "deadline" in p.stderr or "timed out" in p.stderr.lower(), p.stderr


def test_a_redirect_is_not_followed_and_the_token_stays(nicpick_bin, tls, tmp_path):
    elsewhere = Hostile(tls, lambda s, conn: s.send(conn, header("200 OK", 2) + b"{}"))

    def respond(s, conn):
        s.send(conn, header("302 Found", 0,
                            f"Location: {elsewhere.url}/api/v1/namespaces/train/pods/job-w-0\r\n"))
    server = Hostile(tls, respond)
    try:
        run_nicpick(nicpick_bin, tls, server, tmp_path)
    finally:
        elsewhere.close()
    assert server.requests and all(a == "Bearer tok-hostile" for _, a in server.requests)
    assert elsewhere.requests == [], elsewhere.requests
