"""Impact checks: what a plan will do to the rows already there, measured before approval.

A hazard judged from a change's shape (:mod:`runner.engines.hazards`) says what *may*
happen ("may fail on existing rows", "deletes data", "rewrites the table"); this module
measures it on the target, read-only, so the person who approves sees what it means for
this database: "SET NOT NULL on orders.email: 37 rows are NULL (exact) — this plan would
fail".

* **What is measured** (:func:`probes`): for each change whose hazard depends on the rows,
  one :class:`Probe`: NULL rows under SET NOT NULL, rows under a new NOT NULL column without
  a default, duplicate groups under a new UNIQUE, orphan rows under a new FOREIGN KEY,
  values that do not fit a narrowing type, rows and non-NULL values a drop loses, a dropped
  sequence's value, and the size of each table a change rewrites or scans under a strong
  lock. A new CHECK's expression comes from the desired schema, which is hostile input: it
  is never evaluated on the target (``unknown``, ``expression_not_run``).
* **How** (:func:`measure`): by the dialect's :class:`Reader`, on a read-only session of the
  target, every query bounded by a statement timeout. Names reach SQL only through the
  dialect's quoting function; values never leave the runner, only counts and sizes.
* **Modes**: ``off`` (nothing measured), ``estimate`` (the default: exact counts on tables
  under :data:`EXACT_BYTES`, statistics above it, ``unknown (too_large)`` where there are
  none), ``exact`` (every count exact, each bounded by the timeout: ``unknown
  (timed_out)`` rather than a long query on a production database).
* **Where figures go**: beside the plan (``PlanResult.impact``), never inside the plan
  document: the plan id does not move with the figures, so a figure that changes between
  passes never invalidates an approval.
* **A plan certain to fail** (:func:`certain_failures`): an exact count above zero under a
  NOT NULL, a UNIQUE or a FOREIGN KEY; the runner refuses it (``would_fail_on_data``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal, Protocol

from pydantic import Field

from runner.engines.changes import Change
from runner.engines.hazards import hazards_of
from runner.engines.model import Column, Constraint, Database, Definition, Index
from runner.engines.model import Sequence as SequenceObject
from runner.engines.plan import PlanDocument
from runner.engines.planner import PlanRefused
from runner.models import Model

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "EXACT_BYTES",
    "MODES",
    "WOULD_FAIL",
    "ColumnStats",
    "Figure",
    "ImpactReport",
    "Probe",
    "Reader",
    "ReaderBase",
    "TableFacts",
    "TimedOut",
    "Unreadable",
    "certain_failures",
    "describe",
    "measure",
    "probes",
    "refuse_certain",
    "would_fail_message",
]

MODES: Final = ("off", "estimate", "exact")
EXACT_BYTES: Final = 64 * 1024 * 1024
"""In ``estimate`` mode, tables up to this size (heap bytes) are counted exactly."""
DEFAULT_TIMEOUT_MS: Final = 2000
"""Each impact query's statement timeout, unless the caller names another."""
WOULD_FAIL: Final = "would_fail_on_data"
MAX_FIGURES: Final = 256

Check = Literal[
    "null_rows",  # SET NOT NULL: rows whose column is NULL
    "rows_without_value",  # ADD COLUMN NOT NULL without a default: the table's rows
    "duplicate_groups",  # new UNIQUE / PRIMARY KEY: groups of rows sharing a key
    "orphan_rows",  # new FOREIGN KEY: rows whose key has no parent
    "check_rows",  # new CHECK: not evaluated (the expression is the desired schema's)
    "misfit_values",  # narrowing type change: values that do not fit the new type
    "rows",  # DROP TABLE: rows lost
    "non_null_values",  # DROP COLUMN: non-NULL values lost
    "sequence_value",  # DROP SEQUENCE: its current value
    "table_size",  # a rewrite or a scan under a strong lock: pages, bytes, estimated rows
]
_FAILING: Final = frozenset({"null_rows", "rows_without_value", "duplicate_groups", "orphan_rows"})
"""The checks whose offending rows make the change fail, whatever else the plan does."""


