"""How Seshat's MySQL/MariaDB planning scales: ``bench/plan_scale.py --dialect mysql``.

For each size a synthetic, seeded schema of N tables (columns of the common types, an
AUTO_INCREMENT primary key, a secondary index, a foreign key on every third table, a view
per twenty tables) is loaded into a "live" database on a throw-away MariaDB started with
the test harness, and a desired schema differing in about ``--change-percent`` of the
tables (a new column, a new index, a column comment) is written to a file. Then:

* baseline: loading the desired schema into an empty database with PyMySQL, statement by
  statement, in this process (what any tool that normalizes by loading must at least pay);
* introspection alone: ``introspect(conn, db)`` of the live database in this process;
* a full plan with the CLI, ``seshat-runner schema plan --allow-destructive``, as a child
  process: everything a user waits for. **Cold** (``--no-cache``; the private sandbox
  server's template is built once before, as a runner keeps it): introspecting the live
  database, loading the desired schema into the sandbox and reading it, diffing, ordering,
  rendering, and the dry run (the part of the live schema the plan affects rebuilt in a
  second sandbox schema, each statement run and probed there, read again). **Warm**: the
  same plan again with the planning cache, what every refresh of a converged database
  costs.

The ratios printed are plan wall time / baseline load time, measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "schema_sql"]

ROOT = Path(__file__).resolve().parent.parent
TYPES = ("int", "bigint", "varchar(64)", "decimal(10,2)", "datetime", "text", "tinyint(1)")


def _tables(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    tables: list[list[str]] = []
    for number in range(count):
        columns = ["  id bigint NOT NULL AUTO_INCREMENT"]
        for column in range(rng.randint(3, 8)):
            kind = rng.choice(TYPES)
            null = " NOT NULL" if rng.random() < 0.3 and kind != "text" else ""
            default = " DEFAULT 0" if kind in ("int", "bigint") and rng.random() < 0.3 else ""
            columns.append(f"  c{column} {kind}{null}{default}")
        if number % 3 == 2:
            columns.append("  parent_id bigint")
        columns.append("  PRIMARY KEY (id)")
        columns.append("  KEY c0_idx (c0" + ("(16))" if "text" in columns[1] else ")"))
        if number % 3 == 2:
            columns.append(
                f"  CONSTRAINT t{number:04d}_parent_fk FOREIGN KEY (parent_id)"
                f" REFERENCES t{number - 1:04d} (id)"
            )
        tables.append(columns)
    return tables


def schema_sql(count: int, seed: int, change_percent: float = 0.0) -> str:
    """The schema's DDL; with ``change_percent``, the desired variant."""
    tables = _tables(count, seed)
    rng = random.Random(seed + 1)
    changed = set(rng.sample(range(count), max(1, int(count * change_percent / 100))))
    statements: list[str] = []
    for number, columns in enumerate(tables):
        body = list(columns)
        if change_percent and number in changed:
            what = number % 3
            if what == 0:
                body.insert(1, "  added_col varchar(32) DEFAULT 'x'")
            elif what == 1:
                body.append("  KEY id_c0 (id, c0" + ("(8))" if "text" in body[1] else ")"))
            else:
                body[0] = "  id bigint NOT NULL AUTO_INCREMENT COMMENT 'widened'"
        statements.append(f"CREATE TABLE t{number:04d} (\n" + ",\n".join(body) + "\n)")
    for number in range(0, count, 20):
        statements.append(f"CREATE VIEW v{number:04d} AS SELECT id, c0 FROM t{number:04d}")
    return ";\n".join(statements) + ";\n"


def _harness(module: str) -> Any:
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    return importlib.import_module(f"harness.{module}")


def _load(server: Any, database: str, script: str) -> float:
    """Seconds to run ``script`` into ``database`` with PyMySQL, statement by statement."""
    from runner.sql.split_mysql import split_mysql

    pieces = split_mysql(script)
    started = time.perf_counter()
    with server.connect(database) as conn, conn.cursor() as cur:
        for piece in pieces:
            cur.execute(piece.sql)
    return time.perf_counter() - started


def _create(server: Any, name: str) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cur.execute(f"CREATE DATABASE `{name}`")


