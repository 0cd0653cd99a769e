"""Spelling each change as MySQL/MariaDB statements.

Every statement is one DDL statement (each commits implicitly). A column change of any
kind is a ``MODIFY COLUMN`` with the column's whole desired definition, because MySQL
cannot alter one attribute alone; a new column is placed with ``AFTER`` / ``FIRST`` where
the desired schema has it, and ``move_column`` changes (from :mod:`.diff`) put existing
columns in the desired order. A new table is created with its primary key, unique and
ordinary indexes and checks (an AUTO_INCREMENT column must be a key from the start);
foreign keys are added afterwards, once every table exists.

The renderer needs the desired model (for a table's keys and a column's predecessor), so
:func:`renderer` makes one per plan.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from runner.engines.changes import Change, Phase, Statement, UnsupportedChange, renderer_for
from runner.engines.model import Column, Constraint, Database, Definition, Index, Table
from runner.engines.mysql.grants import GRANT_RENDERERS
from runner.engines.mysql.quoting import ident, literal

__all__ = [
    "RENDERERS",
    "auto_key_added",
    "auto_key_dropped",
    "column_sql",
    "fk_columns",
    "implicit_fk_index",
    "index_columns",
    "index_name",
    "renderer",
]

Render = Callable[[Change], list[Statement]]
_COLUMN = re.compile(r"`((?:[^`]|``)+)`(\(\d+\))?( DESC)?")
_PLAIN_DEFAULT = re.compile(
    r"^(-?[0-9.]+(e[-+]?[0-9]+)?|'.*'|[bBxX]'[0-9a-fA-F]*'|NULL|current_timestamp(\(\d*\))?)$",
    re.DOTALL | re.IGNORECASE,
)


def _fact(facts: tuple[tuple[str, str], ...], name: str) -> str | None:
    return next((v for k, v in facts if k == name), None)


def _table(key: str) -> str:
    return ident(key.split(":", 1)[1].split(".", 1)[1])


def index_name(index: Index) -> str:
    """The index's own name, as its definition spells it (its model name is
    ``table.name`` in lower case: index names are case-insensitive).
    """
    match = _COLUMN.search(index.definition)
    assert match is not None
    return match.group(1).replace("``", "`")


def _primary_key(db: Database, table: str) -> Constraint | None:
    return db.constraints.get(f"constraint:{table.removeprefix('table:')}.PRIMARY")


def _auto(column: Column | None) -> bool:
    return column is not None and any(k == "auto_increment" for k, _ in column.extra)


def auto_key_added(live: Database, desired: Database, table: str) -> str | None:
    """A column that becomes AUTO_INCREMENT (a new one, or one of a renamed or altered
    table) whose new primary key is added in the same statement: the server refuses an
    AUTO_INCREMENT column that is not a key."""
    old, new = live.tables.get(table), desired.tables.get(table)
    if old is None or new is None or _primary_key(live, table) is not None:
        return None
    if _primary_key(desired, table) is None:
        return None
    return next((c.name for c in new.columns if _auto(c) and not _auto(old.column(c.name))), None)


def auto_key_dropped(live: Database, desired: Database, table: str) -> str | None:
    """A column losing AUTO_INCREMENT whose primary key goes in the same statement: the
    same change as :func:`auto_key_added`, from ``desired`` back to ``live``."""
    return auto_key_added(desired, live, table)


def index_columns(index: Index) -> list[str] | None:
    """Plain column names of a ``KEY`` (``None`` for prefixes, DESC or other kinds)."""
    if not index.definition.startswith("KEY ") or " COMMENT " in index.definition:
        return None
    inner = index.definition[index.definition.index("(") + 1 : index.definition.rindex(")")]
    names: list[str] = []
    for part in inner.split(","):
        match = _COLUMN.fullmatch(part.strip())
        if match is None or match.group(2) or match.group(3):
            return None
        names.append(match.group(1).replace("``", "`"))
    return names


def fk_columns(index: Index, db: Database) -> list[str] | None:
    """The columns of the foreign key in ``db`` that ``index`` exactly serves, if any."""
    columns = index_columns(index)
    found = any(
        c.kind == "f" and c.table == index.table and list(c.columns) == columns
        for c in db.constraints.values()
    )
    return columns if found else None


def implicit_fk_index(index: Index, db: Database) -> bool:
    """Whether ``index`` is the one the server made for a foreign key (by its name)."""
    columns = fk_columns(index, db)
    name = index_name(index)
    return columns is not None and any(
        c.kind == "f" and c.table == index.table and name in (c.name, c.columns[0])
        for c in db.constraints.values()
        if list(c.columns) == columns
    )


def column_sql(column: Column) -> str:
    """A column definition, as in ``CREATE TABLE`` and ``MODIFY COLUMN``."""
    facts = column.extra
    sql = f"{ident(column.name)} {column.type}"
    if column.collation:
        sql += f" COLLATE {column.collation}"
    if column.generated is not None:
        sql += f" GENERATED ALWAYS AS ({column.generated}) {_fact(facts, 'generated')}"
    else:
        sql += " NOT NULL" if column.not_null else " NULL"
        if column.default is not None:
            default = column.default
            sql += f" DEFAULT {default if _PLAIN_DEFAULT.match(default) else f'({default})'}"
        if (on_update := _fact(facts, "on_update")) is not None:
            sql += f" ON UPDATE {on_update}"
        if _fact(facts, "auto_increment"):
            sql += " AUTO_INCREMENT"
    if _fact(facts, "invisible"):
        sql += " INVISIBLE"
    if (comment := _fact(facts, "comment")) is not None:
        sql += f" COMMENT {literal(comment)}"
    if (check := _fact(facts, "check")) is not None:
        sql += f" CHECK ({check})"
    return sql


def _table_options(
    options: tuple[tuple[str, str], ...], before: tuple[tuple[str, str], ...] = ()
) -> str:
    """``ENGINE=... COLLATE=...`` for the options that differ from ``before``."""
    parts: list[str] = []
    new, old = dict(options), dict(before)
    for name in sorted(new.keys() | old.keys()):
        if new.get(name) == old.get(name):
            continue
        value = new.get(name)
        if name == "engine" and value:
            parts.append(f"ENGINE={value}")
        elif name == "collation" and value:
            parts.append(f"COLLATE={value}")
        elif name == "comment":
            parts.append(f"COMMENT={literal(value or '')}")
        elif name not in ("engine", "collation"):
            parts.append(f"{name.upper()}={value or 'DEFAULT'}")
    return " ".join(parts)


def _constraint_sql(constraint: Constraint) -> str:
    if constraint.kind == "p":
        return constraint.definition
    return f"CONSTRAINT {ident(constraint.name)} {constraint.definition}"


class _Renderer:
    def __init__(self, desired: Database, live: Database | None) -> None:
        self.desired = desired
        self.live = live

    def __call__(self, change: Change) -> list[Statement]:
        return renderer_for(RENDERERS, change, "MySQL")(self, change)

    def _alter(self, change: Change, action: str) -> list[Statement]:
        return [Statement(f"ALTER TABLE {_table(change.key)} {action}", transactional=False)]

    def _place(self, table_key: str, name: str) -> str:
        table = self.desired.tables.get(table_key)
        names = [c.name for c in table.columns] if table is not None else []
        if name not in names:
            return ""
        position = names.index(name)
        return " FIRST" if position == 0 else f" AFTER {ident(names[position - 1])}"

    # -- tables ----------------------------------------------------------------------------

    def create_table(self, change: Change) -> list[Statement]:
        table = change.new(Table)
        lines = [column_sql(c) for c in table.columns]
        keys = [
            c
            for c in self.desired.constraints.values()
            if c.table == table.key and c.kind in ("p", "c")
        ]
        lines += [_constraint_sql(c) for c in sorted(keys, key=lambda c: c.kind != "p")]
        lines += [i.definition for i in self.desired.indexes.values() if i.table == table.key]
        body = ",\n  ".join(lines)
        options = _table_options(table.options)
        sql = f"CREATE TABLE {_table(table.key)} (\n  {body}\n)" + (
            f" {options}" if options else ""
        )
        if table.partition_key:
            sql += f"\n{table.partition_key}"
        return [Statement(sql, transactional=False)]

    def drop_table(self, change: Change) -> list[Statement]:
        return [Statement(f"DROP TABLE {_table(change.key)}", transactional=False)]

    def alter_table_options(self, change: Change) -> list[Statement]:
        old, new = change.old(Table), change.new(Table)
        return self._alter(change, _table_options(new.options, old.options))

    def repartition(self, change: Change) -> list[Statement]:
        table = change.new(Table)
        return self._alter(change, table.partition_key or "REMOVE PARTITIONING")

    # -- columns ---------------------------------------------------------------------------

    def add_column(self, change: Change) -> list[Statement]:
        column = change.new(Column)
        place = self._place(change.key, column.name)
        action = f"ADD COLUMN {column_sql(column)}{place}"
        return self._alter(change, action + self._auto_key(change.key, column.name))

    def _auto_key(self, table: str, column: str) -> str:
        """``, ADD PRIMARY KEY (...)`` when ``column`` becomes the AUTO_INCREMENT key."""
        if self.live is None or auto_key_added(self.live, self.desired, table) != column:
            return ""
        key = self.desired.constraints[f"constraint:{table[6:]}.PRIMARY"]
        return f", ADD {key.definition}"

    def drop_column(self, change: Change) -> list[Statement]:
        return self._alter(change, f"DROP COLUMN {ident(change.detail)}")

    def modify_column(self, change: Change) -> list[Statement]:
        column = change.new(Column)
        action = f"MODIFY COLUMN {column_sql(column)}"
        if self.live is not None and auto_key_dropped(self.live, self.desired, change.key) == (
            column.name
        ):
            action += ", DROP PRIMARY KEY"
        return self._alter(change, action + self._auto_key(change.key, column.name))

    def move_column(self, change: Change) -> list[Statement]:
        column = change.new(Column)
        place = self._place(change.key, column.name)
        return self._alter(change, f"MODIFY COLUMN {column_sql(column)}{place}")

    # -- keys, constraints and indexes -----------------------------------------------------

    def add_constraint(self, change: Change) -> list[Statement]:
        constraint = change.new(Constraint)
        add = f"ADD {_constraint_sql(constraint)}"
        old = change.before
        if isinstance(old, Constraint):  # a primary key replaced in one statement
            add = f"{self._drop_clause(old)}, {add}"
        return [Statement(f"ALTER TABLE {_table(constraint.table)} {add}", transactional=False)]

    @staticmethod
    def _drop_clause(constraint: Constraint) -> str:
        if constraint.kind == "p":
            return "DROP PRIMARY KEY"
        if constraint.kind == "f":
            return f"DROP FOREIGN KEY {ident(constraint.name)}"
        return f"DROP CONSTRAINT {ident(constraint.name)}"

    def drop_constraint(self, change: Change) -> list[Statement]:
        constraint = change.old(Constraint)
        return [
            Statement(
                f"ALTER TABLE {_table(constraint.table)} {self._drop_clause(constraint)}",
                transactional=False,
            )
        ]

    def create_index(self, change: Change) -> list[Statement]:
        index = change.new(Index)
        old = change.before
        action = f"ADD {index.definition}"
        if isinstance(old, Index):  # replaced in one statement: a foreign key may need it
            action = f"DROP INDEX {ident(index_name(old))}, {action}"
        return [Statement(f"ALTER TABLE {_table(index.table)} {action}", transactional=False)]

    def drop_index(self, change: Change) -> list[Statement]:
        index = change.old(Index)
        # MariaDB drops a foreign key's generated index by itself once another index can
        # serve the key, so a drop after the creates may find it gone.
        maybe = (
            " IF EXISTS"
            if change.phase is Phase.FINISH and self.desired.dialect == "mariadb"
            else ""
        )
        name = ident(index_name(index))
        return [
            Statement(
                f"ALTER TABLE {_table(index.table)} DROP INDEX{maybe} {name}", transactional=False
            )
        ]

    # -- views and triggers ----------------------------------------------------------------

    def create_definition(self, change: Change) -> list[Statement]:
        definition = change.new(Definition)
        return [Statement(definition.create, transactional=False)]

    def replace_definition(self, change: Change) -> list[Statement]:
        definition = change.new(Definition)
        if definition.replace is None:
            raise UnsupportedChange(change, "cannot be replaced in place")
        return [Statement(definition.replace, transactional=False)]

    def drop_definition(self, change: Change) -> list[Statement]:
        definition = change.old(Definition)
        return [Statement(definition.drop, transactional=False)]

    # -- renames (runner/engines/renamed.py): each names the object by its old name ---------

    def rename_table(self, change: Change) -> list[Statement]:
        old, new = change.old(Table), change.new(Table)
        return [Statement(f"RENAME TABLE {ident(old.name)} TO {ident(new.name)}", False)]

    def rename_column(self, change: Change) -> list[Statement]:
        old, new = change.old(Column), change.new(Column)
        return self._alter(change, f"RENAME COLUMN {ident(old.name)} TO {ident(new.name)}")

    def rename_index(self, change: Change) -> list[Statement]:
        old, new = change.old(Index), change.new(Index)
        rename = f"RENAME INDEX {ident(index_name(old))} TO {ident(index_name(new))}"
        return [Statement(f"ALTER TABLE {_table(new.table)} {rename}", transactional=False)]


def _privilege(
    render: Callable[[Change], list[Statement]],
) -> Callable[[_Renderer, Change], list[Statement]]:
    """A privilege op's entry: it needs neither model (see :mod:`.grants`)."""
    return lambda _self, change: render(change)


