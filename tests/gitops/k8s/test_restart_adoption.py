"""A controller killed in the middle of an Apply in Kubernetes mode, and the one after it.

The API server and kubelet are ``harness.kube_api.FakeKubernetes`` (no cluster can run
here; see that module). The first controller is the real ``seshat reconcile`` in a process
of its own, killed with SIGKILL once its Apply Job runs; the Job's runner (the real
``seshat-runner``, a process of the kubelet's) outlives it, held on SQLite's write lock by a
connection this test owns until the test lets it go. The next controller must follow that
Job to its end, record its result once, and start no second operation meanwhile.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.kube_api import FakeKubernetes
from harness.reconcile_world import World, tables
from harness.registry import RegistryServer

from gitops.kubernetes.api import KubeApi
from gitops.kubernetes.jobs import (
    NONCE_ANNOTATION,
    OPERATION_ID_LABEL,
    PLAN_ANNOTATION,
    RESOURCE_LABEL,
    JobSettings,
    KubernetesExecutor,
    job_name,
)
from gitops.kubernetes.leases import KubernetesLeases, lease_name
from gitops.reconcile.identities import coordination_digest
from gitops.reconcile.passes import PassReport, run_pass
from gitops.resources.database import Target
from runner.deadline import STOP_MARGIN
from runner.protocol.frame import encode_frame
from runner.protocol.messages import RegistrySettings

SCHEMA = """\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseSchema
metadata: {{name: orders, namespace: shop}}
spec:
  target:
    engine: sqlite
    url: {{secretKeyRef: {{name: orders-db, key: url}}}}
    coordinationKey: orders
  artifact: {{ref: "{ref}", verification: {{policy: ci}}}}
  suspend: {suspend}
  policy:
    apply: Always
    lockTimeout: 5m
    timeouts: {{plan: 3m, apply: 2h}}
"""


MIGRATION = """\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseMigration
metadata: {{name: ledger, namespace: shop}}
spec:
  target:
    engine: sqlite
    url: {{secretKeyRef: {{name: ledger-db, key: url}}}}
    coordinationKey: ledger
  artifact: {{ref: "{ref}", verification: {{policy: ci}}}}
  policy: {{apply: Always}}
