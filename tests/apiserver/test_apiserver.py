"""Fidelity tests of tools/kubeapi against real clients (kubectl, the Python
kubernetes client) and against the wire shapes of kube-apiserver (direct HTTPS)."""

import json
import os
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

from apiclient import Api, pod, wait_for, KUBEAPI, ROOT, kubeapi_env

from tools import kubeapi

NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
USER = "system:serviceaccount:default:default"


def status_shape(body, code, reason):
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["metadata"] == {} and body["status"] == "Failure"
    assert body["code"] == code and body["reason"] == reason
    return body


# =========================================================================== kubectl

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


# =========================================================================== Python client

@pytest.fixture
def core(server):
    from kubernetes import client, config
    api_client = config.new_client_from_config(config_file=server.kubeconfig_path)
    yield client.CoreV1Api(api_client)
    api_client.close()


def test_py_list_with_label_and_field_selector(core, server):
    server.create_pod(NS, pod("a", {"job": "j", "role": "w"}, phase="Running"))
    server.create_pod(NS, pod("b", {"job": "j", "role": "m"}, phase="Pending"))
    server.create_pod(NS, pod("c", {"job": "k"}, phase="Running"))
    r = core.list_namespaced_pod(NS, label_selector="job=j")
    assert [p.metadata.name for p in r.items] == ["a", "b"]
    r = core.list_namespaced_pod(NS, label_selector="job in (j,k),role!=m",
                                 field_selector="status.phase=Running")
    assert [p.metadata.name for p in r.items] == ["a", "c"]
    r = core.list_namespaced_pod(NS, field_selector="metadata.name=b")
    assert [p.metadata.name for p in r.items] == ["b"]


def test_py_read_pod(core, server):
    created = server.create_pod(NS, pod("a", {"x": "1"}, node="n1"))
    p = core.read_namespaced_pod("a", NS)
    assert p.metadata.uid == created["metadata"]["uid"]
    assert p.spec.node_name == "n1" and p.metadata.labels == {"x": "1"}


def test_py_patch_sends_strategic_merge_and_merges_annotations(core, server):
    server.create_pod(NS, pod("a", annotations={"keep": "1"}))
    p = core.patch_namespaced_pod("a", NS, {"metadata": {"annotations": {"new": "2"}}})
    assert p.metadata.annotations == {"keep": "1", "new": "2"}
    assert [r["content_type"] for r in server.requests() if r["method"] == "PATCH"] == \
        ["application/strategic-merge-patch+json"]
    # A list body is sent as a JSON patch.
    p = core.patch_namespaced_pod("a", NS, [{"op": "remove", "path": "/metadata/annotations/keep"}])
    assert p.metadata.annotations == {"new": "2"}
    assert server.requests()[-1]["content_type"] == "application/json-patch+json"


def test_py_create_event(core, server):
    from kubernetes import client
    server.create_pod(NS, pod("a"))
    ev = core.create_namespaced_event(NS, client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="a.1"), reason="R", message="M", type="Normal",
        involved_object=client.V1ObjectReference(kind="Pod", name="a", namespace=NS)))
    assert ev.metadata.uid and ev.metadata.namespace == NS
    got = core.list_namespaced_event(NS, field_selector="involvedObject.name=a,reason=R")
    assert [e.metadata.name for e in got.items] == ["a.1"]


def test_py_watch_added_modified_bookmark(core, server):
    from kubernetes import watch
    server.create_pod(NS, pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    threading.Timer(0.2, lambda: server.create_pod(NS, pod("b"))).start()
    threading.Timer(0.4, lambda: server.patch_object(NS, "a", {"metadata": {
        "labels": {"m": "1"}}})).start()
    seen = []
    for e in watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv,
                                  allow_watch_bookmarks=True, timeout_seconds=2):
        seen.append((e["type"], e["raw_object"]["metadata"].get("name")))
    assert [x for x in seen if x[0] != "BOOKMARK"] == [("ADDED", "b"), ("MODIFIED", "a")], seen
    assert ("BOOKMARK", None) in seen


def test_py_watch_too_old_resource_version_raises_410(core, server):
    from kubernetes import client, watch
    server.create_pod(NS, pod("a"))
    old = core.list_namespaced_pod(NS).metadata.resource_version
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    server.compact()
    # With timeout_seconds the client does not retry: the ERROR event raises at once.
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=old,
                                  timeout_seconds=5))
    assert ei.value.status == 410
    assert "Expired: too old resource version: %s" % old in ei.value.reason
    # Without it, the client retries once from the same resourceVersion, then raises.
    server.requests(clear=True)
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=old))
    assert ei.value.status == 410
    assert len([r for r in server.requests() if r["verb"] == "watch"]) == 2


def test_py_watch_start_after_compaction_raises_410(core, server):
    """A compaction between the client's list and its watch (the "compact" fault:
    another write, then the history is dropped): the watch starts with 410."""
    from kubernetes import client, watch
    server.create_pod(NS, pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    server.add_fault(kind="compact", verb="watch")
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv,
                                  timeout_seconds=5))
    assert ei.value.status == 410
    assert int(server.state()["floor"]) > int(rv)
    # Nothing else is injected: an exact list from that resourceVersion is gone too.
    with pytest.raises(client.ApiException) as ei:
        core.list_namespaced_pod(NS, resource_version=rv, resource_version_match="Exact")
    assert ei.value.status == 410


