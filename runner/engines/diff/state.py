"""What every part of the differ reads and writes: the two models, the changes so far,
the tables dropped, created and rewritten, the live dependency edges both ways; the change
of one column, and what the plan leaves fresh or gone."""

from __future__ import annotations

from collections import defaultdict

from runner.engines.changes import Change, Phase
from runner.engines.model import Column, Constraint, Database, Definition, Table

__all__ = [
    "DiffState",
    "column_change",
    "constraint_differs",
    "definition_tables",
    "owner_of",
    "tables_of",
]


def column_change(
    op: str,
    table: str,
    phase: Phase,
    *,
    before: Column | None = None,
    after: Column | None = None,
    position: int = 0,
    cast: str = "",
) -> Change:
    """A change to one column of an existing table (``detail`` names the column)."""
    column = after if after is not None else before
    assert column is not None
    return Change(
        op,
        table,
        phase,
        (table,),
        before=before,
        after=after,
        detail=column.name,
        existing_table=True,
        position=position,
        cast=cast,
    )


def owner_of(key: str, db: Database) -> str | None:
    """The table (or view) a sub-object belongs to."""
    if key in db.constraints:
        return db.constraints[key].table
    if key in db.indexes:
        return db.indexes[key].table
    if key in db.definitions:
        return db.definitions[key].table
    return None


class DiffState:
    """The differ's shared state; each part (tables and columns, constraints and indexes,
    sequences, definitions and the recreate closure, comments) is a subclass that adds its
    own steps, and :func:`~runner.engines.diff.diff` runs them in order over one instance."""

    def __init__(self, live: Database, desired: Database) -> None:
        self.live = live
        self.desired = desired
        self.changes: list[Change] = []
        self.recreate: set[str] = set()  # live keys dropped and created again
        self.dropped_tables = {k for k in live.tables if k not in desired.tables}
        self.new_tables = {k for k in desired.tables if k not in live.tables}
        self.rewritten_tables: set[str] = set()  # column type changes or drops
        self.rewritten_columns: set[str] = set()  # their columns, ``column:s.t.c``
        self.dependents: dict[str, set[str]] = defaultdict(set)
        self.uses: dict[str, set[str]] = defaultdict(set)
        for dependent, dependency in live.depends:
            self.dependents[dependency].add(dependent)
            self.uses[dependent].add(dependency)

    @property
    def _postgresql(self) -> bool:
        return self.live.dialect == "postgresql"

    def add(self, change: Change) -> None:
        self.changes.append(change)

    def _partitioned(self, table: str) -> str:
        """``"partitioned"`` for a table the desired schema partitions (it takes no
        ``NOT VALID`` constraint and no concurrent index build), else ``""``."""
        found = self.desired.tables.get(table)
        return "partitioned" if found is not None and found.partition_key is not None else ""

    def _rewrite(self, table: str, column: str) -> None:
        """Record that ``column`` of ``table`` changes type or goes away."""
        self.rewritten_tables.add(table)
        self.rewritten_columns.add(f"column:{table.removeprefix('table:')}.{column}")

    def _blocks_rewrite(self, view: str, table: str) -> bool:
        """Whether ``view`` must be rebuilt for ``table``'s column changes: it uses one of the
        changing columns (a whole-row use counts as all of them), or the catalog named no
        column of it at all (a dialect without column-level edges)."""
        prefix = f"column:{table.removeprefix('table:')}."
        columns = {c for c in self.uses[view] if c.startswith(prefix)}
        return not columns or bool(columns & self.rewritten_columns)

    def existing(self, table: str | None) -> bool:
        return table is not None and table in self.live.tables and table not in self.recreate

    def _drop_phase(self, key: str) -> Phase:
        """DROP, or RELEASE for an object a kept column uses until the CREATE phase changes
        it (an enum type until its columns change type, a function until a default that
        calls it is replaced): the catalog's column-level edges say which columns."""
        for dependent in sorted(self.dependents[key]):
            if not dependent.startswith("column:"):
                continue
            table_part, _, name = dependent.removeprefix("column:").rpartition(".")
            table = self.desired.tables.get(f"table:{table_part}")
            if table is not None and table.key not in self.dropped_tables and table.column(name):
                return Phase.RELEASE
        return Phase.DROP

    def _columns_using(
        self, key: str, *, dropped_too: bool = False
    ) -> list[tuple[str, Column, Column | None]]:
        """(table, live column, desired column) of every column of a kept table the live
        catalog says uses ``key`` (its type, or a function its default calls); the desired
        column is None for a column the desired schema drops (listed with ``dropped_too``)."""
        found: list[tuple[str, Column, Column | None]] = []
        for dependent in sorted(self.dependents[key]):
            if not dependent.startswith("column:"):
                continue
            table_part, _, name = dependent.removeprefix("column:").rpartition(".")
            table = f"table:{table_part}"
            old_table, new_table = self.live.tables.get(table), self.desired.tables.get(table)
            if old_table is None or new_table is None or table in self.dropped_tables:
                continue
            old, new = old_table.column(name), new_table.column(name)
            if old is not None and (new is not None or dropped_too):
                found.append((table, old, new))
        return found

    def fresh(self) -> set[str]:
        """Keys of the objects (and ``column:`` keys of the columns) the plan creates, or
        drops and creates again: what was attached to their live selves is gone."""
        fresh = {
            c.key
            for c in self.changes
            if c.op
            in (
                "create_table",
                "create_definition",
                "create_index",
                "add_constraint",
                "create_sequence",
            )
        }
        fresh |= {
            f"column:{c.key.removeprefix('table:')}.{c.detail}"
            for c in self.changes
            if c.op == "add_column"
        }
        fresh |= {
            f"column:{c.key.removeprefix('table:')}.{column.name}"
            for c in self.changes
            if c.op == "create_table"
            for column in c.new(Table).columns
        }
        return fresh

    def _gone(self, key: str) -> bool:
        if key in self.recreate:
            return True
        if key.startswith("column:"):
            table = "table:" + key.removeprefix("column:").rsplit(".", 1)[0]
            name = key.rsplit(".", 1)[1]
            if table in self.dropped_tables:
                return True
            desired_table = self.desired.tables.get(table)
            return desired_table is None or desired_table.column(name) is None
        in_desired = any(
            key in part
            for part in (
                self.desired.tables,
                self.desired.constraints,
                self.desired.indexes,
                self.desired.sequences,
                self.desired.definitions,
            )
        )
        return not in_desired or owner_of(key, self.live) in self.dropped_tables


def tables_of(constraint: Constraint) -> tuple[str, ...]:
    if constraint.references and constraint.references != constraint.table:
        return (constraint.table, constraint.references)
    return (constraint.table,)


def definition_tables(definition: Definition) -> tuple[str, ...]:
    return (definition.table,) if definition.table and definition.table.startswith("table:") else ()


def constraint_differs(old: Constraint, new: Constraint) -> bool:
    return (old.kind, old.definition, old.validated) != (new.kind, new.definition, new.validated)