"""


def _declare(world: World, registry: RegistryServer, *, suspend: bool = False) -> None:
    ref = f"oci://{registry.address}/shop/{world.tmp.name.lower()}-schema:v1"
    sql = b"CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n"
    pinned = world.publish(
        ref, {"schema.sql": sql}, "schema", registry=("--plain-http", registry.address)
    )
    text = SCHEMA.format(ref=pinned, suspend=str(suspend).lower())
    world.remote.write_file("databases/orders.yaml", text)
    world.remote.commit_all("declare orders" if not suspend else "suspend orders")


def _mounts(tmp_path: Path) -> Path:
    return tmp_path / "pods"


def _first_controller_killed_while_applying(
    world: World,
    kube: FakeKubernetes,
    tmp_path: Path,
    registry: RegistryServer,
    name: str = "orders",
    operation: str = "apply",
) -> sqlite3.Connection:
    """``seshat reconcile`` in Kubernetes mode, SIGKILLed once its Apply Job's runner runs
    (held on the write lock this returns: the caller lets it go with ROLLBACK)."""
    database = world.database(name)
    kube.secrets[("shop", f"{name}-db")] = {"url": f"sqlite:///{database}"}
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    controller = world.controller(
        "--executor",
        "kubernetes",
        "--runner-image",
        "seshat:test",
        "--kubeconfig",
        str(kube.kubeconfig(tmp_path / "kubeconfig-first")),
        "--registry-plain-http",
        registry.address,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ends = time.monotonic() + 120
        while not any(_operation(j) == operation for j in kube.list("jobs", "shop")):
            assert controller.poll() is None, "the controller ended before its Apply"
            assert time.monotonic() < ends, "no Apply Job"
            time.sleep(0.1)
        time.sleep(1.0)  # the runner is waiting on the write lock
    finally:
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()
    assert "Applying" in world.phases(name)
    return holder


def _operation(job: dict[str, object]) -> str:
    labels = job["metadata"]["labels"]  # type: ignore[index]
    return str(labels["seshat.dev/operation"])


def _next_controller(
    world: World,
    api: KubeApi,
    tmp_path: Path,
    registry: RegistryServer,
    warnings: list[str] | None = None,
) -> tuple[threading.Thread, list[PassReport]]:
    reports: list[PassReport] = []

    def run() -> None:
        executor = KubernetesExecutor(
            api,
            JobSettings(image="seshat:test", mount_root=str(_mounts(tmp_path)), poll=0.05),
            warn=(warnings if warnings is not None else []).append,
        )
        reports.append(
            run_pass(
                world.remote.remote_url,
                world.work,  # the same controller, restarted: its holder identity is the same
                executor=executor,
                leases=KubernetesLeases(api, "seshat-system"),
                registry=RegistrySettings(plain_http=[registry.address]),
            )
        )

    thread = threading.Thread(target=run)
    thread.start()
    return thread, reports


def _finished_records(world: World, op_id: str) -> list[str]:
    return [
        line
        for message in world.status_messages()
        for line in message.splitlines()
        if line.startswith("Seshat-Record: ") and '"finished"' in line and op_id in line
    ]


def _lease_holder(kube: FakeKubernetes, name: str = "orders") -> str | None:
    """Who holds the realm lease of ``shop/<name>`` now (None: nobody)."""
    target = Target.model_validate(
        {
            "engine": "sqlite",
            "url": {"secretKeyRef": {"name": f"{name}-db", "key": "url"}},
            "coordinationKey": name,
        }
    )
    found = kube.get("leases", "seshat-system", lease_name(coordination_digest("shop", target)))
    assert found is not None
    holder = (found.get("spec") or {}).get("holderIdentity")
    return str(holder) if holder else None


def _adopt_while_it_runs(
    world: World, kube: FakeKubernetes, api: KubeApi, tmp_path: Path, registry: RegistryServer
) -> tuple[PassReport, str, int]:
    """Kill the first controller mid-Apply, start the next one, check it follows the live
    Job (same Jobs, lease held), then let the Apply finish. The next pass's report, the
    Apply's operation id and how many Jobs the first controller created."""
    holder = _first_controller_killed_while_applying(world, kube, tmp_path, registry)
    try:
        created = len(kube.jobs_created)
        (job,) = [j for j in kube.list("jobs", "shop") if _operation(j) == "apply"]
        op_id = job["metadata"]["labels"][OPERATION_ID_LABEL]
        thread, reports = _next_controller(world, api, tmp_path, registry)
        time.sleep(3.0)  # the next controller is following the live Job by now
        assert thread.is_alive()
        assert len(kube.jobs_created) == created, "a second operation started meanwhile"
        assert _lease_holder(kube), "the Job is followed without the lease"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    thread.join(180)
    assert not thread.is_alive()
    (report,) = reports
    return report, op_id, created


def test_a_restart_mid_apply_reattaches_and_records_the_result_once(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
    oci_registry: RegistryServer,
) -> None:
    _declare(world, oci_registry)

    report, op_id, created = _adopt_while_it_runs(world, kube, api, tmp_path, oci_registry)

    assert report.phases == {"shop/orders": "InSync"}
    assert "items" in tables(world.tmp / "orders.db")
    # The Apply ran once: the next controller started no Apply of its own, only the fresh
    # Resolve, Verify and Observe/Plan that establish convergence.
    operations = [_operation(j) for j in kube.jobs_created]
    assert operations.count("apply") == 1
    assert operations[created:] == ["resolve", "verify", "drift-plan-plan"]
    # Its result is recorded once, as what the runner reported.
    assert len(_finished_records(world, op_id)) == 1
    assert '"outcome":"Applied"' in _finished_records(world, op_id)[0]
    last = world.status("orders")["status"]["lastApplied"]  # type: ignore[index]
    assert last["operationId"] == op_id and last["outcome"] == "Applied"
    assert kube.list("jobs", "shop") == [] and kube.list("configmaps", "shop") == []
    assert _lease_holder(kube) is None

    # A further pass finds nothing to adopt and records nothing more about that run.
    again = run_pass(
        world.remote.remote_url,
        world.work,
        executor=KubernetesExecutor(
            api, JobSettings(image="seshat:test", mount_root=str(_mounts(tmp_path)), poll=0.05)
        ),
        leases=KubernetesLeases(api, "seshat-system"),
        registry=RegistrySettings(plain_http=[oci_registry.address]),
    )
    assert again.phases == {"shop/orders": "InSync"}
    assert len(_finished_records(world, op_id)) == 1


