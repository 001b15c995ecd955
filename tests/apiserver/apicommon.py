"""What the tests/apiserver files share: the namespace, its pods path, the test
user, and the shape of a kube-apiserver Status body.  A module of its own (not
conftest), as apiclient.py is, so that test files can import it by a name no
other test directory uses."""


NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
USER = "system:serviceaccount:default:default"


def status_shape(body, code, reason):
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["metadata"] == {} and body["status"] == "Failure"
    assert body["code"] == code and body["reason"] == reason
    return body
