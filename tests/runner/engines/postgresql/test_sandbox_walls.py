"""The second wall alone: nothing derived from artifact text runs with more rights than the
sandbox role, even with no jail around the sandbox server (isolation ``none``).

The attacks are the two routes measured from outside, written so that the first wall (only
declarations run) lets them through: a function that a partition bound calls while the
table is created runs code during ``CREATE TABLE``. If the runner handed the sandbox role a
privileged role (a forged "role ... does not exist" error) or superuser (an extension
statement re-run by the administrator under a database setting that changes how literals
are read), that code would run a program on the host, which touches a marker file. The
marker must never appear, and the plan must be refused.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from harness.postgres import PostgresDatabase, PostgresServer
from harness.runner_cli import RunnerCLI, write
from psycopg import sql

from runner.engines.desired import DesiredSchemaError
from runner.engines.planner import PlanOptions, PlanRefused
from runner.engines.postgresql import sandbox as pg_sandbox
from runner.engines.postgresql.engine import PostgresEngine
from runner.url import parse_url


@pytest.fixture
def marker() -> Iterator[Path]:
    """Where a program run by the sandbox server would leave its mark (any user may write)."""
    folder = Path(tempfile.mkdtemp(prefix="seshat-wall-", dir="/tmp"))
    folder.chmod(0o777)
    yield folder / "pwned"
    shutil.rmtree(folder, ignore_errors=True)


def _payload(marker: Path, condition: str, otherwise: str) -> str:
    """A function that runs a program when ``condition`` holds in the sandbox, else raises
    ``otherwise``; a partition bound calls it during ``CREATE TABLE``."""
    return f"""
CREATE FUNCTION seshat_attack() RETURNS int LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  IF {condition} THEN
    EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', 'touch {marker}');
    RETURN 1;
  END IF;
  RAISE EXCEPTION '{otherwise}';
END $fn$;
CREATE TABLE attack (a int) PARTITION BY RANGE (a);
CREATE TABLE attack_1 PARTITION OF attack FOR VALUES FROM (seshat_attack()) TO (10);
"""


def _plan(db: PostgresDatabase, desired: Path) -> None:
    """A plan with no jail around the sandbox server: the second wall stands alone."""
    engine = PostgresEngine(parse_url(db.server.url(db.name)), isolation="none")
    engine.plan(desired, PlanOptions(sandbox_isolation="none"))


@pytest.mark.parametrize("role", ["seshat_admin", "pg_execute_server_program"])
def test_a_forged_missing_role_error_grants_nothing(
    role: str, postgres_database: PostgresDatabase, marker: Path, tmp_path: Path
) -> None:
    """The error names a role that exists in the sandbox and is privileged: its
    administrator, or a predefined role that may run programs."""
    payload = _payload(
        marker,
        f"pg_has_role(current_user, '{role}', 'MEMBER') AND set_config('role', '{role}', true)"
        " IS NOT NULL",
        f'role "{role}" does not exist',
    )
    desired = write(tmp_path / "schema.sql", payload)
    with pytest.raises(DesiredSchemaError, match=role):
        _plan(postgres_database, desired)
    assert not marker.exists()


_READ_LITERALS_THE_OTHER_WAY = """
CREATE FUNCTION seshat_setting() RETURNS int LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  EXECUTE format('ALTER DATABASE %I SET standard_conforming_strings = off',
                 current_database());
  RETURN 1;
END $fn$;
CREATE TABLE setting (a int) PARTITION BY RANGE (a);
CREATE TABLE setting_1 PARTITION OF setting FOR VALUES FROM (seshat_setting()) TO (10);
"""


def test_an_extension_comment_is_never_rerun_by_the_administrator(
    postgres_database: PostgresDatabase, marker: Path, tmp_path: Path
) -> None:
    """Read with standard_conforming_strings off (which code the DDL runs sets on the
    scratch database: no statement of the file does it), this COMMENT is two statements,
    the second making the sandbox role superuser; the runner's splitter sees one literal."""
    trick = "COMMENT ON EXTENSION plpgsql IS 'x\\'' ; ALTER ROLE seshat_sandbox SUPERUSER; --';\n"
    payload = _payload(
        marker,
        "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)",
        "not superuser yet",
    )
    desired = write(tmp_path / "schema.sql", _READ_LITERALS_THE_OTHER_WAY + trick + payload)
    with pytest.raises((DesiredSchemaError, PlanRefused)):
        _plan(postgres_database, desired)
    assert not marker.exists()


