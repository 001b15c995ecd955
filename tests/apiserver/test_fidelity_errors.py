"""Anonymous requests, API Priority and Fairness' 429, a committed write answered 504,
and core/v1 Event validation, as kube-apiserver answers them.

Real sources (kubernetes/kubernetes):
- staging/src/k8s.io/apiserver/pkg/authentication/request/anonymous/anonymous.go: with
  --anonymous-auth=true (the default) a request without credentials is
  system:anonymous in system:unauthenticated; plugin/pkg/auth/authorizer/rbac/
  bootstrappolicy/policy.go binds only system:public-info-viewer (/healthz, /livez,
  /readyz, /version) to it, so the RBAC authorizer denies the rest and
  staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go,
  Forbidden/forbiddenMessage writes the 403 (an invalid token stays 401);
- staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go and
  maxinflight.go, tooManyRequests: Retry-After then http.Error(w, "Too many requests,
  please try again later.", 429) -- plain text, not a Status;
- staging/src/k8s.io/apiserver/pkg/endpoints/handlers/finisher/finisher.go,
  finishRequest: when the request's deadline passes the client gets
  NewTimeoutError("request did not complete within requested timeout - context
  deadline exceeded", 0) while the write goes on and commits;
- pkg/apis/core/validation/events.go, ValidateEventCreate: for core/v1 only
  legacyValidateEvent; with eventTime set: reportingController (JSON reportingComponent)
  a qualified name, reportingInstance/action/reason required and <= 128, message <= 1024;
  without eventTime only the involvedObject namespace rule."""

import json

import pytest

from apiclient import Api, pod
from fidelity import NS, PODS, py_core, raw_get

EVENTS = f"/api/v1/namespaces/{NS}/events"


def test_anonymous_is_403_with_anonymous_auth(make_server):
    s = make_server(anonymous_auth=True)
    st, _, body = raw_get(s, PODS)
    b = json.loads(body)
    assert st == 403 and b["reason"] == "Forbidden" and b["code"] == 403
    assert b["message"] == ('pods is forbidden: User "system:anonymous" cannot list resource '
                            '"pods" in API group "" in the namespace "default"')
    assert b["details"] == {"kind": "pods"}
    st, _, body = raw_get(s, PODS + "/p")
    assert st == 403 and json.loads(body)["message"].startswith(
        'pods "p" is forbidden: User "system:anonymous" cannot get resource "pods"')
    st, _, body = raw_get(s, "/api")
    assert st == 403 and json.loads(body)["message"] == \
        'forbidden: User "system:anonymous" cannot get path "/api"'
    assert raw_get(s, "/version")[0] == 200 and raw_get(s, "/healthz")[0] == 200
    # a wrong token is still 401: the token authenticator rejects it before anonymous
    assert Api(s, token="wrong").get(PODS).status == 401


def test_anonymous_default_stays_401(make_server, monkeypatch):
    monkeypatch.delenv("KUBEAPI_FIDELITY", raising=False)
    assert raw_get(make_server(), PODS)[0] == 401


def test_fidelity_options_from_the_environment(make_server, monkeypatch):
    monkeypatch.setenv("KUBEAPI_FIDELITY", '{"anonymous_auth": true}')
    assert raw_get(make_server(), PODS)[0] == 403
    assert raw_get(make_server(anonymous_auth=False), PODS)[0] == 401   # explicit wins
    monkeypatch.setenv("KUBEAPI_FIDELITY", '{"no_such_option": true}')
    with pytest.raises(Exception, match="unknown options"):
        make_server()


def test_python_client_without_token_gets_403(make_server):
    from kubernetes import client
    s = make_server(anonymous_auth=True)
    cfg = client.Configuration()
    cfg.host, cfg.ssl_ca_cert = s.url, s.ca_path
    with client.ApiClient(cfg) as c:
        with pytest.raises(client.ApiException) as ei:
            client.CoreV1Api(c).list_namespaced_pod(NS)
    assert ei.value.status == 403


def test_apf_429_is_plain_text_with_retry_after(server):
    server.add_fault(kind="error", code=429, plain=True)
    api = Api(server)
    r = api.get(PODS)
    assert r.status == 429
    assert r.raw == b"Too many requests, please try again later.\n"
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Retry-After"] == "1"
    assert api.get(PODS).status == 200


def test_python_client_retries_a_plain_429_after_retry_after(server):
    # urllib3 (under the Python client) retries a 429 that has Retry-After, as
    # client-go does; the plain body must not stop it.
    import time
    server.add_fault(kind="error", code=429, plain=True, verb="list")
    v1, c = py_core(server)
    server.requests(clear=True)
    t0 = time.monotonic()
    assert v1.list_namespaced_pod(NS).items == []
    assert time.monotonic() - t0 >= 0.9
    assert [r["status"] for r in server.requests() if r["verb"] == "list"] == [429, 200]
    c.close()


