"""``transactionMode`` reaches the runner, and the runner keeps its own deadline: the
``migrate`` and ``history`` operations of ``seshat-runner op`` against real PostgreSQL and
MariaDB, and a schema plan's mode against real PostgreSQL."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness.mariadb import MariaDBDatabase, MariaDBServer
from harness.postgres import PostgresDatabase, PostgresServer
from harness.runner_cli import RunnerCLI

from runner.migrations.files import read_directory
from runner.protocol.frame import Found, find_last_frame

FILES = {
    "1_items.sql": "CREATE TABLE items (id INT PRIMARY KEY);\n",
    "2_broken.sql": "CREATE TABLE orders (id INT PRIMARY KEY);\nALTER TABLE nowhere ADD x INT;\n",
}


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "migrations"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _op(runner: RunnerCLI, tmp_path: Path, env: dict[str, str], **fields: Any) -> dict[str, Any]:
    path = tmp_path / f"op-{len(runner.outputs)}.json"
    path.write_text(json.dumps({"url": {"from_env": "DB_URL"}, **fields}))
    done = runner("op", "--input", str(path), env=env)
    frame = find_last_frame(done.stdout)
    assert isinstance(frame, Found), done.stdout + done.stderr
    return frame.payload


def _migrate(
    runner: RunnerCLI, tmp_path: Path, env: dict[str, str], folder: Path, mode: str
) -> dict[str, Any]:
    pending = [[f.version, f.checksum] for f in read_directory(folder)]
    return _op(
        runner,
        tmp_path,
        env,
        operation="migrate",
        id=f"run-{mode}",
        migrations=str(folder),
        expect_pending=pending,
        settings={"transaction_mode": mode},
    )


def _pg_tables(database: PostgresDatabase) -> set[str]:
    with database.connect_as_app() as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {r[0] for r in rows}


def test_all_rolls_back_every_file_when_the_second_fails_on_postgresql(
    postgres_server: PostgresServer, postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[postgres_server.app_password])
    env = {"DB_URL": postgres_database.url_with_password}
    folder = _folder(tmp_path, FILES)

    answer = _migrate(runner, tmp_path, env, folder, "all")

    report = answer["result"]["migrate"]
    assert (report["outcome"], report["failed"], report["applied"]) == ("Failed", "2", [])
    # Nothing of the run stays: not file 1, not its history row.
    assert _pg_tables(postgres_database) <= {"seshat_schema_migrations"}
    history = _op(runner, tmp_path, env, operation="history", id="h", migrations=str(folder))
    assert history["result"]["history"]["pending"] == ["1", "2"]
    assert runner.leaks() == []


def test_file_keeps_the_first_file_when_the_second_fails_on_postgresql(
    postgres_server: PostgresServer, postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[postgres_server.app_password])
    env = {"DB_URL": postgres_database.url_with_password}
    folder = _folder(tmp_path, FILES)

    answer = _migrate(runner, tmp_path, env, folder, "file")

    report = answer["result"]["migrate"]
    assert (report["outcome"], report["failed"], report["applied"]) == ("Failed", "2", ["1"])
    assert _pg_tables(postgres_database) == {"items", "seshat_schema_migrations"}
    history = _op(runner, tmp_path, env, operation="history", id="h", migrations=str(folder))
    assert history["result"]["history"]["pending"] == ["2"]


def test_none_runs_statement_by_statement_on_postgresql(
    postgres_server: PostgresServer, postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[postgres_server.app_password])
    env = {"DB_URL": postgres_database.url_with_password}
    folder = _folder(tmp_path, FILES)

    report = _migrate(runner, tmp_path, env, folder, "none")["result"]["migrate"]

    # File 2's first statement committed on its own: a Partial run, never rolled back.
    assert (report["outcome"], report["failed"], report["statementsApplied"]) == ("Partial", "2", 1)
    assert "orders" in _pg_tables(postgres_database)


def test_all_is_refused_on_mariadb_before_anything_runs(
    mariadb_server: MariaDBServer, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[mariadb_server.app_password])
    env = {"DB_URL": mariadb_database.url_with_password}
    folder = _folder(tmp_path, FILES)

    history = _op(
        runner,
        tmp_path,
        env,
        operation="history",
        id="h",
        migrations=str(folder),
        settings={"transaction_mode": "all"},
    )
    applied = _migrate(runner, tmp_path, env, folder, "all")

    for answer in (history, applied):
        assert answer["error"]["code"] == "plan_refused"
        assert answer["error"]["reason"] == "transaction_mode_unsupported"
        assert "commits every DDL statement" in answer["error"]["message"]
    with mariadb_database.connect_as_app() as conn, conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        assert cur.fetchall() == ()  # not even the revision table


def test_file_keeps_the_first_file_on_mariadb(
    mariadb_server: MariaDBServer, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[mariadb_server.app_password])
    env = {"DB_URL": mariadb_database.url_with_password}
    folder = _folder(tmp_path, FILES)

    report = _migrate(runner, tmp_path, env, folder, "file")["result"]["migrate"]

    assert report["applied"] == ["1"] and report["failed"] == "2"
    with mariadb_database.connect_as_app() as conn, conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        assert {r[0] for r in cur.fetchall()} >= {"items"}


def test_a_migration_past_its_deadline_is_stopped_by_the_runner_and_rolled_back(
    postgres_server: PostgresServer, postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[postgres_server.app_password])
    env = {"DB_URL": postgres_database.url_with_password}
    folder = _folder(
        tmp_path,
        {"1_slow.sql": "CREATE TABLE slow (id INT);\nSELECT pg_sleep(60);\n"},
    )
    pending = [[f.version, f.checksum] for f in read_directory(folder)]

    started = time.monotonic()
    answer = _op(
        runner,
        tmp_path,
        env,
        operation="migrate",
        id="slow-run",
        migrations=str(folder),
        expect_pending=pending,
        deadline_seconds=2,
    )

    assert time.monotonic() - started < 30  # the runner stopped itself, long before pg_sleep
    assert answer["error"]["code"] == "deadline_exceeded"
    assert "deadline of 2 s" in answer["error"]["message"]
    # The statement was cancelled in the server and the file's transaction rolled back.
    assert "slow" not in _pg_tables(postgres_database)
    with postgres_database.connect_as_app() as conn:
        busy = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'"
        ).fetchone()
    assert busy == (0,)


def test_schema_mode_all_refuses_a_plan_that_cannot_be_one_transaction(
    postgres_server: PostgresServer, postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[postgres_server.app_password])
    env = {"DB_URL": postgres_database.url_with_password}
    with postgres_database.connect_as_app() as conn:
        conn.execute("CREATE TABLE items (id INT PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO items VALUES (1, 'a')")
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text(
        "CREATE TABLE items (id INT PRIMARY KEY, name TEXT);\n"
        "CREATE INDEX items_name ON items (name);\n"
    )

    def plan(mode: str) -> dict[str, Any]:
        return _op(
            runner,
            tmp_path,
            env,
            operation="plan",
            id=f"plan-{mode}",
            desired=str(desired),
            settings={"transaction_mode": mode},
        )

    auto = plan("auto")
    statements = auto["result"]["plan"]["statements"]
    # An index on a table that holds rows is built CONCURRENTLY: never inside a transaction.
    assert [s["transactional"] for s in statements] == [False]
    refused = plan("all")
    assert refused["error"]["code"] == "plan_refused"
    assert refused["error"]["reason"] == "transaction_mode_unsupported"
    assert "statement(s) 1 cannot run inside a transaction" in refused["error"]["message"]
    # A plan whose statements can all be one transaction is accepted in mode all.
    (desired / "more.sql").write_text("CREATE TABLE tags (id INT PRIMARY KEY);\n")
    (desired / "schema.sql").write_text("CREATE TABLE items (id INT PRIMARY KEY, name TEXT);\n")
    assert plan("all")["result"]["plan"]["statements"]


def test_schema_modes_an_engine_cannot_honour_are_refused_before_planning(
    mariadb_server: MariaDBServer, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text("CREATE TABLE items (id INT PRIMARY KEY);\n")
    sqlite_file = tmp_path / "orders.db"
    sqlite_file.touch()
    runner = RunnerCLI(secrets=[mariadb_server.app_password])
    cases = [
        (mariadb_database.url_with_password, "all", "its DDL commits implicitly"),
        (f"sqlite:///{sqlite_file}", "none", "a table rebuild is only safe so"),
    ]
    for url, mode, why in cases:
        answer = _op(
            runner,
            tmp_path,
            {"DB_URL": url},
            operation="plan",
            id=f"plan-{mode}",
            desired=str(desired),
            settings={"transaction_mode": mode},
        )
        assert answer["error"]["reason"] == "transaction_mode_unsupported", answer
        assert why in answer["error"]["message"]
    assert runner.leaks() == []


def _apply_plan_in_mode(
    runner: RunnerCLI, tmp_path: Path, env: dict[str, str], desired: Path, mode: str
) -> dict[str, Any]:
    """Plan ``desired`` in ``mode``, then (after the caller's data change) apply it."""
    from runner.digests import sha256_digest
    from runner.engines.plan import plan_bytes
    from runner.protocol.results import PlanResult

    planned = _op(
        runner,
        tmp_path,
        env,
        operation="plan",
        id=f"plan-{mode}",
        desired=str(desired),
        settings={"transaction_mode": mode},
    )
    data = plan_bytes(PlanResult.model_validate(planned["result"]).plan)
    plan_file = tmp_path / f"plan-{mode}.json"
    plan_file.write_bytes(data)
    return {"plan": str(plan_file), "expect_digest": sha256_digest(data)}


def test_schema_mode_none_keeps_what_ran_before_a_failure_and_auto_keeps_nothing(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """A CHECK added to a table with rows is added NOT VALID, then validated; a row that
    breaks it, written after the plan was made, fails the validation. In ``auto`` the plan's
    statements are one transaction and nothing stays; in ``none`` each ran on its own."""
    from harness.postgres import temporary_postgres_database

    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text(
        "CREATE TABLE items (id INT PRIMARY KEY, name TEXT,\n"
        "  CONSTRAINT named CHECK (name <> 'x'));\n"
        "CREATE TABLE tags (id INT PRIMARY KEY);\n"
    )
    runner = RunnerCLI(secrets=[postgres_server.app_password])
    kept: dict[str, set[str]] = {}
    for mode in ("auto", "none"):
        with temporary_postgres_database(postgres_server) as database:
            env = {"DB_URL": database.url_with_password}
            with database.connect_as_app() as conn:
                conn.execute("CREATE TABLE items (id INT PRIMARY KEY, name TEXT)")
                conn.execute("INSERT INTO items VALUES (1, 'a')")
            fields = _apply_plan_in_mode(runner, tmp_path, env, desired, mode)
            with database.connect_as_app() as conn:
                conn.execute("INSERT INTO items VALUES (2, 'x')")  # data, not schema
            applied = _op(
                runner,
                tmp_path,
                env,
                operation="apply",
                id=f"apply-{mode}",
                settings={"transaction_mode": mode},
                **fields,
            )
            assert applied["result"]["apply"]["failed"] is not None, applied
            kept[mode] = _pg_tables(database)
    assert kept["auto"] == {"items"}  # rolled back with the validation
    assert kept["none"] == {"items", "tags"}  # committed before the validation failed
