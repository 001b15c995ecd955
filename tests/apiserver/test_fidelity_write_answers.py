"""The answer to a write, rendered as the Accept header asks: a PATCH or a POST
with Accept as=PartialObjectMetadata answers the written object's metadata only,
and the object is stored whole.

Real sources (kubernetes/kubernetes, staging/src/k8s.io/apiserver/pkg/endpoints/):
- handlers/patch.go, PatchResource, and handlers/create.go, createHandler: each
  negotiates the output media type from Accept (negotiation.NegotiateOutputMediaType)
  and writes the result through transformResponseObject, as GET does, so the
  as=PartialObjectMetadata transform applies to a write's answer too (handlers/rest.go,
  AllowsMediaTypeTransform: "PartialObjectMetadata", "PartialObjectMetadataList" for
  any resource);
- staging/src/k8s.io/client-go/metadata/metadata.go, Patch: client-go's metadata
  client sends exactly this Accept (protobuf, then JSON as=PartialObjectMetadata, then
  application/json) and decodes a PartialObjectMetadata."""

from apiclient import Api, pod
from fidelity import META_ONE, NS, PODS

ACCEPT = META_ONE + ",application/json"


def test_a_patch_asked_for_metadata_answers_metadata_and_stores_the_whole_pod(make_server):
    api = Api(make_server(realistic_pods=True))
    assert api.req("POST", PODS, pod("a", {"app": "x"})).status == 201
    r = api.req("PATCH", PODS + "/a", {"metadata": {"annotations": {"k": "v"}}},
                ctype="application/merge-patch+json", headers={"Accept": ACCEPT})
    assert r.status == 200, r.body
    assert r.body["kind"] == "PartialObjectMetadata" and r.body["apiVersion"] == "meta.k8s.io/v1"
    assert set(r.body) == {"kind", "apiVersion", "metadata"}
    assert r.body["metadata"]["annotations"]["k"] == "v"
    assert r.body["metadata"]["labels"] == {"app": "x"}
    full = api.get(PODS + "/a").body
    assert full["spec"]["containers"] and full["status"]
    assert full["metadata"] == r.body["metadata"]
    # not asked: the whole pod, as ever
    plain = api.req("PATCH", PODS + "/a", {"metadata": {"annotations": {"k": "w"}}},
                    ctype="application/merge-patch+json")
    assert plain.body["kind"] == "Pod" and plain.body["spec"]["containers"]


def test_a_post_asked_for_metadata_answers_metadata(make_server):
    api = Api(make_server())
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
          "involvedObject": {"kind": "Pod", "name": "a", "namespace": NS},
          "reason": "Agreed", "message": "m", "type": "Normal"}
    r = api.req("POST", f"/api/v1/namespaces/{NS}/events", ev, headers={"Accept": ACCEPT})
    assert r.status == 201, r.body
    assert r.body["kind"] == "PartialObjectMetadata" and r.body["metadata"]["name"] == "e1"
    assert "reason" not in r.body and "involvedObject" not in r.body
    stored = api.get(f"/api/v1/namespaces/{NS}/events/e1").body
    assert stored["reason"] == "Agreed" and stored["involvedObject"]["name"] == "a"
