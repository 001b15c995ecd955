"""Errors over direct HTTPS as kube-apiserver answers them: the Status body of
each code (401 to 500, 413, 415, 422, 429), and the faults the server injects
through /_admin (errors, resets, slow answers)."""

import time

import pytest

from apiclient import Api, pod
from apicommon import NS, PODS, USER, status_shape


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


def test_bad_query_values_are_400(api):
    assert api.get(PODS + "?limit=abc").status == 400
    assert api.get(PODS + "?watch=1&resourceVersion=abc").status == 400