def test_py_periodic_compaction_expires_a_lagging_resource_version(core, make_server):
    from kubernetes import client, config, watch
    s = make_server(compact_interval=0.2)
    c = config.new_client_from_config(config_file=s.kubeconfig_path)
    v1 = client.CoreV1Api(c)
    s.create_pod(NS, pod("a"))
    rv = v1.list_namespaced_pod(NS).metadata.resource_version
    s.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    wait_for(lambda: int(s.state()["floor"]) > int(rv), timeout=5)
    with pytest.raises(client.ApiException) as ei:
        list(watch.Watch().stream(v1.list_namespaced_pod, NS, resource_version=rv,
                                  timeout_seconds=5))
    assert ei.value.status == 410
    c.close()


def test_py_list_pagination(core, server):
    for i in range(5):
        server.create_pod(NS, pod(f"p{i}"))
    first = core.list_namespaced_pod(NS, limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    server.create_pod(NS, pod("p10"))    # after the snapshot: not in the continued list
    second = core.list_namespaced_pod(NS, limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in second.items] == ["p2", "p3", "p4"]
    assert second.metadata.resource_version == first.metadata.resource_version


def test_py_wrong_token_401(server):
    from kubernetes import client, config
    cfg = server.write_kubeconfig(os.path.join(server.state_dir, "bad"), token="bad")
    c = config.new_client_from_config(config_file=cfg)
    with pytest.raises(client.ApiException) as ei:
        client.CoreV1Api(c).list_namespaced_pod(NS)
    assert ei.value.status == 401
    c.close()


# =========================================================================== direct HTTP: errors

def test_http_401_without_token(server):
    r = Api(server, token="").get(PODS)
    assert r.status == 401
    assert r.body == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Failure", "message": "Unauthorized",
                      "reason": "Unauthorized", "code": 401}


def test_http_401_wrong_token(server):
    r = Api(server, token="wrong").get(PODS)
    assert r.status == 401 and r.body["reason"] == "Unauthorized"
    # Real: anonymous may read /version, a bad token may not.
    assert Api(server, token="").get("/version").status == 200
    assert Api(server, token="wrong").get("/version").status == 401


def test_http_403_forbidden_shape(server, api):
    server.create_pod(NS, pod("p"))
    server.set_rbac(deny=[{"verbs": ["patch"], "resources": ["pods"]},
                          {"verbs": ["create"], "resources": ["events"]},
                          {"verbs": ["list"], "resources": ["pods"], "namespaces": ["other"]}])
    r = api.req("PATCH", PODS + "/p", {"metadata": {"labels": {"a": "b"}}},
                ctype="application/merge-patch+json")
    assert r.status == 403
    assert r.body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": 'pods "p" is forbidden: User "%s" cannot patch resource '
                      '"pods" in API group "" in the namespace "default"' % USER,
                      "reason": "Forbidden", "details": {"name": "p", "kind": "pods"},
                      "code": 403}
    r = api.req("POST", f"/api/v1/namespaces/{NS}/events", {"metadata": {"name": "e"}})
    assert r.status == 403 and r.body["details"] == {"kind": "events"}
    assert r.body["message"] == ('events is forbidden: User "%s" cannot create resource '
                                 '"events" in API group "" in the namespace "default"' % USER)
    assert api.get("/api/v1/namespaces/other/pods").status == 403
    assert api.get(PODS).status == 200
    # Real: authorization comes before the handler, so a missing object is still 403.
    assert api.req("PATCH", PODS + "/missing", {}, ctype="application/merge-patch+json"
                   ).status == 403


def test_http_403_allow_list_role(server, api):
    """An allow list shaped like nicpick's Role: everything else is denied."""
    server.create_pod(NS, pod("p"))
    role = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    # A Role bound in one namespace: its rules apply there only (not at cluster scope).
    server.set_rbac(allow=[dict(r, namespaces=[NS]) for r in role])
    assert api.get(PODS + "/p").status == 200
    r = api.req("DELETE", PODS + "/p")
    assert r.status == 403 and "cannot delete resource" in r.body["message"]
    r = api.get("/api/v1/pods")
    assert r.status == 403 and r.body["message"].endswith(
        'cannot list resource "pods" in API group "" at the cluster scope')
    r = api.get("/apis/batch/v1/namespaces/default/jobs/j")
    assert r.status == 403 and r.body["message"].startswith('jobs.batch "j" is forbidden')
    assert r.body["details"] == {"name": "j", "group": "batch", "kind": "jobs"}
    # Real: a watch on one name is authorized (and denied) on that name.
    r = api.get("/api/v1/namespaces/default/pods/p/status")
    assert r.status == 403 and 'cannot get resource "pods/status"' in r.body["message"]


ROLE_USER = "system:serviceaccount:default:nicpick"


@pytest.fixture
def role_api(make_server):
    """A server that enforces deploy/rbac.yaml's Role (applied in "default") for the
    token "sa", as kube-apiserver's RBAC authorizer does."""
    s = make_server(authorization="RBAC", tokens={"sa": ROLE_USER}, user="system:admin")
    s.apply_manifests(os.path.join(ROOT, "deploy", "rbac.yaml"), NS)
    s.create_pod(NS, pod("p"))
    return s, Api(s, token="sa")


