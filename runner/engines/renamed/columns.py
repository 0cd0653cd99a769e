"""Renamed columns: generated expressions, constraints, indexes, triggers, policies and the
owned sequence of the table follow."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from runner.engines.changes import Change, Phase
from runner.engines.renamed.spelling import rewrite, texts_of
from runner.engines.renamed.view import RenamedView
from runner.engines.renames import Rename

__all__ = ["ColumnRenames"]


class ColumnRenames(RenamedView):
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
            k: texts_of(d, text) if mine(d.table) and self.spelling.deparsed_definitions else d
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
