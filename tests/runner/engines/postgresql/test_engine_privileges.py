"""Privileges and ownership (``--managed-role``, ``--manage-ownership``) against a real server.

The roles are cluster-wide, so each test makes its own (``IF NOT EXISTS``: the cluster may be
shared) and the runner, connected as the app role, owns every object it plans for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.postgres import PostgresDatabase
from harness.runner_cli import RunnerCLI, write
from psycopg import sql

from runner.digests import sha256_digest

READER, WRITER, OUTSIDER, OWNER = "priv_reader", "priv-writer", "priv_outsider", "priv_owner"
TABLE = "CREATE TABLE accounts (id bigint PRIMARY KEY, email text, secret text);\n"


@pytest.fixture
def db(postgres_database: PostgresDatabase) -> Iterator[PostgresDatabase]:
    server = postgres_database.server
    with server.connect() as admin:
        for role in (READER, WRITER, OUTSIDER, OWNER):
            admin.execute(
                sql.SQL(
                    "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) "
                    "THEN CREATE ROLE {} NOLOGIN; END IF; END$$"
                ).format(sql.Literal(role), sql.Identifier(role))
            )
        # The runner's role may hand its objects to OWNER (ALTER ... OWNER TO needs that).
        admin.execute(
            sql.SQL("GRANT {} TO {}").format(sql.Identifier(OWNER), sql.Identifier(server.app_user))
        )
    yield postgres_database


@pytest.fixture
def runner(db: PostgresDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[db.server.app_password])
    yield cli
    assert cli.leaks() == [], "the password appeared in the runner's output"


def load(db: PostgresDatabase, text: str) -> None:
    with db.connect_as_app() as conn:
        conn.execute(text.encode())


def query(db: PostgresDatabase, text: str) -> list[tuple[Any, ...]]:
    with db.connect_as_app() as conn:
        return conn.execute(text.encode()).fetchall()


def plan(runner: RunnerCLI, db: PostgresDatabase, desired: Path, *extra: str) -> Any:
    return runner(
        "schema", "plan", "--url-env", "TARGET_URL", "--desired", str(desired), "--no-cache",
        *extra, env={"TARGET_URL": db.url_with_password},
    )  # fmt: skip


def planned(runner: RunnerCLI, db: PostgresDatabase, desired: Path, *extra: str) -> Any:
    """A plan that must succeed, as a document."""
    result = plan(runner, db, desired, *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def apply(runner: RunnerCLI, db: PostgresDatabase, document: Any, tmp_path: Path) -> None:
    """Apply ``document`` with no privilege flags: the plan carries its scope."""
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n")
    digest = sha256_digest(plan_file.read_bytes())
    applied = runner(
        "schema", "apply", "--url-env", "TARGET_URL", "--plan", str(plan_file),
        "--expect-digest", digest, env={"TARGET_URL": db.url_with_password},
    )  # fmt: skip
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True


def acl(db: PostgresDatabase, relation: str) -> list[tuple[Any, ...]]:
    """(grantee, privilege, grantable) of ``relation``, sorted."""
    return query(
        db,
        "SELECT CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(x.grantee) END,"
        " x.privilege_type, x.is_grantable FROM pg_class c, aclexplode(c.relacl) x"
        f" WHERE c.oid = '{relation}'::regclass AND x.grantee <> c.relowner ORDER BY 1, 2",
    )


def sqls(document: Any) -> list[str]:
    return [s["sql"] for s in document["statements"]]


def hazards(document: Any) -> set[tuple[str, str]]:
    return {(h["kind"], h["code"]) for s in document["statements"] for h in s["hazards"]}


def test_grants_and_revokes_converge_and_leave_unmanaged_roles_alone(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(
        db,
        TABLE + f"GRANT SELECT, INSERT ON accounts TO {READER};"
        f"GRANT DELETE ON accounts TO {OUTSIDER};"
        f'GRANT UPDATE ON accounts TO "{WRITER}" WITH GRANT OPTION;',
    )
    desired = write(
        tmp_path / "schema.sql",
        TABLE + f"GRANT SELECT ON accounts TO {READER};"
        f'GRANT SELECT ON accounts TO "{WRITER}" WITH GRANT OPTION;'
        f'GRANT UPDATE ON accounts TO "{WRITER}";'
        f"GRANT TRUNCATE ON accounts TO {OUTSIDER};",
    )
    roles = ("--managed-role", READER, "--managed-role", WRITER)
    refused = plan(runner, db, desired, *roles)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["refusal"]["code"] == "destructive_disallowed"

    document = planned(runner, db, desired, *roles, "--allow-destructive")
    assert sqls(document) == [
        # by key, then revokes before grants within one grantee's changes
        'REVOKE GRANT OPTION FOR UPDATE ON TABLE "public"."accounts" FROM "priv-writer"',
        'GRANT SELECT ON TABLE "public"."accounts" TO "priv-writer" WITH GRANT OPTION',
        'REVOKE INSERT ON TABLE "public"."accounts" FROM "priv_reader"',
    ]
    assert {("privilege", "GRANT"), ("privilege", "REVOKE"), ("destructive", "REVOKE")} <= (
        hazards(document)
    )
    assert document["summary"]["privilege_changes"] == ["GRANT", "REVOKE"]
    assert document["privileges"] == {
        "managed_roles": ["priv-writer", "priv_reader"],
        "manage_ownership": False,
    }
    apply(runner, db, document, tmp_path)
    assert acl(db, "public.accounts") == [
        ("priv-writer", "SELECT", True),
        ("priv-writer", "UPDATE", False),
        ("priv_outsider", "DELETE", False),  # not managed: kept, and TRUNCATE not granted
        ("priv_reader", "SELECT", False),
    ]
    assert sqls(planned(runner, db, desired, *roles)) == []


def test_grants_on_a_new_table_and_its_columns_follow_its_creation(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, f"CREATE TABLE old (id int);GRANT SELECT ON old TO {READER};")
    desired = write(
        tmp_path / "schema.sql", TABLE + f"GRANT SELECT (id, email) ON accounts TO {READER};"
    )
    document = planned(runner, db, desired, "--managed-role", READER, "--allow-destructive")
    assert sqls(document)[0] == "DROP TABLE public.old"  # its grant goes with it: no REVOKE
    assert sqls(document)[1].startswith("CREATE TABLE public.accounts")
    assert "REVOKE" not in " ".join(sqls(document))
    assert sqls(document)[-2:] == [
        'GRANT SELECT ("email") ON TABLE "public"."accounts" TO "priv_reader"',
        'GRANT SELECT ("id") ON TABLE "public"."accounts" TO "priv_reader"',
    ]
    apply(runner, db, document, tmp_path)
    columns = query(
        db,
        "SELECT column_name FROM information_schema.column_privileges"
        f" WHERE grantee = '{READER}' AND table_name = 'accounts' ORDER BY 1",
    )
    assert columns == [("email",), ("id",)]
    assert sqls(planned(runner, db, desired, "--managed-role", READER)) == []


def test_default_privileges_are_planned(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, TABLE)
    desired = write(
        tmp_path / "schema.sql",
        TABLE + f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {READER};",
    )
    document = planned(runner, db, desired, "--managed-role", READER)
    assert sqls(document) == [
        'ALTER DEFAULT PRIVILEGES IN SCHEMA "public" GRANT SELECT ON TABLES TO "priv_reader"'
    ]
    assert ("privilege", "GRANT") in hazards(document)
    apply(runner, db, document, tmp_path)
    load(db, "CREATE TABLE later (id int)")
    assert acl(db, "public.later") == [(READER, "SELECT", False)]
    later = write(tmp_path / "schema.sql", desired.read_text() + "CREATE TABLE later (id int);")
    assert sqls(planned(runner, db, later, "--managed-role", READER)) == []


def test_without_managed_roles_privileges_are_not_read_and_the_plan_is_unchanged(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, TABLE + f"GRANT DELETE ON accounts TO {READER};")
    desired = write(tmp_path / "schema.sql", TABLE + f"GRANT SELECT ON accounts TO {READER};")
    document = planned(runner, db, desired)
    assert sqls(document) == []
    assert "privileges" not in document
    inspected = runner(
        "schema", "inspect", "--url-env", "TARGET_URL", env={"TARGET_URL": db.url_with_password}
    )
    assert "grant:" not in inspected.stdout and "grants" not in json.loads(inspected.stdout)
    managed = runner(
        "schema", "inspect", "--url-env", "TARGET_URL", "--managed-role", READER,
        env={"TARGET_URL": db.url_with_password},
    )  # fmt: skip
    grants = json.loads(managed.stdout)["grants"]
    assert grants == {
        f"grant:table:public.accounts:{READER}": {
            "on": "table:public.accounts",
            "target": 'TABLE "public"."accounts"',
            "grantee": READER,
            "privileges": ["DELETE"],
            "grantable": [],
            "column": "",
        }
    }


def test_owners_the_desired_schema_sets_are_planned_with_manage_ownership(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    # PostgreSQL gives an object only to a role that may create in its schema.
    may_create = f"GRANT CREATE ON SCHEMA public TO {OWNER};"
    load(db, TABLE + "CREATE VIEW emails AS SELECT email FROM accounts;" + may_create)
    desired = write(
        tmp_path / "schema.sql",
        TABLE
        + "CREATE VIEW emails AS SELECT email FROM accounts;"
        + may_create
        + f"ALTER TABLE accounts OWNER TO {OWNER};",
    )
    assert sqls(planned(runner, db, desired)) == []  # off by default
    document = planned(runner, db, desired, "--manage-ownership")
    assert sqls(document) == ['ALTER TABLE "public"."accounts" OWNER TO "priv_owner"']
    assert hazards(document) == {("privilege", "OWNER_CHANGE")}
    apply(runner, db, document, tmp_path)
    owners = query(
        db,
        "SELECT relname, pg_get_userbyid(relowner) = current_user FROM pg_class"
        " WHERE relname IN ('accounts', 'emails') ORDER BY 1",
    )
    assert owners == [("accounts", False), ("emails", True)]  # the view: not declared, kept
    assert sqls(planned(runner, db, desired, "--manage-ownership")) == []


def test_a_role_the_target_lacks_and_a_cascading_revoke_are_refused(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, TABLE)
    cascading = write(
        tmp_path / "cascade.sql", TABLE + f"REVOKE SELECT ON accounts FROM {READER} CASCADE;"
    )
    refused = plan(runner, db, cascading, "--managed-role", READER)
    assert refused.returncode == 2 and "REVOKE ... CASCADE" in refused.stderr
    desired = write(tmp_path / "schema.sql", TABLE + "GRANT SELECT ON accounts TO priv_nobody;")
    refused = plan(runner, db, desired, "--managed-role", "priv_nobody")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    refusal = json.loads(refused.stdout)["refusal"]
    assert refusal["code"] == "unknown_role"
    assert '"priv_nobody"' in refusal["message"]
    assert query(db, "SELECT count(*) FROM pg_roles WHERE rolname = 'priv_nobody'") == [(0,)]
    ignored = planned(runner, db, desired)  # not managed: not the plan's business
    assert sqls(ignored) == []


def test_a_role_name_holding_a_double_quote_is_quoted_granted_and_applied(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    """PostgreSQL names a missing role in its message without doubling a ``"`` inside it
    (``role "priv"quoted" does not exist``): the sandbox read such a name wrongly and the plan
    stopped there. A name is any text; quoting, never refusal, is what keeps it inert."""
    role = 'priv"quoted'
    with db.server.connect() as admin:
        admin.execute(
            sql.SQL(
                "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) "
                "THEN CREATE ROLE {} NOLOGIN; END IF; END$$"
            ).format(sql.Literal(role), sql.Identifier(role))
        )
    load(db, TABLE)
    desired = write(
        tmp_path / "schema.sql",
        TABLE + 'GRANT SELECT, UPDATE (email) ON accounts TO "priv""quoted";',
    )
    document = planned(runner, db, desired, "--managed-role", role)
    assert sqls(document) == [
        'GRANT UPDATE ("email") ON TABLE "public"."accounts" TO "priv""quoted"',
        'GRANT SELECT ON TABLE "public"."accounts" TO "priv""quoted"',
    ]
    assert document["privileges"]["managed_roles"] == [role]
    apply(runner, db, document, tmp_path)
    assert acl(db, "public.accounts") == [(role, "SELECT", False)]
    columns = query(
        db,
        "SELECT grantee, column_name FROM information_schema.column_privileges"
        " WHERE table_name = 'accounts' AND privilege_type = 'UPDATE' AND grantee = 'priv\"quoted'",
    )
    assert columns == [(role, "email")]
    assert sqls(planned(runner, db, desired, "--managed-role", role)) == []


def test_privilege_plans_are_byte_identical_across_hash_seeds(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    may_create = f"GRANT CREATE ON SCHEMA public TO {OWNER};"
    load(db, TABLE + f"GRANT INSERT, DELETE ON accounts TO {READER};" + may_create)
    desired = write(
        tmp_path / "schema.sql",
        TABLE + f'GRANT SELECT, UPDATE, REFERENCES ON accounts TO {READER}, "{WRITER}";'
        f"GRANT SELECT (secret) ON accounts TO {OUTSIDER};"
        + may_create
        + f"ALTER TABLE accounts OWNER TO {OWNER};",
    )
    extra = ("--managed-role", WRITER, "--managed-role", READER, "--managed-role", OUTSIDER)
    outputs = {
        runner(
            "schema", "plan", "--url-env", "TARGET_URL", "--desired", str(desired),
            "--no-cache", "--allow-destructive", "--manage-ownership", *extra,
            env={"TARGET_URL": db.url_with_password}, seed=seed,
        ).stdout
        for seed in ("1", "2", "987")
    }  # fmt: skip
    assert len(outputs) == 1
    # the owner; priv-writer's grant; priv_reader's revoke and grant; the column grant
    assert len(json.loads(outputs.pop())["statements"]) == 5
