#!/usr/bin/env python3
"""How many sqldef corpus cases the first wall refuses, and why: no database needed.

    .venv/bin/python bench/corpus_classify.py
    .venv/bin/python bench/corpus_classify.py --dialect mysql --examples 5

Every case's ``desired`` SQL is classified as the runner classifies a desired schema
(runner/sql/classify.py, declarations only: no ``proceduralSchema``); a case is refused when
any statement of it is. The counts are per dialect, by the kind of statement refused (a case
with two kinds counts under each). MySQL is read with MariaDB 10.11's default ``sql_mode``,
what the test server and the private sandbox run. bench/README.md records the numbers.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from corpus_cases import DEFAULT_CORPUS, load_cases

from runner.sql.classify import verdicts

__all__ = ["main", "refusals"]

DIALECTS = ("postgresql", "mysql", "sqlite")
MARIADB_MODE = (
    "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION"
)


def refusals(dialect: str, sql: str) -> list[str]:
    """The kinds of the statements of ``sql`` that would be refused, in order."""
    mode = MARIADB_MODE if dialect == "mysql" else ""
    judged = verdicts(dialect, sql, sql_mode=mode)
    return [v.kind for _, v in judged if v.action in ("procedural", "outside")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialect", choices=DIALECTS, action="append")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--examples", type=int, default=3, help="case ids shown per kind")
    args = parser.parse_args()
    for dialect in args.dialect or DIALECTS:
        cases = load_cases(dialect, args.corpus)
        by_kind: dict[str, list[str]] = defaultdict(list)
        statements: Counter[str] = Counter()
        refused = 0
        for case in cases:
            kinds = refusals(dialect, case.desired)
            statements.update(kinds)
            if kinds:
                refused += 1
                for kind in dict.fromkeys(kinds):
                    by_kind[kind].append(case.id)
        print(f"{dialect}: {refused} of {len(cases)} cases refused")
        for kind, ids in sorted(by_kind.items(), key=lambda item: (-len(item[1]), item[0])):
            shown = ", ".join(ids[: args.examples]) + (", ..." if len(ids) > args.examples else "")
            print(f"  {len(ids):4d} cases, {statements[kind]:4d} statements  {kind}  ({shown})")


if __name__ == "__main__":
    main()
