"""Scoring the engine on the SQLite cases of the sqldef corpus.

No server: each case gets database files in its own temporary folder:

* ``a.db``  ``current`` run with ``executescript``: planned against and applied to;
* ``a2.db`` a second copy of ``current``, planned once more for the determinism check;
* ``b.db``  ``desired`` run the same way: the oracle.

The oracle (corpus README, step 4) is independent of the engine: the set of
``(type, name, tbl_name)`` rows of ``sqlite_schema``, and for each table
``pragma table_xinfo``, ``index_list`` (without its creation-order ``seq``), ``index_xinfo``
of each index and ``foreign_key_list``. CHECK constraints, generated columns, views and
triggers exist only as text, so the stored SQL of every object is compared too, after a
normalization of its own (lower case outside string literals, identifier quotes removed,
whitespace collapsed; a table's column and constraint items compared as a set, because
ADD COLUMN writes a column where the table's author may not have).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_cases import Case
from corpus_pg import destructive_sql
from corpus_result import CaseResult
from corpus_runner import Runner
from corpus_score import run_case

__all__ = ["Snapshot", "SqliteEnvironment", "running_environment", "snapshot", "subset_problems"]

Snapshot = dict[str, Any]  # "TYPE name" -> what the oracle compares of that object

_TOKEN = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/|\s+|.",
    re.DOTALL,
)
_WORD = re.compile(r"[A-Za-z0-9_$]")


def normalize_sql(text: str) -> str:
    """Lower case outside strings, no identifier quotes or comments, minimal whitespace."""
    out: list[str] = []
    pending_space = False
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token.isspace() or token.startswith(("--", "/*")):
            pending_space = True
            continue
        if token[0] in '"`[':
            token = token[1:-1].replace('""', '"').lower()
        elif token[0] != "'":
            token = token.lower()
        if pending_space and out and _WORD.match(out[-1][-1]) and _WORD.match(token[0]):
            out.append(" ")
        pending_space = False
        out.append(token)
    return "".join(out).rstrip(";")


def _table_items(text: str) -> tuple[list[str], str]:
    """A normalized CREATE TABLE: its top-level items (sorted) and what follows them."""
    norm = normalize_sql(text)
    start = norm.find("(")
    if start < 0:
        return [], norm
    depth, items, current, index = 0, [], "", start
    while index < len(norm):
        char = norm[index]
        if char == "'":
            end = index + 1
            while end < len(norm):
                if norm[end] == "'" and not norm.startswith("''", end):
                    break
                end += 2 if norm.startswith("''", end) else 1
            current += norm[index : end + 1]
            index = end + 1
            continue
        if char == "(":
            depth += 1
            if depth == 1:
                index += 1
                continue
        elif char == ")":
            depth -= 1
            if depth == 0:
                items.append(current)
                return sorted(items), norm[index + 1 :]
        elif char == "," and depth == 1:
            items.append(current)
            current = ""
            index += 1
            continue
        current += char
        index += 1
    return sorted(items), ""


def snapshot(path: Path) -> Snapshot:
    """What the oracle compares, by object (see the module docstring)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        objects: Snapshot = {}
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema").fetchall()
        for kind, name, table, sql in sorted(rows, key=lambda r: (r[0], r[1])):
            entry: dict[str, Any] = {"tbl_name": table.lower()}
            if kind == "table":
                entry["xinfo"] = conn.execute(
                    "SELECT * FROM pragma_table_xinfo(?)", (name,)
                ).fetchall()
                entry["fks"] = conn.execute(
                    "SELECT * FROM pragma_foreign_key_list(?)", (name,)
                ).fetchall()
                indexes = conn.execute(
                    'SELECT name, "unique", origin, partial FROM pragma_index_list(?)', (name,)
                ).fetchall()
                entry["indexes"] = sorted(indexes)
                entry["index_xinfo"] = {
                    i[0]: conn.execute("SELECT * FROM pragma_index_xinfo(?)", (i[0],)).fetchall()
                    for i in sorted(indexes)
                }
                entry["sql"] = _table_items(sql) if sql else None
            else:
                entry["sql"] = normalize_sql(sql) if sql else None
            objects[f"{kind.upper()} {name.lower()}"] = entry
        return objects
    finally:
        conn.close()


def compare(after: Snapshot, oracle: Snapshot) -> list[str]:
    """Differences, one line each: ``missing|extra|differs TYPE name: what``."""
    problems: list[str] = []
    for key in sorted(oracle.keys() - after.keys()):
        problems.append(f"missing {key}")
    for key in sorted(after.keys() - oracle.keys()):
        problems.append(f"extra {key}")
    for key in sorted(after.keys() & oracle.keys()):
        fields = [f for f in oracle[key] if oracle[key][f] != after[key].get(f)]
        if fields:
            detail = _column_order(after[key], oracle[key]) if "xinfo" in fields else ""
            problems.append(f"differs {key}: {', '.join(fields)}{detail}")
    return problems


def _column_names(entry: dict[str, Any]) -> set[str]:
    return {str(row[1]).lower() for row in entry.get("xinfo") or []}


def _rows(value: Any) -> set[tuple[Any, ...]]:
    """Pragma rows without their position (``cid``, ``seq``): what a subset compares."""
    return {tuple(row[1:]) for row in value or []}


