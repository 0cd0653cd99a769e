"""Drift around a rebuild, on a real server.

The rebuild cases that were plain current -> desired convergence checks (USING casts,
dependents rebuilt in dependency order, identities and sequences) are rows of
``test_fidelity.py``'s table now, which checks all they did and more (the oracle's model,
the columns' order, a byte-identical plan under another hash seed), and so is the type
change without any cast (its refusal table). What stays here is what the table cannot say.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.postgres import PostgresDatabase
from harness.runner_cli import RunnerCLI, write


@pytest.fixture
def runner(postgres_database: PostgresDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[postgres_database.server.app_password])
    yield cli
    assert cli.leaks() == [], "the password appeared in the runner's output"


def test_drift_counts_a_replaced_table_not_what_is_created_again_with_it(
    runner: RunnerCLI, postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    schema = """
    CREATE TABLE p (id int, k int) PARTITION BY {by} (k);
    CREATE TABLE p1 PARTITION OF p FOR VALUES {bound};
    ALTER TABLE p ENABLE ROW LEVEL SECURITY;
    CREATE POLICY pp ON p USING (id > 0);
    CREATE VIEW pv AS SELECT id FROM p;
    """
    with postgres_database.connect_as_app() as conn:
        conn.execute(schema.format(by="RANGE", bound="FROM (1) TO (10)"))
    desired = write(tmp_path / "schema.sql", schema.format(by="LIST", bound="IN (1)"))
    drift = runner(
        "schema",
        "drift",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        env={"TARGET_URL": postgres_database.url_with_password},
    )
    assert drift.returncode == 1, drift.stdout + drift.stderr
    report = json.loads(drift.stdout)
    assert report["categories"] == {"changed": 2, "extra": 0, "invalid": 0, "missing": 0}
