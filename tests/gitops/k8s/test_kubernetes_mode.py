"""Kubernetes mode: runner Jobs, coordination.k8s.io Leases, custom resource status.

No Kubernetes API server or kubelet can run on this machine, so these tests talk to
``harness.kube_api.FakeKubernetes``: a test double speaking the API's wire format (bearer
tokens, resourceVersion conflicts, Status errors), validating every object written to it
against the official Kubernetes schemas (or the Seshat CRDs), and running each Job's
container as a local process with only the environment the pod spec gives it. The runner
it starts is the real ``seshat-runner``; the databases are real (SQLite, PostgreSQL).
Two tests replace the runner with a small program, to hang or to be killed on demand; they
say so.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from harness.kube_api import FakeKubernetes
from harness.postgres import PostgresDatabase, PostgresServer
from harness.reconcile_world import World, tables
from harness.registry import AuthRegistryServer, RegistryServer

from gitops.execution.executor import CredentialUnavailable, Outcome
from gitops.execution.leases import Leader
from gitops.kubernetes.api import KubeApi, KubeError, load_api
from gitops.kubernetes.jobs import JobSettings, KubernetesExecutor, job_name, sandbox_security
from gitops.kubernetes.leases import KubernetesLeases, lease_name
from gitops.reconcile.passes import PassReport, run_pass
from gitops.resources.database import SecretKeyRef, UrlReference
from runner.protocol.frame import encode_frame
from runner.protocol.messages import OperationInput, RegistrySettings
from runner.protocol.results import InspectResult, PlanResult

SECRET = UrlReference(secret_key_ref=SecretKeyRef(name="orders-db", key="url"))


def _executor(api: KubeApi, tmp_path: Path, **settings: object) -> KubernetesExecutor:
    return KubernetesExecutor(
        api,
        JobSettings(
            image="seshat:test",
            mount_root=str(tmp_path / "pods"),
            poll=0.05,
            **settings,  # type: ignore[arg-type]
        ),
    )


def _watched_executor(api: KubeApi, tmp_path: Path, warnings: list[str]) -> KubernetesExecutor:
    """The executor, its warnings (tampering) collected in ``warnings``."""
    executor = _executor(api, tmp_path)
    executor.warn = warnings.append
    return executor


def _kubernetes_pass(
    world: World, api: KubeApi, tmp_path: Path, registry: RegistryServer, **settings: object
) -> PassReport:
    """One reconciliation pass with the Kubernetes executor and Leases; the runners reach
    ``registry`` over plain HTTP."""
    return run_pass(
        world.remote.remote_url,
        world.work,
        executor=_executor(api, tmp_path, **settings),
        leases=KubernetesLeases(api, "seshat-system"),
        registry=RegistrySettings(plain_http=[registry.address]),
    )


def _pushed(
    world: World, registry: RegistryServer, files: dict[str, str], kind: str = "schema"
) -> str:
    """A signed artifact of ``files`` in the test registry (a repository of its own)."""
    ref = f"oci://{registry.address}/shop/{world.tmp.name.lower()}-{kind}:v1"
    data = {name: text.encode() for name, text in files.items()}
    return world.publish(ref, data, kind, registry=("--plain-http", registry.address))


def _start_hanging_operation(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path, op_id: str
) -> tuple[threading.Thread, list[Outcome]]:
    """An operation whose runner never answers (the stand-in below), run in a thread; its
    outcome lands in the list once the thread ends. Returns when the pod's process runs."""
    _stand_in(kube, tmp_path, 60)
    kube.secrets[("shop", "orders-db")] = {"url": "sqlite:///unused.db"}
    executor = _executor(api, tmp_path)
    url, env = executor.bind(SECRET, "url")
    request = OperationInput(operation="inspect", id=op_id, url=url)
    results: list[Outcome] = []
    thread = threading.Thread(
        target=lambda: results.append(executor.run(request, env, 600, namespace="shop"))
    )
    thread.start()
    kube.wait_for_process()
    return thread, results


def _sqlite(tmp_path: Path, name: str = "orders") -> Path:
    path = tmp_path / f"{name}.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    conn.close()
    return path


