#!/usr/bin/env python3
"""How long ``seshat-runner op`` takes to answer for an unchanged SQLite database.

    .venv/bin/python bench/runner_start.py [--runs 21] [--tables 20]

A reconciliation pass starts a runner process per operation, and for a converged SQLite
database almost all of that process's life is Python starting and importing. In one run,
each measured ``--runs`` times (medians; a child process each time, from ``fork`` until
the moment in question):

* ``python -c pass``: the interpreter's own start (the baseline the ratios are against);
* ``python -c "import runner.cli"``: the runner's command-line module, imported;
* ``seshat-runner op`` for a ``drift`` of an unchanged database: until the frame's last line
  has arrived on stdout, and until the process has exited;
* the same for ``plan``;

and, for each, the child's CPU time (user + system, from ``wait4``), which other work on
the machine disturbs less than the wall time. Then the same two operations forked, as a
local controller's runners are (:mod:`runner.forks`): from a process that imported
:data:`runner.forks.PRELOAD` only, and from one that ran :func:`runner.forks.prepare` (the
fork server's start: imports, validators built, the engine's source digested once).

The database holds ``--tables`` tables (with indexes, CHECK and COLLATE clauses, foreign
keys, a view per five tables) and the desired folder the same schema, so drift finds
nothing and plan plans nothing. The planning cache (``SESHAT_CACHE_DIR``, a temporary
folder) is warmed by one unmeasured run of each operation: the steady state of every pass
over a converged database. The runner is this checkout's, or ``--root``'s (``PYTHONPATH``;
the children run in the temporary folder, since ``python -c`` imports from the current
folder first), started as ``python -c "from runner.cli import main; main()"`` (what the
``seshat-runner`` script runs), with bytecode compiled once into a private
``PYTHONPYCACHEPREFIX``, as an installed runner has it. Nothing is judged: the issue's
target (a drift's frame within 150 ms of process start) and the numbers measured are in
bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
FOOTER = b"<<<SESHAT-RESULT END>>>"
RUNNER = ("-c", "from runner.cli import main; main()")
FORKER = """
import importlib, json, os, sys, time
from runner import forks
mode, runs, inputs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
if mode == "prepared":
    forks.prepare()
else:
    for module in forks.PRELOAD:
        importlib.import_module(module)