def test_suspension_during_a_live_apply_follows_it_then_releases_the_lease(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
    oci_registry: RegistryServer,
) -> None:
    _declare(world, oci_registry)
    holder = _first_controller_killed_while_applying(world, kube, tmp_path, oci_registry)
    try:
        (job,) = [j for j in kube.list("jobs", "shop") if _operation(j) == "apply"]
        op_id = job["metadata"]["labels"][OPERATION_ID_LABEL]
        created = len(kube.jobs_created)
        _declare(world, oci_registry, suspend=True)  # suspended while the Apply runs
        thread, reports = _next_controller(world, api, tmp_path, oci_registry)
        time.sleep(3.0)
        assert thread.is_alive()
        # Stage one: the live Apply is followed, the realm lease held meanwhile.
        assert _lease_holder(kube) is not None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    thread.join(180)
    (report,) = reports

    # Stage two: its result recorded, the lease released, nothing new started.
    assert report.phases == {"shop/orders": "Suspended"}
    assert len(kube.jobs_created) == created
    assert len(_finished_records(world, op_id)) == 1
    status = world.status("orders")["status"]
    assert status["lastApplied"]["outcome"] == "Applied"  # type: ignore[index]
    ready = status["conditions"][0]  # type: ignore[index]
    assert f"run {op_id}" in ready["message"] and "lease was released" in ready["message"]
    assert _lease_holder(kube) is None
    assert kube.list("jobs", "shop") == []


def test_the_policy_timeouts_reach_the_jobs_and_the_runner_input(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
    oci_registry: RegistryServer,
) -> None:
    _declare(world, oci_registry)
    database = world.database("orders")
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    thread, reports = _next_controller(world, api, tmp_path, oci_registry)
    thread.join(180)
    assert reports[0].phases == {"shop/orders": "InSync"}

    inputs = {
        _operation(j): json.loads(
            base64.b64decode(
                next(
                    c
                    for c in kube.configmaps_created
                    if c["metadata"]["name"] == j["metadata"]["name"]
                )["binaryData"]["f0"]
            )
        )
        for j in kube.jobs_created
    }
    deadlines = {_operation(j): j["spec"]["activeDeadlineSeconds"] for j in kube.jobs_created}
    # apply: 2h, plan: 3m (every read-only operation), each plus the stop margin.
    assert inputs["apply"]["deadline_seconds"] == 7200
    assert deadlines["apply"] == 7200 + STOP_MARGIN
    assert inputs["resolve"]["deadline_seconds"] == 180
    assert deadlines["resolve"] == 180 + STOP_MARGIN
    assert [op["deadline_seconds"] for op in inputs["drift-plan-plan"]["batch"]] == [180] * 3
    assert deadlines["drift-plan-plan"] == 3 * 180 + STOP_MARGIN
    # The Apply's Job names its resource and its operation, for a restarted controller.
    apply = next(j for j in kube.jobs_created if _operation(j) == "apply")
    labels = apply["metadata"]["labels"]
    assert labels[OPERATION_ID_LABEL] == inputs["apply"]["id"]
    assert labels[RESOURCE_LABEL] == world.status("orders")["resource"]["uid"]  # type: ignore[index]


def test_a_restart_mid_migration_reattaches_and_settles_the_run_by_its_result(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
    oci_registry: RegistryServer,
) -> None:
    ref = f"oci://{oci_registry.address}/shop/{world.tmp.name.lower()}-migrations:v1"
    files = {
        "1_items.sql": b"CREATE TABLE items (id INTEGER PRIMARY KEY);\n",
        "2_tags.sql": b"CREATE TABLE tags (id INTEGER PRIMARY KEY);\n",
    }
    pinned = world.publish(
        ref, files, "migrations", registry=("--plain-http", oci_registry.address)
    )
    world.remote.write_file("databases/ledger.yaml", MIGRATION.format(ref=pinned))
    world.remote.commit_all("declare ledger")
    holder = _first_controller_killed_while_applying(
        world, kube, tmp_path, oci_registry, "ledger", "migrate"
    )
    try:
        (job,) = [j for j in kube.list("jobs", "shop") if _operation(j) == "migrate"]
        op_id = job["metadata"]["labels"][OPERATION_ID_LABEL]
        created = len(kube.jobs_created)
        thread, reports = _next_controller(world, api, tmp_path, oci_registry)
        time.sleep(3.0)
        assert thread.is_alive() and len(kube.jobs_created) == created
        assert _lease_holder(kube, "ledger") is not None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    thread.join(180)
    (report,) = reports

    # Without adoption the run would read Unknown and block; its result says Applied, and
    # the history read afterwards confirms it.
    assert report.phases == {"shop/ledger": "InSync"}, world.status("ledger")
    assert tables(world.tmp / "ledger.db") == ["items", "seshat_schema_migrations", "tags"]
    operations = [_operation(j) for j in kube.jobs_created]
    assert operations.count("migrate") == 1
    assert operations[created:] == ["resolve", "verify", "history"]
    (finished,) = _finished_records(world, op_id)
    assert '"outcome":"Applied"' in finished
    status = world.status("ledger")["status"]
    assert isinstance(status, dict) and status.get("unresolvedRun") is None
    assert status["lastApplied"]["appliedVersions"] == ["1", "2"]
    assert _lease_holder(kube, "ledger") is None


