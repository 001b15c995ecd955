"""Schema validation of Kubernetes manifests, offline, with real schemas.

- Every built-in object (Job, Service, Namespace, RBAC, ...) and every Job
  template inside a JobSet or a Kubeflow runtime goes through the validators
  of the npm package kubernetes-models (generated from the OpenAPI spec of a
  current Kubernetes release; scripts/fetch-k8s-schemas.sh fetches it).
  They check types, enums and required fields.
- Every pod template is also validated against the PodTemplateSpec schema
  that Kubeflow's PyTorchJob CRD embeds (generated from k8s.io/api by
  controller-gen), closed the way strict field validation closes it: a
  misspelt or unknown field is an error there.
- PyTorchJob, JobSet, TrainJob and ClusterTrainingRuntime objects are
  validated strictly against their CRDs in ../shared/schemas: a TrainJob and
  a runtime against the CRDs of every Trainer release there
  (trainer-v*/), a JobSet against jobset v0.12.0's.

validate(doc) returns a list of error strings: empty means valid.
"""
import copy
import functools
import glob
import json
import os
import re
import subprocess

import jsonschema
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "schemas")
TOOLS = os.environ.get("NICPICK_TOOLS_DIR") or os.path.join(ROOT, "build", "tools")
MODELS = os.path.join(TOOLS, "k8s-models")
VALIDATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "k8s_models_validate.mjs")
FETCH = os.path.join(ROOT, "scripts", "fetch-k8s-schemas.sh")
PYTORCHJOB_CRD = os.path.join(SHARED, "kubeflow.org_pytorchjobs.v1.9.0.yaml")
TRAINJOB_CRD = os.path.join(SHARED, "trainer.kubeflow.org_trainjobs.yaml")
JOBSET_CRD = os.path.join(SHARED, "jobset.x-k8s.io_jobsets.v0.12.0.yaml")
# kubeflow/trainer manifests/base/crds/ at each release tag (../shared/schemas/README.md)
TRAINER_DIRS = sorted(glob.glob(os.path.join(SHARED, "trainer-v*")))


