"""Impact checks on real SQLite files (docs/engine.md, "Impact"): the zero case, a plan refused
as certain to fail on its rows, counted drops, and a count stopped at its timeout. SQLite
has no privileges: a case without SELECT cannot arise."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.impact import by_check, plan_with_impact
from harness.runner_cli import RunnerCLI

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


def plan(runner: RunnerCLI, folder: Path, rows: str, *extra: str) -> tuple[Any, dict[str, Any]]:
    """A database of LIVE and ``rows`` in ``folder``, planned toward DESIRED."""
    db = folder / "app.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.executescript(LIVE + rows)
        conn.commit()
    return plan_with_impact(runner, ["--url", f"sqlite:///{db}"], folder, DESIRED, *extra)


def test_zero_and_counted_figures(runner: RunnerCLI, tmp_path: Path) -> None:
    rows = "INSERT INTO customers VALUES (1); INSERT INTO orders VALUES (1, 'a', 'A', 1),"
    rows += " (2, 'b', 'B', NULL); INSERT INTO legacy VALUES (1, 'x'), (2, NULL);"
    result, figures = plan(runner, tmp_path, rows)
    assert result.returncode == 0, result.stderr
    found = by_check(figures)
    for check in ("null_rows", "duplicate_groups", "orphan_rows"):
        assert found[check]["verdict"] == "none" and found[check]["exact"], found[check]
    assert found["rows"]["count"] == 2  # DROP TABLE legacy
    assert found["table_size"]["pages"] >= 1
    assert "DROP TABLE legacy: 2 rows (exact)" in result.stderr


def test_offending_rows_refuse_the_plan(runner: RunnerCLI, tmp_path: Path) -> None:
    rows = "INSERT INTO orders VALUES (1, NULL, 'A', 9), (2, 'b', 'A', NULL);"
    result, _ = plan(runner, tmp_path, rows)
    assert result.returncode == 1, result.stderr
    refusal = json.loads(result.stdout)["refusal"]
    assert refusal["code"] == "would_fail_on_data"
    assert "SET NOT NULL on orders.email: 1 rows are NULL (exact)" in refusal["message"]


def test_a_count_past_its_timeout_is_unknown(runner: RunnerCLI, tmp_path: Path) -> None:
    rows = "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 300000)"
    rows += " INSERT INTO orders SELECT n, 'e', n, NULL FROM g;"
    result, figures = plan(runner, tmp_path, rows, "--impact", "exact", "--impact-timeout", "1")
    assert result.returncode == 0, result.stderr
    assert by_check(figures)["duplicate_groups"]["reason"] == "timed_out"
