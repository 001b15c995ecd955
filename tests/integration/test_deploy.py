"""The shipped manifests: the PyTorchJob validates against Kubeflow's CRD
schema (strictly, as `kubectl apply --validate=strict` would), the Role
grants exactly what nicpick uses, and every manifest runs nicpick with
arguments its own parser accepts."""
import copy
import os
import subprocess

import jsonschema
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "schemas")


def load_all(name):
    with open(os.path.join(ROOT, "deploy", name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def strict(schema):
    """Close every object schema that lists its properties: unknown fields
    are errors, as with strict server-side field validation."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (node.get("type") == "object" and "properties" in node
                    and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(s)
    return s


def crd_schema(path, version):
    with open(path) as f:
        crd = yaml.safe_load(f)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return strict(v["schema"]["openAPIV3Schema"])
    raise AssertionError(f"{path} has no version {version}")


def pytorchjob_schema():
    path = os.path.join(SHARED, "kubeflow.org_pytorchjobs.v1.9.0.yaml")
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing: ../shared must lie beside the repository")
    return crd_schema(path, "v1")


def test_pytorchjob_example_validates_against_the_kubeflow_crd():
    (job,) = load_all("pytorchjob.yaml")
    jsonschema.validate(job, pytorchjob_schema())


def test_strict_validation_catches_a_misspelt_field():
    (job,) = load_all("pytorchjob.yaml")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replica"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(job, pytorchjob_schema())


def test_role_grants_exactly_what_nicpick_uses():
    docs = {d["kind"]: d for d in load_all("rbac.yaml")}
    rules = {(r["apiGroups"][0], res): sorted(r["verbs"])
             for r in docs["Role"]["rules"] for res in r["resources"]}
    assert rules == {
        ("", "pods"): ["get", "list", "patch", "watch"],
        ("", "events"): ["create"],
        ("batch", "jobs"): ["get"],
    }
    assert docs["RoleBinding"]["roleRef"]["name"] == docs["Role"]["metadata"]["name"]
    assert docs["RoleBinding"]["subjects"][0]["name"] == docs["ServiceAccount"]["metadata"]["name"]
    assert "ClusterRole" not in docs


def init_containers():
    (job,) = load_all("job.yaml")
    yield "job.yaml", job["spec"]["template"]["spec"]
    (pj,) = load_all("pytorchjob.yaml")
    for rtype, spec in pj["spec"]["pytorchReplicaSpecs"].items():
        yield f"pytorchjob.yaml/{rtype}", spec["template"]["spec"]


def test_indexed_job_lets_nicpick_find_the_gatherer():
    (job,) = load_all("job.yaml")
    assert job["spec"]["completionMode"] == "Indexed"
    env = {e["name"]: e.get("value") for e in
           job["spec"]["template"]["spec"]["initContainers"][0]["env"]}
    assert env["NICPICK_EXPECT"] == str(job["spec"]["completions"])


@pytest.mark.parametrize("where,pod", list(init_containers()))
def test_manifests_run_nicpick_with_arguments_it_accepts(where, pod, nicpick_bin, node, tmp_path):
    (init,) = [c for c in pod["initContainers"] if c["name"] == "nicpick"]
    env_names = {e["name"] for e in init["env"]}
    assert {"POD_NAME", "POD_NAMESPACE", "NICPICK_EXPECT"} <= env_names
    out = init["args"][init["args"].index("--out-dir") + 1]
    main = pod["containers"][0]
    assert any(m["mountPath"] == out for m in main["volumeMounts"])
    assert {"name": "NCCL_CONF_FILE", "value": f"{out}/nccl.conf"} in main["env"]
    # Same arguments, pointed at nothing: the parser must accept them and
    # fail later, on the missing API server (exit 5), not on usage (2).
    args = [a if a != out else str(tmp_path) for a in init["args"]]
    r = node.exec([nicpick_bin] + args + [
        "--api-server", "https://127.0.0.1:9", "--ca-file", "/dev/null",
        "--token-file", "/dev/null", "--namespace", "ns", "--pod-name", "p",
        "--timeout", "2", "--expect", "4"], timeout=30)
    assert r.returncode == 5, r.stderr
    assert os.listdir(tmp_path) == []
