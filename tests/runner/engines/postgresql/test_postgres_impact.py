"""Impact checks on a real PostgreSQL target (docs/engine.md, "Impact"): the zero case, counted
figures, a plan refused as certain to fail on its rows, a timed-out count, a credential
without SELECT, and a plan whose bytes do not move with its figures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.impact import by_check, plan_with_impact
from harness.postgres import PostgresDatabase, login_role
from harness.runner_cli import RunnerCLI

LIVE = """
CREATE TABLE customers (id integer PRIMARY KEY);
CREATE TABLE orders (
    id integer PRIMARY KEY, email text, code varchar(20), customer_id integer, legacy text
);
"""
DESIRED = """
CREATE TABLE customers (id integer PRIMARY KEY);
CREATE TABLE orders (
    id integer PRIMARY KEY,
    email text NOT NULL,
    code varchar(20) UNIQUE,
    customer_id integer REFERENCES customers (id)
);
"""
TARGET = ["--url-env", "TARGET_URL"]


@pytest.fixture
def runner(postgres_database: PostgresDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[postgres_database.server.app_password])
    yield cli
    assert cli.leaks() == [], "a password appeared in the runner's output"


def load(db: PostgresDatabase, text: str) -> None:
    with db.connect_as_app() as conn:
        conn.execute(text)


def plan(
    runner: RunnerCLI, url: str, folder: Path, desired: str, *extra: str
) -> tuple[Any, dict[str, Any]]:
    return plan_with_impact(runner, TARGET, folder, desired, *extra, env={"TARGET_URL": url})


def test_clean_data_measures_zero_and_the_plan_is_made(
    postgres_database: PostgresDatabase, runner: RunnerCLI, tmp_path: Path
) -> None:
    db = postgres_database
    load(db, LIVE + "INSERT INTO customers VALUES (1), (2);")
    load(db, "INSERT INTO orders VALUES (1, 'a@x', 'A', 1, NULL), (2, 'b@x', 'B', NULL, NULL)")
    result, figures = plan(runner, db.url_with_password, tmp_path, DESIRED)
    assert result.returncode == 0, result.stderr
    checks = by_check(figures)
    assert figures["mode"] == "estimate"
    for check in ("null_rows", "duplicate_groups", "orphan_rows", "non_null_values"):
        assert checks[check]["verdict"] == "none", checks[check]
        assert checks[check]["exact"] is True
        assert checks[check].get("fails") is not True
    assert checks["table_size"]["subject"] == "orders"
    assert checks["table_size"]["bytes"] > 0
    assert "SET NOT NULL on orders.email: 0 rows are NULL (exact)" in result.stderr
    assert "DROP COLUMN orders.legacy: 0 non-NULL values (exact)" in result.stderr
    assert figures["queries"] >= 5


def test_offending_rows_refuse_the_plan_and_other_figures_are_counted(
    postgres_database: PostgresDatabase, runner: RunnerCLI, tmp_path: Path
) -> None:
    db = postgres_database
    load(db, LIVE + "INSERT INTO customers VALUES (1);")
    load(
        db,
        "INSERT INTO orders VALUES (1, NULL, 'A', 1, 'x'), (2, NULL, 'A', 7, 'y'),"
        " (3, 'c@x', 'B', 8, NULL), (4, 'd@x', 'longer than five', 1, NULL)",
    )
    refused, _ = plan(runner, db.url_with_password, tmp_path, DESIRED)
    assert refused.returncode == 1, refused.stderr
    refusal = json.loads(refused.stdout)["refusal"]
    assert refusal["code"] == "would_fail_on_data"
    assert "orders.email: 2 rows are NULL (exact) — this plan would fail" in refusal["message"]
    assert "(and 2 more)" in refusal["message"]  # the duplicate group and the orphan rows

    # Not certain to fail: a narrowing and a drop, counted, and the plan is made.
    narrowed = DESIRED.replace("varchar(20) UNIQUE", "varchar(5)").replace(
        "email text NOT NULL", "email text"
    )
    narrowed = narrowed.replace(" REFERENCES customers (id)", "")
    result, figures = plan(runner, db.url_with_password, tmp_path, narrowed)
    assert result.returncode == 0, result.stderr
    checks = by_check(figures)
    assert checks["misfit_values"]["count"] == 1
    assert checks["non_null_values"]["count"] == 2
    assert "DROP COLUMN orders.legacy: 2 non-NULL values (exact)" in result.stderr

    # --impact off: nothing measured, nothing refused on figures.
    result, figures = plan(runner, db.url_with_password, tmp_path, DESIRED, "--impact", "off")
    assert result.returncode == 0, result.stderr
    assert figures == {}


def test_a_count_past_its_timeout_is_unknown_not_a_long_query(
    postgres_database: PostgresDatabase, runner: RunnerCLI, tmp_path: Path
) -> None:
    db = postgres_database
    load(db, LIVE)
    load(db, "INSERT INTO orders SELECT g, 'e', NULL, NULL, NULL FROM generate_series(1, 400000) g")
    desired = DESIRED.replace(" UNIQUE", "").replace(" REFERENCES customers (id)", "")
    options = ("--impact", "exact", "--impact-timeout", "1")
    result, figures = plan(runner, db.url_with_password, tmp_path, desired, *options)
    assert result.returncode == 0, result.stderr
    checks = by_check(figures)
    assert (checks["null_rows"]["verdict"], checks["null_rows"]["reason"]) == (
        "unknown",
        "timed_out",
    )
    assert "SET NOT NULL on orders.email: unknown (timed out)" in result.stderr


def test_without_select_privilege_counts_are_unknown_and_sizes_known(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    db = postgres_database
    load(db, LIVE + "INSERT INTO orders VALUES (1, NULL, 'A', NULL, 'x');")
    with login_role(db, "impact") as (url, password):
        limited = RunnerCLI(secrets=[password])
        result, figures = plan(limited, url, tmp_path, DESIRED)
        assert limited.leaks() == []
    assert result.returncode == 0, result.stderr  # nothing is known to fail
    checks = by_check(figures)
    for check in ("null_rows", "duplicate_groups", "non_null_values"):
        assert (checks[check]["verdict"], checks[check]["reason"]) == (
            "unknown",
            "no_select_privilege",
        )
    assert checks["table_size"]["bytes"] > 0


def test_the_plan_bytes_do_not_move_with_the_figures(
    postgres_database: PostgresDatabase, runner: RunnerCLI, tmp_path: Path
) -> None:
    """Figures are observations beside the plan: the same schema with other rows plans the
    same bytes (so the same plan id), while the figures differ."""
    db = postgres_database
    load(db, LIVE)
    desired = "CREATE TABLE customers (id integer PRIMARY KEY);"
    first, before = plan(runner, db.url_with_password, tmp_path, desired)
    planned = (tmp_path / "plan.json").read_bytes()
    load(db, "INSERT INTO orders SELECT g, NULL, NULL, NULL, NULL FROM generate_series(1, 50) g")
    second, after = plan(runner, db.url_with_password, tmp_path, desired)
    assert first.returncode == second.returncode == 0, second.stderr
    assert by_check(before)["rows"]["verdict"] == "none"
    assert by_check(after)["rows"]["count"] == 50
    assert (tmp_path / "plan.json").read_bytes() == planned


def test_rows_holding_an_enum_label_the_plan_removes_are_counted(
    postgres_database: PostgresDatabase, runner: RunnerCLI, tmp_path: Path
) -> None:
    """An enum type losing a label is created again and its columns converted: a row holding
    the removed label will not cast. So will a text value no label spells, when a text
    column becomes the enum. Both are counted, exactly, before anyone approves."""
    db = postgres_database
    load(
        db,
        "CREATE TYPE mood AS ENUM ('ok', 'sad', 'meh');"
        "CREATE TABLE people (id integer PRIMARY KEY, m mood, note text);"
        "INSERT INTO people VALUES (1, 'ok', 'sad'), (2, 'meh', 'fine'), (3, NULL, NULL),"
        " (4, 'meh', 'ok');",
    )
    desired = (
        "CREATE TYPE mood AS ENUM ('ok', 'sad');"
        "CREATE TABLE people (id integer PRIMARY KEY, m mood, note mood);"
    )
    result, figures = plan(runner, db.url_with_password, tmp_path, desired)
    assert result.returncode == 0, result.stderr
    misfits = {
        f["subject"]: f
        for f in figures["figures"]
        if f["check"] == "misfit_values" and f["verdict"] != "unknown"
    }
    assert misfits["people.m"]["count"] == 2 and misfits["people.m"]["exact"] is True
    assert misfits["people.note"]["count"] == 1 and misfits["people.note"]["exact"] is True
    assert "type change of people.m: 2 values do not fit (exact)" in result.stderr
    # Once the rows hold only labels the type keeps, nothing is left to count.
    load(db, "UPDATE people SET m = 'sad' WHERE m = 'meh'; UPDATE people SET note = NULL")
    result, figures = plan(runner, db.url_with_password, tmp_path, desired)
    assert result.returncode == 0, result.stderr
    assert {
        f["subject"]: f["verdict"]
        for f in figures["figures"]
        if f["check"] == "misfit_values" and f["verdict"] != "unknown"
    } == {"people.m": "none", "people.note": "none"}