RENDERERS: dict[str, Callable[[_Renderer, Change], list[Statement]]] = {
    "rename_table": _Renderer.rename_table,
    "rename_column": _Renderer.rename_column,
    "rename_index": _Renderer.rename_index,
    "create_table": _Renderer.create_table,
    "drop_table": _Renderer.drop_table,
    "alter_table_options": _Renderer.alter_table_options,
    "repartition": _Renderer.repartition,
    "add_column": _Renderer.add_column,
    "drop_column": _Renderer.drop_column,
    "alter_column_type": _Renderer.modify_column,
    "set_default": _Renderer.modify_column,
    "drop_default": _Renderer.modify_column,
    "set_not_null": _Renderer.modify_column,
    "drop_not_null": _Renderer.modify_column,
    "alter_column_options": _Renderer.modify_column,
    "move_column": _Renderer.move_column,
    "add_constraint": _Renderer.add_constraint,
    "drop_constraint": _Renderer.drop_constraint,
    "create_index": _Renderer.create_index,
    "drop_index": _Renderer.drop_index,
    "create_definition": _Renderer.create_definition,
    "replace_definition": _Renderer.replace_definition,
    "drop_definition": _Renderer.drop_definition,
    **{op: _privilege(render) for op, render in GRANT_RENDERERS.items()},
}
"""The change-op -> render-method table (one entry per op the MySQL differ emits)."""


def renderer(desired: Database, live: Database | None = None) -> Render:
    """The render function for a plan from ``live`` toward ``desired``."""
    return _Renderer(desired, live)
