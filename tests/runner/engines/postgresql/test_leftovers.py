"""What a killed PostgreSQL session leaves behind is named before Observe, never guessed.

An INVALID index is what a ``CREATE INDEX CONCURRENTLY`` that stopped leaves: its catalog
row says ``indisvalid = false``. Here the catalog is put in that state by the superuser (the
server's own record, not a stand-in), and Observe refuses to read it as a built index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.postgres import PostgresDatabase
from harness.runner_cli import RunnerCLI, write

from runner.protocol.frame import Found, find_last_frame


def _op(db: PostgresDatabase, tmp_path: Path, request: dict[str, Any]) -> tuple[int, Any]:
    runner = RunnerCLI(secrets=[db.server.app_password])
    path = write(tmp_path / f"{request['id']}.json", json.dumps(request))
    done = runner("op", "--input", str(path), env={"DB_URL": db.url_with_password})
    assert runner.leaks() == []
    frame = find_last_frame(done.stdout)
    assert isinstance(frame, Found), done.stdout + done.stderr
    return done.returncode, frame.payload


def test_an_invalid_index_is_named_by_observe_and_by_recover(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    with postgres_database.connect_as_app() as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
        conn.execute("CREATE INDEX items_name ON items (name)")
    with postgres_database.connect() as admin:
        admin.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'items_name'::regclass"
        )
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text(
        "CREATE TABLE items (id int PRIMARY KEY, name text);\n"
        "CREATE INDEX items_name ON items (name);\n"
    )
    url = {"from_env": "DB_URL"}
    status, payload = _op(
        postgres_database,
        tmp_path,
        {"operation": "drift", "id": "drift-1", "url": url, "desired": str(desired)},
    )
    assert status == 2
    error = payload["error"]
    assert (error["code"], error["reason"]) == ("recovery_needed", "recovery_leftovers")
    assert "index public.items_name is INVALID" in error["message"]
    assert "REINDEX INDEX CONCURRENTLY public.items_name" in error["message"]

    status, payload = _op(
        postgres_database, tmp_path, {"operation": "recover", "id": "recover-1", "url": url}
    )
    assert status == 0, payload
    report = payload["result"]["recovery"]
    assert (report["found"], report["recovered"]) == ("none", False)
    assert [line.split(":")[0] for line in report["leftovers"]] == [
        "index public.items_name is INVALID (a concurrent build or reindex stopped)"
    ]
    with postgres_database.connect() as admin:  # recover decided nothing for anyone
        row = admin.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'items_name'::regclass"
        ).fetchone()
    assert row == (False,)
