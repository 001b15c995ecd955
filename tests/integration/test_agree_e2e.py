"""Job-wide agreement end to end: four nicpick processes, each in its own
"node" namespace, agree through the test Kubernetes API server (reachable
only over the management network) on one network, probe it and write their
own interface names.  The topology and why the fast network should win are
described in cluster.py."""
import ipaddress
import json
import os
import re
import shutil
import time

import pytest

import cluster as C
from netns import source_env

KUBECTL = C.ROOT / "build" / "tools" / "kubectl"
FAST_NET = ipaddress.ip_network(C.FAST_NET + ".0/24")
MGMT_NET = ipaddress.ip_network(C.MGMT_NET + ".0/24")


@pytest.fixture
def make_cluster(clusters):
    """make_cluster(**kw) -> a built Cluster with the API server running and
    the job's pods seeded.  Every process and namespace is removed after the
    test, pass or fail."""
    return lambda seed=True, **kw: clusters(seed=seed, **kw)


def diag(c, pods=None):
    """Everything needed to understand a failure: each process's stderr and
    the server's request log."""
    reqs = c.server.requests() if c.server else []
    lines = [f"{r['method']} {r['path']}?{r['query']} {r['token']} -> {r['status']}"
             for r in reqs[-80:]]
    return c.logs(pods) + "\n--- last API requests\n" + "\n".join(lines)


def run_job(c, *extra, pods=None, timeout=90):
    c.start_all(*extra, pods=pods)
    c.wait_all(pods=pods, timeout=timeout)
    return pods if pods is not None else c.pods


def assert_all_exit(c, code, pods=None):
    pods = c.pods if pods is None else pods
    assert [p.rc for p in pods] == [code] * len(pods), diag(c, pods)


def assert_on_network(c, net, pods=None, want_if=None):
    """Every pod wrote its own interface on net and says so in decision.json."""
    for p in (c.pods if pods is None else pods):
        dec = C.decision_of(p)
        ifname = want_if(p) if want_if else None
        env = source_env(p.out_dir, "NCCL_SOCKET_IFNAME")
        assert env["NCCL_SOCKET_IFNAME"] == "=" + dec["choice"]["interface"], (p.name, env)
        if ifname:
            assert dec["choice"]["interface"] == ifname, (p.name, dec["choice"])
        assert ipaddress.ip_address(dec["choice"]["address"]) in net, (p.name, dec["choice"])
        assert dec["agreement"]["network"] == str(net), (p.name, dec["agreement"])
        assert dec["agreement"]["pods"] == len(c.nodes), (p.name, dec["agreement"])


def gatherer(c):
    return c.pods[0]


# --log-interval 2, not 1: see the report (the test server holds a watch backlog
# until its first 1 s bookmark, so 1 s watch slices never see it).
COMMON = ("--expect", "4", "--log-interval", "2")


