"""The dry run rebuilds only the part of the live schema a plan can affect, and the plan it
gives is byte for byte the plan a dry run of the whole live schema gives; a scope that
misses something the plan needs costs a second, whole dry run, never a wrong verdict."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from harness.postgres import PostgresDatabase
from harness.runner_cli import write

from runner.engines.dryscope import dry_run_scope
from runner.engines.model import Database
from runner.engines.plan import PlanStatement, plan_bytes
from runner.engines.planner import PlanOptions
from runner.engines.postgresql.engine import PostgresEngine
from runner.engines.postgresql.sandbox import Sandbox
from runner.url import parse_url

CHAIN = 20


def live_schema() -> str:
    parts = [
        "CREATE TYPE status AS ENUM ('new', 'done');",
        "CREATE TABLE t0 (id int PRIMARY KEY, s status, note text);",
        "CREATE TABLE anchor (id int PRIMARY KEY, label text UNIQUE);",
    ]
    for i in range(1, CHAIN + 1):
        parts.append(
            f"CREATE TABLE t{i} (id int PRIMARY KEY, parent int REFERENCES t{i - 1} (id), v text);"
        )
        parts.append(f"CREATE INDEX t{i}_v ON t{i} (v);")
    parts += [
        "CREATE VIEW v5 AS SELECT id, v FROM t5;",
        "CREATE VIEW v5b AS SELECT id FROM v5;",
        "CREATE FUNCTION one() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 1';",
    ]
    return "\n".join(parts) + "\n"


def desired_schema() -> str:
    return (
        live_schema()
        .replace("CREATE INDEX t12_v ON t12 (v);\n", "")
        .replace(
            "CREATE VIEW v5 AS SELECT id, v FROM t5;",
            "ALTER TABLE t5 ADD COLUMN extra int NOT NULL DEFAULT 0;\n"
            "CREATE VIEW v5 AS SELECT id, v, extra FROM t5;",
        )
        + "CREATE TABLE newcomer (id int PRIMARY KEY, anchor_id int REFERENCES anchor (id),"
        " s status);\n" + "COMMENT ON TABLE t3 IS 'documented';\n"
    )


class Recording(PostgresEngine):
    """The PostgreSQL engine, noting how many live tables each dry run rebuilt."""

    rebuilt: list[int]

    def dry_run(
        self, sandbox: Sandbox, baseline: Database, statements: Sequence[PlanStatement]
    ) -> tuple[list[PlanStatement], Database]:
        self.rebuilt.append(len(baseline.tables))
        return super().dry_run(sandbox, baseline, statements)


def plan(db: PostgresDatabase, desired: Path, *, partial: bool) -> tuple[bytes, list[int]]:
    engine_class = type("Engine", (Recording,), {"partial_dry_run": partial, "rebuilt": []})
    engine = engine_class(parse_url(db.url_with_password))  # no cache: every plan is cold
    document = engine.plan(desired, PlanOptions())
    return plan_bytes(document), engine.rebuilt


@pytest.fixture
def desired(postgres_database: PostgresDatabase, tmp_path: Path) -> Path:
    with postgres_database.connect_as_app() as conn:
        conn.execute(live_schema())
    return write(tmp_path / "schema.sql", desired_schema())


def test_a_partial_dry_run_gives_the_whole_dry_runs_plan(
    postgres_database: PostgresDatabase, desired: Path
) -> None:
    partial, rebuilt_partial = plan(postgres_database, desired, partial=True)
    whole, rebuilt_whole = plan(postgres_database, desired, partial=False)
    tables = CHAIN + 2
    assert rebuilt_whole == [tables]
    assert len(rebuilt_partial) == 1 and rebuilt_partial[0] < tables / 2, rebuilt_partial
    assert partial == whole
    assert b"newcomer" in partial and b"t12_v" in partial and b"documented" in partial


def test_a_scope_that_misses_what_the_plan_needs_falls_back_to_the_whole_schema(
    postgres_database: PostgresDatabase, desired: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, _ = plan(postgres_database, desired, partial=False)

    def without_anchor(*args: Any) -> set[str]:
        return {key for key in dry_run_scope(*args) if "anchor" not in key}

    monkeypatch.setattr("runner.engines.core.dry_run_scope", without_anchor)
    fallback, rebuilt = plan(postgres_database, desired, partial=True)
    assert len(rebuilt) == 2 and rebuilt[1] == CHAIN + 2, rebuilt
    assert fallback == whole