class Figure(Model):
    """One measured hazard: a verdict (``none``: measured zero; ``count``; ``unknown`` with a
    ``reason``), whether the count is exact, and, for a table, its size."""

    op: str
    key: str
    subject: Annotated[str, Field(max_length=300)]
    hazard: str
    check: Check
    verdict: Literal["none", "count", "unknown"]
    count: Annotated[int, Field(ge=0)] | None = None
    exact: bool = False
    reason: (
        Literal[
            "no_select_privilege", "timed_out", "too_large", "expression_not_run", "not_measured"
        ]
        | None
    ) = None
    bytes: Annotated[int, Field(ge=0)] | None = None
    pages: Annotated[int, Field(ge=0)] | None = None
    rows: Annotated[int, Field(ge=0)] | None = None  # the catalog's estimate of a table's rows
    fails: bool = False
    """Certain to make the plan fail: an exact count above zero where the change refuses
    any offending row (NOT NULL, UNIQUE, FOREIGN KEY)."""


class ImpactReport(Model):
    """The figures of one plan, beside it (never in the plan document)."""

    mode: Literal["estimate", "exact"]
    figures: Annotated[list[Figure], Field(max_length=MAX_FIGURES)] = Field(default_factory=list)
    queries: Annotated[int, Field(ge=0)] = 0
    left_out: Annotated[int, Field(ge=0)] = 0  # figures past MAX_FIGURES, not measured


# -- what to measure ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probe:
    """One thing to measure on the live table ``table`` (its key)."""

    change: Change
    hazard: str
    check: Check
    table: str = ""
    columns: tuple[str, ...] = ()
    references: str = ""  # orphan_rows: the parent table's key
    referenced: tuple[str, ...] = ()  # orphan_rows: the parent's columns
    old_type: str = ""
    new_type: str = ""
    sequence: str = ""
    labels: tuple[str, ...] = ()  # misfit_values into an enum type: its desired labels


_LOCKS: Final = {
    "TABLE_REWRITE": "rewrites {table} {size} under ACCESS EXCLUSIVE",
    "TABLE_REBUILD": "rebuilds {table} {size} (copies every row)",
    "LOCK_ACCESS_EXCLUSIVE_SCAN": "scans {table} {size} under ACCESS EXCLUSIVE",
    "LOCK_SHARE_BLOCKS_WRITES": "blocks writes to {table} {size} while it builds",
    "ALGORITHM_COPY": "copies {table} {size} (ALGORITHM=COPY)",
    "ALGORITHM_INPLACE": "rebuilds {table} {size} in place (ALGORITHM=INPLACE)",
}


def _unquoted_list(text: str) -> tuple[str, ...] | None:
    """``a, "B c"`` as names; None if an element is anything but a name (an expression)."""
    names: list[str] = []
    for part in re.findall(r'\s*("(?:[^"]|"")*"|`(?:[^`]|``)*`|[^,]+)\s*(?:,|$)', text):
        part = part.strip()
        if part[:1] in ('"', "`"):
            names.append(part[1:-1].replace(part[0] * 2, part[0]))
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", part):
            names.append(part.lower() if part != part.lower() else part)
        else:
            return None
    return tuple(names) or None


def _referenced_columns(constraint: Constraint) -> tuple[str, ...] | None:
    """The parent columns a foreign key's definition names (``REFERENCES t(a, b)``)."""
    found = re.search(
        r"REFERENCES\s+(?:\"(?:[^\"]|\"\")*\"|`[^`]*`|[^\s(])+\s*\(([^)]*)\)",
        constraint.definition,
        re.I,
    )
    return _unquoted_list(found.group(1)) if found else None


def _index_columns(index: Index) -> tuple[str, ...] | None:
    """The plain columns of a unique index's definition; None for an expression or a
    partial index (not measured)."""
    if re.search(r"\)\s*WHERE\s", index.definition, re.I):
        return None
    found = re.search(r"\((.*)\)\s*$", index.definition.strip(), re.S)
    if found is None or "(" in found.group(1):
        return None
    return _unquoted_list(found.group(1))