def test_happy_path_each_pod_gets_its_own_name_on_the_fast_network(make_cluster):
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "40")
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    for p in c.pods:
        env = source_env(p.out_dir, "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
        assert env["NCCL_SOCKET_IFNAME"] == "=" + p.node.fast_if, (p.name, env)
        assert C.decision_of(p)["choice"]["address"] == p.node.fast_addr
    # The names really differ per node: that is the point of agreeing.
    assert len({p.node.fast_if for p in c.pods}) == 4

    dec = C.decision_of(gatherer(c))["agreement"]
    assert dec["gatherer"] is True
    d = dec["decision"]
    assert d["ok"] is True and d["pods"] == 4
    assign = {a["pod"]: a["if"] for a in d["rails"][0]["assign"]}
    assert assign == {p.name: p.node.fast_if for p in c.pods}
    nets = {n["net"]: n for n in d["nets"]}
    # Management is the same speed and loses on the policy score (macvlan
    # secondary over plain veth); the decoys never reach a report.
    assert "score" in nets[str(MGMT_NET)]["why"], nets
    assert not any(n.startswith(("10.244.", "172.17.", "169.254.")) for n in nets), nets
    for p in c.pods[1:]:
        assert C.decision_of(p)["agreement"]["gatherer"] is False
    # Smoke ranks: the gatherer is 0, the others follow in pod name order;
    # every pod knows the gatherer's address as the root.
    by_name = sorted(c.pods[1:], key=lambda p: p.name)
    want = {gatherer(c).name: 0, **{p.name: i + 1 for i, p in enumerate(by_name)}}
    for p in c.pods:
        a = C.decision_of(p)["agreement"]
        assert (a["rank"], a["world"]) == (want[p.name], 4), (p.name, a)
        assert a["root"] == gatherer(c).node.fast_addr, (p.name, a)
        assert a["min_mbps"] == d["rails"][0]["mbps"], (p.name, a)

    # Visible through the API: result annotation and a NetworkSelected Event per pod.
    for p in c.pods:
        res = c.annotation(p.name, "nicpick.io/result")
        assert res and p.node.fast_if in res and "10.9.0.0/24" in res, (p.name, res)
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelected"]
    assert sorted(e["involvedObject"]["name"] for e in evs) == sorted(p.name for p in c.pods)
    for e in evs:
        assert e["type"] == "Normal"
        assert e["involvedObject"]["uid"] == next(
            p.uid for p in c.pods if p.name == e["involvedObject"]["name"])


def test_the_event_and_the_outcome_name_the_output_set_each_pod_wrote(make_cluster):
    # An operator ties a pod's Event (kubectl describe pod) and its
    # annotations to the files in its volume by the decision id.
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "40")
    assert_all_exit(c, 0)
    evs = {e["involvedObject"]["name"]: e for e in c.events() if e.get("reason") == "NetworkSelected"}
    ids = set()
    for p in c.pods:
        want = C.decision_of(p)["decision_id"]
        assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{8}", want), want
        assert os.readlink(p.out_dir / "current") == "decision-" + want
        outcome = json.loads(c.annotation(p.name, "nicpick.io/outcome"))
        assert outcome["decision_id"] == want, (p.name, outcome)
        msg = evs[p.name]["message"]
        assert f"; decision {want}; " in msg, (p.name, msg)
        assert len(msg.encode()) <= 1024
        assert f"; decision {want}; " in c.annotation(p.name, "nicpick.io/result")
        ids.add(want)
    assert len(ids) == 4, "each pod writes a set of its own"


def test_kubectl_describe_pod_shows_the_event(make_cluster):
    if not os.access(KUBECTL, os.X_OK):
        pytest.skip(f"kubectl not found at {KUBECTL}: run `make tools` to fetch it")
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "40")
    assert_all_exit(c, 0)
    p = c.kubectl("describe", "pod", C.JOB + "-1")
    assert p.returncode == 0, p.stderr
    ev = [l for l in p.stdout.splitlines() if "NetworkSelected" in l]
    assert ev and "ens3f0" in ev[0] and "nicpick" in ev[0], p.stdout
    assert re.search(r"nicpick\.io/result:\s+NCCL uses ens3f0", p.stdout), p.stdout


def have(tool):
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed")


def test_firewalled_fast_nic_falls_back_to_management(make_cluster):
    """A probe that cannot cross the fast network removes it; the pods then
    agree on the management network, the only other common one."""
    have("nft")
    c = make_cluster()
    b = c.nodes[1]
    c.nft(b, f"""table inet nicpick_e2e {{
        chain input {{ type filter hook input priority 0; policy accept;
            ip daddr {b.fast_addr} tcp dport 29417 drop
        }}
    }}""")
    # The probe waits up to 20 s for a silent peer before it calls it failed.
    run_job(c, *COMMON, "--timeout", "75", timeout=120)
    assert_all_exit(c, 0)
    assert_on_network(c, MGMT_NET, want_if=lambda p: "eth0")
    g = gatherer(c)
    # The log names the probe that failed and what was done about it.
    assert re.search(rf"probe {re.escape(c.nodes[0].fast_addr)} -> "
                     rf"{re.escape(b.fast_addr)} on eth1: FAILED", g.stderr_text), g.stderr_text
    assert "network 10.9.0.0/24 failed the probe" in g.stderr_text, g.stderr_text
    d = C.decision_of(g)["agreement"]
    assert d["round"] >= 2, d
    excluded = {n["net"]: n["why"] for n in d["decision"]["nets"]}
    assert "failed probe" in excluded[str(FAST_NET)], excluded