def test_commit_then_504(server):
    server.add_fault(kind="commit_timeout", verb="create", resource="events")
    api = Api(server)
    ev = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p",
                                                         "namespace": NS},
          "reason": "R", "message": "m", "type": "Normal"}
    r = api.req("POST", EVENTS, ev)
    assert r.status == 504
    assert r.body == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Failure", "message": "Timeout: request did not complete "
                      "within requested timeout - context deadline exceeded",
                      "reason": "Timeout", "details": {}, "code": 504}
    # committed all the same: the retry is 409 AlreadyExists, the object is there
    again = api.req("POST", EVENTS, ev)
    assert again.status == 409 and again.body["reason"] == "AlreadyExists"
    assert api.get(EVENTS + "/e1").status == 200


def test_commit_then_504_on_patch_applies_the_patch(server):
    server.create_pod(NS, pod("a"))
    server.add_fault(kind="commit_timeout", verb="patch")
    api = Api(server)
    r = api.req("PATCH", PODS + "/a", {"metadata": {"annotations": {"k": "v"}}},
                ctype="application/merge-patch+json")
    assert r.status == 504 and r.body["reason"] == "Timeout"
    assert api.get(PODS + "/a").body["metadata"]["annotations"] == {"k": "v"}


def new_event(**kw):
    ev = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p",
                                                        "namespace": NS},
          "reason": "NicpickSelected", "message": "m", "type": "Normal",
          "eventTime": "2026-01-01T00:00:00.000000Z", "action": "NicpickSelected",
          "reportingComponent": "nicpick", "reportingInstance": "p"}
    ev.update(kw)
    return ev


@pytest.mark.parametrize("change,field,msg", [
    ({"reportingComponent": "not a name"}, "reportingController", 'Invalid value: "not a name"'),
    ({"reportingComponent": ""}, "reportingController", "Required value"),
    ({"reportingInstance": ""}, "reportingInstance", "Required value"),
    ({"reportingInstance": "x" * 129}, "reportingInstance",
     'Invalid value: "": can have at most 128 characters'),
    ({"action": ""}, "action", "Required value"),
    ({"action": "a" * 129}, "action", 'Invalid value: "": can have at most 128 characters'),
    ({"reason": "r" * 129}, "reason", 'Invalid value: "": can have at most 128 characters'),
    ({"message": "\u00e9" * 513}, "message",
     'Invalid value: "": can have at most 1024 characters'),
])
def test_event_with_event_time_is_validated(server, change, field, msg):
    r = Api(server).req("POST", EVENTS, new_event(**change))
    assert r.status == 422, r
    assert r.body["reason"] == "Invalid" and r.body["details"]["kind"] == "Event"
    causes = [c["message"] for c in r.body["details"]["causes"] if c["field"] == field]
    assert causes and causes[0].startswith(msg), r.body


def test_event_limits_are_inclusive_and_nicpick_shaped_event_passes(server):
    api = Api(server)
    ok = new_event(reason="r" * 128, action="a" * 128, reportingInstance="i" * 128,
                   message="m" * 1024, reportingComponent="example.com/nicpick")
    assert api.req("POST", EVENTS, ok).status == 201


def test_event_without_event_time_has_only_the_namespace_rule(server):
    api = Api(server)
    legacy = {"metadata": {"name": "old"}, "involvedObject": {"kind": "Pod", "name": "p",
                                                              "namespace": NS},
              "reason": "r" * 300, "message": "m" * 5000}
    assert api.req("POST", EVENTS, legacy).status == 201
    other = dict(legacy, metadata={"name": "other"},
                 involvedObject={"kind": "Pod", "name": "p", "namespace": "elsewhere"})
    r = api.req("POST", EVENTS, other)
    assert r.status == 422 and r.body["details"]["causes"][0]["field"] == \
        "involvedObject.namespace"


def test_event_namespace_rule(make_server, monkeypatch):
    monkeypatch.delenv("KUBEAPI_FIDELITY", raising=False)
    api = Api(make_server())
    ev = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}}
    r = api.req("POST", "/api/v1/namespaces/train/events", ev)
    assert r.status == 422 and r.body["message"] == \
        'Event "e" is invalid: involvedObject.namespace: Invalid value: "": does not match ' \
        'event.namespace'
    assert api.req("POST", EVENTS, ev).status == 201       # "default" is allowed
    off = Api(make_server(event_namespace_rule=False, subprocess=True))
    assert off.req("POST", "/api/v1/namespaces/train/events", ev).status == 201
