"""Pods of a real cluster's size: the fields kube-apiserver's defaulting and admission,
the scheduler and the kubelet add to a pod that a controller created (the
`realistic_pods` option).  A real `kubectl get pod -o json` of a running training pod
is 5-15 KB; most of it is below.

Sources (kubernetes/kubernetes):
- pkg/apis/core/v1/defaults.go: SetDefaults_PodSpec (dnsPolicy, restartPolicy,
  schedulerName, securityContext, terminationGracePeriodSeconds, enableServiceLinks),
  SetDefaults_Container (terminationMessagePath/Policy, imagePullPolicy), SetDefaults_Pod;
- plugin/pkg/admission/serviceaccount/admission.go: the projected `kube-api-access-XXXXX`
  volume and its volumeMount in every container;
- plugin/pkg/admission/defaulttolerationseconds: the not-ready/unreachable tolerations
  (300 s); pkg/apis/scheduling priority admission: priority 0, preemptionPolicy;
- the kubelet's status (pkg/kubelet/status): conditions PodReadyToStartContainers,
  Initialized, Ready, ContainersReady, PodScheduled, hostIP(s), podIP(s), startTime,
  containerStatuses with imageID/containerID/state.running;
- staging/src/k8s.io/apimachinery/pkg/apis/meta/v1 ManagedFieldsEntry: managedFields of
  the creating controller (Update), the kubelet (Update, subresource status) and
  every annotation patcher (Update)."""

import copy
import hashlib

from .util import now_rfc3339


def _fields(obj):
    """A managedFields fieldsV1 set for the keys of obj (as the structured-merge-diff
    encoder writes them: "f:<key>" maps, "k:{...}" for keyed list items)."""
    if isinstance(obj, dict):
        return {f"f:{k}": _fields(v) for k, v in obj.items()}
    if isinstance(obj, list) and obj and all(isinstance(x, dict) and "name" in x for x in obj):
        return {'k:{"name":"%s"}' % x["name"]: dict({".": {}}, **_fields(x)) for x in obj}
    return {}


def decorate(pod):
    """Return pod with the fields a scheduled, running pod carries (missing ones only)."""
    pod = copy.deepcopy(pod)
    md = pod.setdefault("metadata", {})
    spec = pod.setdefault("spec", {})
    name = md.get("name", "pod")
    h = hashlib.sha256(name.encode()).hexdigest()
    now = md.get("creationTimestamp") or now_rfc3339()
    node = spec.get("nodeName") or f"gpu-node-{int(h[:4], 16) % 4096:04d}"
    ip = f"10.{int(h[4:6], 16)}.{int(h[6:8], 16)}.{int(h[8:10], 16) or 1}"
    host_ip = f"172.16.{int(h[10:12], 16)}.{int(h[12:14], 16) or 1}"
    vol = f"kube-api-access-{h[14:19]}"
    created_spec = copy.deepcopy(spec)
    for k, v in (("dnsPolicy", "ClusterFirst"), ("enableServiceLinks", True),
                 ("nodeName", node), ("preemptionPolicy", "PreemptLowerPriority"),
                 ("priority", 0), ("restartPolicy", "Always"),
                 ("schedulerName", "default-scheduler"), ("securityContext", {}),
                 ("serviceAccount", spec.get("serviceAccountName", "default")),
                 ("serviceAccountName", "default"), ("terminationGracePeriodSeconds", 30)):
        spec.setdefault(k, copy.deepcopy(v))
    spec.setdefault("tolerations", [
        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
         "tolerationSeconds": 300},
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable",
         "operator": "Exists", "tolerationSeconds": 300}])
    vols = spec.setdefault("volumes", [])
    if not any(v.get("name", "").startswith("kube-api-access-") for v in vols):
        vols.append({"name": vol, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}],
                           "name": "kube-root-ca.crt"}},
            {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                                                     "fieldPath": "metadata.namespace"},
                                        "path": "namespace"}]}}]}})
    statuses = []
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or []:
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c.setdefault("resources", {})
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            mounts = c.setdefault("volumeMounts", [])
            if not any(m.get("name", "").startswith("kube-api-access-") for m in mounts):
                mounts.append({"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                               "name": vol, "readOnly": True})
            image = c.get("image") or "nvcr.io/nvidia/pytorch:24.05-py3"
            cid = hashlib.sha256((name + c.get("name", "")).encode()).hexdigest()
            st = {"containerID": f"containerd://{cid}", "image": image,
                  "imageID": f"{image.split(':')[0]}@sha256:{h}", "lastState": {},
                  "name": c.get("name", ""), "ready": kind == "containers",
                  "restartCount": 0, "started": kind == "containers",
                  "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/"
                                    "serviceaccount", "name": vol, "readOnly": True,
                                    "recursiveReadOnly": "Disabled"}]}
            if kind == "containers":
                st["state"] = {"running": {"startedAt": now}}
            else:
                st["state"] = {"terminated": {"containerID": st["containerID"], "exitCode": 0,
                                              "finishedAt": now, "reason": "Completed",
                                              "startedAt": now}}
            statuses.append((kind, st))
    status = pod.setdefault("status", {})
    if status.get("phase") in (None, "Pending"):
        status["phase"] = "Running"
    for k, v in (("hostIP", host_ip), ("hostIPs", [{"ip": host_ip}]), ("podIP", ip),
                 ("podIPs", [{"ip": ip}]), ("qosClass", "BestEffort"), ("startTime", now)):
        status.setdefault(k, v)
    status.setdefault("conditions", [
        {"lastProbeTime": None, "lastTransitionTime": now, "status": "True", "type": t}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                  "PodScheduled")])
    for kind, key in (("initContainers", "initContainerStatuses"),
                      ("containers", "containerStatuses")):
        got = [st for k, st in statuses if k == kind]
        if got:
            status.setdefault(key, got)
    if not md.get("managedFields"):
        meta_keys = {k: md[k] for k in ("labels", "annotations", "ownerReferences",
                                        "generateName") if k in md}
        md["managedFields"] = [
            {"apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": dict({"f:metadata": _fields(meta_keys)}, **{
                 "f:spec": _fields(created_spec)}),
             "manager": "pytorch-operator", "operation": "Update", "time": now},
            {"apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": _fields({k: status[k] for k in status
                                               if k != "phase"})},
             "manager": "kubelet", "operation": "Update", "subresource": "status",
             "time": now}]
    return pod
