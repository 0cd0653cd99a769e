"""``seshat-runner migrations status|up`` on real SQLite files and a real PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from harness.postgres import PostgresDatabase
from harness.runner_cli import RunnerCLI

from runner.migrations.files import read_directory


@pytest.fixture
def runner() -> RunnerCLI:
    return RunnerCLI(secrets=[])


def _db(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "app.db"
    sqlite3.connect(path).close()
    return f"sqlite:///{path}", path


def _tables(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    names = [
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
    ]
    conn.close()
    return names


Answer = tuple[int, dict[str, Any]]


def _status(runner: RunnerCLI, url: str, folder: Path, *extra: str) -> Answer:
    done = runner(
        "migrations", "status", "--url", url, "--dir", str(folder), "--format", "json", *extra
    )
    return done.returncode, json.loads(done.stdout)


def _up(runner: RunnerCLI, url: str, folder: Path, *extra: str) -> Answer:
    done = runner("migrations", "up", "--url", url, "--dir", str(folder), *extra)
    return done.returncode, json.loads(done.stdout)


def test_every_verdict_from_a_real_sqlite_history(runner: RunnerCLI, tmp_path: Path) -> None:
    url, _ = _db(tmp_path)
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "1_create_items.up.sql").write_text("CREATE TABLE items (id INTEGER PRIMARY KEY);\n")
    (folder / "1_create_items.down.sql").write_text("DROP TABLE items;\n")
    (folder / "2_add_name.sql").write_text("ALTER TABLE items ADD COLUMN name TEXT;\n")
    (folder / "notes.txt").write_text("ignored\n")

    code, verdict = _status(runner, url, folder)
    assert (code, verdict["verdict"], verdict["pending"]) == (0, "ready", ["1", "2"])
    code, report = _up(runner, url, folder)
    assert (code, report["outcome"], report["applied"]) == (0, "Applied", ["1", "2"])
    code, verdict = _status(runner, url, folder)
    assert (code, verdict["verdict"], verdict["currentVersion"]) == (0, "nothing_pending", "2")
    assert _up(runner, url, folder)[1]["outcome"] == "UpToDate"

    # A pending version below the highest applied one.
    (folder / "0_early.sql").write_text("CREATE TABLE early (id INTEGER);\n")
    code, verdict = _status(runner, url, folder)
    assert (code, verdict["verdict"], verdict["versions"]) == (1, "out_of_order", ["0"])
    assert _status(runner, url, folder, "--out-of-order")[1]["verdict"] == "ready"
    (folder / "0_early.sql").unlink()

    # An applied file edited afterwards (even one byte), and refused by up.
    original = (folder / "2_add_name.sql").read_bytes()
    (folder / "2_add_name.sql").write_bytes(original.replace(b"\n", b"\r\n"))
    code, verdict = _status(runner, url, folder)
    assert (code, verdict["verdict"], verdict["versions"]) == (1, "checksum_modified", ["2"])
    code, refusal = _up(runner, url, folder)
    assert code == 1 and refusal["refusal"]["code"] == "checksum_modified"
    (folder / "2_add_name.sql").write_bytes(original)

    # The database has a version the directory lacks.
    (folder / "2_add_name.sql").unlink()
    code, verdict = _status(runner, url, folder)
    assert (code, verdict["verdict"], verdict["versions"]) == (1, "database_ahead", ["2"])
    (folder / "2_add_name.sql").write_bytes(original)


def test_failed_partial_and_a_moved_history(runner: RunnerCLI, tmp_path: Path) -> None:
    url, path = _db(tmp_path)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "1_base.sql").write_text("CREATE TABLE a (id INTEGER PRIMARY KEY);\n")
    (folder / "2_broken.sql").write_text(
        "CREATE TABLE b (id INTEGER);\nINSERT INTO missing VALUES (1);\n"
    )
    code, report = _up(runner, url, folder)
    assert (code, report["outcome"], report["applied"], report["failed"]) == (
        2,
        "Failed",
        ["1"],
        "2",
    )
    assert report["statement"] == 2
    assert "b" not in _tables(path)  # nothing of the failing file was committed
    assert _status(runner, url, folder)[1]["pending"] == ["2"]
    (folder / "2_broken.sql").write_text("CREATE TABLE b (id INTEGER);\n")  # fixed, retried
    assert _up(runner, url, folder)[1]["outcome"] == "Applied"

    # A no-transaction file failing midway: Partial, and the history is dirty.
    (folder / "3_stepwise.sql").write_text(
        "-- seshat:no-transaction\nCREATE TABLE c (id INTEGER);\nINSERT INTO nowhere VALUES (1);\n"
    )
    code, report = _up(runner, url, folder)
    assert (code, report["outcome"], report["statementsApplied"]) == (2, "Partial", 1)
    assert "c" in _tables(path)
    code, verdict = _status(runner, url, folder)
    assert (code, verdict["verdict"], verdict["versions"]) == (1, "dirty", ["3"])

    # The approved sequence differs from what is pending now: nothing is changed.
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    code, refusal = _up(runner, f"sqlite:///{other}", folder, "--expect-pending", "1,2")
    assert code == 1 and refusal["refusal"]["code"] == "history_moved"
    assert _tables(other) == []


def test_checksums_are_of_the_bytes_as_stored(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    data = b"-- a comment\r\nCREATE TABLE t (id int);\r\n"
    (folder / "001_t.sql").write_bytes(data)
    first = read_directory(folder)[0]
    assert first.checksum == "sha256:" + hashlib.sha256(data).hexdigest()
    assert read_directory(folder)[0].checksum == first.checksum
    assert first.version == "001" and first.transactional


def test_postgresql_dollar_quotes_and_rollback(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    runner = RunnerCLI(secrets=[postgres_database.server.app_password])
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "1_function.sql").write_text(
        "CREATE TABLE items (id int PRIMARY KEY);\n"
        "CREATE FUNCTION touch() RETURNS int LANGUAGE plpgsql AS $body$\n"
        "BEGIN\n  RETURN 1; -- a semicolon; inside the body\nEND;\n$body$;\n"
    )
    (folder / "2_broken.sql").write_text("CREATE TABLE b (id int);\nSELECT * FROM nowhere;\n")
    env = {"DB_URL": postgres_database.url_with_password}
    done = runner("migrations", "up", "--url-env", "DB_URL", "--dir", str(folder), env=env)
    report = json.loads(done.stdout)
    assert (done.returncode, report["outcome"], report["applied"]) == (2, "Failed", ["1"])
    with postgres_database.connect_as_app() as conn:
        assert conn.execute("SELECT touch()").fetchone() == (1,)
        assert conn.execute("SELECT to_regclass('b')").fetchone() == (None,)
        versions = conn.execute("SELECT version, state FROM seshat_schema_migrations").fetchall()
    assert versions == [("1", "applied")]
    status = runner("migrations", "status", "--url-env", "DB_URL", "--dir", str(folder), env=env)
    assert status.returncode == 0 and status.stdout.startswith("ready: 2")
    assert runner.leaks() == []


def test_a_fresh_database_starts_from_the_newest_checkpoint(
    runner: RunnerCLI, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "1_items.sql").write_text("CREATE TABLE items (id INTEGER PRIMARY KEY);\n")
    (folder / "2_name.sql").write_text("ALTER TABLE items ADD COLUMN name TEXT;\n")
    (folder / "3_squashed.checkpoint.sql").write_text(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n"
    )
    (folder / "4_price.sql").write_text("ALTER TABLE items ADD COLUMN price REAL;\n")

    # Fresh: the checkpoint and what is above it, not every file (4 files, 2 pending).
    fresh_url, fresh = _db(tmp_path)
    code, verdict = _status(runner, fresh_url, folder)
    assert (code, verdict["verdict"], verdict["pending"]) == (0, "ready", ["3", "4"])
    assert (verdict["checkpointVersion"], verdict["covered"]) == ("3", ["1", "2"])
    assert _up(runner, fresh_url, folder)[1]["applied"] == ["3", "4"]
    code, verdict = _status(runner, fresh_url, folder)
    assert (verdict["verdict"], verdict["covered"]) == ("nothing_pending", ["1", "2"])
    rows = sqlite3.connect(fresh).execute("SELECT version FROM seshat_schema_migrations")
    assert sorted(r[0] for r in rows) == ["3", "4"]  # covered files get no row of their own

    # A database with a history ignores the checkpoint and runs the files it lacks.
    other = tmp_path / "older.db"
    sqlite3.connect(other).close()
    older_url = f"sqlite:///{other}"
    only_first = tmp_path / "first"
    only_first.mkdir()
    (only_first / "1_items.sql").write_bytes((folder / "1_items.sql").read_bytes())
    assert _up(runner, older_url, only_first)[1]["applied"] == ["1"]
    code, verdict = _status(runner, older_url, folder)
    assert (verdict["verdict"], verdict["pending"], verdict["checkpointVersion"]) == (
        "ready",
        ["2", "4"],
        None,
    )
    assert _up(runner, older_url, folder)[1]["applied"] == ["2", "4"]
    columns = [r[1] for r in sqlite3.connect(other).execute("PRAGMA table_info(items)")]
    assert columns == ["id", "name", "price"]
