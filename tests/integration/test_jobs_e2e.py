"""Every kind of training job, end to end: two nicpick processes, each in its
own "node" namespace, agree through the test API server on pods labelled
exactly as each controller labels them (the label sets and the files they
come from are in tests/unit/test_jobs.c).  Pods of the job that never run
nicpick (a TrainJob's initializers, an MPI launcher, a JobSet's driver) are
there too, as they are in a cluster, and nobody waits for them.

Also: --expect against the owning job's spec, the pod settings that would
override the outputs (--strict-env), and --log-format json."""
import json
import re

import pytest

import cluster as C

NS = C.NAMESPACE
COMMON = ("--expect", "2", "--log-interval", "2", "--timeout", "40")


class KindPod(C.Pod):
    """A pod of the job with the labels, owner and main-container env its
    controller gives it."""

    def __init__(self, c, index, name, labels, env=(), owner=None, containers=None):
        super().__init__(c, index, c.nodes[index], f"tok-{C.JOB}-{index}")
        self.name, self.labels, self.env, self.owner = name, labels, list(env), owner
        self.containers = containers

    def object(self):
        o = super().object()
        o["metadata"]["labels"] = dict(self.labels)
        if self.owner:
            o["metadata"]["ownerReferences"] = [dict(self.owner, controller=True, uid="u-1")]
        o["spec"]["initContainers"] = [{"name": "nicpick", "image": "nicpick:0.1.0",
                                        "volumeMounts": [{"name": "nicpick",
                                                          "mountPath": "/nicpick"}]}]
        o["spec"]["containers"] = self.containers or [
            {"name": "train", "image": "pytorch", "env": self.env,
             "volumeMounts": [{"name": "nicpick", "mountPath": "/nicpick"}]}]
        o["spec"]["volumes"] = [{"name": "nicpick", "emptyDir": {}}]
        return o


@pytest.fixture
def make_cluster(clusters):
    return lambda **kw: clusters(n_nodes=2, **kw)


def seed(c, pods, bystanders=(), objects=()):
    """Create the pods that run nicpick, the job's pods that do not
    (labels only, never started), and owner objects (Job, PyTorchJob...)."""
    for p in pods:
        p.uid = c.server.create_pod(NS, p.object())["metadata"]["uid"]
        c.pods.append(p)
    for name, labels in bystanders:
        c.server.create_pod(NS, {"metadata": {"name": name, "labels": labels},
                                 "status": {"phase": "Running"}})
    if objects:
        c.server.seed({"objects": [dict(o, metadata=dict(o["metadata"], namespace=NS))
                                   for o in objects]})
    return pods


def diag(c):
    reqs = c.server.requests() if c.server else []
    return c.logs() + "\n--- last API requests\n" + "\n".join(
        f"{r['method']} {r['path']}?{r['query']} -> {r['status']}" for r in reqs[-40:])