def test_slow_fast_network_loses_on_measured_throughput(make_cluster):
    """Both networks are 10 Gb/s on paper (a speed tie), so with
    --probe-throughput the gatherer measures each around the ring; the fast
    network throttled to 50 Mbit/s must lose to management."""
    have("tc")
    c = make_cluster()
    for n in c.nodes:
        c.tc(n, "qdisc", "add", "dev", n.fast_if, "root", "tbf", "rate", "50mbit",
             "burst", "32kbit", "latency", "100ms")
    run_job(c, *COMMON, "--timeout", "60", "--probe-throughput=2000000", timeout=100)
    assert_all_exit(c, 0)
    assert_on_network(c, MGMT_NET, want_if=lambda p: "eth0")
    g = gatherer(c).stderr_text
    assert "measuring throughput on 2 tied networks" in g, g
    rates = {m.group(1): float(m.group(2)) for m in
             re.finditer(r"network (\S+): worst ring throughput (\d+) Mb/s", g)}
    assert set(rates) == {str(FAST_NET), str(MGMT_NET)}, g
    assert rates[str(FAST_NET)] < 60, rates
    assert rates[str(MGMT_NET)] > rates[str(FAST_NET)] * 2, rates


def test_missing_peer_all_exit_5_before_the_deadline_naming_it(make_cluster):
    c = make_cluster()
    started = c.pods[:3]  # job-w-3 exists as an object but never runs nicpick
    t0 = time.monotonic()
    run_job(c, *COMMON, "--timeout", "8", pods=started, timeout=30)
    elapsed = time.monotonic() - t0
    assert_all_exit(c, 5, started)
    assert elapsed < 8 + 3, f"took {elapsed:.1f}s\n" + diag(c, started)
    g = gatherer(c).stderr_text
    last = [l for l in g.splitlines() if "error:" in l]
    assert last and "job-w-3" in last[-1], g
    # Progress lines said what it waited for while it waited.
    assert re.search(r"3/4 pods reported; missing: job-w-3", g), g
    for p in started[1:]:
        # Every follower learns from the gatherer's pod who is missing:
        # in its progress lines and in its exit message.
        assert re.search(r"info: .*waiting for the gatherer job-w-0: 3/4 pods reported; "
                         r"missing: job-w-3", p.stderr_text), p.describe()
        err = error_line(p)
        assert "deadline" in err and "missing: job-w-3" in err, p.describe()
    assert_failed_events_say(c, started, "missing: job-w-3")


def error_line(p):
    lines = [l for l in p.stderr_text.splitlines() if "error:" in l]
    assert lines, p.describe()
    return lines[-1]


def assert_failed_events_say(c, pods, text):
    """Each pod posted NetworkSelectionFailed with its own reason."""
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelectionFailed"]
    by_pod = {e["involvedObject"]["name"]: e for e in evs}
    assert sorted(by_pod) == sorted(p.name for p in pods), evs
    for p in pods:
        e = by_pod[p.name]
        assert e["type"] == "Warning" and text in e["message"], (p.name, e)
        assert e["message"] in error_line(p), (e["message"], p.describe())


def test_a_refused_report_is_named_with_its_reason_on_every_pod(make_cluster):
    c = make_cluster()
    started = c.pods[:3]
    # job-w-3 "reports" in a format no nicpick writes.
    c.server.patch_object(C.NAMESPACE, c.pods[3].name, {"metadata": {"annotations": {
        "nicpick.io/report": json.dumps({"v": 1, "pod": c.pods[3].name, "bogus": 1})}}})
    run_job(c, *COMMON, "--timeout", "8", pods=started, timeout=30)
    assert_all_exit(c, 5, started)
    for p in started:
        err = error_line(p)
        assert "missing: job-w-3" in err and "refused: job-w-3: bad report" in err, p.describe()


def test_pods_not_created_yet_are_counted_on_every_pod(make_cluster):
    c = make_cluster(seed=False)
    c.seed_pods(count=3)  # the job's fourth pod never gets created
    t0 = time.monotonic()
    run_job(c, *COMMON, "--timeout", "8", timeout=30)
    assert time.monotonic() - t0 < 8 + 3, diag(c)
    assert_all_exit(c, 5)
    for p in c.pods:
        assert "pods not created yet: 1 of 4" in error_line(p), p.describe()
        # ... and each progress line said so while it waited.
        infos = [l for l in p.stderr_text.splitlines() if "info:" in l and "reported" in l]
        assert infos and all("pods not created yet: 1 of 4" in l for l in infos), p.describe()
    assert_failed_events_say(c, c.pods, "pods not created yet: 1 of 4")


