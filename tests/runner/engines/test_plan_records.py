"""What a plan records of how its desired schema ran: ``procedural_schema`` (the opt-in to
procedural statements) and ``sandbox_isolation: none`` (a sandbox server without its jail).

Each is in the plan only when it is not the default, so a plan made with the defaults keeps
the bytes (and the digests, and the plan id) it always had; set, it changes them, and
``plan.sql`` says so in its header. A normalized model made one way is never reused the
other way.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from harness.runner_cli import RunnerCLI, write

from runner.digests import digest
from runner.engines.plan import PlanDocument, plan_sql
from runner.engines.planner import PlanOptions

SCHEMA = "CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL);\n"


def test_the_defaults_keep_the_options_digest_every_existing_plan_has() -> None:
    before_the_fields_existed = digest(
        "plan-options", {"allowDestructive": False, "protectedTables": [], "exclude": []}
    )
    assert PlanOptions().digest() == before_the_fields_existed
    assert PlanOptions(procedural_schema=True).digest() != before_the_fields_existed
    assert PlanOptions(sandbox_isolation="none").digest() != before_the_fields_existed


@pytest.fixture
def live(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    sqlite3.connect(path).close()
    return path


def _plan(live: Path, desired: Path, cache: Path, *extra: str) -> str:
    result = RunnerCLI()(
        "--cache-dir",
        str(cache),
        "schema",
        "plan",
        "--url",
        f"sqlite:///{live}",
        "--desired",
        str(desired),
        *extra,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


FLAGS = {
    "procedural": (["--procedural-schema"], "procedural_schema", True, "-- proceduralSchema:"),
    "no jail": (
        ["--sandbox-isolation", "none"],
        "sandbox_isolation",
        "none",
        "-- sandbox isolation",
    ),
}


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_a_plan_records_how_its_desired_schema_ran(flag: str, live: Path, tmp_path: Path) -> None:
    extra, field, value, note = FLAGS[flag]
    desired = write(tmp_path / "schema.sql", SCHEMA)
    cache = tmp_path / "cache"
    plain = _plan(live, desired, cache)
    flagged = _plan(live, desired, cache, *extra)
    first, second = json.loads(plain), json.loads(flagged)
    assert field not in first and second[field] == value
    assert first["statements"] == second["statements"]
    assert first["options"] != second["options"]
    assert note not in plan_sql(PlanDocument.model_validate(first))
    assert note in plan_sql(PlanDocument.model_validate(second))
    # Made one way, the normalized model is not what the other way reads from the cache.
    desired_entries = list((cache / "plans").rglob("desired/*.json"))
    assert len(desired_entries) == 2, desired_entries