def test_rbac_role_from_deploy_yaml_allows_exactly_its_rules(role_api):
    s, api = role_api
    assert api.get(PODS + "/p").status == 200
    assert api.get(PODS + "?labelSelector=a%3Db").status == 200
    w = api.watch(PODS + "?watch=1&timeoutSeconds=1")
    assert w.status == 200
    w.close()
    assert api.req("PATCH", PODS + "/p", {"metadata": {"labels": {"a": "b"}}},
                   ctype="application/merge-patch+json").status == 200
    assert api.req("POST", f"/api/v1/namespaces/{NS}/events", {
        "metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}}
    ).status == 201
    assert api.get(f"/apis/batch/v1/namespaces/{NS}/jobs/j").status == 404   # get: allowed
    assert api.get(f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/j").status == 404
    denied = [("DELETE", PODS + "/p", "delete", "pods", 'pods "p"', ""),
              ("GET", f"/api/v1/namespaces/{NS}/events", "list", "events", "events", ""),
              ("GET", f"/apis/batch/v1/namespaces/{NS}/jobs", "list", "jobs", "jobs.batch",
               "batch"),
              ("PATCH", PODS + "/p/status", "patch", "pods/status", 'pods "p"', ""),
              ("GET", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", "list",
               "pytorchjobs", "pytorchjobs.kubeflow.org", "kubeflow.org")]
    for method, path, verb, what, head, group in denied:
        r = api.req(method, path, {} if method == "PATCH" else None,
                    ctype="application/merge-patch+json")
        assert r.status == 403, (path, r)
        assert r.body["message"] == (f'{head} is forbidden: User "{ROLE_USER}" cannot {verb} '
                                     f'resource "{what}" in API group "{group}" in the '
                                     f'namespace "{NS}"'), r.body
    # A Role binds in its own namespace only.
    r = api.get("/api/v1/namespaces/other/pods")
    assert r.status == 403 and r.body["message"].endswith('in the namespace "other"')
    r = api.get("/api/v1/pods")
    assert r.status == 403 and r.body["message"].endswith("at the cluster scope")
    # The admin identity (system:masters in a real cluster) is never checked.
    assert Api(s).req("DELETE", PODS + "/p").status == 200


def test_rbac_binding_to_a_missing_role_says_so_in_the_reason(make_server):
    s = make_server(authorization="RBAC", tokens={"sa": ROLE_USER})
    s.seed({"objects": [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": "b", "namespace": NS},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                     "name": "gone"},
                         "subjects": [{"kind": "ServiceAccount", "name": "nicpick"}]}]})
    r = Api(s, token="sa").get(PODS)
    assert r.status == 403
    assert r.body["message"] == (f'pods is forbidden: User "{ROLE_USER}" cannot list resource '
                                 f'"pods" in API group "" in the namespace "{NS}": RBAC: '
                                 'role.rbac.authorization.k8s.io "gone" not found')


def test_rbac_cluster_role_wildcards_and_subresources(make_server):
    s = make_server(authorization="RBAC", tokens={"sa": ROLE_USER})
    rb = "rbac.authorization.k8s.io/v1"
    s.seed({"objects": [
        {"apiVersion": rb, "kind": "ClusterRole", "metadata": {"name": "status-reader"},
         "rules": [{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"],
                    "resourceNames": ["p"]}]},
        {"apiVersion": rb, "kind": "ClusterRoleBinding", "metadata": {"name": "all-sa"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "status-reader"},
         "subjects": [{"kind": "Group", "name": "system:serviceaccounts"}]}]})
    s.create_pod(NS, pod("p"))
    s.create_pod(NS, pod("q"))
    api = Api(s, token="sa")
    assert api.get(PODS + "/q/status").status == 200
    assert api.get(PODS + "/p").status == 200
    assert api.get(PODS + "/q").status == 403
    assert api.get(PODS).status == 403          # resourceNames never grant a list


def test_http_404_shape(api):
    r = api.get(PODS + "/nope")
    assert r.status == 404
    assert r.body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": 'pods "nope" not found', "reason": "NotFound",
                      "details": {"name": "nope", "kind": "pods"}, "code": 404}
    r = api.get("/apis/batch/v1/namespaces/default/jobs/j")
    assert r.body["message"] == 'jobs.batch "j" not found'
    assert r.body["details"] == {"name": "j", "group": "batch", "kind": "jobs"}
    r = api.get("/api/v1/namespaces/default/widgets")
    assert r.status == 404 and r.body["message"] == \
        "the server could not find the requested resource"


def test_http_409_already_exists(api):
    assert api.req("POST", PODS, pod("a")).status == 201
    r = api.req("POST", PODS, pod("a"))
    assert r.status == 409
    status_shape(r.body, 409, "AlreadyExists")
    assert r.body["message"] == 'pods "a" already exists'
    assert r.body["details"] == {"name": "a", "kind": "pods"}


def test_http_409_conflict_on_stale_resource_version(api):
    created = api.req("POST", PODS, pod("a")).body
    rv = created["metadata"]["resourceVersion"]
    r = api.req("PATCH", PODS + "/a", {"metadata": {"labels": {"x": "1"}, "resourceVersion": rv}},
                ctype="application/merge-patch+json")
    assert r.status == 200 and r.body["metadata"]["resourceVersion"] != rv
    r = api.req("PATCH", PODS + "/a", {"metadata": {"labels": {"x": "2"}, "resourceVersion": rv}},
                ctype="application/merge-patch+json")
    assert r.status == 409
    status_shape(r.body, 409, "Conflict")
    assert r.body["message"] == ('Operation cannot be fulfilled on pods "a": the object has been '
                                 'modified; please apply your changes to the latest version '
                                 'and try again')
    stale = dict(created, metadata=dict(created["metadata"], labels={"y": "1"}))
    assert api.req("PUT", PODS + "/a", stale).status == 409


def test_http_415_unsupported_patch_type(api):
    api.req("POST", PODS, pod("a"))
    r = api.req("PATCH", PODS + "/a", {"metadata": {}}, ctype="application/json")
    assert r.status == 415
    status_shape(r.body, 415, "UnsupportedMediaType")
    assert r.body["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml")


