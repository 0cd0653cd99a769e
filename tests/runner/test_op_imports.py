"""``seshat-runner op`` imports only what the operation needs.

A reconciliation pass starts a runner process per operation, and for a converged database
most of that process's life is importing. So the runner promises: no command-line framework
for ``op`` (click, rich), no driver of another dialect, and, for a SQLite database whose
catalog is unchanged since it was last read, no SQL parser (sqlglot): its model comes from
the planning cache. Each case runs the real runner under ``python -X importtime``, which
names every module a process imports (the runner leaves by ``os._exit``, so nothing can be
asked of the process at exit).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.protocol.frame import Found, find_last_frame

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = """
CREATE TABLE owners (id INTEGER PRIMARY KEY AUTOINCREMENT, email TEXT NOT NULL UNIQUE
                     COLLATE NOCASE);
CREATE TABLE items (id INTEGER PRIMARY KEY, owner INTEGER REFERENCES owners (id),
                    name TEXT NOT NULL CHECK (length(name) < 200), price INTEGER DEFAULT 0);
CREATE INDEX items_price ON items (price) WHERE price > 0;
CREATE VIEW cheap AS SELECT id, name FROM items WHERE price < 10;
"""
NEVER_FOR_OP = {"click", "rich"}  # the command-line framework: `op` is served without it
RUNNER = [sys.executable, "-X", "importtime", "-c", "from runner.cli import main; main()"]


def _imports(stderr: str) -> set[str]:
    """Every module ``-X importtime`` says the process imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip()
            if name != "imported package":  # the header line
                names.add(name)
    return names


def _op(tmp_path: Path, request: dict[str, Any], url: str) -> tuple[dict[str, Any], set[str]]:
    """Run ``request`` with this checkout's runner, as the control plane starts it: the
    frame's payload and the modules imported."""
    path = tmp_path / f"{request['id']}.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    env = {**os.environ, "DB_URL": url, "SESHAT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("SESHAT_NO_CACHE", None)
    done = subprocess.run(
        [*RUNNER, "op", "--input", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,  # `python -c` imports this checkout's runner
        timeout=120,
    )
    frame = find_last_frame(done.stdout)
    assert isinstance(frame, Found), done.stdout + done.stderr[-2000:]
    return frame.payload, _imports(done.stderr)


def _packages(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.fixture
def database(tmp_path: Path) -> tuple[Path, str]:
    """A SQLite database and a folder declaring exactly its schema."""
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text(SCHEMA, encoding="utf-8")
    with sqlite3.connect(tmp_path / "app.db") as conn:
        conn.executescript(SCHEMA)
    conn.close()
    return desired, f"sqlite:///{tmp_path / 'app.db'}"


@pytest.mark.parametrize("operation", ["drift", "plan"])
def test_an_unchanged_sqlite_database_is_answered_without_a_parser(
    tmp_path: Path, database: tuple[Path, str], operation: str
) -> None:
    desired, url = database
    request = {"operation": operation, "url": {"from_env": "DB_URL"}, "desired": str(desired)}
    first, cold = _op(tmp_path, {**request, "id": "first"}, url)
    second, warm = _op(tmp_path, {**request, "id": "second"}, url)
    assert "error" not in first and first["result"] == second["result"]
    if operation == "drift":
        assert first["result"]["drift"]["total"] == 0
    else:
        assert first["result"]["plan"]["statements"] == []
    assert "runner.engines.sqlite.engine" in cold & warm
    # The first run read the catalog and the desired files: it needed the tokenizer.
    assert "sqlglot" in _packages(cold)
    assert _packages(cold) & ({"psycopg", "pymysql"} | NEVER_FOR_OP) == set()
    # The second found both models in the planning cache: no parser, no other driver.
    assert _packages(warm) & ({"sqlglot", "psycopg", "pymysql"} | NEVER_FOR_OP) == set()


@pytest.mark.parametrize(
    ("url", "engine", "foreign"),
    [
        ("postgresql://app@127.0.0.1:1/app", "postgresql", {"pymysql", "sqlglot"}),
        ("mysql://app@127.0.0.1:1/app", "mysql", {"psycopg", "sqlglot"}),
        ("sqlite:///{tmp}/missing.db", "sqlite", {"psycopg", "pymysql", "sqlglot"}),
    ],
)
def test_an_operation_loads_its_own_engine_only(
    tmp_path: Path, url: str, engine: str, foreign: set[str]
) -> None:
    """An inspect that cannot connect (port 1, a missing file) has still loaded its engine:
    it loaded no other dialect's driver, and no parser it did not use."""
    request = {"operation": "inspect", "id": "inspect", "url": {"from_env": "DB_URL"}}
    payload, modules = _op(tmp_path, request, url.format(tmp=tmp_path))
    assert payload["error"]["code"] == "cannot_connect", payload
    assert f"runner.engines.{engine}.engine" in modules
    assert _packages(modules) & (foreign | NEVER_FOR_OP) == set()
