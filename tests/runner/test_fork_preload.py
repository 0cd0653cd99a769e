"""A runner forked from the fork server imports nothing: every module a plan of each dialect
needs was imported once by the server (``runner.forks.prepare``, its ``PRELOAD``).

A module left out is imported again by every forked runner: sqlglot, which the SQLite
engine's SQL reader imports on first use, cost each forked SQLite runner about 90 ms of CPU
until it was preloaded. Each probe is a fresh interpreter that prepares as the server does,
then runs a real ``op`` plan (what the control plane asks a forked runner for) against a
real database, and lists what the plan imported (codecs, which the interpreter's codec
registry loads on first use, aside). A runner started afresh still imports lazily:
``test_op_imports.py``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from harness.mariadb import MariaDBDatabase
from harness.postgres import PostgresDatabase

from runner.protocol.frame import Found, find_last_frame

PROBE = """
import json, os, sys
from runner.forks import prepare
prepare()
before = set(sys.modules)
leave = os._exit
def listed_then_exit(status):
    with open(os.environ["PROBE_OUTPUT"], "w") as listed:
        json.dump(sorted(set(sys.modules) - before), listed)
    leave(status)
os._exit = listed_then_exit
from runner.cli import main
sys.argv = ["seshat-runner", *sys.argv[1:]]
main()
"""

DESIRED = "CREATE TABLE items (id integer PRIMARY KEY, name varchar(50));\n"


def _imported_by_a_plan(tmp_path: Path, url: str) -> list[str]:
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text(DESIRED)
    request = tmp_path / "plan.json"
    request.write_text(
        json.dumps(
            {
                "operation": "plan",
                "id": "plan",
                "url": {"from_env": "DB_URL"},
                "desired": str(desired),
            }
        )
    )
    listed = tmp_path / "imported.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "op", "--input", str(request)],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "DB_URL": url,
            "PROBE_OUTPUT": str(listed),
            "SESHAT_CACHE_DIR": str(tmp_path / "cache"),
        },
        check=False,
    )
    frame = find_last_frame(done.stdout)
    assert isinstance(frame, Found) and "result" in frame.payload, done.stdout + done.stderr
    imported: list[str] = json.loads(listed.read_text())
    return [name for name in imported if not name.startswith("encodings.")]


def test_a_forked_sqlite_plan_imports_nothing(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "app.db") as conn:
        conn.execute("CREATE TABLE items (id integer PRIMARY KEY)")
    conn.close()
    assert _imported_by_a_plan(tmp_path, f"sqlite:///{tmp_path / 'app.db'}") == []


@pytest.mark.parametrize("fixture", ["postgres_database", "mariadb_database"])
def test_a_forked_server_plan_imports_nothing(
    tmp_path: Path, fixture: str, request: pytest.FixtureRequest
) -> None:
    database: PostgresDatabase | MariaDBDatabase = request.getfixturevalue(fixture)
    assert _imported_by_a_plan(tmp_path, database.url_with_password) == []
