"""An API server that lies: each test answers nicpick's first request with a
hostile response (truncated, wrong types, a body of a GiB, a byte a second,
a redirect elsewhere) and checks that nicpick exits 5 with one error line,
within its deadline, without reading the body into memory and without
following the redirect.  The node's interfaces come from a snapshot, so
nothing here depends on this machine's network."""
import json
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import tempfile
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
    t0 = time.monotonic()
    p, maxrss_kib = run_measured(argv, timeout + 30)
    elapsed = time.monotonic() - t0
    server.close()
    errors = [l for l in p.stderr.splitlines() if "error:" in l]
    assert p.returncode == 5, f"exit {p.returncode}\n{p.stderr}"
    assert len(errors) == 1, p.stderr
    assert not out.exists() or os.listdir(out) == [], os.listdir(out)
    return p, elapsed, maxrss_kib


# A process's peak RSS (ru_maxrss) starts from its parent's: exec counts
# the memory it replaces (fs/exec.c, exec_mmap, setmax_mm_hiwater_rss), and
# a child of pytest (vfork, fork) replaces pytest's own, which another test
# of the same session may have grown past any bound here (test_status.py
# builds 80 MB of Events).  So nicpick is the child of a small launcher,
# forked from it: its figure is nicpick's own peak, or the launcher's few
# MiB if that were more.
LAUNCH = r"""
import os, signal, sys
fd = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.close(fd)
    os.execv(sys.argv[3], sys.argv[3:])
signal.signal(signal.SIGALRM, lambda *_: os.kill(pid, signal.SIGKILL))
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[2]))
_, status, ru = os.wait4(pid, 0)
os.write(fd, str(ru.ru_maxrss).encode())
code = os.waitstatus_to_exitcode(status)
if code < 0:  # killed: so is the launcher, by the same signal
    if -code != signal.SIGKILL:
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def run_measured(argv, timeout):
    """Run argv; its result (returncode, stdout, stderr) and its own peak RSS
    in KiB (wait4 in LAUNCH: this process's, not what it was forked from)."""
    r, w = os.pipe()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([sys.executable, "-c", LAUNCH, str(w), str(timeout), *argv],
                                    stdout=out, stderr=err, pass_fds=(w,))
        finally:
            os.close(w)
        with os.fdopen(r, "rb") as f:
            maxrss = f.read()
        proc.wait()
        out.seek(0)
        proc.stdout = out.read().decode(errors="replace")
        err.seek(0)
        proc.stderr = err.read().decode(errors="replace")
    assert maxrss, f"the launcher reported no peak RSS: exit {proc.returncode}\n{proc.stderr}"
    return proc, int(maxrss)


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
    # One object may be 4 MiB (lib/k8s/k8s_priv.h K8S_MAX_OBJECT); its
    # Content-Length says this one will be more, so none of it is kept.
    # ASan's shadow memory and quarantine make RSS meaningless there.
    if not os.environ.get("NICPICK_SANITIZED"):
        assert maxrss < 160 * 1024, f"peak RSS {maxrss} KiB"
    assert server.sent < GIB, "the whole GiB was read"
    assert "larger than 4 MiB, the most one object can be" in p.stderr, p.stderr


POD_HEAD = (b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":"job-w-0","namespace":"train",'
            b'"uid":"u1"},"x":[')


@pytest.mark.parametrize("status,mib,said", [
    # under the 4 MiB an object may be: refused by the parse's budget
    ("200 OK", 3, "GET /api/v1/namespaces/train/pods/job-w-0: the answer, 3.0 MiB of JSON, "
                  "would take more than 64 MiB of memory to parse"),
    ("200 OK", 8, "GET /api/v1/namespaces/train/pods/job-w-0: the answer is larger than 4 MiB, "
                  "the most one object can be"),
    # an error's body: its first 64 KiB make its message, retried to the deadline
    ("503 Service Unavailable", 8, "GET /api/v1/namespaces/train/pods/job-w-0: HTTP 503"),
])
def test_a_body_of_tiny_values_does_not_fill_memory(nicpick_bin, tls, tmp_path, status, mib, said):
    """Valid JSON of tiny values, `[{},{},...]`: jansson makes each 3 bytes an
    object of over 200, so that 3 MiB of it took nicpick to 480 MiB, 8 MiB to
    1.27 GiB, and an 8 MiB 503 body to 640 MiB.  Now each kind of answer is
    bounded in bytes and its parse in memory (lib/k8s/k8s_priv.h): exit 5, one
    error line naming the request and the limit, and peak RSS near that of a
    run that reads nothing."""
    body = POD_HEAD + b"{}," * (((mib << 20) - len(POD_HEAD) - 16) // 3) + b"0]}"

    def respond(s, conn):
        s.send(conn, header(status, len(body)) + body)
    p, elapsed, maxrss = run_nicpick(nicpick_bin, tls, Hostile(tls, respond), tmp_path, timeout=3)
    assert said in p.stderr, p.stderr
    if not os.environ.get("NICPICK_SANITIZED"):
        assert maxrss < 128 * 1024, f"peak RSS {maxrss} KiB"


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


# ---- nicpick status: the job's pods in pages, each bounded as select's ----

def run_status(nicpick_bin, tls, server, tmp_path, *args, timeout=30):
    """`nicpick status job --kind Job` against server through a kubeconfig;
    (result, peak RSS in KiB, the paths of its pod lists, watches left out)."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: h
  cluster:
    server: {server.url}
    certificate-authority: {tls / 'cert.pem'}
contexts:
- name: h
  context: {{cluster: h, user: h, namespace: train}}
current-context: h
users:
- name: h
  user: {{token: tok-hostile}}
""")
    argv = [nicpick_bin, "status", "job", "--kind", "Job", "--kubeconfig", str(kc), "-o", "json",
            "--request-timeout", "20", *args]
    p, maxrss_kib = run_measured(argv, timeout)
    server.close()
    lists = [line.split()[1] for line, _ in server.requests
             if line.split()[1].startswith("/api/v1/namespaces/train/pods?")
             and "watch=1" not in line]
    return p, maxrss_kib, lists


def job_pod(i):
    return {"metadata": {"name": f"job-{i}", "namespace": "train", "uid": f"u{i}",
                         "labels": {"batch.kubernetes.io/job-name": "job",
                                    "batch.kubernetes.io/job-completion-index": str(i)}},
            "spec": {"nodeName": f"node-{i}", "initContainers": [{"name": "nicpick"}],
                     "containers": [{"name": "main"}]},
            "status": {"phase": "Pending"}}


def test_status_reads_every_page_of_the_jobs_pods(nicpick_bin, tls, tmp_path):
    """A job's pods in two pages: status asks with a limit and follows the
    continue token, and shows the pods of both (one answer with every pod
    would be read whole, as large as the job)."""
    def respond(s, conn):
        path = s.requests[-1][0].split()[1]
        if "/events" in path:
            body = {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": []}
        else:
            last = "continue=c1" in path
            body = {"kind": "PodList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": "7", "continue": "" if last else "c1"},
                    "items": [job_pod(1 if last else 0)]}
        b = json.dumps(body).encode()
        s.send(conn, header("200 OK", len(b)) + b)
    p, _, lists = run_status(nicpick_bin, tls, Hostile(tls, respond), tmp_path)
    assert lists and all("limit=500" in q for q in lists), lists
    assert any("continue=c1" in q for q in lists), lists
    view = json.loads(p.stdout)
    assert [x["name"] for x in view["pods"]] == ["job-0", "job-1"], view


def test_status_watch_lists_in_pages_too(nicpick_bin, tls, tmp_path):
    """--watch lists the pods again before it watches (and after a 410):
    in pages as well.  The watch itself is never answered: the deadline
    ends the run."""
    def respond(s, conn):
        path = s.requests[-1][0].split()[1]
        if "watch=1" in path:
            while not s.stop:
                time.sleep(0.1)
            return
        if "/events" in path:
            body = {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": []}
        else:
            body = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
                    "items": [job_pod(0)]}
        b = json.dumps(body).encode()
        s.send(conn, header("200 OK", len(b)) + b)
    server = Hostile(tls, respond)
    p, _, lists = run_status(nicpick_bin, tls, server, tmp_path, "--watch", "--request-timeout",
                             "3")
    assert p.returncode == 5, f"exit {p.returncode}\n{p.stderr}"
    assert any("watch=1" in line for line, _ in server.requests), server.requests
    assert len(lists) >= 2 and all("limit=500" in q for q in lists), lists
    first, _ = json.JSONDecoder().raw_decode(p.stdout)  # the views, one after the other
    assert [x["name"] for x in first["pods"]] == ["job-0"], p.stdout


LIST_HEAD = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":['
SMALL_POD = b'{"metadata":{"name":"job-x","annotations":{"a":"' + b"x" * 100 + b'"}}}'


@pytest.mark.parametrize("item,mib,said", [
    # parsed, each `{}` an object of 200 bytes: over the budget of every
    # page, down to a page of one pod
    (b"{}", 3, "?limit=1&labelSelector=batch.kubernetes.io%2Fjob-name%3Djob: the answer, "
               "3.0 MiB of JSON, would take more than 64 MiB of memory to parse"),
    # 41,000 small pods, parsed within the budget, where 500 were asked for
    # (status' view of each pod took 10 KB more: 400 MiB)
    (SMALL_POD, 6, "?limit=500&labelSelector=batch.kubernetes.io%2Fjob-name%3Djob: the answer "
                   "has 41120 pods, more than the 500 asked for: refused"),
])
def test_status_refuses_a_list_that_would_fill_memory(nicpick_bin, tls, tmp_path, item, mib, said):
    """A server that ignores the limit and answers the pod list with MiB of
    values.  Read whole (up to 64 MiB) and parsed with no ceiling on its
    budget, the second took status to 400 MiB.  Its pages are bounded as
    select's are (lib/k8s: bytes, the parse's budget, the pods asked for):
    one error line, exit 5, and peak RSS near that of a run that reads
    nothing."""
    n = ((mib << 20) - len(LIST_HEAD) - 16) // (len(item) + 1)
    body = LIST_HEAD + (item + b",") * (n - 1) + item + b"]}"

    def respond(s, conn):
        s.send(conn, header("200 OK", len(body)) + body)
    p, maxrss, lists = run_status(nicpick_bin, tls, Hostile(tls, respond), tmp_path)
    assert lists and all("limit=" in q for q in lists), lists
    assert p.returncode == 5, f"exit {p.returncode}\n{p.stderr}"
    errors = [l for l in p.stderr.splitlines() if "error:" in l]
    assert len(errors) == 1, p.stderr
    assert said in errors[0], errors[0]
    if not os.environ.get("NICPICK_SANITIZED"):
        assert maxrss < 128 * 1024, f"peak RSS {maxrss} KiB"
