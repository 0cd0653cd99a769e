#!/usr/bin/env python3
"""Score Seshat's schema engine on the sqldef conformance corpus.

    .venv/bin/python bench/corpus.py --dialect postgresql
    .venv/bin/python bench/corpus.py --cases 'tables/*' --limit 20 -v
    .venv/bin/python bench/corpus.py --check-known bench/corpus-known-failures/postgresql.txt

Each case is run forward (current -> desired) against a private server, through
``seshat-runner`` as a subprocess, and checked against an engine-independent oracle. See
bench/README.md for what the numbers mean, and the corpus README for the procedure.
Exit status: 0 done (and, with --check-known, no regression), 1 regressions, 2 could not run.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager
from pathlib import Path
from types import FrameType
from typing import Protocol

from corpus_cases import DEFAULT_CORPUS, Case, load_cases, matches
from corpus_gate import check, read_known, write_known
from corpus_result import CATEGORIES, CaseResult
from corpus_runner import Runner, default_runner

__all__ = ["main"]


class Environment(Protocol):
    """A prepared server for one dialect: what to skip, and how to score one case."""

    dialect: str
    server_version: str

    def skip_reason(self, case: Case) -> str | None: ...
    def run_case(self, case: Case) -> CaseResult: ...


def _postgresql(runner: Runner, base_dir: Path | None) -> AbstractContextManager[Environment]:
    from corpus_pg import running_environment

    return running_environment(runner, base_dir)


def _mysql(runner: Runner, base_dir: Path | None) -> AbstractContextManager[Environment]:
    from corpus_mysql import running_environment

    return running_environment(runner, base_dir)


def _sqlite(runner: Runner, base_dir: Path | None) -> AbstractContextManager[Environment]:
    from corpus_sqlite import running_environment

    return running_environment(runner, base_dir)


DIALECTS: dict[str, Callable[[Runner, Path | None], AbstractContextManager[Environment]]] = {
    "postgresql": _postgresql,
    "sqlite": _sqlite,
    "mysql": _mysql,
    # "mysql" and "sqlite": add an environment module like corpus_pg.py and register it here.
}


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialect", choices=sorted(DIALECTS), default="postgresql")
    parser.add_argument(
        "--cases", action="append", default=[], metavar="GLOB",
        help="only cases whose name, file/name or file matches (repeatable)",
    )  # fmt: skip
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N runnable cases (after --cases)")  # fmt: skip
    parser.add_argument(
        "--shard", type=_shard, default=(1, 1), metavar="I/N",
        help="only every N-th runnable case, starting with the I-th (split a run across jobs)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=min(8, os.cpu_count() or 2),
        help="cases scored in parallel (default: the number of CPUs, at most 8)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, metavar="FILE", help="write per-case results here")
    parser.add_argument(
        "--check-known", type=Path, metavar="FILE",
        help="exit 1 if a case fails that this known-failures file does not list",
    )  # fmt: skip
    parser.add_argument("--write-known", type=Path, metavar="FILE",
                        help="write a known-failures file from this run's failures")  # fmt: skip
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, metavar="DIR")
    parser.add_argument(
        "--runner", type=Path, default=None, metavar="PATH",
        help="the seshat-runner executable (default: the one in this venv)",
    )  # fmt: skip
    parser.add_argument(
        "--no-fork", dest="fork", action="store_false",
        help="start the runner's console script for every call instead of forking each call "
        "from a runner that imported everything once (bench/corpus_runner.py)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=240.0,
                        help="seconds per runner invocation")  # fmt: skip
    parser.add_argument(
        "--base-dir", type=Path, default=None, metavar="DIR",
        help="where the private server's data lives (default: /dev/shm if present, else TMPDIR)",
    )  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    return parser.parse_args(argv)


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise argparse.ArgumentTypeError(f"expected I/N with 1 <= I <= N, not {text!r}")
    return int(index), int(count)


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _pct(part: int, whole: int) -> str:
    return f"{part:>4} / {whole:<4} {100 * part / whole:5.1f}%" if whole else f"{part:>4} / 0"


def _engine_version(runner: Runner) -> str:
    run = runner.run(["--version"])
    return run.stdout.strip() or run.error_text


def _progress(result: CaseResult, done: int, total: int, verbose: bool, started: float) -> None:
    if verbose or result.status == "fail":
        detail = "" if result.status == "pass" else f" {result.category}: {result.message[:150]}"
        print(f"[{done}/{total}] {result.status:4} {result.id} ({result.seconds:.1f}s){detail}",
              file=sys.stderr, flush=True)  # fmt: skip
    elif done % 25 == 0 or done == total:
        elapsed = time.monotonic() - started
        print(f"[{done}/{total}] {elapsed:.0f}s", file=sys.stderr, flush=True)


def _run_all(env: Environment, cases: list[Case], workers: int, verbose: bool) -> list[CaseResult]:
    """Score ``cases`` with a small thread pool (each case has its own databases)."""
    results: dict[str, CaseResult] = {}
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="case") as pool:
        futures: dict[Future[CaseResult], Case] = {}
        queue = iter(cases)

        def submit() -> None:
            case = next(queue, None)
            if case is not None:
                futures[pool.submit(env.run_case, case)] = case

        for _ in range(max(1, workers)):
            submit()
        try:
            while futures:
                finished, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                for future in finished:
                    case = futures.pop(future)
                    result = future.result()
                    results[case.id] = result
                    _progress(result, len(results), len(cases), verbose, started)
                    submit()
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            raise
    return [results[c.id] for c in cases if c.id in results]


def _summary(dialect: str, version: str, engine: str, results: list[CaseResult],
             total_cases: int, seconds: float) -> str:  # fmt: skip
    run = [r for r in results if r.status != "skip"]
    skipped = [r for r in results if r.status == "skip"]
    normal = [r for r in run if r.kind == "normal"]
    nodrop = [r for r in run if r.kind == "nodrop"]
    errors = [r for r in run if r.kind == "error"]
    with_oracle = [r for r in normal if r.oracle]
    twice = [r for r in run if r.deterministic is not None]
    lines = [
        f"Seshat corpus score: {dialect} (server {version}), {engine}",
        f"cases {total_cases}: considered {len(results)}, runnable {len(run)}, "
        f"skipped {len(skipped)}; {seconds:.0f}s",
        "",
        f"  passed (every check)          {_pct(sum(r.status == 'pass' for r in run), len(run))}",
        f"  converged (by oracle)         "
        f"{_pct(sum(bool(r.converged) for r in with_oracle), len(with_oracle))}"
        "  of normal cases with an oracle",
        f"  idempotent                    "
        f"{_pct(sum(bool(r.idempotent) for r in normal + nodrop), len(normal + nodrop))}"
        "  of normal + enable_drop:false cases",
        f"  deterministic                 "
        f"{_pct(sum(r.deterministic is True for r in run), len(twice))}"
        "  of cases planned twice",
        f"  refused as expected           "
        f"{_pct(sum(bool(r.refused) for r in errors), len(errors))}  of error cases",
        f"  drops held (enable_drop:false) "
        f"{_pct(sum(r.status == 'pass' for r in nodrop), len(nodrop))} of those cases pass",
        f"  no oracle (desired won't load) {sum(r.oracle is False for r in run):>4}",
        "",
        "skipped by reason",
    ]  # fmt: skip
    reasons = Counter(r.skip_reason or "?" for r in skipped)
    unsupported = {k: v for k, v in reasons.items() if k.startswith("unsupported option")}
    for reason, count in sorted(reasons.items(), key=lambda kv: (kv[0] in unsupported, -kv[1])):
        lines.append(f"  {count:>4}  {reason}")
    if unsupported:
        lines.append(
            f"        ({sum(unsupported.values())} for an unsupported option, README step 9)"
        )
    lines += ["", "failures by category"]
    categories = Counter(r.category for r in run if r.status == "fail")
    for category in CATEGORIES:
        if categories.get(category):
            lines.append(f"  {categories[category]:>4}  {category}")
    lines.append(f"  {sum(categories.values()):>4}  total")
    lines += ["", f"  {'file':<22}{'runnable':>9}{'pass':>6}{'fail':>6}{'skip':>6}  failures"]
    by_file: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        by_file[result.file].append(result)
    for file in sorted(by_file):
        members = by_file[file]
        ran = [r for r in members if r.status != "skip"]
        fails = Counter(r.category for r in ran if r.status == "fail")
        detail = ", ".join(f"{c} {n}" for c, n in sorted(fails.items(), key=lambda kv: -kv[1]))
        lines.append(
            f"  {file:<22}{len(ran):>9}{sum(r.status == 'pass' for r in ran):>6}"
            f"{sum(fails.values()):>6}{len(members) - len(ran):>6}  {detail}"
        )
    return "\n".join(line.rstrip() for line in lines)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    runner = Runner(args.runner or default_runner(), timeout=args.timeout, fork=args.fork)
    atexit.register(runner.stop)
    if not runner.binary.exists():
        print(f"corpus: {runner.binary}: no such runner", file=sys.stderr)
        return 2
    try:
        cases = [c for c in load_cases(args.dialect, args.corpus) if matches(c, args.cases)]
        all_ids = {c.id for c in load_cases(args.dialect, args.corpus)}
        known = read_known(args.check_known) if args.check_known else None
    except (OSError, ValueError) as error:
        print(f"corpus: {error}", file=sys.stderr)
        return 2
    started = time.monotonic()
    engine = _engine_version(runner)
    with _sigterm_as_interrupt(), DIALECTS[args.dialect](runner, args.base_dir) as env:
        skipped: list[CaseResult] = []
        runnable: list[Case] = []
        for case in cases:
            reason = env.skip_reason(case)
            if reason is None:
                runnable.append(case)
            else:
                skipped.append(CaseResult(case.id, case.file, case.name, status="skip",
                                          skip_reason=reason))  # fmt: skip
        index, count = args.shard
        runnable = runnable[index - 1 :: count]
        if args.limit is not None:
            runnable = runnable[: args.limit]
        print(f"corpus: {len(runnable)} runnable cases, {args.workers} workers, "
              f"server {env.server_version}", file=sys.stderr, flush=True)  # fmt: skip
        scored = _run_all(env, runnable, args.workers, args.verbose)
        version = env.server_version
    order = {c.id: i for i, c in enumerate(cases)}
    results = sorted(scored + skipped, key=lambda r: order[r.id])
    seconds = time.monotonic() - started
    print(_summary(args.dialect, version, engine, results, len(all_ids), seconds))
    if args.json:
        document = {
            "dialect": args.dialect,
            "server_version": version,
            "engine": engine,
            "seconds": round(seconds, 1),
            "cases": [r.to_json() for r in results],
        }
        args.json.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", "utf-8")
    if args.write_known:
        header = (
            f"Known failures of the {args.dialect} corpus run (bench/corpus.py).\n"
            "Format: file/case  category  reason. Regenerate with\n"
            f"  .venv/bin/python bench/corpus.py --dialect {args.dialect} --write-known FILE\n"
            "and remove a line as soon as its case passes."
        )
        count = write_known(args.write_known, scored, header)
        print(f"\nwrote {count} known failures to {args.write_known}")
    if known is None:
        return 0
    report = check(scored, known, all_ids)
    print("\nknown-failures gate:", "OK" if report.ok else f"{len(report.regressions)} REGRESSIONS")
    for result in report.regressions:
        print(f"  REGRESSION {result.id}  {result.category}  {result.message[:200]}")
    for entry in report.now_passing:
        print(f"  now passes (remove from the list): {entry.id}")
    for entry, result in report.recategorized:
        print(f"  changed category: {entry.id}  {entry.category} -> {result.category}")
    for entry in report.unknown_ids:
        print(f"  not in the corpus (stale line {entry.line}): {entry.id}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("corpus: interrupted", file=sys.stderr)
        sys.exit(130)
    except subprocess.SubprocessError as error:
        print(f"corpus: {error}", file=sys.stderr)
        sys.exit(2)
