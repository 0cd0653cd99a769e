"""The live model as it will be once the desired schema's renames ran, and the renames.

The differ compares by name, so a renamed column would be a drop and an add (its rows
lost). Before diffing, :func:`renamed` applies each :class:`~runner.engines.renames.Rename`
whose old object exists in the live model (and whose new one does not) to a copy of that
model, and returns one rename change for each: the differ then compares the renamed copy
with the desired model and finds only what the renamed objects still need (a type change
after a column rename). A hint whose old object is gone (the rename already ran) does
nothing, so the next plan is empty.

References to a renamed object inside server-rendered text (an index definition naming its
table and columns, a column typed by a renamed enum) are rewritten token by token. A
rewrite that misses a spelling costs a needless drop and create of that index or constraint,
never a wrong plan: the dry run checks what the statements reach.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

from runner.engines.changes import Change, Phase
from runner.engines.model import (
    Column,
    Comment,
    Constraint,
    Database,
    Definition,
    Index,
    Sequence,
    Table,
)
from runner.engines.renames import Rename, Renames, lex, short_name

__all__ = ["Renamed", "Spelling", "renamed", "rewrite"]

_VIEWS = frozenset({"view", "matview"})
"""Definitions PostgreSQL keeps parsed (by oid), so a table rename carries them along."""


@dataclass(frozen=True, slots=True)
class Spelling:
    """What a dialect can rename, and how its server spells names in definitions."""

    quote: Callable[[str], str]
    qualified_references: bool = True
    """PostgreSQL prints every table and type reference schema-qualified (``public.t``);
    MySQL and SQLite print them bare."""
    deparsed_definitions: bool = True
    """PostgreSQL prints a trigger's or policy's text from its catalog, so after a rename it
    names the new table and columns; MySQL and SQLite keep the text as written (it is
    replaced from the desired schema instead of predicted)."""
    literal: Callable[[str], str] = lambda text: "'" + text.replace("'", "''") + "'"
    """A string literal, as the server prints an enum label."""
    index_names_per_table: bool = False
    """MySQL's model names an index ``<table>.<name>``: a table rename renames its keys."""
    kinds: frozenset[str] = frozenset(
        {"table", "column", "index", "constraint", "type", "enum_value", "sequence"}
    )
    """The renames the dialect can express (SQLite renames no index: it drops and creates)."""


@dataclass(frozen=True, slots=True)
class Renamed:
    """The live model with the renames applied (``view``), and the rename ``changes``."""

    view: Database
    changes: tuple[Change, ...] = ()


def rewrite(
    text: str,
    old: tuple[str, ...],
    new: str,
    quote: Callable[[str], str],
    *,
    first: bool = False,
) -> str:
    """``text`` with each reference to the dotted name ``old`` (identifier tokens, quoted
    or not, outside strings and comments) renamed to ``new`` (its last part); with
    ``first``, only the first (an index definition's own name, not a column of that name)."""
    if old[-1] not in text and old[-1].lower() not in text.lower():
        return text
    code = [t for t in lex(text) if t.kind != "comment"]
    edits: list[tuple[int, int]] = []
    width = 2 * len(old) - 1
    for i in range(len(code) - width + 1):
        if i > 0 and code[i - 1].text == "." and len(old) == 1:
            continue
        window = code[i : i + width]
        names = [t.ident for t in window[::2]]
        dots = all(t.text == "." for t in window[1::2])
        if dots and all(n is not None and _same(n, o) for n, o in zip(names, old, strict=True)):
            last = window[-1]
            edits.append((last.start, last.end))
            if first:
                break
    for start, end in reversed(edits):
        text = text[:start] + quote(new) + text[end:]
    return text


def _same(ident: tuple[str, bool], name: str) -> bool:
    text, quoted = ident
    return text == name if quoted else text.lower() == name.lower()


def _parts(key: str) -> tuple[str, str]:
    """(schema, name) of a ``prefix:schema.name`` key."""
    schema, name = key.split(":", 1)[1].split(".", 1)
    return schema, name


