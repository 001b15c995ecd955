"""The static release binary (`make static`) on a root file system that
holds nothing but the binary, the service account's files and the
/etc/hosts and /etc/resolv.conf a pod has (chroot, in a network namespace):
no libc, no NSS, no CA bundle, no shell.  /proc and /sys are mounted as a
container runtime mounts them."""
import os
import pathlib
import re
import shutil
import struct
import subprocess

import pytest

import cluster as C
import podnet

STATIC = os.environ.get("NICPICK_STATIC") or str(C.ROOT / "build" / "static" / "nicpick")
SIZE_GOAL = 5 << 20


@pytest.fixture(scope="module")
def static_bin():
    if not os.path.isfile(STATIC):
        msg = f"{STATIC} not found: run `make static`"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return STATIC


def elf_program_headers(path):
    """(e_machine, [p_type, ...]) of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        ident = f.read(64)
        assert ident[:4] == b"\x7fELF" and ident[4] == 2 and ident[5] == 1, "not ELF64 LE"
        e_machine = struct.unpack_from("<H", ident, 18)[0]
        e_phoff, = struct.unpack_from("<Q", ident, 32)
        e_phentsize, e_phnum = struct.unpack_from("<HH", ident, 54)
        types = []
        for i in range(e_phnum):
            f.seek(e_phoff + i * e_phentsize)
            types.append(struct.unpack("<I", f.read(4))[0])
    return e_machine, types


PT_DYNAMIC, PT_INTERP, EM_X86_64 = 2, 3, 62


def test_static_binary_has_no_interpreter_and_no_dynamic_section(static_bin):
    machine, types = elf_program_headers(static_bin)
    assert machine == EM_X86_64
    assert PT_INTERP not in types, "has a program interpreter"
    assert PT_DYNAMIC not in types, "has a dynamic section (NEEDED libraries)"
    size = os.path.getsize(static_bin)
    assert size <= SIZE_GOAL, f"{size} bytes, over the {SIZE_GOAL} byte goal"


def test_static_allocates_with_mimalloc(static_bin):
    """The release binary's malloc is mimalloc's, not musl's (Makefile,
    scripts/static-deps.sh): mimalloc names its options on stderr when
    MIMALLOC_VERBOSE=1 (mimalloc 2.0.9 src/options.c, mi_options_init), and
    says nothing without it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")}
    plain = subprocess.run([static_bin, "version"], capture_output=True, text=True, env=env,
                           timeout=30)
    assert plain.returncode == 0 and plain.stderr == "", plain
    verbose = subprocess.run([static_bin, "version"], capture_output=True, text=True,
                             env=dict(env, MIMALLOC_VERBOSE="1"), timeout=30)
    assert verbose.returncode == 0, verbose
    assert "mimalloc: option 'verbose': 1" in verbose.stderr, verbose.stderr
    assert verbose.stdout == plain.stdout


def test_release_smoke_companion_needs_only_glibc(static_bin):
    """nicpick-smoke ships beside the static nicpick into the training
    image: glibc is the one library it may ask of that image."""
    smoke = os.path.join(os.path.dirname(static_bin), "nicpick-smoke")
    assert os.path.isfile(smoke), f"{smoke} missing: `make static` builds it"
    d = subprocess.run(["readelf", "-dW", smoke], capture_output=True, text=True, check=True)
    needed = re.findall(r"\(NEEDED\).*\[(.+?)\]", d.stdout)
    assert needed == ["libc.so.6"], needed
    sections = subprocess.run(["readelf", "-SW", smoke], capture_output=True, text=True,
                              check=True).stdout
    assert ".symtab" not in sections, "not stripped"


@pytest.fixture
def pod_root(tmp_path, static_bin):
    """root/: nicpick, etc/hosts, etc/resolv.conf, mount points, an emptyDir."""
    root = tmp_path / "root"
    for d in ("etc", "proc", "sys", "nicpick", podnet.SA_DIR):
        (root / d).mkdir(parents=True)
    shutil.copy(static_bin, root / "nicpick" / "nicpick")
    (root / "etc" / "hosts").write_text(podnet.HOSTS)
    (root / "etc" / "resolv.conf").write_text(podnet.RESOLV)
    return root


