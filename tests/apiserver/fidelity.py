"""Helpers of the fidelity tests (tests/apiserver/test_fidelity_*.py): the Python
kubernetes client bound to a server, a scheduled pod, a raw HTTPS GET without a token."""

import http.client
import ssl

from apiclient import pod

NS = "default"
PODS = f"/api/v1/namespaces/{NS}/pods"
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
META_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def py_core(server):
    """(CoreV1Api, ApiClient) of the real Python client on the server's kubeconfig."""
    from kubernetes import client, config
    c = config.new_client_from_config(config_file=server.kubeconfig_path)
    return client.CoreV1Api(c), c


def scheduled(name, grace=None, **kw):
    p = pod(name, node="node-1", **kw)
    if grace is not None:
        p["spec"]["terminationGracePeriodSeconds"] = grace
    return p


def raw_get(server, path, headers=None):
    """GET without any Authorization header: (status, headers, body bytes)."""
    ctx = ssl.create_default_context(cafile=server.ca_path)
    c = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    try:
        c.request("GET", path, headers=dict({"Accept": "application/json"}, **(headers or {})))
        r = c.getresponse()
        return r.status, r.headers, r.read()
    finally:
        c.close()