def test_http_422_invalid_label_and_annotation_size(api):
    r = api.req("POST", PODS, pod("a", {"bad": "not ok!"}))
    assert r.status == 422
    status_shape(r.body, 422, "Invalid")
    assert r.body["message"].startswith('Pod "a" is invalid: metadata.labels: Invalid value: '
                                        '"not ok!"')
    assert r.body["details"]["kind"] == "Pod"
    api.req("POST", PODS, pod("b"))
    big = {"metadata": {"annotations": {"k": "x" * (256 * 1024)}}}
    r = api.req("PATCH", PODS + "/b", big, ctype="application/merge-patch+json")
    assert r.status == 422 and "metadata.annotations: Too long" in r.body["message"]


def test_http_429_with_retry_after(server, api):
    server.add_fault(kind="error", code=429, retry_after=3, verb="list")
    r = api.get(PODS)
    assert r.status == 429 and r.headers["Retry-After"] == "3"
    assert r.body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "Too many requests, please try again later.",
                      "reason": "TooManyRequests", "details": {"retryAfterSeconds": 3},
                      "code": 429}
    assert api.get(PODS).status == 200


def test_http_500_injection_counted_and_scoped(server, api):
    api.req("POST", PODS, pod("a"))
    api.req("POST", PODS, pod("b"))
    server.add_fault(kind="error", code=500, count=2, path=r"/pods/a$", method="GET")
    assert api.get(PODS + "/b").status == 200
    r = api.get(PODS + "/a")
    assert r.status == 500
    status_shape(r.body, 500, "InternalError")
    assert r.body["message"] == "Internal error occurred: injected fault"
    assert api.get(PODS + "/a").status == 500
    assert api.get(PODS + "/a").status == 200
    assert server.faults() == []


def test_http_fault_unlimited_until_cleared(server, api):
    server.add_fault(kind="error", code=503, count=-1, resource="pods")
    assert [api.get(PODS).status for _ in range(3)] == [503, 503, 503]
    assert api.get("/api/v1/namespaces/default/events").status == 200
    server.clear_faults()
    assert api.get(PODS).status == 200


def test_http_connection_reset_fault(server, api):
    server.add_fault(kind="reset", verb="get")
    with pytest.raises((ConnectionError, OSError)):
        api.get(PODS + "/x")
    assert api.get(PODS + "/x").status == 404


def test_http_slow_response(server, api):
    server.add_fault(kind="delay", ms=400, count=-1, verb="list")
    t = time.monotonic()
    assert api.get(PODS).status == 200
    assert time.monotonic() - t >= 0.4
    t = time.monotonic()
    assert api.get("/version").status == 200
    assert time.monotonic() - t < 0.3


def test_http_admin_needs_admin_token(server):
    url = "/_admin/state"
    assert Api(server).get(url).status == 403           # the pod token is not enough
    assert Api(server, token="").get(url).status == 401
    assert Api(server, token=server.admin_token).get(url).status == 200


def test_http_body_too_large_413(api):
    r = api.req("POST", PODS, b"{" + b" " * (3 * 1024 * 1024 + 10) + b"}")
    assert r.status == 413


# =========================================================================== resources

def test_discovery_documents(api):
    assert api.get("/version").body["gitVersion"] == "v1.33.0-nicpick-test"
    assert api.get("/api").body["versions"] == ["v1"]
    groups = api.get("/apis").body
    assert groups["kind"] == "APIGroupList" and groups["groups"][0]["name"] == "batch"
    res = {r["name"]: r for r in api.get("/api/v1").body["resources"]}
    assert {"get", "list", "watch", "patch", "create", "delete", "update"} <= \
        set(res["pods"]["verbs"])
    assert res["pods"]["kind"] == "Pod" and res["pods"]["namespaced"]
    assert "events" in res and not res["namespaces"]["namespaced"]
    assert api.get("/openapi/v2").status == 404


def test_list_shape_items_without_kind(server, api):
    server.create_pod(NS, pod("a"))
    r = api.get(PODS).body
    assert r["kind"] == "PodList" and r["apiVersion"] == "v1"
    assert set(r["metadata"]) == {"resourceVersion"}
    # Real: items of a typed list carry no kind/apiVersion; single GETs do.
    assert "kind" not in r["items"][0] and "apiVersion" not in r["items"][0]
    one = api.get(PODS + "/a").body
    assert one["kind"] == "Pod" and one["apiVersion"] == "v1"
    md = one["metadata"]
    assert md["uid"] and md["creationTimestamp"].endswith("Z") and md["generation"] == 1


def test_list_resource_version_increases_monotonically(server, api):
    rvs = [int(api.get(PODS).body["metadata"]["resourceVersion"])]
    api.req("POST", PODS, pod("a"))
    rvs.append(int(api.get(PODS).body["metadata"]["resourceVersion"]))
    api.req("PATCH", PODS + "/a", {"metadata": {"labels": {"a": "1"}}},
            ctype="application/merge-patch+json")
    rvs.append(int(api.get(PODS).body["metadata"]["resourceVersion"]))
    api.req("POST", f"/api/v1/namespaces/{NS}/events", {"metadata": {"name": "e"}})
    rvs.append(int(api.get(PODS).body["metadata"]["resourceVersion"]))   # global counter
    api.req("DELETE", PODS + "/a")
    rvs.append(int(api.get(PODS).body["metadata"]["resourceVersion"]))
    assert all(b > a for a, b in zip(rvs, rvs[1:])), rvs


def test_noop_patch_keeps_resource_version(api):
    api.req("POST", PODS, pod("a", annotations={"k": "v"}))
    before = api.get(PODS + "/a").body["metadata"]["resourceVersion"]
    r = api.req("PATCH", PODS + "/a", {"metadata": {"annotations": {"k": "v"}}},
                ctype="application/merge-patch+json")
    assert r.status == 200 and r.body["metadata"]["resourceVersion"] == before