class _Renaming:
    def __init__(self, live: Database, spelling: Spelling) -> None:
        self.db = live
        self.spelling = spelling
        self.moved: dict[str, str] = {}  # old key -> new key
        self.changes: list[Change] = []

    def refs(self, text: str, key: str, new: str) -> str:
        """``text`` with references to the table or type ``key`` renamed to ``new``."""
        schema, name = _parts(key)
        text = rewrite(text, (schema, name), new, self.spelling.quote)
        if not self.spelling.qualified_references:
            text = rewrite(text, (name,), new, self.spelling.quote)
        return text

    def edit(self, **sections: object) -> None:
        self.db = replace(self.db, **sections)  # type: ignore[arg-type]

    # -- types -------------------------------------------------------------------------

    def type(self, rename: Rename) -> None:
        old = self.db.definitions.get(rename.old)
        if old is None or rename.new in self.db.definitions:
            return
        new_name = _parts(rename.new)[1]
        live_depends = self.db.depends

        def text(value: str) -> str:
            return self.refs(value, rename.old, new_name)

        definitions: dict[str, Definition] = {}
        for key, d in self.db.definitions.items():
            key = rename.new if key == rename.old else text(key)
            definitions[key] = replace(
                d,
                key=key,
                create=text(d.create),
                drop=text(d.drop),
                definition=text(d.definition),
                replace=text(d.replace) if d.replace is not None else None,
            )
            if key != d.key:
                self.moved[d.key] = key
        tables = {
            k: replace(
                t,
                columns=tuple(
                    replace(
                        c,
                        type=text(c.type),
                        default=text(c.default) if c.default is not None else None,
                    )
                    for c in t.columns
                ),
            )
            for k, t in self.db.tables.items()
        }
        self.edit(definitions=definitions, tables=tables)
        self._texts(lambda _owner: True, text)
        # The tables whose columns use the type are touched: a protected one refuses the
        # rename, and the dry run rebuilds them.
        users = sorted({a for a, b in live_depends if b == rename.old and a.startswith("table:")})
        self.changes.append(
            Change(
                "rename_type",
                rename.new,
                Phase.PREPARE,
                tuple(users),
                before=old,
                after=definitions[rename.new],
            )
        )

    def enum_value(self, rename: Rename) -> None:
        old = self.db.definitions.get(rename.table)
        labels = json.loads(old.fact("labels") or "[]") if old is not None else []
        if old is None or rename.old not in labels or rename.new in labels:
            return
        after = [rename.new if label == rename.old else label for label in labels]
        facts = tuple((k, json.dumps(after) if k == "labels" else v) for k, v in old.extra)
        literal = self.spelling.literal
        head = old.create[: old.create.index("AS ENUM (")]
        create = f"{head}AS ENUM ({', '.join(literal(label) for label in after)})"
        new = replace(old, create=create, definition=json.dumps(after), extra=facts)
        self.edit(definitions={**self.db.definitions, rename.table: new})
        # A default holding the label is printed with the label's new text.
        schema, name = _parts(rename.table)
        typed = f"::{self.spelling.quote(schema)}.{self.spelling.quote(name)}"
        self.edit(tables=self._defaults(literal(rename.old) + typed, literal(rename.new) + typed))
        self.changes.append(
            Change(
                "rename_enum_value",
                rename.table,
                Phase.PREPARE,
                before=old,
                after=new,
                detail=rename.new,
            )
        )

    # -- tables ------------------------------------------------------------------------

    def table(self, rename: Rename) -> None:
        old = self.db.tables.get(rename.old)
        if old is None or rename.new in self.db.tables:
            return
        schema, name = _parts(rename.new)
        if schema != old.schema:
            return  # a rename cannot move a table to another schema
        new_table = replace(old, name=name)
        tables = {rename.new if k == rename.old else k: t for k, t in self.db.tables.items()}
        tables[rename.new] = new_table
        self.edit(tables=dict(sorted(tables.items())))
        self.moved[rename.old] = rename.new

        def text(value: str) -> str:
            return self.refs(value, rename.old, name)

        def move(table: str | None) -> str | None:
            return rename.new if table == rename.old else table

        constraints = {}
        for c in self.db.constraints.values():
            moved = replace(
                c,
                table=move(c.table) or c.table,
                references=move(c.references),
                definition=text(c.definition),
            )
            self._moved(c.key, moved.key)
            constraints[moved.key] = moved
        indexes = {}
        for i in self.db.indexes.values():
            index_name = i.name
            if self.spelling.index_names_per_table and i.table == rename.old:
                index_name = f"{name}.{short_name(i.name, rename.old)}"
            moved_index = replace(
                i, name=index_name, table=move(i.table) or i.table, definition=text(i.definition)
            )
            self._moved(i.key, moved_index.key)
            indexes[moved_index.key] = moved_index
        definitions = {}
        old_prefix = f"{old.schema}.{old.name}."
        # A view's text names the table as the server deparses it now: qualified, and its
        # columns by the table's current name (``accounts.id``), unless the query gave an alias.
        readers = {a for a, b in self.db.depends if b == rename.old}

        def view_text(value: str) -> str:
            return rewrite(text(value), (old.name,), name, self.spelling.quote)

        for d in self.db.definitions.values():
            key = d.key
            kind, rest = key.split(":", 1)
            if d.table == rename.old and rest.startswith(old_prefix):
                key = f"{kind}:{schema}.{name}.{rest[len(old_prefix) :]}"
            self._moved(d.key, key)
            moved_definition = replace(d, key=key, table=move(d.table))
            if self.spelling.deparsed_definitions:
                if d.table == rename.old:
                    moved_definition = _texts_of(moved_definition, text)
                elif d.kind in _VIEWS and d.key in readers:
                    moved_definition = _texts_of(moved_definition, view_text)
            definitions[key] = moved_definition
        sequences = {
            k: replace(s, owned_by=self._column_owner(s.owned_by, rename.old, rename.new))
            for k, s in self.db.sequences.items()
        }
        self.edit(
            constraints=dict(sorted(constraints.items())),
            indexes=dict(sorted(indexes.items())),
            definitions=dict(sorted(definitions.items())),
            sequences=sequences,
        )
        self.changes.append(
            Change(
                "rename_table",
                rename.new,
                Phase.PREPARE,
                (rename.old, rename.new),
                before=old,
                after=new_table,
                existing_table=True,
            )
        )

    @staticmethod
    def _column_owner(owner: str | None, old: str, new: str) -> str | None:
        prefix = "column:" + old.removeprefix("table:") + "."
        if owner is not None and owner.startswith(prefix):
            return "column:" + new.removeprefix("table:") + "." + owner[len(prefix) :]
        return owner

    def _moved(self, old: str, new: str) -> None:
        if old != new:
            self.moved[old] = new

    def _defaults(self, before: str, after: str) -> dict[str, Table]:
        """The tables with ``before`` replaced by ``after`` in their column defaults (a
        literal the server prints there, which no token rewrite sees)."""
        return {
            k: replace(
                t,
                columns=tuple(
                    replace(c, default=c.default.replace(before, after))
                    if c.default is not None and before in c.default
                    else c
                    for c in t.columns
                ),
            )
            for k, t in self.db.tables.items()
        }

    def _renamed_in(self, op: str, key: str, table: str, before: object, after: object) -> None:
        """The rename change of an object of ``table`` (an index, constraint, sequence)."""
        self.changes.append(
            Change(
                op,
                key,
                Phase.PREPARE,
                (table,),
                before=before,
                after=after,
                existing_table=True,
            )
        )

    # -- columns -------------------------------------------------------------------------

    def column(self, rename: Rename) -> None:
        table = self.db.tables.get(rename.table)
        if table is None:
            return
        old = table.column(rename.old)
        if old is None or table.column(rename.new) is not None:
            return

        def text(value: str) -> str:
            return rewrite(value, (rename.old,), rename.new, self.spelling.quote)

        # A dialect fact may be the column's written definition (SQLite's ``def``), which
        # starts with its name.
        facts = tuple(
            (k, rewrite(v, (rename.old,), rename.new, self.spelling.quote, first=True))
            for k, v in old.extra
        )
        new_column = replace(old, name=rename.new, extra=facts)

        columns = tuple(
            new_column
            if c.name == rename.old
            else replace(c, generated=text(c.generated) if c.generated else c.generated)
            for c in table.columns
        )
        tables = dict(self.db.tables)
        tables[rename.table] = replace(table, columns=columns)
        mine: Callable[[str | None], bool] = lambda owner: owner == rename.table  # noqa: E731
        constraints = {
            k: replace(
                c,
                definition=text(c.definition),
                columns=tuple(rename.new if n == rename.old else n for n in c.columns),
            )
            if mine(c.table)
            else c
            for k, c in self.db.constraints.items()
        }
        indexes = {
            k: replace(i, definition=text(i.definition)) if mine(i.table) else i
            for k, i in self.db.indexes.items()
        }
        # A trigger's or policy's text names the table's columns (views keep their own
        # output names, so they are replaced rather than predicted).
        definitions = {
            k: _texts_of(d, text) if mine(d.table) and self.spelling.deparsed_definitions else d
            for k, d in self.db.definitions.items()
        }
        self.edit(definitions=definitions)
        column_key = f"column:{rename.table.removeprefix('table:')}."
        sequences = {
            k: replace(
                s,
                owned_by=column_key + rename.new
                if s.owned_by == column_key + rename.old
                else s.owned_by,
            )
            for k, s in self.db.sequences.items()
        }
        self.edit(tables=tables, constraints=constraints, indexes=indexes, sequences=sequences)
        self.moved[column_key + rename.old] = column_key + rename.new
        self.changes.append(
            Change(
                "rename_column",
                rename.table,
                Phase.PREPARE,
                (rename.table,),
                before=old,
                after=new_column,
                detail=rename.new,
                existing_table=True,
            )
        )

    # -- indexes and constraints -------------------------------------------------------

    def index(self, rename: Rename) -> None:
        found = self._index(rename.table, rename.old)
        if found is None or self._index(rename.table, rename.new) is not None:
            return
        name = rename.new
        if self.spelling.index_names_per_table:
            own = short_name(found.name, rename.table)
            name = found.name[: len(found.name) - len(own)] + rename.new.lower()
        moved = replace(
            found,
            name=name,
            definition=rewrite(
                found.definition, (rename.old,), rename.new, self.spelling.quote, first=True
            ),
        )
        indexes = {k: i for k, i in self.db.indexes.items() if k != found.key}
        indexes[moved.key] = moved
        self.edit(indexes=dict(sorted(indexes.items())))
        self._moved(found.key, moved.key)
        self._renamed_in("rename_index", moved.key, rename.table, found, moved)

    def _index(self, table: str, name: str) -> Index | None:
        return next(
            (
                i
                for i in self.db.indexes.values()
                if i.table == table and short_name(i.name, table).lower() == name.lower()
            ),
            None,
        )

    def constraint(self, rename: Rename) -> None:
        found = next(
            (
                c
                for c in self.db.constraints.values()
                if c.table == rename.table and c.name == rename.old
            ),
            None,
        )
        if found is None or any(
            c.table == rename.table and c.name == rename.new for c in self.db.constraints.values()
        ):
            return
        moved = replace(found, name=rename.new)
        constraints = {k: c for k, c in self.db.constraints.items() if k != found.key}
        constraints[moved.key] = moved
        self.edit(constraints=dict(sorted(constraints.items())))
        self.moved[found.key] = moved.key
        self._renamed_in("rename_constraint", moved.key, rename.table, found, moved)

    def sequence(self, rename: Rename) -> None:
        schema = _parts(rename.table)[0]
        old_key, new_key = f"sequence:{schema}.{rename.old}", f"sequence:{schema}.{rename.new}"
        found = self.db.sequences.get(old_key)
        if found is None or new_key in self.db.sequences:
            return
        moved = replace(found, name=rename.new)
        sequences = {k: q for k, q in self.db.sequences.items() if k != old_key}
        sequences[new_key] = moved
        # A default reads the sequence through a regclass literal, which no token rewrite sees.
        quote = self.spelling.quote
        before = f"'{quote(schema)}.{quote(rename.old)}'::regclass"
        after = f"'{quote(schema)}.{quote(rename.new)}'::regclass"
        self.edit(sequences=dict(sorted(sequences.items())), tables=self._defaults(before, after))
        self.moved[old_key] = new_key
        self._renamed_in("rename_sequence", new_key, rename.table, found, moved)

    # -- what refers to moved keys ------------------------------------------------------

    def _texts(self, owned: Callable[[str | None], bool], text: Callable[[str], str]) -> None:
        """Constraint and index definitions rewritten with ``text``."""
        self.edit(
            constraints={
                k: replace(c, definition=text(c.definition)) if owned(c.table) else c
                for k, c in self.db.constraints.items()
            },
            indexes={
                k: replace(i, definition=text(i.definition)) if owned(i.table) else i
                for k, i in self.db.indexes.items()
            },
        )

    def finish(self) -> Database:
        """The view with comments and dependency edges following the moved keys."""

        tables = {
            f"column:{old.removeprefix('table:')}.": f"column:{new.removeprefix('table:')}."
            for old, new in self.moved.items()
            if old.startswith("table:")
        }

        def key(value: str) -> str:
            for old, new in tables.items():
                if value.startswith(old):
                    value = new + value[len(old) :]
            return self.moved.get(value, value)

        comments: dict[str, Comment] = {}
        for c in self.db.comments.values():
            on = key(c.on)
            moved = replace(c, on=on, target=self._target(c.target) if on != c.on else c.target)
            comments[moved.key] = moved
        return replace(
            self.db,
            comments=dict(sorted(comments.items())),
            depends=frozenset((key(a), key(b)) for a, b in self.db.depends),
        )

    def _target(self, target: str) -> str:
        """A comment's ``COMMENT ON`` target with renamed names in it."""
        for change in self.changes:
            before, after = change.before, change.after
            if isinstance(before, Table) and isinstance(after, Table):
                target = self.refs(target, before.key, after.name)
            elif isinstance(before, Column | Sequence) and isinstance(after, Column | Sequence):
                target = rewrite(target, (before.name,), after.name, self.spelling.quote)
            elif isinstance(before, Index | Constraint) and isinstance(after, Index | Constraint):
                old_name = short_name(before.name, before.table)
                new_name = short_name(after.name, after.table)
                target = rewrite(target, (old_name,), new_name, self.spelling.quote)
            elif isinstance(before, Definition) and isinstance(after, Definition):
                target = self.refs(target, before.key, _parts(after.key)[1])
        return target