def _forged_frame(op_id: str) -> str:
    """What an impostor's container prints: the runner's frame for ``op_id``, saying the
    Apply ran every statement and converged."""
    return encode_frame(
        {
            "protocol": 1,
            "operation": "apply",
            "id": op_id,
            "result": {
                "operation": "apply",
                "apply": {"plan": "forged", "ran": [0], "converged": True},
            },
        }
    )


def _rendered_cr(world: World) -> dict[str, object]:
    """The DatabaseSchema as ``seshat render`` gives it, to apply to the cluster."""
    from ruamel.yaml import YAML

    done = world.seshat("render", world.remote.work_dir)
    assert done.returncode == 0, done.stderr
    found = next(d for d in YAML(typ="safe").load_all(done.stdout) if d["kind"] == "DatabaseSchema")
    assert isinstance(found, dict)
    return found


FORGED_JOB, FORGED_POD = "seshat-a-forged", "seshat-a-forged-pod"


def test_a_forged_job_and_pod_made_before_the_real_ones_are_reported_not_adopted(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
    oci_registry: RegistryServer,
) -> None:
    """An attacker who may create objects in the namespace reads the Apply's operation id,
    the resource's uid and the plan id from the status branch (they are public there) and,
    the moment the controller creates the Apply's Job, creates first a Job labelled with
    that operation id, whose container prints the runner's frame for a converged Apply, and
    a pod labelled as the real Job's (``job-name``) whose log says the same. Both list before
    the real ones. A restarted controller must follow the real Apply to its own result,
    report both impostors (an Event, a log line) and leave them in place."""
    _declare(world, oci_registry)
    kube.put_custom("databaseschemas", _rendered_cr(world))
    cr = kube.get("databaseschemas", "shop", "orders")
    assert cr is not None
    public: dict[str, str] = {}

    def attacker(resource: str, namespace: str, body: dict[str, object]) -> None:
        if resource != "jobs" or public or _operation(body) != "apply":
            return
        status = world.status("orders")  # the dispatch marker is pushed before the Job
        run = status["status"]["lastApplied"]  # type: ignore[index]
        op_id, plan_id = run["operationId"], run["planId"]
        uid = status["resource"]["uid"]  # type: ignore[index]
        public.update(op_id=op_id, plan_id=plan_id, uid=uid)
        labels = {
            "app.kubernetes.io/managed-by": "seshat",
            "seshat.dev/operation": "apply",
            OPERATION_ID_LABEL: op_id,
            RESOURCE_LABEL: uid,
        }
        annotations = {PLAN_ANNOTATION: plan_id, RESOURCE_LABEL: uid, NONCE_ANNOTATION: "0" * 32}
        container = {
            "name": "runner",
            "image": "seshat:test",
            "command": [sys.executable, "-c", f"print({_forged_frame(op_id)!r})"],
        }
        forged = kube.create(
            "jobs",
            namespace,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": FORGED_JOB, "labels": labels, "annotations": annotations},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {"labels": labels, "annotations": annotations},
                        "spec": {"restartPolicy": "Never", "containers": [container]},
                    },
                },
            },
        )
        real = job_name(op_id)  # derived from the public operation id
        kube.create(
            "pods",
            namespace,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": FORGED_POD,
                    "labels": {**labels, "job-name": real, "batch.kubernetes.io/job-name": real},
                    "annotations": annotations,
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": FORGED_JOB,
                            "uid": forged["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {"restartPolicy": "Never", "containers": [container]},
                "status": {
                    "phase": "Succeeded",
                    "containerStatuses": [
                        {
                            "name": "runner",
                            "ready": False,
                            "restartCount": 0,
                            "image": "seshat:test",
                            "imageID": "",
                            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                        }
                    ],
                },
            },
        )
        kube.logs[FORGED_POD] = bytearray(_forged_frame(op_id).encode())

    kube.before_create = attacker
    holder = _first_controller_killed_while_applying(world, kube, tmp_path, oci_registry)
    kube.before_create = None
    op_id = public["op_id"]
    warnings: list[str] = []
    try:
        (real,) = [
            j
            for j in kube.list("jobs", "shop")
            if _operation(j) == "apply" and j["metadata"]["name"] != FORGED_JOB
        ]
        assert real["metadata"]["name"] == job_name(op_id)
        created = len(kube.jobs_created)
        thread, reports = _next_controller(world, api, tmp_path, oci_registry, warnings)
        time.sleep(3.0)
        # The forged "converged" result was not taken: the real Apply is still followed,
        # under the lease, and nothing else started.
        assert thread.is_alive()
        assert len(kube.jobs_created) == created
        assert _lease_holder(kube)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    thread.join(180)
    assert not thread.is_alive()
    (report,) = reports

    # The real Apply's own result, once.
    assert report.phases == {"shop/orders": "InSync"}
    assert "items" in tables(world.tmp / "orders.db")
    (finished,) = _finished_records(world, op_id)
    assert '"outcome":"Applied"' in finished
    assert _lease_holder(kube) is None
    # The real Job carried what only the controller knew, and was owned by the resource.
    apply = next(j for j in kube.jobs_created if j["metadata"]["name"] == job_name(op_id))
    annotations = apply["metadata"]["annotations"]
    nonce = annotations[NONCE_ANNOTATION]
    assert len(nonce) == 32 and nonce != "0" * 32
    assert annotations[PLAN_ANNOTATION] == public["plan_id"]
    assert annotations[RESOURCE_LABEL] == public["uid"]
    assert apply["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "seshat.dev/v1alpha1",
            "kind": "DatabaseSchema",
            "name": "orders",
            "uid": cr["metadata"]["uid"],
            "controller": True,
        }
    ]
    # ... and the nonce never reached the status branch (the operation id and plan did).
    history = world.git("log", "-p", "refs/heads/seshat/status")
    assert op_id in history and nonce not in history
    # The real Job is gone; the impostors are where the attacker put them, reported.
    assert kube.get("jobs", "shop", job_name(op_id)) is None
    assert kube.get("jobs", "shop", FORGED_JOB) is not None
    assert kube.get("pods", "shop", FORGED_POD) is not None
    tampering = [e for e in kube.list("events", "shop") if e["reason"] == "Tampering"]
    related = {e["related"]["name"] for e in tampering}
    assert {FORGED_JOB, FORGED_POD} <= related
    assert all(e["type"] == "Warning" for e in tampering)
    assert all(
        (e["regarding"]["kind"], e["regarding"]["name"]) == ("DatabaseSchema", "orders")
        for e in tampering
    )
    assert any(FORGED_JOB in w and "tampering" in w for w in warnings), warnings
    assert any(FORGED_POD in w for w in warnings), warnings


