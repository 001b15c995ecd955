"""The shipped manifests (deploy/): each validates against real schemas
(Kubernetes' own through kubernetes-models, Kubeflow's CRDs), follows the
least-privilege and Pod Security rules the README promises, is wired the way
its comments say (headless Service, torchrun on index 0, the pod count, the
smoke pattern), and runs nicpick with arguments nicpick's own parser
accepts."""
import copy
import glob
import ipaddress
import json
import os
import re

import pytest
import yaml

import k8sschema
import netns as netns_mod

ROOT = k8sschema.ROOT
DEPLOY = os.path.join(ROOT, "deploy")
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
EXAMPLES = ["job.yaml", "pytorchjob.yaml", "jobset.yaml", "trainjob.yaml",
            "hostnetwork.yaml", "multus.yaml"]


def load_all(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def by_kind(name):
    return {d["kind"]: d for d in load_all(name)}


def pods(name):
    """(where, pod spec, pod count) for every pod template of an example."""
    out = []
    for d in load_all(name):
        for path, tpl in k8sschema.pod_templates(d):
            out.append((f"{name}:{path}", tpl["spec"], d))
    return out


ALL_PODS = [p for n in EXAMPLES for p in pods(n)]
IDS = [w for w, _, _ in ALL_PODS]


def selector(pod):
    """The init container that runs `nicpick select`."""
    (c,) = [c for c in pod["initContainers"] if "select" in (c.get("command", []) + c.get("args", []))]
    return c


def training(pod):
    return pod["containers"][0]


# -- schemas ---------------------------------------------------------------

def test_deploy_holds_every_example():
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(DEPLOY, "*.yaml"))) == \
        sorted(EXAMPLES + ["rbac.yaml", "rbac-status.yaml"])


@pytest.mark.parametrize("name", EXAMPLES + ["rbac.yaml", "rbac-status.yaml"])
def test_manifest_validates_against_the_kubernetes_and_crd_schemas(name):
    docs = load_all(name)
    errors = k8sschema.validate_all(docs)
    assert errors == [[] for _ in docs], errors


