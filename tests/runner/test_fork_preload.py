"""A runner forked from the fork server imports nothing: every module the operations of a
pass need was imported once by the server (``runner.forks.prepare``, its ``PRELOAD``).

A module left out is imported again by every forked runner that needs it: sqlglot, which
the SQLite engine's SQL reader imports on first use, cost each forked SQLite runner about
90 ms of CPU, and the signature checks about 20 ms per verify, until they were preloaded
(sigstore itself, which only a keyless bundle needs, is not: 150 ms more at every server's
start, which only keyless verifies would repay). Each probe is a fresh interpreter that prepares
as the server does, then runs one real ``op`` (what the control plane asks a forked runner
for: resolve, a key verify, drift, plan, apply, history, migrate) against a real database or
artifact, and lists what it imported (codecs, which the interpreter's codec registry loads
on first use, aside). A runner started afresh still imports lazily: ``test_op_imports.py``.
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
from harness.mariadb import MariaDBDatabase
from harness.postgres import PostgresDatabase
from harness.reconcile_world import SignedLayouts

from runner.digests import canonical_json
from runner.protocol.frame import Found, find_last_frame
from runner.protocol.messages import TrustFile

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


def _imported_by(
    tmp_path: Path, request: dict[str, Any], url: str = ""
) -> tuple[dict[str, Any], list[str]]:
    """Run the ``op`` ``request`` in a prepared interpreter: its frame's payload, and the
    modules it imported."""
    path = tmp_path / f"{request['id']}.json"
    path.write_text(json.dumps(request))
    listed = tmp_path / f"{request['id']}-imported.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "op", "--input", str(path)],
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
    return frame.payload, [name for name in imported if not name.startswith("encodings.")]


def _imported_by_a_plan(tmp_path: Path, url: str) -> tuple[dict[str, Any], list[str]]:
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text(DESIRED)
    request = {"operation": "plan", "id": "plan", "url": {"from_env": "DB_URL"}}
    return _imported_by(tmp_path, request | {"desired": str(desired)}, url)


def test_forked_sqlite_operations_import_nothing(tmp_path: Path) -> None:
    """Every operation a SQLite resource's pass runs: drift, plan, apply; history, migrate."""
    database = tmp_path / "app.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE items (id integer PRIMARY KEY)")
    conn.close()
    url = f"sqlite:///{database}"
    planned, imported = _imported_by_a_plan(tmp_path, url)
    assert imported == []
    target = {"url": {"from_env": "DB_URL"}}
    drift = {"operation": "drift", "id": "d", "desired": str(tmp_path / "desired")}
    drifted, imported = _imported_by(tmp_path, target | drift, url)
    assert drifted["result"]["drift"]["total"] == 1 and imported == []
    plan_file = tmp_path / "plan.json"
    plan_file.write_bytes(canonical_json(planned["result"]["plan"]) + b"\n")
    apply = {"operation": "apply", "id": "a", "plan": str(plan_file)}
    applied, imported = _imported_by(
        tmp_path, target | apply | {"expect_digest": planned["result"]["planDigest"]}, url
    )
    assert "result" in applied and imported == []

    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "1_a.sql").write_text("CREATE TABLE a (id INTEGER);\n")
    ledger = tmp_path / "ledger.db"
    sqlite3.connect(ledger).close()
    url = f"sqlite:///{ledger}"
    history = target | {"operation": "history", "id": "h", "migrations": str(migrations)}
    found, imported = _imported_by(tmp_path, history, url)
    assert found["result"]["history"]["pending"] == ["1"] and imported == []
    migrate = history | {"operation": "migrate", "id": "0123456789abcdef"}
    pending = found["result"]["history"]["pendingChecksums"]
    moved, imported = _imported_by(tmp_path, migrate | {"expect_pending": pending}, url)
    assert moved["result"]["migrate"]["outcome"] == "Applied" and imported == []


@pytest.mark.parametrize("fixture", ["postgres_database", "mariadb_database"])
def test_a_forked_server_plan_imports_nothing(
    tmp_path: Path, fixture: str, request: pytest.FixtureRequest
) -> None:
    database: PostgresDatabase | MariaDBDatabase = request.getfixturevalue(fixture)
    assert _imported_by_a_plan(tmp_path, database.url_with_password)[1] == []


def test_a_forked_resolve_and_verify_import_nothing(
    tmp_path: Path, signed_layouts: SignedLayouts
) -> None:
    """The first two runners of every pass: the artifact's digest, then its signature
    checked against the policy's key."""
    layout = tmp_path / "layout"
    signed_layouts.copy("schema", {"schema.sql": DESIRED.encode()}, True, layout)
    artifact = {"ref": f"oci-layout://{layout}:v1"}
    resolved, imported = _imported_by(
        tmp_path, {"operation": "resolve", "id": "r", "artifact": artifact}
    )
    assert imported == []
    trust = TrustFile.of("keys/ci.pub", signed_layouts.public_pem()).model_dump(mode="json")
    request = {
        "operation": "verify",
        "id": "v",
        "artifact": artifact | {"digest": resolved["result"]["digest"]},
        "policy": {
            "artifactTypes": ["application/vnd.seshat.schema.v1"],
            "signatures": {
                "count": 1,
                "authorities": [{"name": "ci", "key": {"publicKey": "keys/ci.pub"}}],
            },
        },
        "trust": [trust],
    }
    verified, imported = _imported_by(tmp_path, request)
    assert verified["result"]["accepted"] is True, verified
    assert imported == []
