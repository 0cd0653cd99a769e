"""Renamed indexes, constraints and sequences of a table, by hint or following their table's
or column's rename where the desired schema has the derived name."""

from __future__ import annotations

from dataclasses import replace

from runner.engines.model import (
    Column,
    Database,
    Index,
    Table,
)
from runner.engines.renamed.spelling import parts, rewrite
from runner.engines.renamed.view import RenamedView
from runner.engines.renames import Rename, short_name

__all__ = ["OwnedRenames", "followers"]


class OwnedRenames(RenamedView):
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
        schema = parts(rename.table)[0]
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


def followers(work: RenamedView, desired: Database) -> list[Rename]:
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
        name = parts(table)[1]
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
        return f"sequence:{parts(table)[0]}.{name}" in db.sequences
    if kind == "index":
        return any(
            i.table == table and short_name(i.name, table).lower() == name.lower()
            for i in db.indexes.values()
        )
    return any(c.table == table and c.name == name for c in db.constraints.values())