def test_missing_gatherer_is_named_on_every_pod(make_cluster):
    c = make_cluster()
    c.server.delete_object(C.NAMESPACE, gatherer(c).name)
    started = c.pods[1:]
    run_job(c, *COMMON, "--timeout", "6", pods=started, timeout=30)
    assert_all_exit(c, 5, started)
    for p in started:
        err = error_line(p)
        assert "the gatherer (" in err and "the gatherer pod itself is missing" in err, p.describe()
        assert "job-completion-index=0" in err, p.describe()
    assert_failed_events_say(c, started, "the gatherer pod itself is missing")


def test_gatherer_not_running_nicpick_is_named_on_every_pod(make_cluster):
    c = make_cluster()
    started = c.pods[1:]
    run_job(c, *COMMON, "--timeout", "6", pods=started, timeout=30)
    assert_all_exit(c, 5, started)
    for p in started:
        assert "the gatherer job-w-0, which has published no progress" in error_line(p), p.describe()


def test_more_pods_than_expected_every_pod_exits_at_once(make_cluster):
    c = make_cluster()
    t0 = time.monotonic()
    run_job(c, "--expect", "3", "--log-interval", "2", "--timeout", "60", timeout=90)
    elapsed = time.monotonic() - t0
    assert_all_exit(c, 5)
    assert elapsed < 15, f"took {elapsed:.1f}s: waited for the deadline\n" + diag(c)
    for p in c.pods:
        err = error_line(p)
        assert "NICPICK_EXPECT" in err and "4 pods of the job exist" in err, p.describe()
        assert not os.path.exists(p.out_dir / "nccl.env"), p.name
    assert_failed_events_say(c, c.pods, "NICPICK_EXPECT")


def test_api_faults_still_end_in_the_same_decision(make_cluster):
    c = make_cluster()
    c.server.set_faults([
        {"kind": "error", "code": 500, "verb": "patch", "count": 3},
        {"kind": "error", "code": 429, "retry_after": 1, "verb": "get", "count": 2},
        {"kind": "drop_watch", "after_events": 1, "count": 3},
        {"kind": "expire_watch", "count": 1},
    ])
    run_job(c, *COMMON, "--timeout", "60", timeout=100)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    left = c.server.faults()
    assert left == [], f"faults never triggered: {left}"
    retries = sum(C.decision_of(p)["agreement"]["api"]["retries"] for p in c.pods)
    assert retries >= 5, retries  # 3 x 500 + 2 x 429 at least


def test_rbac_denied_patch_exits_5_naming_the_rule(make_cluster):
    c = make_cluster()
    c.server.set_rbac(deny=[{"verbs": ["patch"], "resources": ["pods"]}])
    t0 = time.monotonic()
    run_job(c, *COMMON, "--timeout", "30", timeout=60)
    assert_all_exit(c, 5)
    assert time.monotonic() - t0 < 20, diag(c)
    for p in c.pods:
        assert re.search(r'needs "patch" on "pods"', p.stderr_text), p.describe()


def test_role_without_patch_gets_the_api_403_and_exits_5_naming_the_rule(make_cluster,
                                                                          tmp_path):
    """The pods' tokens run under deploy/rbac.yaml's Role, enforced by the
    server as kube-apiserver's RBAC authorizer does. Take `patch` out of it:
    every pod exits 5 with the rule it lacks and the API's own 403 text."""
    import yaml
    docs = [d for d in yaml.safe_load_all(C.RBAC_YAML.read_text()) if d]
    role = next(d for d in docs if d["kind"] == "Role")
    pods_rule = next(r for r in role["rules"] if "pods" in r["resources"])
    pods_rule["verbs"].remove("patch")
    manifest = tmp_path / "rbac-without-patch.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    c = make_cluster(rbac=manifest)
    t0 = time.monotonic()
    run_job(c, *COMMON, "--timeout", "30", timeout=60)
    assert_all_exit(c, 5)
    assert time.monotonic() - t0 < 20, diag(c)
    for p in c.pods:
        assert 'the Role needs "patch" on "pods" in namespace "train"' in p.stderr_text, \
            p.describe()
        assert (f'pods "{p.name}" is forbidden: User "system:serviceaccount:train:nicpick" '
                'cannot patch resource "pods" in API group "" in the namespace "train"'
                ) in p.stderr_text, p.describe()


