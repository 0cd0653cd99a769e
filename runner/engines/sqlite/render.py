"""Spelling each change as SQLite statements.

Tables, views, triggers are created from the desired schema's own stored text, so the
database ends up with the statements the user wrote. A ``rebuild_table`` change becomes
SQLite's documented procedure (https://sqlite.org/lang_altertable.html, "Making Other
Kinds Of Table Schema Changes"):

1. ``CREATE TABLE "_seshat_new_t" (...)`` from the desired CREATE text;
2. ``INSERT INTO "_seshat_new_t" (...) SELECT ... FROM "t"`` for the columns both have
   (generated columns are computed, not copied);
3. ``DROP TABLE "t"`` (its indexes and triggers go with it);
4. ``ALTER TABLE "_seshat_new_t" RENAME TO "t"``;
5. the table's indexes and triggers, created again.

The apply loop runs with ``foreign_keys=OFF`` and ``legacy_alter_table=ON`` (so views
that name the table survive steps 3 and 4) and checks ``PRAGMA foreign_key_check`` before
it commits. Every statement is transactional: SQLite's DDL is.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.engines.changes import Change, Statement, UnsupportedChange, renderer_for
from runner.engines.model import Column, Definition, Index, Table
from runner.engines.sqlite.sqltext import ident, normalize, parse_create_table, tokens

__all__ = ["REBUILD_PREFIX", "RENDERERS", "render"]

REBUILD_PREFIX = "_seshat_new_"


def _name(key: str) -> str:
    return ident(key.split(":", 1)[1].split(".", 1)[1])


def _sql(table: Table) -> str:
    return dict(table.options)["sql"]


def _create_table(change: Change) -> list[Statement]:
    table = change.new(Table)
    return [Statement(_sql(table))]


def _drop_table(change: Change) -> list[Statement]:
    return [Statement(f"DROP TABLE {_name(change.key)}")]


def _add_column(change: Change) -> list[Statement]:
    column = change.new(Column)
    definition = dict(column.extra).get("def")
    if definition is None:
        raise UnsupportedChange(change, "the column's definition was not read")
    added = _declared_type(definition, column.type)
    return [Statement(f"ALTER TABLE {_name(change.key)} ADD COLUMN {added}")]


def _declared_type(definition: str, declared: str) -> str:
    """The normalized column ``definition`` with its type spelled as it was ``declared``.

    SQLite keeps a column's type as the text it was given, and the normalized definition
    spaces every token (``varchar ( 50 )``): added that way, the column's type would not be
    the desired ``varchar(50)``, and the dry run would refuse the plan as not converged. The
    declared text replaces the type's tokens only where it is those very tokens."""
    pieces = tokens(definition)
    if not pieces or not declared:
        return definition
    name = normalize(pieces[:1])
    spelled = normalize(declared)
    rest = definition[len(name) + 1 :]
    if rest != spelled and not rest.startswith(f"{spelled} "):
        return definition
    return f"{name} {declared}{rest[len(spelled) :]}"


def _drop_column(change: Change) -> list[Statement]:
    return [Statement(f"ALTER TABLE {_name(change.key)} DROP COLUMN {ident(change.detail)}")]


def _create_index(change: Change) -> list[Statement]:
    index = change.new(Index)
    return [Statement(index.definition)]


def _drop_index(change: Change) -> list[Statement]:
    return [Statement(f"DROP INDEX {_name(change.key)}")]


def _create_definition(change: Change) -> list[Statement]:
    definition = change.new(Definition)
    return [Statement(definition.create)]


def _drop_definition(change: Change) -> list[Statement]:
    definition = change.old(Definition)
    return [Statement(definition.drop)]


def _replace_definition(change: Change) -> list[Statement]:
    return _drop_definition(change) + _create_definition(change)


def _rebuild_table(change: Change) -> list[Statement]:
    old, new = change.old(Table), change.new(Table)
    sql = _sql(new)
    text = parse_create_table(sql)
    temporary = ident(REBUILD_PREFIX + new.name)
    name = ident(new.name)
    statements = [Statement(sql[: text.name_start] + temporary + sql[text.name_end + 1 :])]
    before = {c.name.lower(): c for c in old.columns}
    copied = [
        c.name
        for c in new.columns
        if c.generated is None and c.name.lower() in before and before[c.name.lower()]
    ]
    if copied:
        targets = ", ".join(ident(c) for c in copied)
        sources = ", ".join(ident(before[c.lower()].name) for c in copied)
        statements.append(
            Statement(f"INSERT INTO {temporary} ({targets}) SELECT {sources} FROM {name}")
        )
    statements.append(Statement(f"DROP TABLE {name}"))
    statements.append(Statement(f"ALTER TABLE {temporary} RENAME TO {name}"))
    for part in change.parts:
        if part.op == "create_index":
            statements += _create_index(part)
    for part in change.parts:
        if part.op in ("create_definition", "replace_definition"):
            statements += _create_definition(part)
    return statements


def _rename_table(change: Change) -> list[Statement]:
    """A rename that updates what names the table (views, triggers, other tables' foreign
    keys): plans run with ``legacy_alter_table=ON``, under which it would not, leaving them
    naming a table that is gone (and every later ALTER TABLE failing on them)."""
    old, new = change.old(Table), change.new(Table)
    return [
        Statement("PRAGMA legacy_alter_table = OFF"),
        Statement(f"ALTER TABLE {ident(old.name)} RENAME TO {ident(new.name)}"),
        Statement("PRAGMA legacy_alter_table = ON"),
    ]


def _rename_column(change: Change) -> list[Statement]:
    old, new = change.old(Column), change.new(Column)
    rename = f"RENAME COLUMN {ident(old.name)} TO {ident(new.name)}"
    return [Statement(f"ALTER TABLE {_name(change.key)} {rename}")]


RENDERERS: dict[str, Callable[[Change], list[Statement]]] = {
    "rename_table": _rename_table,
    "rename_column": _rename_column,
    "create_table": _create_table,
    "drop_table": _drop_table,
    "add_column": _add_column,
    "drop_column": _drop_column,
    "create_index": _create_index,
    "drop_index": _drop_index,
    "create_definition": _create_definition,
    "drop_definition": _drop_definition,
    "replace_definition": _replace_definition,
    "rebuild_table": _rebuild_table,
}


def render(change: Change) -> list[Statement]:
    """The statements for one change; :class:`UnsupportedChange` if SQLite has none."""
    return renderer_for(RENDERERS, change, "SQLite")(change)
