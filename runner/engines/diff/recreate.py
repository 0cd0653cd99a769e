"""The recreate closure: what is dropped and created again with a replaced definition (views
over a retyped column, triggers and policies reading it, what depends on those), and the
column defaults and typed columns carried across the drop."""

from __future__ import annotations

import dataclasses
import json

from runner.engines.casts import cast_mode
from runner.engines.changes import Change, Phase
from runner.engines.diff.state import (
    DiffState,
    column_change,
    constraint_differs,
    definition_tables,
    owner_of,
    tables_of,
)

__all__ = ["HELD_MEANWHILE", "RecreateDiffer"]

_RECREATE_ON_COLUMN_CHANGE = ("view", "matview", "policy", "trigger")
HELD_MEANWHILE = ("enum", "domain")  # replaced types whose columns hold another type meanwhile


class RecreateDiffer(DiffState):
    def _closure(self, seeds: set[str]) -> set[str]:
        """Live objects to drop and create again: ``seeds`` and what depends on them."""
        pending = sorted(seeds)
        for table in sorted(self.rewritten_tables):
            pending += [
                d
                for d in sorted(self.dependents[table])
                if d in self.live.definitions
                and self.live.definitions[d].kind in ("view", "matview")
                and self._blocks_rewrite(d, table)
            ]
        for column in sorted(self.rewritten_columns):
            # "cannot alter type of a column used in a policy / trigger definition"
            pending += [
                d
                for d in sorted(self.dependents[column])
                if d in self.live.definitions
                and self.live.definitions[d].kind in _RECREATE_ON_COLUMN_CHANGE
            ]
        for table in sorted(self.dropped_tables & self.new_tables):
            # A replaced table: what is defined on it (triggers, policies) or over it (views,
            # foreign keys of other tables) is dropped before it and created after it.
            pending += sorted(self.dependents[table])
            pending += [k for k in sorted(self.live.definitions) if owner_of(k, self.live) == table]
        closure: set[str] = set()
        while pending:
            key = pending.pop()
            if key in closure:
                continue
            closure.add(key)
            for dependent in sorted(self.dependents[key]):
                if (
                    dependent in self.live.definitions
                    or dependent in self.live.indexes
                    or (dependent in self.live.constraints)
                ):
                    pending.append(dependent)
        return closure

    def _held_meanwhile(self, key: str) -> None:
        """A type that is dropped and created again (an enum losing or reordering a label, a
        domain changing its base type): the columns of that type hold text (an enum) or the
        domain's base type meanwhile, then convert to the new type."""
        definition = self.live.definitions[key]
        holder = "text"
        if definition.kind == "domain":
            holder = str(json.loads(definition.fact("facts") or "{}").get("base", "text"))
        for table, old, new in self._columns_using(key):
            assert new is not None  # listed only with dropped_too
            if old.type.replace('"', "").removesuffix("[]") != key.removeprefix("type:"):
                continue  # the column's default uses the type, not its type
            text = f"{holder}[]" if old.type.endswith("[]") else holder
            held = dataclasses.replace(old, type=text, collation=None, default=None)
            self.add(
                column_change(
                    "alter_column_type",
                    table,
                    Phase.DROP,
                    before=old,
                    after=held,
                    cast="assignment",
                )
            )
            cast = cast_mode(text, new.type, self.live, self.desired)
            self.add(
                column_change(
                    "alter_column_type", table, Phase.CREATE, before=held, after=new, cast=cast
                )
            )

    def _defaults_using(self, key: str) -> None:
        """Column defaults that call ``key`` (dropped and created again) are dropped before
        it and set again after it: the catalog's column-level edges name them."""
        for table, old, new in self._columns_using(key, dropped_too=True):
            if old.default is None or old.identity:
                continue
            self.add(column_change("drop_default", table, Phase.DROP, before=old, after=new))
            if new is not None and new.default is not None:
                self.add(column_change("set_default", table, Phase.CREATE, before=old, after=new))

    def recreated(self) -> None:
        """Emit the drop and create of every object in the recreate closure."""
        for key in sorted(self.recreate):
            if key in self.live.definitions:
                old = self.live.definitions[key]
                owner = owner_of(key, self.live)
                if owner in self.dropped_tables and owner not in self.new_tables:
                    continue
                new = self.desired.definitions.get(key)
                # A dependent rebuilt unchanged says so (its hazard names it).
                rebuilt = "rebuilt" if new is not None and new.definition == old.definition else ""
                if owner not in self.dropped_tables:  # else it goes with its table
                    self.add(
                        Change(
                            "drop_definition",
                            key,
                            Phase.DROP,
                            definition_tables(old),
                            before=old,
                            detail=rebuilt,
                        )
                    )
                self._defaults_using(key)
                if old.kind in HELD_MEANWHILE:
                    self._held_meanwhile(key)
                if new is not None:
                    self.add(
                        Change(
                            "create_definition",
                            key,
                            Phase.CREATE,
                            definition_tables(new),
                            after=new,
                            detail=rebuilt,
                        )
                    )
            elif owner_of(key, self.live) in self.dropped_tables:
                continue  # constraints() and indexes() create those of a replaced table
            elif key in self.live.indexes and key in self.desired.indexes:
                if self.live.indexes[key].definition == self.desired.indexes[key].definition:
                    self.add(Change("drop_index", key, Phase.DROP, before=self.live.indexes[key]))
                    self.add(
                        Change("create_index", key, Phase.CREATE, after=self.desired.indexes[key])
                    )
            elif key in self.live.constraints and key in self.desired.constraints:
                old_c, new_c = self.live.constraints[key], self.desired.constraints[key]
                if not constraint_differs(old_c, new_c):
                    self.add(
                        Change(
                            "drop_constraint",
                            key,
                            Phase.DROP,
                            tables_of(old_c),
                            before=old_c,
                            existing_table=True,
                        )
                    )
                    self.add(
                        Change(
                            "add_constraint",
                            key,
                            Phase.CREATE,
                            tables_of(new_c),
                            after=new_c,
                            existing_table=True,
                            detail=self._partitioned(new_c.table),
                        )
                    )