def test_merge_patch_null_deletes_and_nested_merge(api):
    api.req("POST", PODS, pod("a", {"x": "1", "y": "2"}, annotations={"a": "1"}))
    r = api.req("PATCH", PODS + "/a",
                {"metadata": {"labels": {"x": None, "z": "3"}, "annotations": None}},
                ctype="application/merge-patch+json")
    assert r.body["metadata"]["labels"] == {"y": "2", "z": "3"}
    assert "annotations" not in r.body["metadata"]


def test_pod_status_only_through_status_subresource(server, api):
    api.req("POST", PODS, pod("a"))
    r = api.req("PATCH", PODS + "/a", {"status": {"phase": "Running"}},
                ctype="application/merge-patch+json")
    assert r.body["status"]["phase"] == "Pending"          # Real: main resource ignores status
    r = api.req("PATCH", PODS + "/a/status", {"status": {"phase": "Running"},
                                              "metadata": {"labels": {"no": "pe"}}},
                ctype="application/merge-patch+json")
    assert r.status == 200 and r.body["status"]["phase"] == "Running"
    assert r.body["metadata"]["labels"] == {}


def test_generation_bumps_on_spec_change_only(api):
    api.req("POST", PODS, pod("a"))
    r = api.req("PATCH", PODS + "/a", {"metadata": {"labels": {"a": "b"}}},
                ctype="application/merge-patch+json")
    assert r.body["metadata"]["generation"] == 1
    r = api.req("PATCH", PODS + "/a", {"spec": {"activeDeadlineSeconds": 5}},
                ctype="application/merge-patch+json")
    assert r.body["metadata"]["generation"] == 2


def test_put_replaces_and_keeps_uid(api):
    p = api.req("POST", PODS, pod("a", {"x": "1"})).body
    p["metadata"]["labels"] = {"y": "2"}
    r = api.req("PUT", PODS + "/a", p)
    assert r.status == 200 and r.body["metadata"]["labels"] == {"y": "2"}
    assert r.body["metadata"]["uid"] == p["metadata"]["uid"]
    assert api.req("PUT", PODS + "/zz", dict(p, metadata={"name": "zz"})).status == 404


def test_generate_name(api):
    r = api.req("POST", PODS, dict(pod(""), metadata={"generateName": "w-"}))
    assert r.status == 201 and r.body["metadata"]["name"].startswith("w-")
    assert len(r.body["metadata"]["name"]) == 7


def test_namespaces_exist_implicitly(api):
    r = api.get("/api/v1/namespaces/anything")
    assert r.status == 200 and r.body["kind"] == "Namespace"
    assert r.body["status"]["phase"] == "Active"
    assert api.req("POST", "/api/v1/namespaces/team-a/pods", pod("p", ns="team-a")).status == 201
    names = [n["metadata"]["name"] for n in api.get("/api/v1/namespaces").body["items"]]
    assert {"default", "kube-system", "anything", "team-a"} <= set(names)