def _hazard_probes(
    change: Change, codes: set[str], live: Database, enums: Mapping[str, tuple[str, ...]]
) -> Iterator[Probe]:
    op, table = change.op, change.key if change.key.startswith("table:") else ""
    if op == "set_not_null" and "DATA_DEPENDENT_NOT_NULL" in codes:
        yield Probe(change, "DATA_DEPENDENT_NOT_NULL", "null_rows", table, (change.detail,))
    elif op == "add_column" and "DATA_DEPENDENT_NOT_NULL" in codes:
        yield Probe(change, "DATA_DEPENDENT_NOT_NULL", "rows_without_value", table)
    elif op == "add_constraint" and change.existing_table:
        constraint = change.new(Constraint)
        table = constraint.table
        if constraint.kind in ("p", "u"):
            yield Probe(
                change, "DATA_DEPENDENT_UNIQUE", "duplicate_groups", table, constraint.columns
            )
        elif constraint.kind == "f":
            yield Probe(
                change,
                "DATA_DEPENDENT_FK",
                "orphan_rows",
                table,
                constraint.columns,
                references=constraint.references or "",
                referenced=_referenced_columns(constraint) or (),
            )
        elif constraint.kind == "c":
            yield Probe(change, "DATA_DEPENDENT_CHECK", "check_rows", table)
    elif op == "create_index" and "DATA_DEPENDENT_UNIQUE" in codes:
        index = change.new(Index)
        yield Probe(
            change,
            "DATA_DEPENDENT_UNIQUE",
            "duplicate_groups",
            index.table,
            _index_columns(index) or (),
        )
    elif op == "alter_column_type" and "NARROWING_TYPE" in codes:
        old, new = change.old(Column), change.new(Column)
        yield Probe(
            change,
            "NARROWING_TYPE",
            "misfit_values",
            table,
            (change.detail,),
            old_type=old.type,
            new_type=new.type,
            labels=enums.get(_type_key(new.type), ()),
        )
    elif op == "drop_table":
        yield Probe(change, "DROP_TABLE", "rows", change.key)
    elif op == "drop_column":
        yield Probe(change, "DROP_COLUMN", "non_null_values", table, (change.detail,))
    elif op == "drop_sequence" and isinstance(change.before, SequenceObject):
        yield Probe(change, "DROP_SEQUENCE", "sequence_value", sequence=change.key)
    for part in change.parts:  # a SQLite rebuild stands for these
        part_codes = {h.code for h in hazards_of(part)}
        yield from _hazard_probes(part, part_codes, live, enums)


def _type_key(column_type: str) -> str:
    """The definition key of a column's type as the model writes it (``type:schema.name``)."""
    return "type:" + column_type.replace('"', "")


def _enum_labels(changes: Sequence[Change]) -> dict[str, tuple[str, ...]]:
    """The labels of every enum type the plan creates or creates again (a label removed or
    reordered): a column converted to it holds only these, the rest fail the cast."""
    found: dict[str, tuple[str, ...]] = {}
    for change in changes:
        after = change.after
        if not (change.op == "create_definition" and isinstance(after, Definition)):
            continue
        if after.kind == "enum":
            found[after.key] = tuple(json.loads(after.fact("labels") or "[]"))
    return found


def probes(changes: Sequence[Change], document: PlanDocument, live: Database) -> list[Probe]:
    """What to measure for ``changes`` (the plan ``document`` was rendered from): the data
    and destructive hazards that depend on rows, and one size per table under a lock hazard
    (the document's: a dry run's probe may have found it, MySQL's algorithms)."""
    judged: dict[tuple[str, str], set[str]] = {}
    for statement in document.statements:
        judged.setdefault((statement.op, statement.key), set()).update(
            h.code for h in statement.hazards
        )
    found: list[Probe] = []
    sized: set[str] = set()
    tables, columns = _renames(changes)
    enums = _enum_labels(changes)
    for change in changes:
        codes = {h.code for h in hazards_of(change)} | judged.get((change.op, change.key), set())
        found += _hazard_probes(change, codes, live, enums)
        for code in sorted(codes & _LOCKS.keys()):
            # The table the change alters (a foreign key's parent is only read).
            table = next((t for t in change.tables if t in live.tables), "")
            if table and table not in sized:
                sized.add(table)
                found.append(Probe(change, code, "table_size", table))
    return [_live_names(probe, tables, columns) for probe in found]


def _renames(changes: Sequence[Change]) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """What the plan's rename hints rename (its changes are diffed from the renamed view, and
    run after the renames): tables by their new key, columns by (table key, new name); the
    target holds the old names until the plan runs."""
    tables: dict[str, str] = {}
    columns: dict[tuple[str, str], str] = {}
    for change in changes:
        if change.op == "rename_table":
            tables[change.key] = change.tables[0]
        elif change.op == "rename_column":
            columns[(change.key, change.detail)] = change.old(Column).name
    return tables, columns


def _live_names(probe: Probe, tables: dict[str, str], columns: dict[tuple[str, str], str]) -> Probe:
    """``probe`` with the names the target holds now (before the plan's renames)."""
    if not tables and not columns:
        return probe
    return dataclasses.replace(
        probe,
        table=tables.get(probe.table, probe.table),
        columns=tuple(columns.get((probe.table, c), c) for c in probe.columns),
        references=tables.get(probe.references, probe.references),
        referenced=tuple(columns.get((probe.references, c), c) for c in probe.referenced),
    )


