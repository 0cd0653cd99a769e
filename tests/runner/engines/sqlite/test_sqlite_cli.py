"""The SQLite engine through ``seshat-runner schema ...`` on real database files."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.runner_cli import RUNNER, RunnerCLI, write

from runner.digests import sha256_digest

BASE = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER REFERENCES customers (id),
    total NUMERIC,
    note TEXT
);
CREATE INDEX orders_customer_idx ON orders (customer_id);
CREATE VIEW big_orders AS SELECT id, total FROM orders WHERE total > 100;
CREATE TRIGGER orders_note AFTER INSERT ON orders WHEN new.note IS NULL BEGIN
    UPDATE orders SET note = 'none' WHERE id = new.id;
END;
"""
ROWS = """
INSERT INTO customers (id, email) VALUES (1, 'a@example.com'), (2, 'b@example.com');
INSERT INTO orders (id, customer_id, total, note) VALUES (1, 1, 150, 'x'), (2, 2, 50, 'y');
"""


@pytest.fixture
def runner() -> Iterator[RunnerCLI]:
    cli = RunnerCLI()
    yield cli
    assert cli.leaks() == []


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    run_sql(path, BASE + ROWS)
    return path


def run_sql(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.executescript(sql)
        conn.commit()
    finally:
        conn.close()


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute(sql).fetchall())
    finally:
        conn.close()


def schema_rows(path: Path) -> list[tuple[Any, ...]]:
    return query(path, "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY 1, 2")


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def plan(runner: RunnerCLI, path: Path, desired: Path, *extra: str, seed: str = "0") -> Any:
    return runner(
        "schema", "plan", "--url", url(path), "--desired", str(desired), *extra, seed=seed
    )


def apply(runner: RunnerCLI, path: Path, plan_file: Path, *extra: str) -> Any:
    return runner("schema", "apply", "--url", url(path), "--plan", str(plan_file), *extra)


def planned(runner: RunnerCLI, path: Path, desired: Path, out: Path, *extra: str) -> Any:
    result = plan(runner, path, desired, "--output", str(out), *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text())


