#!/usr/bin/env python3
"""What impact checks add to a plan: the same plan with ``--impact off``, ``estimate`` and
``exact`` on a database holding one large table.

    .venv/bin/python bench/impact.py [--rows 10000000] [--runs 3]

A throw-away PostgreSQL server (the test harness's) holds ``orders`` with ``--rows`` rows
(``id``, ``email`` never NULL, ``code``, ``legacy``), analyzed, and a small ``customers``
table. The desired schema sets ``email NOT NULL`` (NULL rows: a count), drops ``legacy``
(non-NULL values: a count), and narrows ``code`` from ``varchar(40)`` to ``varchar(20)``
(values that do not fit: a count; a table rewrite: a size). Each mode plans ``--runs``
times, alternating (off, estimate, exact, off, ...); the planning cache is on, so after the
first plan the sandbox's work is cached and the difference between the modes is the impact
checks. ``exact`` runs with a 10-minute query timeout (the default, 2 s, would answer
``unknown (timed_out)`` on a table this large: also reported, as ``exact (2 s)``).

Printed: the median wall time per mode, the extra time over ``off``, the impact queries
sent (``queries`` of the impact report) and each figure. Nothing is judged; bench/README.md
records the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # runner/ before tests/runner/, a namespace

from harness.postgres import running_postgres  # noqa: E402

RUNNER = Path(sys.executable).parent / "seshat-runner"
LIVE = """
CREATE TABLE customers (id integer PRIMARY KEY);
CREATE TABLE orders (id bigint PRIMARY KEY, email text, code varchar(40), legacy text);
"""
DESIRED = """
CREATE TABLE customers (id integer PRIMARY KEY);
CREATE TABLE orders (id bigint PRIMARY KEY, email text NOT NULL, code varchar(20));
"""
MODES = {
    "off": ["--impact", "off"],
    "estimate": ["--impact", "estimate"],
    "exact": ["--impact", "exact", "--impact-timeout", "600000"],
    "exact (2 s)": ["--impact", "exact"],
}


def plan(url: str, desired: Path, work: Path, mode: str) -> tuple[float, dict[str, object]]:
    impact = work / "impact.json"
    impact.unlink(missing_ok=True)
    command = [str(RUNNER), "schema", "plan", "--url-env", "BENCH_URL", "--desired", str(desired)]
    command += ["--allow-destructive", "--output", str(work / "plan.json")]
    command += ["--impact-output", str(impact), *MODES[mode]]
    started = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, env={**os.environ, "BENCH_URL": url}, cwd=work, timeout=3600
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{mode}: exit {done.returncode}: {done.stdout!r} {done.stderr!r}")
    return wall, json.loads(impact.read_text()) if impact.exists() else {}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    from runner.engines.impact import Figure, describe

    with tempfile.TemporaryDirectory(prefix="seshat-impact-") as name:
        base = Path(name)
        base.chmod(0o755)
        with running_postgres(base) as server, server.connect() as admin:
            admin.execute("CREATE DATABASE bench")
            started = time.perf_counter()
            with server.connect("bench") as conn:
                conn.execute(LIVE)
                conn.execute(
                    "INSERT INTO orders SELECT g, 'e' || g, 'c' || (g %% 1000), CASE WHEN"
                    " g %% 3 = 0 THEN NULL ELSE 'x' END FROM generate_series(1, %s) g",
                    (args.rows,),
                )
                conn.execute("ANALYZE orders")
                size = conn.execute("SELECT pg_relation_size('orders')").fetchone()
                assert size is not None
            print(f"loaded {args.rows:,} rows ({size[0] / 1024**2:.0f} MiB) in "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            desired = base / "desired.sql"
            desired.write_text(DESIRED, encoding="utf-8")
            url = server.url("bench")
            plan(url, desired, base, "off")  # warms the planning cache
            walls: dict[str, list[float]] = {mode: [] for mode in MODES}
            reports: dict[str, dict[str, object]] = {}
            for _ in range(args.runs):
                for mode in MODES:
                    wall, report = plan(url, desired, base, mode)
                    walls[mode].append(wall)
                    reports[mode] = report
    off = statistics.median(walls["off"])
    print(f"{'mode':<12} {'median s':>9} {'extra s':>8} {'queries':>8}")
    for mode, samples in walls.items():
        median = statistics.median(samples)
        queries = reports[mode].get("queries", 0)
        print(f"{mode:<12} {median:9.2f} {median - off:8.2f} {queries!s:>8}")
        for figure in reports[mode].get("figures", []):  # type: ignore[attr-defined]
            print(f"    {describe(Figure.model_validate(figure))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
