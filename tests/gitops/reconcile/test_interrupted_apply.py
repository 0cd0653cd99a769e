"""An Apply on SQLite interrupted midway: recovered as a step of its own, settled by a fresh
Observe and Plan, never run again.

The controller is SIGKILLed right after its dispatch marker (its runner waits on SQLite's
write lock, which the test holds); the database is then left as a killed ``CREATE INDEX``
leaves it: a real writer builds the index with a five-page cache, so its pages reach the file
behind a rollback journal, and is SIGKILLed before its commit. A read-only Observe cannot
read past that hot journal; the next pass recovers it under the realm lease and records it.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from harness.reconcile_world import World, schema_yaml

from gitops.writeback.ledger import RECORD_TRAILER

SCHEMA = (
    "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
    "CREATE INDEX items_name ON items (name);\n"
)
KILLED_CREATE_INDEX = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 5")
conn.execute("BEGIN")
conn.execute("CREATE INDEX items_name ON items (name)")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _items(world: World) -> Path:
    database = world.database(
        "orders", "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    )
    conn = sqlite3.connect(database, isolation_level=None)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO items (name) VALUES (?)", ((f"item-{i:08d}",) for i in range(60_000))
    )
    conn.execute("COMMIT")
    conn.close()
    return database


def _killed_after_the_dispatch_marker(world: World, database: Path) -> None:
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    controller = world.controller(
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        world.until_phase("orders", "Applying", controller)
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait()
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
            controller.wait()
        holder.execute("ROLLBACK")
        holder.close()


def runners_in(folder: Path) -> list[int]:
    """The processes working in ``folder`` (the local executor starts each runner there)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")) == folder.resolve():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _index_names(database: Path) -> list[str]:
    conn = sqlite3.connect(database)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")]
    finally:
        conn.close()


def test_a_killed_create_index_is_recovered_recorded_and_never_run_again(world: World) -> None:
    layout = world.artifact("recovery", SCHEMA)
    database = _items(world)
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, extra=", lockTimeout: 60s")
    )
    world.remote.commit_all("declare orders")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    plan = str(world.status("orders")["status"]["plan"]["id"])  # type: ignore[index]
    world.approve("orders", plan)

    _killed_after_the_dispatch_marker(world, database)
    deadline = time.monotonic() + 10
    while runners_in(world.work / "operations"):  # the runner dies with its controller
        assert time.monotonic() < deadline, "the runner outlived its controller"
        time.sleep(0.05)
    done = subprocess.run([sys.executable, "-c", KILLED_CREATE_INDEX, str(database)], check=False)
    assert done.returncode == -signal.SIGKILL
    assert Path(f"{database}-journal").stat().st_size > 0

    # The next pass recovers the journal (a step of its own, recorded), then observes and
    # plans afresh: the same plan, so the interrupted Apply applied none of it.
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert not Path(f"{database}-journal").exists()
    assert _index_names(database) == []
    status = world.status("orders")["status"]
    assert isinstance(status, dict)
    assert status["plan"]["id"] == plan
    last = status["lastApplied"]
    assert last["outcome"] == "Failed"
    assert last["settledBy"] == ("a fresh Observe and Plan: the same plan, so none of it applied")
    assert "the interrupted transaction was rolled back" in last["message"]
    assert "never started again" in status["conditions"][0]["message"]
    records = [
        json.loads(line.removeprefix(f"{RECORD_TRAILER}: "))
        for m in world.status_messages()
        for line in m.splitlines()
        if line.startswith(f"{RECORD_TRAILER}: ")
    ]
    kinds = sorted(r["type"] for r in records)
    assert kinds == ["dispatched", "recovered", "settled"]
    assert world.phases("orders").count("Applying") == 1

    # A new approval applies it; the run is recorded Applied, the database converged.
    world.approve("orders", plan)
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    assert _index_names(database) == ["items_name"]
