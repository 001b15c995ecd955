"""Table and PartialObjectMetadata renderings, as kubectl asks for them."""

from .util import age


def pod_row(o):
    spec, st = o.get("spec") or {}, o.get("status") or {}
    cs = st.get("containerStatuses") or []
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cs)
    reason = st.get("reason") or st.get("phase") or "Pending"
    for c in cs:
        w = (c.get("state") or {}).get("waiting") or (c.get("state") or {}).get("terminated")
        if w and w.get("reason"):
            reason = w["reason"]
    if (o.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates")
    return [o["metadata"]["name"], f"{ready}/{len(spec.get('containers') or [])}", reason,
            str(restarts), age(o["metadata"].get("creationTimestamp")),
            st.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            st.get("nominatedNodeName") or "<none>", str(len(gates)) if gates else "<none>"]


def event_row(o):
    io = o.get("involvedObject") or {}
    src = (o.get("source") or {}).get("component") or o.get("reportingComponent") or ""
    last = o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
    return [age(last), o.get("type", ""), o.get("reason", ""),
            f"{(io.get('kind') or '').lower()}/{io.get('name', '')}",
            io.get("fieldPath", ""), src, o.get("message", ""),
            age(o.get("firstTimestamp") or last), str(o.get("count") or 1), o["metadata"]["name"]]


def col(name, priority=0, fmt="", typ="string"):
    return {"name": name, "type": typ, "format": fmt, "description": name,
            "priority": priority}


# Real: the columns of k8s.io/kubernetes/pkg/printers/internalversion for these kinds.
TABLES = {
    "Pod": ([col("Name", 0, "name"), col("Ready"), col("Status"), col("Restarts"), col("Age"),
             col("IP", 1), col("Node", 1), col("Nominated Node", 1), col("Readiness Gates", 1)],
            pod_row),
    "Event": ([col("Last Seen"), col("Type"), col("Reason"), col("Object"),
               col("Subobject", 1), col("Source", 1), col("Message"), col("First Seen", 1),
               col("Count", 1), col("Name", 1, "name")], event_row),
    "Namespace": ([col("Name", 0, "name"), col("Status"), col("Age")],
                  lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""),
                             age(o["metadata"].get("creationTimestamp"))]),
    "Job": ([col("Name", 0, "name"), col("Completions"), col("Age")],
            lambda o: [o["metadata"]["name"], "%s/%s" % ((o.get("status") or {}).get(
                "succeeded", 0), (o.get("spec") or {}).get("completions", 1)),
                       age(o["metadata"].get("creationTimestamp"))]),
    "ServiceAccount": ([col("Name", 0, "name"), col("Secrets"), col("Age")],
                       lambda o: [o["metadata"]["name"], str(len(o.get("secrets") or [])),
                                  created(o)]),
    "Role": ([col("Name", 0, "name"), col("Created At", typ="date")],
             lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]),
    "ClusterRole": ([col("Name", 0, "name"), col("Created At", typ="date")],
                    lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]),
    "RoleBinding": ([col("Name", 0, "name"), col("Role"), col("Age"), col("Users", 1),
                     col("Groups", 1), col("ServiceAccounts", 1)], lambda o: binding_row(o)),
    "ClusterRoleBinding": ([col("Name", 0, "name"), col("Role"), col("Age"), col("Users", 1),
                            col("Groups", 1), col("ServiceAccounts", 1)],
                           lambda o: binding_row(o)),
    # Real: a CRD's table is Name plus its additionalPrinterColumns (the CRDs in
    # ../shared/schemas and JobSet's); a value that is not there is a null cell.
    "PyTorchJob": ([col("Name", 0, "name"), col("State"), col("Age", typ="date")],
                   lambda o: [o["metadata"]["name"], last_condition(o), created(o)]),
    "TrainJob": ([col("Name", 0, "name"), col("State"), col("Age", typ="date")],
                 lambda o: [o["metadata"]["name"], last_condition(o), created(o)]),
    "JobSet": ([col("Name", 0, "name"), col("TerminalState"), col("Restarts"),
                col("Completed"), col("Suspended"), col("Age", typ="date")],
               lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("terminalState"),
                          (o.get("status") or {}).get("restarts"),
                          next((c.get("status") for c in (o.get("status") or {}).get(
                              "conditions") or [] if c.get("type") == "Completed"), None),
                          (o.get("spec") or {}).get("suspend"), created(o)]),
}


def created(o):
    return age(o["metadata"].get("creationTimestamp"))


def last_condition(o):
    """Real: the CRDs' State column, JSONPath .status.conditions[-1:].type."""
    conds = (o.get("status") or {}).get("conditions") or []
    return conds[-1].get("type") if conds else None


def binding_row(o):
    """Real: printers/internalversion printRoleBinding."""
    subs = o.get("subjects") or []

    def names(kind):
        return ", ".join(s.get("name", "") if kind != "ServiceAccount" else
                         f"{s.get('namespace', '')}/{s.get('name', '')}"
                         for s in subs if s.get("kind") == kind)
    ref = o.get("roleRef") or {}
    return [o["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}", created(o),
            names("User"), names("Group"), names("ServiceAccount")]


def partial_meta(obj):
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata", {})}


def without_managed_fields(body):
    """body (an object, or a list of them) without metadata.managedFields, the stored
    objects untouched (real: the ExcludeManagedFields serializer, KEP-5958)."""
    if isinstance(body.get("items"), list):
        return dict(body, items=[without_managed_fields(o) for o in body["items"]])
    md = body.get("metadata")
    if not isinstance(md, dict) or "managedFields" not in md:
        return body
    return dict(body, metadata={k: v for k, v in md.items() if k != "managedFields"})


def to_table(res, objs, list_meta, include="Metadata", headers=True):
    cols, rowf = TABLES[res.kind]
    rows = []
    for o in objs:
        row = {"cells": rowf(o)}
        if include == "Object":
            row["object"] = dict(o, kind=res.kind, apiVersion=res.api_version)
        elif include != "None":
            row["object"] = partial_meta(o)
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
            "columnDefinitions": cols if headers else None, "rows": rows}
