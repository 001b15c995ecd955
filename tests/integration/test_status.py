"""`kubectl nicpick status JOB` against the test API server, with real
clients: kubectl 1.33 (build/tools/kubectl) finding the plugin on PATH as
`nicpick install` lays it out, and every kubeconfig shape the plugin reads.

The job states come from real nicpick runs in network namespaces
(cluster.py): the pods of four "nodes" agree through the server, the smoke
step runs on the NCCL/CUDA test double (tests/doubles/fakegpu.c, as
test_smoke.py points at it), and what `status` shows is what those runs
wrote (annotations and Events), never a hand-made copy.  The API server is
reachable only inside its own namespace, so every client runs there."""
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse

import pytest

import cluster as C
from test_agree_e2e import make_cluster, diag  # noqa: F401  (fixture)
from test_smoke import fakegpu, gpu_env  # noqa: F401  (fixtures)

KUBECTL = C.ROOT / "build" / "tools" / "kubectl"
NS = C.NAMESPACE


def need_kubectl():
    if not os.access(KUBECTL, os.X_OK):
        # tests/conftest.py turns this skip into a failure under CI=true
        pytest.skip(f"kubectl not found at {KUBECTL}: run `make tools` (scripts/fetch-k8s-tools.sh)")


@pytest.fixture
def plugin_dir(nicpick_bin, tmp_path):
    """A directory laid out by `nicpick install`, put on PATH for kubectl."""
    d = tmp_path / "plugins"
    d.mkdir()
    p = subprocess.run([nicpick_bin, "install", str(d)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert os.readlink(d / "kubectl-nicpick") == "nicpick"
    return d


def kubeconfig(c, path, user, cluster_extra="", name="kubeapi"):
    """A kubeconfig for the cluster's server with the given `user:` body."""
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {c.api_url}
    certificate-authority: {c.ca_path}
{cluster_extra}contexts:
- name: {name}
  context:
    cluster: {name}
    user: {name}
    namespace: {NS}
current-context: {name}
users:
- name: {name}
  user:
{user}""")
    return path


def token_kc(c, tmp_path, token=None, name="kc"):
    return kubeconfig(c, tmp_path / name, f"    token: {token or c.server.token}\n")


def run_status(c, *args, kc=None, env=None, kubectl=False, plugins=None, timeout=60):
    """`nicpick status ...` or `kubectl nicpick status ...` in the API
    server's namespace.  Returns the CompletedProcess."""
    e = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
    e["HOME"] = str(c.tmp)  # no ~/.kube/config of the machine's
    if kc is not None:
        e["KUBECONFIG"] = str(kc)
    if env:
        e.update(env)
    if kubectl:
        e["PATH"] = f"{plugins}:{e.get('PATH', '/usr/bin:/bin')}"
        argv = [str(KUBECTL), "nicpick", "status", *args]
    else:
        argv = [c.nicpick, "status", *args]
    return c.api_ns.exec(argv, timeout=timeout, env=e)


def one_error(p):
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def job_line(p):
    return p.stdout.splitlines()[0]


def rows(p):
    """The table as {pod: {COLUMN: value}} (kubectl's layout: columns at
    the header's offsets)."""
    lines = p.stdout.splitlines()[1:]
    head = lines[0]
    cols = [(m.start(), m.group()) for m in re.finditer(r"\S+", head)]
    out = {}
    for l in lines[1:]:
        r = {}
        for i, (start, name) in enumerate(cols):
            end = cols[i + 1][0] if i + 1 < len(cols) else None
            r[name] = l[start:end].strip()
        out[r["POD"].rstrip("*")] = r
    return out


def as_json(p):
    return json.loads(p.stdout)


def run_pods(c, *extra, pods=None, timeout=90):
    c.start_all(*extra, pods=pods)
    c.wait_all(pods=pods, timeout=timeout)


SMOKE = ("--expect", "4", "--smoke", "required", "--smoke-bytes", "64K", "--timeout", "60")


def job_gpu_env(gpu_env, monkeypatch):
    for k, v in gpu_env.items():
        monkeypatch.setenv(k, v)


# ---- the states of a job --------------------------------------------------

def test_decided_and_proven_through_kubectl_and_the_plugin_on_path(make_cluster, gpu_env,
                                                                   monkeypatch, plugin_dir,
                                                                   tmp_path):
    need_kubectl()
    job_gpu_env(gpu_env, monkeypatch)
    c = make_cluster()
    run_pods(c, *SMOKE)
    assert [p.rc for p in c.pods] == [0] * 4, diag(c)
    kc = token_kc(c, tmp_path)
    p = run_status(c, C.JOB, kc=kc, kubectl=True, plugins=plugin_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    line = job_line(p)
    assert line.startswith(f"Job {C.JOB} (Indexed Job, 4/4 pods, gatherer {C.JOB}-0): decided;"), line
    assert "network 10.9.0.0/24, round 1" in line and "smoke passed, busbw " in line, line
    assert "waiting" not in line and "warning" not in line, line
    t = rows(p)
    assert sorted(t) == [pp.name for pp in c.pods]
    for pod in c.pods:
        r = t[pod.name]
        assert r["NODE"] == pod.node.name and r["STATE"] == "done", r
        assert r["INTERFACE"] == pod.node.fast_if and r["ADDRESS"] == pod.node.fast_addr, r
        assert r["PROBE"].startswith("ok"), r
        # the double's rates are MB/s: in the unit that suits them, never 0.00
        assert re.fullmatch(r"[1-9][0-9.]*[kMG]B/s", r["BUSBW"]), r
        assert r["NCCL"] == "2.28.9", r
        # (SUSPECT is the smoke step's own call: on a loaded machine one of
        # the double's links can be slow enough to be named while it passes)
        assert r["WARNINGS"] == "-", r
    # The same through nicpick itself, and the JSON document.
    q = run_status(c, C.JOB, "-o", "json", kc=kc)
    assert q.returncode == 0, q.stderr
    d = as_json(q)
    assert d["apiVersion"] == "nicpick.io/v1" and d["kind"] == "JobNetworkStatus"
    j = d["job"]
    assert (j["name"], j["namespace"], j["kind"], j["state"], j["exitCode"]) == \
        (C.JOB, NS, "Job", "decided", 0), j
    assert j["network"] == "10.9.0.0/24" and j["round"] == 1 and j["smoke"] == "passed", j
    assert isinstance(j["busbw"], float) and j["busbw"] > 0 and j["waiting"] is None, j
    assert [x["name"] for x in d["pods"]] == [pp.name for pp in c.pods]
    for pod, x in zip(c.pods, d["pods"]):
        assert x["interface"] == pod.node.fast_if and x["address"] == pod.node.fast_addr, x
        assert x["state"] == "done" and x["probe"]["ok"] is True and x["nccl"] == "2.28.9", x
        assert x["gatherer"] is (pod.index == 0), x
    # -o wide adds the network, round, rank and ring neighbour.
    w = rows(run_status(c, C.JOB, "-o", "wide", kc=kc))
    assert w[f"{C.JOB}-0"]["RANK"] == "0" and w[f"{C.JOB}-0"]["NEXT"] == f"{C.JOB}-1", w
    assert w[f"{C.JOB}-3"]["NETWORK"] == "10.9.0.0/24" and w[f"{C.JOB}-3"]["ROUND"] == "1", w
    # ... and the output set each pod wrote, as its decision.json names it.
    for pod, x in zip(c.pods, d["pods"]):
        want = C.decision_of(pod)["decision_id"]
        assert w[pod.name]["DECISION"] == want and x["decisionId"] == want, (w[pod.name], x)


def test_waiting_for_a_pod_then_watch_follows_it_to_the_decision(make_cluster, tmp_path):
    c = make_cluster()
    kc = token_kc(c, tmp_path)
    first = c.pods[:3]  # job-w-3 exists as an object but has not started nicpick
    c.start_all("--expect", "4", "--smoke", "off", "--timeout", "60", pods=first)
    deadline = time.monotonic() + 30
    while True:
        p = run_status(c, C.JOB, kc=kc)
        if "3/4 pods reported" in p.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert p.returncode == 5, p.stdout + p.stderr
    line = job_line(p)
    assert ": waiting; waiting for: 3/4 pods reported; missing: job-w-3" in line, line
    t = rows(p)
    assert t["job-w-3"]["STATE"] == "starting" and t["job-w-0"]["STATE"] == "reported", t
    # --watch prints each new view and ends with the decision.
    w = subprocess.Popen(["ip", "netns", "exec", c.api_ns.name, c.nicpick, "status", C.JOB,
                          "--watch", "-o", "json"],
                         env=dict(os.environ, KUBECONFIG=str(kc), HOME=str(c.tmp)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        c.start_all("--expect", "4", "--smoke", "off", "--timeout", "60", pods=c.pods[3:])
        c.wait_all(timeout=90)
        out, err = w.communicate(timeout=60)
    finally:
        if w.poll() is None:
            w.kill()
    assert [pp.rc for pp in c.pods] == [0] * 4, diag(c)
    assert w.returncode == 0, err
    docs = [json.loads(x) for x in re.split(r"\n(?=\{)", out.strip())]
    assert len(docs) >= 2, out
    assert docs[0]["job"]["state"] == "waiting" and docs[-1]["job"]["state"] == "decided", out
    states = [d["job"]["state"] for d in docs]
    assert states.count("decided") == 1, states  # it stops at the decision


def test_probing_shows_the_round_and_who_has_not_probed(make_cluster, tmp_path):
    have = shutil.which("nft")
    if not have:
        pytest.skip("nft is not installed")
    c = make_cluster()
    b = c.nodes[1]
    # The probe into job-w-1's fast address gets no answer: the ring waits
    # on it (the probe gives up on a silent peer after 20 s).
    c.nft(b, f"""table inet nicpick_status {{
        chain input {{ type filter hook input priority 0; policy accept;
            ip daddr {b.fast_addr} tcp dport 29417 drop
        }}
    }}""")
    kc = token_kc(c, tmp_path)
    c.start_all("--expect", "4", "--smoke", "off", "--timeout", "75")
    deadline = time.monotonic() + 40
    while True:
        p = run_status(c, C.JOB, "-o", "json", kc=kc)
        d = as_json(p) if p.returncode in (0, 5) and p.stdout.startswith("{") else None
        if d and any(x["state"] == "probed" for x in d["pods"]) and \
                any(x["state"] == "probing" for x in d["pods"]):
            break
        assert time.monotonic() < deadline, p.stdout + p.stderr
        time.sleep(0.3)
    assert p.returncode == 5
    j = d["job"]
    assert j["state"] == "waiting" and j["round"] == 1 and j["network"] == "10.9.0.0/24", j
    assert j["waiting"].startswith("round 1: "), j
    probing = [x["name"] for x in d["pods"] if x["state"] == "probing"]
    # job-w-0 probes job-w-1 around the ring, and that probe hangs
    assert "job-w-0" in probing, d["pods"]
    c.wait_all(timeout=120)


def test_smoke_failed_names_the_suspect_pod_and_exits_6(make_cluster, gpu_env, monkeypatch,
                                                        tmp_path):
    job_gpu_env(gpu_env, monkeypatch)
    monkeypatch.setenv("FAKEGPU_MODE", "slow-link")
    monkeypatch.setenv("FAKEGPU_SLOW_RANK", "2")
    c = make_cluster(n_nodes=3)
    run_pods(c, "--expect", "3", "--smoke", "required", "--smoke-bytes", "64K", "--min-busbw",
             "1000", "--timeout", "60")
    assert [p.rc for p in c.pods] == [6] * 3, diag(c)
    kc = token_kc(c, tmp_path)
    p = run_status(c, C.JOB, kc=kc)
    assert p.returncode == 6, p.stdout + p.stderr
    line = job_line(p)
    assert ": failed;" in line and "smoke failed" in line, line
    assert "suspect: slow node: " in line and "exit 6: " in line, line
    t = rows(p)
    d = as_json(run_status(c, C.JOB, "-o", "json", kc=kc))
    ranks = {x["name"]: x["rank"] for x in d["pods"]}
    slow = [n for n, r in ranks.items() if r == 2]
    assert len(slow) == 1, ranks
    # the slow node itself (both its ring links slow), not its neighbours
    for name, r in t.items():
        assert r["STATE"] == "failed", r
        assert r["SUSPECT"] == ("slow-node" if name in slow else "-"), (name, r)
    assert d["job"]["exitCode"] == 6 and d["job"]["smoke"] == "failed", d["job"]
    # the gatherer's text names the pod and its node
    node = next(x["node"] for x in d["pods"] if x["name"] == slow[0])
    assert f"slow node: {slow[0]} (node {node}, " in d["job"]["suspect"], d["job"]
    assert [x["suspect"] for x in d["pods"]] == \
        ["slow-node" if x["name"] in slow else None for x in d["pods"]]
    assert d["job"]["suspects"] == [{"pod": slow[0], "node": node, "why": "slow-node"}], d["job"]


def test_versions_differ_is_a_warning_on_the_job_and_the_odd_pod(make_cluster, gpu_env,
                                                                 monkeypatch, tmp_path):
    job_gpu_env(gpu_env, monkeypatch)
    c = make_cluster()
    odd = c.pods[3]
    odd.proc_env = {"FAKEGPU_NCCL_VERSION": "22105"}
    run_pods(c, *SMOKE)
    assert [p.rc for p in c.pods] == [0] * 4, diag(c)
    p = run_status(c, C.JOB, kc=token_kc(c, tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    want = f"NCCL 2.21.5 on {odd.name} ({odd.node.name}), 2.28.9 on the other 3 pods"
    assert f"; warning: versions differ: {want}" in job_line(p), job_line(p)
    t = rows(p)
    assert t[odd.name]["NCCL"] == "2.21.5" and "differ" in t[odd.name]["WARNINGS"], t[odd.name]
    assert t["job-w-0"]["NCCL"] == "2.28.9" and t["job-w-0"]["WARNINGS"] == "-", t["job-w-0"]


def create_pending(c, pod):
    """pod, not scheduled yet: no node, phase Pending."""
    obj = pod.object()
    obj["spec"].pop("nodeName")
    obj["status"] = {"phase": "Pending"}
    c.server.create_pod(NS, obj)


def seed_failed_scheduling(c, name):
    """The scheduler's Warning about pod `name`, as it words a lack of GPUs."""
    c.server.seed({"events": [{
        "metadata": {"name": f"{name}.1", "namespace": NS},
        "involvedObject": {"kind": "Pod", "name": name, "namespace": NS},
        "reason": "FailedScheduling", "type": "Warning",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        "lastTimestamp": "2026-01-01T00:00:00Z"}]})


def test_pending_pod_shows_its_event_and_an_unknown_job_waits(make_cluster, tmp_path):
    c = make_cluster(seed=False)
    kc = token_kc(c, tmp_path)
    p = run_status(c, "nosuch", kc=kc)
    assert p.returncode == 5, p.stderr
    assert "no pods of Job nosuch in namespace train yet" in job_line(p), p.stdout
    pods = c.seed_pods()
    create_pending(c, pods[2])
    seed_failed_scheduling(c, "job-w-2")
    p = run_status(c, C.JOB, "-o", "wide", kc=kc)
    assert p.returncode == 5
    assert ("waiting for: pod job-w-2 is Pending: FailedScheduling: 0/4 nodes are available: "
            "4 Insufficient nvidia.com/gpu.") in job_line(p), job_line(p)
    r = rows(p)["job-w-2"]
    assert r["STATE"] == "pending" and r["DETAIL"].startswith("FailedScheduling: 0/4 nodes"), r


def test_a_busy_namespace_s_events_are_read_in_pages_and_only_the_job_s_kept(make_cluster,
                                                                            tmp_path):
    """Some 80 MB of Events about other objects, 36000 of 2 KB: more than a
    list in one answer may be (64 MiB, lib/k8s K8S_MAX_LIST).  status reads
    them in pages, asks only for Events about pods, keeps only its own
    pods', and shows the one about its pending pod."""
    c = make_cluster(seed=False)
    pods = c.seed_pods()
    create_pending(c, pods[1])
    filler = "x" * 2000
    others = [{
        "metadata": {"name": f"noise.{i}", "namespace": NS},
        # other pods' Events pass the field selector: the client drops them
        "involvedObject": ({"kind": "Pod", "name": f"web-{i}", "namespace": NS} if i % 4 == 0 else
                           {"kind": "ReplicaSet", "name": f"rs-{i}", "namespace": NS}),
        "reason": "Noise", "type": "Warning", "message": f"noise {i} {filler}",
        "lastTimestamp": "2026-01-01T00:00:01Z"} for i in range(36000)]
    for i in range(0, len(others), 4000):
        c.server.seed({"events": others[i:i + 4000]})
    seed_failed_scheduling(c, "job-w-1")
    c.server.requests(clear=True)
    p = run_status(c, C.JOB, "-o", "wide", kc=token_kc(c, tmp_path))
    assert p.returncode == 5 and p.stdout, p.stdout + p.stderr
    assert "pod job-w-1 is Pending: FailedScheduling: 0/4 nodes" in job_line(p), job_line(p)
    assert rows(p)["job-w-1"]["DETAIL"].startswith("FailedScheduling: 0/4 nodes"), rows(p)
    ev = [r for r in c.server.requests() if r["path"] == f"/api/v1/namespaces/{NS}/events"]
    assert len(ev) >= 2, ev
    for r in ev:
        q = urllib.parse.parse_qs(r["query"])
        assert q.get("limit") == ["500"] and q.get("fieldSelector") == ["involvedObject.kind=Pod"], r
    assert sum("continue" in urllib.parse.parse_qs(r["query"]) for r in ev) == len(ev) - 1, ev


def test_kind_picks_between_jobs_of_the_same_name(make_cluster, tmp_path):
    c = make_cluster()
    pt = {"metadata": {"name": "job-w-master-0", "labels": {
        "training.kubeflow.org/job-name": C.JOB, "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0"}},
        "spec": {"nodeName": "node-a", "containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Running"}}
    c.server.create_pod(NS, pt)
    kc = token_kc(c, tmp_path)
    p = run_status(c, C.JOB, kc=kc)
    assert p.returncode == 2
    assert "job-w names pods of a Job and a PyTorchJob in namespace train: pass --kind" in one_error(p)
    p = run_status(c, C.JOB, "--kind", "PyTorchJob", kc=kc)
    assert p.returncode == 5 and job_line(p).startswith("PyTorchJob job-w (PyTorchJob with a Master, 1 pods"), p.stdout
    p = run_status(c, C.JOB, "--kind", "job", kc=kc)
    assert job_line(p).startswith("Job job-w (Indexed Job, 4 pods"), p.stdout
    for args, msg in ((["--kind", "CronJob", C.JOB], "--kind 'CronJob': expected Job, PyTorchJob"),
                      ([], "status: JOB is required"), (["-o", "yaml", C.JOB], "-o 'yaml': expected wide or json"),
                      ([C.JOB, "other"], "expected one JOB")):
        p = run_status(c, *args, kc=kc)
        assert p.returncode == 2 and msg in one_error(p), (args, p.stderr)


# ---- kubeconfig shapes ----------------------------------------------------

def openssl(*args):
    p = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def client_cert(c, d, cn):
    """A client certificate for CN, signed by the server's CA (the server
    maps the CN to the user, as kube-apiserver's x509 authenticator)."""
    ca_key = os.path.join(os.path.dirname(c.ca_path), "ca.key")
    key, csr, crt = d / f"{cn}.key", d / f"{cn}.csr", d / f"{cn}.crt"
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={cn}")
    ext = d / "client.ext"
    ext.write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", c.ca_path, "-CAkey", ca_key, "-set_serial", "7",
            "-days", "2", "-out", str(crt), "-extfile", str(ext))
    return crt, key


def exec_plugin(d, name, token, api_version, expiry=None):
    body = {"apiVersion": api_version, "kind": "ExecCredential", "status": {"token": token}}
    if expiry:
        body["status"]["expirationTimestamp"] = expiry
    s = d / name
    s.write_text("#!/bin/sh\n"
                 "[ \"$NICPICK_TEST_ARG\" = ok ] && [ \"$1\" = --cluster ] || exit 3\n"
                 f"echo '{json.dumps(body)}'\n")
    s.chmod(0o755)
    return s


def test_every_kubeconfig_shape_reads_the_job_or_says_what_is_wrong(make_cluster, tmp_path):
    c = make_cluster()
    run_pods(c, "--expect", "4", "--smoke", "off", "--timeout", "60")
    assert [p.rc for p in c.pods] == [0] * 4, diag(c)
    tok = c.server.token
    d = tmp_path / "kc"
    d.mkdir()

    def ok(kc, *args, env=None):
        p = run_status(c, C.JOB, *args, kc=kc, env=env)
        assert p.returncode == 0, (kc.read_text() if kc else "", p.stdout, p.stderr)
        assert ": decided; network 10.9.0.0/24" in job_line(p)
        return p

    def fails(kc, code, msg, *args, env=None):
        p = run_status(c, C.JOB, *args, kc=kc, env=env)
        assert p.returncode == code, (p.stdout, p.stderr)
        line = one_error(p)
        assert any(m in line for m in (msg if isinstance(msg, tuple) else (msg,))), line
        return line

    # a token, and a token file
    ok(token_kc(c, d, name="token"))
    (d / "tokfile").write_text(tok + "\n")
    ok(kubeconfig(c, d / "tokenfile", f"    tokenFile: {d / 'tokfile'}\n"))
    # --kubeconfig wins over KUBECONFIG; --context and -n are honoured
    bad = token_kc(c, d, token="wrong", name="badtok")
    p = run_status(c, C.JOB, "--kubeconfig", str(token_kc(c, d, name="token2")), kc=bad)
    assert p.returncode == 0, p.stderr
    fails(bad, 5, "unauthorized: the API server rejected the kubeconfig's token (HTTP 401)")
    p = run_status(c, C.JOB, "-n", "other", kc=token_kc(c, d, name="token4"))
    assert p.returncode == 5 and "no pods of Job job-w in namespace other yet" in p.stdout
    fails(token_kc(c, d, name="token5"), 2, "context", "--context", "nope")
    # a client certificate and key (files and inline data)
    crt, key = client_cert(c, d, "system:admin")
    ok(kubeconfig(c, d / "cert", f"    client-certificate: {crt}\n    client-key: {key}\n"))
    import base64
    b64 = lambda p: base64.b64encode(p.read_bytes()).decode()  # noqa: E731
    ok(kubeconfig(c, d / "certdata", f"    client-certificate-data: {b64(crt)}\n"
                                     f"    client-key-data: {b64(key)}\n"))
    # the same key encrypted, as `openssl pkcs8 -topk8` and `openssl ec
    # -aes256` write it: refused at once with exit 2, as kubectl refuses it
    # ("tls: failed to parse private key"), never a pass phrase prompt
    for i, conv in enumerate((["pkcs8", "-topk8", "-v2", "aes-256-cbc"], ["ec", "-aes256"])):
        enc = d / f"enc{i}.key"
        openssl(*conv, "-in", str(key), "-passout", "pass:secret", "-out", str(enc))
        assert "ENCRYPTED" in enc.read_text()
        line = fails(kubeconfig(c, d / f"enc{i}", f"    client-certificate: {crt}\n    client-key: {enc}\n"),
                     2, f"{enc} is an encrypted key; kubectl and nicpick read only unencrypted ones")
        assert "pass phrase" not in line, line
        fails(kubeconfig(c, d / f"encdata{i}", f"    client-certificate-data: {b64(crt)}\n"
                                               f"    client-key-data: {b64(enc)}\n"),
              2, "client-key-data is an encrypted key")
    # a certificate the server's CA did not sign: the server ends the TLS
    # session (the client sees an alert or a broken pipe, by TLS version)
    other = d / "other"
    other.mkdir()
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(other / "k"), "-out", str(other / "c"), "-days", "2", "-subj", "/CN=x")
    fails(kubeconfig(c, d / "badcert", f"    client-certificate: {other / 'c'}\n"
                                       f"    client-key: {other / 'k'}\n"), 5,
          # an alert in the handshake ends at once; a broken pipe after it is
          # retried until the request timeout
          ("the API server refused the TLS handshake", "last error:"), "--request-timeout", "3")
    # exec credential plugins, v1 with an expiry and v1beta1 without
    env = {"NICPICK_TEST_ARG": "ok"}
    for api, exp in (("client.authentication.k8s.io/v1", "2099-01-01T00:00:00Z"),
                     ("client.authentication.k8s.io/v1beta1", None)):
        s = exec_plugin(d, f"cred-{api.rsplit('/', 1)[1]}", tok, api, exp)
        ok(kubeconfig(c, d / f"exec-{api.rsplit('/', 1)[1]}",
                      f"    exec:\n      apiVersion: {api}\n      command: {s}\n"
                      f"      args: [--cluster]\n"
                      f"      env:\n      - name: NICPICK_TEST_ARG\n        value: ok\n"
                      f"      interactiveMode: Never\n"))
    # a plugin that is not there: its installHint is the message
    fails(kubeconfig(c, d / "exec-missing",
                     "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                     "      command: /nonexistent/gke-gcloud-auth-plugin\n"
                     "      installHint: install gke-gcloud-auth-plugin\n"
                     "      interactiveMode: Never\n"), 5, "install gke-gcloud-auth-plugin", env=env)
    # two files merged: the first names the context, the second has the rest
    first = d / "first"
    first.write_text("apiVersion: v1\nkind: Config\ncurrent-context: merged\n"
                     "contexts:\n- name: merged\n  context:\n    cluster: kubeapi\n    user: kubeapi\n"
                     f"    namespace: {NS}\n")
    second = token_kc(c, d, name="second")
    p = run_status(c, C.JOB, env={"KUBECONFIG": f"{first}:{second}"})
    assert p.returncode == 0, p.stderr
    # a bad file: one line naming the field, exit 2
    (d / "bad").write_text("apiVersion: v1\nkind: Config\nclusters: 3\n")
    fails(d / "bad", 2, "clusters")
    (d / "unsupported").write_text(kubeconfig(c, d / "tmp", "    username: admin\n    password: x\n")
                                   .read_text())
    fails(d / "unsupported", 2, "username")


def test_forbidden_names_the_missing_verb_and_the_role_that_grants_it(make_cluster, tmp_path):
    c = make_cluster()
    c.server.set_tokens({"tok-oncall": "oncall"})
    kc = token_kc(c, tmp_path, token="tok-oncall")
    p = run_status(c, C.JOB, kc=kc)
    assert p.returncode == 5
    line = one_error(p)
    assert 'needs "list" on "pods" in namespace "train"' in line, line
    assert "deploy/rbac-status.yaml" in line, line
    # The Role of deploy/rbac-status.yaml, bound to that user, is enough.
    c.server.apply_manifests(str(C.ROOT / "deploy" / "rbac-status.yaml"), NS)
    c.server.seed({"objects": [{
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "oncall", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "nicpick-status"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "oncall"}]}]})
    p = run_status(c, C.JOB, kc=kc)
    assert p.returncode == 5 and p.stderr == "", p.stderr  # waiting: nothing ran yet
    assert job_line(p).startswith("Job job-w (Indexed Job, 4 pods"), p.stdout
    w = subprocess.run(["ip", "netns", "exec", c.api_ns.name, c.nicpick, "status", C.JOB, "--watch",
                        "--request-timeout", "3"],
                       env=dict(os.environ, KUBECONFIG=str(kc), HOME=str(c.tmp)),
                       capture_output=True, text=True, timeout=60)
    assert w.returncode == 5 and "Job job-w" in w.stdout, w.stderr
    # list allowed, watch not: --watch names the watch
    c.server.set_rbac(deny=[{"verbs": ["watch"], "users": ["oncall"]}])
    w = subprocess.run(["ip", "netns", "exec", c.api_ns.name, c.nicpick, "status", C.JOB, "--watch"],
                       env=dict(os.environ, KUBECONFIG=str(kc), HOME=str(c.tmp)),
                       capture_output=True, text=True, timeout=60)
    assert w.returncode == 5
    line = one_error(w)
    assert 'needs "watch" on "pods" in namespace "train"' in line and "deploy/rbac-status.yaml" in line, line


def test_the_status_role_is_read_only_and_namespaced():
    import yaml
    docs = list(yaml.safe_load_all((C.ROOT / "deploy" / "rbac-status.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"]
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): sorted(r["verbs"]) for r in docs[0]["rules"]}
    assert rules == {(("",), ("pods",)): ["get", "list", "watch"], (("",), ("events",)): ["list"]}
    assert docs[1]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": docs[0]["metadata"]["name"]}


def test_the_static_release_binary_answers_as_the_plugin(tmp_path):
    """The same checks through build/static/nicpick (musl, OpenSSL): a
    token, a client certificate, and the kubectl-nicpick name."""
    static = C.ROOT / "build" / "static" / "nicpick"
    if not os.access(static, os.X_OK):
        pytest.skip(f"{static} missing: run `make static`")
    from tools.kubeapi import Server
    with Server(state_dir=str(tmp_path / "api"), namespace=NS, user="system:admin") as s:
        s.create_pod(NS, {"metadata": {"name": "t-0", "labels": {
            "batch.kubernetes.io/job-name": "t", "batch.kubernetes.io/job-completion-index": "0"}},
            "spec": {"nodeName": "node-a", "containers": [{"name": "main", "image": "x"}]},
            "status": {"phase": "Running"}})
        link = tmp_path / "kubectl-nicpick"
        link.symlink_to(static)

        class Fake:
            api_url, ca_path = s.url, s.ca_path
        d = tmp_path / "kc"
        d.mkdir()
        crt, key = client_cert(Fake, d, "system:admin")
        for kc in (kubeconfig(Fake, d / "tok", f"    token: {s.token}\n"),
                   kubeconfig(Fake, d / "cert", f"    client-certificate: {crt}\n    client-key: {key}\n")):
            p = subprocess.run([str(link), "status", "t", "-o", "wide"], capture_output=True, text=True,
                               timeout=60, env=dict(os.environ, KUBECONFIG=str(kc), HOME=str(tmp_path)))
            assert p.returncode == 5, (kc.read_text(), p.stderr)
            assert p.stdout.startswith("Job t (Indexed Job, 1 pods, gatherer t-0): waiting;"), p.stdout
            assert "t-0*   node-a   starting" in p.stdout, p.stdout