from runner.cli import main
found = {}
for _ in range(runs + 1):  # the first of each: unmeasured
    for path in inputs:
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            sys.argv = ["seshat-runner", "op", "--input", path]
            main()
            os._exit(0)
        _, status, usage = os.wait4(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, path
        found.setdefault(path, []).append(
            [time.perf_counter() - started, usage.ru_utime + usage.ru_stime]
        )
print(json.dumps({path: runs[1:] for path, runs in found.items()}))
"""


def schema(tables: int) -> str:
    """``tables`` tables in the shapes SQLite introspection reads from the stored text."""
    parts = [
        "CREATE TABLE owners (id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " email TEXT NOT NULL UNIQUE COLLATE NOCASE);"
    ]
    for n in range(tables):
        parts.append(
            f"CREATE TABLE t{n} (id INTEGER PRIMARY KEY, owner INTEGER REFERENCES owners(id),"
            f" name TEXT NOT NULL CHECK (length(name) < 200), price INTEGER DEFAULT 0,"
            f" note TEXT COLLATE NOCASE, UNIQUE (owner, name));"
        )
        parts.append(f"CREATE INDEX t{n}_price ON t{n} (price) WHERE price > 0;")
        if n % 5 == 0:
            parts.append(f"CREATE VIEW v{n} AS SELECT id, name FROM t{n} WHERE price < 10;")
    return "\n".join(parts) + "\n"


class Run(NamedTuple):
    """One child process: seconds until its frame's footer arrived on stdout (until its
    stdout closed, for a command that prints no frame), until it exited, and its CPU time
    (user + system: steadier than wall time on a shared machine)."""

    frame: float
    exit: float
    cpu: float


def timed(command: Sequence[str], env: Mapping[str, str], cwd: Path) -> Run:
    """Run ``command`` once, in ``cwd`` (not a checkout: ``python -c`` imports from the
    current folder before ``PYTHONPATH``)."""
    started = time.perf_counter()
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env), cwd=cwd
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        output = b""
        for line in child.stdout:
            output += line
            if line.startswith(FOOTER):
                break
        framed = time.perf_counter() - started
        output += child.stdout.read()
        errors = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        exited = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0 or (FOOTER in output) != ("op" in command):
        raise SystemExit(f"{' '.join(command)} failed ({status}): {errors.decode()[-2000:]}")
    return Run(framed, exited, usage.ru_utime + usage.ru_stime)


def median_ms(values: Sequence[float]) -> float:
    return statistics.median(values) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (median)")
    parser.add_argument("--tables", type=int, default=20, help="tables in the schema")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to start")
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="the checkout whose runner is measured (default: this one; another one, e.g. "
        "`git archive` of an older commit, gives before/after numbers on the same machine)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seshat-start-") as scratch:
        folder = Path(scratch)
        desired = folder / "desired"
        desired.mkdir()
        text = schema(args.tables)
        (desired / "schema.sql").write_text(text, encoding="utf-8")
        with sqlite3.connect(folder / "app.db") as conn:
            conn.executescript(text)
        conn.close()
        inputs = {}
        for operation in ("drift", "plan"):
            request = {
                "operation": operation,
                "id": f"bench-{operation}",
                "url": {"from_env": "BENCH_DB_URL"},
                "desired": str(desired),
            }
            inputs[operation] = folder / f"{operation}.json"
            inputs[operation].write_text(json.dumps(request), encoding="utf-8")
        env = {
            **os.environ,
            "PYTHONPATH": str(args.root.resolve()),
            "BENCH_DB_URL": f"sqlite:///{folder / 'app.db'}",
            "SESHAT_CACHE_DIR": str(folder / "cache"),
        }
        env.pop("SESHAT_NO_CACHE", None)
        # As installed (pip compiles bytecode): the warm-up writes every module's bytecode
        # to a private folder, whatever this shell's PYTHONDONTWRITEBYTECODE says.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        commands: dict[str, list[str]] = {
            "python -c pass": [args.python, "-c", "pass"],
            "import runner.cli": [args.python, "-c", "import runner.cli"],
            "op drift (unchanged)": [args.python, *RUNNER, "op", "--input", str(inputs["drift"])],
            "op plan (unchanged)": [args.python, *RUNNER, "op", "--input", str(inputs["plan"])],
        }
        for command in commands.values():  # warm the cache and the OS's file cache
            timed(command, env, folder)
        samples: dict[str, list[Run]] = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved: a busy moment hits every command alike
            for name, command in commands.items():
                samples[name].append(timed(command, env, folder))
        for mode in ("imported", "prepared"):
            paths = [str(inputs["drift"]), str(inputs["plan"])]
            done = subprocess.run(
                [args.python, "-c", FORKER, mode, str(args.runs), *paths],
                env=env, cwd=folder, capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs = json.loads(done.stdout)
            for operation, path in zip(("drift", "plan"), paths, strict=True):
                samples[f"fork {operation} ({mode})"] = [
                    Run(0.0, wall, cpu) for wall, cpu in runs[path]
                ]
    print(f"seshat-runner start: {args.root.resolve()}, Python {platform.python_version()}")
    report(samples, args.runs, args.tables)
    return 0


def report(samples: Mapping[str, list[Run]], runs: int, tables: int) -> None:
    base = {
        "exit": median_ms([run.exit for run in samples["python -c pass"]]),
        "cpu": median_ms([run.cpu for run in samples["python -c pass"]]),
    }
    print(f"{tables} tables, median of {runs} runs (ms)")
    print(f"{'':24} {'frame':>6} {'exit':>6} {'cpu':>6} {'exit/base':>10} {'cpu/base':>9}")
    for name, measured in samples.items():
        exited = median_ms([run.exit for run in measured])
        cpu = median_ms([run.cpu for run in measured])
        frame = f"{median_ms([run.frame for run in measured]):.0f}" if name.startswith("op") else ""
        print(
            f"{name:24} {frame:>6} {exited:6.0f} {cpu:6.0f} "
            f"{exited / base['exit']:10.1f} {cpu / base['cpu']:9.1f}"
        )


if __name__ == "__main__":
    sys.exit(main())
