"""Kubernetes mode: a DatabaseFleet's status on its custom resource (--publish-status).

What a user of kubectl, Argo CD or Flux reads on the fleet's object: the aggregates of its
members (counts per phase, the distinct plans and their approval, step progress, the few
members needing attention), the Ready / Reconciling / Stalled conditions, the
observedGeneration rule every kind follows, and a status whose size stays bounded
whatever the fleet's. The members are no objects of the cluster: their Jobs are owned by
the fleet's object.

The API server is ``harness.kube_api.FakeKubernetes`` (the wire format, strict validation
of every write against the CRDs, RBAC from deploy/manifests/rbac.yaml); the runner Jobs run
the real ``seshat-runner`` against real SQLite databases.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.kube_api import FakeKubernetes
from harness.reconcile_world import World, tables
from harness.registry import RegistryServer
from ruamel.yaml import YAML

from gitops.kubernetes.api import KubeApi
from gitops.kubernetes.status import (
    FLEET_LIST,
    MAX_FLEET_STATUS,
    fleet_resource_status,
    publish_fleets,
    status_bytes,
)
from gitops.reconcile.conditions import summary_conditions
from gitops.reconcile.fleets import Rollout
from gitops.repo.loader import load_repository
from gitops.resources.status import (
    DatabaseMigrationStatus,
    DatabaseSchemaStatus,
    FleetStatus,
    FleetStep,
)


def _declared(ref: str, members: list[dict[str, Any]]) -> str:
    """The tenants fleet (YAML, written as JSON): a SQLite database per member, its URL in
    the Secret ``tenant-<member>``; canaries first, then the rest."""
    member = "{{ member.name }}"
    template = {
        "target": {
            "engine": "sqlite",
            "url": {"secretKeyRef": {"name": f"tenant-{member}", "key": "url"}},
            "coordinationKey": f"tenant-{member}",
        },
        "artifact": {"ref": ref, "verification": {"policy": "ci"}},
    }
    steps = [{"match": {"wave": "canary"}, "maxParallel": 1}, {}]
    fleet = {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "DatabaseFleet",
        "metadata": {"name": "tenants", "namespace": "shop"},
        "spec": {
            "template": {"kind": "DatabaseSchema", "spec": template},
            "members": {"list": members},
            "rollout": {"steps": steps},
        },
    }
    return json.dumps(fleet, indent=1)


def _conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def _fleet(kube: FakeKubernetes) -> dict[str, Any]:
    cr = kube.get("databasefleets", "shop", "tenants")
    assert cr is not None
    return cr


def test_a_fleets_aggregates_and_conditions_are_published_on_its_custom_resource(
    world: World,
    kube: FakeKubernetes,
    api: KubeApi,
    oci_registry: RegistryServer,
    kube_reconcile: Callable[..., str],
) -> None:
    databases = {}
    for name in ("t1", "t2"):
        databases[name] = world.database(f"tenant-{name}")
        kube.secrets[("shop", f"tenant-{name}")] = {"url": f"sqlite:///{databases[name]}"}
    ref = f"oci://{oci_registry.address}/shop/{world.tmp.name.lower()}-tenants:v1"
    sql = b"CREATE TABLE accounts (id INTEGER PRIMARY KEY);\n"
    world.publish(ref, {"schema.sql": sql}, registry=("--plain-http", oci_registry.address))
    members: list[dict[str, Any]] = [{"name": "t1", "labels": {"wave": "canary"}}, {"name": "t2"}]
    world.remote.write_file("databases/tenants.yaml", _declared(ref, members))
    world.remote.commit_all("declare the tenants fleet")
    # seshat render prints the fleet as one object, never its members.
    done = world.seshat("render", world.remote.work_dir)
    assert done.returncode == 0, done.stderr
    documents = list(YAML(typ="safe").load_all(done.stdout))
    assert "DatabaseSchema" not in [d["kind"] for d in documents]
    (rendered,) = [d for d in documents if d["kind"] == "DatabaseFleet"]
    kube.put_custom("databasefleets", rendered, generation=2)  # as Argo CD applied it

    out = kube_reconcile()
    assert "shop/tenants/t1: AwaitingApproval" in out
    cr = _fleet(kube)
    status = cr["status"]
    assert status["observedGeneration"] == 2
    assert status["phase"] == "AwaitingApproval"
    assert (
        status["message"] == "1 distinct plan(s) wait for an approval: seshat approve shop/tenants"
    )
    assert (status["members"], status["phases"]) == (2, {"AwaitingApproval": 2})
    assert status["distinctPlans"] == 1
    (plan,) = status["plans"]
    assert (plan["members"], plan["names"], plan["approved"]) == (2, ["t1", "t2"], False)
    assert [(s["index"], s["members"], s["inSync"], s["state"]) for s in status["steps"]] == [
        (1, 1, 0, "Rolling"),
        (2, 1, 0, "Waiting"),
    ]
    assert status["steps"][1]["message"] == "step 1 is not done (0 of 1 members InSync)"
    assert _conditions(status) == {
        "Ready": ("False", "AwaitingApproval"),
        "Reconciling": ("True", "AwaitingApproval"),
        "Stalled": ("False", "AwaitingApproval"),
    }
    # The members are no objects: nothing was published for them, and their Jobs belong
    # to the fleet's object (kubectl shows them under it; deleting it takes them along).
    assert {resource for resource, _, _, _ in kube.status_patches} == {"databasefleets"}
    owned = [j for j in kube.jobs_created if "seshat.dev/resource-uid" in j["metadata"]["labels"]]
    assert owned and all(
        j["metadata"]["ownerReferences"]
        == [
            {
                "apiVersion": "seshat.dev/v1alpha1",
                "kind": "DatabaseFleet",
                "name": "tenants",
                "uid": cr["metadata"]["uid"],
                "controller": True,
            }
        ]
        for j in owned
    )
    # The status branch records the same conditions, never an observedGeneration.
    recorded = world.status("tenants")["status"]
    assert isinstance(recorded, dict) and "observedGeneration" not in recorded
    assert recorded["conditions"] == status["conditions"]
    waited_since = {c["type"]: c["lastTransitionTime"] for c in status["conditions"]}

    # A spec newer than the commit Seshat read is not claimed as observed.
    newer = _fleet(kube)
    newer["spec"]["rollout"]["onFailure"] = "Continue"
    kube.put_custom("databasefleets", newer, generation=3)
    repository = load_repository(world.remote.work_dir)
    assert publish_fleets(api, {"shop/tenants": FleetStatus.model_validate(recorded)}, repository)
    assert _fleet(kube)["status"]["observedGeneration"] == 2  # Argo CD / Flux keep waiting
    kube.put_custom("databasefleets", rendered, generation=4)  # the declared spec again

    world.approve("tenants", plan["id"])  # one approval for both members
    out = kube_reconcile()
    assert "shop/tenants/t2: InSync" in out
    assert all(tables(path) == ["accounts"] for path in databases.values())
    status = _fleet(kube)["status"]
    assert status["observedGeneration"] == 4
    assert (status["phase"], status["phases"], status["distinctPlans"]) == (
        "InSync",
        {"InSync": 2},
        0,
    )
    assert status["plans"] == [] and status["attention"] == []
    assert [s["state"] for s in status["steps"]] == ["Done", "Done"]
    assert _conditions(status) == {
        "Ready": ("True", "InSync"),
        "Reconciling": ("False", "InSync"),
        "Stalled": ("False", "InSync"),
    }
    assert all(c["lastTransitionTime"] != waited_since[c["type"]] for c in status["conditions"])


NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
POLICY = """\
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: ci, namespace: shop}
spec: {artifactTypes: [application/vnd.seshat.schema.v1], signatures: {mode: "off"}}
"""


def _many(tmp_path: Path, count: int) -> tuple[Rollout, dict[str, Any]]:
    """A fleet of ``count`` members in two steps (its declaration loaded, no Git) where
    every member drifted its own way (a distinct plan each) and every other one failed
    with the longest message a status holds, in non-ASCII text; and its object as rendered."""
    members = [
        {"name": f"m{i}", "labels": {"wave": "canary" if i < 10 else "main"}} for i in range(count)
    ]
    fleet = _declared("oci://registry.example/shop/tenants:v1", members)
    (tmp_path / "databases").mkdir()
    (tmp_path / "databases" / "policy.yaml").write_text(POLICY)
    (tmp_path / "databases" / "tenants.yaml").write_text(fleet)
    repository = load_repository(tmp_path)
    assert repository.problems == ()
    loaded = repository.find("DatabaseFleet", "shop", "tenants")
    assert loaded is not None
    statuses: dict[str, DatabaseSchemaStatus | DatabaseMigrationStatus | None] = {}
    for i, member in enumerate(repository.members("shop", "tenants")):
        phase, reason = (
            ("Failed", "ApplyFailed") if i % 2 else ("AwaitingApproval", "AwaitingApproval")
        )
        plan = {"id": f"sha256:{i:064x}", "fleetPlan": f"sha256:{i + 1:064x}", "statements": 3}
        statuses[member.key.name] = DatabaseSchemaStatus.model_validate(
            {
                "phase": phase,
                "conditions": summary_conditions(phase, reason, "é" * 1024, NOW),
                "plan": plan,
            }
        )
    loaded_members = repository.members("shop", "tenants")
    rollout = Rollout(loaded, loaded_members, lambda m: statuses[m.key.name], lambda: NOW)
    rendered = loaded.resource.model_dump(mode="json", by_alias=True, exclude_none=True)
    return rollout, rendered


def test_a_fleet_of_many_members_keeps_a_small_status_on_its_custom_resource(
    kube: FakeKubernetes, api: KubeApi, tmp_path: Path
) -> None:
    rollout, rendered = _many(tmp_path, 1000)
    status = rollout.status([f"tenants/gone{i}" for i in range(300)])
    assert status_bytes(status) > 3 * MAX_FLEET_STATUS  # what the status branch records
    kube.put_custom("databasefleets", rendered)

    assert publish_fleets(api, {"shop/tenants": status}, None) == 1
    published = _fleet(kube)["status"]
    size = len(json.dumps(published, separators=(",", ":"), ensure_ascii=False).encode())
    assert size <= MAX_FLEET_STATUS
    # The counts stay whole; each list names the first few.
    assert published["members"] == 1000
    assert published["phases"] == {"AwaitingApproval": 500, "Failed": 500}
    assert published["distinctPlans"] == 1000
    assert len(published["plans"]) == FLEET_LIST
    assert all(p["members"] == 1 for p in published["plans"])
    # Members awaiting approval (even) and failing after theirs was accepted (odd).
    assert [p["approved"] for p in published["plans"]] == [False, True] * (FLEET_LIST // 2)
    assert len(published["attention"]) == FLEET_LIST
    assert published["attention"][0]["member"] == "m1"
    assert published["attention"][0]["reason"] == "ApplyFailed"
    assert len(published["left"]) == FLEET_LIST
    # A failing member halts the rollout: Stalled, with the token that resumes it.
    assert published["phase"] == "Halted" and published["resume"].startswith("halt-")
    assert _conditions(published) == {
        "Ready": ("False", "RolloutHalted"),
        "Reconciling": ("False", "RolloutHalted"),
        "Stalled": ("True", "RolloutHalted"),
    }
    assert [s["state"] for s in published["steps"]] == ["Halted", "Waiting"]


def test_the_bound_holds_even_for_steps_matching_very_long_labels() -> None:
    label = "x" * 250
    steps = [
        FleetStep(index=i, match={f"example.com/{label}{j}": "y" * 63 for j in range(40)})
        for i in range(1, 33)
    ]
    status = FleetStatus(phase="Progressing", members=32, steps=steps)
    assert status_bytes(status) > MAX_FLEET_STATUS
    bounded = fleet_resource_status(status)
    assert status_bytes(bounded) <= MAX_FLEET_STATUS
    assert bounded.members == 32 and bounded.steps == steps[: len(bounded.steps)]
