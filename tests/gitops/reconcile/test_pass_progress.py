"""The steps a pass reports as it enters them (``run_pass(progress=...)``), for both
lifecycles; the status branch records only the verdicts."""

from __future__ import annotations

from harness.reconcile_world import World, migration_yaml, schema_yaml

from gitops.reconcile.passes import run_pass


def _pass(world: World) -> list[tuple[str, str, str]]:
    told: list[tuple[str, str, str]] = []
    run_pass(
        world.remote.remote_url,
        world.work,
        workers=1,
        progress=lambda kind, key, phase: told.append((kind, key, phase)),
    )
    return told


def test_each_lifecycle_reports_its_steps_and_git_records_only_verdicts(world: World) -> None:
    world.database("orders")
    world.database("ledger")
    layout = world.artifact("s", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    files = {"1_items.sql": "CREATE TABLE items (id INTEGER PRIMARY KEY);\n"}
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout, apply="Always"))
    world.remote.write_file(
        "databases/l.yaml", migration_yaml("ledger", world.migrations("m", files))
    )
    world.remote.commit_all("declare")
    told = _pass(world)
    schema = [phase for kind, key, phase in told if key == "shop/orders"]
    migration = [phase for kind, key, phase in told if key == "shop/ledger"]
    assert {kind for kind, key, _ in told if key == "shop/ledger"} == {"DatabaseMigration"}
    assert schema == ["Resolving", "Verifying", "Planning", "Applying", "VerifyingConvergence"]
    assert migration == ["Resolving", "Verifying", "Reading"]  # then AwaitingApproval
    assert world.phases("orders") == ["InSync", "Applying"]
    assert world.phases("ledger") == ["AwaitingApproval"]
    world.approve("ledger", str(world.status("ledger")["status"]["plan"]["id"]))  # type: ignore[index]
    migration = [phase for _, key, phase in _pass(world) if key == "shop/ledger"]
    assert migration == ["Resolving", "Verifying", "Reading", "Applying", "VerifyingHistory"]
    assert world.phases("ledger")[0] == "InSync"
