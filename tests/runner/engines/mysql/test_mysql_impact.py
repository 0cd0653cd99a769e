"""Impact checks on a real MariaDB (docs/engine.md, "Impact"): the zero case, a plan refused
as certain to fail on its rows, counted figures, a timed-out count, and a credential without
SELECT (refused before planning on MariaDB, whose planning needs it)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.databases import database_url
from harness.impact import by_check, plan_with_impact
from harness.mariadb import MariaDBDatabase
from harness.runner_cli import RunnerCLI

LIVE = """
CREATE TABLE customers (id int NOT NULL PRIMARY KEY);
CREATE TABLE orders (
  id int NOT NULL PRIMARY KEY, email varchar(50), code varchar(20), customer_id int,
  legacy varchar(20)
)
"""
DESIRED = """
CREATE TABLE customers (id int NOT NULL PRIMARY KEY);
CREATE TABLE orders (
  id int NOT NULL PRIMARY KEY, email varchar(50) NOT NULL, code varchar(20),
  customer_id int, UNIQUE KEY code_uq (code),
  CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id)
);
"""


@pytest.fixture
def runner(mariadb_database: MariaDBDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[mariadb_database.server.app_password])
    yield cli
    assert cli.leaks() == []


def load(db: MariaDBDatabase, sql: str) -> None:
    with db.connect_as_app() as conn, conn.cursor() as cur:
        for statement in [s for s in sql.split(";") if s.strip()]:
            cur.execute(statement)


def plan(
    runner: RunnerCLI, url: str, folder: Path, desired: str, *extra: str
) -> tuple[Any, dict[str, Any]]:
    target = ["--url-env", "TARGET_URL"]
    return plan_with_impact(runner, target, folder, desired, *extra, env={"TARGET_URL": url})


def test_zero_refused_and_counted(
    mariadb_database: MariaDBDatabase, runner: RunnerCLI, tmp_path: Path
) -> None:
    db = mariadb_database
    load(
        db,
        LIVE + "; INSERT INTO customers VALUES (1);"
        " INSERT INTO orders VALUES (1, 'a', 'A', 1, 'x'), (2, 'b', 'B', NULL, NULL)",
    )
    result, figures = plan(runner, db.url_with_password, tmp_path, DESIRED)
    assert result.returncode == 0, result.stderr
    found = by_check(figures)
    for check in ("null_rows", "duplicate_groups", "orphan_rows"):
        assert found[check]["verdict"] == "none" and found[check]["exact"], found[check]
    assert found["non_null_values"]["count"] == 1
    assert "DROP COLUMN orders.legacy: 1 non-NULL values (exact)" in result.stderr

    load(db, "INSERT INTO orders VALUES (3, NULL, 'A', 5, NULL)")
    refused, _ = plan(runner, db.url_with_password, tmp_path, DESIRED)
    assert refused.returncode == 1, refused.stderr
    refusal = json.loads(refused.stdout)["refusal"]
    assert refusal["code"] == "would_fail_on_data"
    assert "orders.email: 1 rows are NULL (exact)" in refusal["message"]
    assert "(and 2 more)" in refusal["message"]


def test_timed_out_and_no_select_privilege(
    mariadb_database: MariaDBDatabase, runner: RunnerCLI, tmp_path: Path
) -> None:
    db = mariadb_database
    load(db, LIVE)
    digits = " UNION ALL ".join(f"SELECT {n} AS n" for n in range(10))
    load(
        db,
        f"INSERT INTO orders SELECT k, 'e', k, NULL, NULL FROM (SELECT 1 + a.n + 10 * b.n"
        f" + 100 * c.n + 1000 * d.n + 10000 * e.n + 100000 * f.n AS k FROM ({digits}) a,"
        f" ({digits}) b, ({digits}) c, ({digits}) d, ({digits}) e, ({digits}) f"
        " WHERE f.n < 2) g",
    )
    desired = DESIRED.replace(
        ",\n  CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id)",
        "",
    )
    result, figures = plan(
        runner,
        db.url_with_password,
        tmp_path,
        desired,
        "--impact",
        "exact",
        "--impact-timeout",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert by_check(figures)["duplicate_groups"]["reason"] == "timed_out"

    server = db.server
    user, password = f"impact_{secrets.token_hex(3)}", secrets.token_urlsafe(16)
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        cur.execute(f"GRANT INSERT ON `{db.name}`.* TO '{user}'@'%'")
    try:
        url = database_url("mysql", server.host, server.port, user, db.name, password)
        limited = RunnerCLI(secrets=[password])
        # Planning on MariaDB needs SELECT on the database (the catalog must be visible),
        # so a credential without it is refused before any figure could be unknown.
        result, figures = plan(limited, url, tmp_path, desired)
        assert limited.leaks() == []
        assert result.returncode == 1, result.stderr
        assert json.loads(result.stdout)["refusal"]["code"] == "catalog_not_visible"
        assert figures == {}
    finally:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER '{user}'@'%'")


def test_rows_holding_an_enum_value_the_plan_removes_are_counted(
    mariadb_database: MariaDBDatabase, runner: RunnerCLI, tmp_path: Path
) -> None:
    """An ENUM column losing a value keeps no row that holds it (strict mode refuses the
    ALTER, else the row becomes ''): such rows are counted, exactly, before any approval."""
    db = mariadb_database
    load(
        db,
        "CREATE TABLE people (id int NOT NULL PRIMARY KEY, m enum('ok','sad','it''s'));"
        "INSERT INTO people VALUES (1, 'ok'), (2, 'it''s'), (3, NULL), (4, 'it''s')",
    )
    desired = "CREATE TABLE people (id int NOT NULL PRIMARY KEY, m enum('ok','sad'));"
    result, figures = plan(runner, db.url_with_password, tmp_path, desired)
    assert result.returncode == 0, result.stderr
    misfit = by_check(figures)["misfit_values"]
    assert (misfit["verdict"], misfit["count"], misfit["exact"]) == ("count", 2, True)
    load(db, "UPDATE people SET m = 'sad' WHERE m = 'it''s'")
    result, figures = plan(runner, db.url_with_password, tmp_path, desired)
    assert result.returncode == 0, result.stderr
    assert by_check(figures)["misfit_values"]["verdict"] == "none"
