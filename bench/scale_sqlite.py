"""How Seshat's SQLite planning scales: ``bench/plan_scale.py --dialect sqlite``.

For each size a synthetic, seeded schema of N tables is written to a "live" database file:
an INTEGER PRIMARY KEY, three to eight columns of SQLite's affinities (some NOT NULL with a
default), a secondary index per table (every fourth unique, every seventh partial), a
foreign key on every third table, a CHECK on every tenth, a view per twenty tables and a
trigger per fifty. The desired schema differs in about ``--change-percent`` of the tables,
in three ways SQLite plans differently: a column appended (ALTER TABLE ... ADD COLUMN), an
index added, and a column made NOT NULL (a table rebuild). Then, in one run:

* baseline: loading the desired schema into a fresh database file with ``sqlite3``'s
  ``executescript`` in one transaction, in this process (what any tool that reads a schema
  by loading it pays at least); and the same into ``:memory:``, which is what Seshat does;
* introspection alone: ``introspect(conn)`` of the live file in this process;
* a full plan with the CLI, ``seshat-runner schema plan --allow-destructive``, as a child
  process: everything a user waits for (reading the live file, loading and reading the
  desired schema in memory, diffing, ordering, rendering, the dry run on a backup copy);
* the apply of that plan with the CLI (one transaction, foreign key check, re-read).

The ratio printed is plan wall time / baseline load time (file), measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "schema_sql"]

ROOT = Path(__file__).resolve().parent.parent
TYPES = ("INTEGER", "TEXT", "REAL", "NUMERIC", "BLOB", "TEXT COLLATE NOCASE")
DEFAULTS = {"INTEGER": "0", "TEXT": "''", "REAL": "0.0", "NUMERIC": "0"}


def _table(number: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """(column definitions, extra statements) of table ``number``."""
    columns = ["id INTEGER PRIMARY KEY"]
    for column in range(rng.randint(3, 8)):
        kind = rng.choice(TYPES)
        base = kind.split()[0]
        if base in DEFAULTS and rng.random() < 0.3:
            kind += f" NOT NULL DEFAULT {DEFAULTS[base]}"
        columns.append(f"c{column} {kind}")
    if number % 3 == 2:
        columns.append(f"parent_id INTEGER REFERENCES t{number - 1:04d} (id)")
    if number % 10 == 0:
        columns.append("CHECK (id > 0)")
    unique = "UNIQUE " if number % 4 == 0 else ""
    where = " WHERE c0 IS NOT NULL" if number % 7 == 0 else ""
    extra = [f"CREATE {unique}INDEX t{number:04d}_c0 ON t{number:04d} (c0){where}"]
    if number % 50 == 0:
        extra.append(
            f"CREATE TRIGGER t{number:04d}_touch AFTER UPDATE ON t{number:04d} BEGIN"
            f" UPDATE t{number:04d} SET c0 = c0 WHERE id = new.id AND 0; END"
        )
    return columns, extra


def schema_sql(count: int, seed: int, change_percent: float = 0.0) -> str:
    """The schema's DDL; with ``change_percent``, the desired variant."""
    rng = random.Random(seed)
    tables = [_table(number, rng) for number in range(count)]
    pick = random.Random(seed + 1)
    changed = set(pick.sample(range(count), max(3, int(count * change_percent / 100))))
    statements: list[str] = []
    for number, (columns, extra) in enumerate(tables):
        body, more = list(columns), list(extra)
        if change_percent and number in changed:
            what = number % 3
            if what == 0:
                where = len([c for c in body if not c.startswith("CHECK")])
                body.insert(where, "added TEXT DEFAULT 'x'")
            elif what == 1:
                more.append(f"CREATE INDEX t{number:04d}_id_c1 ON t{number:04d} (id, c1)")
            else:
                body[1] = body[1].split(" NOT NULL")[0] + " NOT NULL DEFAULT 1"
        statements.append(f"CREATE TABLE t{number:04d} (\n  " + ",\n  ".join(body) + "\n)")
        statements += more
    for number in range(0, count, 20):
        statements.append(f"CREATE VIEW v{number:04d} AS SELECT id, c0 FROM t{number:04d}")
    return ";\n".join(statements) + ";\n"


