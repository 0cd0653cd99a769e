"""Renamed tables: their constraints, indexes, triggers, policies, the views reading them and
their owned sequences follow."""

from __future__ import annotations

from dataclasses import replace

from runner.engines.changes import Change, Phase
from runner.engines.renamed.spelling import parts, rewrite, texts_of
from runner.engines.renamed.view import RenamedView
from runner.engines.renames import Rename, short_name

__all__ = ["TableRenames"]

_VIEWS = frozenset({"view", "matview"})
"""Definitions PostgreSQL keeps parsed (by oid), so a table rename carries them along."""


class TableRenames(RenamedView):
    def table(self, rename: Rename) -> None:
        old = self.db.tables.get(rename.old)
        if old is None or rename.new in self.db.tables:
            return
        schema, name = parts(rename.new)
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
                    moved_definition = texts_of(moved_definition, text)
                elif d.kind in _VIEWS and d.key in readers:
                    moved_definition = texts_of(moved_definition, view_text)
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
