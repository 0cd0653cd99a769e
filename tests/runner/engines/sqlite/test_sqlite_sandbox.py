"""Planning never writes to a SQLite target: the desired SQL runs in an in-memory sandbox that
can reach no file, and the dry run copies the schema, never a row.

Each attack is a valid desired schema plus statements that reach outside an in-memory
database in plain SQLite; the live file must be byte-identical afterwards, no other file may
appear, and the plan is refused with a stable reason or made without effect.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from harness.runner_cli import RunnerCLI, write

BASE = "CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL);\n"

ATTACKS = {
    "attach the live file": "ATTACH '{live}' AS l; DELETE FROM l.accounts;",
    "attach a new file": "ATTACH '{other}' AS o; CREATE TABLE o.t (a);",
    "vacuum into a file": "VACUUM INTO '{other}';",
    "load an extension": "SELECT load_extension('{other}');",
    "temp files elsewhere": "PRAGMA temp_store_directory = '{folder}';",
    "edit the schema table": "PRAGMA writable_schema = ON;",
    "a query that never ends": (
        "CREATE TABLE forever AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
        "FROM c) SELECT x FROM c;"
    ),
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_in_the_desired_schema_never_reaches_a_file(
    attack: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = tmp_path / "app.db"
    conn = sqlite3.connect(live)
    conn.executescript(BASE + "INSERT INTO accounts VALUES (1, 'alice'), (2, 'bob');")
    conn.close()
    other = tmp_path / "other.db"
    statement = ATTACKS[attack].format(live=live, other=other, folder=tmp_path)
    desired = write(tmp_path / "schema.sql", BASE + statement + "\n")
    before, files = _digest(live), sorted(tmp_path.iterdir())
    if attack == "a query that never ends":
        monkeypatch.setenv("SESHAT_SQLITE_DEADLINE", "2")
    result = RunnerCLI()(
        "schema", "plan", "--url", f"sqlite:///{live}", "--desired", str(desired), timeout=120
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert _digest(live) == before
    assert sorted(tmp_path.iterdir()) == files
    if result.returncode == 0:
        assert json.loads(result.stdout)["statements"] == []
    else:
        assert result.returncode == 2 and "schema.sql:2:" in result.stderr, result.stderr


def test_the_dry_run_copies_no_row(tmp_path: Path) -> None:
    """A unique index over duplicate rows would fail on a copy of the data; the schema-only
    copy plans it (the hazard says it depends on the data) and the apply is what refuses."""
    live = tmp_path / "app.db"
    conn = sqlite3.connect(live)
    conn.executescript(BASE + "INSERT INTO accounts VALUES (1, 'same'), (2, 'same');")
    conn.close()
    desired = write(tmp_path / "schema.sql", BASE + "CREATE UNIQUE INDEX u ON accounts (owner);\n")
    result = RunnerCLI()("schema", "plan", "--url", f"sqlite:///{live}", "--desired", str(desired))
    assert result.returncode == 0, result.stderr
    assert [s["op"] for s in json.loads(result.stdout)["statements"]] == ["create_index"]
