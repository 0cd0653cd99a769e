#!/usr/bin/env python3
"""What the sandbox jail costs a plan: the same plans with ``--sandbox-isolation jail`` and
``none``, side by side in one run.

    .venv/bin/python bench/jail_cost.py [--runs 7] [--tables 1000] [--skip-mysql]

Every private sandbox server runs inside bubblewrap (docs/engine.md, "The sandbox"); the
bare place (``none``) runs the same server as an unprivileged user with no namespaces. The
difference between the two is what the jail costs. In one run, on throw-away PostgreSQL and
MariaDB servers started with the test harness:

* **start**: a cold plan (``--no-cache``) of a one-table schema against an empty database,
  ``--runs`` times per isolation, alternating (jail, none, jail, ...), so both see the same
  machine: almost all of it is starting the runner and the private sandbox server (template
  extracted, server started, one table loaded and dry-run, server stopped);
* **1,000 tables** (PostgreSQL, ``--tables``): a cold plan of the synthetic schema of
  ``bench/plan_scale.py`` (about 3 % of the tables changed) against a database holding the
  live schema, twice per isolation, alternating.

Each figure is the median wall time, with the ratio jail / none. CPU time is not compared:
a jailed server's processes are reaped inside the jail's PID namespace and the jail is
killed at the end, so their CPU never reaches the runner's ``wait4``, while the bare place's
server is the runner's own child; the two CPU figures would measure different things.
Nothing is judged; bench/README.md records the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from harness.mariadb import running_mariadb  # noqa: E402
from harness.postgres import running_postgres  # noqa: E402
from scale_schema import generate, mutate  # noqa: E402

RUNNER = Path(sys.executable).parent / "seshat-runner"
ISOLATIONS = ("jail", "none")
ONE_TABLE = "CREATE TABLE item (id integer PRIMARY KEY, name varchar(40) NOT NULL);\n"


@dataclass
class Sample:
    """One runner process: wall seconds."""

    wall: float


@dataclass
class Series:
    """The samples of one (case, isolation)."""

    samples: list[Sample] = field(default_factory=list)

    def median(self) -> float:
        return float(statistics.median(s.wall for s in self.samples))


def plan(url: str, desired: Path, isolation: str, work: Path) -> Sample:
    """``seshat-runner schema plan --no-cache`` with ``isolation``; fails loudly on error."""
    output = work / f"plan-{isolation}.json"
    command = [str(RUNNER), "schema", "plan", "--url-env", "BENCH_URL", "--desired", str(desired)]
    command += ["--no-cache", "--allow-destructive", "--sandbox-isolation", isolation]
    command += ["--format", "json", "--output", str(output)]
    env = {**os.environ, "BENCH_URL": url}
    started = time.perf_counter()
    child = subprocess.run(command, capture_output=True, env=env, cwd=work, timeout=900)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(
            f"plan ({isolation}) exited {child.returncode}:\n{child.stdout.decode()[-2000:]}"
            f"\n{child.stderr.decode()[-2000:]}"
        )
    return Sample(wall)


def alternate(url: str, desired: Path, runs: int, work: Path) -> dict[str, Series]:
    """``runs`` plans per isolation, alternating, after one unmeasured plan of each."""
    series = {isolation: Series() for isolation in ISOLATIONS}
    for isolation in ISOLATIONS:
        plan(url, desired, isolation, work)  # templates built, caches of the OS warm
    for _ in range(runs):
        for isolation in ISOLATIONS:
            series[isolation].samples.append(plan(url, desired, isolation, work))
    return series


def report(label: str, series: dict[str, Series]) -> str:
    jail, none = series["jail"], series["none"]
    cells = [label, str(len(jail.samples))]
    cells += [f"{s.median():.2f} s" for s in (jail, none)]
    cells.append(f"{jail.median() / none.median():.2f}")
    return "| " + " | ".join(cells) + " |"


@contextlib.contextmanager
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="seshat-jail-cost-") as name:
        path = Path(name)
        path.chmod(0o755)
        yield path


def postgres_rows(base: Path, runs: int, tables: int) -> list[str]:
    rows: list[str] = []
    with running_postgres(base) as server, server.connect() as admin:
        admin.execute("CREATE DATABASE bench_empty")
        admin.execute("CREATE DATABASE bench_live")
        one = base / "one.sql"
        one.write_text(ONE_TABLE, encoding="utf-8")
        rows.append(report("PostgreSQL start (1 table)", alternate(
            server.url("bench_empty"), one, runs, base)))  # fmt: skip
        if tables:
            live = generate(tables)
            statements = [part for part in live.sql().split("\n\n") if part.strip()]
            with server.connect("bench_live") as conn:
                for first in range(0, len(statements), 200):
                    conn.execute("\n".join(statements[first : first + 200]).encode())
            desired = base / "desired.sql"
            desired.write_text(mutate(live).sql(), encoding="utf-8")
            rows.append(report(f"PostgreSQL {tables} tables", alternate(
                server.url("bench_live"), desired, 2, base)))  # fmt: skip
    return rows


def mariadb_rows(base: Path, runs: int) -> list[str]:
    with running_mariadb(base) as server:
        with server.connect() as conn, conn.cursor() as cursor:
            cursor.execute("CREATE DATABASE bench_empty")
        one = base / "one.sql"
        one.write_text(ONE_TABLE, encoding="utf-8")
        return [report("MariaDB start (1 table)", alternate(
            server.url("bench_empty"), one, runs, base))]  # fmt: skip


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="plans per isolation (start)")
    parser.add_argument("--tables", type=int, default=1000, help="0 skips the large plan")
    parser.add_argument("--skip-mysql", action="store_true", help="PostgreSQL only")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    with folder() as base:
        rows = postgres_rows(base, args.runs, args.tables)
        if not args.skip_mysql:
            rows += mariadb_rows(base, args.runs)
    print("| plan | runs | jail (median wall) | none | jail / none |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        print(row)
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f};"
          f" benchmark wall time {time.perf_counter() - started:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