def test_pods_across_namespaces(api):
    api.req("POST", "/api/v1/namespaces/a/pods", pod("p", ns="a"))
    api.req("POST", "/api/v1/namespaces/b/pods", pod("p", ns="b"))
    items = api.get("/api/v1/pods").body["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == \
        [("a", "p"), ("b", "p")]
    r = api.get("/api/v1/pods?fieldSelector=metadata.namespace%3Db")
    assert [i["metadata"]["namespace"] for i in r.body["items"]] == ["b"]


def test_job_get_seeded(server, api):
    server.seed({"jobs": [{"metadata": {"name": "train", "namespace": "ml"},
                           "spec": {"completions": 8, "parallelism": 8}}]})
    r = api.get("/apis/batch/v1/namespaces/ml/jobs/train")
    assert r.status == 200 and r.body["kind"] == "Job" and r.body["apiVersion"] == "batch/v1"
    assert r.body["spec"]["completions"] == 8


def test_delete_with_stale_precondition_conflicts(api):
    p = api.req("POST", PODS, pod("a")).body
    r = api.req("DELETE", PODS + "/a", {"preconditions": {"uid": "other"}})
    assert r.status == 409 and "Precondition failed: UID in precondition" in r.body["message"]
    r = api.req("DELETE", PODS + "/a", {"preconditions": {"uid": p["metadata"]["uid"]}})
    assert r.status == 200 and r.body["metadata"]["name"] == "a"
    assert api.get(PODS + "/a").status == 404


# =========================================================================== selectors

LABELS = {"a": {"app": "a", "tier": "fe", "n": "1"}, "b": {"app": "b", "tier": "be", "n": "5"},
          "c": {"app": "a"}, "d": {"env": "prod"}}


@pytest.fixture
def labelled(server, api):
    for name, labels in LABELS.items():
        server.create_pod(NS, pod(name, labels))
    return api


@pytest.mark.parametrize("selector,expected", [
    ("app=a", "ac"), ("app==a", "ac"), ("app!=a", "bd"), ("app in (a,b)", "abc"),
    ("app in (a, b)", "abc"), ("app notin (a)", "bd"), ("tier", "ab"), ("!tier", "cd"),
    ("app=a,tier", "a"), ("app in (a),!tier", "c"), ("app=a,tier=fe", "a"), ("", "abcd"),
    ("app in (a,b),tier notin (be)", "ac"), ("n>2", "b"), ("n<2", "a"), ("app=", ""),
    ("env=prod,app!=a", "d"), (" app = a ", "ac"),
])
def test_label_selector_syntax(labelled, selector, expected):
    from urllib.parse import quote
    r = labelled.get(PODS + "?labelSelector=" + quote(selector))
    assert r.status == 200, r
    assert "".join(i["metadata"]["name"] for i in r.body["items"]) == expected


@pytest.mark.parametrize("selector", ["app=(", "app in a", "app in (a", "=a", "app b",
                                      "n>x", "bad key!=1"])
def test_label_selector_invalid_is_400(labelled, selector):
    from urllib.parse import quote
    r = labelled.get(PODS + "?labelSelector=" + quote(selector))
    assert r.status == 400
    status_shape(r.body, 400, "BadRequest")
    assert r.body["message"].startswith("unable to parse requirement")


@pytest.fixture
def placed(server, api):
    server.create_pod(NS, pod("a", phase="Running", node="n1"))
    server.create_pod(NS, pod("b", phase="Running", node="n2"))
    server.create_pod(NS, pod("c", phase="Pending"))
    return api


@pytest.mark.parametrize("selector,expected", [
    ("metadata.name=a", "a"), ("metadata.name==b", "b"), ("metadata.name!=a", "bc"),
    ("status.phase=Running", "ab"), ("status.phase!=Running", "c"), ("spec.nodeName=n1", "a"),
    ("spec.nodeName=", "c"), ("status.phase=Running,spec.nodeName!=n1", "b"),
    ("metadata.namespace=default", "abc"), ("metadata.namespace=other", ""),
])
def test_field_selectors(placed, selector, expected):
    from urllib.parse import quote
    r = placed.get(PODS + "?fieldSelector=" + quote(selector))
    assert r.status == 200, r
    assert "".join(i["metadata"]["name"] for i in r.body["items"]) == expected


def test_field_selector_unsupported_label_400(placed):
    r = placed.get(PODS + "?fieldSelector=spec.hostname%3Dx")
    assert r.status == 400 and r.body["message"] == "field label not supported: spec.hostname"


# =========================================================================== watch

def test_watch_initial_added_then_live_events(server, api):
    server.create_pod(NS, pod("a"))
    w = api.watch(PODS + "?watch=1&timeoutSeconds=3")
    assert w.status == 200 and w.r.getheader("Transfer-Encoding") == "chunked"
    e = w.next()
    assert e["type"] == "ADDED" and e["object"]["kind"] == "Pod"
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    e = w.next()
    assert e["type"] == "MODIFIED" and e["object"]["metadata"]["labels"] == {"x": "1"}
    server.delete_object(NS, "a")
    e = w.next()
    assert e["type"] == "DELETED"
    w.close()


def test_watch_resume_gets_exactly_missed_events(server, api):
    server.create_pod(NS, pod("a"))
    server.create_pod(NS, pod("c"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    server.patch_object(NS, "a", {"metadata": {"annotations": {"k": "1"}}})
    server.create_pod(NS, pod("b"))
    api.req("POST", f"/api/v1/namespaces/{NS}/events", {"metadata": {"name": "e"}})
    server.delete_object(NS, "c")
    w = api.watch(PODS + f"?watch=true&resourceVersion={rv}&timeoutSeconds=1")
    evs = w.events()
    w.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == \
        [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "c")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_watch_timeout_seconds_ends_cleanly(api):
    t = time.monotonic()
    w = api.watch(PODS + "?watch=1&timeoutSeconds=1")
    assert w.events() == []
    assert 0.9 <= time.monotonic() - t < 3
    w.close()


def test_watch_bookmarks_arrive(server, api):
    server.configure(bookmark_interval=0.2)
    server.create_pod(NS, pod("a"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}&allowWatchBookmarks=true"
                  "&timeoutSeconds=1")
    evs = w.events()
    w.close()
    bms = [e for e in evs if e["type"] == "BOOKMARK"]
    assert len(bms) >= 3 and len(bms) == len(evs)
    assert bms[0]["object"] == {"kind": "Pod", "apiVersion": "v1", "metadata": {
        "resourceVersion": rv, "creationTimestamp": None}, "spec": {"containers": None},
        "status": {}}
    # Without allowWatchBookmarks there are none.
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert w.events() == []
    w.close()


def test_watch_send_initial_events_ends_with_annotated_bookmark(server, api):
    server.create_pod(NS, pod("a"))
    w = api.watch(PODS + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                  "&allowWatchBookmarks=true&timeoutSeconds=1")
    evs = w.events(2)
    w.close()
    assert evs[0]["type"] == "ADDED"
    assert evs[1]["type"] == "BOOKMARK"
    assert evs[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_label_selector_transitions(server, api):
    """Real: an object entering the selector is ADDED, one leaving it is DELETED."""
    server.create_pod(NS, pod("a", {"role": "x"}))
    server.create_pod(NS, pod("b", {"role": "y"}))
    w = api.watch(PODS + "?watch=1&labelSelector=role%3Dx&timeoutSeconds=3")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in w.events(1)] == [("ADDED", "a")]
    server.patch_object(NS, "b", {"metadata": {"labels": {"role": "x"}}})
    server.patch_object(NS, "a", {"metadata": {"labels": {"role": "z"}}})
    server.patch_object(NS, "b", {"metadata": {"annotations": {"k": "v"}}})
    evs = w.events(3)
    w.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == \
        [("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b")]
    assert evs[1]["object"]["metadata"]["labels"] == {"role": "x"}   # its last matching state


def test_watch_field_selector_single_object(server, api):
    server.create_pod(NS, pod("a"))
    server.create_pod(NS, pod("b"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    w = api.watch(PODS + f"?watch=1&fieldSelector=metadata.name%3Db&resourceVersion={rv}"
                  "&timeoutSeconds=1")
    server.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    server.patch_object(NS, "b", {"metadata": {"labels": {"x": "1"}}})
    evs = w.events()
    w.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("MODIFIED", "b")]


def test_watch_too_old_resource_version_is_error_event(make_server):
    s = make_server(history=3)
    api = Api(s)
    s.create_pod(NS, pod("a"))
    old = int(api.get(PODS).body["metadata"]["resourceVersion"])
    for i in range(5):
        s.patch_object(NS, "a", {"metadata": {"labels": {"i": str(i)}}})
    w = api.watch(PODS + f"?watch=1&resourceVersion={old}")
    assert w.status == 200                       # Real: 200 + one ERROR event, then the end
    evs = w.events()
    w.close()
    floor = int(s.state()["floor"])
    assert evs == [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {old} ({floor})", "reason": "Expired",
        "code": 410}}]
    # From the floor itself the watch works.
    w = api.watch(PODS + f"?watch=1&resourceVersion={floor}&timeoutSeconds=1")
    assert [e["type"] for e in w.events()] == ["MODIFIED"] * 3
    w.close()


def test_watch_expire_fault_forces_410(server, api):
    server.create_pod(NS, pod("a"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    server.add_fault(kind="expire_watch")
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}")
    e = w.events()
    w.close()
    assert e[0]["type"] == "ERROR" and e[0]["object"]["code"] == 410
    assert e[0]["object"]["message"].startswith(f"too old resource version: {rv} (")
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert w.events() == []
    w.close()


def test_watch_future_resource_version_times_out_504(server, api):
    rv = int(api.get(PODS).body["metadata"]["resourceVersion"])
    t = time.monotonic()
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv + 100}")
    e = w.events()
    w.close()
    assert 2.5 < time.monotonic() - t < 6
    assert e[0]["type"] == "ERROR" and e[0]["object"]["code"] == 504
    assert e[0]["object"]["message"] == f"Too large resource version: {rv + 100}, current: {rv}"


def _raw_get(server, path, timeout=10):
    """GET over a fresh TLS socket, returning every byte until the server closes."""
    ctx = ssl.create_default_context(cafile=server.ca_path)
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}"
                      "\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except (ssl.SSLError, ConnectionResetError):
                    break
                if not chunk:
                    break
                data += chunk
            return data


def test_watch_dropped_after_events(server):
    for n in "abc":
        server.create_pod(NS, pod(n))
    server.add_fault(kind="drop_watch", after_events=2)
    t = time.monotonic()
    data = _raw_get(server, PODS + "?watch=1")
    assert time.monotonic() - t < 3
    head, body = data.split(b"\r\n\r\n", 1)
    assert b"200 OK" in head and b"Transfer-Encoding: chunked" in head
    assert body.count(b'"type":"ADDED"') == 2
    assert not body.endswith(b"0\r\n\r\n")                   # no terminating chunk
    # A clean end has the terminating chunk.
    body = _raw_get(server, PODS + "?watch=1&timeoutSeconds=1").split(b"\r\n\r\n", 1)[1]
    assert body.count(b'"type":"ADDED"') == 3 and body.endswith(b"0\r\n\r\n")


def test_watch_dropped_mid_event(server, api):
    server.create_pod(NS, pod("a"))
    server.add_fault(kind="drop_watch", after_events=0, partial=True)
    w = api.watch(PODS + "?watch=1")
    import http.client
    with pytest.raises((http.client.IncompleteRead, ValueError, OSError)):
        w.next()
    w.close()


def test_watch_dropped_after_seconds(server, api):
    server.add_fault(kind="drop_watch", after_seconds=0.5)
    t = time.monotonic()
    data = _raw_get(server, PODS + "?watch=1")
    assert 0.4 < time.monotonic() - t < 3
    assert not data.endswith(b"0\r\n\r\n")


def test_watch_table_for_kubectl_human_output(server, api):
    server.create_pod(NS, pod("a"))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    c = api.conn()
    c.request("GET", PODS + "?watch=1&timeoutSeconds=1", headers=api.headers({"Accept": accept}))
    r = c.getresponse()
    first = json.loads(r.readline())
    c.close()
    assert first["object"]["kind"] == "Table"
    assert first["object"]["columnDefinitions"][0]["name"] == "Name"
    assert first["object"]["rows"][0]["cells"][0] == "a"


def test_256_concurrent_watches_all_get_the_event(make_server):
    s = make_server(subprocess=True)
    s.create_pod(NS, pod("hub"))
    rv = Api(s).get(PODS).body["metadata"]["resourceVersion"]
    n, got, errors = 256, [], []
    ready = threading.Barrier(n + 1, timeout=60)
    lock = threading.Lock()

    def watcher(i):
        try:
            a = Api(s, user_agent=f"w{i}")
            w = a.watch(PODS + f"?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3Dhub"
                        "&timeoutSeconds=30", timeout=30)
            ready.wait()
            e = w.next()
            with lock:
                got.append((time.monotonic(), e["type"]))
            w.close()
        except Exception as e:   # noqa: BLE001
            errors.append(repr(e))
            try:
                ready.abort()
            except Exception:    # noqa: BLE001
                pass

    old = threading.stack_size(512 * 1024)
    threads = [threading.Thread(target=watcher, args=(i,), daemon=True) for i in range(n)]
    threading.stack_size(old)
    for t in threads:
        t.start()
    ready.wait()
    assert wait_for(lambda: s.state()["watchers"] >= n, timeout=30), s.state()
    t0 = time.monotonic()
    s.patch_object(NS, "hub", {"metadata": {"annotations": {"go": "1"}}})
    for t in threads:
        t.join(timeout=10)
    assert not errors, errors[:3]
    assert len(got) == n and all(typ == "MODIFIED" for _, typ in got)
    assert max(t for t, _ in got) - t0 < 3.0


# =========================================================================== counters, tokens

def test_counters_by_token_and_user_agent(server):
    server.set_tokens({"tok-a": "system:serviceaccount:ml:pod-a",
                       "tok-b": "system:serviceaccount:ml:pod-b"})
    server.reset_counters()
    a, b = Api(server, "tok-a", "nicpick/pod-a"), Api(server, "tok-b", "nicpick/pod-b")
    for _ in range(3):
        a.get(PODS)
    b.get(PODS + "/missing")
    c = server.counters()
    assert c["by_token"]["tok-a"]["requests"] == 3
    assert c["by_token"]["tok-a"]["user"] == "system:serviceaccount:ml:pod-a"
    assert c["by_token"]["tok-a"]["verbs"] == {"list": 3}
    assert c["by_token"]["tok-b"]["requests"] == 1
    assert c["by_user_agent"]["nicpick/pod-a"]["requests"] == 3
    assert c["by_user"]["system:serviceaccount:ml:pod-b"]["verbs"] == {"get": 1}
    assert c["total"]["requests"] == 4
    assert c["by_token"]["tok-a"]["bytes_out"] > 3 * 100
    c = server.counters(reset=True)
    assert c["total"]["requests"] == 4
    assert server.counters()["total"]["requests"] == 0


def test_counters_count_exact_bytes(server):
    server.reset_counters()
    req = (f"GET {PODS} HTTP/1.1\r\nHost: x\r\nUser-Agent: exact\r\n"
           f"Authorization: Bearer {server.token}\r\nConnection: close\r\n\r\n").encode()
    ctx = ssl.create_default_context(cafile=server.ca_path)
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)),
                         server_hostname="127.0.0.1") as s:
        s.sendall(req)
        resp = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            resp += d
    c = server.counters()["by_user_agent"]["exact"]
    assert c == {"requests": 1, "bytes_in": len(req), "bytes_out": len(resp),
                 "verbs": {"list": 1}}


