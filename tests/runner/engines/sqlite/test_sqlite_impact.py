"""Impact checks on real SQLite files (docs/engine.md, "Impact"): the zero case, a plan refused
as certain to fail on its rows, counted drops, and a count stopped at its timeout."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.runner_cli import RunnerCLI, write

LIVE = """
CREATE TABLE customers (id INTEGER PRIMARY KEY);
CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT, code TEXT, customer_id INTEGER);
CREATE TABLE legacy (id INTEGER PRIMARY KEY, note TEXT);
"""
DESIRED = """
CREATE TABLE customers (id INTEGER PRIMARY KEY);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL,
    code TEXT UNIQUE,
    customer_id INTEGER REFERENCES customers (id)
);
"""


@pytest.fixture
def runner() -> Iterator[RunnerCLI]:
    cli = RunnerCLI()
    yield cli
    assert cli.leaks() == []


def run_sql(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.executescript(sql)
        conn.commit()
    finally:
        conn.close()


def plan(runner: RunnerCLI, db: Path, desired: str, *extra: str) -> tuple[Any, dict[str, Any]]:
    folder = db.parent
    impact = folder / "impact.json"
    impact.unlink(missing_ok=True)
    result = runner(
        "schema",
        "plan",
        "--url",
        f"sqlite:///{db}",
        "--desired",
        str(write(folder / "schema.sql", desired)),
        "--allow-destructive",
        "--output",
        str(folder / "plan.json"),
        "--impact-output",
        str(impact),
        *extra,
    )
    return result, json.loads(impact.read_text()) if impact.exists() else {}


def checks(figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["check"]: f for f in figures["figures"]}


def test_zero_and_counted_figures(runner: RunnerCLI, tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    run_sql(
        db,
        LIVE + "INSERT INTO customers VALUES (1); INSERT INTO orders VALUES"
        " (1, 'a', 'A', 1), (2, 'b', 'B', NULL); INSERT INTO legacy VALUES (1, 'x'), (2, NULL);",
    )
    result, figures = plan(runner, db, DESIRED)
    assert result.returncode == 0, result.stderr
    found = checks(figures)
    for check in ("null_rows", "duplicate_groups", "orphan_rows"):
        assert found[check]["verdict"] == "none" and found[check]["exact"], found[check]
    assert found["rows"]["count"] == 2  # DROP TABLE legacy
    assert found["table_size"]["pages"] >= 1
    assert "DROP TABLE legacy: 2 rows (exact)" in result.stderr


def test_offending_rows_refuse_the_plan(runner: RunnerCLI, tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    run_sql(db, LIVE + "INSERT INTO orders VALUES (1, NULL, 'A', 9), (2, 'b', 'A', NULL);")
    result, _ = plan(runner, db, DESIRED)
    assert result.returncode == 1, result.stderr
    refusal = json.loads(result.stdout)["refusal"]
    assert refusal["code"] == "would_fail_on_data"
    assert "SET NOT NULL on orders.email: 1 rows are NULL (exact)" in refusal["message"]


def test_a_count_past_its_timeout_is_unknown(runner: RunnerCLI, tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    run_sql(
        db,
        LIVE + "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g"
        " WHERE n < 300000) INSERT INTO orders SELECT n, 'e', n, NULL FROM g;",
    )
    result, figures = plan(runner, db, DESIRED, "--impact", "exact", "--impact-timeout", "1")
    assert result.returncode == 0, result.stderr
    assert checks(figures)["duplicate_groups"]["reason"] == "timed_out"
