"""The migration lifecycle end to end: real Git, signed OCI layouts, real SQLite,
PostgreSQL and MariaDB, the real runner; each test asserts the database, the status and Git."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.executors import HookedExecutor
from harness.mariadb import MariaDBDatabase
from harness.pids import kill_processes_in
from harness.postgres import PostgresDatabase
from harness.reconcile_world import World, migration_yaml, schema_yaml, tables
from harness.sshkeys import SSHKeyFactory

from gitops.execution.executor import EnvValue
from gitops.reconcile.passes import run_pass
from runner.protocol.messages import OperationInput

V1 = {
    "1_items.sql": "CREATE TABLE items (id INTEGER PRIMARY KEY);\n",
    "2_name.sql": "ALTER TABLE items ADD COLUMN name TEXT;\n",
}


def _status(world: World, name: str) -> dict[str, Any]:
    status = world.status(name)["status"]
    assert isinstance(status, dict)
    return status


def _ready(world: World, name: str) -> str:
    return str(_status(world, name)["conditions"][0]["message"])


def _rows(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT version, state FROM seshat_schema_migrations ORDER BY CAST(version AS INTEGER)"
        ).fetchall()
    conn.close()
    return [(str(v), str(s)) for v, s in rows]


def _declare(world: World, name: str, layout: Path, **options: Any) -> None:
    world.remote.write_file(
        f"databases/{name}/migrations.yaml", migration_yaml(name, layout, **options)
    )
    world.remote.commit_all(f"declare {name}")


def test_both_families_side_by_side_plan_approve_apply_in_sync(world: World) -> None:
    schema_layout = world.artifact("schema", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    world.database("catalog")
    billing = world.database("billing")
    world.remote.write_file("databases/catalog/schema.yaml", schema_yaml("catalog", schema_layout))
    files = {
        **V1,
        "2_name.sql": "-- windows line endings\r\nALTER TABLE items ADD COLUMN name TEXT;\r\n",
    }
    _declare(world, "billing", world.migrations("m1", files))

    assert world.reconcile() == {
        "shop/catalog": "AwaitingApproval/AwaitingApproval",
        "shop/billing": "AwaitingApproval/AwaitingApproval",
    }
    status = _status(world, "billing")
    assert status["history"]["verdict"] == "ready"
    assert status["history"]["pendingVersions"] == ["1", "2"]
    plan_id = status["plan"]["id"]
    plan = json.loads(world.show("seshat/status", status["plan"]["path"]))
    assert [f["version"] for f in plan["files"]] == ["1", "2"]
    # Checksums of the bytes as written, CRLF and all, after the trip through the artifact.
    assert [f["checksum"] for f in plan["files"]] == [
        "sha256:" + hashlib.sha256(text.encode()).hexdigest() for text in files.values()
    ]
    assert "CREATE" not in json.dumps(plan)  # a migration plan carries no SQL
    assert tables(billing) == []  # nothing runs before an approval
    shown = world.seshat("plan", "show", "shop/billing", "--repo", world.remote.remote_url)
    assert shown.returncode == 0, shown.stderr
    assert f"plan id      {plan_id} (verified)" in shown.stdout
    assert "1_items.sql" in shown.stdout and "2_name.sql" in shown.stdout
    listed = world.seshat("status", "--repo", world.remote.remote_url)
    row = next(line for line in listed.stdout.splitlines() if "shop/billing" in line)
    assert "ready pending 1, 2" in row and "AwaitingApproval" in row

    # The same inputs make the same plan, byte for byte; nothing new is committed.
    commits = len(world.status_log())
    world.reconcile()
    assert _status(world, "billing")["plan"]["id"] == plan_id
    assert len(world.status_log()) == commits

    world.approve("billing", plan_id)
    assert world.reconcile()["shop/billing"] == "InSync/InSync"
    assert _rows(billing) == [("1", "applied"), ("2", "applied")]
    status = _status(world, "billing")
    assert status["lastApplied"]["outcome"] == "Applied"
    assert status["lastApplied"]["appliedVersions"] == ["1", "2"]
    assert status["history"]["verdict"] == "nothing_pending"
    assert "plan" not in status
    listed = world.seshat("status", "--repo", world.remote.remote_url)
    row = next(line for line in listed.stdout.splitlines() if "shop/billing" in line)
    assert "nothing_pending at 2" in row
    assert world.status_log()[:2] == [
        "shop/billing: Applying -> InSync",
        "shop/billing: AwaitingApproval -> Applying",
    ]
    # The schema resource is unaffected and still waits for its own approval.
    assert _status(world, "catalog")["phase"] == "AwaitingApproval"

    # A new version in a new artifact: a new plan of exactly that file.
    _declare(
        world,
        "billing",
        world.migrations(
            "m2", {**files, "3_price.sql": "ALTER TABLE items ADD COLUMN price REAL;\n"}
        ),
    )
    assert world.reconcile()["shop/billing"] == "AwaitingApproval/AwaitingApproval"
    assert _status(world, "billing")["history"]["pendingVersions"] == ["3"]
    # The old approval names another plan: it authorizes nothing.
    assert _rows(billing)[-1] == ("2", "applied")

    review = world.show("seshat/review/shop/billing", ".seshat/reviews/shop/billing.md")
    assert "apply, in order, `3`" in review and "seshat approve shop/billing" in review


def test_every_blocking_verdict_from_a_real_history(world: World) -> None:
    database = world.database("ledger")
    _declare(world, "ledger", world.migrations("a", V1), apply="Always")
    assert world.reconcile() == {"shop/ledger": "InSync/InSync"}

    modified = {**V1, "2_name.sql": "ALTER TABLE items ADD COLUMN name TEXT; -- edited\n"}
    _declare(world, "ledger", world.migrations("b", modified), apply="Always")
    assert world.reconcile() == {"shop/ledger": "Blocked/ChecksumModified"}
    assert _status(world, "ledger")["history"]["involvedVersions"] == ["2"]
    listed = world.seshat("status", "--repo", world.remote.remote_url)
    assert "checksum_modified at 2 (2)" in listed.stdout  # the verdict and the file involved

    _declare(
        world, "ledger", world.migrations("c", {"1_items.sql": V1["1_items.sql"]}), apply="Always"
    )
    assert world.reconcile() == {"shop/ledger": "Blocked/DatabaseAhead"}

    early = {**V1, "0_early.sql": "CREATE TABLE early (id INTEGER);\n"}
    _declare(world, "ledger", world.migrations("d", early), apply="Always")
    assert world.reconcile() == {"shop/ledger": "Blocked/HistoryOutOfOrder"}
    assert "early" not in tables(database)
    _declare(
        world, "ledger", world.migrations("d2", early), apply="Always", extra=", outOfOrder: true"
    )
    assert world.reconcile() == {"shop/ledger": "InSync/InSync"}
    assert "early" in tables(database)

    with sqlite3.connect(database) as conn:  # a row a crashed tool left half-done
        conn.execute("UPDATE seshat_schema_migrations SET state = 'running' WHERE version = '2'")
    conn.close()
    assert world.reconcile() == {"shop/ledger": "Blocked/HistoryDirty"}
    assert "see docs/migrations.md" in _ready(world, "ledger")

    # Blocked refreshes on its interval through the whole read-only pipeline: once the row
    # is repaired the same declaration reads InSync without anyone touching it.
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE seshat_schema_migrations SET state = 'applied' WHERE version = '2'")
    conn.close()
    assert world.reconcile() == {"shop/ledger": "InSync/InSync"}


def test_a_schema_artifact_never_stands_in_for_migrations(world: World) -> None:
    layout = world.artifact("s", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    database = world.database("ledger")
    _declare(world, "ledger", layout, apply="Always")
    assert world.reconcile() == {"shop/ledger": "Blocked/ArtifactRefused"}
    assert "wrong_artifact_type" in _ready(world, "ledger")
    assert tables(database) == []


class _MovesHistoryFirst(HookedExecutor):
    """The real executor, but before the migrate operation another writer (this test,
    standing in for a person or tool on the same database) applies version 2 by hand."""

    def __init__(self, work_dir: Path, database: Path) -> None:
        super().__init__(work_dir)
        self.database = database

    def before(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        (request, *_) = requests
        if request.operation == "migrate":
            with sqlite3.connect(self.database) as conn:
                conn.execute("ALTER TABLE items ADD COLUMN name TEXT")
                conn.execute(
                    "INSERT INTO seshat_schema_migrations SELECT '2', 'name', ?, "
                    "'sha256-bytes-v1', 'applied', 1, 1, '2026-01-01T00:00:00Z', 0, 'x', 'by-hand'",
                    (next(c for v, c in request.expect_pending or [] if v == "2"),),
                )
            conn.close()


def test_the_history_moving_between_approval_and_apply_changes_nothing(world: World) -> None:
    database = world.database("ledger")
    three = {**V1, "3_price.sql": "ALTER TABLE items ADD COLUMN price REAL;\n"}
    _declare(
        world, "ledger", world.migrations("a", {"1_items.sql": V1["1_items.sql"]}), apply="Always"
    )
    assert world.reconcile() == {"shop/ledger": "InSync/InSync"}
    _declare(world, "ledger", world.migrations("b", three))
    assert world.reconcile()["shop/ledger"] == "AwaitingApproval/AwaitingApproval"
    world.approve("ledger", _status(world, "ledger")["plan"]["id"])

    executor = _MovesHistoryFirst(world.work / "operations", database)
    report = run_pass(world.remote.remote_url, world.work, executor=executor)
    assert (report.phases["shop/ledger"], report.reasons["shop/ledger"]) == (
        "Failed",
        "ApplyFailed",
    )
    assert "history_moved" in _ready(world, "ledger")
    with sqlite3.connect(database) as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(items)")]
    conn.close()
    assert columns == ["id", "name"]  # 3 was not applied: the approved sequence was 2, 3
    assert _rows(database) == [("1", "applied"), ("2", "applied")]
    # The next pass reads the history again: only 3 is pending, under a new plan.
    assert world.reconcile()["shop/ledger"] == "AwaitingApproval/AwaitingApproval"
    assert _status(world, "ledger")["history"]["pendingVersions"] == ["3"]


def test_a_failing_postgresql_file_rolls_back_and_is_retried_after_a_fix(
    world: World, postgres_database: PostgresDatabase
) -> None:
    world.monkeypatch.setenv("ORDERS_URL", postgres_database.url_with_password)
    broken = {
        "1_items.sql": "CREATE TABLE items (id int PRIMARY KEY);\n",
        "2_orders.sql": "CREATE TABLE orders (id int);\nALTER TABLE nowhere ADD COLUMN x int;\n",
    }
    _declare(world, "orders", world.migrations("a", broken), engine="postgresql", apply="Always")
    assert world.reconcile() == {"shop/orders": "Failed/ApplyFailed"}
    status = _status(world, "orders")
    assert status["lastApplied"]["outcome"] == "Failed"
    assert status["lastApplied"]["appliedVersions"] == ["1"]
    assert "version 2 failed at statement 2 and was rolled back" in status["lastApplied"]["message"]
    assert "unresolvedRun" not in status
    with postgres_database.connect_as_app() as conn:
        assert conn.execute("SELECT to_regclass('orders')").fetchone() == (None,)
        assert conn.execute("SELECT version FROM seshat_schema_migrations").fetchall() == [("1",)]

    fixed = {**broken, "2_orders.sql": "CREATE TABLE orders (id int);\n"}
    _declare(world, "orders", world.migrations("b", fixed), engine="postgresql", apply="Always")
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    with postgres_database.connect_as_app() as conn:
        assert conn.execute("SELECT to_regclass('orders')").fetchone() == ("orders",)

    # The password reached only the runner: not Git (any branch), not the controller's files.
    password = postgres_database.url_with_password.split(":")[2].split("@")[0]
    everything = world.git("log", "-p", "--all")
    assert "shop/orders: Failed (ApplyFailed)" in everything and password not in everything
    for path in world.work.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".yaml", ".sql", ".md"):
            assert password not in path.read_text(errors="replace"), path


def test_a_partial_mariadb_run_blocks_until_acknowledged(
    world: World, mariadb_database: MariaDBDatabase
) -> None:
    world.monkeypatch.setenv("SHOP_URL", mariadb_database.url_with_password)
    broken = {
        "1_items.sql": "CREATE TABLE items (id INT PRIMARY KEY);\n",
        "2_orders.sql": (
            "CREATE TABLE orders (id INT PRIMARY KEY);\n"
            "ALTER TABLE nowhere ADD COLUMN x INT;\n"
            "CREATE TABLE never (id INT);\n"
        ),
    }
    _declare(world, "shop", world.migrations("a", broken), engine="mysql", apply="Always")
    assert world.reconcile() == {"shop/shop": "Blocked/RunUnresolved"}
    status = _status(world, "shop")
    run = status["unresolvedRun"]
    assert run["outcome"] == "Partial" and run["targetIdentityDigest"].startswith("sha256:")
    operation = run["operationId"]
    assert "seshat acknowledge shop/shop --operation " + operation in _ready(world, "shop")
    listed = world.seshat("status", "--repo", world.remote.remote_url)
    assert f"unresolved Partial run {operation} " in listed.stdout

    def show_tables() -> set[str]:
        with mariadb_database.connect_as_app() as conn, conn.cursor() as cur:
            cur.execute("SHOW TABLES")
            return {r[0] for r in cur.fetchall()}

    assert show_tables() == {"items", "orders", "seshat_schema_migrations"}

    # A retry never clears it, even with apply: Always and a fixed artifact.
    fixed = {**broken, "2_orders.sql": "CREATE TABLE orders (id INT PRIMARY KEY);\n"}
    _declare(world, "shop", world.migrations("b", fixed), engine="mysql", apply="Always")
    assert world.reconcile() == {"shop/shop": "Blocked/RunUnresolved"}

    # The person repairs the database (undoes the statement that ran, marks the row absent)
    # and acknowledges the run; the history is read again and 2 is planned afresh.
    with mariadb_database.connect_as_app() as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE orders")
        cur.execute("DELETE FROM seshat_schema_migrations WHERE version = '2'")
    _declare(world, "shop", world.migrations("c", fixed), engine="mysql")
    assert world.reconcile() == {"shop/shop": "Blocked/RunUnresolved"}  # ready, not settled
    world.acknowledge("shop", operation)  # dropped orders, deleted the row
    assert world.reconcile() == {"shop/shop": "AwaitingApproval/AwaitingApproval"}
    status = _status(world, "shop")
    assert "unresolvedRun" not in status and status["history"]["pendingVersions"] == ["2"]
    world.approve("shop", status["plan"]["id"])
    assert world.reconcile() == {"shop/shop": "InSync/InSync"}
    assert show_tables() == {"items", "orders", "seshat_schema_migrations"}


def test_a_runner_killed_during_an_apply_is_unknown_and_never_rerun(world: World) -> None:
    database = world.database("ledger")
    _declare(world, "ledger", world.migrations("a", V1), apply="Always", extra=", lockTimeout: 60s")
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the Apply waits on SQLite's write lock
    outcome: dict[str, str] = {}
    thread = threading.Thread(target=lambda: outcome.update(world.reconcile()))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while "Applying" not in world.phases("ledger"):
            assert thread.is_alive() and time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(1.0)  # the runner has started and waits for the lock
        assert kill_processes_in(world.work / "operations") >= 1
        thread.join(60)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert outcome == {"shop/ledger": "Blocked/RunUnresolved"}
    run = _status(world, "ledger")["unresolvedRun"]
    assert run["outcome"] == "Unknown"
    assert tables(database) == []

    # Nothing ran, so 1 and 2 are still pending; that is not "nothing pending", and the run
    # is never started again.
    assert world.reconcile() == {"shop/ledger": "Blocked/RunUnresolved"}
    assert tables(database) == []
    assert world.phases("ledger").count("Applying") == 1

    world.acknowledge("ledger", run["operationId"])
    # The same plan was dispatched once: even apply: Always needs a new approval now.
    assert world.reconcile() == {"shop/ledger": "AwaitingApproval/AwaitingApproval"}
    assert "dispatched before" in _ready(world, "ledger")
    world.approve("ledger", _status(world, "ledger")["plan"]["id"])
    assert world.reconcile() == {"shop/ledger": "InSync/InSync"}
    assert _rows(database) == [("1", "applied"), ("2", "applied")]


def test_an_acknowledgment_by_someone_not_allowed_settles_nothing(
    world: World, ssh_key_factory: SSHKeyFactory
) -> None:
    database = world.database("ledger")
    stepwise = {
        "1_items.sql": (
            "-- seshat:no-transaction\n"
            "CREATE TABLE items (id INTEGER);\n"
            "INSERT INTO nowhere VALUES (1);\n"
        ),
    }
    _declare(world, "ledger", world.migrations("a", stepwise), apply="Always")
    assert world.reconcile() == {"shop/ledger": "Blocked/RunUnresolved"}
    run = _status(world, "ledger")["unresolvedRun"]
    assert run["outcome"] == "Partial"
    mallory = ssh_key_factory("mallory@example.com")
    world.acknowledge("ledger", run["operationId"], key=mallory.private_key)
    assert world.reconcile() == {"shop/ledger": "Blocked/RunUnresolved"}
    assert _rows(database) == [("1", "failed")]


def test_a_suspended_migration_runs_nothing_until_resumed(world: World) -> None:
    database = world.database("ledger")
    layout = world.migrations("a", V1)
    declaration = migration_yaml("ledger", layout, apply="Always")
    world.remote.write_file("databases/ledger/migrations.yaml", declaration + "  suspend: true\n")
    world.remote.commit_all("declare ledger, suspended")
    assert world.reconcile() == {"shop/ledger": "Suspended/Suspended"}
    assert tables(database) == []
    _declare(world, "ledger", layout, apply="Always")  # resumed
    assert world.reconcile() == {"shop/ledger": "InSync/InSync"}
    assert _rows(database) == [("1", "applied"), ("2", "applied")]
