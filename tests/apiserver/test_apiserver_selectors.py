"""Label and field selectors: the syntax kube-apiserver accepts and the 400 for
what it refuses."""

import pytest

from apiclient import pod
from apicommon import NS, PODS, status_shape


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