@pytest.fixture
def net(netns, tmp_path):
    n = podnet.PodNet(netns, tmp_path).start()
    yield n
    n.close()


def in_root(ns, root, *args, timeout=60, env=None):
    """/nicpick/nicpick ARGS chrooted into root, in namespace ns, with a
    pod's environment (and env); the mounts vanish with `ip netns exec`'s
    own mount namespace."""
    script = ('mount --rbind /sys "$1/sys" && mount -t proc proc "$1/proc" && '
              'exec chroot "$@"')
    return subprocess.run(["ip", "netns", "exec", ns.name, "sh", "-c", script, "sh",
                           str(root), "/nicpick/nicpick", *args],
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME": podnet.POD,
                               **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def install_sa(net, root):
    sa = root / podnet.SA_DIR
    shutil.copy(net.ca_path, sa / "ca.crt")
    shutil.copy(net.token_path, sa / "token")
    (sa / "namespace").write_text(podnet.NAMESPACE)


def ec_ca(key, crt, cn):
    """A self-signed P-256 CA: key and certificate files (openssl CLI)."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "1", "-subj", f"/CN={cn}"],
                   check=True, capture_output=True, timeout=60)


def test_static_discover_in_an_empty_root(net, pod_root):
    p = in_root(net.node, pod_root, "discover")
    assert p.returncode == 0, p.stderr
    rows = {l.split()[0]: l for l in p.stdout.splitlines()[1:]}
    assert set(rows) == {"lo", "eth0"}, p.stdout
    assert podnet.NODE_ADDR + "/24" in rows["eth0"] and "usable" in rows["eth0"], p.stdout
    j = in_root(net.node, pod_root, "discover", "--json")
    assert j.returncode == 0 and j.stdout.startswith("["), j.stderr


def test_static_select_through_the_api_server_by_host_name(net, pod_root):
    install_sa(net, pod_root)
    p = in_root(net.node, pod_root, *net.select_args(), "--timeout", "30")
    assert p.returncode == 0, p.stderr
    env = (pod_root / "nicpick" / "nccl.env").read_text()
    assert "NCCL_SOCKET_IFNAME='=eth0'" in env, env
    res = net.result_annotation()
    assert res and "eth0" in res, res
    # The name came from /etc/hosts: nothing about it was asked of DNS.
    assert not any(podnet.API_HOST in n for n in net.dns.names), net.dns.names


def assert_selected(p, net, root):
    assert p.returncode == 0, p.stderr
    env = (root / "nicpick" / "nccl.env").read_text()
    assert "NCCL_SOCKET_IFNAME='=eth0'" in env, env
    res = net.result_annotation()
    assert res and "eth0" in res, res


def test_static_select_through_the_api_server_by_ip_address(net, pod_root):
    """A real cluster's API server is an IP address whose certificate holds
    it as an iPAddress subjectAltName; TLS is verified against --ca-file."""
    install_sa(net, pod_root)
    url = f"https://{podnet.API_ADDR}:{net.port}"
    p = in_root(net.node, pod_root, *net.select_args(server=url), "--timeout", "30")
    assert_selected(p, net, pod_root)


def test_static_select_in_cluster_by_service_ip(net, pod_root):
    """In a pod: KUBERNETES_SERVICE_HOST (an IP address) and _PORT, POD_NAME
    from the downward API, and the service account's token, CA and namespace
    at their standard path."""
    install_sa(net, pod_root)
    p = in_root(net.node, pod_root, "select", "--peers", "k8s", "--smoke", "off",
                "--out-dir", "/nicpick", "--expect", "1", "--timeout", "30",
                env={"POD_NAME": podnet.POD, "KUBERNETES_SERVICE_HOST": podnet.API_ADDR,
                     "KUBERNETES_SERVICE_PORT": str(net.port)})
    assert_selected(p, net, pod_root)


@pytest.fixture
def net6(netns, tmp_path):
    """The pod network with IPv6 addresses too, the certificate naming both."""
    n = podnet.PodNet(netns, tmp_path, sans=[podnet.API_ADDR, podnet.API_ADDR6, podnet.API_HOST],
                      ipv6=True).start()
    yield n
    n.close()


def test_static_select_in_cluster_by_ipv6_service_ip(net6, pod_root):
    install_sa(net6, pod_root)
    p = in_root(net6.node, pod_root, "select", "--peers", "k8s", "--smoke", "off",
                "--out-dir", "/nicpick", "--expect", "1", "--timeout", "30",
                env={"POD_NAME": podnet.POD, "KUBERNETES_SERVICE_HOST": podnet.API_ADDR6,
                     "KUBERNETES_SERVICE_PORT": str(net6.port)})
    assert_selected(p, net6, pod_root)


@pytest.fixture
def net_name_only(netns, tmp_path):
    """The API server with a certificate for its host name, not its address."""
    n = podnet.PodNet(netns, tmp_path, sans=[podnet.API_HOST]).start()
    yield n
    n.close()


def test_static_ip_address_not_in_the_certificate_fails_with_exit_5(net_name_only, pod_root):
    net = net_name_only
    install_sa(net, pod_root)
    url = f"https://{podnet.API_ADDR}:{net.port}"
    p = in_root(net.node, pod_root, *net.select_args(server=url), "--timeout", "10")
    assert p.returncode == 5, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    # curl's text (lib/vtls/openssl.c, ossl_verifyhost) for an IP address
    # no subjectAltName names
    assert "nicpick: error:" in last and "no alternative certificate subject name matches target ipv4 address" in last, p.stderr
    assert "\\x0a" not in last, last
    assert net.result_annotation() is None
    assert not (pod_root / "nicpick" / "nccl.env").exists()
    # The same server and CA by the name the certificate holds: accepted.
    p = in_root(net.node, pod_root, *net.select_args(), "--timeout", "30")
    assert_selected(p, net, pod_root)


def test_static_verifies_tls_against_the_ca_file(net, pod_root, tmp_path):
    install_sa(net, pod_root)
    other = tmp_path / "other"
    other.mkdir()
    ec_ca(other / "k", pod_root / podnet.SA_DIR / "ca.crt", "another-ca")
    p = in_root(net.node, pod_root, *net.select_args(), "--timeout", "10")
    assert p.returncode == 5, p.stderr
    # curl's "SSL certificate problem: " with OpenSSL's
    # X509_verify_cert_error_string(): the server sends its CA along, and
    # that CA is not the one nicpick trusts
    assert "SSL certificate problem: self-signed certificate in certificate chain" in p.stderr, p.stderr
    assert net.result_annotation() is None
    assert not (pod_root / "nicpick" / "nccl.env").exists()


def test_static_unknown_api_host_fails_with_exit_5(net, pod_root):
    install_sa(net, pod_root)
    url = f"https://nosuch.test.internal:{net.port}"
    p = in_root(net.node, pod_root, *net.select_args(server=url), "--timeout", "5")
    assert p.returncode == 5, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "nicpick: error:" in last and "nosuch.test.internal" in last, p.stderr
    assert "Could not resolve host" in last, p.stderr
    # resolv.conf was read: the search path went to the cluster DNS.
    assert "nosuch.test.internal.svc.cluster.local" in net.dns.names, net.dns.names
    assert not (pod_root / "nicpick" / "nccl.env").exists()


@pytest.fixture
def net_tls13(netns, tmp_path, monkeypatch):
    """An API server that speaks TLS 1.3 only (kube-apiserver
    --tls-min-version=VersionTLS13; tools/kubeapi reads the same choice
    from $KUBEAPI_TLS_MIN_VERSION)."""
    monkeypatch.setenv("KUBEAPI_TLS_MIN_VERSION", "VersionTLS13")
    n = podnet.PodNet(netns, tmp_path).start()
    yield n
    n.close()


def tls_handshake(ns_name, addr, port, ca, maximum):
    """A handshake from namespace ns_name, at most TLS version `maximum`:
    the version agreed, or the ssl error's text."""
    import socket
    import ssl

    def go():
        ctx = ssl.create_default_context(cafile=ca)
        ctx.check_hostname = False
        ctx.maximum_version = maximum
        try:
            with socket.create_connection((addr, port), timeout=10) as s, \
                    ctx.wrap_socket(s) as t:
                return t.version()
        except ssl.SSLError as e:
            return f"refused: {e}"
    return C.in_netns(ns_name, go)


def test_static_select_with_a_tls13_only_api_server(net_tls13, pod_root):
    """The release binary speaks TLS 1.3 (OpenSSL 3.5 with curl 8): an API
    server that accepts nothing older is no obstacle (issue 14)."""
    import ssl
    net = net_tls13
    # The server is TLS 1.3-only indeed: a TLS 1.2 client is refused.
    got = tls_handshake(net.node.name, podnet.API_ADDR, net.port, str(net.ca_path),
                        ssl.TLSVersion.TLSv1_2)
    assert got.startswith("refused"), got
    assert tls_handshake(net.node.name, podnet.API_ADDR, net.port, str(net.ca_path),
                         ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
    install_sa(net, pod_root)
    p = in_root(net.node, pod_root, *net.select_args(), "--timeout", "30")
    assert_selected(p, net, pod_root)


def test_static_handshake_the_server_refuses_ends_the_run_at_once(net, pod_root):
    """A TLS server that refuses every handshake from nicpick (here: it
    wants a client certificate nicpick does not have): retrying cannot fix
    that, so the run ends at once, saying what is wrong, not at its
    deadline with the library's alert text."""
    import socket
    import ssl
    import threading
    import time
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*[str(p) for p in server_cert(net)])
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(str(net.ca_path))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # the alert comes in the handshake

    def listen():
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((podnet.API_ADDR, 0))
        s.listen(16)
        return s
    lsock = C.in_netns(net.api.name, listen)
    port = lsock.getsockname()[1]
    stop = threading.Event()

    def serve():
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = lsock.accept()
            except OSError:
                continue
            # The alert is sent, then the socket is kept a moment: closed at
            # once with the client's data unread, the kernel would reset the
            # connection and the client might read a reset instead.
            c.settimeout(2)
            tls = ctx.wrap_socket(c, server_side=True, do_handshake_on_connect=False)
            try:
                tls.do_handshake()
            except (ssl.SSLError, OSError):
                time.sleep(0.5)
            tls.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        install_sa(net, pod_root)
        url = f"https://{podnet.API_HOST}:{port}"
        t0 = time.monotonic()
        p = in_root(net.node, pod_root, *net.select_args(server=url), "--timeout", "30")
        took = time.monotonic() - t0
    finally:
        stop.set()
        t.join(5)
        lsock.close()
    assert p.returncode == 5, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "refused the TLS handshake" in last and "retrying cannot change" in last, p.stderr
    # libssl's texts are loaded (SSL_CTX_new) though libcrypto's are not.
    assert "alert" in last and "reason(" not in last, p.stderr
    assert took < 5, f"{took:.1f} s: the handshake was retried\n{p.stderr}"


def server_cert(net):
    """The test API server's certificate and key (tools/kubeapi/tls.py
    writes them beside its CA)."""
    d = pathlib.Path(net.ca_path).parent
    return d / "server.crt", d / "server.key"


def test_static_dns_that_never_answers_is_named_dns(net, pod_root):
    """A cluster DNS that does not answer: the error says DNS (it used to
    say only that a deadline passed)."""
    import socket

    def silent():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((podnet.API_ADDR, 53))  # receives, never answers
        return s
    sock = C.in_netns(net.api.name, silent)
    try:
        (pod_root / "etc" / "resolv.conf").write_text(f"nameserver {podnet.API_ADDR}\n")
        install_sa(net, pod_root)
        url = f"https://nosuch.test.internal:{net.port}"
        p = in_root(net.node, pod_root, *net.select_args(server=url), "--timeout", "6")
    finally:
        sock.close()
    assert p.returncode == 5, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert "DNS: Resolving timed out" in last, p.stderr


# --- the key exchange the release binary offers: OpenSSL 3.5's defaults,
# key shares for the hybrid post-quantum X25519MLKEM768 and for X25519, the
# two that Go 1.24's crypto/tls (the API server's) prefers, so no
# HelloRetryRequest.  Names and numbers: RFC 8446 4.1.2 (ClientHello), 4.2.7
# (supported_groups, 0x000a), 4.2.8 (key_share, 0x0033); x25519 = 0x001d,
# secp256r1 = 0x0017, X25519MLKEM768 = 0x11ec (IANA TLS Supported Groups).

def client_hello_groups(data):
    """(supported_groups, key_share groups) of the TLS ClientHello that
    starts `data` (one record, as a client's first flight is)."""
    assert data[0] == 22, "not a handshake record"
    rec_len = struct.unpack_from(">H", data, 3)[0]
    body = data[5:5 + rec_len]
    assert body[0] == 1, "not a ClientHello"
    p = 4 + 2 + 32
    p += 1 + body[p]                                       # legacy_session_id
    p += 2 + struct.unpack_from(">H", body, p)[0]          # cipher_suites
    p += 1 + body[p]                                       # legacy_compression_methods
    end = p + 2 + struct.unpack_from(">H", body, p)[0]
    p += 2
    supported, shares = [], []
    while p < end:
        typ, n = struct.unpack_from(">HH", body, p)
        ext = body[p + 4:p + 4 + n]
        p += 4 + n
        if typ == 0x000a:
            supported = [struct.unpack_from(">H", ext, 2 + 2 * i)[0]
                         for i in range(struct.unpack_from(">H", ext, 0)[0] // 2)]
        elif typ == 0x0033:
            q = 2
            while q < 2 + struct.unpack_from(">H", ext, 0)[0]:
                g, kl = struct.unpack_from(">HH", ext, q)
                shares.append(g)
                q += 4 + kl
    return supported, shares


def status_kubeconfig(path, url, ca, namespace="default", user="    token: t0ken\n"):
    """A kubeconfig for `nicpick status`: url, ca (None: the kubeconfig
    names no CA) and the user's lines."""
    ca_line = f"    certificate-authority: {ca}\n" if ca else ""
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: {url}
{ca_line}contexts:
- name: c
  context: {{cluster: c, user: u, namespace: {namespace}}}
current-context: c
users:
- name: u
  user:
{user}""")
    return path


def capture_client_hello(lsock):
    """Accept one connection on the listening socket lsock in a thread:
    read the ClientHello it starts with, then answer a fatal
    handshake_failure alert (a refused handshake ends a run at once).
    Returns (thread, got); got["hello"] holds the record once the thread
    has ended."""
    import threading
    got = {}

    def accept():
        lsock.settimeout(30)
        c, _ = lsock.accept()
        c.settimeout(10)
        buf = b""
        while len(buf) < 5 or len(buf) < 5 + struct.unpack_from(">H", buf, 3)[0]:
            chunk = c.recv(65536)
            if not chunk:
                break
            buf += chunk
        got["hello"] = buf
        c.sendall(bytes([21, 3, 3, 0, 2, 2, 40]))
        c.close()
    t = threading.Thread(target=accept)
    t.start()
    return t, got


def test_static_offers_post_quantum_and_x25519_key_shares(static_bin, tmp_path):
    """Under a kubeconfig's credential (`nicpick status`), OpenSSL 3.5's
    own groups: the hybrid post-quantum key share first."""
    import socket
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    t, got = capture_client_hello(ls)
    ca = tmp_path / "ca.crt"
    ec_ca(tmp_path / "k", ca, "x")
    kc = status_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{ls.getsockname()[1]}", ca)
    p = subprocess.run([static_bin, "status", "job"], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, KUBECONFIG=str(kc), HOME=str(tmp_path)))
    t.join(30)
    ls.close()
    assert p.returncode == 5 and "refused the TLS handshake" in p.stderr, p.stderr
    supported, shares = client_hello_groups(got["hello"])
    assert shares == [0x11ec, 0x001d], shares
    assert {0x11ec, 0x001d, 0x0017} <= set(supported), supported


def test_static_select_offers_one_p256_key_share_under_the_pods_token(net, pod_root):
    """Under the pod's own bound token (`select` in a pod), one key share,
    P-256's, then X25519 and P-384 without one, and no post-quantum group:
    its key generation and decapsulation were 13 % of a follower's
    instructions, for traffic that has nothing to keep secret for years
    (lib/k8s/tls_groups.h; docs/security.md).  P-256 is the
    group every TLS 1.3 server must take (RFC 8446 9.1), and Go's server
    takes the key share it was sent before any group it prefers
    (crypto/tls, handshake_server_tls13.go), so no HelloRetryRequest."""
    import socket

    def listen():
        s = socket.socket()
        s.bind((podnet.API_ADDR, 0))
        s.listen(1)
        return s
    lsock = C.in_netns(net.api.name, listen)
    t, got = capture_client_hello(lsock)
    install_sa(net, pod_root)
    url = f"https://{podnet.API_HOST}:{lsock.getsockname()[1]}"
    p = in_root(net.node, pod_root, *net.select_args(server=url), "--timeout", "30")
    t.join(30)
    lsock.close()
    assert p.returncode == 5 and "refused the TLS handshake" in p.stderr, p.stderr
    supported, shares = client_hello_groups(got["hello"])
    assert shares == [0x0017], shares
    assert supported == [0x0017, 0x001d, 0x0018], supported


@pytest.mark.parametrize("verb", ["status", "select"])
@pytest.mark.parametrize("group", ["X25519", "P-256", "P-384"])
def test_static_completes_the_handshake_with_a_server_that_takes_one_group(static_bin, tmp_path, group, verb):
    """A server that takes only a group nicpick sent no key share for
    answers with a HelloRetryRequest: the release binary must follow it,
    under a kubeconfig's credential (status) and under the pod's token
    (select), whose groups differ.  (openssl s_server -www answers HTTP
    with a page that is not the API's JSON, so the run fails after the
    handshake, with exit 5, and says why.)"""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ca_key, ca = tmp_path / "ca.key", tmp_path / "ca.crt"
    ec_ca(ca_key, ca, "test-ca")
    key, csr, crt = tmp_path / "s.key", tmp_path / "s.csr", tmp_path / "s.crt"
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    ext = tmp_path / "ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
                    "-CAcreateserial", "-out", str(crt), "-days", "1", "-extfile", str(ext)],
                   check=True, capture_output=True, timeout=60)
    srv = subprocess.Popen(["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(crt),
                            "-key", str(key), "-groups", group, "-tls1_3", "-www", "-naccept", "1"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        lines = []
        while not lines or lines[-1] not in ("ACCEPT", ""):  # ACCEPT: listening
            lines.append(srv.stdout.readline().strip())
        assert lines[-1] == "ACCEPT", lines
        url = f"https://127.0.0.1:{port}"
        if verb == "status":
            kc = status_kubeconfig(tmp_path / "kc", url, ca)
            cmd, env = [static_bin, "status", "job"], {"KUBECONFIG": str(kc), "HOME": str(tmp_path)}
        else:
            (tmp_path / "token").write_text("t0ken\n")
            cmd = [static_bin, "select", "--peers", "k8s", "--smoke", "off", "--out-dir",
                   str(tmp_path / "out"), "--api-server", url, "--ca-file", str(ca), "--token-file",
                   str(tmp_path / "token"), "--namespace", "default", "--pod-name", "p", "--expect",
                   "1", "--timeout", "20"]
            env = {}
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))
        out, _ = srv.communicate(timeout=10)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    assert p.returncode == 5, p.stderr
    assert "TLS" not in p.stderr and "SSL" not in p.stderr and "handshake" not in p.stderr, p.stderr
    assert "nicpick: error:" in p.stderr, p.stderr
    assert "error" not in out.lower(), out  # s_server saw a clean handshake


def test_static_kubeconfig_without_a_ca_trusts_the_systems_store_only(net, pod_root):
    """A kubeconfig that names no CA (the kubectl plugin against a publicly
    trusted API server) is verified against the system's store,
    /etc/ssl/certs with OpenSSL's hashed names, as kubectl uses the system's
    roots; an image without one (FROM scratch) trusts nothing."""
    kc = status_kubeconfig(pod_root / "kubeconfig", net.url, None, podnet.NAMESPACE,
                           f"    token: {net.token_path.read_text().strip()}\n")
    env = {"KUBECONFIG": "/kubeconfig", "HOME": "/"}
    p = in_root(net.node, pod_root, "status", "job", env=env)
    assert p.returncode == 5, p.stderr
    assert "SSL certificate problem" in p.stderr, p.stderr
    certs = pod_root / "etc" / "ssl" / "certs"
    certs.mkdir(parents=True)
    h = subprocess.run(["openssl", "x509", "-noout", "-hash", "-in", str(net.ca_path)], check=True,
                       capture_output=True, text=True, timeout=30).stdout.strip()
    shutil.copy(net.ca_path, certs / f"{h}.0")
    p = in_root(net.node, pod_root, "status", "job", env=env)
    assert "SSL" not in p.stderr and "certificate" not in p.stderr, p.stderr
    assert p.returncode in (0, 5), p.stderr
    # a CA the kubeconfig names is the only one trusted, the store or not
    other = pod_root / "other-ca.crt"
    ec_ca(pod_root / "k", other, "another-ca")
    kc.write_text(kc.read_text().replace(f"    server: {net.url}\n",
                                         f"    server: {net.url}\n    certificate-authority: /other-ca.crt\n"))
    p = in_root(net.node, pod_root, "status", "job", env=env)
    assert p.returncode == 5 and "SSL certificate problem" in p.stderr, p.stderr


@pytest.fixture(params=[("ec", "sha256"), ("rsa", "sha256"), ("rsa-pss", "sha256"),
                        ("ec", "sha384"), ("rsa", "sha512")])
def net_keys(request, netns, tmp_path, monkeypatch):
    """The API server with each kind of certificate a cluster's CA makes:
    ECDSA P-256, RSA-2048 (kubeadm's) and RSA-2048 signed with RSASSA-PSS,
    signed with each digest Go's crypto/x509 signs with (tools/kubeapi/tls.py,
    KUBEAPI_CERT_KEY and KUBEAPI_CERT_DIGEST)."""
    monkeypatch.setenv("KUBEAPI_CERT_KEY", request.param[0])
    monkeypatch.setenv("KUBEAPI_CERT_DIGEST", request.param[1])
    n = podnet.PodNet(netns, tmp_path).start()
    yield n
    n.close()


@pytest.fixture
def net_sha224(netns, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBEAPI_CERT_DIGEST", "sha224")
    n = podnet.PodNet(netns, tmp_path).start()
    yield n
    n.close()


def test_static_refuses_a_certificate_signed_with_a_digest_go_does_not_verify(net_sha224, pod_root):
    """Like kubectl (Go's crypto/x509 verifies SHA-256, SHA-384 and SHA-512
    signatures only), the release binary does not accept a server
    certificate signed with SHA-224, and says so at once."""
    net = net_sha224
    install_sa(net, pod_root)
    p = in_root(net.node, pod_root, *net.select_args(), "--timeout", "20")
    assert p.returncode == 5, p.stderr
    assert "SSL certificate problem: CA signature digest algorithm too weak" in p.stderr, p.stderr


def client_key_and_cert(ca, ca_key, d, form):
    """A client key in one of the forms a kubeconfig carries (kubeadm writes
    PKCS#1 RSA and SEC1 EC keys; openssl req, PKCS#8) and its certificate
    for system:admin, signed by the API server's CA."""
    gen = {"rsa-pkcs1": ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
           "ec-sec1": ["ecparam", "-name", "prime256v1", "-genkey", "-noout"],
           "ec-pkcs8": ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]}[form]
    key, csr, crt, ext = (d / f"{form}.{n}" for n in ("key", "csr", "crt", "ext"))
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, timeout=60)  # noqa: E731
    run(*gen, "-out", str(key))
    if form == "rsa-pkcs1":
        run("rsa", "-traditional", "-in", str(key), "-out", str(key))
    ext.write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    run("req", "-new", "-key", str(key), "-out", str(csr), "-subj", "/CN=system:admin")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-set_serial", "9",
        "-days", "2", "-out", str(crt), "-extfile", str(ext))
    head = key.read_text().splitlines()[0]
    assert head == {"rsa-pkcs1": "-----BEGIN RSA PRIVATE KEY-----",
                    "ec-sec1": "-----BEGIN EC PRIVATE KEY-----",
                    "ec-pkcs8": "-----BEGIN PRIVATE KEY-----"}[form], head
    return key, crt


def test_static_status_says_in_words_why_a_client_certificate_cannot_be_used(net, pod_root):
    """Only `status` reads a kubeconfig, so only it loads the texts of
    libcrypto's errors (cmd/nicpick/main.c): a client certificate OpenSSL
    cannot read is named in OpenSSL's words, not by its code alone."""
    shutil.copy(net.ca_path, pod_root / "ca.crt")
    (pod_root / "bad.crt").write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n"
                                      "-----END CERTIFICATE-----\n")
    key, _ = client_key_and_cert(pathlib.Path(net.ca_path), pathlib.Path(net.ca_path).parent / "ca.key",
                                 pod_root, "ec-sec1")
    kc = status_kubeconfig(pod_root / "kc-bad", net.url, "/ca.crt", podnet.NAMESPACE,
                           f"    client-certificate: /bad.crt\n    client-key: /{key.name}\n")
    p = in_root(net.node, pod_root, "status", "job", env={"KUBECONFIG": f"/{kc.name}", "HOME": "/"})
    assert p.returncode == 5, (p.stdout, p.stderr)
    assert "could not load PEM client certificate" in p.stderr, p.stderr
    assert " routines:" in p.stderr and "lib(" not in p.stderr and "reason(" not in p.stderr, p.stderr


