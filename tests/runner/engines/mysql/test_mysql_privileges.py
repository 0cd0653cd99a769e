"""Grants of managed accounts on MariaDB (``--managed-role``) through ``seshat-runner``.

Each test gets a fresh database, an app credential that may grant on it and read the grant
tables, and accounts of its own: two managed ones and an unmanaged one whose grants must
never change. Desired grants run in the private sandbox to stand-in accounts; the plan names
the real ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from harness.mariadb import MariaDBDatabase
from harness.runner_cli import RunnerCLI, write

from runner.engines.mysql.grants import (
    AccountError,
    account,
    account_sql,
    grant_statement,
    resolve,
)
from runner.engines.mysql.sandbox import dev_sandbox, server_facts
from runner.url import parse_url

BASE = """
CREATE TABLE customers (
  id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
  email varchar(200) NOT NULL
);
CREATE TABLE orders (
  id int NOT NULL AUTO_INCREMENT PRIMARY KEY,
  customer_id bigint,
  total decimal(10,2) DEFAULT 0
);
"""
SANDBOX = re.compile(r"seshat_[0-9a-f]{12}")
"""A scratch schema's or a stand-in account's name: never printed."""


class Accounts:
    """The test's accounts (user names; every one at host ``%``)."""

    def __init__(self, db: MariaDBDatabase) -> None:
        tag = secrets.token_hex(3)
        self.reader = f"reader_{tag}"
        self.writer = f"writer_{tag}"
        self.other = f"other_{tag}"
        self.app = f"'{db.server.app_user}'@'{db.server.host}'"


@pytest.fixture
def accounts(mariadb_database: MariaDBDatabase) -> Iterator[Accounts]:
    db = mariadb_database
    made = Accounts(db)
    with db.server.connect() as conn, conn.cursor() as cur:
        for user in (made.reader, made.writer, made.other):
            cur.execute(f"CREATE USER '{user}'@'%'")
        cur.execute(f"GRANT ALL PRIVILEGES ON `{db.name}`.* TO {made.app} WITH GRANT OPTION")
        for table in ("db", "tables_priv", "columns_priv", "procs_priv", "user"):
            cur.execute(f"GRANT SELECT ON mysql.{table} TO {made.app}")
    yield made
    with db.server.connect() as conn, conn.cursor() as cur:
        for user in (made.reader, made.writer, made.other):
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        # The app account is the whole session's: it must leave with only its database grant.
        for table in ("db", "tables_priv", "columns_priv", "procs_priv", "user"):
            with contextlib.suppress(pymysql.err.OperationalError):  # a test revoked it
                cur.execute(f"REVOKE SELECT ON mysql.{table} FROM {made.app}")


@pytest.fixture
def runner(mariadb_database: MariaDBDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[mariadb_database.server.app_password])
    yield cli
    assert cli.leaks() == [], "the password appeared in the runner's output"
    assert not any(SANDBOX.search(out) for out in cli.outputs), "a sandbox name was printed"


def run(db: MariaDBDatabase, sql: str) -> None:
    with db.connect() as conn, conn.cursor() as cur:
        for statement in [s for s in sql.split(";") if s.strip()]:
            cur.execute(statement)


def grants(db: MariaDBDatabase, user: str) -> list[str]:
    """``SHOW GRANTS`` of ``user@%`` that are about the test's database."""
    with db.server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SHOW GRANTS FOR '{user}'@'%'")
        return sorted(str(r[0]) for r in cur.fetchall() if f"`{db.name}`" in str(r[0]))


def plan(runner: RunnerCLI, db: MariaDBDatabase, desired: Path, *extra: str) -> Any:
    args = ["schema", "plan", "--url-env", "TARGET_URL", "--desired", str(desired), *extra]
    return runner(*args, env={"TARGET_URL": db.url_with_password})