def test_an_operation_runs_as_a_job_with_only_the_secret_the_pod_resolves(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    database = _sqlite(tmp_path)
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    executor = _executor(api, tmp_path)
    url, env = executor.bind(SECRET, "url")
    desired = tmp_path / "desired"
    (desired / "nested").mkdir(parents=True)
    sql = b"CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\r\n"  # CRLF kept
    (desired / "nested" / "schema.sql").write_bytes(sql)
    request = OperationInput(operation="plan", id="plan-0a1b", url=url, desired=str(desired))

    outcome = executor.run(request, env, 60, namespace="shop")

    assert outcome.kind == "done", outcome.detail
    assert outcome.result is not None and outcome.result.result is not None
    assert isinstance(outcome.result.result, PlanResult)
    assert outcome.result.result.plan_digest.startswith("sha256:")
    (job,) = kube.jobs_created
    (configmap,) = kube.configmaps_created
    assert job["metadata"]["namespace"] == "shop"  # secretKeyRef is namespace-local
    spec = job["spec"]
    assert spec["backoffLimit"] == 0  # never started twice
    assert spec["activeDeadlineSeconds"] == 60
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False  # no Kubernetes credential
    assert pod["serviceAccountName"] == "seshat-runner"
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    variable = next(e for e in container["env"] if e["name"] == "SESHAT_DATABASE_URL")
    assert variable == {
        "name": "SESHAT_DATABASE_URL",
        "valueFrom": {"secretKeyRef": {"name": "orders-db", "key": "url"}},
    }
    # The URL lives only in the Secret: not in the Job, its ConfigMap, or anything posted.
    posted = json.dumps([kube.jobs_created, kube.configmaps_created])
    assert str(database) not in posted
    # The artifact's bytes reached the pod exactly, at the path the rewritten input names.
    items = pod["volumes"][0]["configMap"]["items"]
    assert [i["path"] for i in items] == ["operation.json", "desired/nested/schema.sql"]
    assert configmap["immutable"] is True
    # Nothing is left behind.
    assert kube.list("jobs") == [] and kube.list("configmaps") == [] and kube.list("pods") == []


def test_a_missing_secret_fails_at_once_and_nothing_runs(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    executor = _executor(api, tmp_path)
    url, env = executor.bind(SECRET, "url")
    request = OperationInput(operation="inspect", id="inspect-1", url=url)

    outcome = executor.run(request, env, 600, namespace="shop")

    assert outcome.kind == "failed"  # not lost: the container never started
    assert "CreateContainerConfigError" in outcome.detail
    assert 'secret "orders-db" not found' in outcome.detail
    assert kube.processes == {}
    assert kube.list("jobs") == []


def test_from_env_is_refused_in_kubernetes_mode(api: KubeApi, tmp_path: Path) -> None:
    executor = _executor(api, tmp_path)
    with pytest.raises(CredentialUnavailable, match="secretKeyRef"):
        executor.bind(UrlReference(from_env="ORDERS_URL"), "url")


STAND_IN = """
import sys, time
sys.stdout.write("starting\\n"); sys.stdout.flush()
time.sleep(float(sys.argv[1]))
"""


def _stand_in(kube: FakeKubernetes, tmp_path: Path, seconds: float) -> None:
    """The kubelet runs this program instead of the runner: one that never answers."""
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    kube.command_override = [sys.executable, str(script), str(seconds)]


def test_a_job_past_its_deadline_is_lost_and_deleted(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    _stand_in(kube, tmp_path, 60)
    executor = _executor(api, tmp_path, grace=2.0)
    kube.secrets[("shop", "orders-db")] = {"url": "sqlite:///unused.db"}
    url, env = executor.bind(SECRET, "url")
    request = OperationInput(operation="inspect", id="inspect-2", url=url)

    outcome = executor.run(request, env, 1, namespace="shop")

    assert outcome.kind == "lost"
    assert "DeadlineExceeded" in outcome.detail or "deadline" in outcome.detail
    assert kube.list("jobs") == []


def test_a_runner_killed_mid_operation_is_lost(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    import os
    import signal

    thread, results = _start_hanging_operation(kube, api, tmp_path, "inspect-3")
    (pod,) = kube.processes
    os.killpg(kube.processes[pod].pid, signal.SIGKILL)  # the node's OOM killer, say
    thread.join(60)

    (outcome,) = results
    assert outcome.kind == "lost" and "exit 137" in outcome.detail


def test_the_api_server_refuses_a_wrong_token(kube: FakeKubernetes, tmp_path: Path) -> None:
    session = load_api(kube.kubeconfig(tmp_path / "bad", token="not-the-token"))
    with pytest.raises(KubeError, match="401"):
        session.get("/apis/batch/v1/namespaces/shop/jobs")
    assert kube.unauthorized == 1


# -- leases ------------------------------------------------------------------------------


def test_one_lease_one_holder_and_a_release_lets_the_next_one_in(
    kube: FakeKubernetes, api: KubeApi
) -> None:
    a = KubernetesLeases(api, "seshat-system")
    b = KubernetesLeases(api, "seshat-system")
    coordination = "sha256:" + "ab" * 32

    held = a.acquire(coordination, "controller-a")
    assert held is not None and a.holds(held)
    assert b.acquire(coordination, "controller-b") is None
    stored = kube.get("leases", "seshat-system", lease_name(coordination))
    assert stored is not None and stored["spec"]["holderIdentity"] == "controller-a"

    a.release(held)
    assert not a.holds(held)
    taken = b.acquire(coordination, "controller-b")
    assert taken is not None and b.holds(taken)
    b.release(taken)


def test_a_lapsed_lease_is_taken_and_the_old_holding_no_longer_holds(
    kube: FakeKubernetes, api: KubeApi
) -> None:
    a = KubernetesLeases(api, "seshat-system", duration=60)
    later = KubernetesLeases(  # a controller whose clock is past a's lease (a stopped renewing)
        api, "seshat-system", duration=60, now=lambda: datetime.now(UTC) + timedelta(minutes=5)
    )
    held = a.acquire("controller", "replica-a")
    assert held is not None
    taken = later.acquire("controller", "replica-b")
    assert taken is not None
    assert not a.holds(held)  # another epoch now: a result from a's holding is discarded
    stored = kube.get("leases", "seshat-system", "seshat-controller")
    assert stored is not None and stored["spec"]["leaseTransitions"] == 1
    a.release(held)  # releasing a lost holding changes nothing
    assert later.holds(taken)


def test_renewal_keeps_a_short_lease_held(kube: FakeKubernetes, api: KubeApi) -> None:
    import time

    # Renewed every third of the duration, so a renewal may be up to two thirds of it late.
    # With 1 s, a worker starved of CPU for 0.7 s (three workers on two cores, a corpus
    # gate beside it) lost the lease once; 2 s leaves it 1.3 s.
    a = KubernetesLeases(api, "seshat-system", duration=2)
    held = a.acquire("controller", "replica-a")
    assert held is not None
    time.sleep(4.5)  # more than twice the duration: only renewals keep it
    assert a.holds(held)
    assert KubernetesLeases(api, "seshat-system", duration=2).acquire("controller", "b") is None
    a.release(held)


def test_racing_controllers_get_exactly_one_holding(kube: FakeKubernetes, tmp_path: Path) -> None:
    sessions = [load_api(kube.kubeconfig(tmp_path / f"k{i}")) for i in range(6)]
    won: list[str] = []
    barrier = threading.Barrier(len(sessions))

    def race(i: int) -> None:
        leases = KubernetesLeases(sessions[i], "seshat-system")
        barrier.wait()
        if leases.acquire("sha256:" + "cd" * 32, f"replica-{i}") is not None:
            won.append(f"replica-{i}")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(sessions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1, won  # the others lost on AlreadyExists / Conflict


def test_only_the_replica_holding_the_controller_lease_reconciles(api: KubeApi) -> None:
    one = Leader(KubernetesLeases(api, "seshat-system"), "replica-1", lambda _: None)
    two = Leader(KubernetesLeases(api, "seshat-system"), "replica-2", lambda _: None)
    assert one.leading() and not two.leading()
    one.step_down()
    assert two.leading() and not one.leading()
    two.step_down()


# -- the whole loop ----------------------------------------------------------------------

SCHEMA = """\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseSchema
metadata: {{name: orders, namespace: shop}}
spec:
  target:
    engine: {engine}
    url: {{secretKeyRef: {{name: orders-db, key: url}}}}
    coordinationKey: orders
  artifact: {{ref: "{ref}", verification: {{policy: ci}}}}
  policy: {{apply: Always}}
"""


def _rendered_cr(world: World) -> dict[str, object]:
    done = world.seshat("render", world.remote.work_dir)
    assert done.returncode == 0, done.stderr
    from ruamel.yaml import YAML

    documents = list(YAML(typ="safe").load_all(done.stdout))
    found = next(d for d in documents if d["kind"] == "DatabaseSchema")
    assert isinstance(found, dict)
    return found


def test_reconcile_in_kubernetes_mode_applies_through_jobs_and_publishes_the_status(
    world: World,
    kube: FakeKubernetes,
    oci_registry: RegistryServer,
    kube_reconcile: Callable[..., str],
) -> None:
    database = world.database("orders")
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    sql = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n"
    ref = _pushed(world, oci_registry, {"schema.sql": sql})
    world.remote.write_file("databases/orders.yaml", SCHEMA.format(engine="sqlite", ref=ref))
    world.remote.commit_all("declare orders")
    kube.put_custom("databaseschemas", _rendered_cr(world), generation=3)  # as Argo CD applied it

    # The controller's own environment names another database: the Jobs never see it.
    out = kube_reconcile(ORDERS_URL="sqlite:///elsewhere.db")

    assert "shop/orders: InSync (InSync)" in out
    assert tables(database) == ["items"]
    operations = [j["metadata"]["labels"]["seshat.dev/operation"] for j in kube.jobs_created]
    # Resolve, Verify, then one Job for Observe and Plan twice (byte-identical), the Apply
    # alone, then one Job to Observe and Plan again.
    assert operations == ["resolve", "verify", "drift-plan-plan", "apply", "drift-plan-plan"]
    assert kube.list("jobs") == [] and kube.list("configmaps") == []
    lease = kube.get("leases", "seshat-system", lease_name(_coordination(world)))
    assert lease is not None and "holderIdentity" not in lease["spec"]  # released
    cr = kube.get("databaseschemas", "shop", "orders")
    assert cr is not None
    status = cr["status"]
    assert status["phase"] == "InSync" and status["observedGeneration"] == 3
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] == "InSync"
    assert "observedGeneration" not in world.show("seshat/status", "status/shop/orders.yaml")


def _coordination(world: World) -> str:
    status = world.status("orders")
    assert isinstance(status, dict)
    from gitops.reconcile.identities import coordination_digest
    from gitops.resources.database import Target

    target = Target.model_validate(
        {
            "engine": "sqlite",
            "url": {"secretKeyRef": {"name": "orders-db", "key": "url"}},
            "coordinationKey": "orders",
        }
    )
    return coordination_digest("shop", target)


def test_a_changed_spec_in_the_cluster_is_not_claimed_as_observed(
    world: World, kube: FakeKubernetes, api: KubeApi, tmp_path: Path, oci_registry: RegistryServer
) -> None:
    from gitops.kubernetes.status import publish_statuses

    database = world.database("orders")
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    ref = _pushed(
        world, oci_registry, {"schema.sql": "CREATE TABLE items (id INTEGER PRIMARY KEY);\n"}
    )
    world.remote.write_file("databases/orders.yaml", SCHEMA.format(engine="sqlite", ref=ref))
    world.remote.commit_all("declare orders")
    newer = _rendered_cr(world)
    newer["spec"]["policy"]["apply"] = "Never"  # type: ignore[index]  # a commit Seshat has not read
    kube.put_custom("databaseschemas", newer, generation=4)
    report = _kubernetes_pass(world, api, tmp_path, oci_registry)
    assert report.phases == {"shop/orders": "InSync"}

    assert publish_statuses(api, report.statuses, report.repository) == 1
    cr = kube.get("databaseschemas", "shop", "orders")
    assert cr is not None and cr["status"]["phase"] == "InSync"
    assert "observedGeneration" not in cr["status"]  # Argo CD / Flux keep waiting


def test_the_postgresql_password_reaches_only_the_pod(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
    postgres_database: PostgresDatabase,
    second_postgres_server: PostgresServer,
    oci_registry: RegistryServer,
) -> None:
    url = postgres_database.url_with_password
    password = url.split(":")[2].split("@")[0]
    # An explicit sandbox (an empty database on another server) comes from another key of
    # the same Secret, like the target's URL: the controller never reads either.
    server = second_postgres_server
    dev = f"dev_{postgres_database.name}"
    with server.connect() as admin:
        admin.execute(f'CREATE DATABASE "{dev}" OWNER {server.app_user}')
    kube.secrets[("shop", "orders-db")] = {"url": url, "dev": server.url_with_password(dev)}
    sql = "CREATE TABLE items (id integer PRIMARY KEY, name text);\n"
    ref = _pushed(world, oci_registry, {"schema.sql": sql})
    world.remote.write_file(
        "databases/orders.yaml",
        SCHEMA.format(engine="postgresql", ref=ref)
        + "  dev: {url: {secretKeyRef: {name: orders-db, key: dev}}}\n",
    )
    world.remote.commit_all("declare orders")
    report = _kubernetes_pass(world, api, tmp_path, oci_registry)

    assert report.phases == {"shop/orders": "InSync"}, world.status("orders")
    with postgres_database.connect_as_app() as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (0,)
    posted = json.dumps([kube.jobs_created, kube.configmaps_created, kube.list("leases")])
    assert password not in posted and url not in posted
    observe = next(j for j in kube.jobs_created if "drift" in j["metadata"]["name"])
    dev_env = observe["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "SESHAT_DEV_URL",
        "valueFrom": {"secretKeyRef": {"name": "orders-db", "key": "dev"}},
    } in dev_env
    everything = world.git("log", "--all", "-p")
    assert password not in everything
    for path in world.work.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path


def test_kubernetes_mode_options_are_checked_before_anything_runs(
    world: World, tmp_path: Path
) -> None:
    no_image = world.seshat(
        "reconcile", "--repo", world.remote.remote_url, "--once", "--executor", "kubernetes"
    )
    assert (
        no_image.returncode == 2 and "--executor kubernetes needs --runner-image" in no_image.stderr
    )
    local = world.seshat(
        "reconcile", "--repo", world.remote.remote_url, "--once", "--publish-status"
    )
    assert local.returncode == 2 and "--publish-status needs --executor kubernetes" in local.stderr
    missing = world.seshat(
        "reconcile",
        "--repo",
        world.remote.remote_url,
        "--once",
        "--executor",
        "kubernetes",
        "--runner-image",
        "seshat:test",
        "--kubeconfig",
        tmp_path / "absent",
        "--work",
        world.work,
    )
    assert missing.returncode == 2 and "no Kubernetes configuration" in missing.stderr
    assert not (world.work / "source").exists()  # nothing was fetched


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


def test_a_migration_directory_is_applied_through_jobs_bytes_exact(
    world: World, kube: FakeKubernetes, api: KubeApi, tmp_path: Path, oci_registry: RegistryServer
) -> None:
    """The runner Jobs fetch the artifact by digest from the registry: a 5 MiB migration
    (over a ConfigMap's limit) applies, and every file arrives byte for byte."""
    from runner.digests import sha256_digest

    database = world.database("ledger")
    kube.secrets[("shop", "ledger-db")] = {"url": f"sqlite:///{database}"}

    def rows(first: int) -> str:  # about 2.8 MiB (a file may hold 4 MiB)
        return "".join(
            f"INSERT INTO items (id) VALUES ({n}); -- {'x' * 60}\n"
            for n in range(first, first + 35_000)
        )

    files = {
        "1_items.sql": "CREATE TABLE items (id INTEGER PRIMARY KEY);\n",
        "2_name.sql": "-- windows line endings\r\nALTER TABLE items ADD COLUMN name TEXT;\r\n",
        "3_rows.sql": rows(0),
        "4_rows.sql": rows(35_000),
    }
    assert sum(len(text) for text in files.values()) > 5 * 1024 * 1024
    ref = _pushed(world, oci_registry, files, "migrations")
    world.remote.write_file("databases/ledger.yaml", MIGRATION.format(ref=ref))
    world.remote.commit_all("declare ledger")
    report = _kubernetes_pass(world, api, tmp_path, oci_registry)

    assert report.phases == {"shop/ledger": "InSync"}, world.status("ledger")
    with sqlite3.connect(database) as conn:
        applied = conn.execute(
            "SELECT version, state, checksum FROM seshat_schema_migrations ORDER BY version"
        ).fetchall()
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (70_000,)
    conn.close()
    assert applied == [
        (name.split("_")[0], "applied", sha256_digest(text.encode()))  # CRLF and all
        for name, text in files.items()
    ]
    operations = [j["metadata"]["labels"]["seshat.dev/operation"] for j in kube.jobs_created]
    assert operations == ["resolve", "verify", "history", "migrate", "history"]
    # No artifact byte went through the API server: each ConfigMap holds only the input.
    for configmap in kube.configmaps_created:
        assert len(configmap["binaryData"]) == 1
        assert len(json.dumps(configmap)) < 16 * 1024


def test_the_registry_credential_reaches_only_the_jobs_that_read_the_artifact(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
    oci_registry_auth: AuthRegistryServer,
) -> None:
    """A registry behind basic auth and TLS: its password lives in a docker config Secret the
    kubelet mounts into the Jobs that read the artifact; the controller never sees it."""
    import base64

    registry = oci_registry_auth
    database = world.database("orders")
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    login = base64.b64encode(f"{registry.username}:{registry.password}".encode()).decode()
    config = json.dumps({"auths": {registry.address: {"auth": login}}})
    kube.secrets[("shop", "registry-pull")] = {".dockerconfigjson": config}
    ref = world.publish(
        f"oci://{registry.address}/shop/{world.tmp.name.lower()}:v1",
        {"schema.sql": b"CREATE TABLE items (id INTEGER PRIMARY KEY);\n"},
        registry=("--ca-file", str(registry.ca_path)),
        env={
            "SESHAT_REGISTRY_USERNAME": registry.username,
            "SESHAT_REGISTRY_PASSWORD": registry.password,
        },
    )
    world.remote.write_file("databases/orders.yaml", SCHEMA.format(engine="sqlite", ref=ref))
    world.remote.commit_all("declare orders")
    assert not any(name.startswith(("SESHAT_REGISTRY", "DOCKER_CONFIG")) for name in os.environ)
    report = run_pass(
        world.remote.remote_url,
        world.work,
        executor=_executor(api, tmp_path, registry_secret="registry-pull"),
        leases=KubernetesLeases(api, "seshat-system"),
        registry=RegistrySettings(ca_pem=registry.ca_path.read_text()),
    )

    assert report.phases == {"shop/orders": "InSync"}, world.status("orders")
    assert tables(database) == ["items"]
    for job in kube.jobs_created:
        pod = job["spec"]["template"]["spec"]
        mounted = any("secret" in volume for volume in pod["volumes"])
        reads_artifact = job["metadata"]["labels"]["seshat.dev/operation"] != "apply"
        assert mounted == reads_artifact, job["metadata"]["name"]
    posted = json.dumps([kube.jobs_created, kube.configmaps_created, kube.list("leases")])
    assert registry.password not in posted and login not in posted
    assert registry.password not in world.git("log", "--all", "-p")
    for path in world.work.rglob("*"):
        if path.is_file():
            assert registry.password.encode() not in path.read_bytes(), path

    # Without the Secret, the runner is refused by the registry: Blocked, nothing planned.
    anonymous = run_pass(
        world.remote.remote_url,
        world.work,
        executor=_executor(api, tmp_path),
        leases=KubernetesLeases(api, "seshat-system"),
        registry=RegistrySettings(ca_pem=registry.ca_path.read_text()),
    )
    assert anonymous.reasons == {"shop/orders": "ArtifactRefused"}
    assert "unauthorized" in str(world.status("orders"))


def test_an_oci_layout_reference_is_a_configuration_error_in_kubernetes_mode(
    world: World, kube: FakeKubernetes, api: KubeApi, tmp_path: Path, oci_registry: RegistryServer
) -> None:
    database = world.database("orders")
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    layout = world.artifact("a", "CREATE TABLE items (id INTEGER PRIMARY KEY);\n")
    ref = f"oci-layout://{layout}:v1"
    world.remote.write_file("databases/orders.yaml", SCHEMA.format(engine="sqlite", ref=ref))
    world.remote.commit_all("declare orders")
    report = _kubernetes_pass(world, api, tmp_path, oci_registry)
    assert report.reasons == {"shop/orders": "ConfigurationError"}
    assert "oci-layout" in str(world.status("orders"))
    assert kube.jobs_created == [] and tables(database) == []


def test_the_input_configmap_belongs_to_its_job_and_goes_with_it(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    thread, results = _start_hanging_operation(kube, api, tmp_path, "inspect-4")
    (job,) = kube.list("jobs", "shop")
    # The pod may start before the controller has patched the ConfigMap's owner (right
    # after the Job's create returned): wait for that patch, not for the pod.
    ends = time.monotonic() + 30
    while "ownerReferences" not in kube.list("configmaps", "shop")[0]["metadata"]:
        assert time.monotonic() < ends, "the ConfigMap was never given its owner"
        time.sleep(0.02)
    (configmap,) = kube.list("configmaps", "shop")
    assert configmap["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
    ]
    # What ttlSecondsAfterFinished does to a Job a dead controller left behind:
    api.delete(f"/apis/batch/v1/namespaces/shop/jobs/{job['metadata']['name']}")
    assert kube.list("configmaps") == [] and kube.list("pods") == []
    thread.join(60)
    (outcome,) = results
    assert outcome.kind == "lost" and "disappeared" in outcome.detail


def test_a_cache_claim_gives_every_job_the_same_runner_cache(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    """Without a claim each Job starts cold (its cache is in the Job's scratch volume); with
    one, the second plan of an unchanged artifact finds the first one's entries."""
    database = _sqlite(tmp_path)
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    cache = tmp_path / "cache-volume"  # where the fake kubelet mounts the claim
    executor = _executor(api, tmp_path, cache_claim="runner-cache", cache_mount=str(cache))
    url, env = executor.bind(SECRET, "url")
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text("CREATE TABLE items (id INTEGER PRIMARY KEY, n TEXT);\n")
    digests = []
    for number in range(2):
        request = OperationInput(
            operation="plan", id=f"plan-{number}", url=url, desired=str(desired)
        )
        outcome = executor.run(request, env, 60, namespace="shop")
        assert outcome.kind == "done", outcome.detail
        assert outcome.result is not None and isinstance(outcome.result.result, PlanResult)
        digests.append(outcome.result.result.plan_digest)
        if number == 0:
            first = sorted((cache / "runner" / "plans").rglob("*.json"))
            kinds = {p.relative_to(cache / "runner").parts[1] for p in first}
            assert {"desired", "verdict"} <= kinds, kinds
    assert digests[0] == digests[1]
    # The second plan added no key (SQLite's live model is one since the catalog is cached).
    assert sorted((cache / "runner" / "plans").rglob("*.json")) == first
    for job in kube.jobs_created:
        pod = job["spec"]["template"]["spec"]
        assert {"name": "cache", "persistentVolumeClaim": {"claimName": "runner-cache"}} in pod[
            "volumes"
        ]
        (container,) = pod["containers"]
        assert {"name": "SESHAT_CACHE_DIR", "value": f"{cache}/runner"} in container["env"]


def _forged_error(op_id: str) -> bytes:
    """The runner's frame for ``op_id``, made up: an answer the real runner never gave."""
    payload = {
        "protocol": 1,
        "operation": "inspect",
        "id": op_id,
        "error": {"code": "unsupported_engine", "message": "forged"},
    }
    return encode_frame(payload).encode()


def _impostor_container(op_id: str) -> dict[str, object]:
    frame = _forged_error(op_id).decode()
    return {
        "name": "runner",
        "image": "seshat:test",
        "command": [sys.executable, "-c", f"print({frame!r})"],
    }


def test_a_job_made_under_the_operations_name_first_is_reported_and_nothing_runs(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    """Job names follow from operation ids, which the status branch publishes: someone who
    may create Jobs in the namespace can take the name first. The controller's create then
    fails; it runs nothing, reads nothing of that Job, and leaves it (and reports it)."""
    database = _sqlite(tmp_path)
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    warnings: list[str] = []
    executor = _watched_executor(api, tmp_path, warnings)
    url, env = executor.bind(SECRET, "url")
    request = OperationInput(operation="inspect", id="inspect-taken", url=url)
    name = job_name(request.id)
    taken = kube.create(
        "jobs",
        "shop",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {"seshat.dev/operation-id": request.id}},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [_impostor_container(request.id)],
                    }
                },
            },
        },
    )

    outcome = executor.run(request, env, 60, namespace="shop")

    assert outcome.kind == "failed" and "already exists" in outcome.detail
    assert outcome.result is None  # the impostor's frame was never read
    found = kube.get("jobs", "shop", name)
    assert found is not None and found["metadata"]["uid"] == taken["metadata"]["uid"]
    assert len(kube.jobs_created) == 1  # the impostor; the controller could create none
    assert kube.list("configmaps", "shop") == []  # its own input, removed
    (event,) = kube.list("events", "shop")
    assert (event["reason"], event["type"]) == ("Tampering", "Warning")
    assert event["regarding"]["name"] == name and event["regarding"]["kind"] == "Job"
    assert any(name in w for w in warnings)


def test_a_pod_that_only_carries_the_jobs_label_is_never_read(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    """A pod made before the Job, labelled ``job-name`` with the Job's (predictable) name and
    a log holding a frame for the operation: the executor reads the log of the pod the Job
    owns (ownerReferences, the Job's uid), reports the other, and leaves it."""
    database = _sqlite(tmp_path)
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    warnings: list[str] = []
    executor = _watched_executor(api, tmp_path, warnings)
    url, env = executor.bind(SECRET, "url")
    request = OperationInput(operation="inspect", id="inspect-podded", url=url)
    kube.create(
        "pods",
        "shop",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "a-forged-pod", "labels": {"job-name": job_name(request.id)}},
            "spec": {"restartPolicy": "Never", "containers": [_impostor_container(request.id)]},
        },
    )
    kube.logs["a-forged-pod"] = bytearray(_forged_error(request.id))

    outcome = executor.run(request, env, 60, namespace="shop")

    assert outcome.kind == "done", outcome.detail  # the real runner's inspect, not "forged"
    assert outcome.result is not None and isinstance(outcome.result.result, InspectResult)
    assert kube.get("pods", "shop", "a-forged-pod") is not None
    assert kube.list("jobs", "shop") == []  # the controller's own Job, deleted after
    (event,) = kube.list("events", "shop")
    assert event["reason"] == "Tampering" and event["regarding"]["name"] == "a-forged-pod"
    assert any("a-forged-pod" in w for w in warnings)


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("runtime-default", None),
        ("unconfined", {"type": "Unconfined"}),
        (
            "localhost:profiles/seshat-runner.json",
            {"type": "Localhost", "localhostProfile": "profiles/seshat-runner.json"},
        ),
    ],
)
def test_only_the_jobs_that_plan_may_make_the_sandbox_jail(
    choice: str,
    expected: dict[str, str] | None,
    kube: FakeKubernetes,
    api: KubeApi,
    tmp_path: Path,
) -> None:
    """A Job whose operation starts a private sandbox server (plan, drift) gets the seccomp
    and AppArmor profiles that let bubblewrap make user and network namespaces; every other
    Job keeps the pod's RuntimeDefault. The API double validates every Job against the
    official Kubernetes schema (no API server can run here)."""
    database = _sqlite(tmp_path)
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    executor = _executor(api, tmp_path, sandbox_security=sandbox_security(choice))
    url, env = executor.bind(SECRET, "url")
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text("CREATE TABLE items (id INTEGER PRIMARY KEY);\n")
    for operation in ("plan", "inspect"):
        request = OperationInput(
            operation=operation,
            id=f"{operation}-1",
            url=url,
            desired=str(desired) if operation == "plan" else None,
        )
        assert executor.run(request, env, 60, namespace="shop").kind == "done"
    plan, inspect = kube.jobs_created
    for job in (plan, inspect):
        pod = job["spec"]["template"]["spec"]
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (planner,) = plan["spec"]["template"]["spec"]["containers"]
    (reader,) = inspect["spec"]["template"]["spec"]["containers"]
    assert "seccompProfile" not in reader["securityContext"]
    assert "appArmorProfile" not in reader["securityContext"]
    assert planner["securityContext"].get("seccompProfile") == expected
    if expected is None:
        assert "appArmorProfile" not in planner["securityContext"]
    else:
        assert planner["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}
    # Whatever the profile, nothing else of the container's lock-down moves.
    assert planner["securityContext"]["allowPrivilegeEscalation"] is False
    assert planner["securityContext"]["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize("choice", ["Unconfined", "localhost:/etc/x.json", "localhost:../x", "x"])
def test_an_unknown_sandbox_security_is_refused(choice: str) -> None:
    with pytest.raises(ValueError, match="runtime-default, unconfined or localhost:PROFILE"):
        sandbox_security(choice)
