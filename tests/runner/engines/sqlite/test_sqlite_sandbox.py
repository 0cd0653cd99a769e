"""Planning never writes to a SQLite target: the desired SQL runs in an in-memory sandbox that
can reach no file, and the dry run copies the schema, never a row.

Each attack is a valid desired schema plus statements that reach outside an in-memory
database in plain SQLite; the live file must be byte-identical afterwards, no other file may
appear, and the plan is refused with a stable reason or made without effect. Each runs twice:
as written, where the classifier refuses it before anything runs (the first wall,
``statement_not_declarative``), and with ``--procedural-schema``, where what is procedural
reaches the sandbox and the sandbox alone must hold (what reaches files is refused by the
classifier either way, so the sandbox is also tested on its own, below).
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


@pytest.mark.parametrize("procedural", [False, True], ids=["declarations", "procedural"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_in_the_desired_schema_never_reaches_a_file(
    attack: str, procedural: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    opt_in = ["--procedural-schema"] if procedural else []
    result = RunnerCLI()(
        "schema",
        "plan",
        "--url",
        f"sqlite:///{live}",
        "--desired",
        str(desired),
        *opt_in,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert _digest(live) == before
    assert sorted(tmp_path.iterdir()) == files
    if result.returncode == 0:
        assert json.loads(result.stdout)["statements"] == []
    elif result.returncode == 1:
        refusal = json.loads(result.stdout)["refusal"]
        assert refusal["code"] == "statement_not_declarative", refusal
        assert refusal["message"].startswith("schema.sql:2: "), refusal
        procedural_kind = attack in ("load an extension", "a query that never ends")
        assert not (procedural and procedural_kind), "the opt-in lets procedural SQL run"
    else:
        assert result.returncode == 2 and "schema.sql:2:" in result.stderr, result.stderr
        assert procedural, "without the opt-in the classifier refuses before the sandbox"


SANDBOX_ALONE = {
    "attach a file": "ATTACH '{other}' AS o",
    "vacuum into a file": "VACUUM INTO '{other}'",
    "temp files elsewhere": "PRAGMA temp_store_directory = '{folder}'",
    "edit the schema table": "PRAGMA writable_schema = ON",
    "load an extension": "SELECT load_extension('{other}')",
}


@pytest.mark.parametrize("attack", sorted(SANDBOX_ALONE))
def test_the_sandbox_alone_refuses_what_reaches_a_file(attack: str, tmp_path: Path) -> None:
    """The second wall without the first: statements the classifier would refuse, sent to
    the sandbox connection directly, still reach nothing."""
    from runner.engines.sqlite.sandbox import sandbox

    other = tmp_path / "other.db"
    conn = sandbox()
    try:
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute(SANDBOX_ALONE[attack].format(other=other, folder=tmp_path))
    finally:
        conn.close()
    assert sorted(tmp_path.iterdir()) == []


def test_the_dry_run_copies_no_row(tmp_path: Path) -> None:
    """A unique index over duplicate rows would fail on a copy of the data; the schema-only
    copy plans it (the hazard says it depends on the data; the impact checks, which would
    count the duplicates on the target and refuse, are off) and the apply is what refuses."""
    live = tmp_path / "app.db"
    conn = sqlite3.connect(live)
    conn.executescript(BASE + "INSERT INTO accounts VALUES (1, 'same'), (2, 'same');")
    conn.close()
    desired = write(tmp_path / "schema.sql", BASE + "CREATE UNIQUE INDEX u ON accounts (owner);\n")
    url = f"sqlite:///{live}"
    result = RunnerCLI()(
        "schema", "plan", "--url", url, "--desired", str(desired), "--impact", "off"
    )
    assert result.returncode == 0, result.stderr
    assert [s["op"] for s in json.loads(result.stdout)["statements"]] == ["create_index"]