def test_every_api_call_of_an_agreement_is_allowed_by_the_role(make_cluster):
    """The happy path under exactly deploy/rbac.yaml: no request was denied,
    and every request came from the Role's ServiceAccount."""
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "40")
    assert_all_exit(c, 0)
    mine = [r for r in c.server.requests() if r["token"].startswith("tok-")]
    assert mine and {r["user"] for r in mine} == {"system:serviceaccount:train:nicpick"}
    assert [r for r in mine if r["status"] == 403] == [], diag(c)
    assert {(r["verb"], r["resource"]) for r in mine} >= {("patch", "pods"),
                                                            ("create", "events")}


def test_compacted_watch_history_relists_and_still_agrees(make_cluster):
    """Real compaction (the history is dropped, nothing injected into the
    stream): each pod's first watch finds the resourceVersion of its list
    compacted away (410 at watch start), and the server compacts every
    0.3 s while the job agrees, as kube-apiserver compacts etcd. Every pod
    re-lists and the job still agrees on the fast network."""
    c = make_cluster()
    c.server.configure(compact_interval=0.3)
    c.server.set_faults([{"kind": "compact", "verb": "watch", "token": p.token}
                         for p in c.pods])
    run_job(c, *COMMON, "--timeout", "60", timeout=100)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    assert c.server.faults() == []
    reqs = c.server.requests()
    for p in c.pods:
        mine = [r for r in reqs if r["token"] == p.token]
        gone = [i for i, r in enumerate(mine) if r.get("watch_error") == 410]
        assert gone, (p.name, [(r["verb"], r["query"]) for r in mine])
        assert any(r["verb"] == "list" for r in mine[gone[0] + 1:]), \
            (p.name, [(r["verb"], r["query"], r.get("watch_error")) for r in mine])


def test_pod_restarted_mid_agreement_still_agrees(make_cluster):
    c = make_cluster()
    first = c.pods[:3]
    c.start_all(*COMMON, "--timeout", "60", pods=first)
    victim = c.pods[2]
    old_uid = victim.uid
    deadline = time.monotonic() + 20
    while c.annotation(victim.name, "nicpick.io/report") is None:
        assert time.monotonic() < deadline, diag(c, first)
        time.sleep(0.1)
    victim.kill()
    # The gatherer cannot have decided: job-w-3 has not started yet.
    assert c.annotation(C.JOB + "-0", "nicpick.io/assignment") is None
    new_uid = c.recreate_pod(victim)
    assert new_uid != old_uid
    assert c.annotation(victim.name, "nicpick.io/report") is None
    c.start_all(*COMMON, "--timeout", "60", pods=[victim, c.pods[3]])
    c.wait_all(timeout=90)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET, want_if=lambda p: p.node.fast_if)
    rep = json.loads(c.annotation(victim.name, "nicpick.io/report"))
    assert rep["uid"] == new_uid, rep
    assert C.decision_of(victim)["agreement"]["network"] == str(FAST_NET)


def test_no_common_network_exits_4_with_a_per_pod_table(make_cluster):
    """node-d has no fast NIC and a /32 management address (it reaches the
    API server by a device route only), so it shares no subnet with the
    others; its decoys carry the same addresses as everyone's and are refused."""
    c = make_cluster(fast=[True, True, True, False], mgmt_plen=[24, 24, 24, 32])
    run_job(c, *COMMON, "--timeout", "40")
    assert_all_exit(c, 4)
    g = gatherer(c).stderr_text
    lines = g.splitlines()
    head = [i for i, l in enumerate(lines) if re.match(r"POD\s+CANDIDATES\s+WHY", l)]
    assert head, g
    rows = {l.split()[0]: l for l in lines[head[0] + 1:] if l.startswith(C.JOB)}
    assert "job-w-3" in rows, g
    assert "10.9.0.0/24" in rows["job-w-3"] and "192.168.100.14/32" in rows["job-w-3"], rows
    assert "share no usable network" in g, g
    for p in c.pods:
        assert not (p.out_dir / "nccl.env").exists(), p.name
        assert "error:" in p.stderr_text, p.describe()
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelectionFailed"]
    assert len(evs) == 4, evs


