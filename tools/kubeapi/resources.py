"""What the server serves: its version and the resources, with the field labels
each accepts in a fieldSelector."""

SERVER_VERSION = {
    "major": "1", "minor": "33", "gitVersion": "v1.33.0-nicpick-test",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64",
}


class Resource:
    def __init__(self, group, plural, kind, namespaced, short=(), fields=(), status=True,
                 create_on_update=False, generation=True, verbs=None, version="v1",
                 subresources=(), categories=()):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespaced, self.short, self.status = namespaced, list(short), status
        self.create_on_update, self.generation = create_on_update, generation
        self.api_version = f"{group}/{version}" if group else version
        self.key = f"{plural}.{group}" if group else plural   # Real: GroupResource.String()
        # Real: only these field labels are accepted in fieldSelector (else 400).
        self.fields = {"metadata.name", "metadata.namespace"} | set(fields)
        self.verbs = verbs or ["create", "delete", "deletecollection", "get", "list",
                               "patch", "update", "watch"]
        # Listed in discovery only (e.g. PyTorchJob's scale); not served.
        self.subresources, self.categories = list(subresources), list(categories)


RBAC = "rbac.authorization.k8s.io"
RESOURCES = [
    Resource("", "pods", "Pod", True, ["po"], [
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"],
        categories=["all"]),
    Resource("", "events", "Event", True, ["ev"], [
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"],
        status=False, create_on_update=True, generation=False),
    Resource("", "namespaces", "Namespace", False, ["ns"], ["status.phase"], generation=False,
             verbs=["create", "delete", "get", "list", "patch", "update", "watch"]),
    Resource("", "serviceaccounts", "ServiceAccount", True, ["sa"], status=False,
             generation=False),
    Resource("batch", "jobs", "Job", True, [], ["status.successful"], categories=["all"]),
    # Real: RBAC objects are plain stored objects; the authorizer (rbac.py) reads them.
    Resource(RBAC, "roles", "Role", True, status=False, generation=False),
    Resource(RBAC, "rolebindings", "RoleBinding", True, status=False, generation=False),
    Resource(RBAC, "clusterroles", "ClusterRole", False, status=False, generation=False),
    Resource(RBAC, "clusterrolebindings", "ClusterRoleBinding", False, status=False,
             generation=False),
    # The training jobs nicpick's pods belong to, as their CRDs define them
    # (names, scope, subresources; no schema): stored objects, no controller.
    Resource("kubeflow.org", "pytorchjobs", "PyTorchJob", True, subresources=["scale"]),
    Resource("jobset.x-k8s.io", "jobsets", "JobSet", True, version="v1alpha2"),
    Resource("trainer.kubeflow.org", "trainjobs", "TrainJob", True, version="v1alpha1"),
]
BY_PATH = {(r.group, r.plural): r for r in RESOURCES}
BY_KIND = {(r.api_version, r.kind): r for r in RESOURCES}
# Group versions in the order /apis lists them ("" is the core group, /api/v1).
GROUP_VERSIONS = list(dict.fromkeys((r.group, r.version) for r in RESOURCES))


def field_value(res, obj, label):
    if res.kind == "Event" and label == "source":   # Real: "source" is source.component
        return (obj.get("source") or {}).get("component", "")
    cur = obj
    for part in label.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)
