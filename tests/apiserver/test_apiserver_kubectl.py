"""tools/kubeapi against the real kubectl (scripts/fetch-k8s-tools.sh fetches it;
without it these tests skip and say why): get, describe, annotate, label, patch,
watch, create/delete from a file, errors as kubectl prints them."""

import json
import os
import subprocess
import time

import pytest

from apiclient import pod, wait_for, ROOT
from apicommon import NS, PODS, USER

from tools import kubeapi


def test_kubectl_version_shows_server_version(kc):
    r = kc("version", check=True)
    assert "Server Version: v1.33.0-nicpick-test" in r.stdout


def test_kubectl_get_pods_json(kc, server):
    server.create_pod(NS, pod("a", {"app": "x"}))
    server.create_pod(NS, pod("b", {"app": "y"}))
    out = json.loads(kc("get", "pods", "-o", "json", check=True).stdout)
    assert out["kind"] == "List"
    assert sorted(i["metadata"]["name"] for i in out["items"]) == ["a", "b"]
    assert all(i["kind"] == "Pod" for i in out["items"])


def test_kubectl_get_pod_by_name_prints_table(kc, server):
    server.create_pod(NS, pod("web-0", phase="Running"))
    r = kc("get", "pod", "web-0", check=True)
    head, row = r.stdout.splitlines()[:2]
    assert head.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["web-0", "0/1", "Running", "0"]


def test_kubectl_get_pods_label_selector(kc, server):
    for n, app in (("p1", "x"), ("p2", "y"), ("p3", "x")):
        server.create_pod(NS, pod(n, {"app": app}))
    r = kc("get", "pods", "-l", "app=x", "-o", "name", check=True)
    assert r.stdout.split() == ["pod/p1", "pod/p3"]


def test_kubectl_annotate_uses_merge_patch_and_reads_back(kc, server):
    server.create_pod(NS, pod("p"))
    kc("annotate", "pod", "p", "nicpick.io/report=abc", check=True)
    assert server.get_object(NS, "p")["metadata"]["annotations"] == {"nicpick.io/report": "abc"}
    patches = [r for r in server.requests() if r["method"] == "PATCH"]
    assert patches[-1]["content_type"] == "application/merge-patch+json"
    r = kc("get", "pod", "p", "-o", "jsonpath={.metadata.annotations.nicpick\\.io/report}",
           check=True)
    assert r.stdout == "abc"


def test_kubectl_annotate_refuses_overwrite_without_flag(kc, server):
    server.create_pod(NS, pod("p", annotations={"k": "v"}))
    r = kc("annotate", "pod", "p", "k=w")
    assert r.returncode != 0 and "already has a value" in r.stderr
    kc("annotate", "--overwrite", "pod", "p", "k=w", check=True)
    assert server.get_object(NS, "p")["metadata"]["annotations"]["k"] == "w"


def test_kubectl_label(kc, server):
    server.create_pod(NS, pod("p", {"app": "x"}))
    kc("label", "pod", "p", "tier=fe", check=True)
    assert server.get_object(NS, "p")["metadata"]["labels"] == {"app": "x", "tier": "fe"}
    kc("label", "pod", "p", "app-", check=True)
    assert server.get_object(NS, "p")["metadata"]["labels"] == {"tier": "fe"}


def test_kubectl_patch_merge(kc, server):
    server.create_pod(NS, pod("p", annotations={"a": "1", "b": "2"}))
    kc("patch", "pod", "p", "--type", "merge", "-p",
       '{"metadata":{"annotations":{"a":null,"c":"3"}}}', check=True)
    assert server.get_object(NS, "p")["metadata"]["annotations"] == {"b": "2", "c": "3"}


