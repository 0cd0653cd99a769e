"""Renamed types and enum labels: every definition, column type and default naming them
follows."""

from __future__ import annotations

import json
from dataclasses import replace

from runner.engines.changes import Change, Phase
from runner.engines.model import (
    Definition,
)
from runner.engines.renamed.spelling import parts
from runner.engines.renamed.view import RenamedView
from runner.engines.renames import Rename

__all__ = ["TypeRenames"]


class TypeRenames(RenamedView):
    def type(self, rename: Rename) -> None:
        old = self.db.definitions.get(rename.old)
        if old is None or rename.new in self.db.definitions:
            return
        new_name = parts(rename.new)[1]
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
        schema, name = parts(rename.table)
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
