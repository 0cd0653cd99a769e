"""SQLite's differ: the shared one, with what ALTER TABLE cannot do turned into table rebuilds.

SQLite alters a table in place in three ways only: ADD COLUMN (at the end, and not for
every column), DROP COLUMN (when nothing else uses the column) and RENAME. Every other
change to an existing table (a type, default, NOT NULL, collation or generation change, a
constraint added or removed, columns in another order, STRICT or WITHOUT ROWID) makes a
single ``rebuild_table`` change that stands for all of that table's changes (its ``parts``,
whose hazards it carries, plus ``TABLE_REBUILD``). It is rendered as SQLite's documented
procedure: create the new table, copy the rows, drop the old one, rename the new one, and
create the table's indexes and triggers again (see :mod:`~runner.engines.sqlite.render`).

Constraints live inside CREATE TABLE, so constraint changes of new and dropped tables are
dropped from the list (the table's own statement carries them). The stored CREATE text
(option ``sql``) is never compared: only what it means.
"""

from __future__ import annotations

from runner.engines.changes import Change, Phase
from runner.engines.diff import diff
from runner.engines.model import Column, Constraint, Database, Definition, Index, Table
from runner.engines.sqlite.sqltext import Kind, tokens

__all__ = ["NOT_COMPARED", "sqlite_diff"]

NOT_COMPARED = ("sql",)
"""Table options that describe how a table was written, not what it is."""

_TABLE_OPS_IN_PLACE = {"add_column", "drop_column"}
_TIME_DEFAULTS = ("CURRENT_TIME", "CURRENT_DATE", "CURRENT_TIMESTAMP")


def _compared(table: Table) -> tuple[tuple[str, str], ...]:
    return tuple(o for o in table.options if o[0] not in NOT_COMPARED)


def _owner(change: Change, db: Database) -> str | None:
    """The table a sub-object change belongs to."""
    thing = change.after if change.after is not None else change.before
    if isinstance(thing, Constraint | Index):
        return thing.table
    if isinstance(thing, Definition) and thing.kind == "trigger":
        return thing.table
    return None


def _addable(column: Column) -> bool:
    """Whether ``ALTER TABLE ... ADD COLUMN`` accepts this column (SQLite's own rules)."""
    if dict(column.extra).get("generated") == "stored":
        return False
    if column.not_null and column.default is None and column.generated is None:
        return False
    default = (column.default or "").strip()
    return not (default.startswith("(") or default.upper() in _TIME_DEFAULTS)


def _mentions(text: str, column: str) -> bool:
    wanted = column.lower()
    return any(
        p.text.lower() == wanted for p in tokens(text) if p.kind in (Kind.IDENTIFIER, Kind.VAR)
    )


def _droppable(live: Database, table: Table, column: str) -> bool:
    """Whether ``DROP COLUMN`` works: nothing else of the table names the column."""
    for constraint in live.constraints.values():
        if constraint.table == table.key and (
            column in constraint.columns or _mentions(constraint.definition, column)
        ):
            return False
    for index in live.indexes.values():
        if index.table == table.key and _mentions(index.definition, column):
            return False
    return not any(c.generated and _mentions(c.generated, column) for c in table.columns)


def _same_order(old: Table, new: Table) -> bool:
    """The kept columns stay in their order, and new ones go at the end."""
    old_names = [c.name for c in old.columns]
    new_names = [c.name for c in new.columns]
    common = [n for n in old_names if n in new_names]
    return new_names[: len(common)] == common


def _in_place(live: Database, old: Table, new: Table, changes: list[Change]) -> bool:
    if _compared(old) != _compared(new):
        return False
    if any(c.op not in _TABLE_OPS_IN_PLACE for c in changes):
        return False
    if not _same_order(old, new):
        return False
    for change in changes:
        if change.op == "add_column":
            column = change.after
            if not isinstance(column, Column) or not _addable(column):
                return False
        elif change.op == "drop_column" and not _droppable(live, old, change.detail):
            return False
    return True


def sqlite_diff(live: Database, desired: Database) -> list[Change]:
    """Every change from ``live`` to ``desired`` that SQLite can run (module docstring)."""
    changes = diff(live, desired)
    new_tables = desired.tables.keys() - live.tables.keys()
    dropped_tables = live.tables.keys() - desired.tables.keys()
    by_table: dict[str, list[Change]] = {}
    kept: list[Change] = []
    for change in changes:
        if change.op == "alter_table_options":
            old, new = change.before, change.after
            if (
                isinstance(old, Table)
                and isinstance(new, Table)
                and (_compared(old) == _compared(new))
            ):
                continue  # only the spelling of the CREATE text differs
        owner = _owner(change, live) or _owner(change, desired)
        is_constraint = isinstance(change.after or change.before, Constraint)
        if is_constraint and owner in new_tables | dropped_tables:
            continue  # part of the table's own CREATE TABLE, or gone with its DROP TABLE
        table = change.key if change.key.startswith("table:") else owner
        if table in live.tables and table in desired.tables and change.op != "create_table":
            by_table.setdefault(table, []).append(change)
        else:
            kept.append(change)
    # The shared differ does not compare column order; SQLite can only keep it by a rebuild.
    for table in sorted(live.tables.keys() & desired.tables.keys()):
        if table not in by_table and not _same_order(live.tables[table], desired.tables[table]):
            by_table[table] = []
    result = list(kept)
    for table, group in sorted(by_table.items()):
        old, new = live.tables[table], desired.tables[table]
        own = [c for c in group if c.key == table]
        others = [c for c in group if c.key != table]
        if any(c.op in ("drop_table", "create_table") for c in own):
            result += group
            continue
        constraint_changes = [c for c in others if isinstance(c.after or c.before, Constraint)]
        if not constraint_changes and _in_place(live, old, new, own):
            result += group
            continue
        result.append(_rebuild(desired, old, new, group))
    return sorted(result, key=lambda c: c.sort_key)


def _rebuild(desired: Database, old: Table, new: Table, group: list[Change]) -> Change:
    """One ``rebuild_table`` change standing for ``group``; it recreates indexes and triggers."""
    parts = [c for c in group if c.op not in ("drop_index", "drop_definition")]
    created = {c.key for c in parts if c.op in ("create_index", "create_definition")}
    for key, index in sorted(desired.indexes.items()):
        if index.table == new.key and key not in created:
            parts.append(Change("create_index", key, Phase.CREATE, (new.key,), after=index))
    for key, definition in sorted(desired.definitions.items()):
        if definition.kind == "trigger" and definition.table == new.key and key not in created:
            parts.append(
                Change("create_definition", key, Phase.CREATE, (new.key,), after=definition)
            )
    tables = sorted({t for c in group for t in c.tables} | {new.key})
    return Change(
        "rebuild_table",
        new.key,
        Phase.CREATE,
        tuple(tables),
        before=old,
        after=new,
        existing_table=True,
        parts=tuple(sorted(parts, key=lambda c: c.sort_key)),
    )