def subset_problems(after: Snapshot, oracle: Snapshot) -> list[str]:
    """What of the oracle is not in ``after`` (``enable_drop: false``, objects and columns
    ``after`` has besides allowed): every object; of a table, every column, foreign key,
    index and CREATE TABLE item the oracle's has; other objects exactly."""
    problems = [f"missing {key}" for key in sorted(oracle.keys() - after.keys())]
    for key in sorted(oracle.keys() & after.keys()):
        want, have = oracle[key], after[key]
        if "xinfo" not in want:
            fields = [f for f in want if want[f] != have.get(f)]
            if fields:
                problems.append(f"differs {key}: {', '.join(fields)}")
            continue
        lacking = [
            field
            for field, missing in (
                ("xinfo", _rows(want["xinfo"]) - _rows(have["xinfo"])),
                ("fks", _rows(want["fks"]) - _rows(have["fks"])),
                ("indexes", set(want["indexes"]) - set(have["indexes"])),
                (
                    "index_xinfo",
                    {i for i, rows in want["index_xinfo"].items()
                     if _rows(rows) != _rows(have["index_xinfo"].get(i))},
                ),
                (
                    "sql",
                    (set(want["sql"][0]) - set(have["sql"][0]))
                    | ({"after"} if want["sql"][1] != have["sql"][1] else set()),
                ),
            )
            if missing
        ]  # fmt: skip
        if lacking:
            problems.append(f"differs {key}: lacks {', '.join(lacking)}")
    return problems


def _column_order(after: dict[str, Any], oracle: dict[str, Any]) -> str:
    a = [tuple(r[1:]) for r in after["xinfo"]]
    b = [tuple(r[1:]) for r in oracle["xinfo"]]
    return " (column order only)" if a != b and sorted(a) == sorted(b) else ""


def _is_destructive(statement: dict[str, Any]) -> bool:
    """Destructive by its hazards; a DROP outside a table rebuild (whose rows are copied)."""
    if any(h.get("kind") == "destructive" for h in statement.get("hazards") or []):
        return True
    return statement.get("op") != "rebuild_table" and destructive_sql(str(statement["sql"]))


class SqliteEnvironment:
    """Database files in a work folder, and the per-case scoring procedure."""

    dialect = "sqlite"

    def __init__(self, runner: Runner, work: Path) -> None:
        self.runner = runner
        self.work = work
        self.server_version = sqlite3.sqlite_version

    def skip_reason(self, case: Case) -> str | None:
        """Every SQLite case runs (corpus README: "SQLite 65, none skipped")."""
        return None

    def run_case(self, case: Case) -> CaseResult:
        return run_case(case, self.runner, self.work, _SqliteCase.files)


class _SqliteCase:
    """A case's three database files in its folder (removed with it)."""

    def __init__(self, folder: Path) -> None:
        self.env: dict[str, str] = {}
        self.a, self.a2, self.b = folder / "a.db", folder / "a2.db", folder / "b.db"
        self.url_a, self.url_a2 = f"sqlite:///{self.a}", f"sqlite:///{self.a2}"

    @classmethod
    @contextlib.contextmanager
    def files(cls, folder: Path) -> Iterator[_SqliteCase]:
        yield cls(folder)

    @staticmethod
    def _load(path: Path, script: str) -> None:
        conn = sqlite3.connect(path)
        try:
            conn.executescript(script)
            conn.commit()
        finally:
            conn.close()

    def load(self, case: Case, result: CaseResult) -> bool:
        for path in (self.a, self.a2):
            try:
                self._load(path, case.current)
            except sqlite3.Error as error:
                result.fail("load_error", f"current: {error}")
                return False
        try:
            self._load(self.b, case.desired)
            result.oracle = True
        except sqlite3.Error as error:
            result.oracle = False
            result.fail("no_oracle", f"desired: {error}")
        return True

    def desired_for_a2(self, text: str) -> str:
        return text

    def dump_a(self) -> Snapshot:
        return snapshot(self.a)

    def dump_b(self) -> Snapshot:
        return snapshot(self.b)

    def same(self, one: Snapshot, other: Snapshot) -> bool:
        return one == other

    def converged(self, after: Snapshot, oracle: Snapshot, before: Snapshot) -> tuple[str, str]:
        problems = compare(after, oracle)
        return "; ".join(problems)[:400], "\n".join(problems)

    def missing(self, after: Snapshot, oracle: Snapshot) -> list[str]:
        return subset_problems(after, oracle)

    def lost(self, before: Snapshot, after: Snapshot, oracle: Snapshot | None) -> list[str]:
        lost = sorted(before.keys() - after.keys())
        for key in sorted(before.keys() & after.keys()):
            if "xinfo" in before[key]:
                gone = _column_names(before[key]) - _column_names(after[key])
                lost += [f"{key} lost column {name}" for name in sorted(gone)]
        return lost

    def destructive(self, statement: dict[str, Any]) -> bool:
        return _is_destructive(statement)


@contextlib.contextmanager
def running_environment(
    runner: Runner, base_dir: Path | None = None
) -> Iterator[SqliteEnvironment]:
    """A work folder for the case files, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="seshat-corpus-sqlite-", dir=base_dir))
    try:
        yield SqliteEnvironment(runner, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
