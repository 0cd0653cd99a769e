"""What a killed MariaDB session leaves behind is named before Observe, never guessed.

A prepared XA transaction outlives its connection (MariaDB 10.5 and later): here the app
account prepares one and disconnects, as a migration killed after ``XA PREPARE`` would, on
the session's real server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.mariadb import MariaDBDatabase
from harness.runner_cli import RunnerCLI, write

from runner.protocol.frame import Found, find_last_frame

XID = "seshat-killed-1"


def _op(db: MariaDBDatabase, tmp_path: Path, request: dict[str, Any]) -> tuple[int, Any]:
    runner = RunnerCLI(secrets=[db.server.app_password])
    path = write(tmp_path / f"{request['id']}.json", json.dumps(request))
    done = runner("op", "--input", str(path), env={"DB_URL": db.url_with_password})
    assert runner.leaks() == []
    frame = find_last_frame(done.stdout)
    assert isinstance(frame, Found), done.stdout + done.stderr
    return done.returncode, frame.payload


def test_a_prepared_xa_transaction_is_named_by_observe_and_by_recover(
    mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    with mariadb_database.connect_as_app() as conn, conn.cursor() as cursor:
        cursor.execute("CREATE TABLE items (id int PRIMARY KEY) ENGINE=InnoDB")
        for statement in (
            f"XA START '{XID}'",
            "INSERT INTO items VALUES (1)",
            f"XA END '{XID}'",
            f"XA PREPARE '{XID}'",
        ):
            cursor.execute(statement)
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text("CREATE TABLE items (id int PRIMARY KEY);\n")
    url = {"from_env": "DB_URL"}
    try:
        status, payload = _op(
            mariadb_database,
            tmp_path,
            {"operation": "drift", "id": "drift-1", "url": url, "desired": str(desired)},
        )
        assert status == 2
        error = payload["error"]
        assert (error["code"], error["reason"]) == ("recovery_needed", "recovery_leftovers")
        assert f"prepared XA transaction '{XID}'" in error["message"]
        assert f"XA ROLLBACK '{XID}'" in error["message"]

        status, payload = _op(
            mariadb_database, tmp_path, {"operation": "recover", "id": "recover-1", "url": url}
        )
        assert status == 0, payload
        report = payload["result"]["recovery"]
        assert (report["found"], report["recovered"]) == ("none", False)
        assert [line.split(" on this")[0] for line in report["leftovers"]] == [
            f"prepared XA transaction '{XID}'"
        ]
        with mariadb_database.connect() as admin, admin.cursor() as cursor:
            cursor.execute("XA RECOVER")  # recover decided nothing for anyone
            held = [row[3] for row in cursor.fetchall()]
        assert [x.decode() if isinstance(x, bytes) else x for x in held] == [XID]
    finally:
        with mariadb_database.connect() as admin, admin.cursor() as cursor:
            cursor.execute(f"XA ROLLBACK '{XID}'")

    status, payload = _op(
        mariadb_database,
        tmp_path,
        {"operation": "drift", "id": "drift-2", "url": url, "desired": str(desired)},
    )
    assert status == 0, payload