def test_static_verifies_each_kind_of_certificate_and_signs_with_each_kind_of_key(net_keys, pod_root):
    """The release binary's OpenSSL, built without most of its algorithms
    and started without the legacy cipher-name table and with only SHA-256,
    SHA-384 and SHA-512 in its digest table (cmd/nicpick/main.c),
    verifies a server certificate of each kind (an RSASSA-PSS signature
    looks its digests up by NID: rsa_ameth.c) and signs the handshake with
    a client key of each form."""
    net = net_keys
    install_sa(net, pod_root)
    p = in_root(net.node, pod_root, *net.select_args(), "--timeout", "30")
    assert_selected(p, net, pod_root)
    ca = pathlib.Path(net.ca_path)
    sig = subprocess.run(["openssl", "x509", "-noout", "-text", "-in", str(ca)], check=True,
                         capture_output=True, text=True, timeout=30).stdout
    digest = os.environ["KUBEAPI_CERT_DIGEST"]
    want = {"ec": f"ecdsa-with-{digest.upper()}", "rsa": f"{digest}WithRSAEncryption",
            "rsa-pss": "rsassaPss"}[os.environ["KUBEAPI_CERT_KEY"]]
    assert f"Signature Algorithm: {want}" in sig, sig
    if want == "rsassaPss":
        assert f"Hash Algorithm: {digest}" in sig, sig
    shutil.copy(ca, pod_root / "ca.crt")
    for form in ("rsa-pkcs1", "ec-sec1", "ec-pkcs8"):
        key, crt = client_key_and_cert(ca, ca.parent / "ca.key", pod_root, form)
        kc = status_kubeconfig(pod_root / f"kc-{form}", net.url, "/ca.crt", podnet.NAMESPACE,
                               f"    client-certificate: /{crt.name}\n    client-key: /{key.name}\n")
        p = in_root(net.node, pod_root, "status", "job", env={"KUBECONFIG": f"/{kc.name}", "HOME": "/"})
        assert p.returncode == 0, (form, p.stdout, p.stderr)
        assert "decided" in p.stdout, (form, p.stdout)
