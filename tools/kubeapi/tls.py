"""The CA, the server certificate (openssl CLI), kubeconfig files, and the server's
TLS 1.3 cipher suite order."""

import ctypes
import os
import random
import re
import ssl
import subprocess


def ensure_certs(state_dir, sans):
    """CA + server cert via the openssl CLI; regenerated only when missing or SANs change."""
    p = lambda n: os.path.join(state_dir, n)   # noqa: E731
    ips = ["127.0.0.1", "::1"]
    dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
           "kubernetes.default.svc.cluster.local"]
    for s in sans:
        is_ip = re.match(r"^[\d.]+$", s) or ":" in s
        (ips if is_ip else dns).append(s)
    san = ",".join([f"IP:{i}" for i in ips] + [f"DNS:{d}" for d in dns])

    # The openssl command with its own libraries, whatever the server's
    # Python loads (KUBEAPI_LIBSSL_DIR, client.py).
    cli_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}

    def run(*args):
        r = subprocess.run(["openssl", *args], capture_output=True, text=True, env=cli_env)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args)} failed: {r.stderr}")
    # ECDSA P-256 by default; KUBEAPI_CERT_KEY=rsa: RSA-2048, as kubeadm makes
    # (bench/agree measures a pod's TLS cost against both); rsa-pss: RSA-2048
    # keys, the certificates signed with RSASSA-PSS, as a CA that signs with
    # PSS makes them (test_static: the release binary verifies all three).
    kind = os.environ.get("KUBEAPI_CERT_KEY", "ec")
    if kind not in ("ec", "rsa", "rsa-pss"):
        raise ValueError(f"KUBEAPI_CERT_KEY={kind}: ec, rsa or rsa-pss")
    ec = ["-newkey", "rsa:2048", "-nodes"] if kind != "ec" \
        else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    sig = ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"] \
        if kind == "rsa-pss" else []
    # KUBEAPI_CERT_DIGEST: what the CA signs with, SHA-256 by default;
    # sha384 and sha512 as Go's crypto/x509 also signs, sha224 as it does not.
    digest = os.environ.get("KUBEAPI_CERT_DIGEST", "sha256")
    if digest not in ("sha224", "sha256", "sha384", "sha512"):
        raise ValueError(f"KUBEAPI_CERT_DIGEST={digest}: sha224, sha256, sha384 or sha512")
    sig = [f"-{digest}", *sig]
    if not (os.path.exists(p("ca.crt")) and os.path.exists(p("ca.key"))):
        run("req", "-x509", *ec, *sig, "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "3650",
            "-subj", "/CN=nicpick-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        for n in ("server.crt", "sans"):
            if os.path.exists(p(n)):
                os.unlink(p(n))
    old = open(p("sans")).read() if os.path.exists(p("sans")) else None
    if old != san or not os.path.exists(p("server.crt")):
        with open(p("server.ext"), "w") as f:
            f.write(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,"
                    f"keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName={san}\n"
                    "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
        run("req", "-new", *ec, "-keyout", p("server.key"), "-out", p("server.csr"),
            "-subj", "/CN=kube-apiserver")
        run("x509", "-req", *sig, "-in", p("server.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
            "-set_serial", str(random.randrange(1, 2 ** 62)), "-days", "3650",
            "-out", p("server.crt"), "-extfile", p("server.ext"))
        with open(p("sans"), "w") as f:
            f.write(san)
    return p("server.crt"), p("server.key"), p("ca.crt")


def kubeconfig_text(url, ca_path, token, namespace):
    """A kubeconfig (YAML) that kubectl and the Python client read as they are."""
    return (f"apiVersion: v1\nkind: Config\nclusters:\n- name: kubeapi\n  cluster:\n"
            f"    server: {url}\n    certificate-authority: {ca_path}\n"
            f"contexts:\n- name: kubeapi\n  context:\n    cluster: kubeapi\n"
            f"    user: kubeapi\n    namespace: {namespace}\n"
            f"current-context: kubeapi\nusers:\n- name: kubeapi\n  user:\n"
            f"    token: {token}\n")


# Real: Go's crypto/tls, kube-apiserver's, picks the TLS 1.3 cipher suite in its own
# order, TLS_AES_128_GCM_SHA256 first (crypto/tls/defaults.go, defaultCipherSuitesTLS13),
# and ChaCha20-Poly1305 first only when the client puts it first
# (handshake_server_tls13.go, processClientHello: aesgcmPreferred; the API server's
# --tls-cipher-suites configures TLS 1.2 only). OpenSSL's server order puts
# TLS_AES_256_GCM_SHA384 first, so every client (nicpick among them) settled on it
# and spent SHA-384 on the handshake where against kube-apiserver it spends SHA-256.
# Python's ssl sets no TLS 1.3 suites, so SSL_CTX_set_ciphersuites is called on the
# context's own SSL_CTX; SSL_OP_PRIORITIZE_CHACHA is OpenSSL's aesgcmPreferred.
GO_TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                   "TLS_CHACHA20_POLY1305_SHA256")
SSL_OP_PRIORITIZE_CHACHA = 1 << 21


def go_tls13_order(ctx):
    """Give ctx (a server ssl.SSLContext) Go's TLS 1.3 cipher suite choice, or raise."""
    # The libssl the ssl module runs on: dlopen of its soname finds the loaded one,
    # wherever it came from (KUBEAPI_LIBSSL_DIR, client.py).
    lib = ctypes.CDLL("libssl.so.3")
    lib.SSL_CTX_get_options.restype = ctypes.c_uint64
    lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
    lib.SSL_CTX_set_ciphersuites.restype = ctypes.c_int
    lib.SSL_CTX_set_ciphersuites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    # CPython's PySSLContext: the SSL_CTX pointer is the first member after the
    # object header.
    ptr = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
    if not ptr or lib.SSL_CTX_get_options(ptr) != int(ctx.options):
        raise RuntimeError("cannot reach the SSL_CTX of this Python's ssl.SSLContext")
    if lib.SSL_CTX_set_ciphersuites(ptr, ":".join(GO_TLS13_SUITES).encode()) != 1:
        raise RuntimeError("SSL_CTX_set_ciphersuites refused Go's TLS 1.3 suites")
    ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA
    got = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.3"]
    if tuple(got) != GO_TLS13_SUITES:
        raise RuntimeError(f"TLS 1.3 suites are {got}, not Go's {list(GO_TLS13_SUITES)}")