def test_without_its_nonce_a_run_is_followed_to_its_end_but_not_believed(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
    oci_registry: RegistryServer,
) -> None:
    """The state file holding the dispatch's nonce is lost (say the controller's volume was
    replaced): a Job that matches everything else may be this controller's or a forgery
    under its name. It is followed to its end under the lease, so the lease is never let go
    while an Apply may write, but what it says is not believed: the run is Unknown, settled
    by a fresh Observe and Plan, and the Job is left for its TTL, not deleted."""
    _declare(world, oci_registry)
    holder = _first_controller_killed_while_applying(world, kube, tmp_path, oci_registry)
    try:
        (job,) = [j for j in kube.list("jobs", "shop") if _operation(j) == "apply"]
        op_id = job["metadata"]["labels"][OPERATION_ID_LABEL]
        with sqlite3.connect(world.work / "state.sqlite") as state:
            state.execute("UPDATE dispatches SET nonce = NULL")
        state.close()
        thread, reports = _next_controller(world, api, tmp_path, oci_registry)
        time.sleep(3.0)
        assert thread.is_alive() and _lease_holder(kube)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    thread.join(180)
    (report,) = reports

    (finished,) = _finished_records(world, op_id)
    assert '"outcome":"Unknown"' in finished
    status = world.status("orders")["status"]
    assert report.phases == {"shop/orders": "InSync"}  # settled by a fresh, empty plan
    # lastApplied says what the reading showed, and that it was the reading that showed it.
    last = status["lastApplied"]  # type: ignore[index]
    assert (last["outcome"], last["settledBy"]) == (
        "Applied",
        "a fresh Observe and Plan: no change is left",
    )
    assert kube.get("jobs", "shop", job["metadata"]["name"]) is not None
    assert _lease_holder(kube) is None
