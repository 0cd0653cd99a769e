"""The reconciler killed with SIGKILL right after the dispatch marker: no second Apply.

The Apply is held on SQLite's write lock by a connection the test owns, so the kill lands
while the runner waits; the runner (its own process group) is killed too, so the Apply
never ran. The next pass must not start the same Apply again.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from harness.pids import kill_processes_in
from harness.reconcile_world import World, schema_yaml, tables


def _kill_after_the_dispatch_marker(world: World, database: Path) -> None:
    """Hold SQLite's write lock so the Apply waits, start ``seshat reconcile --once``, and
    SIGKILL it (and the runner it started) once the Applying marker is on the remote."""
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    controller = world.controller(
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        world.until_phase("orders", "Applying", controller)
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()
        time.sleep(0.5)
        kill_processes_in(world.work / "operations")
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
            controller.wait()
        holder.execute("ROLLBACK")
        holder.close()


def test_sigkill_after_the_dispatch_marker_never_applies_twice(world: World) -> None:
    layout = world.artifact("crash", "CREATE TABLE orders (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file(
        "databases/orders/schema.yaml",
        schema_yaml("orders", layout, apply="Always", extra=", lockTimeout: 60s"),
    )
    world.remote.commit_all("declare orders")
    _kill_after_the_dispatch_marker(world, database)
    assert tables(database) == []  # the killed Apply changed nothing

    # The next pass observes and plans afresh; the same Apply is never started again.
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert tables(database) == []
    assert world.phases("orders").count("Applying") == 1
    ready = world.status("orders")["status"]["conditions"][0]  # type: ignore[index]
    assert "never started again" in ready["message"]


def test_a_lost_state_file_does_not_make_a_consumed_approval_count_again(world: World) -> None:
    layout = world.artifact("lost", "CREATE TABLE orders (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, extra=", lockTimeout: 60s")
    )
    world.remote.commit_all("declare orders")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    plan = str(world.status("orders")["status"]["plan"]["id"])  # type: ignore[index]
    approved = world.seshat(
        "approve",
        "shop/orders",
        "--plan",
        plan,
        "--repo",
        world.remote.work_dir,
        "--key",
        world.alice.private_key,
    )
    assert approved.returncode == 0
    world.remote.commit_all("approve")
    _kill_after_the_dispatch_marker(world, database)
    # The controller's machine is lost with its state file; only Git remains.
    (world.work / "state.sqlite").unlink()
    for leftover in world.work.glob("state.sqlite-*"):
        leftover.unlink()
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert tables(database) == []  # the consumed approval did not start the Apply again
    assert world.phases("orders").count("Applying") == 1
