"""Planning never writes to a PostgreSQL target: the desired SQL runs in a private sandbox.

Each attack is a valid desired schema plus one more statement, planned with the target's
*superuser* credential (the worst case); the target server must be unchanged afterwards
(databases, roles, role and database settings, rows, files), and the plan either refused
with a stable reason or made without any effect on the target. Each runs as written (the
classifier refuses what is not a declaration before anything runs) and with
``--procedural-schema`` (what is procedural then reaches the sandbox, which must hold alone).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.postgres import PostgresDatabase, PostgresServer
from harness.runner_cli import RunnerCLI, write
from psycopg import sql

BASE = "CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL);\n"


@pytest.fixture
def victim(postgres_server: PostgresServer) -> Iterator[str]:
    """Another database on the target's server, with a row in it."""
    name = f"victim_{secrets.token_hex(4)}"
    with postgres_server.connect() as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with postgres_server.connect(name) as conn:
        conn.execute("CREATE TABLE keep (v text); INSERT INTO keep VALUES ('precious')")
    yield name
    with postgres_server.connect() as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _server_state(server: PostgresServer, database: str, marker: Path) -> dict[str, Any]:
    with server.connect() as conn:
        state: dict[str, Any] = {
            "databases": conn.execute("SELECT datname FROM pg_database ORDER BY 1").fetchall(),
            "roles": conn.execute(
                "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolcanlogin"
                " FROM pg_roles ORDER BY 1"
            ).fetchall(),
            "settings": conn.execute(
                "SELECT setdatabase, setrole, setconfig::text FROM pg_db_role_setting ORDER BY 1, 2"
            ).fetchall(),
            "sessions": conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            ).fetchone(),
        }
    with server.connect(database) as conn:
        state["rows"] = conn.execute("SELECT id, owner FROM accounts ORDER BY id").fetchall()
    state["marker"] = marker.exists()
    return state


def _settled_state(server: PostgresServer, database: str, marker: Path) -> dict[str, Any]:
    """:func:`_server_state` once the backends of closed sessions have gone: a backend
    outlives its client's exit by a moment (the test's own set-up session, a runner's), so
    the count waits, up to 10 s, for no client backend but the one asking."""
    state = _server_state(server, database, marker)
    deadline = time.monotonic() + 10
    while state["sessions"] > (1,) and time.monotonic() < deadline:
        time.sleep(0.05)
        state = _server_state(server, database, marker)
    return state


ATTACKS = {
    "drop another database": "DROP DATABASE {victim};",
    "drop the target with force": "DROP DATABASE {target} WITH (FORCE);",
    "alter the database": "ALTER DATABASE {target} SET work_mem = '64kB';",
    "alter the current role": "ALTER ROLE CURRENT_USER SET search_path = 'evil';",
    "create a superuser": "CREATE ROLE mallory_{tag} SUPERUSER LOGIN;",
    "terminate sessions": (
        "CREATE TABLE killed AS SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity;"
    ),
    "copy to program": "COPY (SELECT 1) TO PROGRAM 'touch {marker}';",
    "read a file": "CREATE TABLE leak AS SELECT pg_read_file('/etc/hostname') AS f;",
    "a DO block": "DO $$ BEGIN EXECUTE 'DROP DATABASE {victim}'; END $$;",
    "set role": "SET ROLE postgres; CREATE ROLE mallory_{tag} SUPERUSER;",
    "materialized view with side effects": (
        "CREATE MATERIALIZED VIEW mv AS SELECT pg_terminate_backend(pid) FROM pg_stat_activity;"
    ),
    "an untrusted language": "CREATE EXTENSION plpython3u;",
    "dblink to the target": "CREATE EXTENSION dblink;",
    "alter system": "ALTER SYSTEM SET log_statement = 'all';",
}


@pytest.mark.parametrize("procedural", [False, True], ids=["declarations", "procedural"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_in_the_desired_schema_never_reaches_the_target(
    attack: str,
    procedural: bool,
    postgres_database: PostgresDatabase,
    victim: str,
    tmp_path: Path,
) -> None:
    db, server = postgres_database, postgres_database.server
    with db.connect() as conn:
        conn.execute(BASE + "INSERT INTO accounts VALUES (1, 'alice'), (2, 'bob');")
    marker = tmp_path / "pwned"
    statement = ATTACKS[attack].format(
        victim=victim, target=db.name, marker=marker, tag=secrets.token_hex(3)
    )
    desired = write(tmp_path / "schema.sql", BASE + statement + "\n")
    before = _settled_state(server, db.name, marker)
    runner = RunnerCLI()
    superuser = server.url(db.name)  # the worst case: the target credential is a superuser
    result = runner(
        "schema",
        "plan",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        *(["--procedural-schema"] if procedural else []),
        env={"TARGET_URL": superuser},
        timeout=300,
    )
    assert "Traceback" not in result.stderr, result.stderr
    # The runner closed its target sessions (the plan's and the impact checks'); one still
    # there once closed backends have had time to go is a leak.
    after = _settled_state(server, db.name, marker)
    assert after == before
    if result.returncode == 0:
        # Planned: the statement had no effect there either, and the plan holds none of it.
        plan = json.loads(result.stdout)
        assert all("accounts" not in s["sql"] for s in plan["statements"])
    else:
        assert result.returncode in (1, 2)
        stable = (
            "desired_schema_invalid",
            "dry_run_failed",
            "destructive_disallowed",
            "statement_not_declarative",
            "sandbox_refused",  # an extension outside the allowlist
        )
        assert result.returncode == 2 or json.loads(result.stdout)["refusal"]["code"] in stable


def test_plans_with_a_read_only_credential(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    """A role that can only read (no CREATEDB, no write grants) plans; it could not before,
    when planning made a scratch database on the target."""
    db, server = postgres_database, postgres_database.server
    with db.connect() as conn:
        conn.execute(BASE)
    role, password = f"reader_{secrets.token_hex(3)}", secrets.token_urlsafe(16)
    with server.connect() as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} NOCREATEDB").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
    try:
        url = f"postgresql://{role}:{password}@{server.host}:{server.port}/{db.name}"
        desired = write(tmp_path / "schema.sql", BASE + "CREATE INDEX ON accounts (owner);\n")
        runner = RunnerCLI(secrets=[password])
        result = runner(
            "schema",
            "plan",
            "--url-env",
            "TARGET_URL",
            "--desired",
            str(desired),
            env={"TARGET_URL": url},
        )
        assert result.returncode == 0, result.stderr
        assert [s["op"] for s in json.loads(result.stdout)["statements"]] == ["create_index"]
        assert runner.leaks() == []
    finally:
        with server.connect() as admin:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_allowed_extensions_and_named_roles_work_in_the_sandbox(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    db = postgres_database
    with db.connect() as conn:
        conn.execute(BASE)
    desired = write(
        tmp_path / "schema.sql",
        BASE
        + 'CREATE EXTENSION IF NOT EXISTS "pgcrypto";\n'
        + "CREATE TABLE tokens (id uuid DEFAULT gen_random_uuid() PRIMARY KEY);\n"
        + "GRANT SELECT ON accounts TO reporting_role;\n",
    )
    result = RunnerCLI()(
        "schema",
        "plan",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        env={"TARGET_URL": db.server.url(db.name)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    statements = [s["sql"] for s in json.loads(result.stdout)["statements"]]
    assert any(s.startswith("CREATE EXTENSION IF NOT EXISTS pgcrypto") for s in statements)
    assert any(s.startswith("CREATE TABLE public.tokens") for s in statements)
