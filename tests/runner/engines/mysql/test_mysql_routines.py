"""Stored procedures, functions, events and definers on a real MariaDB, through
``seshat-runner schema plan|apply`` as a user runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.mariadb import MariaDBDatabase
from harness.runner_cli import RunnerCLI, write

SANDBOX = re.compile(r"seshat_[0-9a-f]{12}")
"""A sandbox schema's name, never printed."""
TABLE = "CREATE TABLE audit (id int AUTO_INCREMENT PRIMARY KEY, note varchar(100));\n"
ROUTINES = """
DELIMITER //
CREATE PROCEDURE record_twice(IN what varchar(50))
    COMMENT 'writes; twice'
BEGIN
  INSERT INTO audit (note) VALUES (CONCAT(what, '; first'));
  INSERT INTO audit (note) VALUES (CONCAT(what, '; second'));
END//
DELIMITER ;

CREATE FUNCTION shout(s varchar(50)) RETURNS varchar(60) DETERMINISTIC SQL SECURITY INVOKER
RETURN CONCAT(UPPER(s), '!;');

CREATE PROCEDURE tally() READS SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE n int;
  SELECT COUNT(*) INTO n FROM audit;
  SELECT n;
END;
"""


@pytest.fixture
def runner(mariadb_database: MariaDBDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[mariadb_database.server.app_password])
    yield cli
    assert cli.leaks() == [], "the password appeared in the runner's output"
    assert not any(SANDBOX.search(out) for out in cli.outputs), "a sandbox schema name was printed"


def _env(db: MariaDBDatabase, *, root: bool = False) -> dict[str, str]:
    return {"TARGET_URL": db.url if root else db.url_with_password}


def plan(
    runner: RunnerCLI, db: MariaDBDatabase, desired: Path, *extra: str, **how: Any
) -> subprocess.CompletedProcess[str]:
    args = ["schema", "plan", "--url-env", "TARGET_URL", "--desired", str(desired), *extra]
    return runner(*args, env=_env(db, root=how.get("root", False)), seed=how.get("seed", "0"))


def planned(
    runner: RunnerCLI, db: MariaDBDatabase, desired: Path, out: Path, *, root: bool = False
) -> dict[str, Any]:
    result = plan(runner, db, desired, "--output", str(out), root=root)
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def applied(
    runner: RunnerCLI, db: MariaDBDatabase, plan_file: Path, *, root: bool = False
) -> dict[str, Any]:
    args = ["schema", "apply", "--url-env", "TARGET_URL", "--plan", str(plan_file)]
    result = runner(*args, env=_env(db, root=root))
    assert result.returncode == 0, result.stdout + result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["converged"] is True
    return report


def statements_of(runner: RunnerCLI, db: MariaDBDatabase, desired: Path, **how: Any) -> list[Any]:
    result = plan(runner, db, desired, **how)
    assert result.returncode == 0, result.stdout + result.stderr
    found: list[Any] = json.loads(result.stdout)["statements"]
    return found


def run(db: MariaDBDatabase, *statements: str, app: bool = False) -> list[tuple[Any, ...]]:
    """Each statement whole (bodies keep their semicolons), as root (or the app user); the
    last one's rows."""
    found: list[tuple[Any, ...]] = []
    with db.connect_as_app() if app else db.connect() as conn, conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
            found = list(cur.fetchall())
    return found