def test_counters_include_watch_stream_bytes(server, api):
    server.reset_counters()
    server.create_pod(NS, pod("a"))
    w = api.watch(PODS + "?watch=1&timeoutSeconds=1")
    evs = w.events()
    w.close()
    c = server.counters()["by_token"][server.token]
    assert c["verbs"] == {"watch": 1}
    assert c["bytes_out"] > len(json.dumps(evs[0]))


def test_token_rotation(server):
    old = server.token
    assert Api(server, old).get(PODS).status == 200
    server.set_tokens({"rotated": USER}, remove=[old], write_token="rotated")
    assert Api(server, old).get(PODS).status == 401
    assert Api(server, "rotated").get(PODS).status == 200
    with open(os.path.join(server.state_dir, "token")) as f:
        assert f.read().strip() == "rotated"
    with open(os.path.join(server.state_dir, "serviceaccount", "token")) as f:
        assert f.read() == "rotated"


def test_request_log_records_what_clients_send(server, api):
    api.req("POST", PODS, pod("a"))
    api.req("PATCH", PODS + "/a", {"metadata": {}}, ctype="application/merge-patch+json")
    log = server.requests()
    assert [(r["verb"], r["resource"], r["name"], r["status"]) for r in log] == \
        [("create", "pods", "", 201), ("patch", "pods", "a", 200)]