def planned(runner: RunnerCLI, db: MariaDBDatabase, desired: Path, *extra: str) -> Any:
    result = plan(runner, db, desired, *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def plan_and_apply(
    runner: RunnerCLI, db: MariaDBDatabase, desired: Path, tmp_path: Path, *extra: str
) -> Any:
    out = tmp_path / "plan.json"
    result = plan(runner, db, desired, "--output", str(out), *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(out.read_text())
    applied_ = runner(
        "schema", "apply", "--url-env", "TARGET_URL", "--plan", str(out),
        env={"TARGET_URL": db.url_with_password},
    )  # fmt: skip
    assert applied_.returncode == 0, applied_.stdout + applied_.stderr
    assert json.loads(applied_.stdout)["converged"] is True
    return document


def refusal(result: Any, code: str) -> str:
    """The message of a plan refused (exit status 1) with ``code``."""
    assert result.returncode == 1, result.stdout + result.stderr
    found = json.loads(result.stdout)["refusal"]
    assert found["code"] == code
    return str(found["message"])


def hazards(document: Any) -> set[tuple[str, str]]:
    return {(h["kind"], h["code"]) for s in document["statements"] for h in s["hazards"]}


def test_grants_converge_and_a_second_plan_is_empty(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    run(db, BASE)
    run(db, f"GRANT SELECT ON `{db.name}`.orders TO '{accounts.other}'@'%'")
    other_before = grants(db, accounts.other)
    desired = write(
        tmp_path / "schema.sql",
        BASE
        + f"GRANT SELECT, INSERT ON orders TO {accounts.reader}, '{accounts.other}'@'%';\n"
        + f"GRANT SELECT (email), UPDATE (email) ON `{db.name}`.customers TO {accounts.reader};\n"
        + f"GRANT SELECT ON `{db.name}`.* TO '{accounts.writer}'@'%' WITH GRANT OPTION;\n"
        + f"GRANT DELETE ON customers TO '{accounts.other}'@'%';\n",
    )
    managed = ("--managed-role", accounts.reader, "--managed-role", f"{accounts.writer}@%")
    document = plan_and_apply(runner, db, desired, tmp_path, *managed)
    reader, writer = f"'{accounts.reader}'@'%'", f"'{accounts.writer}'@'%'"
    assert [s["sql"] for s in document["statements"]] == [
        f"GRANT SELECT (`email`), UPDATE (`email`) ON `customers` TO {reader}",
        f"GRANT SELECT ON * TO {writer} WITH GRANT OPTION",
        f"GRANT INSERT, SELECT ON `orders` TO {reader}",
    ]
    assert hazards(document) == {("privilege", "GRANT")}
    assert document["summary"]["privilege_changes"] == ["GRANT"]
    assert document["privileges"] == {
        "managed_roles": [accounts.reader, f"{accounts.writer}@%"],
        "manage_ownership": False,
    }
    assert grants(db, accounts.reader) == [
        f"GRANT SELECT (`email`), UPDATE (`email`) ON `{db.name}`.`customers` TO "
        f"`{accounts.reader}`@`%`",
        f"GRANT SELECT, INSERT ON `{db.name}`.`orders` TO `{accounts.reader}`@`%`",
    ]
    assert grants(db, accounts.writer) == [
        f"GRANT SELECT ON `{db.name}`.* TO `{accounts.writer}`@`%` WITH GRANT OPTION"
    ]
    assert grants(db, accounts.other) == other_before  # unmanaged: left alone
    again = planned(runner, db, desired, *managed)
    assert again["statements"] == []


def test_a_grant_removed_from_the_desired_schema_is_revoked(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    run(db, BASE)
    run(db, f"GRANT SELECT, DELETE ON `{db.name}`.orders TO '{accounts.reader}'@'%'")
    run(db, f"GRANT INSERT ON `{db.name}`.* TO '{accounts.reader}'@'%'")
    run(db, f"GRANT SELECT ON `{db.name}`.orders TO '{accounts.other}'@'%'")
    desired = write(
        tmp_path / "schema.sql", BASE + f"GRANT SELECT ON orders TO '{accounts.reader}'@'%';\n"
    )
    document = plan_and_apply(
        runner, db, desired, tmp_path, "--managed-role", accounts.reader, "--allow-destructive"
    )
    reader = f"'{accounts.reader}'@'%'"
    assert sorted(s["sql"] for s in document["statements"]) == [
        f"REVOKE DELETE ON `orders` FROM {reader}",
        f"REVOKE INSERT ON * FROM {reader}",
    ]
    assert ("privilege", "REVOKE") in hazards(document)
    assert grants(db, accounts.reader) == [
        f"GRANT SELECT ON `{db.name}`.`orders` TO `{accounts.reader}`@`%`"
    ]
    assert grants(db, accounts.other) == [
        f"GRANT SELECT ON `{db.name}`.`orders` TO `{accounts.other}`@`%`"
    ]
    assert planned(runner, db, desired, "--managed-role", accounts.reader)["statements"] == []


def test_without_managed_roles_grants_are_neither_read_nor_planned(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    run(db, BASE)
    run(db, f"GRANT DELETE ON `{db.name}`.orders TO '{accounts.reader}'@'%'")
    desired = write(
        tmp_path / "schema.sql", BASE + f"GRANT SELECT ON orders TO '{accounts.reader}'@'%';\n"
    )
    document = planned(runner, db, desired)
    assert document["statements"] == []
    assert "privileges" not in document


def test_a_grant_to_an_account_the_server_lacks_is_refused(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    run(db, BASE)
    ghost = f"ghost_{secrets.token_hex(3)}"
    desired = write(tmp_path / "schema.sql", BASE + f"GRANT SELECT ON orders TO {ghost};\n")
    refused = plan(runner, db, desired, "--managed-role", ghost)
    assert f"'{ghost}'@'%'" in refusal(refused, "unknown_role")


def test_a_credential_that_cannot_read_the_grant_tables_is_refused(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    run(db, BASE)
    run(db, f"REVOKE SELECT ON mysql.tables_priv FROM {accounts.app}")
    desired = write(tmp_path / "schema.sql", BASE)
    refused = plan(runner, db, desired, "--managed-role", accounts.reader)
    assert "mysql.tables_priv" in refusal(refused, "catalog_not_visible")


def test_manage_ownership_is_refused_on_mariadb(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    desired = write(tmp_path / "schema.sql", BASE)
    refused = plan(runner, db, desired, "--manage-ownership")
    assert "no owner" in refusal(refused, "unsupported_option")


def test_a_grant_to_the_runners_own_account_is_refused(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    run(db, BASE)
    desired = write(tmp_path / "schema.sql", BASE + f"GRANT SELECT ON orders TO {accounts.app};\n")
    refused = plan(runner, db, desired, "--managed-role", accounts.reader)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "runner's own account" in refused.stdout + refused.stderr
    as_managed = plan(
        runner, db, write(tmp_path / "base.sql", BASE), "--managed-role", accounts.app
    )
    assert as_managed.returncode == 1, as_managed.stdout + as_managed.stderr
    assert "runner's own" in json.loads(as_managed.stdout)["refusal"]["message"]


def test_routine_grants_and_all_privileges_converge(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    routine = "CREATE PROCEDURE touch() BEGIN SELECT 1; END;\n"
    desired = write(
        tmp_path / "schema.sql",
        BASE
        + routine
        + f"GRANT EXECUTE ON PROCEDURE touch TO {accounts.reader};\n"
        + f"GRANT ALL PRIVILEGES ON orders TO {accounts.writer};\n"
        + f"GRANT ALL ON `{db.name}`.* TO {accounts.writer};\n",
    )
    managed = ("--managed-role", accounts.reader, "--managed-role", accounts.writer)
    document = plan_and_apply(runner, db, desired, tmp_path, *managed)
    assert f"GRANT EXECUTE ON PROCEDURE `touch` TO '{accounts.reader}'@'%'" in [
        s["sql"] for s in document["statements"]
    ]
    assert grants(db, accounts.reader) == [
        f"GRANT EXECUTE ON PROCEDURE `{db.name}`.`touch` TO `{accounts.reader}`@`%`"
    ]
    # ALL is what the server makes of it at each level, and reads back the same.
    assert grants(db, accounts.writer) == [
        f"GRANT ALL PRIVILEGES ON `{db.name}`.* TO `{accounts.writer}`@`%`",
        f"GRANT ALL PRIVILEGES ON `{db.name}`.`orders` TO `{accounts.writer}`@`%`",
    ]
    assert planned(runner, db, desired, *managed)["statements"] == []


def test_an_explicit_sandbox_grants_to_locked_stand_ins_and_drops_them(
    mariadb_database: MariaDBDatabase, accounts: Accounts
) -> None:
    db = mariadb_database
    dev = parse_url(db.server.url(db.name))  # the root credential: it may create users
    with db.connect() as conn:
        target = server_facts(conn, db.name)
    elsewhere = dataclasses.replace(target, identity="another server")
    real = f"{accounts.reader}@%"
    with dev_sandbox(dev, elsewhere) as sandbox:
        stand = sandbox.stand_ins([real])
        user, _, host = stand[real].rpartition("@")
        assert user != accounts.reader and host == "localhost"
        with db.server.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT JSON_VALUE(Priv, '$.account_locked') FROM mysql.global_priv"
                " WHERE User = %s AND Host = %s",
                (user, host),
            )
            assert cur.fetchall() == (("1",),)  # ACCOUNT LOCK: it cannot log in
        assert sandbox.stand_ins([real]) == stand  # made once
    with db.server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM mysql.user WHERE User = %s", (user,))
        assert cur.fetchall() == ((0,),)
    assert grants(db, accounts.reader) == []


# -- naming accounts and reading GRANT statements (no server) ---------------------------------


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("app", "app@%"),
        ("app@localhost", "app@localhost"),
        ("'app'@'10.0.%'", "app@10.0.%"),
        ("`odd@name`@`%`", "odd@name@%"),
    ],
)
def test_a_managed_role_names_an_account(role: str, expected: str) -> None:
    assert account(role) == expected


def test_grant_statements_are_read_and_rewritten_to_other_accounts() -> None:
    found = grant_statement(
        "GRANT SELECT (a, b), INSERT ON TABLE `shop`.t TO app, 'ops'@'localhost' WITH GRANT OPTION"
    )
    assert found is not None
    assert found.grantees == ("app", "ops@localhost")  # a bare name is resolved later
    assert found.qualifier() == "shop"
    assert found.with_grantees({"ops@localhost": "x@localhost"}) == (
        "GRANT SELECT (a, b), INSERT ON TABLE `shop`.t TO 'x'@'localhost' WITH GRANT OPTION"
    )
    revoke = grant_statement("revoke all privileges on *.* from CURRENT_USER()")
    assert revoke is not None and revoke.grantees == ("CURRENT_USER",)
    assert revoke.qualifier() == "*"
    commented = grant_statement("-- readers\n/* all */ GRANT SELECT ON t TO app")
    assert commented is not None and commented.with_grantees({"app": "x@y"}) == (
        "-- readers\n/* all */ GRANT SELECT ON t TO 'x'@'y'"
    )
    role = grant_statement("GRANT reporting, `ops` TO app, PUBLIC WITH ADMIN OPTION")
    assert role is not None and role.level == ""
    assert role.roles == ("reporting", "ops") and role.grantees == ("app", "PUBLIC")
    assert role.with_grantees({"app": "s@h", "PUBLIC": "p@"}, {"reporting": "r@"}) == (
        "GRANT 'r', 'ops' TO 's'@'h', 'p' WITH ADMIN OPTION"
    )
    option = grant_statement("REVOKE ADMIN OPTION FOR reporting FROM 'app'@'%'")
    assert option is not None and option.roles == ("reporting",)
    assert option.grantees == ("app@%",)
    proxy = grant_statement("GRANT PROXY ON 'root'@'localhost' TO app")
    assert proxy is not None and proxy.proxy
    assert grant_statement("CREATE TABLE grants (id int)") is None
    assert account_sql("o'k@%") == "'o''k'@'%'"
    assert (account_sql("reporting"), account_sql("PUBLIC")) == ("'reporting'", "PUBLIC")


def test_a_bare_name_is_a_role_where_the_server_has_one() -> None:
    assert resolve("reporting", {"reporting"}) == "reporting"
    assert resolve("reporting", set()) == "reporting@%"
    assert resolve("reporting@localhost", {"reporting"}) == "reporting@localhost"
    assert resolve("public", set()) == "PUBLIC"
    with pytest.raises(AccountError):
        account("app@''")


# -- grants outlive what they are on: MariaDB keeps them by name ------------------------------


def test_a_table_dropped_and_created_again_has_exactly_the_desired_grants(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    """MariaDB keeps a table's and its columns' grants after DROP TABLE (and a column's after
    DROP COLUMN) and gives them to the next table of that name: plans that drop a table and
    create it again, or turn it into a view, must still end with exactly the desired grants
    and a fresh empty plan."""
    db = mariadb_database
    run(db, BASE)
    run(db, f"GRANT SELECT, DELETE ON `{db.name}`.orders TO '{accounts.reader}'@'%'")
    run(db, f"GRANT UPDATE (total) ON `{db.name}`.orders TO '{accounts.reader}'@'%'")
    run(db, f"GRANT SELECT (email) ON `{db.name}`.customers TO '{accounts.reader}'@'%'")
    managed = ("--managed-role", accounts.reader, "--allow-destructive")
    customers = BASE.split("CREATE TABLE orders")[0]
    # 1. orders and customers.email go away: their grants go with them, on the server too.
    no_email = customers.replace(",\n  email varchar(200) NOT NULL", "")
    gone = write(tmp_path / "gone.sql", no_email)
    plan_and_apply(runner, db, gone, tmp_path, *managed)
    assert grants(db, accounts.reader) == []
    assert planned(runner, db, gone, *managed)["statements"] == []
    # 2. orders comes back with other grants, customers.email without any.
    back = write(
        tmp_path / "back.sql", BASE + f"GRANT INSERT ON orders TO '{accounts.reader}'@'%';\n"
    )
    plan_and_apply(runner, db, back, tmp_path, *managed)
    assert grants(db, accounts.reader) == [
        f"GRANT INSERT ON `{db.name}`.`orders` TO `{accounts.reader}`@`%`"
    ]
    assert planned(runner, db, back, *managed)["statements"] == []
    # 3. grants left behind by a drop outside Seshat are the next table's: revoked, kept or
    # completed like any other grant of the managed account.
    run(db, f"GRANT SELECT, INSERT ON `{db.name}`.orders TO '{accounts.reader}'@'%'")
    run(db, "DROP TABLE orders")
    plan_and_apply(runner, db, back, tmp_path, *managed)
    assert grants(db, accounts.reader) == [
        f"GRANT INSERT ON `{db.name}`.`orders` TO `{accounts.reader}`@`%`"
    ]
    assert planned(runner, db, back, *managed)["statements"] == []
    # 4. a table replaced by a view of its name in one plan.
    as_view = write(
        tmp_path / "view.sql",
        customers
        + "CREATE VIEW orders AS SELECT id, email FROM customers;\n"
        + f"GRANT SELECT ON orders TO '{accounts.reader}'@'%';\n",
    )
    plan_and_apply(runner, db, as_view, tmp_path, *managed)
    assert grants(db, accounts.reader) == [
        f"GRANT SELECT ON `{db.name}`.`orders` TO `{accounts.reader}`@`%`"
    ]
    assert planned(runner, db, as_view, *managed)["statements"] == []
    # 5. the same in a scope (--exclude): a name nothing holds is no excluded object.
    run(db, "DROP VIEW orders")
    scoped = (*managed, "--exclude", "scratch_*")
    plan_and_apply(runner, db, back, tmp_path, *scoped)
    assert grants(db, accounts.reader) == [
        f"GRANT INSERT ON `{db.name}`.`orders` TO `{accounts.reader}`@`%`"
    ]
    assert planned(runner, db, back, *scoped)["statements"] == []


# -- roles and PUBLIC --------------------------------------------------------------------------


@pytest.fixture
def roles(mariadb_database: MariaDBDatabase, accounts: Accounts) -> Iterator[tuple[str, str]]:
    """Two roles of the target the app account administers (so it may grant them), and
    SELECT on mysql.roles_mapping for it."""
    db = mariadb_database
    tag = secrets.token_hex(3)
    made = (f"reporting_{tag}", f"analyst_{tag}")
    with db.server.connect() as conn, conn.cursor() as cur:
        for role in made:
            cur.execute(f"CREATE ROLE {role} WITH ADMIN {accounts.app}")
        cur.execute(f"GRANT SELECT ON mysql.roles_mapping TO {accounts.app}")
    yield made
    with db.server.connect() as conn, conn.cursor() as cur:
        for role in made:
            cur.execute(f"DROP ROLE IF EXISTS {role}")
        cur.execute(f"REVOKE SELECT ON mysql.roles_mapping FROM {accounts.app}")


def role_grants(db: MariaDBDatabase, role: str) -> list[str]:
    """``SHOW GRANTS`` of a role: its memberships and grants on the test's database."""
    with db.server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SHOW GRANTS FOR {role}")
        found = [str(r[0]) for r in cur.fetchall()]
    return sorted(g for g in found if f"`{db.name}`" in g or " ON " not in g)


def memberships(db: MariaDBDatabase, user: str) -> list[tuple[str, str, str]]:
    with db.server.connect() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT Role, Host, Admin_option FROM mysql.roles_mapping WHERE User = %s", (user,)
        )
        return sorted((str(r), str(h), str(a)) for r, h, a in cur.fetchall())


def test_roles_their_grants_and_memberships_converge(
    runner: RunnerCLI,
    mariadb_database: MariaDBDatabase,
    accounts: Accounts,
    roles: tuple[str, str],
    tmp_path: Path,
) -> None:
    db = mariadb_database
    reporting, analyst = roles
    run(db, BASE)
    desired = write(
        tmp_path / "schema.sql",
        BASE
        + f"GRANT SELECT ON orders TO {reporting};\n"
        + f"GRANT SELECT (email) ON customers TO {analyst};\n"
        + f"GRANT {reporting} TO {accounts.reader} WITH ADMIN OPTION;\n"
        + f"GRANT {reporting} TO {analyst};\n",
    )
    managed = ["--managed-role", reporting, "--managed-role", analyst]
    managed += ["--managed-role", accounts.reader]
    document = plan_and_apply(runner, db, desired, tmp_path, *managed)
    assert sorted(s["sql"] for s in document["statements"]) == sorted(
        [
            f"GRANT '{reporting}' TO '{accounts.reader}'@'%' WITH ADMIN OPTION",
            f"GRANT '{reporting}' TO '{analyst}'",
            f"GRANT SELECT (`email`) ON `customers` TO '{analyst}'",
            f"GRANT SELECT ON `orders` TO '{reporting}'",
        ]
    )
    assert hazards(document) == {("privilege", "GRANT")}
    assert role_grants(db, reporting) == [f"GRANT SELECT ON `{db.name}`.`orders` TO `{reporting}`"]
    assert role_grants(db, analyst) == [
        f"GRANT SELECT (`email`) ON `{db.name}`.`customers` TO `{analyst}`",
        f"GRANT SELECT ON `{db.name}`.`orders` TO `{reporting}`",  # SHOW GRANTS: inherited
        f"GRANT `{reporting}` TO `{analyst}`",
    ]
    assert memberships(db, accounts.reader) == [(reporting, "%", "Y")]
    assert memberships(db, analyst) == [(reporting, "", "N")]
    assert planned(runner, db, desired, *managed)["statements"] == []
    # The admin option and a membership go; the role's grant moves to another table.
    fewer = write(
        tmp_path / "fewer.sql",
        BASE
        + f"GRANT SELECT ON customers TO {reporting};\n"
        + f"GRANT SELECT (email) ON customers TO {analyst};\n"
        + f"GRANT {reporting} TO {accounts.reader};\n",
    )
    document = plan_and_apply(runner, db, fewer, tmp_path, *managed, "--allow-destructive")
    assert sorted(s["sql"] for s in document["statements"]) == sorted(
        [
            f"GRANT SELECT ON `customers` TO '{reporting}'",
            f"REVOKE '{reporting}' FROM '{analyst}'",
            f"REVOKE ADMIN OPTION FOR '{reporting}' FROM '{accounts.reader}'@'%'",
            f"REVOKE SELECT ON `orders` FROM '{reporting}'",
        ]
    )
    assert ("privilege", "REVOKE") in hazards(document)
    assert memberships(db, accounts.reader) == [(reporting, "%", "N")]
    assert memberships(db, analyst) == []
    assert planned(runner, db, fewer, *managed)["statements"] == []
    # A membership is managed where the role is too: naming another one is refused.
    other = write(tmp_path / "other.sql", BASE + f"GRANT {analyst} TO {accounts.reader};\n")
    refused = plan(runner, db, other, "--managed-role", accounts.reader)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "both the role and the grantee are managed" in refused.stderr
    assert memberships(db, accounts.reader) == [(reporting, "%", "N")]


def test_public_is_managed_on_mariadb_10_11(
    runner: RunnerCLI, mariadb_database: MariaDBDatabase, accounts: Accounts, tmp_path: Path
) -> None:
    db = mariadb_database
    run(db, f"{BASE}; GRANT INSERT ON `{db.name}`.customers TO PUBLIC")  # to every account
    desired = write(tmp_path / "schema.sql", BASE + "GRANT SELECT ON orders TO PUBLIC;\n")
    document = plan_and_apply(
        runner, db, desired, tmp_path, "--managed-role", "public", "--allow-destructive"
    )
    assert sorted(s["sql"] for s in document["statements"]) == [
        "GRANT SELECT ON `orders` TO PUBLIC",
        "REVOKE INSERT ON `customers` FROM PUBLIC",
    ]
    assert role_grants(db, "PUBLIC") == [f"GRANT SELECT ON `{db.name}`.`orders` TO PUBLIC"]
    assert planned(runner, db, desired, "--managed-role", "PUBLIC")["statements"] == []
    run(db, f"REVOKE SELECT ON `{db.name}`.orders FROM PUBLIC")
