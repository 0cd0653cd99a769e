"""Planning never writes to a MariaDB target: the desired SQL runs in a private mariadbd.

Each attack is a valid desired schema plus statements that used to get past the old regex
filter (a leading comment, a PREPARE built with CONCAT, a qualifier split by a comment),
planned with the target's root credential (the worst case). The target server must be
unchanged afterwards (schemas, users, rows, global settings, files), and the plan either
refused with a stable reason or made without any effect there. Each runs as written (the
classifier refuses what is not a declaration first) and with ``--procedural-schema`` (what is
procedural then reaches the sandbox, which must hold alone).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.databases import database_url
from harness.mariadb import MariaDBDatabase, MariaDBServer
from harness.runner_cli import RunnerCLI, write

BASE = "CREATE TABLE accounts (id int PRIMARY KEY, owner varchar(50) NOT NULL);\n"


@pytest.fixture
def victim(mariadb_server: MariaDBServer) -> Iterator[str]:
    name = f"victim_{secrets.token_hex(4)}"
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
        cur.execute(f"CREATE TABLE `{name}`.keep (v varchar(20))")
        cur.execute(f"INSERT INTO `{name}`.keep VALUES ('precious')")
    yield name
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


def _state(server: MariaDBServer, database: str, victim: str, marker: Path) -> dict[str, Any]:
    with server.connect() as conn, conn.cursor() as cur:
        state: dict[str, Any] = {}
        for key, sql in {
            "schemas": "SHOW DATABASES",
            "users": "SELECT User, Host FROM mysql.user ORDER BY 1, 2",
            "globals": "SELECT @@GLOBAL.max_connections, @@GLOBAL.sql_mode, @@GLOBAL.general_log",
            "rows": f"SELECT * FROM `{database}`.accounts ORDER BY id",
            "victim": f"SELECT * FROM `{victim}`.keep",
            "tables": f"SHOW TABLES FROM `{database}`",
        }.items():
            cur.execute(sql)
            state[key] = cur.fetchall()
    state["marker"] = marker.exists()
    return state


ATTACKS = {
    "a leading comment": "/* harmless */ DROP DATABASE {victim};",
    "a prepared statement": (
        "SET @s = CONCAT('DROP ', 'DATABASE {victim}'); PREPARE st FROM @s; EXECUTE st;"
    ),
    "a qualifier split by a comment": "DROP TABLE {victim} /**/ . keep;",
    "rows written to the target": "INSERT INTO {target}.accounts VALUES (99, 'mallory');",
    "a table of the target dropped": "DROP TABLE `{target}`.accounts;",
    "a file written": "SELECT 'x' INTO OUTFILE '{marker}';",
    "a user created": "CREATE USER mallory_{tag} IDENTIFIED BY 'pw';",
    "a global setting": "SET GLOBAL max_connections = 3;",
    "general log to a file": "SET GLOBAL general_log = 1;",
    "a definer": (
        "CREATE DEFINER = `root`@`localhost` TRIGGER t_ai AFTER INSERT ON accounts "
        "FOR EACH ROW SET @x = 1;"
    ),
}


@pytest.mark.parametrize("procedural", [False, True], ids=["declarations", "procedural"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_in_the_desired_schema_never_reaches_the_target(
    attack: str, procedural: bool, mariadb_database: MariaDBDatabase, victim: str, tmp_path: Path
) -> None:
    db, server = mariadb_database, mariadb_database.server
    with server.connect(db.name) as conn, conn.cursor() as cur:
        cur.execute(BASE)
        cur.execute("INSERT INTO accounts VALUES (1, 'alice'), (2, 'bob')")
    marker = tmp_path / "pwned"
    statement = ATTACKS[attack].format(
        victim=victim, target=db.name, marker=marker, tag=secrets.token_hex(3)
    )
    desired = write(tmp_path / "schema.sql", BASE + statement + "\n")
    before = _state(server, db.name, victim, marker)
    result = RunnerCLI()(
        "schema",
        "plan",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        *(["--procedural-schema"] if procedural else []),
        env={"TARGET_URL": server.url(db.name)},  # root: the worst case
        timeout=300,
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert _state(server, db.name, victim, marker) == before
    if result.returncode == 0:
        plan = json.loads(result.stdout)
        assert all(
            "accounts" not in s["sql"] or s["op"] == "create_definition" for s in plan["statements"]
        )
    else:
        assert result.returncode in (1, 2)


def _user(server: MariaDBServer, database: str, privileges: str) -> tuple[str, str]:
    name, password = f"reader_{secrets.token_hex(3)}", secrets.token_urlsafe(12)
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{name}'@'{server.host}' IDENTIFIED BY %s", (password,))
        cur.execute(f"GRANT {privileges} ON `{database}`.* TO '{name}'@'{server.host}'")
    return name, password


def test_a_read_only_credential_plans_and_one_that_cannot_see_triggers_is_refused(
    mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    db, server = mariadb_database, mariadb_database.server
    with server.connect(db.name) as conn, conn.cursor() as cur:
        cur.execute(BASE)
        cur.execute("CREATE TRIGGER audit AFTER INSERT ON accounts FOR EACH ROW SET @n = 1")
    desired = write(
        tmp_path / "schema.sql",
        BASE
        + "CREATE TRIGGER audit AFTER INSERT ON accounts FOR EACH ROW SET @n = 1;\n"
        + "CREATE INDEX owner_idx ON accounts (owner);\n",
    )
    reader, password = _user(server, db.name, "SELECT, SHOW VIEW, TRIGGER, EVENT")
    blind, blind_password = _user(server, db.name, "SELECT")
    runner = RunnerCLI(secrets=[password, blind_password])

    def plan(user: str, secret: str) -> Any:
        url = database_url("mysql", server.host, server.port, user, db.name, secret)
        return runner(
            "schema",
            "plan",
            "--url-env",
            "TARGET_URL",
            "--desired",
            str(desired),
            env={"TARGET_URL": url},
        )

    made = plan(reader, password)
    assert made.returncode == 0, made.stdout + made.stderr
    assert [s["op"] for s in json.loads(made.stdout)["statements"]] == ["create_index"]
    refused = plan(blind, blind_password)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    refusal = json.loads(refused.stdout)["refusal"]
    assert refusal["code"] == "catalog_not_visible"
    assert "TRIGGER" in refusal["message"]
    assert runner.leaks() == []
