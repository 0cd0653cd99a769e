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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_cases import Case
from corpus_pg import _apply_message, _first_difference, destructive_sql
from corpus_result import CaseResult
from corpus_runner import PlanOutcome, Runner

__all__ = ["SqliteEnvironment", "running_environment", "snapshot"]

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
        started = time.monotonic()
        result = CaseResult(case.id, case.file, case.name, renamed_hints=case.renamed_hints)
        result.kind = "error" if case.error else ("nodrop" if not case.enable_drop else "normal")
        folder = Path(tempfile.mkdtemp(prefix="case-", dir=self.work))
        try:
            self._score(case, result, folder)
        except Exception as error:  # the scorer's own trouble, not the engine's
            result.fail("scorer_error", f"{type(error).__name__}: {error}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if result.category is None:
            result.status = "pass"
        result.seconds = round(time.monotonic() - started, 2)
        return result

    @staticmethod
    def _load(path: Path, script: str) -> None:
        conn = sqlite3.connect(path)
        try:
            conn.executescript(script)
            conn.commit()
        finally:
            conn.close()

    def _score(self, case: Case, result: CaseResult, folder: Path) -> None:
        a, a2, b = folder / "a.db", folder / "a2.db", folder / "b.db"
        for path in (a, a2):
            try:
                self._load(path, case.current)
            except sqlite3.Error as error:
                result.fail("load_error", f"current: {error}")
                return
        try:
            self._load(b, case.desired)
            result.oracle = True
        except sqlite3.Error as error:
            result.oracle = False
            result.fail("no_oracle", f"desired: {error}")
        desired = folder / "desired.sql"
        desired.write_text(case.desired, encoding="utf-8")
        before = snapshot(a)
        oracle = snapshot(b) if result.oracle else None
        url_a, url_a2 = f"sqlite:///{a}", f"sqlite:///{a2}"
        allow = case.enable_drop
        plan1 = self.runner.plan(
            url_a, desired, folder / "plan1.json", allow_destructive=allow, seed=1
        )
        result.details["plan"] = plan1.summary
        result.details["plan_seconds"] = round(plan1.seconds, 2)
        if case.error:
            result.refused = plan1.rc in (1, 2)
            if not result.refused:
                result.fail(
                    "not_refused",
                    f"planned {len(plan1.statements)} statements; sqldef says: {case.error}",
                )
            elif snapshot(a) != before:
                result.fail("not_refused", "refused, but the database changed")
            return
        if plan1.rc == 2:
            result.planned = False
            result.fail("plan_error", plan1.error_text)
            return
        plan2 = self.runner.plan(
            url_a2, desired, folder / "plan2.json", allow_destructive=allow, seed=2
        )
        result.deterministic = plan1.same_as(plan2)
        if plan1.rc == 1 and not allow and plan1.refusal_code == "destructive_disallowed":
            result.planned, result.refused = False, True
            result.drops_held = snapshot(a) == before
            if not result.drops_held:
                result.fail("drop_not_held", "refused, but the database changed")
            self._check_determinism(result, plan1, plan2)
            return
        if plan1.rc == 1:
            result.planned = False
            result.fail("plan_refused", f"{plan1.refusal_code}: {plan1.refusal_message}")
            self._check_determinism(result, plan1, plan2)
            return
        result.planned = True
        result.statements = len(plan1.statements)
        result.destructive = any(_is_destructive(s) for s in plan1.statements)
        result.details["statements_sql"] = [str(s.get("sql", ""))[:300] for s in plan1.statements]
        if not allow and result.destructive:
            first = next(s for s in plan1.statements if _is_destructive(s))
            result.drops_held = False
            result.fail("drop_not_held", f"destructive statement planned: {first.get('sql')}")
            self._check_determinism(result, plan1, plan2)
            return
        if plan1.statements:
            applied = self.runner.apply(url_a, folder / "plan1.json")
            result.applied = applied.rc == 0
            if applied.rc != 0:
                result.fail(
                    "apply_error", _apply_message(applied.rc, applied.stdout, applied.error_text)
                )
                self._check_determinism(result, plan1, plan2)
                return
        else:
            result.applied = True
        after = snapshot(a)
        if oracle is not None and allow:
            problems = compare(after, oracle)
            result.converged = not problems
            if problems:
                result.diff = "\n".join(problems)
                result.fail("not_converged", "; ".join(problems)[:400])
        elif oracle is not None:
            problems = [p for p in compare(after, oracle) if not p.startswith("extra ")]
            result.converged = not problems
            if problems:
                result.fail("not_converged", "not everything desired is there: " + problems[0])
        if not allow:
            lost = sorted(before.keys() - after.keys())
            result.drops_held = not lost
            if lost:
                result.fail("drop_not_held", "objects only in current were lost: " + lost[0])
        if not plan1.statements:
            result.idempotent = True
            self._check_determinism(result, plan1, plan2)
            return
        plan3 = self.runner.plan(
            url_a, desired, folder / "plan3.json", allow_destructive=True, seed=3
        )
        if plan3.rc != 0:
            result.idempotent = False
            result.fail("not_idempotent", f"second plan {plan3.summary}")
        else:
            left = [s for s in plan3.statements if allow or not _is_destructive(s)]
            result.idempotent = not left
            if left:
                result.details["second_plan"] = [str(s.get("sql", ""))[:300] for s in left]
                result.fail(
                    "not_idempotent",
                    f"second plan has {len(left)} statements, first: "
                    f"{left[0].get('op')} {left[0].get('key')}",
                )
        self._check_determinism(result, plan1, plan2)

    @staticmethod
    def _check_determinism(result: CaseResult, plan1: PlanOutcome, plan2: PlanOutcome) -> None:
        if result.deterministic is False:
            result.fail(
                "not_deterministic",
                f"plan 1: {plan1.summary}; plan 2: {plan2.summary}"
                + _first_difference(plan1, plan2),
            )


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
