"""Limits a sandbox enforces from outside, and plans that do not depend on the jail.

The desired SQL here opts in to procedural statements (``--procedural-schema``), so it can
try what a declaration cannot: sleep past any deadline it is given, or grow without end.
The runner bounds both from outside: MariaDB's statements are cancelled by its watchdog
(``KILL QUERY`` from another session, whatever ``max_statement_time`` says), SQLite's
memory by a heap limit set before the sandbox's authorizer refuses the pragma to the SQL.
And a plan is the same plan with and without the OS jail: only the recorded isolation
differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from harness.mariadb import MariaDBDatabase
from harness.postgres import PostgresDatabase
from harness.runner_cli import RUNNER, RunnerCLI, write


def test_a_mariadb_statement_is_cancelled_by_the_runner(
    mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    desired = write(
        tmp_path / "schema.sql",
        # Interrupted, MariaDB answers this with success: the runner still fails it.
        "CREATE TABLE t (id int PRIMARY KEY);\nDO BENCHMARK(10000000000, SHA2('x', 512));\n",
    )
    started = time.monotonic()
    result = RunnerCLI()(
        "schema",
        "plan",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        "--procedural-schema",
        env={
            "TARGET_URL": mariadb_database.server.url(mariadb_database.name),
            "SESHAT_SANDBOX_STATEMENT_SECONDS": "2",
        },
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "schema.sql:2: ran longer than the sandbox allows a statement (2 s)" in result.stderr
    assert time.monotonic() - started < 45


_MEASURED = textwrap.dedent(
    """
    import resource, subprocess, sys
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(done.returncode, peak, done.stdout.strip().replace("\\n", " "), sep="\\t")
    """
)


def test_sqlite_sandbox_memory_is_bounded_and_refused(tmp_path: Path) -> None:
    """A recursive query that would grow to gigabytes ends at the heap limit, as a refusal
    (not a MemoryError traceback), with the runner's peak memory under 1 GiB."""
    target = tmp_path / "app.db"
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE blobs AS WITH RECURSIVE r(n, b) AS (SELECT 1, zeroblob(10000000)"
        " UNION ALL SELECT n + 1, zeroblob(10000000) FROM r WHERE n < 100000) SELECT * FROM r;\n",
    )
    command = [
        *RUNNER,
        "schema",
        "plan",
        "--url",
        f"sqlite:///{target}",
        "--desired",
        str(desired),
        "--procedural-schema",
        "--no-cache",
    ]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, *command], capture_output=True, text=True, timeout=120
    )
    code, peak_kib, output = done.stdout.split("\t", 2)
    assert code == "1", done.stdout + done.stderr
    assert json.loads(output)["refusal"]["code"] == "sandbox_limit_exceeded"
    assert "Traceback" not in done.stderr
    assert int(peak_kib) < 1024 * 1024


def test_a_plan_is_the_same_with_and_without_the_jail(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    db = postgres_database
    with db.connect() as conn:
        conn.execute("CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL)")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE EXTENSION IF NOT EXISTS citext;\n"
        "CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL, note citext);\n"
        "CREATE INDEX accounts_owner ON accounts (owner);\n"
        "GRANT SELECT ON accounts TO reporting;\n",
    )
    runner = RunnerCLI()
    plans = []
    for isolation in ("jail", "none"):
        result = runner(
            "schema",
            "plan",
            "--url-env",
            "TARGET_URL",
            "--desired",
            str(desired),
            "--no-cache",
            "--sandbox-isolation",
            isolation,
            env={"TARGET_URL": db.server.url(db.name)},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        plans.append(json.loads(result.stdout))
    jailed, bare = plans
    assert "sandbox_isolation" not in jailed
    assert bare.pop("sandbox_isolation") == "none"
    assert jailed["statements"] == bare["statements"]
    assert jailed["expected"] == bare["expected"] and jailed["desired"] == bare["desired"]
