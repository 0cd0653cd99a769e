"""Kubernetes mode: verdict changes as events.k8s.io/v1 Events, and the steps of a pass
(Resolving, Verifying, Planning, Applying, VerifyingConvergence) on the custom resource's
status while it runs, never on the status branch.

The API server is ``harness.kube_api.FakeKubernetes`` (the wire format, strict schema
validation of every write, RBAC from deploy/manifests/rbac.yaml); the runner Jobs run the
real ``seshat-runner`` against a real SQLite database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.kube_api import FakeKubernetes
from harness.reconcile_world import World, tables
from harness.registry import RegistryServer
from ruamel.yaml import YAML

DECLARED = """\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseSchema
metadata: {{name: orders, namespace: shop}}
spec:
  target:
    engine: sqlite
    url: {{secretKeyRef: {{name: orders-db, key: url}}}}
    coordinationKey: orders
  artifact: {{ref: "{ref}", verification: {{policy: ci}}}}
"""


def _cr(world: World) -> dict[str, Any]:
    done = world.seshat("render", world.remote.work_dir)
    assert done.returncode == 0, done.stderr
    documents = list(YAML(typ="safe").load_all(done.stdout))
    found = next(d for d in documents if d["kind"] == "DatabaseSchema")
    assert isinstance(found, dict)
    return found


def _phases(kube: FakeKubernetes) -> list[str | None]:
    phases = [phase for _, _, _, phase in kube.status_patches]
    kube.status_patches.clear()
    return phases


def test_verdict_changes_are_events_and_steps_are_published_on_the_resource(
    world: World,
    kube: FakeKubernetes,
    oci_registry: RegistryServer,
    kube_reconcile: Callable[..., str],
) -> None:
    database = world.database("orders")
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    ref = f"oci://{oci_registry.address}/shop/{world.tmp.name.lower()}-events:v1"
    sql = b"CREATE TABLE items (id INTEGER PRIMARY KEY);\n"
    world.publish(ref, {"schema.sql": sql}, registry=("--plain-http", oci_registry.address))
    world.remote.write_file("databases/orders.yaml", DECLARED.format(ref=ref))
    world.remote.commit_all("declare orders")
    kube.put_custom("databaseschemas", _cr(world))

    assert "shop/orders: AwaitingApproval" in kube_reconcile()
    assert _phases(kube) == ["Resolving", "Verifying", "Planning", "AwaitingApproval"]
    (event,) = kube.list("events", "shop")
    cr = kube.get("databaseschemas", "shop", "orders")
    assert cr is not None
    assert event["reason"] == "AwaitingApproval" and event["type"] == "Normal"
    assert event["action"] == "Reconcile"
    assert event["reportingController"] == "seshat.dev/controller"
    assert event["regarding"]["kind"] == "DatabaseSchema"
    assert event["regarding"]["name"] == "orders"
    assert event["regarding"]["uid"] == cr["metadata"]["uid"]
    plan = cr["status"]["plan"]["id"]
    assert plan in event["note"]
    # Progress never reaches Git: the status branch holds only verdicts.
    assert world.phases("orders") == ["AwaitingApproval"]

    kube_reconcile()  # the same verdict: no Event
    assert len(kube.list("events", "shop")) == 1
    _phases(kube)

    world.approve("orders", plan)
    assert "shop/orders: InSync" in kube_reconcile()
    assert tables(database) == ["items"]
    assert _phases(kube) == [
        "Resolving",
        "Verifying",
        "Planning",
        "Applying",
        "VerifyingConvergence",
        "InSync",
    ]
    events = sorted(kube.list("events", "shop"), key=lambda e: e["eventTime"])
    assert [e["reason"] for e in events] == ["AwaitingApproval", "InSync"]
    assert world.phases("orders") == ["InSync", "Applying", "AwaitingApproval"]
    cr = kube.get("databaseschemas", "shop", "orders")
    assert cr is not None and "plan" not in cr["status"]  # a verdict without a plan drops it


def test_a_blocked_verdict_is_a_warning_event(
    world: World,
    kube: FakeKubernetes,
    oci_registry: RegistryServer,
    kube_reconcile: Callable[..., str],
) -> None:
    database = world.database("orders")
    kube.secrets[("shop", "orders-db")] = {"url": f"sqlite:///{database}"}
    ref = f"oci://{oci_registry.address}/shop/{world.tmp.name.lower()}-never:v1"
    sql = b"CREATE TABLE items (id INTEGER PRIMARY KEY);\n"
    world.publish(ref, {"schema.sql": sql}, registry=("--plain-http", oci_registry.address))
    declared = DECLARED.format(ref=ref) + "  policy: {apply: Never}\n"
    world.remote.write_file("databases/orders.yaml", declared)
    world.remote.commit_all("declare orders, never applied")
    kube.put_custom("databaseschemas", _cr(world))
    assert "shop/orders: Blocked" in kube_reconcile()
    (event,) = kube.list("events", "shop")
    assert (event["reason"], event["type"]) == ("Blocked", "Warning")
    assert event["note"].startswith("Blocked (ApplyDisabled): apply: Never")


def test_an_event_note_stays_within_the_api_servers_byte_limit() -> None:
    """The API server limits a note to 1 KiB of bytes: a message of non-ASCII repository
    text is cut on a character boundary below it, not sent whole and refused."""
    from datetime import UTC, datetime

    from gitops.kubernetes.events import MAX_NOTE, verdict_event
    from gitops.resources.status import DatabaseSchemaStatus

    status = DatabaseSchemaStatus.model_validate(
        {
            "phase": "Blocked",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "ApplyDisabled",
                    "message": "€" * 500,  # 1500 bytes
                    "lastTransitionTime": "2026-12-05T00:00:00Z",
                }
            ],
        }
    )
    found = {"metadata": {"name": "orders", "namespace": "shop"}}
    event = verdict_event("DatabaseSchema", found, status, datetime.now(UTC), "seshat-0")
    note = event["note"]
    assert note.startswith("Blocked (ApplyDisabled): €€")
    assert MAX_NOTE - 2 <= len(note.encode()) <= MAX_NOTE
