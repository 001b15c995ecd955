"""kubeapi: a small Kubernetes API server for nicpick's tests.

Standard library only (Debian's /usr/bin/python3, 3.11), and Debian's python3-h2
for HTTP/2. It serves the part of
the Kubernetes API that nicpick uses -- pods, core/v1 events, namespaces and
batch/v1 jobs -- over HTTPS (HTTP/2 and HTTP/1.1) with bearer tokens, and follows kube-apiserver's
wire behaviour: Status objects, resourceVersions, label/field selectors, merge
and strategic-merge patches, watch streams with bookmarks and 410 Expired,
chunked lists. Faults (5xx, 429, slow responses, dropped watches, forced 410),
RBAC denials and token changes can be injected at run time through an admin
endpoint, and per-token / per-User-Agent request and byte counters read back.

Stand-alone:  /usr/bin/python3 -m tools.kubeapi --state-dir DIR   (repository root)
In tests:     from tools.kubeapi import Server   (see README.md beside this file)

Modules, one per concern: resources (what is served), errors (Status bodies),
selectors, patches, store (objects, resourceVersions, history), tables,
faults, rbac, tls (certificates, kubeconfig), httpd (HTTP plumbing, HTTP/1.1), http2
(HTTP/2), core
(routing, discovery, rendering), crud, watch, admin, client (the Python API),
cli (the command line).

Where a behaviour mirrors a kube-apiserver detail the comment says "Real:".
"""

from .cli import main
from .client import Server
from .core import ApiServer
from .errors import ApiError
from .resources import BY_KIND, BY_PATH, RESOURCES, SERVER_VERSION, Resource
from .selectors import FieldSelector, LabelSelector
from .store import Store
from .tls import ensure_certs, kubeconfig_text
from .util import now_rfc3339

__all__ = ["ApiError", "ApiServer", "BY_KIND", "BY_PATH", "FieldSelector", "LabelSelector",
           "RESOURCES", "Resource", "SERVER_VERSION", "Server", "Store", "ensure_certs",
           "kubeconfig_text", "main", "now_rfc3339"]