# -- how a dialect reads ----------------------------------------------------------------------


class TimedOut(Exception):
    """A query outlived the impact timeout."""


class Unreadable(Exception):
    """The credential may not read the rows (no SELECT privilege)."""


@dataclass(frozen=True, slots=True)
class TableFacts:
    """A live table from the catalog, without reading a row."""

    bytes: int  # heap bytes (every partition's, for a partitioned table)
    pages: int | None
    rows: int | None  # the catalog's estimate; None where it has none (never analyzed)
    readable: bool  # the credential may SELECT from it


@dataclass(frozen=True, slots=True)
class ColumnStats:
    null_frac: float
    n_distinct: float  # PostgreSQL's convention: negative is a fraction of the rows


class Reader(Protocol):
    """A dialect's read-only session on the target for impact checks."""

    queries: int
    implicit_defaults: bool

    def table(self, key: str) -> TableFacts | None: ...
    def stats(self, key: str, column: str) -> ColumnStats | None: ...
    def count(self, sql: str) -> int: ...
    def sequence_value(self, key: str) -> int | None: ...
    def name(self, key: str) -> str: ...  # a table's key as a quoted, qualified name
    def quote(self, name: str) -> str: ...
    def misfit_condition(self, column: str, old: str, new: str) -> str | None: ...
    def label_condition(self, column: str, labels: tuple[str, ...]) -> str | None: ...


class ReaderBase:
    """What most readers share: the query count, no statistics, no sequences, no rule for
    values that do not fit, and a count read from :meth:`one`'s first column."""

    queries = 0
    implicit_defaults = False
    """Whether a new NOT NULL column without a default gets its type's implicit default on
    the rows already there (MySQL), rather than failing (PostgreSQL, SQLite)."""

    def one(self, sql: str) -> Any:
        """The first row of ``sql``, bounded by the reader's timeout."""
        raise NotImplementedError

    def count(self, sql: str) -> int:
        return int(self.one(sql)[0])

    def stats(self, key: str, column: str) -> ColumnStats | None:
        return None

    def sequence_value(self, key: str) -> int | None:
        return None

    def misfit_condition(self, column: str, old: str, new: str) -> str | None:
        return None

    def label_condition(self, column: str, labels: tuple[str, ...]) -> str | None:
        """Rows of ``column`` whose value is none of an enum type's ``labels`` (a value
        that will not cast to it); None where the dialect has no such types."""
        return None


@dataclass(slots=True)
class _Measuring:
    reader: Reader
    live: Database
    mode: str
    exact_bytes: int
    facts: dict[str, TableFacts | None] = field(default_factory=dict)

    def table(self, key: str) -> TableFacts | None:
        if key not in self.facts:
            self.facts[key] = self.reader.table(key) if key in self.live.tables else None
        return self.facts[key]

    def exact(self, facts: TableFacts) -> bool:
        return self.mode == "exact" or facts.bytes <= self.exact_bytes


def _figure(probe: Probe, **fields: object) -> Figure:
    change = probe.change
    subject = _subject(probe)
    return Figure.model_validate(
        {
            "op": change.op,
            "key": change.key,
            "subject": subject[:300],
            "hazard": probe.hazard,
            "check": probe.check,
            **fields,
        }
    )


def _short(key: str) -> str:
    name = key.split(":", 1)[-1]
    for default in ("public.", "main.", "db."):  # PostgreSQL's, SQLite's, MySQL's one schema
        if name.startswith(default):
            return name.removeprefix(default)
    return name


def _subject(probe: Probe) -> str:
    if probe.check in ("table_size", "rows", "rows_without_value", "check_rows"):
        base = _short(probe.table or probe.change.key)
        if probe.check in ("rows_without_value",):
            return f"{base}.{probe.change.detail}"
        return base
    if probe.check == "sequence_value":
        return _short(probe.sequence)
    table = _short(probe.table)
    if probe.check in ("duplicate_groups", "orphan_rows"):
        return f"{table}({', '.join(probe.columns)})"
    return f"{table}.{', '.join(probe.columns)}"


def _counted(probe: Probe, count: int, exact: bool, implicit_defaults: bool = False) -> Figure:
    fails = exact and count > 0 and probe.check in _FAILING
    if probe.check == "rows_without_value" and implicit_defaults:
        fails = False  # MySQL fills a new NOT NULL column with its type's implicit default
    return _figure(
        probe, verdict="count" if count else "none", count=count, exact=exact, fails=fails
    )