def _load(path: str, script: str) -> float:
    """Seconds to run ``script`` into a fresh database (a file, or ``:memory:``)."""
    started = time.perf_counter()
    conn = sqlite3.connect(path)
    try:
        conn.executescript("BEGIN;\n" + script + "COMMIT;\n")
    finally:
        conn.close()
    return time.perf_counter() - started


def _runner(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    runner = Path(sys.executable).parent / "seshat-runner"
    started = time.perf_counter()
    completed = subprocess.run([str(runner), *args], capture_output=True, text=True, check=False)
    return time.perf_counter() - started, completed


def measure(tables: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One size: baseline loads, introspection, CLI plan and apply (wall times)."""
    from runner.engines.sqlite.introspect import introspect

    live_sql = schema_sql(tables, args.seed)
    desired_sql = schema_sql(tables, args.seed, args.change_percent)
    desired = work / f"desired_{tables}.sql"
    desired.write_text(desired_sql, encoding="utf-8")
    live = work / f"live_{tables}.db"
    _load(str(live), live_sql)
    baseline = _load(str(work / f"baseline_{tables}.db"), desired_sql)
    memory = _load(":memory:", desired_sql)
    started = time.perf_counter()
    conn = sqlite3.connect(live)
    try:
        model = introspect(conn)
    finally:
        conn.close()
    introspection = time.perf_counter() - started
    plan_file = work / f"plan_{tables}.json"
    url = f"sqlite:///{live}"
    plan_seconds, completed = _runner(
        "schema",
        "plan",
        "--url",
        url,
        "--desired",
        str(desired),
        "--allow-destructive",
        "--output",
        str(plan_file),
    )
    if completed.returncode != 0:
        raise RuntimeError(f"plan failed: {completed.stdout[-500:]} {completed.stderr[-500:]}")
    document = json.loads(plan_file.read_text())
    apply_seconds, applied = _runner("schema", "apply", "--url", url, "--plan", str(plan_file))
    if applied.returncode != 0:
        raise RuntimeError(f"apply failed: {applied.stdout[-500:]} {applied.stderr[-500:]}")
    ops: dict[str, int] = {}
    for statement in document["statements"]:
        ops[statement["op"]] = ops.get(statement["op"], 0) + 1
    return {
        "tables": tables,
        "objects": len(model.tables)
        + len(model.indexes)
        + len(model.constraints)
        + len(model.definitions),
        "statements": len(document["statements"]),
        "statements_by_op": dict(sorted(ops.items())),
        "baseline_load_s": round(baseline, 3),
        "memory_load_s": round(memory, 3),
        "introspect_s": round(introspection, 3),
        "plan_s": round(plan_seconds, 2),
        "apply_s": round(apply_seconds, 2),
        "ratio": round(plan_seconds / baseline, 1),
    }


def main(args: argparse.Namespace) -> int:
    """Run the SQLite sizes (1,000 tables unless ``--sizes`` names others) and print them."""
    sizes = args.sizes if args.sizes != [100, 1000, 3000] else [1000]
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    where = "/dev/shm" if args.tmpfs else None
    base = Path(tempfile.mkdtemp(prefix="seshat-plan-scale-sqlite-", dir=where))
    results: list[dict[str, Any]] = []
    try:
        for tables in sizes:
            print(f"{tables} tables ...", file=sys.stderr, flush=True)
            results.append(measure(tables, args, base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"Seshat plan scaling on SQLite {sqlite3.sqlite_version} ({os.cpu_count()} CPUs)")
    print(
        f"{'tables':>7} {'objects':>8} {'stmts':>6} {'load (file)':>12} {'load (mem)':>11}"
        f" {'introspect':>11} {'plan (CLI)':>11} {'apply (CLI)':>12} {'plan/load':>10}"
    )
    for r in results:
        print(
            f"{r['tables']:>7} {r['objects']:>8} {r['statements']:>6}"
            f" {r['baseline_load_s']:>11.3f}s {r['memory_load_s']:>10.3f}s"
            f" {r['introspect_s']:>10.3f}s {r['plan_s']:>10.2f}s {r['apply_s']:>11.2f}s"
            f" {r['ratio']:>9.1f}x"
        )
        print(f"        statements by op: {r['statements_by_op']}")
    if args.json:
        document = {"dialect": "sqlite", "sqlite": sqlite3.sqlite_version, "results": results}
        args.json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0
