"""Suspending while an Apply runs, and a lease that changes hands mid-operation."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.executors import HookedExecutor
from harness.reconcile_world import World, schema_yaml, tables

from gitops.execution.executor import EnvValue
from gitops.reconcile.passes import run_pass
from gitops.reconcile.state import StateFile
from runner.protocol.messages import OperationInput


def test_suspend_while_an_apply_runs_follows_it_to_its_result(world: World) -> None:
    layout = world.artifact("s", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    declaration = schema_yaml("orders", layout, apply="Always", extra=", lockTimeout: 60s")
    world.remote.write_file("databases/o.yaml", declaration)
    world.remote.commit_all("declare")
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the Apply waits here
    controller = world.controller(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        world.until_phase("orders", "Applying", controller)
        # Someone suspends the resource while its Apply is running.
        world.remote.write_file(
            "databases/o.yaml", declaration.replace("spec:\n", "spec:\n  suspend: true\n")
        )
        world.remote.commit_all("suspend orders")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out, err = controller.communicate(timeout=180)
    assert controller.returncode == 0, err
    assert "shop/orders: InSync" in out  # the running Apply was followed to its result
    assert tables(database) == ["t"]
    assert world.reconcile() == {"shop/orders": "Suspended/Suspended"}  # then no new Jobs


class StealingExecutor(HookedExecutor):
    """The real runner, but another controller takes the realm lease while the plans run."""

    def __init__(self, work: Path, state: Path) -> None:
        super().__init__(work / "operations")
        self.state_path = state
        self.stolen = False

    def after(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        if any(r.operation == "plan" for r in requests) and not self.stolen:
            self.stolen = True
            thief = StateFile(self.state_path)
            (coordination,) = thief.db.execute("SELECT coordination FROM leases").fetchone()
            thief.db.execute("DELETE FROM leases")
            assert thief.acquire(coordination, "another-controller") is not None
            thief.close()


def test_a_result_produced_across_a_lease_change_is_discarded(world: World) -> None:
    layout = world.artifact("l", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout, apply="Always"))
    world.remote.commit_all("declare")
    executor = StealingExecutor(world.work, world.work / "state.sqlite")
    report = run_pass(world.remote.remote_url, world.work, executor=executor)
    assert report.phases == {"shop/orders": "Failed"}
    assert report.reasons == {"shop/orders": "LeaseContinuityLost"}
    assert tables(database) == []  # nothing was applied with a lease that was not ours
    # Once the other holder lets go, the next pass plans and applies.
    thief = StateFile(world.work / "state.sqlite")
    thief.db.execute("DELETE FROM leases")
    thief.close()
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