def missing(what):
    """A prerequisite is missing: a failure under CI=true, a loud skip elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: a missing prerequisite is a failure)")
    pytest.skip(what)


def strict(schema):
    """Close every object schema that does not keep unknown fields: unknown
    fields are errors, as with strict server-side field validation.  An
    object with no properties at all (Trainer v2.2's `torch: {type: object}`)
    is closed too: the API server prunes (or, strictly, rejects) every field
    in it.  The root's metadata is ObjectMeta, which the API server checks
    itself."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (node.get("type") == "object"
                    and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(s)
    meta = (s.get("properties") or {}).get("metadata")
    if meta is not None and "properties" not in meta:
        meta.pop("additionalProperties", None)
    return s


@functools.lru_cache(maxsize=None)
def crd_schema(path, version):
    if not os.path.exists(path):
        missing(f"{path} is missing: ../shared must lie beside the repository")
    with open(path) as f:
        crd = yaml.safe_load(f)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return strict(v["schema"]["openAPIV3Schema"])
    raise AssertionError(f"{path} has no version {version}")


def pod_template_schema():
    spec = crd_schema(PYTORCHJOB_CRD, "v1")["properties"]["spec"]
    return spec["properties"]["pytorchReplicaSpecs"]["additionalProperties"]["properties"]["template"]


def trainer_crds(plural):
    """(label, path, version) of a Trainer CRD at every release in ../shared."""
    if not TRAINER_DIRS:
        missing(f"no {SHARED}/trainer-v*/: ../shared must lie beside the repository")
    return [(f"trainer {os.path.basename(d)[len('trainer-'):]}",
             os.path.join(d, f"trainer.kubeflow.org_{plural}.yaml"), "v1alpha1")
            for d in TRAINER_DIRS]


def crds_for(key):
    """Every (label, CRD path, version) an object of this kind must satisfy."""
    if key == ("kubeflow.org/v1", "PyTorchJob"):
        return [("training-operator v1.9.0", PYTORCHJOB_CRD, "v1")]
    if key == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        return [("jobset v0.12.0", JOBSET_CRD, "v1alpha2")]
    if key == ("trainer.kubeflow.org/v1alpha1", "TrainJob"):
        return [("trainer early v2", TRAINJOB_CRD, "v1alpha1")] + trainer_crds("trainjobs")
    if key == ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"):
        return trainer_crds("clustertrainingruntimes")
    return []


CRDS = {("kubeflow.org/v1", "PyTorchJob"), ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")}


def models_ready():
    """Fetch kubernetes-models when it is not there yet."""
    def ok():
        return os.path.isfile(os.path.join(MODELS, "node_modules", "kubernetes-models", "package.json"))
    if not ok():
        r = subprocess.run(["bash", FETCH], capture_output=True, text=True, timeout=600,
                           stdin=subprocess.DEVNULL)
        if not ok():
            missing(f"kubernetes-models unavailable (scripts/fetch-k8s-schemas.sh): "
                    f"{(r.stderr or r.stdout).strip()[-400:]}")
    return MODELS


def run_models(objs):
    """kubernetes-models' verdict on each object: (model or None, [errors])."""
    if not objs:
        return []
    r = subprocess.run(["node", VALIDATOR, models_ready()], input=json.dumps(objs),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [(x["model"], x["errors"]) for x in json.loads(r.stdout)]


def job_templates(doc):
    """(path, JobTemplateSpec) inside a JobSet or a Kubeflow training runtime."""
    kind = doc.get("kind")
    if kind == "JobSet":
        rjobs = doc["spec"].get("replicatedJobs", [])
    elif kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
        rjobs = doc["spec"]["template"]["spec"].get("replicatedJobs", [])
    else:
        return []
    return [(f"replicatedJobs[{i}].template", rj.get("template", {})) for i, rj in enumerate(rjobs)]


def pod_templates(doc):
    """(path, PodTemplateSpec) of every pod the object makes."""
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Job":
        return [("spec.template", spec.get("template", {}))]
    if kind == "PyTorchJob":
        return [(f"pytorchReplicaSpecs.{r}.template", s.get("template", {}))
                for r, s in spec.get("pytorchReplicaSpecs", {}).items()]
    return [(p + ".spec.template", (jt.get("spec") or {}).get("template", {}))
            for p, jt in job_templates(doc)]


CUSTOM = CRDS | {("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")}


def _schema_errors(schema, obj, where):
    v = jsonschema.Draft7Validator(schema)
    return [f"{where}/{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in sorted(v.iter_errors(obj), key=lambda e: list(map(str, e.path)))]


def validate_all(docs):
    """Errors for each document, in order."""
    core, owners = [], []
    for i, d in enumerate(docs):
        if (d.get("apiVersion"), d.get("kind")) not in CUSTOM:
            core.append(d)
            owners.append((i, d.get("kind")))
        for path, jt in job_templates(d):
            core.append(dict(jt, __model="batch/v1/JobTemplateSpec"))
            owners.append((i, path))
    errors = [[] for _ in docs]
    for (i, where), (model, errs) in zip(owners, run_models(core)):
        if model is None:
            errors[i].append(f"{where}: no Kubernetes schema for {docs[i].get('apiVersion')} {where}")
        errors[i] += [f"{where}{e}" for e in errs]
    for i, d in enumerate(docs):
        key = (d.get("apiVersion"), d.get("kind"))
        for label, path, version in crds_for(key):
            errors[i] += _schema_errors(crd_schema(path, version), d, f"{d['kind']} ({label})")
        if key == ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"):
            errors[i] += nad_errors(d)
        for path, tpl in pod_templates(d):
            errors[i] += _schema_errors(pod_template_schema(), tpl, path)
    return errors


def nad_errors(d):
    """A NetworkAttachmentDefinition: spec.config is a CNI configuration."""
    try:
        conf = json.loads(d["spec"]["config"])
    except (KeyError, TypeError, ValueError) as e:
        return [f"spec.config is not CNI JSON: {e}"]
    errs = [f"spec.config lacks {k}" for k in ("cniVersion", "type") if k not in conf]
    if conf.get("name") not in (None, d["metadata"]["name"]):
        errs.append("spec.config name differs from metadata.name")
    return errs


# Pod Security "restricted" (Kubernetes' pod-security-admission, the checks
# a pod spec can fail), applied to a pod spec as the API server would see it.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def restricted_violations(pod):
    v = []
    psc = pod.get("securityContext") or {}
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(f):
            v.append(f)
    for vol in pod.get("volumes") or []:
        kinds = set(vol) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            v.append(f"volume {vol['name']}: {sorted(kinds)}")
    containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    for c in containers:
        sc = c.get("securityContext") or {}
        n = c["name"]
        if sc.get("privileged"):
            v.append(f"{n}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            v.append(f"{n}: allowPrivilegeEscalation != false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            v.append(f"{n}: capabilities.drop lacks ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            v.append(f"{n}: capabilities.add")
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            v.append(f"{n}: runAsNonRoot")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            v.append(f"{n}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            v.append(f"{n}: seccompProfile")
        for p in c.get("ports") or []:
            # With hostNetwork the API server defaults hostPort to containerPort.
            if p.get("hostPort") or pod.get("hostNetwork"):
                v.append(f"{n}: hostPort {p.get('hostPort') or p['containerPort']}")
    return v


def config_c_reads():
    """The files lib/k8s/config.c reads from the service-account directory."""
    with open(os.path.join(ROOT, "lib", "k8s", "config.c")) as f:
        src = f.read()
    with open(os.path.join(ROOT, "lib", "k8s", "k8s.h")) as f:
        hdr = f.read()
    sa_dir = re.search(r'#define\s+K8S_SA_DIR\s+"([^"]+)"', hdr + src).group(1)
    return sa_dir.rstrip("/"), set(re.findall(r'sa_path\([^,]+, sa_dir, "([^"]+)"', src))
