"""A SQLite write killed midway: Observe names it, ``recover`` settles it, nothing else does.

The interrupted write is real: a process that builds an index with a five-page cache (so
its changes reach the file before the commit, behind a rollback journal) and SIGKILLs
itself before it commits.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.runner_cli import RUNNER, RunnerCLI, write

from runner.protocol.frame import Found, find_last_frame

KILLED_CREATE_INDEX = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 5")
conn.execute("BEGIN")
conn.execute("CREATE INDEX items_name ON items (name)")
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_create_index(path: Path) -> None:
    """A table of 60,000 rows, then a CREATE INDEX on it killed before its commit."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO items (name) VALUES (?)", ((f"item-{i:08d}",) for i in range(60_000))
    )
    conn.execute("COMMIT")
    conn.close()
    done = subprocess.run([sys.executable, "-c", KILLED_CREATE_INDEX, str(path)], check=False)
    assert done.returncode == -9
    assert Path(f"{path}-journal").stat().st_size > 0


def op(tmp_path: Path, database: Path, operation: str, **fields: Any) -> tuple[int, Any]:
    request = {
        "operation": operation,
        "id": f"{operation}-1",
        "url": {"from_env": "DB_URL"},
        **fields,
    }
    path = write(tmp_path / f"{operation}.json", json.dumps(request))
    result = RunnerCLI()("op", "--input", str(path), env={"DB_URL": f"sqlite:///{database}"})
    frame = find_last_frame(result.stdout)
    assert isinstance(frame, Found), result.stdout + result.stderr
    return result.returncode, frame.payload


def desired(tmp_path: Path) -> str:
    folder = tmp_path / "desired"
    folder.mkdir(exist_ok=True)
    (folder / "schema.sql").write_text(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
        "CREATE INDEX items_name ON items (name);\n"
    )
    return str(folder)


def indexes(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'").fetchall()
    finally:
        conn.close()
    return [row[0] for row in rows]


def test_a_killed_create_index_is_named_by_observe_and_rolled_back_by_recover(
    tmp_path: Path,
) -> None:
    database = tmp_path / "app.db"
    killed_create_index(database)

    status, payload = op(tmp_path, database, "drift", desired=desired(tmp_path))
    assert status == 2
    error = payload["error"]
    assert (error["code"], error["reason"]) == ("recovery_needed", "recovery_rollback_journal")
    assert "hot rollback journal" in error["message"]
    assert "readonly" not in error["message"]
    assert Path(f"{database}-journal").exists()  # a reader changed nothing

    status, payload = op(tmp_path, database, "recover")
    assert status == 0, payload
    assert payload["result"]["recovery"] == {
        "found": "rollback_journal",
        "recovered": True,
        "detail": "the interrupted transaction was rolled back (its partial work undone)",
        "leftovers": [],
    }
    assert not Path(f"{database}-journal").exists()
    assert indexes(database) == []  # the killed CREATE INDEX left nothing

    status, payload = op(tmp_path, database, "drift", desired=desired(tmp_path))
    assert status == 0, payload
    assert payload["result"]["drift"]["categories"]["missing"] == 1

    status, payload = op(tmp_path, database, "recover")  # a second recovery finds nothing
    assert status == 0
    assert payload["result"]["recovery"]["found"] == "none"


def test_a_runner_that_cannot_write_names_the_steps_for_a_person(tmp_path: Path) -> None:
    """The runner runs as a user that may read the file and not write it (``nobody``
    when the suite runs as root, whom file modes do not stop)."""
    shared = Path(tempfile.mkdtemp(prefix="seshat-recovery-"))
    try:
        shared.chmod(0o755)
        database = shared / "app.db"
        killed_create_index(database)
        database.chmod(0o644)
        Path(f"{database}-journal").chmod(0o644)
        request = {"operation": "recover", "id": "recover-1", "url": {"from_env": "DB_URL"}}
        path = write(shared / "recover.json", json.dumps(request))
        path.chmod(0o644)
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        env = {**os.environ, "DB_URL": f"sqlite:///{database}", "HOME": str(shared)}
        env["SESHAT_CACHE_DIR"] = str(shared / "cache")
        done = subprocess.run(
            [*(prefix if os.geteuid() == 0 else []), *RUNNER, "op", "--input", str(path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=shared,
            timeout=120,
            check=False,
        )
        frame = find_last_frame(done.stdout)
        assert isinstance(frame, Found), done.stdout + done.stderr
        error = frame.payload["error"]
        assert done.returncode == 2
        assert error["code"] == "not_writable"
        assert f"sqlite3 {database} 'PRAGMA quick_check;'" in error["message"]
        assert Path(f"{database}-journal").exists()  # nothing was touched
    finally:
        shutil.rmtree(shared)
