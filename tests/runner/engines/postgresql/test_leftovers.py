"""What a killed PostgreSQL session leaves behind is named before Observe, never guessed.

A prepared transaction outlives its session: here the app role prepares one and
disconnects, as a migration killed after ``PREPARE TRANSACTION`` would, on the session's real
server (started with ``max_prepared_transactions``). An INVALID index is no such leftover:
drift counts it and the plan rebuilds it (``test_engine.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.postgres import PostgresDatabase
from harness.runner_cli import RunnerCLI, write

from runner.protocol.frame import Found, find_last_frame

GID = "seshat-killed-1"


def _op(db: PostgresDatabase, tmp_path: Path, request: dict[str, Any]) -> tuple[int, Any]:
    runner = RunnerCLI(secrets=[db.server.app_password])
    path = write(tmp_path / f"{request['id']}.json", json.dumps(request))
    done = runner("op", "--input", str(path), env={"DB_URL": db.url_with_password})
    assert runner.leaks() == []
    frame = find_last_frame(done.stdout)
    assert isinstance(frame, Found), done.stdout + done.stderr
    return done.returncode, frame.payload


def test_a_prepared_transaction_is_named_by_observe_and_by_recover(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    with postgres_database.connect_as_app(autocommit=False) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY)")
        conn.commit()
        conn.execute("INSERT INTO items VALUES (1)")
        conn.execute(f"PREPARE TRANSACTION '{GID}'")
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text("CREATE TABLE items (id int PRIMARY KEY);\n")
    url = {"from_env": "DB_URL"}
    try:
        status, payload = _op(
            postgres_database,
            tmp_path,
            {"operation": "drift", "id": "drift-1", "url": url, "desired": str(desired)},
        )
        assert status == 2
        error = payload["error"]
        assert (error["code"], error["reason"]) == ("recovery_needed", "recovery_leftovers")
        assert f"prepared transaction '{GID}'" in error["message"]
        assert f"ROLLBACK PREPARED '{GID}'" in error["message"]

        status, payload = _op(
            postgres_database, tmp_path, {"operation": "recover", "id": "recover-1", "url": url}
        )
        assert status == 0, payload
        report = payload["result"]["recovery"]
        assert (report["found"], report["recovered"]) == ("none", False)
        assert [line.split(" (owner")[0] for line in report["leftovers"]] == [
            f"prepared transaction '{GID}'"
        ]
        with postgres_database.connect() as admin:  # recover decided nothing for anyone
            held = admin.execute("SELECT gid FROM pg_prepared_xacts").fetchall()
        assert held == [(GID,)]
    finally:
        with postgres_database.connect() as admin:
            admin.execute(f"ROLLBACK PREPARED '{GID}'")

    status, payload = _op(
        postgres_database,
        tmp_path,
        {"operation": "drift", "id": "drift-2", "url": url, "desired": str(desired)},
    )
    assert status == 0, payload