def _texts_of(definition: Definition, text: Callable[[str], str]) -> Definition:
    """``definition`` with ``text`` applied to its SQL (not to its key)."""
    return replace(
        definition,
        create=text(definition.create),
        drop=text(definition.drop),
        definition=text(definition.definition),
        replace=text(definition.replace) if definition.replace is not None else None,
    )


def _followers(work: _Renaming, desired: Database) -> list[Rename]:
    """Renames the renamed tables and columns imply: an index, constraint or sequence named
    after them (``old_t_pkey``, ``old_t_id_seq``, ``t_old_col_key``) whose derived new
    name the desired schema has, while it lacks the old one."""
    tables: dict[str, tuple[str, str]] = {}  # new table key -> (old name, new name)
    columns: dict[str, list[tuple[str, str]]] = {}
    for change in work.changes:
        if change.op == "rename_table":
            tables[change.key] = (change.old(Table).name, change.new(Table).name)
        elif change.op == "rename_column":
            columns.setdefault(change.key, []).append(
                (change.old(Column).name, change.new(Column).name)
            )
    found: list[Rename] = []
    for table in sorted(tables.keys() | columns.keys()):
        name = _parts(table)[1]
        old_table, _ = tables.get(table, (name, name))

        def follow(
            own: str, table: str = table, name: str = name, old_table: str = old_table
        ) -> str:
            if own.startswith(old_table + "_"):
                own = f"{name}_{own[len(old_table) + 1 :]}"
            for old, new in columns.get(table, []):
                if own.startswith(f"{name}_{old}_"):
                    own = f"{name}_{new}_{own[len(name) + len(old) + 2 :]}"
            return own

        for kind, own in _owned(work.db, table):
            new = follow(own)
            if (
                new != own
                and _has(desired, kind, table, new)
                and not _has(desired, kind, table, own)
            ):
                found.append(Rename(kind, table, new, own, ""))
    return found


