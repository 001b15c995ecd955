"""What a large job's pods cost to read: list paging, metadata-only lists, pods of real
size, and the per-client counters the integration tests read rates from.

Real sources (kubernetes/kubernetes):
- staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go, GetList: `limit` pages a
  consistent snapshot at the list's resourceVersion; metadata.continue is
  storage.EncodeContinue (staging/.../storage/continue.go: base64 of
  {"v":"meta.k8s.io/v1","rv":N,"start":...}); every page has the first page's
  resourceVersion; handleCompactedErrorForPaging: a continue from a compacted rv is
  410 Expired with a new token (rv -1) in the Status' metadata that continues at the
  latest resourceVersion;
- staging/src/k8s.io/apiserver/pkg/endpoints/handlers/response.go, transformObject:
  Accept as=PartialObjectMetadataList;g=meta.k8s.io;v=v1 answers
  PartialObjectMetadataList with the items' full metadata (client-go's metadata client
  and `kubectl get` with server-side printing ask for it);
- pkg/apis/core/v1/defaults.go, plugin/pkg/admission/serviceaccount: the defaults and
  the kube-api-access volume of tools/kubeapi/realism.py."""

import base64
import json
import os
import subprocess

from apiclient import Api, pod
from fidelity import META_LIST, NS, PODS, py_core