def measure(server: Any, tables: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One size: baseline load, introspection, CLI plan (wall time)."""
    from runner.engines.mysql.connection import connection
    from runner.engines.mysql.introspect import introspect
    from runner.url import parse_url

    live_sql = schema_sql(tables, args.seed)
    desired_sql = schema_sql(tables, args.seed, args.change_percent)
    desired = work / f"desired_{tables}.sql"
    desired.write_text(desired_sql, encoding="utf-8")
    _create(server, "scale_live")
    _load(server, "scale_live", live_sql)
    _create(server, "scale_baseline")
    baseline = _load(server, "scale_baseline", desired_sql)
    url = server.url("scale_live")
    started = time.perf_counter()
    with connection(parse_url(url)) as conn:
        model = introspect(conn, "scale_live")
    introspection = time.perf_counter() - started
    runner = Path(sys.executable).parent / "seshat-runner"
    command = [str(runner), "schema", "plan", "--url", url, "--desired", str(desired)]
    command += ["--allow-destructive", "--output", str(work / f"plan_{tables}.json")]
    env = {**os.environ, "SESHAT_CACHE_DIR": str(work / "cache")}

    def timed(*extra: str) -> float:
        started = time.perf_counter()
        done = subprocess.run([*command, *extra], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"plan failed: {done.stdout[-500:]} {done.stderr[-500:]}")
        return time.perf_counter() - started

    timed("--no-cache")  # builds the sandbox server's template, which a runner keeps
    plan_seconds = timed("--no-cache")
    timed()  # fills the planning cache
    warm_seconds = timed()
    document = json.loads((work / f"plan_{tables}.json").read_text())
    with server.connect() as conn, conn.cursor() as cur:
        for name in ("scale_live", "scale_baseline"):
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    return {
        "tables": tables,
        "objects": sum(len(part) for part in (model.tables, model.indexes, model.constraints))
        + len(model.definitions),
        "statements": len(document["statements"]),
        "baseline_load_s": round(baseline, 2),
        "introspect_s": round(introspection, 2),
        "plan_s": round(plan_seconds, 2),
        "plan_warm_s": round(warm_seconds, 2),
        "ratio": round(plan_seconds / baseline, 2),
        "ratio_warm": round(warm_seconds / baseline, 2),
    }


def main(args: argparse.Namespace) -> int:
    """Run the MySQL sizes (1,000 tables unless ``--sizes`` names others) and print them."""
    sizes = args.sizes if args.sizes != [100, 1000, 3000] else [1000]
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    mariadb = _harness("mariadb")
    where = "/dev/shm" if args.tmpfs else None
    base = Path(tempfile.mkdtemp(prefix="seshat-plan-scale-", dir=where))
    base.chmod(0o755)
    results: list[dict[str, Any]] = []
    try:
        with mariadb.running_mariadb(base) as server:
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                version = str(cur.fetchone()[0])
            print(f"MariaDB {version} on port {server.port}", file=sys.stderr, flush=True)
            work = base / "work"
            work.mkdir()
            for tables in sizes:
                print(f"{tables} tables ...", file=sys.stderr, flush=True)
                results.append(measure(server, tables, args, work))
    finally:
        with contextlib.suppress(OSError):
            import shutil

            shutil.rmtree(base, ignore_errors=True)
    print(f"Seshat plan scaling on {version} ({os.cpu_count()} CPUs)")
    print(
        f"{'tables':>7} {'objects':>8} {'stmts':>6} {'load (PyMySQL)':>15} "
        f"{'introspect':>11} {'plan cold':>10} {'plan warm':>10} {'cold/load':>10}"
        f" {'warm/load':>10}"
    )
    for r in results:
        print(
            f"{r['tables']:>7} {r['objects']:>8} {r['statements']:>6}"
            f" {r['baseline_load_s']:>14.2f}s {r['introspect_s']:>10.2f}s"
            f" {r['plan_s']:>9.2f}s {r['plan_warm_s']:>9.2f}s {r['ratio']:>9.2f}x"
            f" {r['ratio_warm']:>9.2f}x"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"dialect": "mysql", "server": version, "results": results}, indent=1) + "\n"
        )
    return 0