BREAKAGES = [
    ("job.yaml", "Job", lambda d: d["spec"].__setitem__("completions", "four"), "completions"),
    ("job.yaml", "Job", lambda d: d["spec"]["template"]["spec"]["containers"][0]
     .__setitem__("imagePullPolicy", "Sometimes"), "imagePullPolicy"),
    ("job.yaml", "Service", lambda d: d["spec"]["ports"][0].__setitem__("port", "torchrun"), "port"),
    ("job.yaml", "Job", lambda d: d["spec"]["template"]["spec"]["initContainers"][0]
     .__setitem__("volumeMount", []), "volumeMount"),
    ("pytorchjob.yaml", "PyTorchJob", lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"]
     .__setitem__("replica", 3), "replica"),
    ("jobset.yaml", "JobSet", lambda d: d["spec"]["replicatedJobs"][0]["template"]["spec"]
     .__setitem__("parallelism", -1) or d["spec"]["replicatedJobs"][0]["template"]["spec"]
     .__setitem__("completionMode", "Indexd"), "completionMode"),
    ("jobset.yaml", "JobSet", lambda d: d["spec"]["network"].__setitem__("enableDNSHostname", True),
     "enableDNSHostname"),
    ("jobset.yaml", "JobSet", lambda d: d["spec"]["failurePolicy"].__setitem__("maxRestarts", "0"),
     "maxRestarts"),
    ("trainjob.yaml", "TrainJob", lambda d: d["spec"].__delitem__("runtimeRef"), "runtimeRef"),
    ("trainjob.yaml", "ClusterTrainingRuntime", lambda d: d["spec"]["mlPolicy"]
     .__setitem__("numNode", 4), "numNode"),
    ("trainjob.yaml", "ClusterTrainingRuntime", lambda d: d["spec"]["template"]["spec"]
     ["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
     .__delitem__("name"), "name"),
    ("multus.yaml", "NetworkAttachmentDefinition", lambda d: d["spec"].__setitem__("config", "{"),
     "config"),
    ("rbac.yaml", "Role", lambda d: d["rules"][0].__setitem__("verbs", "get"), "verbs"),
]


@pytest.mark.parametrize("name,kind,breakit,field", BREAKAGES,
                         ids=[f"{n}:{k}:{f}" for n, k, _, f in BREAKAGES])
def test_validation_fails_on_a_broken_manifest(name, kind, breakit, field):
    docs = load_all(name)
    (i,) = [i for i, d in enumerate(docs) if d["kind"] == kind]
    docs[i] = copy.deepcopy(docs[i])
    breakit(docs[i])
    errors = k8sschema.validate_all(docs)
    assert errors[i], f"{name} {kind} with a broken {field} validated"
    assert any(field in e for e in errors[i]), errors[i]


def test_every_trainer_release_and_the_jobset_crd_are_checked():
    releases = [os.path.basename(d) for d in k8sschema.TRAINER_DIRS]
    assert {"trainer-v2.0.0", "trainer-v2.2.1", "trainer-v2.3.0"} <= set(releases), releases
    for kind, plural in (("TrainJob", "trainjobs"), ("ClusterTrainingRuntime", "clustertrainingruntimes")):
        crds = k8sschema.crds_for(("trainer.kubeflow.org/v1alpha1", kind))
        for d in k8sschema.TRAINER_DIRS:
            assert any(path == os.path.join(d, f"trainer.kubeflow.org_{plural}.yaml") for _, path, _ in crds)
    ((_, path, version),) = k8sschema.crds_for(("jobset.x-k8s.io/v1alpha2", "JobSet"))
    assert os.path.basename(path) == "jobset.x-k8s.io_jobsets.v0.12.0.yaml" and version == "v1alpha2"


def test_runtime_with_numprocpernode_is_rejected_from_trainer_2_2_on():
    """Trainer v2.2 removed mlPolicy.torch.numProcPerNode (`torch` has no
    fields): the runtime leaves torch empty, which every release accepts."""
    docs = load_all("trainjob.yaml")
    (i,) = [i for i, d in enumerate(docs) if d["kind"] == "ClusterTrainingRuntime"]
    assert docs[i]["spec"]["mlPolicy"]["torch"] == {}
    docs[i] = copy.deepcopy(docs[i])
    docs[i]["spec"]["mlPolicy"]["torch"]["numProcPerNode"] = "auto"
    errors = [e for e in k8sschema.validate_all(docs)[i] if "numProcPerNode" in e]
    assert any("(trainer v2.2.1)" in e for e in errors), errors
    assert any("(trainer v2.3.0)" in e for e in errors), errors
    assert not any("(trainer v2.0.0)" in e for e in errors), errors


def test_trainjob_takes_numprocpernode_in_every_trainer_release():
    """What README and trainjob.yaml say: TrainJob.spec.trainer.numProcPerNode
    is in v2.0.0 already (an integer or auto, cpu, gpu) and from v2.2 an
    integer, auto when unset."""
    kinds = {}
    for label, path, version in k8sschema.trainer_crds("trainjobs"):
        trainer = k8sschema.crd_schema(path, version)["properties"]["spec"]["properties"]["trainer"]
        npp = trainer["properties"]["numProcPerNode"]
        kinds[label] = "int-or-string" if npp.get("x-kubernetes-int-or-string") else npp.get("type")
    assert kinds["trainer v2.0.0"] == "int-or-string", kinds
    assert kinds["trainer v2.2.1"] == kinds["trainer v2.3.0"] == "integer", kinds


# -- training-operator's own init container -----------------------------------

# training-operator v1.7-v1.9 (kubeflow/training-operator,
# pkg/controller.v1/pytorch/initcontainer.go at 1417bbc3, the default
# template and setInitContainer): a job with a Master gets this container
# appended to the init containers of every Worker pod, and only of those.
# Later releases add a {{.MaxTries}} bound to the same nslookup loop.
OPERATOR_INIT_TEMPLATE = """
- name: init-pytorch
  image: {{.InitContainerImage}}
  imagePullPolicy: IfNotPresent
  resources:
    limits:
      cpu: 100m
      memory: 20Mi
    requests:
      cpu: 50m
      memory: 10Mi
  command: ['sh', '-c', 'until nslookup {{.MasterAddr}}; do echo waiting for master; sleep 2; done;']
"""


def render(template, job):
    """The operator's Go template, filled in as GetInitContainer does."""
    text = (template.replace("{{.InitContainerImage}}", "alpine:3.10")
            .replace("{{.MasterAddr}}", f"{job['metadata']['name']}-master-0")
            .replace("{{.MaxTries}}", "100"))
    assert "{{" not in text, text
    return yaml.safe_load(text)


def operator_pod(job, rtype, template):
    """The pod spec the operator creates for replica type rtype."""
    pod = copy.deepcopy(job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"])
    if "Master" in job["spec"]["pytorchReplicaSpecs"] and rtype == "Worker":
        pod["initContainers"] = pod.get("initContainers", []) + render(template, job)
    return pod


def documented_init_template():
    """The template that deploy/pytorchjob.yaml's comment gives the operator."""
    with open(os.path.join(DEPLOY, "pytorchjob.yaml")) as f:
        text = f.read()
    m = re.search(r"^# BEGIN init-pytorch template\n(.*?)^# END init-pytorch template$", text, re.M | re.S)
    assert m, "deploy/pytorchjob.yaml lacks the init-pytorch template"
    return "".join(line[2:] + "\n" for line in m.group(1).splitlines())


def test_operator_init_container_breaks_restricted_for_workers_only():
    job = by_kind("pytorchjob.yaml")["PyTorchJob"]
    assert k8sschema.restricted_violations(operator_pod(job, "Master", OPERATOR_INIT_TEMPLATE)) == []
    violations = k8sschema.restricted_violations(operator_pod(job, "Worker", OPERATOR_INIT_TEMPLATE))
    assert violations and all(v.startswith("init-pytorch: ") for v in violations), violations


def test_documented_operator_template_meets_restricted():
    job = by_kind("pytorchjob.yaml")["PyTorchJob"]
    template = documented_init_template()
    assert "{{.MasterAddr}}" in template and "{{.InitContainerImage}}" in template
    (c,) = render(template, job)
    assert c["name"] == "init-pytorch" and f"{job['metadata']['name']}-master-0" in " ".join(c["command"])
    pod = operator_pod(job, "Worker", template)
    assert [c["name"] for c in pod["initContainers"]][-1] == "init-pytorch"
    assert k8sschema.restricted_violations(pod) == []
    # without the pod's own securityContext too: the template stands alone
    pod.pop("securityContext")
    assert [v for v in k8sschema.restricted_violations(pod) if v.startswith("init-pytorch")] == []
    errors = k8sschema._schema_errors(k8sschema.pod_template_schema(), {"spec": pod}, "Worker")
    assert errors == []


def test_readme_and_pytorchjob_say_how_to_run_under_restricted():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    with open(os.path.join(DEPLOY, "pytorchjob.yaml")) as f:
        manifest = f.read()
    for text in (readme, manifest):
        assert "init-pytorch" in text
        assert "--pytorch-init-container-template-file" in text
        assert "baseline" in text
    assert "runs under Pod Security\n`restricted` (except the hostNetwork one)" not in readme


# -- RBAC and least privilege ------------------------------------------------

def test_role_grants_exactly_what_nicpick_uses():
    docs = by_kind("rbac.yaml")
    rules = {(r["apiGroups"][0], res): sorted(r["verbs"])
             for r in docs["Role"]["rules"] for res in r["resources"]}
    assert rules == {
        ("", "pods"): ["get", "list", "patch", "watch"],
        ("", "events"): ["create"],
        ("batch", "jobs"): ["get"],
        ("kubeflow.org", "pytorchjobs"): ["get"],
        ("jobset.x-k8s.io", "jobsets"): ["get"],
        ("trainer.kubeflow.org", "trainjobs"): ["get"],
    }
    assert docs["RoleBinding"]["roleRef"]["name"] == docs["Role"]["metadata"]["name"]
    assert docs["RoleBinding"]["subjects"][0]["name"] == docs["ServiceAccount"]["metadata"]["name"]
    assert docs["ServiceAccount"]["automountServiceAccountToken"] is False
    assert "ClusterRole" not in docs



@pytest.mark.parametrize("where,pod,owner", ALL_PODS, ids=IDS)
def test_only_nicpick_gets_the_api_token(where, pod, owner):
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == "nicpick"
    sa_dir, files = k8sschema.config_c_reads()
    assert files == {"token", "ca.crt", "namespace"}
    (vol,) = [v for v in pod["volumes"] if "projected" in v]
    paths = {}
    for s in vol["projected"]["sources"]:
        if "serviceAccountToken" in s:
            paths[s["serviceAccountToken"]["path"]] = "token"
        for item in (s.get("configMap") or {}).get("items", []):
            paths[item["path"]] = f"configMap {s['configMap']['name']}/{item['key']}"
        for item in (s.get("downwardAPI") or {}).get("items", []):
            paths[item["path"]] = item["fieldRef"]["fieldPath"]
    assert paths == {"token": "token", "ca.crt": "configMap kube-root-ca.crt/ca.crt",
                     "namespace": "metadata.namespace"}
    mounting = [c["name"] for c in pod["initContainers"] + pod["containers"]
                for m in c.get("volumeMounts", []) if m["name"] == vol["name"]]
    assert mounting == [selector(pod)["name"]]
    (m,) = [m for m in selector(pod)["volumeMounts"] if m["name"] == vol["name"]]
    assert (m["mountPath"].rstrip("/"), m.get("readOnly")) == (sa_dir, True)


@pytest.mark.parametrize("where,pod,owner", ALL_PODS, ids=IDS)
def test_pods_meet_pod_security_restricted_except_host_network(where, pod, owner):
    violations = k8sschema.restricted_violations(pod)
    if where.startswith("hostnetwork.yaml"):
        assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
        # hostNetwork (and the host port it implies) and nothing else.
        assert violations and all(v == "hostNetwork" or "hostPort" in v for v in violations), violations
    else:
        assert violations == []
    for c in pod["initContainers"] + pod["containers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True, c["name"]
        assert c["resources"]["requests"] and c["resources"]["limits"], c["name"]


def test_host_network_example_names_the_pod_security_level_it_needs():
    docs = by_kind("hostnetwork.yaml")
    ns = docs["Namespace"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert docs["Job"]["metadata"]["namespace"] == ns["metadata"]["name"]
    # A pod with one failing check fails the level, so a "restricted" test
    # of the same pod without hostNetwork passes: hostNetwork is the only reason.
    pod = copy.deepcopy(docs["Job"]["spec"]["template"]["spec"])
    pod.pop("hostNetwork")
    assert k8sschema.restricted_violations(pod) == []


# -- wiring ------------------------------------------------------------------

def pod_count(owner):
    k = owner["kind"]
    if k == "Job":
        return owner["spec"]["completions"]
    if k == "PyTorchJob":
        return sum(s["replicas"] for s in owner["spec"]["pytorchReplicaSpecs"].values())
    rjobs = (owner["spec"]["replicatedJobs"] if k == "JobSet"
             else owner["spec"]["template"]["spec"]["replicatedJobs"])
    return sum(r.get("replicas", 1) * r["template"]["spec"].get("completions", 1) for r in rjobs)


@pytest.mark.parametrize("where,pod,owner", ALL_PODS, ids=IDS)
def test_nicpick_knows_its_pod_and_the_job_size(where, pod, owner):
    env = {e["name"]: e for e in selector(pod)["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    if owner["kind"] == "ClusterTrainingRuntime":
        # TrainJob.spec.trainer.numNodes wins over the runtime's and becomes
        # the Job's completions, which nicpick reads itself (batch/jobs get).
        assert "NICPICK_EXPECT" not in env
        assert ("batch", "jobs") in {(r["apiGroups"][0], r["resources"][0])
                                     for r in by_kind("rbac.yaml")["Role"]["rules"]}
    else:
        assert env["NICPICK_EXPECT"]["value"] == str(pod_count(owner))


@pytest.mark.parametrize("where,pod,owner", ALL_PODS, ids=IDS)
def test_training_container_reads_the_result_and_gets_the_gpus(where, pod, owner):
    args = selector(pod)["args"]
    out = args[args.index("--out-dir") + 1]
    assert {"name": "nicpick", "emptyDir": {}} in pod["volumes"]
    train = training(pod)
    assert {"name": "nicpick", "mountPath": out, "readOnly": True} in train["volumeMounts"]
    env = {e["name"]: e.get("value") for e in train["env"]}
    # Every manifest sources nccl.env: NCCL_CONF_FILE alone is ignored
    # below NCCL 2.23.4 (src/misc/param.cc, v2.23.4-1).
    assert f". {out}/nccl.env" in " ".join(train["command"])
    assert env.get("NCCL_CONF_FILE") in (None, f"{out}/nccl.conf")
    assert int(train["resources"]["limits"]["nvidia.com/gpu"]) >= 1


def test_indexed_job_torchrun_and_headless_service_meet_at_index_0():
    for name in ("job.yaml", "hostnetwork.yaml", "multus.yaml"):
        docs = by_kind(name)
        job, svc = docs["Job"], docs["Service"]
        pod = job["spec"]["template"]["spec"]
        assert job["spec"]["completionMode"] == "Indexed"
        assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == svc["metadata"]["name"]
        assert svc["spec"]["selector"] == {"batch.kubernetes.io/job-name": job["metadata"]["name"]}
        cmd = training(pod)["command"][-1]
        master = f"--master-addr={job['metadata']['name']}-0.{svc['metadata']['name']}"
        assert master in cmd and "--node-rank=$$JOB_COMPLETION_INDEX" in cmd, name
        port = re.search(r"--master-port=(\d+)", cmd).group(1)
        assert int(port) == svc["spec"]["ports"][0]["port"]


def test_jobset_torchrun_master_is_global_index_0():
    js = by_kind("jobset.yaml")["JobSet"]
    rj = js["spec"]["replicatedJobs"][0]
    assert js["spec"]["network"]["enableDNSHostnames"] is True
    cmd = training(rj["template"]["spec"]["template"]["spec"])["command"][-1]
    assert f"--master-addr={js['metadata']['name']}-{rj['name']}-0-0.{js['metadata']['name']}" in cmd


def test_pytorchjob_runs_the_smoke_step_in_the_training_image():
    pod = by_kind("pytorchjob.yaml")["PyTorchJob"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    install, run = pod["initContainers"]
    assert install["args"] == ["install", "/nicpick"]
    assert install["image"].startswith("nicpick:")
    assert run["image"] == training(pod)["image"]
    assert run["command"] == ["/nicpick/nicpick"]
    assert run["args"][run["args"].index("--smoke") + 1] == "auto"
    assert run["resources"]["limits"]["nvidia.com/gpu"] == training(pod)["resources"]["limits"]["nvidia.com/gpu"]
    # Its command sources nccl.env (every NCCL), and NCCL_CONF_FILE is set too.
    assert training(pod)["command"] == ["/bin/sh", "-c", ". /nicpick/nccl.env && exec torchrun train.py"]


def test_trainjob_takes_nicpick_from_its_runtime():
    docs = by_kind("trainjob.yaml")
    tj, rt = docs["TrainJob"], docs["ClusterTrainingRuntime"]
    assert tj["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org",
                                        "kind": "ClusterTrainingRuntime",
                                        "name": rt["metadata"]["name"]}
    assert not set(tj["spec"]) & {"podSpecOverrides", "podTemplateOverrides", "runtimePatches"}
    (rj,) = rt["spec"]["template"]["spec"]["replicatedJobs"]
    # The torch plugin finds the Job by the label, the container by the name "node".
    assert rj["name"] == "node"
    assert rj["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    assert training(rj["template"]["spec"]["template"]["spec"])["name"] == "node"
    # A TrainJob cannot give an init container an image: the CRD has no such field.
    crd = k8sschema.crd_schema(k8sschema.TRAINJOB_CRD, "v1alpha1")["properties"]["spec"]["properties"]
    init = crd["podSpecOverrides"]["items"]["properties"]["initContainers"]["items"]["properties"]
    assert "image" not in init


def test_multus_example_attaches_the_fast_network():
    docs = by_kind("multus.yaml")
    nad, job = docs["NetworkAttachmentDefinition"], docs["Job"]
    ann = job["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
    assert ann == nad["metadata"]["name"]
    conf = json.loads(nad["spec"]["config"])
    args = selector(job["spec"]["template"]["spec"])["args"]
    assert args[args.index("--cidr") + 1] == conf["ipam"]["range"]


# -- where the documented commands put things --------------------------------

CONTEXT_NS = "(the context's namespace)"  # what `kubectl apply` without -n uses


def apply_lines_of_readme():
    """README's sh blocks that apply deploy/ manifests, each a list of its
    `kubectl apply` command lines."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    blocks = []
    for block in re.findall(r"^```sh\n(.*?)^```$", readme, re.M | re.S):
        lines = [line.split("#")[0] for line in block.splitlines()
                 if line.startswith("kubectl apply") and "deploy/" in line]
        if lines:
            blocks.append(lines)
    return blocks


def apply_lines_of_header(name):
    """The `kubectl apply` lines a manifest's header comment gives."""
    with open(os.path.join(DEPLOY, name)) as f:
        return [re.sub(r"\s\s.*|\(.*", "", m) for m in
                re.findall(r"^#\s+(kubectl apply .*)$", f.read(), re.M)]


def applied(lines):
    """What the command lines put where: (namespace, file, doc) for every
    object, namespace None for a cluster-scoped one."""
    out = []
    for line in lines:
        flag = re.findall(r"(?:^|\s)-n\s+(\S+)", line)
        files = re.findall(r"(?:^|\s)-f\s+deploy/(\S+)", line)
        assert files, line
        for name in files:
            for d in load_all(name):
                if not namespaced(d):
                    out.append((None, name, d))
                    continue
                own = d["metadata"].get("namespace")
                # kubectl refuses a -n that contradicts the object's own namespace
                assert not (own and flag and own != flag[0]), (line, d["kind"])
                out.append((own or (flag[0] if flag else CONTEXT_NS), name, d))
    return out


def namespaced(doc):
    crds = k8sschema.crds_for((doc["apiVersion"], doc["kind"]))
    if crds:
        with open(crds[-1][1]) as f:
            return yaml.safe_load(f)["spec"]["scope"] == "Namespaced"
    return doc["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")


def pods_placed(objs):
    """(namespace, where, pod spec) of every pod the applied objects make: a
    runtime's pods run where the TrainJobs that name it are."""
    out = []
    for ns, name, d in objs:
        if d["kind"] == "ClusterTrainingRuntime":
            where = [tns for tns, _, t in objs if t["kind"] == "TrainJob"
                     and t["spec"]["runtimeRef"]["name"] == d["metadata"]["name"]]
        else:
            where = [ns]
        for tns in where:
            out += [(tns, f"{name}:{path}", tpl["spec"]) for path, tpl in k8sschema.pod_templates(d)]
    return out


def documented_applies():
    return ([(f"README.md block {i}", b) for i, b in enumerate(apply_lines_of_readme())] +
            [(f"deploy/{n}", apply_lines_of_header(n)) for n in EXAMPLES])


@pytest.mark.parametrize("where,lines", documented_applies(), ids=[w for w, _ in documented_applies()])
def test_documented_commands_run_each_job_where_its_service_account_is(where, lines):
    objs = applied(lines)
    pods = pods_placed(objs)
    assert pods or where.startswith("README"), f"{where} applies no pods"
    accounts = {(ns, d["metadata"]["name"]) for ns, _, d in objs if d["kind"] == "ServiceAccount"}
    for ns, pod_where, pod in pods:
        assert (ns, pod["serviceAccountName"]) in accounts, \
            f"{where}: {pod_where} runs in {ns}, where no ServiceAccount {pod['serviceAccountName']} is"


def test_readme_applies_every_job_example_in_its_namespace():
    (main,) = [b for b in apply_lines_of_readme() if any("deploy/job.yaml" in line for line in b)]
    objs = applied(main)
    assert {n for _, n, _ in objs} >= {"rbac.yaml", "job.yaml", "pytorchjob.yaml", "jobset.yaml",
                                      "trainjob.yaml"}
    assert {ns for ns, _, d in objs if d["kind"] != "ClusterTrainingRuntime"} == {"ml"}
    assert [ns for ns, _, d in objs if d["kind"] == "ClusterTrainingRuntime"] == [None]


def made(doc, objs):
    """(kind, name) of what an object and its controller make in its namespace:
    a JobSet its Jobs and, with DNS hostnames (JobSet's default), a headless
    Service named after its subdomain, by default its own name; a TrainJob a
    JobSet of its own name from its runtime's template; a PyTorchJob a
    Service per replica (training-operator: <job>-<type>-<index>)."""
    kind, name = doc["kind"], doc["metadata"]["name"]
    out = [(kind, name)]
    if kind == "JobSet":
        net = doc["spec"].get("network") or {}
        if net.get("enableDNSHostnames", True):
            out.append(("Service", net.get("subdomain") or name))
        out += [("Job", f"{name}-{rj['name']}-{i}")
                for rj in doc["spec"]["replicatedJobs"] for i in range(rj.get("replicas", 1))]
    elif kind == "TrainJob":
        (rt,) = [d for _, _, d in objs if d["kind"] == "ClusterTrainingRuntime"
                 and d["metadata"]["name"] == doc["spec"]["runtimeRef"]["name"]]
        out += made({"kind": "JobSet", "metadata": {"name": name},
                     "spec": rt["spec"]["template"]["spec"]}, objs)
    elif kind == "PyTorchJob":
        out += [("Service", f"{name}-{rtype.lower()}-{i}")
                for rtype, r in doc["spec"]["pytorchReplicaSpecs"].items() for i in range(r["replicas"])]
    return out


def collisions(objs):
    """(namespace, kind, name) made by more than one manifest."""
    owner, out = {}, []
    for ns, name, d in objs:
        for key in [(ns, k, n) for k, n in made(d, objs)]:
            if owner.setdefault(key, name) != name:
                out.append((key, owner[key], name))
    return out


JOB_KINDS = ("Job", "PyTorchJob", "JobSet", "TrainJob")


def every_example_in_one_namespace():
    """Each manifest's own header commands, all in one namespace."""
    return [line for n in EXAMPLES for line in apply_lines_of_header(n)]


@pytest.mark.parametrize("lines", apply_lines_of_readme() + [every_example_in_one_namespace()],
                         ids=[f"README.md block {i}" for i in range(len(apply_lines_of_readme()))] +
                         ["every example by its header"])
def test_examples_applied_together_take_none_of_each_others_objects(lines):
    objs = applied(lines)
    assert collisions(objs) == []
    # Every job is one name to `kubectl nicpick status NAME -n NS` (no --kind).
    jobs = [(ns, d["metadata"]["name"]) for ns, _, d in objs if d["kind"] in JOB_KINDS]
    assert len(jobs) == len(set(jobs)), jobs


def test_collisions_are_seen():
    """job.yaml's Service and a JobSet of the same name, as the JobSet
    controller would find it (it keeps an existing Service of its name)."""
    objs = applied(["kubectl apply -n ml -f deploy/job.yaml -f deploy/jobset.yaml"])
    for _, name, d in objs:
        if d["kind"] == "JobSet":
            d["metadata"]["name"] = "train"
    assert [key for key, _, _ in collisions(objs)] == [("ml", "Service", "train")]


# -- nicpick accepts the arguments -------------------------------------------



@pytest.mark.parametrize("where,pod,owner", ALL_PODS, ids=IDS)
def test_manifests_run_nicpick_with_arguments_it_accepts(where, pod, owner, nicpick_bin, node, tmp_path):
    init = selector(pod)
    args = init["args"]
    assert args[0] == "select" and args[args.index("--peers") + 1] == "k8s"
    out = args[args.index("--out-dir") + 1]
    args = [a if a != out else str(tmp_path) for a in args]
    if "--cidr" in args:  # the node has an address on the attached network (net1)
        net = ipaddress.ip_network(args[args.index("--cidr") + 1])
        node.addr("eth1", f"{next(net.hosts())}/{net.prefixlen}")
    # Same arguments, pointed at nothing: the parser must accept them and
    # fail later, on the missing API server (exit 5), not on usage (2).
    r = node.exec([nicpick_bin] + args + [
        "--api-server", "https://127.0.0.1:9", "--ca-file", "/dev/null",
        "--token-file", "/dev/null", "--namespace", "ns", "--pod-name", "p",
        "--timeout", "2", "--expect", "4"], timeout=30)
    assert r.returncode == 5, r.stderr
    assert os.listdir(tmp_path) == []


def policy_args(args):
    """The policy flags of a `select` command line (what works with --peers none)."""
    out = []
    for name in ("--include", "--exclude", "--cidr", "--family", "--min-speed"):
        if name in args:
            out += [name, args[args.index(name) + 1]]
    return out


def test_multus_pod_gets_net1_over_eth0(nicpick, netns, tmp_path):
    """A pod as Multus makes it: eth0 a veth on the pod network, net1 a
    macvlan on the node's fast NIC.  With the example's flags and without
    them, nicpick writes net1."""
    node, pod, cni = netns.new("node"), netns.new("pod"), netns.new("cni")
    netns_mod.veth(pod, "eth0", cni, "veth0", cidr_a="10.244.1.5/24", cidr_b="10.244.1.1/24")
    netns_mod.veth(node, "ens1f0np0", cni, "fast0")
    node.add_macvlan("net1", "ens1f0np0", up=False)
    node.move("net1", pod)
    pod.addr("net1", "10.10.0.5/16")
    pod.up("net1")
    pod.wait_carrier("net1")
    job = by_kind("multus.yaml")["Job"]
    flags = policy_args(selector(job["spec"]["template"]["spec"])["args"])
    assert flags == ["--cidr", "10.10.0.0/16"]
    for i, extra in enumerate((flags, [])):
        out = tmp_path / f"out{i}"
        out.mkdir()
        r = nicpick.select(out, *extra, ns=pod)
        assert r.returncode == 0, r.stderr
        env = (out / "nccl.env").read_text()
        assert "export NCCL_SOCKET_IFNAME='=net1'" in env, env