def test_nodes_in_different_subnets_agree_on_a_routed_fabric(make_cluster):
    """A routed fabric: every node's data NIC sits in a subnet of its own
    (10.50.i.0/24) behind a router; no subnet is common once management is
    excluded.  The pods agree on the routed rail through the gateways they
    report, and the probe crosses the router."""
    c = make_cluster(n_nodes=3, fast=[False] * 3)
    router = c.factory.new("router")
    router.exec(["sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
    for i, node in enumerate(c.nodes):
        C.netns_mod.veth(node.ns, "rt0", router, f"r{i}", f"10.50.{i}.2/24", f"10.50.{i}.1/24")
        node.ns.ip("route", "add", "10.50.0.0/16", "via", f"10.50.{i}.1")
    run_job(c, "--expect", "3", "--log-interval", "2", "--exclude", "=eth0", "--timeout", "40")
    assert_all_exit(c, 0)
    for i, p in enumerate(c.pods):
        dec = C.decision_of(p)
        assert dec["choice"]["interface"] == "rt0", (p.name, dec["choice"])
        assert dec["choice"]["address"] == f"10.50.{i}.2", (p.name, dec["choice"])
        assert dec["agreement"]["network"] == "routed", (p.name, dec["agreement"])
        # Its ring neighbour sits in another subnet: the probe went through
        # the router and saw this pod's own address.
        nxt = dec["agreement"]["probed_address"]
        assert nxt.startswith("10.50.") and not nxt.startswith(f"10.50.{i}."), dec["agreement"]
    d = C.decision_of(gatherer(c))["agreement"]["decision"]
    assert d["routed"] is True, d


def test_a_container_restarted_after_the_round_ended_takes_the_same_result_at_once(make_cluster):
    """An init container that runs again in the same pod (same uid) after the
    job agreed: its neighbours have stopped listening, so it must not probe
    them for the whole probe window; the ended round is its answer."""
    c = make_cluster()
    run_job(c, *COMMON, "--timeout", "40")
    assert_all_exit(c, 0)
    p = c.pods[2]
    first = C.decision_of(p)["choice"]
    first_ranks = C.decision_of(p)["agreement"]
    assert first_ranks["rank"] > 0, first_ranks
    p.start(*COMMON, "--timeout", "40")
    assert p.wait() == 0, p.describe()
    assert p.elapsed < 5, (p.elapsed, p.describe())
    again = C.decision_of(p)["choice"]
    assert (again["interface"], again["address"]) == (first["interface"], first["address"])
    ranks = C.decision_of(p)["agreement"]
    assert (ranks["rank"], ranks["world"], ranks["root"]) == (
        first_ranks["rank"], 4, gatherer(c).node.fast_addr), ranks


def routed_fabric(c):
    """Each node's data NIC rt0 in a subnet of its own (10.50.i.0/24) behind
    one router namespace, as in the routed-fabric test; returns the router."""
    router = c.factory.new("router")
    router.exec(["sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
    for i, node in enumerate(c.nodes):
        C.netns_mod.veth(node.ns, "rt0", router, f"r{i}", f"10.50.{i}.2/24", f"10.50.{i}.1/24")
        node.ns.ip("route", "add", "10.50.0.0/16", "via", f"10.50.{i}.1")
    return router


def test_nat_on_the_router_fails_the_probe(make_cluster):
    """A real SNAT: the router masquerades what it forwards to node 1, so
    node 1 sees its ring neighbour as the router's 10.50.1.1.  The peer's
    source check must catch it; the routed network is then removed and,
    with management excluded, nothing is left (exit 4)."""
    have("nft")
    c = make_cluster(n_nodes=3, fast=[False] * 3)
    router = routed_fabric(c)
    p = router.exec(["nft", "-f", "-"], input="""table ip nicpick_nat {
        chain post { type nat hook postrouting priority 100; policy accept;
            oifname "r1" masquerade
        }
    }""")
    assert p.returncode == 0, p.stderr
    run_job(c, "--expect", "3", "--log-interval", "2", "--exclude", "=eth0", "--timeout", "60",
            timeout=100)
    assert_all_exit(c, 4)
    logs = "\n".join(p.stderr_text for p in c.pods)
    assert re.search(r"saw this pod as 10\.50\.1\.1, not 10\.50\.\d\.2 \(NAT", logs), diag(c)
    assert "network routed failed the probe" in gatherer(c).stderr_text, diag(c)
    for p in c.pods:
        assert not (p.out_dir / "nccl.env").exists(), p.name


def test_route_to_the_peer_through_another_device_fails_the_probe(make_cluster):
    """Node 1 routes the other nodes' fast addresses through its management
    NIC.  The traffic still arrives (and from the right source address: the
    probe binds it), so only the route check can see that NCCL's traffic
    would not use the chosen device.  The fast network is removed and the
    pods agree on management."""
    c = make_cluster()
    b = c.nodes[1]
    for other in c.nodes:
        if other is not b:
            b.ns.ip("route", "add", f"{other.fast_addr}/32", "dev", "eth0")
    run_job(c, *COMMON, "--timeout", "75", timeout=120)
    assert_all_exit(c, 0)
    assert_on_network(c, MGMT_NET, want_if=lambda p: "eth0")
    logs = "\n".join(p.stderr_text for p in c.pods)
    assert re.search(r"the route to 10\.9\.0\.\d+ leaves through eth0, not "
                     + re.escape(b.fast_if), logs), diag(c)
    assert "network 10.9.0.0/24 failed the probe" in gatherer(c).stderr_text, diag(c)


def test_forged_assignment_naming_an_interface_the_pod_did_not_report_is_refused(make_cluster):
    """Another principal with `patch` on pods writes an assignment onto a
    pod, in the gatherer's name (its uid is public).  The pod takes only an
    interface and address of its own report: it refuses the part, exit 5,
    and writes nothing (docs/security.md)."""
    c = make_cluster()
    victim, gath = c.pods[2], c.pods[0]
    # Well-formed down to the round's probe token, which anyone who reads
    # pods could copy from a real assignment.
    forged = {"v": 1, "leader": gath.uid, "leader_pod": gath.name, "epoch": 1, "state": "probe",
              "n": 4, "token": "0123456789abcdef0123456789abcdef",
              "parts": [{"net": "10.66.0.0/24", "if": "evil0", "addr": "10.66.0.3",
                         "next_pod": c.pods[3].name, "next_addr": "10.66.0.4",
                         "prev_addr": "10.66.0.2", "rank": 2, "world": 4, "root": "10.66.0.1",
                         "min_mbps": 100000}]}
    c.server.patch_object(C.NAMESPACE, victim.name, {"metadata": {"annotations": {
        "nicpick.io/assignment": json.dumps(forged, separators=(",", ":"), sort_keys=True)}}})
    victim.start(*COMMON, "--timeout", "20")
    assert victim.wait(60) == 5, victim.describe()
    assert "evil0 10.66.0.3" in victim.stderr_text and "did not report" in victim.stderr_text, \
        victim.describe()
    assert not (victim.out_dir / "nccl.env").exists()


def test_a_forged_probe_result_of_a_far_round_does_not_hold_the_round(make_cluster):
    """Anyone who may patch pods writes a probe result in the gatherer's
    name (its uid is public) for a round far ahead, before the job starts.
    The pod's own result of the real round replaces it on the API; the
    gatherer must count that one, not wait for a round it never handed
    out."""
    c = make_cluster()
    victim, gath = c.pods[3], c.pods[0]
    forged = {"v": 1, "leader": gath.uid, "epoch": 999999,
              "trials": [{"ok": True, "mbps": 0, "detail": ""}]}
    c.server.patch_object(C.NAMESPACE, victim.name, {"metadata": {"annotations": {
        "nicpick.io/probe": json.dumps(forged, separators=(",", ":"))}}})
    run_job(c, *COMMON, "--timeout", "20", timeout=60)
    assert_all_exit(c, 0)
    assert_on_network(c, FAST_NET)