def _unknown(probe: Probe, reason: str) -> Figure:
    return _figure(probe, verdict="unknown", reason=reason)


def _exact_sql(probe: Probe, m: _Measuring) -> str | None:
    """The counting query of ``probe``; None where it cannot be asked safely."""
    r = m.reader
    table = r.name(probe.table) if probe.table else ""
    columns = [r.quote(c) for c in probe.columns]
    live_table = m.live.tables.get(probe.table)
    if live_table is not None and any(live_table.column(c) is None for c in probe.columns):
        return None  # a column the plan adds: it holds no rows' values yet
    if probe.check == "null_rows":
        return f"SELECT count(*) FROM {table} WHERE {columns[0]} IS NULL"
    if probe.check in ("rows", "rows_without_value"):
        return f"SELECT count(*) FROM {table}"
    if probe.check == "non_null_values":
        return f"SELECT count(*) FROM {table} WHERE {columns[0]} IS NOT NULL"
    present = " AND ".join(f"c.{c} IS NOT NULL" for c in columns)
    if probe.check == "duplicate_groups" and columns:
        listed = ", ".join(f"c.{c}" for c in columns)
        return (
            f"SELECT count(*) FROM (SELECT 1 AS one FROM {table} c WHERE {present}"
            f" GROUP BY {listed} HAVING count(*) > 1) d"
        )
    if probe.check == "orphan_rows" and columns:
        if probe.references not in m.live.tables:  # a parent the plan creates: empty
            return f"SELECT count(*) FROM {table} c WHERE {present}"
        if len(probe.referenced) != len(columns):
            return None
        parent = r.name(probe.references)
        joined = " AND ".join(
            f"p.{r.quote(p)} = c.{c}" for p, c in zip(probe.referenced, columns, strict=True)
        )
        return (
            f"SELECT count(*) FROM {table} c WHERE {present}"
            f" AND NOT EXISTS (SELECT 1 FROM {parent} p WHERE {joined})"
        )
    if probe.check == "misfit_values":
        condition = (
            r.label_condition(columns[0], probe.labels)
            if probe.labels
            else r.misfit_condition(columns[0], probe.old_type, probe.new_type)
        )
        if condition is None:
            return None
        return f"SELECT count(*) FROM {table} WHERE {condition}"
    return None


def _estimate(probe: Probe, facts: TableFacts, m: _Measuring) -> Figure:
    """A figure from statistics, for a table past the exact bound in ``estimate`` mode."""
    rows = facts.rows
    if probe.check in ("rows", "rows_without_value") and rows is not None:
        return _counted(probe, rows, exact=False)
    stats = m.reader.stats(probe.table, probe.columns[0]) if len(probe.columns) == 1 else None
    if stats is not None and rows is not None:
        if probe.check == "null_rows":
            return _counted(probe, round(stats.null_frac * rows), exact=False)
        if probe.check == "non_null_values":
            return _counted(probe, round((1 - stats.null_frac) * rows), exact=False)
        if probe.check == "duplicate_groups" and stats.n_distinct == -1:
            return _counted(probe, 0, exact=False)  # every value distinct in the sample
    return _unknown(probe, "too_large")


def _one(probe: Probe, m: _Measuring) -> Figure:
    r = m.reader
    if probe.check == "sequence_value":
        try:
            value = r.sequence_value(probe.sequence)
        except Unreadable:
            return _unknown(probe, "no_select_privilege")
        except TimedOut:
            return _unknown(probe, "timed_out")
        if value is None:
            return _figure(probe, verdict="none", exact=True)  # never used
        return _figure(probe, verdict="count", count=value, exact=True)
    facts = m.table(probe.table)
    if facts is None:
        if probe.check in ("orphan_rows", "duplicate_groups", "null_rows"):
            return _unknown(probe, "not_measured")
        return _figure(probe, verdict="none", count=0, exact=True)  # no live table: no rows
    size = {"bytes": facts.bytes, "pages": facts.pages, "rows": facts.rows}
    if probe.check == "table_size":
        return _figure(probe, verdict="count", count=facts.rows, **size)
    if probe.check == "check_rows":
        return _figure(probe, verdict="unknown", reason="expression_not_run", rows=facts.rows)
    sql = _exact_sql(probe, m)
    if sql is None:
        return _unknown(probe, "not_measured")
    parent = m.table(probe.references) if probe.check == "orphan_rows" else None
    if not facts.readable or (parent is not None and not parent.readable):
        return _unknown(probe, "no_select_privilege")
    if not m.exact(facts):
        return _estimate(probe, facts, m)
    try:
        return _counted(probe, r.count(sql), exact=True, implicit_defaults=r.implicit_defaults)
    except TimedOut:
        return _unknown(probe, "timed_out")
    except Unreadable:
        return _unknown(probe, "no_select_privilege")


