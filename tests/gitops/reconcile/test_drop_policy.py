"""``spec.policy.drops``: from the declaration to the runner's plan, the plan's id, the status
and ``seshat status``.

``Skip`` leaves what only the database has alone: the plan records the setting and lists
what it skipped, and its id differs from the same declaration's with ``Plan`` (an approval
of one never authorizes the other). A database with nothing else to change is InSync.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.executors import RecordingExecutor
from harness.preview_pr import ORDERS_V1
from harness.reconcile_world import World, schema_yaml, tables

from gitops.reconcile.passes import run_pass
from runner.protocol.messages import PlanSettings

LEGACY = "CREATE TABLE legacy (id INTEGER);\nCREATE INDEX legacy_id ON legacy (id);\n"


def _declare(world: World, layout: Path, extra: str = "", apply: str = "OnApproval") -> None:
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, extra=extra, apply=apply)
    )
    world.remote.commit_all(f"orders{extra}")


def _pass(world: World) -> tuple[str, list[PlanSettings]]:
    executor = RecordingExecutor(world.work)
    report = run_pass(world.remote.remote_url, world.work, executor=executor)
    return f"{report.phases['shop/orders']}/{report.reasons['shop/orders']}", executor.plans


def _status_text(world: World) -> str:
    done = world.seshat("status", "--repo", str(world.remote.remote_url))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_skip_leaves_what_only_the_database_has_and_binds_the_plan(world: World) -> None:
    layout = world.artifact("plain", ORDERS_V1)
    path = world.database("orders", LEGACY)
    _declare(world, layout)
    assert _pass(world)[0] == "Blocked/DestructiveChangesDisallowed"  # DROP TABLE legacy

    _declare(world, layout, extra=", allowDestructive: true")
    assert _pass(world)[0] == "AwaitingApproval/AwaitingApproval"
    planned = world.status("orders")["status"]["plan"]  # type: ignore[index]
    assert "skippedDrops" not in planned
    dropping = json.loads(world.show("seshat/status", planned["path"]))
    assert "drops" not in dropping and "skipped" not in dropping
    assert sorted(s["op"] for s in dropping["statements"]) == ["create_table", "drop_table"]

    _declare(world, layout, extra=", allowDestructive: true, drops: Skip")
    verdict, plans = _pass(world)
    assert verdict == "AwaitingApproval/AwaitingApproval"
    assert plans and all(p.drops == "skip" for p in plans)
    skipping = world.status("orders")["status"]["plan"]  # type: ignore[index]
    assert skipping["id"] != planned["id"]
    assert skipping["skippedDrops"] == 1
    recorded = json.loads(world.show("seshat/status", skipping["path"]))
    assert recorded["drops"] == "skip"
    assert recorded["skipped"] == [{"detail": "", "key": "table:main.legacy", "op": "drop_table"}]
    assert [s["op"] for s in recorded["statements"]] == ["create_table"]
    assert "1 drops skipped" in _status_text(world)

    # Skip needs no allowDestructive; applied (apply: Always) the legacy table and its index
    # stay, and the fresh plan, which still lists them as skipped, is empty: InSync.
    _declare(world, layout, extra=", drops: Skip", apply="Always")
    assert _pass(world)[0] == "InSync/InSync"
    assert tables(path) == ["legacy", "orders"]
