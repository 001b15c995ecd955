"""The TLS 1.3 cipher suite the server settles on, as kube-apiserver's does.

Real sources (golang/go, crypto/tls, which kube-apiserver serves with):
- defaults.go, defaultCipherSuitesTLS13: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
  TLS_CHACHA20_POLY1305_SHA256, the server's own order on hardware with AES-GCM;
- handshake_server_tls13.go, processClientHello: the first of that order the client
  offers, whatever the client's order, except that a client that puts ChaCha20-Poly1305
  first gets it (aesgcmPreferred: defaultCipherSuitesTLS13NoAES).
kube-apiserver's --tls-cipher-suites sets TLS 1.2 suites only (Go has no TLS 1.3 knob).
OpenSSL's own server order starts with TLS_AES_256_GCM_SHA384: without the fix every
OpenSSL client (nicpick, curl, Python) settled on it here, SHA-384 for the handshake."""

import http.client
import ssl
import subprocess

from apiclient import Api
from apicommon import PODS

AES128, AES256, CHACHA = "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", \
    "TLS_CHACHA20_POLY1305_SHA256"


def negotiated(server, alpn):
    ctx = ssl.create_default_context(cafile=server.ca_path)
    ctx.set_alpn_protocols(alpn)
    c = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    c.connect()
    got = (c.sock.version(), c.sock.cipher()[0], c.sock.selected_alpn_protocol())
    c.close()
    return got


def s_client(server, suites):
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}",
                        "-CAfile", server.ca_path, "-ciphersuites", suites, "-brief"],
                       input="", capture_output=True, text=True, timeout=30)
    lines = [x for x in (r.stdout + r.stderr).splitlines() if "Ciphersuite:" in x]
    assert lines, r.stdout + r.stderr
    return lines[0].split("Ciphersuite:", 1)[1].strip()


def test_an_openssl_client_gets_aes128_on_either_protocol(make_server):
    s = make_server()
    # Python's client offers OpenSSL's order, AES-256 first, as nicpick's does
    assert ssl.create_default_context().get_ciphers()[0]["name"] == AES256
    assert negotiated(s, ["h2", "http/1.1"]) == ("TLSv1.3", AES128, "h2")
    assert negotiated(s, ["http/1.1"]) == ("TLSv1.3", AES128, "http/1.1")
    assert Api(s).get(PODS).status == 200
    conns = s.counters()["connections"]["list"]
    assert conns and {c["cipher"] for c in conns} == {AES128}


def test_the_servers_order_except_chacha_first(make_server):
    s = make_server()
    assert s_client(s, f"{AES256}:{AES128}") == AES128      # the server's order wins
    assert s_client(s, f"{CHACHA}:{AES256}") == CHACHA      # aesgcmPreferred is false
    assert s_client(s, f"{AES256}:{CHACHA}") == AES256      # the first of Go's it offers
    assert s_client(s, AES256) == AES256


def test_curl_and_a_subprocess_server(make_server):
    s = make_server(subprocess=True)
    r = subprocess.run(["curl", "-sv", "--cacert", s.ca_path, "-o", "/dev/null",
                        f"https://127.0.0.1:{s.port}/version"],
                       capture_output=True, text=True, timeout=30)
    assert f"TLSv1.3 / {AES128}" in r.stderr, r.stderr
    assert negotiated(s, ["h2", "http/1.1"])[1] == AES128
