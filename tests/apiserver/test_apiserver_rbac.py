"""RBAC authorization (authorization="RBAC"): the deploy/ Role allows exactly its
rules, a binding to a missing role says so, ClusterRole wildcards and
subresources."""

import os

import pytest

from apiclient import Api, pod, ROOT
from apicommon import NS, PODS


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