# =========================================================================== process modes

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


def test_bad_query_values_are_400(api):
    assert api.get(PODS + "?limit=abc").status == 400
    assert api.get(PODS + "?watch=1&resourceVersion=abc").status == 400


def test_ready_file_has_in_cluster_env(server):
    with open(os.path.join(server.state_dir, "ready")) as f:
        ready = json.load(f)
    assert ready["env"] == {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                            "KUBERNETES_SERVICE_PORT": str(server.port)}


def test_list_exact_resource_version_from_history(server, api):
    server.create_pod(NS, pod("a", {"v": "1"}))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    server.patch_object(NS, "a", {"metadata": {"labels": {"v": "2"}}})
    server.create_pod(NS, pod("b"))
    r = api.get(PODS + f"?resourceVersion={rv}&resourceVersionMatch=Exact").body
    assert r["metadata"]["resourceVersion"] == rv
    assert [(i["metadata"]["name"], i["metadata"]["labels"]) for i in r["items"]] == \
        [("a", {"v": "1"})]
    server.compact()
    r = api.get(PODS + f"?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert r.status == 410 and r.body["reason"] == "Expired"


def test_accept_negotiation(server, api):
    server.create_pod(NS, pod("a"))
    r = api.get(PODS, headers={"Accept": "application/vnd.kubernetes.protobuf"})
    assert r.status == 406 and r.body["reason"] == "NotAcceptable"
    r = api.get(PODS, headers={"Accept": "application/json;as=PartialObjectMetadataList;"
                                         "v=v1;g=meta.k8s.io,application/json"})
    assert r.body["kind"] == "PartialObjectMetadataList"
    assert r.body["items"][0]["metadata"]["name"] == "a"


def test_apply_patch_needs_field_manager_and_creates(api):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ap"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}
    r = api.req("PATCH", PODS + "/ap", body, ctype="application/apply-patch+yaml")
    assert r.status == 422 and "fieldManager: Required value" in r.body["message"]
    r = api.req("PATCH", PODS + "/ap?fieldManager=t", body, ctype="application/apply-patch+yaml")
    assert r.status == 201 and r.body["metadata"]["name"] == "ap"


def test_watch_resume_backlog_is_sent_at_once(make_server):
    s = make_server(bookmark_interval=30)
    api = Api(s)
    s.create_pod(NS, pod("a"))
    rv = api.get(PODS).body["metadata"]["resourceVersion"]
    s.patch_object(NS, "a", {"metadata": {"labels": {"x": "1"}}})
    w = api.watch(PODS + f"?watch=1&resourceVersion={rv}&allowWatchBookmarks=true")
    t = time.monotonic()
    e = w.next()
    w.close()
    assert e["type"] == "MODIFIED" and time.monotonic() - t < 0.5
