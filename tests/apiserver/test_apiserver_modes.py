"""How the server runs: as a subprocess, standalone from the command line
(`python3 -m tools.kubeapi`), on IPv6; the ready file; admin errors in both
modes."""

import json
import os
import shutil
import signal
import ssl
import subprocess

import pytest

from apiclient import Api, pod, KUBEAPI, kubeapi_env
from apicommon import NS, PODS

from tools import kubeapi


def test_subprocess_mode_serves_and_stops(make_server):
    s = make_server(subprocess=True, faults=[{"kind": "error", "code": 500}])
    api = Api(s)
    assert api.get(PODS).status == 500          # --fault given on the command line
    assert api.get(PODS).status == 200
    s.create_pod(NS, pod("a"))
    assert api.get(PODS + "/a").status == 200
    assert s.counters()["total"]["requests"] == 3
    proc = s.proc
    s.stop()
    assert proc.returncode == 0


def _start_standalone(tmp_path, *extra):
    state = tmp_path / "standalone"
    p = subprocess.Popen([*KUBEAPI, "--state-dir", str(state), *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, env=kubeapi_env())
    line = p.stdout.readline()
    assert line.startswith("READY port="), p.stderr.read()
    return p, state, int(line.split()[1].split("=")[1])


def test_standalone_stops_on_sigterm(tmp_path):
    p, state, port = _start_standalone(tmp_path)
    try:
        ready = json.loads((state / "ready").read_text())
        assert ready["port"] == port
        for n in ("ca.crt", "token", "admin-token", "kubeconfig", "serviceaccount/token",
                  "serviceaccount/ca.crt", "serviceaccount/namespace"):
            assert (state / n).exists(), n
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=5) == 0
        assert not (state / "ready").exists()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_standalone_seed_file_and_max_lifetime(tmp_path):
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"pods": [pod("seeded", {"app": "x"}, phase="Running")],
                                "jobs": [{"metadata": {"name": "j", "namespace": NS},
                                          "spec": {"completions": 2}}]}))
    p, state, port = _start_standalone(tmp_path, "--seed", str(seed), "--max-lifetime", "2",
                                       "--token", "fixed", "--san", "10.0.0.1")
    try:
        class S:
            ca_path, token = str(state / "ca.crt"), "fixed"
        S.port = port
        r = Api(S).get(PODS + "/seeded")
        assert r.status == 200 and r.body["status"]["phase"] == "Running"
        assert Api(S).get("/apis/batch/v1/namespaces/default/jobs/j").body["spec"][
            "completions"] == 2
        assert p.wait(timeout=6) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    sans = (state / "sans").read_text()
    assert "IP:10.0.0.1" in sans and "IP:::1" in sans and "DNS:localhost" in sans


def test_standalone_help():
    r = subprocess.run([*KUBEAPI, "--help"], capture_output=True, text=True, timeout=10,
                       env=kubeapi_env())
    assert r.returncode == 0 and "--state-dir" in r.stdout and "--fault" in r.stdout


def test_ipv6_listen(make_server):
    s = make_server(listen="::1")
    assert s.url.startswith("https://[::1]:")
    ctx = ssl.create_default_context(cafile=s.ca_path)
    import http.client
    c = http.client.HTTPSConnection("::1", s.port, context=ctx, timeout=5)
    c.request("GET", "/version")
    assert c.getresponse().status == 200
    c.close()


def test_admin_errors_are_api_errors_in_both_modes(make_server):
    for s in (make_server(), make_server(subprocess=True)):
        with pytest.raises(kubeapi.ApiError) as ei:
            s.get_object(NS, "missing")
        assert ei.value.code == 404 and ei.value.message == 'pods "missing" not found'
        with pytest.raises(kubeapi.ApiError) as ei:
            s.set_faults([{"kind": "nonsense"}])
        assert ei.value.code == 400


def test_ready_file_has_in_cluster_env(server):
    with open(os.path.join(server.state_dir, "ready")) as f:
        ready = json.load(f)
    assert ready["env"] == {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                            "KUBERNETES_SERVICE_PORT": str(server.port)}


def _mapped(pid, soname):
    """The file this process maps for soname (its path as the kernel has it)."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path) == soname:
                return path
    return None


def test_libssl_dir_is_the_servers_openssl(make_server, tmp_path, monkeypatch):
    """KUBEAPI_LIBSSL_DIR: the subprocess server's Python loads libssl and
    libcrypto from there (bench/agree points it at OpenSSL 3.5, which
    negotiates X25519MLKEM768 as kube-apiserver built with Go >= 1.24 does;
    scripts/bench-openssl.sh), and its ready file names the version.  Here
    the folder holds copies of this Python's own libraries, so that where
    they are mapped from tells whether the variable reached the server; the
    certificates, made by the openssl command, still come out."""
    ssl_so, crypto_so = _mapped(os.getpid(), "libssl.so.3"), _mapped(os.getpid(), "libcrypto.so.3")
    assert ssl_so and crypto_so, "this Python does not link OpenSSL 3"
    libdir = tmp_path / "libssl"
    libdir.mkdir()
    for so in (ssl_so, crypto_so):
        shutil.copyfile(so, libdir / os.path.basename(so))
    monkeypatch.setenv("KUBEAPI_LIBSSL_DIR", str(libdir))
    s = make_server(subprocess=True)
    assert _mapped(s.proc.pid, "libssl.so.3") == str(libdir / "libssl.so.3")
    assert _mapped(s.proc.pid, "libcrypto.so.3") == str(libdir / "libcrypto.so.3")
    assert s.openssl == ssl.OPENSSL_VERSION
    with open(os.path.join(s.state_dir, "ready")) as f:
        assert json.load(f)["openssl"] == ssl.OPENSSL_VERSION
    assert Api(s).get(PODS).status == 200
    monkeypatch.delenv("KUBEAPI_LIBSSL_DIR")
    t = make_server(subprocess=True)
    assert _mapped(t.proc.pid, "libssl.so.3") == ssl_so
