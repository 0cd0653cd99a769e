"""What a killed session leaves behind is named before Observe, never guessed (issue 33).

A prepared transaction outlives its session: PostgreSQL's ``PREPARE TRANSACTION`` and
MariaDB's ``XA PREPARE`` keep their locks and changes after the connection ends, until a
person commits or rolls them back. Here the app account prepares one and disconnects, as a
migration killed after its prepare would, on the session's real servers (PostgreSQL started
with ``max_prepared_transactions``). An INVALID index is no such leftover: drift counts it
and the plan rebuilds it (``postgresql/test_engine.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness.runner_cli import RunnerCLI, write

from runner.protocol.frame import Found, find_last_frame

XID = "seshat-killed-1"


@dataclass(frozen=True)
class Server:
    fixture: str
    prepare: tuple[str, ...]  # run as the app account, in one session, then disconnected
    named: str  # how the message names the leftover
    decide: str  # the statement the message offers a person
    held: str  # lists what is still prepared
    settle: str  # run by the test at the end, as the server's admin


SERVERS = {
    "postgresql": Server(
        "postgres_database",
        (
            "CREATE TABLE items (id int PRIMARY KEY)",
            "COMMIT",
            "BEGIN",
            "INSERT INTO items VALUES (1)",
            f"PREPARE TRANSACTION '{XID}'",
        ),
        f"prepared transaction '{XID}'",
        f"ROLLBACK PREPARED '{XID}'",
        "SELECT gid FROM pg_prepared_xacts",
        f"ROLLBACK PREPARED '{XID}'",
    ),
    "mariadb": Server(
        "mariadb_database",
        (
            "CREATE TABLE items (id int PRIMARY KEY) ENGINE=InnoDB",
            f"XA START '{XID}'",
            "INSERT INTO items VALUES (1)",
            f"XA END '{XID}'",
            f"XA PREPARE '{XID}'",
        ),
        f"prepared XA transaction '{XID}'",
        f"XA ROLLBACK '{XID}'",
        "XA RECOVER",
        f"XA ROLLBACK '{XID}'",
    ),
}


def _rows(db: Any, sql: str, *, app: bool = False) -> list[tuple[Any, ...]]:
    """``sql`` on ``db`` (psycopg or PyMySQL alike), as the admin or the app account."""
    with db.connect_as_app() if app else db.connect() as conn:
        cursor = conn.cursor()
        cursor.execute(sql)
        rows = list(cursor.fetchall()) if cursor.description else []
        cursor.close()
        return rows


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_a_prepared_transaction_is_named_by_observe_and_by_recover(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server = SERVERS[name]
    db = request.getfixturevalue(server.fixture)
    with db.connect_as_app() as conn:  # one session, ended with the leftover prepared
        cursor = conn.cursor()
        for statement in server.prepare:
            cursor.execute(statement)
        cursor.close()
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text("CREATE TABLE items (id int PRIMARY KEY);\n")
    op = _runner(db, tmp_path)
    try:
        status, payload = op({"operation": "drift", "id": "drift-1", "desired": str(desired)})
        assert status == 2
        error = payload["error"]
        assert (error["code"], error["reason"]) == ("recovery_needed", "recovery_leftovers")
        assert server.named in error["message"] and server.decide in error["message"]

        status, payload = op({"operation": "recover", "id": "recover-1"})
        assert status == 0, payload
        report = payload["result"]["recovery"]
        assert (report["found"], report["recovered"]) == ("none", False)
        assert [line.startswith(server.named) for line in report["leftovers"]] == [True]
        held = [row[-1] for row in _rows(db, server.held)]  # recover decided nothing
        assert [x.decode() if isinstance(x, bytes) else x for x in held] == [XID]
    finally:
        _rows(db, server.settle)
    status, payload = op({"operation": "drift", "id": "drift-2", "desired": str(desired)})
    assert status == 0, payload


def _runner(db: Any, tmp_path: Path) -> Callable[[dict[str, Any]], tuple[int, Any]]:
    """One ``seshat-runner op`` per request, on ``db``'s URL (from the environment), with
    nothing secret in its output."""

    def op(request: dict[str, Any]) -> tuple[int, Any]:
        runner = RunnerCLI(secrets=[db.server.app_password])
        path = write(tmp_path / f"{request['id']}.json", json.dumps(
            {**request, "url": {"from_env": "DB_URL"}}))  # fmt: skip
        done = runner("op", "--input", str(path), env={"DB_URL": db.url_with_password})
        assert runner.leaks() == []
        frame = find_last_frame(done.stdout)
        assert isinstance(frame, Found), done.stdout + done.stderr
        return done.returncode, frame.payload

    return op