def test_the_administrator_runs_a_rebuilt_comment_whatever_the_database_settings() -> None:
    """The worst case on purpose: the database's own setting reads literals the other way;
    the administrator's session fixes it at connection, and the comment is rebuilt from its
    parsed text, so it is one COMMENT whose text is the whole trick."""
    facts = pg_sandbox.ServerFacts(150000, "UTF8", "C", "C", None, ("public",))
    text = "x\\'' ; ALTER ROLE seshat_sandbox SUPERUSER; --"
    with pg_sandbox.private_sandbox(facts) as sandbox:
        assert sandbox.admin_url is not None
        database = sandbox.fresh()
        admin = sandbox.admin_url.with_database(database.database)
        with psycopg.connect(host=admin.host, user=admin.user, dbname="postgres") as conn:
            conn.autocommit = True
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET standard_conforming_strings = off").format(
                    sql.Identifier(database.database)
                )
            )
        statement = f"COMMENT ON EXTENSION plpgsql IS '{text}'"
        sandbox.prepare(database, [("schema.sql:1", statement)], desired=True)
        assert sandbox.instead(database, statement) == []
        with psycopg.connect(host=admin.host, user=admin.user, dbname=database.database) as conn:
            superuser = conn.execute(
                "SELECT rolsuper FROM pg_roles WHERE rolname = 'seshat_sandbox'"
            ).fetchone()
            comment = conn.execute(
                "SELECT obj_description(oid, 'pg_extension') FROM pg_extension"
                " WHERE extname = 'plpgsql'"
            ).fetchone()
    assert superuser == (False,)
    assert comment == (text.replace("''", "'"),)


def test_the_sandbox_role_cannot_change_or_drop_the_scratch_databases() -> None:
    facts = pg_sandbox.ServerFacts(150000, "UTF8", "C", "C", None, ("public",))
    with pg_sandbox.private_sandbox(facts) as sandbox:
        first, second = sandbox.fresh(), sandbox.fresh()
        with psycopg.connect(
            host=first.host, user=first.user, dbname=first.database, autocommit=True
        ) as conn:
            for statement in (
                f"ALTER DATABASE {first.database} SET standard_conforming_strings = off",
                f"ALTER DATABASE {second.database} SET search_path = evil",
                f"DROP DATABASE {second.database}",
                "ALTER ROLE seshat_sandbox SUPERUSER",
                "CREATE ROLE mallory",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement.encode())
            # It still works in its database: the public schema is its own.
            conn.execute("CREATE TABLE public.mine (a int)")


def test_a_statement_is_cancelled_by_the_runner_whatever_the_session_says(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    desired = write(
        tmp_path / "schema.sql",
        "SET statement_timeout = 0;\n"
        "CREATE FUNCTION slow() RETURNS int LANGUAGE sql VOLATILE"
        " AS $$ SELECT 1 FROM pg_sleep(120) $$;\n"
        "CREATE TABLE p (a int) PARTITION BY RANGE (a);\n"
        "CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (slow()) TO (10);\n",
    )
    started = time.monotonic()
    result = RunnerCLI()(
        "schema",
        "plan",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        env={
            "TARGET_URL": postgres_database.server.url(postgres_database.name),
            "SESHAT_SANDBOX_STATEMENT_SECONDS": "2",
        },
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr  # the desired schema's fault
    assert "schema.sql:4: ran longer than the sandbox allows a statement (2 s)" in result.stderr
    assert time.monotonic() - started < 60


def test_planning_is_refused_where_no_jail_can_be_made(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    desired = write(tmp_path / "schema.sql", "CREATE TABLE t (a int);\n")
    result = RunnerCLI()(
        "schema",
        "plan",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        "--no-cache",
        env={
            "TARGET_URL": postgres_database.server.url(postgres_database.name),
            "SESHAT_BWRAP": str(tmp_path / "no-bwrap-here"),
        },
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert '"sandbox_unavailable"' in result.stdout
    assert "bubblewrap" in result.stdout and "--sandbox-isolation none" in result.stdout
    with postgres_database.connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = 't'").fetchone() == (0,)


def test_a_dev_url_whose_server_cannot_be_checked_is_refused(
    postgres_server: PostgresServer, postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    """pg_control_system() refused to the target's credential: the same-server check cannot
    be made, so a dev database on the target's own server is refused, not trusted."""
    dev = f"dev_{secrets.token_hex(4)}"
    with postgres_server.connect() as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(dev), sql.Identifier(postgres_server.app_user)
            )
        )
    with postgres_server.connect(postgres_database.name) as admin:  # a catalog per database
        admin.execute("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC")
    try:
        desired = write(tmp_path / "schema.sql", "CREATE TABLE t (a int);\n")
        result = RunnerCLI(secrets=[postgres_server.app_password])(
            "schema",
            "plan",
            "--url-env",
            "TARGET_URL",
            "--dev-url",
            f"postgresql://{postgres_server.app_user}@{postgres_server.host}:"
            f"{postgres_server.port}/{dev}",
            "--desired",
            str(desired),
            env={
                "TARGET_URL": postgres_server.url_with_password(postgres_database.name),
                "PGPASSWORD": postgres_server.app_password,
            },
        )
    finally:
        with postgres_server.connect() as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(dev)))
    assert result.returncode == 1, result.stdout + result.stderr
    assert '"sandbox_refused"' in result.stdout
    assert "pg_control_system()" in result.stdout


def test_a_killed_template_build_leaves_no_folder_a_later_runner_keeps() -> None:
    """A host folder whose runner died (its lock is free) is removed by the next sandbox."""
    from runner.engines import servers

    stale = Path(tempfile.mkdtemp(prefix="seshat-template-", dir=servers._bases()[0]))
    (stale / ".runner.lock").touch()
    (stale / "build").mkdir()
    os.utime(stale, (0, 0))
    servers.sweep()
    assert not stale.exists()