def test_routines_plan_apply_and_converge(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    db = mariadb_database
    view = "CREATE VIEW loud AS SELECT shout(note) AS n FROM audit;\n"
    desired = write(tmp_path / "schema.sql", view + TABLE + ROUTINES)
    document = planned(runner, db, desired, tmp_path / "plan.json")
    by_key = {s["key"]: s for s in document["statements"]}
    assert sorted(by_key) == [
        "function:db.shout",
        "procedure:db.record_twice",
        "procedure:db.tally",
        "table:db.audit",
        "view:db.loud",
    ]
    keys = [s["key"] for s in document["statements"]]
    assert keys.index("function:db.shout") < keys.index("view:db.loud")
    record = by_key["procedure:db.record_twice"]
    assert record["op"] == "create_definition"
    assert record["sql"].startswith("CREATE PROCEDURE `record_twice`(IN what varchar(50))")
    assert "CONCAT(what, '; second'));\nEND" in record["sql"]
    # SQL SECURITY DEFINER is the default: the procedure runs with its definer's rights.
    assert {"kind": "privilege", "code": "SECURITY_DEFINER"} in record["hazards"]
    assert not any(h["kind"] == "privilege" for h in by_key["procedure:db.tally"]["hazards"])
    assert not any(h["kind"] == "privilege" for h in by_key["function:db.shout"]["hazards"])

    applied(runner, db, tmp_path / "plan.json")
    run(db, "CALL record_twice('x')")
    assert run(db, "SELECT note FROM audit ORDER BY id") == [("x; first",), ("x; second",)]
    assert run(db, "SELECT shout('a')") == [("A!;",)]
    assert run(db, "SELECT n FROM loud ORDER BY n") == [("X; FIRST!;",), ("X; SECOND!;",)]
    assert statements_of(runner, db, desired) == []


def test_changed_routines_are_replaced_in_place(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    db = mariadb_database
    desired = write(tmp_path / "schema.sql", TABLE + ROUTINES)
    # A routine the credential may not read (another definer's) would be planned blind.
    run(db, "CREATE PROCEDURE hidden() SELECT 1")
    refused = plan(runner, db, desired)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["refusal"]["code"] == "catalog_not_visible"
    run(db, "DROP PROCEDURE hidden")
    run(
        db,
        TABLE.rstrip(";\n"),
        "CREATE PROCEDURE tally() BEGIN SELECT COUNT(*) FROM audit; END",
        "CREATE FUNCTION shout(s varchar(50)) RETURNS varchar(50) RETURN UPPER(s)",
        app=True,
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    changes = [(s["op"], s["key"]) for s in document["statements"]]
    assert changes == [
        ("replace_definition", "function:db.shout"),
        ("create_definition", "procedure:db.record_twice"),
        ("replace_definition", "procedure:db.tally"),
    ]
    shout = document["statements"][0]["sql"]
    assert shout.startswith("CREATE OR REPLACE FUNCTION `shout`(s varchar(50))")
    applied(runner, db, tmp_path / "plan.json")
    assert run(db, "SELECT shout('a')") == [("A!;",)]
    assert statements_of(runner, db, desired) == []

    write(desired, TABLE)  # the routines go
    gone = statements_of(runner, db, desired)
    assert sorted(s["sql"] for s in gone) == [
        "DROP FUNCTION `shout`",
        "DROP PROCEDURE `record_twice`",
        "DROP PROCEDURE `tally`",
    ]


def test_routine_plans_are_deterministic(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    db = mariadb_database
    run(db, "CREATE PROCEDURE tally() SELECT 1", app=True)
    desired = write(tmp_path / "schema.sql", TABLE + ROUTINES)
    first = plan(runner, db, desired, "--no-cache", seed="1")
    second = plan(runner, db, desired, "--no-cache", seed="4242")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert len(json.loads(first.stdout)["statements"]) == 4


def test_plan_sql_runs_in_the_mariadb_client(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    """``--format sql`` wraps a statement holding ``;`` in DELIMITER lines, so the ``mysql``
    client runs each body whole."""
    db = mariadb_database
    desired = write(tmp_path / "schema.sql", TABLE + ROUTINES)
    text = plan(runner, db, desired, "--format", "sql")
    assert text.returncode == 0, text.stderr
    assert "DELIMITER $$\nCREATE PROCEDURE `record_twice`" in text.stdout
    assert "END$$\nDELIMITER ;" in text.stdout
    server = db.server
    client = subprocess.run(
        [
            "mariadb",
            "--no-defaults",
            f"--host={server.host}",
            f"--port={server.port}",
            f"--user={server.app_user}",
            db.name,
        ],
        env={"MYSQL_PWD": server.app_password, "PATH": os.environ.get("PATH", "")},
        input=text.stdout,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert client.returncode == 0, client.stderr
    assert statements_of(runner, db, desired) == []


@pytest.fixture
def reporter(mariadb_database: MariaDBDatabase) -> Iterator[str]:
    """An account of the target server that owns nothing yet."""
    run(mariadb_database, "CREATE USER 'report_owner'@'%' ACCOUNT LOCK")
    try:
        yield "report_owner@%"
    finally:
        run(mariadb_database, "DROP USER IF EXISTS 'report_owner'@'%'")


def test_named_definers_are_kept_and_unknown_ones_refused(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, reporter: str, tmp_path: Path
) -> None:
    db = mariadb_database
    body = "PROCEDURE report() SQL SECURITY DEFINER SELECT COUNT(*) FROM audit;\n"
    ghost = write(tmp_path / "ghost.sql", TABLE + "CREATE DEFINER='ghost'@'%' " + body)
    refused = plan(runner, db, ghost, root=True)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["refusal"]["code"] == "unknown_definer"
    assert "'ghost'@'%'" in json.loads(refused.stdout)["refusal"]["message"]
    assert run(db, "SHOW TABLES") == []

    desired = write(tmp_path / "schema.sql", TABLE + "CREATE DEFINER=report_owner@'%' " + body)
    document = planned(runner, db, desired, tmp_path / "plan.json", root=True)
    sql = [s["sql"] for s in document["statements"]]
    assert "CREATE DEFINER=`report_owner`@`%` PROCEDURE `report`()" in sql[-1]
    applied(runner, db, tmp_path / "plan.json", root=True)
    definer = "SELECT DEFINER FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s"
    with db.connect() as conn, conn.cursor() as cur:
        cur.execute(definer, (db.name,))
        assert cur.fetchall() == ((reporter,),)
    assert statements_of(runner, db, desired, root=True) == []

    # Without a DEFINER clause the object belongs to whoever applies: no difference.
    plain = write(tmp_path / "plain.sql", TABLE + "CREATE " + body)
    assert statements_of(runner, db, plain, root=True) == []
    # Naming another definer replaces the routine.
    other = write(tmp_path / "other.sql", TABLE + "CREATE DEFINER=CURRENT_USER " + body)
    changed = statements_of(runner, db, other, root=True)
    assert [(s["op"], s["key"]) for s in changed] == [("replace_definition", "procedure:db.report")]


def test_events_are_created_altered_and_dropped(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    db = mariadb_database
    event = (
        "CREATE EVENT cleanup ON SCHEDULE EVERY 1 DAY COMMENT 'nightly; quiet'\n"
        "DO BEGIN\n  DELETE FROM audit WHERE note = 'a;b';\n"
        "  DELETE FROM audit WHERE id < 0;\nEND;\n"
    )
    desired = write(tmp_path / "schema.sql", TABLE + event)
    applied(runner, db, _plan_file(runner, db, desired, tmp_path / "1.json"))
    assert statements_of(runner, db, desired) == []

    altered = event.replace("EVERY 1 DAY", "EVERY 2 HOUR DISABLE")
    write(desired, TABLE + altered)
    second = _plan_file(runner, db, desired, tmp_path / "2.json")
    replaced = json.loads(second.read_text())["statements"]
    assert [(s["op"], s["key"]) for s in replaced] == [("replace_definition", "event:db.cleanup")]
    assert replaced[0]["sql"].startswith("CREATE OR REPLACE EVENT `cleanup` ON SCHEDULE EVERY 2")
    applied(runner, db, second)
    status = "SELECT STATUS, INTERVAL_VALUE, INTERVAL_FIELD FROM information_schema.EVENTS"
    assert run(db, status + f" WHERE EVENT_SCHEMA = '{db.name}'") == [("DISABLED", "2", "HOUR")]
    assert statements_of(runner, db, desired) == []

    write(desired, TABLE)
    applied(runner, db, _plan_file(runner, db, desired, tmp_path / "3.json"))
    assert run(db, status + f" WHERE EVENT_SCHEMA = '{db.name}'") == []


def _plan_file(runner: RunnerCLI, db: MariaDBDatabase, desired: Path, out: Path) -> Path:
    planned(runner, db, desired, out)
    return out