def seed_train_job(c):
    """Two pods of the batch Job train, whose spec says 2 completions."""
    seed(c, [KindPod(c, i, f"train-{i}-ab", batch_labels(i)) for i in range(2)],
         objects=[{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
                   "spec": {"completions": 2,
                            "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}}}])


def agree(c, *extra):
    c.start_all(*COMMON, *extra)
    c.wait_all(timeout=60)
    assert [p.rc for p in c.pods] == [0, 0], diag(c)
    for p in c.pods:
        dec = C.decision_of(p)
        assert dec["agreement"]["pods"] == 2, (p.name, dec["agreement"])
        assert dec["choice"]["interface"] == p.node.fast_if, (p.name, dec["choice"])
    return {p.name: C.decision_of(p)["agreement"]["gatherer"] for p in c.pods}


# --- the kinds ---------------------------------------------------------------

def batch_labels(i, job="train"):
    return {"batch.kubernetes.io/job-name": job, "job-name": job,
            "batch.kubernetes.io/controller-uid": "c-1", "controller-uid": "c-1",
            "batch.kubernetes.io/job-completion-index": str(i)}


def pt_labels(rtype, i, master_role=False):
    lab = {"training.kubeflow.org/operator-name": "pytorchjob-controller",
           "training.kubeflow.org/job-name": "pt",
           "training.kubeflow.org/replica-type": rtype,
           "training.kubeflow.org/replica-index": str(i)}
    if master_role:
        lab["training.kubeflow.org/job-role"] = "master"
    return lab


MASTER_ENV = [{"name": "MASTER_ADDR", "value": "pt-master-0"},
              {"name": "MASTER_PORT", "value": "23456"},
              {"name": "WORLD_SIZE", "value": "2"}]
ELASTIC_ENV = [{"name": "PET_RDZV_ENDPOINT", "value": "pt-worker-0:23456"},
               {"name": "PET_NNODES", "value": "1:2"}]
PT_OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pt"}


def js_labels(js, rjob, reps, jidx, gidx, cidx):
    job = f"{js}-{rjob}-{jidx}"
    return {"jobset.sigs.k8s.io/jobset-name": js,
            "jobset.sigs.k8s.io/replicatedjob-name": rjob,
            "jobset.sigs.k8s.io/restart-attempt": "0",
            "jobset.sigs.k8s.io/replicatedjob-replicas": str(reps),
            "jobset.sigs.k8s.io/job-index": str(jidx),
            "jobset.sigs.k8s.io/job-global-index": str(gidx),
            "jobset.sigs.k8s.io/job-key": "k" + job,
            "batch.kubernetes.io/job-name": job, "job-name": job,
            "batch.kubernetes.io/job-completion-index": str(cidx)}


def js_pod(c, i, js, rjob, reps, jidx, gidx, cidx):
    return KindPod(c, i, f"{js}-{rjob}-{jidx}-{cidx}-x{i}", js_labels(js, rjob, reps, jidx, gidx, cidx),
                   owner={"apiVersion": "batch/v1", "kind": "Job", "name": f"{js}-{rjob}-{jidx}"})


def test_indexed_job(make_cluster):
    c = make_cluster()
    seed(c, [KindPod(c, i, f"train-{i}-ab", batch_labels(i),
                     owner={"apiVersion": "batch/v1", "kind": "Job", "name": "train"})
             for i in range(2)])
    assert agree(c) == {"train-0-ab": True, "train-1-ab": False}


def test_pytorchjob_with_master(make_cluster):
    c = make_cluster()
    seed(c, [KindPod(c, 0, "pt-worker-0", pt_labels("worker", 0), MASTER_ENV, PT_OWNER),
             KindPod(c, 1, "pt-master-0", pt_labels("master", 0, True), MASTER_ENV, PT_OWNER)])
    assert agree(c) == {"pt-worker-0": False, "pt-master-0": True}


def test_elastic_pytorchjob_of_workers_only_operator_v1_7(make_cluster):
    """v1.7 marks no pod with job-role; worker 0 gathers."""
    c = make_cluster()
    seed(c, [KindPod(c, 0, "pt-worker-1", pt_labels("worker", 1), ELASTIC_ENV, PT_OWNER),
             KindPod(c, 1, "pt-worker-0", pt_labels("worker", 0), ELASTIC_ENV, PT_OWNER)])
    assert agree(c) == {"pt-worker-1": False, "pt-worker-0": True}


def test_elastic_pytorchjob_of_workers_only_operator_v1_8(make_cluster):
    """v1.8+ marks worker 0 with job-role=master."""
    c = make_cluster()
    seed(c, [KindPod(c, 0, "pt-worker-0", pt_labels("worker", 0, True), ELASTIC_ENV, PT_OWNER),
             KindPod(c, 1, "pt-worker-1", pt_labels("worker", 1), ELASTIC_ENV, PT_OWNER)])
    assert agree(c) == {"pt-worker-0": True, "pt-worker-1": False}


def test_jobset_one_replicated_job(make_cluster):
    c = make_cluster()
    seed(c, [js_pod(c, 0, "js", "workers", 1, 0, 0, 1), js_pod(c, 1, "js", "workers", 1, 0, 0, 0)])
    assert agree(c) == {"js-workers-0-1-x0": False, "js-workers-0-0-x1": True}


def test_jobset_several_replicated_jobs_the_driver_never_runs_nicpick(make_cluster):
    c = make_cluster()
    seed(c, [js_pod(c, 0, "js", "workers", 2, 1, 2, 0), js_pod(c, 1, "js", "workers", 2, 0, 1, 0)],
         bystanders=[("js-driver-0-0-aa", js_labels("js", "driver", 1, 0, 0, 0))])
    assert agree(c) == {"js-workers-1-0-x0": False, "js-workers-0-0-x1": True}


def trainjob_objects(name, num_nodes, rjobs):
    """The JobSet the trainer builds (pkg/runtime/framework/plugins/jobset)
    and its TrainJob."""
    return [
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
         "metadata": {"name": name},
         "spec": {"runtimeRef": {"name": "torchtune-llama3.2-1b"},
                  "trainer": {"numNodes": num_nodes}}},
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
         "metadata": {"name": name, "ownerReferences": [
             {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": name,
              "uid": "t-1", "controller": True}]},
         "spec": {"replicatedJobs": [
             {"name": r, "replicas": 1,
              "template": {"spec": {"parallelism": num_nodes if r == "node" else 1,
                                    "completions": num_nodes if r == "node" else 1}}}
             for r in rjobs]}},
    ]


def test_trainjob_with_initializers_before_node(make_cluster):
    """torchtune runtimes: dataset-initializer and model-initializer come
    first, so job-global-index 0 is an initializer that never runs nicpick."""
    c = make_cluster()
    rjobs = ["dataset-initializer", "model-initializer", "node"]
    seed(c, [js_pod(c, 0, "ft", "node", 1, 0, 2, 1), js_pod(c, 1, "ft", "node", 1, 0, 2, 0)],
         bystanders=[("ft-dataset-initializer-0-0-aa", js_labels("ft", rjobs[0], 1, 0, 0, 0)),
                     ("ft-model-initializer-0-0-bb", js_labels("ft", rjobs[1], 1, 0, 1, 0))],
         objects=trainjob_objects("ft", 2, rjobs))
    assert agree(c) == {"ft-node-0-1-x0": False, "ft-node-0-0-x1": True}
    # The gatherer read the spec, which agrees with --expect 2.
    assert "--expect 2 agrees with TrainJob ft (spec.trainer.numNodes)" in c.pods[1].stderr_text, \
        c.pods[1].stderr_text


def test_trainjob_with_launcher_before_node(make_cluster):
    """The MPI and DeepSpeed runtimes of v2.0-v2.2: launcher, then node."""
    c = make_cluster()
    seed(c, [js_pod(c, 0, "ds", "node", 1, 0, 1, 1), js_pod(c, 1, "ds", "node", 1, 0, 1, 0)],
         bystanders=[("ds-launcher-0-0-aa", js_labels("ds", "launcher", 1, 0, 0, 0))])
    assert agree(c) == {"ds-node-0-1-x0": False, "ds-node-0-0-x1": True}


# --- --expect against the job's spec -----------------------------------------

def expect_refused(c, expect, *want):
    c.start_all("--expect", str(expect), "--log-interval", "2", "--timeout", "40")
    c.wait_all(timeout=60)
    assert [p.rc for p in c.pods] == [2, 2], diag(c)
    for p in c.pods:
        assert p.elapsed < 10, (p.name, p.elapsed)   # at start, not at the deadline
        for w in want:
            assert w in p.stderr_text, (p.name, p.stderr_text)


def test_expect_contradicting_the_jobs_completions_fails_at_start(make_cluster):
    c = make_cluster()
    seed(c, [KindPod(c, i, f"train-{i}-ab", batch_labels(i)) for i in range(2)],
         objects=[{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
                   "spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed",
                            "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}}}])
    expect_refused(c, 3, "NICPICK_EXPECT", "is 3 but Job train (spec.completions) has 2 pods")
    # Every pod said why on its own object.
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelectionFailed"]
    assert sorted(e["involvedObject"]["name"] for e in evs) == sorted(p.name for p in c.pods)


def test_expect_contradicting_the_pytorchjob_replicas_fails_at_start(make_cluster):
    c = make_cluster()
    seed(c, [KindPod(c, 0, "pt-master-0", pt_labels("master", 0, True), MASTER_ENV, PT_OWNER),
             KindPod(c, 1, "pt-worker-0", pt_labels("worker", 0), MASTER_ENV, PT_OWNER)],
         objects=[{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
                   "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1},
                                                    "Worker": {"replicas": 1}}}}])
    expect_refused(c, 4, "NICPICK_EXPECT", "is 4 but PyTorchJob pt (Master 1 + Worker 1) has 2 pods")


def test_expect_contradicting_the_jobset_fails_at_start(make_cluster):
    c = make_cluster()
    seed(c, [js_pod(c, 0, "ft", "node", 1, 0, 1, 1), js_pod(c, 1, "ft", "node", 1, 0, 1, 0)],
         objects=trainjob_objects("ft", 2, ["launcher", "node"]))
    expect_refused(c, 3, "is 3 but JobSet ft (replicated job node: 1 replicas x 2 pods) has 2 pods")


def test_a_role_that_cannot_read_jobs_only_skips_the_check(make_cluster):
    c = make_cluster()
    seed_train_job(c)
    c.server.set_rbac(deny=[{"verbs": ["get"], "apiGroups": ["batch"], "resources": ["jobs"]}])
    c.server.requests(clear=True)
    agree(c)
    gatherer, follower = c.pods
    assert "--expect not checked against Job train: the Role does not allow reading it" \
        in gatherer.stderr_text, gatherer.stderr_text
    # The job's spec is read once, by the gatherer: a follower never asks.
    assert "--expect" not in follower.stderr_text, follower.stderr_text
    reads = [(r["token"], r["status"]) for r in c.server.requests() if "/jobs/" in r["path"]]
    assert reads == [(gatherer.token, 403)], reads


def test_only_the_gatherer_reads_the_jobs_spec(make_cluster):
    """--expect is checked against the owning job once per job: a follower
    makes no request for the Job, whatever the size of the job."""
    c = make_cluster()
    seed_train_job(c)
    c.server.requests(clear=True)
    agree(c)
    gatherer, follower = c.pods
    assert "--expect 2 agrees with Job train (spec.completions)" in gatherer.stderr_text, \
        gatherer.stderr_text
    reads = [r["token"] for r in c.server.requests() if "/jobs/" in r["path"]]
    assert reads == [gatherer.token], reads


# --- settings in the pod that override the outputs ----------------------------

def overriding_pods(c):
    env = [{"name": "NCCL_SOCKET_IFNAME", "value": ""}]
    return seed(c, [KindPod(c, i, f"train-{i}-ab", batch_labels(i), env) for i in range(2)])


def test_empty_socket_ifname_in_the_training_container_is_a_warning(make_cluster):
    c = make_cluster()
    overriding_pods(c)
    agree(c)
    for p in c.pods:
        assert re.search(r"warning: \[[0-9.]+s\] container train sets NCCL_SOCKET_IFNAME='': "
                         r"NCCL ignores a value of one character or less", p.stderr_text), p.stderr_text
        w = C.decision_of(p)["warnings"]
        assert [(x["container"], x["variable"], x["value"]) for x in w] == \
            [("train", "NCCL_SOCKET_IFNAME", "")], w
        assert w[0]["nicpick"] == "=" + p.node.fast_if
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelected"]
    assert len(evs) == 2 and all("warning: 1 setting(s) override this" in e["message"] for e in evs), evs


def test_strict_env_turns_the_warning_into_exit_2_with_nothing_written(make_cluster):
    c = make_cluster()
    overriding_pods(c)
    c.start_all(*COMMON, "--strict-env")
    c.wait_all(timeout=60)
    assert [p.rc for p in c.pods] == [2, 2], diag(c)
    for p in c.pods:
        assert "--strict-env" in p.stderr_text and "NCCL_SOCKET_IFNAME=''" in p.stderr_text
        assert list(p.out_dir.iterdir()) == [], list(p.out_dir.iterdir())
    evs = [e for e in c.events() if e.get("reason") == "NetworkSelectionFailed"]
    assert sorted(e["involvedObject"]["name"] for e in evs) == sorted(p.name for p in c.pods)


# --- --log-format json ----------------------------------------------------------

RFC3339_MS_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def test_log_format_json_every_line_is_one_object(make_cluster):
    c = make_cluster()
    overriding_pods(c)   # a warning line too
    agree(c, "--log-format", "json")
    for p in c.pods:
        lines = p.stderr_text.splitlines()
        assert len(lines) >= 4, p.stderr_text
        recs = [json.loads(line) for line in lines]   # the real parser, line by line
        for r in recs:
            assert isinstance(r, dict)
            assert list(r) == ["time", "level", "pod", "phase", "message", "fields"], r
            assert RFC3339_MS_UTC.match(r["time"]), r
            assert r["level"] in ("info", "warning", "error")
            assert r["pod"] == p.name
            assert isinstance(r["fields"], dict)
        phases = {r["phase"] for r in recs}
        assert {"agree", "envcheck", "outputs"} <= phases, phases
        last = recs[-1]
        assert last["phase"] == "outputs" and last["fields"]["interface"] == p.node.fast_if


def test_log_format_json_errors_too(make_cluster):
    c = make_cluster()
    seed(c, [KindPod(c, i, f"train-{i}-ab", batch_labels(i)) for i in range(2)])
    c.start_all("--expect", "2", "--timeout", "3", "--log-format", "json", pods=c.pods[1:])
    c.wait_all(pods=c.pods[1:], timeout=30)
    p = c.pods[1]
    assert p.rc == 5, p.stderr_text
    recs = [json.loads(line) for line in p.stderr_text.splitlines()]
    assert recs[-1]["level"] == "error" and recs[-1]["fields"]["exit_code"] == "5", recs[-1]


def test_a_selector_given_by_the_user_skips_the_spec_check(make_cluster):
    """--selector defines the job: three pods may be meant even if their
    Job says two, so nicpick waits (and here times out) instead of refusing."""
    c = make_cluster()
    seed_train_job(c)
    c.start_all("--expect", "3", "--selector", "batch.kubernetes.io/job-name=train",
                "--log-interval", "2", "--timeout", "4")
    c.wait_all(timeout=30)
    assert [p.rc for p in c.pods] == [5, 5], diag(c)
    assert "NICPICK_EXPECT (or --expect) is 3" not in c.logs()