def test_kubectl_patch_strategic_merges_containers_by_name(kc, server):
    p = pod("p")
    p["spec"]["containers"].append({"name": "side", "image": "old"})
    server.create_pod(NS, p)
    kc("patch", "pod", "p", "-p", '{"spec":{"containers":[{"name":"side","image":"new"}]}}',
       check=True)
    assert [r["content_type"] for r in server.requests() if r["method"] == "PATCH"][-1] == \
        "application/strategic-merge-patch+json"
    cs = server.get_object(NS, "p")["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in cs] == [("main", "busybox"), ("side", "new")]


def test_kubectl_patch_json(kc, server):
    server.create_pod(NS, pod("p", {"app": "x"}))
    kc("patch", "pod", "p", "--type", "json", "-p",
       '[{"op":"add","path":"/metadata/labels/k","value":"v"}]', check=True)
    assert server.get_object(NS, "p")["metadata"]["labels"] == {"app": "x", "k": "v"}


def test_kubectl_watch_json_receives_modification(kc, kubectl, server):
    server.create_pod(NS, pod("p"))
    proc = subprocess.Popen([kubectl, "--cache-dir", kc.cache, "get", "pods", "--watch",
                             "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=kc.env,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        assert wait_for(lambda: server.state()["watchers"] >= 1), "kubectl never watched"
        server.patch_object(NS, "p", {"metadata": {"annotations": {"seen": "yes"}}})
        time.sleep(1.0)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    objs = [json.loads(x) for x in _split_json_stream(out)]
    assert len(objs) == 2, (out, err)
    assert objs[1]["metadata"]["annotations"] == {"seen": "yes"}
    assert int(objs[1]["metadata"]["resourceVersion"]) > int(objs[0]["metadata"]["resourceVersion"])


def _split_json_stream(text):
    dec, i, out = json.JSONDecoder(), 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, j = dec.raw_decode(text, i)
        out.append(json.dumps(obj))
        i = j
    return out


def test_kubectl_describe_pod_shows_posted_event(kc, server, api):
    p = server.create_pod(NS, pod("p"))
    ev = {"metadata": {"name": "p.17a"}, "involvedObject": {
        "kind": "Pod", "namespace": NS, "name": "p", "uid": p["metadata"]["uid"],
        "apiVersion": "v1"}, "reason": "NicpickSelected", "message": "picked mlx5_0",
        "type": "Normal", "source": {"component": "nicpick"},
        "firstTimestamp": kubeapi.now_rfc3339(), "lastTimestamp": kubeapi.now_rfc3339(),
        "count": 1}
    assert api.req("POST", f"/api/v1/namespaces/{NS}/events", ev).status == 201
    r = kc("describe", "pod", "p", check=True)
    line = [x for x in r.stdout.splitlines() if "NicpickSelected" in x]
    assert line and "picked mlx5_0" in line[0] and "nicpick" in line[0], r.stdout


def test_kubectl_get_events(kc, server, api):
    server.create_pod(NS, pod("p"))
    api.req("POST", f"/api/v1/namespaces/{NS}/events", {
        "metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p",
                                                        "namespace": NS},
        "reason": "Hello", "message": "world", "type": "Warning",
        "lastTimestamp": kubeapi.now_rfc3339()})
    r = kc("get", "events", check=True)
    assert r.stdout.splitlines()[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT",
                                                "MESSAGE"]
    assert r.stdout.splitlines()[1].split()[1:] == ["Warning", "Hello", "pod/p", "world"]


def test_kubectl_create_and_delete_from_file(kc, server, tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(dict(pod("made"), apiVersion="v1", kind="Pod")))
    kc("create", "-f", str(f), check=True)
    assert server.get_object(NS, "made")["status"]["phase"] == "Pending"
    kc("delete", "pod", "made", "--wait=false", check=True)
    assert kc("get", "pod", "made").stderr.strip() == \
        'Error from server (NotFound): pods "made" not found'


def test_kubectl_wrong_token_is_unauthorized(kc, server, tmp_path):
    bad = server.write_kubeconfig(str(tmp_path / "bad"), token="not-a-token")
    # A direct request decodes the Status body: its message is "Unauthorized".
    r = kc("get", "--raw", PODS, kubeconfig=bad)
    assert r.returncode != 0
    assert r.stderr.strip().endswith("error: You must be logged in to the server (Unauthorized)")
    # Real: kubectl's discovery client does not decode the 401 Status and says this instead
    # (the wording users see against a real cluster with an expired token).
    r = kc("get", "pods", kubeconfig=bad)
    assert r.returncode != 0
    assert "You must be logged in to the server (the server has asked for the client to " \
        "provide credentials)" in r.stderr


def test_kubectl_rbac_denied_prints_forbidden(kc, server):
    server.create_pod(NS, pod("p"))
    server.set_rbac(deny=[{"verbs": ["patch"], "resources": ["pods"]}])
    r = kc("annotate", "pod", "p", "k=v")
    assert r.returncode != 0
    assert ('Error from server (Forbidden): pods "p" is forbidden: User "%s" cannot patch '
            'resource "pods" in API group "" in the namespace "default"' % USER) in r.stderr


def test_kubectl_get_jobs(kc, server):
    server.seed({"jobs": [{"metadata": {"name": "train", "namespace": NS},
                           "spec": {"completions": 4}, "status": {"succeeded": 1}}]})
    r = kc("get", "jobs", check=True)
    assert r.stdout.splitlines()[1].split()[:2] == ["train", "1/4"]


TRAINING_KINDS = [
    # (kubectl resource, apiVersion, kind, header of `kubectl get`)
    ("pytorchjobs", "kubeflow.org/v1", "PyTorchJob", ["NAME", "STATE", "AGE"]),
    ("jobsets", "jobset.x-k8s.io/v1alpha2", "JobSet",
     ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]),
    ("trainjobs", "trainer.kubeflow.org/v1alpha1", "TrainJob", ["NAME", "STATE", "AGE"]),
]


@pytest.mark.parametrize("plural,api_version,kind,header", TRAINING_KINDS)
def test_kubectl_gets_training_job_kinds(kc, server, plural, api_version, kind, header):
    """The job kinds nicpick's pods belong to, found through discovery as the
    CRDs in ../shared/schemas (and JobSet's) define them."""
    server.seed({"objects": [{"apiVersion": api_version, "kind": kind,
                              "metadata": {"name": "train", "namespace": NS},
                              "spec": {"x": 1},
                              "status": {"conditions": [{"type": "Created"},
                                                        {"type": "Running"}]}}]})
    r = kc("get", plural, check=True)
    head, row = r.stdout.splitlines()[:2]
    assert head.split() == header
    assert row.split()[0] == "train"
    if "STATE" in header:
        assert row.split()[1] == "Running"      # Real: .status.conditions[-1:].type
    got = json.loads(kc("get", f"{plural}.{api_version.split('/')[0]}", "train", "-o", "json",
                        check=True).stdout)
    assert (got["apiVersion"], got["kind"], got["spec"]) == (api_version, kind, {"x": 1})
    r = kc("get", plural, "missing")
    assert r.returncode != 0
    assert f'{plural}.{api_version.split("/")[0]} "missing" not found' in r.stderr


def test_kubectl_applies_and_lists_deploy_rbac_yaml(kc, server):
    r = kc("apply", "-f", os.path.join(ROOT, "deploy", "rbac.yaml"), check=True)
    assert "role.rbac.authorization.k8s.io/nicpick created" in r.stdout, r.stdout
    role = json.loads(kc("get", "role", "nicpick", "-o", "json", check=True).stdout)
    assert role["rules"][0] == {"apiGroups": [""], "resources": ["pods"],
                                "verbs": ["get", "list", "watch", "patch"]}
    r = kc("get", "rolebindings", "-o", "wide", check=True)
    assert r.stdout.splitlines()[1].split()[:2] == ["nicpick", "Role/nicpick"]


def test_kubectl_reads_compacted_history_as_410(kc, server, api):
    """Compaction drops the history, as etcd's does: an exact list or a watch from
    before it is 410 Expired, as kubectl shows it."""
    server.create_pod(NS, pod("a"))
    old = api.get(PODS).body["metadata"]["resourceVersion"]
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    server.compact()
    r = kc("get", "--raw", f"{PODS}?resourceVersion={old}&resourceVersionMatch=Exact")
    assert r.returncode != 0
    assert "Error from server (Expired): The resourceVersion for the provided list is too " \
        "old." in r.stderr, r.stderr
    r = kc("get", "--raw", f"{PODS}?watch=1&resourceVersion={old}", check=True)
    ev = json.loads(r.stdout)
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
    assert ev["object"]["message"] == \
        f"too old resource version: {old} ({server.state()['floor']})"