def test_kubectl_chunk_size_pages_with_limit_and_continue(kubectl, server, tmp_path):
    for i in range(5):
        server.create_pod(NS, pod(f"p{i}"))
    server.requests(clear=True)
    env = dict(os.environ, HOME=str(tmp_path), KUBECONFIG=server.kubeconfig_path)
    r = subprocess.run([kubectl, "get", "pods", "--chunk-size=2", "-o", "name"],
                       capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [f"pod/p{i}" for i in range(5)]
    lists = [x for x in server.requests() if x["verb"] == "list"]
    assert len(lists) == 3
    assert all("limit=2" in x["query"] for x in lists)
    assert "continue=" not in lists[0]["query"]
    assert all("continue=" in x["query"] for x in lists[1:])


def test_continue_token_and_list_resource_version(server):
    api = Api(server)
    for i in range(3):
        server.create_pod(NS, pod(f"p{i}"))
    first = api.get(PODS + "?limit=2").body
    tok = json.loads(base64.urlsafe_b64decode(first["metadata"]["continue"] + "=="))
    assert tok["v"] == "meta.k8s.io/v1" and tok["rv"] == int(first["metadata"]["resourceVersion"])
    assert first["metadata"]["remainingItemCount"] == 1
    server.patch_object(NS, "p2", {"metadata": {"labels": {"late": "1"}}})
    second = api.get(PODS + "?limit=2&continue=" + first["metadata"]["continue"]).body
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert [p["metadata"]["name"] for p in second["items"]] == ["p2"]
    assert "labels" not in second["items"][0]["metadata"] or \
        "late" not in second["items"][0]["metadata"]["labels"]      # the snapshot's state
    assert "continue" not in second["metadata"]


def test_expired_continue_is_410_with_an_inconsistent_continue_token(server):
    api = Api(server)
    for i in range(3):
        server.create_pod(NS, pod(f"p{i}"))
    first = api.get(PODS + "?limit=1").body
    server.patch_object(NS, "p1", {"metadata": {"labels": {"x": "1"}}})
    server.compact()
    r = api.get(PODS + "?limit=1&continue=" + first["metadata"]["continue"])
    assert r.status == 410 and r.body["reason"] == "Expired"
    assert r.body["message"].startswith("The provided continue parameter is too old to "
                                        "display a consistent list result. You can start a "
                                        "new list without the continue parameter, or use the "
                                        "continue token in this response")
    tok = r.body["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(tok + "=="))["rv"] == -1
    rest = api.get(PODS + "?continue=" + tok).body        # the inconsistent remainder
    assert [p["metadata"]["name"] for p in rest["items"]] == ["p1", "p2"]
    assert rest["items"][0]["metadata"]["labels"] == {"x": "1"}   # the latest state


def test_python_client_pages_and_gets_410_for_an_expired_continue(server):
    import pytest
    from kubernetes import client
    v1, c = py_core(server)
    for i in range(4):
        server.create_pod(NS, pod(f"p{i}"))
    names, cont = [], None
    while True:
        r = v1.list_namespaced_pod(NS, limit=3, _continue=cont)
        names += [p.metadata.name for p in r.items]
        cont = r.metadata._continue
        if not cont:
            break
    assert names == ["p0", "p1", "p2", "p3"]
    first = v1.list_namespaced_pod(NS, limit=1)
    server.patch_object(NS, "p0", {"metadata": {"labels": {"x": "1"}}})
    server.compact()
    with pytest.raises(client.ApiException) as ei:
        v1.list_namespaced_pod(NS, limit=1, _continue=first.metadata._continue)
    assert ei.value.status == 410
    c.close()


def test_metadata_only_list_paged(server):
    api = Api(server)
    for i in range(3):
        server.create_pod(NS, pod(f"p{i}", {"app": "x"}, annotations={"a": "b"}))
    r = api.get(PODS + "?limit=2", headers={"Accept": META_LIST})
    assert r.status == 200 and r.headers["Content-Type"] == "application/json"
    b = r.body
    assert b["kind"] == "PartialObjectMetadataList" and b["apiVersion"] == "meta.k8s.io/v1"
    assert b["metadata"]["continue"] and b["metadata"]["resourceVersion"]
    it = b["items"][0]
    assert it["kind"] == "PartialObjectMetadata" and it["apiVersion"] == "meta.k8s.io/v1"
    assert set(it) == {"kind", "apiVersion", "metadata"}
    assert it["metadata"]["labels"] == {"app": "x"} and it["metadata"]["annotations"] == {"a": "b"}
    r2 = api.get(PODS + "?limit=2&continue=" + b["metadata"]["continue"],
                 headers={"Accept": META_LIST})
    assert [i["metadata"]["name"] for i in r2.body["items"]] == ["p2"]


def test_python_client_metadata_list(server):
    v1, c = py_core(server)
    server.create_pod(NS, pod("p0", {"app": "x"}))
    data, status, _ = c.call_api(PODS, "GET", header_params={"Accept": META_LIST},
                                 auth_settings=["BearerToken"], response_type="object",
                                 _return_http_data_only=False)
    assert status == 200 and data["kind"] == "PartialObjectMetadataList"
    assert data["items"][0]["metadata"]["name"] == "p0"
    c.close()


def test_realistic_pods_have_managed_fields_defaults_and_size(make_server):
    s = make_server(realistic_pods=True)
    api = Api(s)
    p = pod("job-worker-0", {"training.kubeflow.org/job-name": "job"})
    p["spec"]["containers"][0]["env"] = [{"name": "MASTER_ADDR", "value": "job-master-0"}]
    r = api.req("POST", PODS, p)
    assert r.status == 201
    got = api.get(PODS + "/job-worker-0").body
    md, spec, st = got["metadata"], got["spec"], got["status"]
    assert [m["manager"] for m in md["managedFields"]] == ["pytorch-operator", "kubelet"]
    assert md["managedFields"][0]["fieldsV1"]["f:spec"]["f:containers"]['k:{"name":"main"}']
    assert spec["nodeName"] and spec["tolerations"][0]["key"] == "node.kubernetes.io/not-ready"
    c = spec["containers"][0]
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["volumeMounts"][0]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert st["phase"] == "Running" and st["podIP"] and st["containerStatuses"][0]["ready"]
    assert [x["type"] for x in st["conditions"]][-1] == "PodScheduled"
    assert 4000 < len(json.dumps(got)) < 16000
    # seeded pods are decorated too (the scale benchmark seeds them); given status kept
    s.seed({"pods": [dict(pod("seeded"), status={"phase": "Running", "podIP": "10.0.0.9"})]})
    seeded = api.get(PODS + "/seeded").body
    assert seeded["metadata"]["managedFields"] and seeded["status"]["podIP"] == "10.0.0.9"


def test_default_pods_stay_minimal(make_server, monkeypatch):
    monkeypatch.delenv("KUBEAPI_FIDELITY", raising=False)
    api = Api(make_server())
    api.req("POST", PODS, pod("a"))
    assert "managedFields" not in api.get(PODS + "/a").body["metadata"]


def test_counters_per_token_and_remote_count_requests_and_watches(server):
    server.set_tokens({"tok-a": "system:serviceaccount:default:a",
                       "tok-b": "system:serviceaccount:default:b"})
    server.reset_counters()
    a, b = Api(server, token="tok-a"), Api(server, token="tok-b")
    for _ in range(3):
        a.get(PODS)
    w = b.watch(PODS + "?watch=1&timeoutSeconds=1")
    w.events()
    w.close()
    b.get(PODS)
    c = server.counters()
    assert c["by_token"]["tok-a"]["requests"] == 3 and c["by_token"]["tok-a"]["verbs"] == {"list": 3}
    assert c["by_token"]["tok-b"]["verbs"] == {"watch": 1, "list": 1}
    assert c["by_token"]["tok-b"]["user"] == "system:serviceaccount:default:b"
    assert c["by_remote"]["127.0.0.1"]["requests"] == 5
    assert c["by_remote"]["127.0.0.1"]["verbs"]["watch"] == 1
    assert c["total"]["requests"] == 5 and c["since"] > 0
