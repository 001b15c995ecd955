"""What is served and how it changes: discovery, list shapes, resourceVersion,
patches, the status subresource, generation, PUT, generateName, namespaces,
Jobs, preconditions, exact-version lists, Accept negotiation, apply patches."""

from apiclient import pod
from apicommon import NS, PODS


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