def _owned(db: Database, table: str) -> list[tuple[str, str]]:
    """(kind, own name) of the indexes, constraints and owned sequences of ``table``."""
    column = "column:" + table.removeprefix("table:") + "."
    return sorted(
        [("index", short_name(i.name, table)) for i in db.indexes.values() if i.table == table]
        + [("constraint", c.name) for c in db.constraints.values() if c.table == table]
        + [
            ("sequence", s.name)
            for s in db.sequences.values()
            if s.owned_by is not None and s.owned_by.startswith(column)
        ]
    )


def _has(db: Database, kind: str, table: str, name: str) -> bool:
    if kind == "sequence":
        return f"sequence:{_parts(table)[0]}.{name}" in db.sequences
    if kind == "index":
        return any(
            i.table == table and short_name(i.name, table).lower() == name.lower()
            for i in db.indexes.values()
        )
    return any(c.table == table and c.name == name for c in db.constraints.values())


def renamed(
    live: Database, renames: Renames, spelling: Spelling, desired: Database | None = None
) -> Renamed:
    """``live`` as the renames leave it, and the rename changes (see the module docstring).

    With ``desired``, what is named after a renamed table or column follows it where the
    desired schema has the derived name (:func:`_followers`): a table's serial sequence
    and its primary key keep their rows and their dependents too."""
    if not renames.items:
        return Renamed(live)
    work = _Renaming(live, spelling)
    steps: dict[str, Callable[[Rename], None]] = {
        "type": work.type,
        "enum_value": work.enum_value,
        "table": work.table,
        "column": work.column,
        "index": work.index,
        "constraint": work.constraint,
        "sequence": work.sequence,
    }
    for kind in ("type", "enum_value", "table", "column", "index", "constraint"):
        if kind in spelling.kinds:
            for rename in renames.of(kind):
                steps[kind](rename)
    if desired is not None:
        for rename in _followers(work, desired):
            if rename.kind in spelling.kinds:
                steps[rename.kind](rename)
    if not work.changes:
        return Renamed(live)
    return Renamed(work.finish(), tuple(work.changes))
