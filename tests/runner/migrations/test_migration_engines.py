"""Migrations on a real MariaDB, ``migrations baseline`` and ``mark`` on real PostgreSQL and
SQLite, and the ``history`` / ``migrate`` operations of ``seshat-runner op``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from harness.mariadb import MariaDBDatabase, MariaDBServer, temporary_mariadb_database
from harness.postgres import PostgresDatabase, PostgresServer, temporary_postgres_database
from harness.runner_cli import RunnerCLI

from runner.migrations.files import read_directory
from runner.protocol.frame import Found, find_last_frame


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _json(done: Any) -> dict[str, Any]:
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_mariadb_records_progress_statement_by_statement(
    mariadb_server: MariaDBServer, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[mariadb_server.app_password])
    env = {"DB_URL": mariadb_database.url_with_password}
    folder = _write(
        tmp_path / "m",
        {
            "1_items.sql": "CREATE TABLE items (id INT PRIMARY KEY);\n",
            "2_trigger.sql": (
                "DELIMITER //\n"
                "CREATE TRIGGER items_guard BEFORE INSERT ON items FOR EACH ROW\n"
                "BEGIN\n  IF NEW.id < 0 THEN SET NEW.id = 0; END IF;\nEND//\n"
                "DELIMITER ;\n"
            ),
            "3_broken.sql": (
                "CREATE TABLE orders (id INT PRIMARY KEY);\n"
                "ALTER TABLE nowhere ADD COLUMN x INT;\n"
                "CREATE TABLE never (id INT);\n"
            ),
        },
    )

    def up() -> tuple[int, dict[str, Any]]:
        done = runner("migrations", "up", "--url-env", "DB_URL", "--dir", str(folder), env=env)
        return done.returncode, _json(done)

    code, report = up()
    # DDL commits implicitly on MariaDB: the first statement of 3 stays, so the run is Partial.
    assert (code, report["outcome"], report["applied"]) == (2, "Partial", ["1", "2"])
    assert (report["failed"], report["statement"], report["statementsApplied"]) == ("3", 2, 1)
    with mariadb_database.connect_as_app() as conn, conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        assert {r[0] for r in cur.fetchall()} == {"items", "orders", "seshat_schema_migrations"}
        cur.execute("INSERT INTO items VALUES (-5)")
        cur.execute("SELECT id FROM items")
        assert cur.fetchall() == ((0,),)  # the DELIMITER-block trigger is in place
        cur.execute(
            "SELECT version, state, statements_applied, statements_total "
            "FROM seshat_schema_migrations ORDER BY version"
        )
        assert cur.fetchall() == (
            ("1", "applied", 1, 1),
            ("2", "applied", 1, 1),
            ("3", "failed", 1, 3),
        )
    status = runner("migrations", "status", "--url-env", "DB_URL", "--dir", str(folder), env=env)
    assert status.returncode == 1 and status.stdout.startswith("dirty: 3")
    assert "1 of 3 statements" in status.stdout

    # A person repairs it: undo what ran, fix the file, mark the row absent, apply again.
    with mariadb_database.connect_as_app() as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE orders")
    (folder / "3_broken.sql").write_text("CREATE TABLE orders (id INT PRIMARY KEY);\n")
    mark = runner(
        "migrations", "mark", "--url-env", "DB_URL", "--version", "3", "--as", "absent", env=env
    )
    assert mark.returncode == 0, mark.stderr
    code, report = up()
    assert (code, report["outcome"], report["applied"]) == (0, "Applied", ["3"])
    assert up()[1]["outcome"] == "UpToDate"
    verdict = _verdict(runner, "DB_URL", folder, env)
    assert (verdict["verdict"], verdict["currentVersion"]) == ("nothing_pending", "3")
    assert runner.leaks() == []


def test_mariadb_first_statement_failing_leaves_no_row(
    mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI()
    env = {"DB_URL": mariadb_database.url_with_password}
    folder = _write(tmp_path / "m", {"1_bad.sql": "ALTER TABLE nowhere ADD COLUMN x INT;\n"})
    done = runner("migrations", "up", "--url-env", "DB_URL", "--dir", str(folder), env=env)
    assert (done.returncode, _json(done)["outcome"]) == (2, "Failed")
    status = runner("migrations", "status", "--url-env", "DB_URL", "--dir", str(folder), env=env)
    assert status.returncode == 0 and status.stdout.startswith("ready: 1")


def _verdict(runner: RunnerCLI, url_env: str, folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """``migrations status --format json`` of the database in ``$url_env``."""
    done = runner(
        "migrations",
        "status",
        "--url-env",
        url_env,
        "--dir",
        str(folder),
        "--format",
        "json",
        env=env,
    )
    assert done.returncode in (0, 1), done.stderr
    return _json(done)


def _pg_env(live: PostgresDatabase, shadow: PostgresDatabase) -> dict[str, str]:
    return {"LIVE_URL": live.url_with_password, "SHADOW_URL": shadow.url_with_password}


def test_baseline_records_only_a_matching_schema(
    postgres_server: PostgresServer, postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[postgres_server.app_password])
    folder = _write(
        tmp_path / "m",
        {
            "1_items.sql": "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);\n",
            "2_index.sql": "CREATE INDEX items_name ON items (name);\n",
            "3_later.sql": "ALTER TABLE items ADD COLUMN price numeric;\n",
        },
    )
    with postgres_database.connect_as_app() as conn:  # built by hand, long ago
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    args = ["migrations", "baseline", "--url-env", "LIVE_URL", "--dir", str(folder)]

    with temporary_postgres_database(postgres_server) as shadow:
        env = _pg_env(postgres_database, shadow)
        done = runner(*args, "--shadow-url-env", "SHADOW_URL", "--to", "2", env=env)
        result = _json(done)
        assert (done.returncode, result["matched"]) == (1, False)
        assert result["totalDifferences"] >= 2  # NOT NULL and the index are missing
        assert "nothing was recorded" in done.stderr
    assert _verdict(runner, "LIVE_URL", folder, env)["pending"] == ["1", "2", "3"]

    with postgres_database.connect_as_app() as conn:
        conn.execute("ALTER TABLE items ALTER COLUMN name SET NOT NULL")
        conn.execute("CREATE INDEX items_name ON items (name)")
    with temporary_postgres_database(postgres_server) as shadow:
        env = _pg_env(postgres_database, shadow)
        done = runner(*args, "--shadow-url-env", "SHADOW_URL", "--to", "2", env=env)
        assert (done.returncode, _json(done)["matched"], _json(done)["versions"]) == (
            0,
            True,
            ["1", "2"],
        )
        again = runner(*args, "--shadow-url-env", "SHADOW_URL", env=env)
        assert again.returncode == 1 and _json(again)["refusal"]["code"] == "history_present"
    verdict = _verdict(runner, "LIVE_URL", folder, env)
    assert (verdict["verdict"], verdict["pending"]) == ("ready", ["3"])
    assert runner.leaks() == []


def test_baseline_refuses_a_password_on_the_command_line(tmp_path: Path) -> None:
    runner = RunnerCLI(secrets=["hunter2"])
    folder = _write(tmp_path / "m", {"1_t.sql": "CREATE TABLE t (id INTEGER);\n"})
    live = tmp_path / "live.db"
    sqlite3.connect(live).close()
    done = runner(
        "migrations",
        "baseline",
        "--url",
        f"sqlite:///{live}",
        "--dir",
        str(folder),
        "--shadow-url",
        "postgresql://app:hunter2@127.0.0.1:1/x",
    )
    assert done.returncode == 2 and "refusing a credential" in done.stderr
    assert runner.leaks() == []


def test_sqlite_baseline_of_an_existing_file(tmp_path: Path) -> None:
    runner = RunnerCLI()
    folder = _write(
        tmp_path / "m", {"1_t.sql": "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);\n"}
    )
    live, shadow = tmp_path / "live.db", tmp_path / "shadow.db"
    conn = sqlite3.connect(live)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.close()
    sqlite3.connect(shadow).close()
    done = runner(
        "migrations",
        "baseline",
        "--url",
        f"sqlite:///{live}",
        "--dir",
        str(folder),
        "--shadow-url",
        f"sqlite:///{shadow}",
    )
    assert (done.returncode, _json(done)["matched"]) == (0, True), done.stderr
    rows = (
        sqlite3.connect(live)
        .execute("SELECT version, state, operation_id FROM seshat_schema_migrations")
        .fetchall()
    )
    assert [(v, s) for v, s, _ in rows] == [("1", "applied")]
    assert rows[0][2] == _json(done)["operationId"]


def _op(runner: RunnerCLI, tmp_path: Path, env: dict[str, str], **fields: Any) -> dict[str, Any]:
    path = tmp_path / f"op-{len(runner.outputs)}.json"
    path.write_text(json.dumps({"url": {"from_env": "DB_URL"}, **fields}))
    done = runner("op", "--input", str(path), env=env)
    frame = find_last_frame(done.stdout)
    assert isinstance(frame, Found), done.stdout + done.stderr
    return frame.payload


def test_history_and_migrate_operations(mariadb_server: MariaDBServer, tmp_path: Path) -> None:
    runner = RunnerCLI(secrets=[mariadb_server.app_password])
    folder = _write(
        tmp_path / "m",
        {"1_a.sql": "CREATE TABLE a (id INT);\n", "2_b.sql": "CREATE TABLE b (id INT);\n"},
    )
    files = read_directory(folder)
    with temporary_mariadb_database(mariadb_server) as database:
        env = {"DB_URL": database.url_with_password}
        history = _op(runner, tmp_path, env, operation="history", id="h1", migrations=str(folder))
        found = history["result"]["history"]
        assert (found["verdict"], found["pending"]) == ("ready", ["1", "2"])
        assert found["pendingChecksums"] == [[f.version, f.checksum] for f in files]
        assert history["target_identity"].startswith("sha256:")

        # An approved sequence that is not what is pending now changes nothing.
        moved = _op(
            runner,
            tmp_path,
            env,
            operation="migrate",
            id="m0",
            migrations=str(folder),
            expect_pending=[[files[1].version, files[1].checksum]],
        )
        assert moved["error"]["code"] == "plan_refused"
        assert moved["error"]["message"].startswith("history_moved")

        applied = _op(
            runner,
            tmp_path,
            env,
            operation="migrate",
            id="0123456789abcdef",
            migrations=str(folder),
            expect_pending=found["pendingChecksums"],
        )
        assert applied["result"]["migrate"]["outcome"] == "Applied"
        with database.connect_as_app() as conn, conn.cursor() as cur:
            cur.execute("SELECT DISTINCT operation_id FROM seshat_schema_migrations")
            assert cur.fetchall() == (("0123456789abcdef",),)
        after = _op(runner, tmp_path, env, operation="history", id="h2", migrations=str(folder))
        assert after["result"]["history"]["verdict"] == "nothing_pending"
        assert after["result"]["history"]["fingerprint"] != found["fingerprint"]
    assert runner.leaks() == []