def measure(
    open_reader: Callable[[], AbstractContextManager[Reader]],
    found: Sequence[Probe],
    live: Database,
    mode: str,
    *,
    exact_bytes: int = EXACT_BYTES,
) -> ImpactReport:
    """Every probe of ``found`` measured by the reader ``open_reader`` opens (one read-only
    session, opened only when there is something to measure)."""
    assert mode in ("estimate", "exact")
    kept = list(found[:MAX_FIGURES])
    if not kept:
        return ImpactReport(mode=mode)
    with open_reader() as reader:
        measuring = _Measuring(reader, live, mode, exact_bytes)
        figures = [_one(probe, measuring) for probe in kept]
        queries = reader.queries
    return ImpactReport(
        mode=mode,
        figures=figures,
        queries=queries,
        left_out=len(found) - len(kept),
    )


# -- what people read ------------------------------------------------------------------------

_WHAT: Final = {
    "null_rows": ("SET NOT NULL on {s}", "{n} rows are NULL"),
    "rows_without_value": ("ADD COLUMN {s} NOT NULL without a default", "{n} rows have no value"),
    "duplicate_groups": ("UNIQUE on {s}", "{n} duplicate groups"),
    "orphan_rows": ("FOREIGN KEY on {s}", "{n} orphan rows"),
    "check_rows": ("CHECK on {s}", ""),
    "misfit_values": ("type change of {s}", "{n} values do not fit"),
    "rows": ("DROP TABLE {s}", "{n} rows"),
    "non_null_values": ("DROP COLUMN {s}", "{n} non-NULL values"),
    "sequence_value": ("DROP SEQUENCE {s}", "current value {n}"),
}
_REASONS: Final = {
    "no_select_privilege": "unknown (no SELECT privilege)",
    "timed_out": "unknown (timed out)",
    "too_large": "unknown (too large to count; no statistics)",
    "expression_not_run": "not measured (the expression comes from the desired schema and "
    "is never run on the target)",
    "not_measured": "not measured",
}


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError  # pragma: no cover


def _rows(count: int) -> str:
    for limit, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if count >= limit:
            return f"~{count / limit:.1f}{unit} rows"
    return f"~{count} rows"


def describe(figure: Figure) -> str:
    """One line for a person: the hazard, on what, and its figure."""
    if figure.check == "table_size":
        parts = [_size(figure.bytes or 0)]
        if figure.rows is not None:
            parts.append(_rows(figure.rows))
        template = _LOCKS.get(figure.hazard, "locks {table} {size}")
        return template.format(table=figure.subject, size=f"({', '.join(parts)})")
    what, how = _WHAT[figure.check]
    line = what.format(s=figure.subject)
    if figure.verdict == "unknown":
        said = _REASONS[figure.reason or "not_measured"]
        if figure.rows is not None:
            said += f"; the table has {_rows(figure.rows)}"
        return f"{line}: {said}"
    count = figure.count or 0
    if figure.check == "sequence_value" and figure.verdict == "none":
        return f"{line}: never used"
    measured = how.format(n=f"{count:,}" if figure.exact else f"~{count:,}")
    line += f": {measured} ({'exact' if figure.exact else 'estimate'})"
    if figure.fails:
        line += " — this plan would fail"
    return line


_FAILING_ORDER: Final = ("null_rows", "rows_without_value", "duplicate_groups", "orphan_rows")


def certain_failures(report: ImpactReport | None) -> list[Figure]:
    """The figures that prove the plan would fail, NOT NULL first, then UNIQUE, then FK."""
    found = [f for f in report.figures if f.fails] if report is not None else []
    return sorted(found, key=lambda f: _FAILING_ORDER.index(f.check))


def refuse_certain(report: ImpactReport | None) -> None:
    """Refuse (``would_fail_on_data``) a plan the figures prove would fail on the rows."""
    failures = certain_failures(report)
    if failures:
        raise PlanRefused(WOULD_FAIL, would_fail_message(failures))


def would_fail_message(failures: Sequence[Figure]) -> str:
    first = describe(failures[0])
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    return f"{first}{more}; fix the data or the desired schema, then plan again"
