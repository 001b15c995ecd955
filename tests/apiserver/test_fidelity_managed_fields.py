"""Accept's drop=metadata.managedFields: the option `managed_fields_opt_out`.

Real sources (kubernetes/kubernetes):
- staging/src/k8s.io/apiserver/pkg/endpoints/handlers/negotiation/negotiate.go,
  acceptMediaTypeOptions: a media type parameter it does not know ("drop" before
  v1.38, or with the feature gate off) goes to `Unrecognized` and the clause is still
  accepted, so a server without the feature answers as if it had not been asked;
- negotiate_drop_test.go (kubernetes/kubernetes#139561, v1.38.0-alpha.1, KEP-5958):
  with the ManagedFieldsOptOut gate (alpha, off by default) drop=metadata.managedFields
  picks a serializer that leaves managedFields out of GET, LIST, WATCH and write
  responses; the value is a '+'-separated set and unknown targets are ignored; the
  stored object keeps its managedFields."""

import json

from apiclient import Api, pod
from fidelity import META_LIST, META_ONE, NS, PODS, py_core

DROP = ";drop=metadata.managedFields"


def test_drop_is_ignored_without_the_feature(make_server):
    api = Api(make_server(realistic_pods=True, managed_fields_opt_out=False))
    assert api.req("POST", PODS, pod("a")).status == 201
    for path, accept in ((PODS + "/a", "application/json" + DROP),
                         (PODS, META_LIST + DROP + ",application/json" + DROP)):
        r = api.get(path, headers={"Accept": accept})
        assert r.status == 200, r.body
        o = r.body["items"][0] if "items" in r.body else r.body
        assert o["metadata"]["managedFields"]


def test_drop_leaves_managed_fields_out_of_every_response(make_server):
    s = make_server(realistic_pods=True, managed_fields_opt_out=True)
    api = Api(s)
    hdr = {"Accept": "application/json" + DROP}
    created = api.req("POST", PODS, pod("a", {"app": "x"}), headers=hdr)
    assert created.status == 201 and "managedFields" not in created.body["metadata"]
    full = api.get(PODS + "/a").body                   # not asked: all of it
    assert full["metadata"]["managedFields"]
    got = api.get(PODS + "/a", headers=hdr).body
    assert "managedFields" not in got["metadata"]
    assert got["metadata"]["labels"] == {"app": "x"} and got["spec"] and got["status"]
    assert {k: v for k, v in full["metadata"].items() if k != "managedFields"} == got["metadata"]
    meta = api.get(PODS, headers={"Accept": META_LIST + DROP}).body
    assert meta["kind"] == "PartialObjectMetadataList"
    assert "managedFields" not in meta["items"][0]["metadata"]
    assert meta["items"][0]["metadata"]["uid"] == full["metadata"]["uid"]
    patched = api.req("PATCH", PODS + "/a", {"metadata": {"annotations": {"k": "v"}}},
                      ctype="application/merge-patch+json", headers=hdr)
    assert patched.status == 200 and "managedFields" not in patched.body["metadata"]
    assert patched.body["metadata"]["annotations"]["k"] == "v"
    # a set of targets; an unknown target alone asks for nothing
    both = api.get(PODS + "/a", headers={"Accept": "application/json;drop=spec.x+"
                                         "metadata.managedFields"}).body
    assert "managedFields" not in both["metadata"]
    other = api.get(PODS + "/a", headers={"Accept": "application/json;drop=spec.x"}).body
    assert other["metadata"]["managedFields"]
    assert api.get(PODS + "/a").body["metadata"]["managedFields"]   # stored intact


def test_drop_in_a_metadata_only_watch(make_server):
    s = make_server(realistic_pods=True, managed_fields_opt_out=True)
    api = Api(s)
    api.req("POST", PODS, pod("a", {"app": "x"}))
    c = api.conn()
    c.request("GET", PODS + "?watch=1&timeoutSeconds=2",
              headers=api.headers({"Accept": META_ONE + DROP}))
    r = c.getresponse()
    assert r.status == 200
    first = json.loads(r.readline())
    s.patch_object(NS, "a", {"metadata": {"labels": {"app": "y"}}})
    second = json.loads(r.readline())
    c.close()
    assert [first["type"], second["type"]] == ["ADDED", "MODIFIED"]
    for e in (first, second):
        assert e["object"]["kind"] == "PartialObjectMetadata"
        assert e["object"]["metadata"]["uid"] and "managedFields" not in e["object"]["metadata"]
    assert second["object"]["metadata"]["labels"] == {"app": "y"}
    # a watcher that did not ask, on the same event, still gets them
    rv = first["object"]["metadata"]["resourceVersion"]
    w = api.watch(f"{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    ev = w.next()
    w.close()
    assert ev["type"] == "MODIFIED" and ev["object"]["metadata"]["managedFields"]


def test_python_client_asks_for_the_drop(make_server):
    for on in (False, True):
        s = make_server(realistic_pods=True, managed_fields_opt_out=on)
        v1, c = py_core(s)
        v1.create_namespaced_pod(NS, pod("a"))
        data, status, _ = c.call_api(PODS + "/a", "GET",
                                     header_params={"Accept": "application/json" + DROP},
                                     auth_settings=["BearerToken"], response_type="object",
                                     _return_http_data_only=False)
        assert status == 200 and data["metadata"]["name"] == "a"
        assert ("managedFields" in data["metadata"]) is not on
        c.close()