def test_plan_apply_converge_and_stay_converged(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("note TEXT\n", "note TEXT,\n    shipped INTEGER NOT NULL DEFAULT 0\n")
        + "CREATE INDEX orders_total_idx ON orders (total);\n",
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert [s["sql"] for s in document["statements"]] == [
        'ALTER TABLE "orders" ADD COLUMN shipped INTEGER NOT NULL DEFAULT 0',
        "CREATE INDEX orders_total_idx ON orders ( total )",
    ]
    assert document["dialect"] == "sqlite" and document["server_major"] == 3
    applied = apply(
        runner,
        db,
        tmp_path / "plan.json",
        "--expect-digest",
        sha256_digest((tmp_path / "plan.json").read_bytes()),
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    report = json.loads(applied.stdout)
    assert report["converged"] is True and report["ran"] == [0, 1]
    assert query(db, "SELECT id, shipped FROM orders ORDER BY id") == [(1, 0), (2, 0)]
    again = plan(runner, db, desired)
    assert again.returncode == 0 and json.loads(again.stdout)["statements"] == []
    drift = runner("schema", "drift", "--url", url(db), "--desired", str(desired))
    assert drift.returncode == 0 and json.loads(drift.stdout)["total"] == 0
    inspected = runner("schema", "inspect", "--url", url(db))
    assert inspected.returncode == 0
    model = json.loads(inspected.stdout)
    assert model["dialect"] == "sqlite"
    assert "index:main.orders_total_idx" in model["indexes"]


def test_columns_whose_types_have_a_size_are_added_in_place(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    """SQLite keeps a column's type as written: added as the normalized ``varchar ( 50 )``,
    the type was not the desired ``varchar(50)``, and the dry run refused every such plan."""
    added = (
        'note TEXT,\n    code varchar(50),\n    "unit price" DECIMAL(10, 2) NOT NULL DEFAULT 0,\n'
        "    ratio numeric(5,3) COLLATE NOCASE\n"
    )
    desired = write(tmp_path / "schema.sql", BASE.replace("note TEXT\n", added))
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert [s["sql"] for s in document["statements"]] == [
        'ALTER TABLE "orders" ADD COLUMN code varchar(50)',
        'ALTER TABLE "orders" ADD COLUMN "unit price" DECIMAL(10, 2) NOT NULL DEFAULT 0',
        'ALTER TABLE "orders" ADD COLUMN ratio numeric(5,3) COLLATE NOCASE',
    ]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    types = query(db, "SELECT name, type FROM pragma_table_info('orders') ORDER BY cid")
    assert types[-3:] == [
        ("code", "varchar(50)"),
        ("unit price", "DECIMAL(10, 2)"),
        ("ratio", "numeric(5,3)"),
    ]
    again = plan(runner, db, desired)
    assert again.returncode == 0 and json.loads(again.stdout)["statements"] == []


def test_a_rebuild_keeps_rows_indexes_triggers_and_views(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("total NUMERIC", "total NUMERIC NOT NULL DEFAULT 0 CHECK (total >= 0)"),
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    statements = document["statements"]
    assert {s["op"] for s in statements} == {"rebuild_table"}
    assert [s["sql"].split(" (")[0] for s in statements[:2]] == [
        'CREATE TABLE "_seshat_new_orders"',
        'INSERT INTO "_seshat_new_orders"',
    ]
    assert [s["sql"] for s in statements[2:4]] == [
        'DROP TABLE "orders"',
        'ALTER TABLE "_seshat_new_orders" RENAME TO "orders"',
    ]
    codes = {h["code"] for h in statements[0]["hazards"]}
    assert {"TABLE_REBUILD", "DATA_DEPENDENT_CHECK", "DATA_DEPENDENT_NOT_NULL"} <= codes
    assert document["summary"]["destructive"] is False
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert query(db, "SELECT id, customer_id, total, note FROM orders ORDER BY id") == [
        (1, 1, 150, "x"),
        (2, 2, 50, "y"),
    ]
    names = {(kind, name) for kind, name, _, _ in schema_rows(db)}
    assert {
        ("index", "orders_customer_idx"),
        ("trigger", "orders_note"),
        ("view", "big_orders"),
    } <= names
    assert query(db, "SELECT id FROM big_orders") == [(1,)]
    run_sql(db, "INSERT INTO orders (id, customer_id, total) VALUES (3, 1, 5);")
    assert query(db, "SELECT note FROM orders WHERE id = 3") == [("none",)]
    assert query(db, "PRAGMA foreign_key_check") == []
    assert json.loads(plan(runner, db, desired).stdout)["statements"] == []


def test_column_reorder_is_a_rebuild(runner: RunnerCLI, db: Path, tmp_path: Path) -> None:
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("    total NUMERIC,\n    note TEXT\n", "    note TEXT,\n    total NUMERIC\n"),
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert {s["op"] for s in document["statements"]} == {"rebuild_table"}
    assert apply(runner, db, tmp_path / "plan.json").returncode == 0
    assert [r[1] for r in query(db, "PRAGMA table_info(orders)")] == [
        "id",
        "customer_id",
        "note",
        "total",
    ]
    assert query(db, "SELECT note, total FROM orders ORDER BY id") == [("x", 150), ("y", 50)]


def test_a_rebuild_that_breaks_a_foreign_key_changes_nothing(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("note TEXT\n", "note TEXT REFERENCES notes (body)\n")
        + "CREATE TABLE notes (body TEXT PRIMARY KEY);\n",
    )
    # The dry run copies the schema, never a row; the impact checks count the rows: 'x'
    # and 'y' have no parent note, so the plan is refused as certain to fail.
    refused = plan(runner, db, desired)
    assert refused.returncode == 1, refused.stderr
    assert "2 orphan rows (exact)" in json.loads(refused.stdout)["refusal"]["message"]
    # Unmeasured, the plan is made, and it says that it depends on the data.
    made = plan(runner, db, desired, "--impact", "off")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["summary"]["hazards"]["DATA_DEPENDENT_FK"] >= 1
    # Applied while rows dangle: the foreign key check fails and the apply is rolled back.
    planned(runner, db, desired, tmp_path / "plan.json", "--impact", "off")
    before = schema_rows(db)
    run_sql(db, "UPDATE orders SET note = 'dangling' WHERE id = 1;")
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 2
    report = json.loads(applied.stdout)
    assert report["converged"] is False and report["ran"] == []
    assert "foreign key check failed" in report["error"]
    assert report["failed"] is not None
    assert schema_rows(db) == before
    assert query(db, "SELECT count(*) FROM orders") == [(2,)]


def test_in_place_drop_column_and_destructive_refusal(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(tmp_path / "schema.sql", BASE.replace("    total NUMERIC,\n", ""))
    refused = plan(runner, db, desired)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["refusal"]["code"] == "destructive_disallowed"
    # The view names the dropped column's table: it is dropped and created again.
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("    total NUMERIC,\n", "").replace(
            "SELECT id, total FROM orders WHERE total > 100", "SELECT id FROM orders"
        ),
    )
    document = planned(runner, db, desired, tmp_path / "plan.json", "--allow-destructive")
    sql = [s["sql"] for s in document["statements"]]
    assert 'ALTER TABLE "orders" DROP COLUMN "total"' in sql
    assert document["summary"]["destructive"] is True
    assert apply(runner, db, tmp_path / "plan.json").returncode == 0
    assert [r[1] for r in query(db, "PRAGMA table_info(orders)")] == ["id", "customer_id", "note"]


def test_protected_tables_are_refused(runner: RunnerCLI, db: Path, tmp_path: Path) -> None:
    desired = write(tmp_path / "schema.sql", BASE.replace("note TEXT", "note TEXT NOT NULL"))
    result = plan(runner, db, desired, "--protected-table", "orders")
    assert result.returncode == 1
    assert json.loads(result.stdout)["refusal"]["code"] == "protected_table"


def test_stale_plans_and_digest_mismatches_are_refused(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(tmp_path / "schema.sql", BASE + "CREATE TABLE extra (id INTEGER);\n")
    planned(runner, db, desired, tmp_path / "plan.json")
    mismatch = apply(runner, db, tmp_path / "plan.json", "--expect-digest", "sha256:" + "0" * 64)
    assert mismatch.returncode == 1
    assert json.loads(mismatch.stdout)["refusal"]["code"] == "digest_mismatch"
    run_sql(db, "CREATE TABLE surprise (id INTEGER);")
    before = schema_rows(db)
    stale = apply(runner, db, tmp_path / "plan.json")
    assert stale.returncode == 1
    assert json.loads(stale.stdout)["refusal"]["code"] == "stale_plan"
    assert schema_rows(db) == before


def test_a_database_locked_by_another_writer_is_refused(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(tmp_path / "schema.sql", BASE + "CREATE TABLE extra (id INTEGER);\n")
    planned(runner, db, desired, tmp_path / "plan.json")
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        locked = apply(runner, db, tmp_path / "plan.json", "--lock-timeout", "1")
        assert locked.returncode == 1
        assert json.loads(locked.stdout)["refusal"]["code"] == "locked"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert apply(runner, db, tmp_path / "plan.json").returncode == 0


def test_plans_are_byte_identical_across_runs_and_hash_seeds(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("note TEXT", "note TEXT NOT NULL DEFAULT ''")
        + "CREATE TABLE a (x TEXT UNIQUE, y INTEGER CHECK (y > 0));\n"
        + "CREATE TABLE b (z INTEGER REFERENCES a (x));\n",
    )
    one = plan(runner, db, desired, "--output", str(tmp_path / "one.json"), "--no-cache", seed="1")
    two = plan(
        runner, db, desired, "--output", str(tmp_path / "two.json"), "--no-cache", seed="4242"
    )
    assert one.returncode == two.returncode == 0
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()


def test_drift_exit_codes(runner: RunnerCLI, db: Path, tmp_path: Path) -> None:
    same = write(tmp_path / "same.sql", BASE)
    assert runner("schema", "drift", "--url", url(db), "--desired", str(same)).returncode == 0
    other = write(
        tmp_path / "other.sql",
        BASE.replace("note TEXT", "note TEXT NOT NULL") + "CREATE TABLE missing (id INTEGER);",
    )
    result = runner("schema", "drift", "--url", url(db), "--desired", str(other))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["dialect"] == "sqlite"
    assert report["categories"]["missing"] == 1 and report["categories"]["changed"] == 1


def test_a_missing_file_plans_from_empty_but_is_not_created(
    runner: RunnerCLI, tmp_path: Path
) -> None:
    target = tmp_path / "new.db"
    desired = write(tmp_path / "schema.sql", BASE)
    document = planned(runner, target, desired, tmp_path / "plan.json")
    assert document["statements"][0]["op"] == "create_table"
    assert not target.exists()
    assert runner("schema", "inspect", "--url", url(target)).returncode == 2
    failed = apply(runner, target, tmp_path / "plan.json")
    assert failed.returncode == 2 and "no such SQLite database file" in failed.stderr
    assert not target.exists()
    target.touch()  # an empty file is an empty database
    assert apply(runner, target, tmp_path / "plan.json").returncode == 0
    assert json.loads(plan(runner, target, desired).stdout)["statements"] == []


def test_a_desired_schema_that_does_not_load_names_file_and_line(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(tmp_path / "schema.sql", BASE + "\nCREATE TABLE broken (id INTEGER,);\n")
    result = plan(runner, db, desired)
    assert result.returncode == 2
    assert "schema.sql:" in result.stderr


def test_op_plans_and_applies_a_sqlite_database(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    from runner.protocol.frame import Found, find_last_frame

    desired = write(tmp_path / "schema.sql", BASE + "CREATE TABLE extra (id INTEGER);\n")

    def op(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        path = write(tmp_path / f"{request['id']}.json", json.dumps(request))
        result = runner("op", "--input", str(path), env={"DB_URL": url(db)})
        frame = find_last_frame(result.stdout)
        assert isinstance(frame, Found), result.stdout + result.stderr
        return result.returncode, frame.payload

    status, payload = op(
        {"operation": "plan", "id": "p1", "url": {"from_env": "DB_URL"}, "desired": str(desired)}
    )
    assert status == 0, payload
    plan_file = write(tmp_path / "plan.json", "")
    plan_file.write_bytes(
        json.dumps(payload["result"]["plan"], sort_keys=True, separators=(",", ":")).encode()
        + b"\n"
    )
    assert sha256_digest(plan_file.read_bytes()) == payload["result"]["planDigest"]
    status, payload = op(
        {
            "operation": "apply",
            "id": "a1",
            "url": {"from_env": "DB_URL"},
            "plan": str(plan_file),
            "expect_digest": payload["result"]["planDigest"],
        }
    )
    assert status == 0, payload
    assert payload["result"]["apply"]["converged"] is True
    assert ("table", "extra") in {(k, n) for k, n, _, _ in schema_rows(db)}


def test_a_killed_apply_leaves_the_database_as_it_was(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    """Killed after its statements ran but before COMMIT: SQLite's journal undoes them."""
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("note TEXT\n", "note TEXT NOT NULL DEFAULT ''\n")
        + "CREATE TABLE extra (id INTEGER);\n",
    )
    planned(runner, db, desired, tmp_path / "plan.json")
    before = schema_rows(db)
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM orders").fetchall()  # a SHARED lock: COMMIT must wait
    process = subprocess.Popen(
        [*RUNNER, "schema", "apply", "--url", url(db), "--plan", str(tmp_path / "plan.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    try:
        journal = db.with_name(db.name + "-journal")
        deadline = time.monotonic() + 30
        while not journal.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert journal.exists(), "the apply never started writing"
        time.sleep(0.5)
        assert process.poll() is None, "the apply should be waiting to commit"
        process.send_signal(signal.SIGKILL)
        out, _ = process.communicate(timeout=30)
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    assert process.returncode == -signal.SIGKILL and out == b""  # killed: no report at all
    assert schema_rows(db) == before
    assert query(db, "SELECT count(*) FROM orders") == [(2,)]
    assert apply(runner, db, tmp_path / "plan.json").returncode == 0


def test_a_commit_blocked_by_a_reader_is_reported_and_rolled_back(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(tmp_path / "schema.sql", BASE + "CREATE TABLE extra (id INTEGER);\n")
    planned(runner, db, desired, tmp_path / "plan.json")
    before = schema_rows(db)
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM orders").fetchall()
        result = apply(runner, db, tmp_path / "plan.json", "--lock-timeout", "1")
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert report["failed"] == 0 and report["ran"] == [] and report["converged"] is False
    assert "could not commit" in report["error"]
    assert schema_rows(db) == before


def test_strict_and_without_rowid_are_switched_by_a_rebuild(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE);",
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE)"
            " STRICT, WITHOUT ROWID;",
        ),
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert {(s["op"], s["key"]) for s in document["statements"]} == {
        ("rebuild_table", "table:main.customers")
    }
    assert apply(runner, db, tmp_path / "plan.json").returncode == 0
    assert query(db, "SELECT strict, wr FROM pragma_table_list WHERE name = 'customers'") == [
        (1, 1)
    ]
    assert query(db, "SELECT id, email FROM customers ORDER BY id") == [
        (1, "a@example.com"),
        (2, "b@example.com"),
    ]
    assert query(db, "PRAGMA foreign_key_check") == []
    assert json.loads(plan(runner, db, desired).stdout)["statements"] == []


def test_managed_roles_and_ownership_are_refused_as_unsupported(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(tmp_path / "schema.sql", BASE)
    for option in (("--managed-role", "reader"), ("--manage-ownership",)):
        refused = plan(runner, db, desired, *option)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert json.loads(refused.stdout)["refusal"]["code"] == "unsupported_option"


# -- rename hints (runner/engines/renames.py) --------------------------------------------------


def test_rename_hints_keep_rows_through_a_rebuild(runner: RunnerCLI, tmp_path: Path) -> None:
    path = tmp_path / "renames.db"
    run_sql(
        path,
        "CREATE TABLE old_accounts (id INTEGER PRIMARY KEY, user_name TEXT, age INT);"
        "CREATE INDEX old_accounts_age ON old_accounts (age);"
        "INSERT INTO old_accounts VALUES (1, 'ada', 36);",
    )
    desired = write(
        tmp_path / "schema.sql",
        'CREATE TABLE "accounts" ( -- @renamed from=old_accounts\n'
        "  id INTEGER PRIMARY KEY,\n"
        "  username TEXT NOT NULL DEFAULT '', -- @renamed from=\"user_name\"\n"
        "  age INT\n);\n"
        "CREATE INDEX accounts_age /* @renamed from=old_accounts_age */ ON accounts (age);\n",
    )
    document = planned(runner, path, desired, tmp_path / "plan.json", "--no-cache")
    assert [s["sql"] for s in document["statements"]] == [
        "PRAGMA legacy_alter_table = OFF",
        'ALTER TABLE "old_accounts" RENAME TO "accounts"',
        "PRAGMA legacy_alter_table = ON",
        'ALTER TABLE "accounts" RENAME COLUMN "user_name" TO "username"',
        'CREATE TABLE "_seshat_new_accounts" ( -- @renamed from=old_accounts\n'
        "  id INTEGER PRIMARY KEY,\n"
        "  username TEXT NOT NULL DEFAULT '', -- @renamed from=\"user_name\"\n"
        "  age INT\n)",
        'INSERT INTO "_seshat_new_accounts" ("id", "username", "age") '
        'SELECT "id", "username", "age" FROM "accounts"',
        'DROP TABLE "accounts"',
        'ALTER TABLE "_seshat_new_accounts" RENAME TO "accounts"',
        # SQLite cannot rename an index: the rebuild creates it under its new name
        "CREATE INDEX accounts_age ON accounts ( age )",
    ]
    assert document["summary"]["destructive"] is False
    other_seed = plan(runner, path, desired, "--no-cache", seed="777")
    assert other_seed.stdout.encode() == (tmp_path / "plan.json").read_bytes()
    applied = apply(runner, path, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True
    assert query(path, "SELECT id, username, age FROM accounts") == [(1, "ada", 36)]
    again = plan(runner, path, desired)
    assert again.returncode == 0 and json.loads(again.stdout)["statements"] == []


def test_rename_hint_from_a_column_that_still_exists_is_refused(
    runner: RunnerCLI, tmp_path: Path
) -> None:
    path = tmp_path / "conflict.db"
    run_sql(path, "CREATE TABLE users (id INT, username TEXT, user_name TEXT);")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE users (\n  id INT,\n  username TEXT,\n"
        "  user_name VARCHAR(100) -- @renamed from=username\n);",
    )
    result = plan(runner, path, desired)
    assert result.returncode == 2
    assert (
        "schema.sql:4: cannot rename column 'username' to 'user_name' - "
        "column 'username' still exists" in result.stderr
    )


def test_a_rename_hint_is_read_even_when_the_desired_model_is_cached(
    runner: RunnerCLI, tmp_path: Path
) -> None:
    path = tmp_path / "cached.db"
    run_sql(path, "CREATE TABLE t (id INT, a TEXT); INSERT INTO t VALUES (1, 'x');")
    desired = write(tmp_path / "schema.sql", "CREATE TABLE t (id INT, b TEXT\n);")
    dropped = plan(runner, path, desired, "--allow-destructive")
    assert [s["op"] for s in json.loads(dropped.stdout)["statements"]] == [
        "drop_column",
        "add_column",
    ]
    # The same model, but the hint changes the plan: only a comment differs.
    write(tmp_path / "schema.sql", "CREATE TABLE t (id INT, b TEXT -- @renamed from=a\n);")
    for _ in range(2):  # the second plan finds the desired model and the verdict cached
        renamed = plan(runner, path, desired, "--output", str(tmp_path / "plan.json"))
        assert renamed.returncode == 0, renamed.stderr
        statements = json.loads((tmp_path / "plan.json").read_text())["statements"]
        assert [s["sql"] for s in statements] == ['ALTER TABLE "t" RENAME COLUMN "a" TO "b"']
    applied = apply(runner, path, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert query(path, "SELECT id, b FROM t") == [(1, "x")]
    assert json.loads(plan(runner, path, desired).stdout)["statements"] == []


def test_a_renamed_table_takes_views_triggers_and_foreign_keys_along(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace(
            "CREATE TABLE customers (", "CREATE TABLE clients /* @renamed from=customers */ ("
        )
        .replace("REFERENCES customers (id)", "REFERENCES clients (id)")
        .replace(
            "CREATE VIEW big_orders AS SELECT id, total", "CREATE VIEW big_orders AS SELECT id"
        )
        + "CREATE VIEW client_emails AS SELECT email FROM clients;\n",
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    # Without legacy_alter_table the rename rewrites what names the table.
    assert [s["sql"] for s in document["statements"]][:3] == [
        "PRAGMA legacy_alter_table = OFF",
        'ALTER TABLE "customers" RENAME TO "clients"',
        "PRAGMA legacy_alter_table = ON",
    ]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True
    assert query(db, "SELECT id, email FROM clients ORDER BY id") == [
        (1, "a@example.com"),
        (2, "b@example.com"),
    ]
    assert query(db, "SELECT count(*) FROM orders JOIN clients ON clients.id = customer_id") == [
        (2,)
    ]
    assert query(db, "PRAGMA foreign_key_check") == []
    again = plan(runner, db, desired)
    assert again.returncode == 0 and json.loads(again.stdout)["statements"] == []


def test_skip_drops_keeps_what_only_the_file_has_unless_a_rebuild_would_lose_it(
    runner: RunnerCLI, db: Path, tmp_path: Path
) -> None:
    # Only in the database: orders.note, the index, the view and the trigger.
    without = (
        BASE.replace("    total NUMERIC,\n    note TEXT\n", "    total NUMERIC\n")
        .replace("CREATE INDEX orders_customer_idx ON orders (customer_id);\n", "")
        .split("CREATE VIEW")[0]
    )
    desired = write(tmp_path / "schema.sql", without + "CREATE TABLE audit (id INTEGER);\n")
    before = schema_rows(db)
    document = planned(runner, db, desired, tmp_path / "plan.json", "--skip-drops")
    assert document["drops"] == "skip"
    assert [(s["op"], s["key"]) for s in document["skipped"]] == [
        ("drop_column", "column:main.orders.note"),
        ("drop_index", "index:main.orders_customer_idx"),
        ("drop_definition", "trigger:main.orders_note"),
        ("drop_definition", "view:main.big_orders"),
    ]
    assert [(s["op"], s["key"]) for s in document["statements"]] == [
        ("create_table", "table:main.audit")
    ]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    after = schema_rows(db)
    assert [r for r in after if r[1] != "audit"] == before  # every object as it was
    assert query(db, "SELECT note FROM orders ORDER BY id") == [("x",), ("y",)]
    again = json.loads(plan(runner, db, desired, "--skip-drops").stdout)
    assert again["statements"] == [] and again["skipped"] == document["skipped"]

    # A table SQLite must rebuild is made from the desired CREATE TABLE, which has no note:
    # keeping it is refused, never lost in the rebuild.
    rebuilt = write(tmp_path / "rebuilt.sql", desired.read_text().replace(
        "total NUMERIC\n", "total NUMERIC NOT NULL DEFAULT 0\n"
    ))  # fmt: skip
    refused = plan(runner, db, rebuilt, "--skip-drops")
    assert refused.returncode == 1, refused.stderr
    refusal = json.loads(refused.stdout)["refusal"]
    assert refusal["code"] == "unsupported_change"
    assert "column:main.orders.note" in refusal["message"]
