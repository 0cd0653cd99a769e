"""Whole definitions (views, functions, types, triggers, policies, ...): created, dropped,
altered in place where the dialect can, else replaced with everything that depends on them
(the recreate closure, :mod:`runner.engines.diff.recreate`)."""

from __future__ import annotations

import json

from runner.engines.changes import Change, Phase
from runner.engines.diff.recreate import HELD_MEANWHILE, RecreateDiffer
from runner.engines.diff.state import definition_tables, owner_of
from runner.engines.model import Definition

__all__ = ["DefinitionDiffer"]


class DefinitionDiffer(RecreateDiffer):
    def definitions(self) -> None:
        live, desired = self.live.definitions, self.desired.definitions
        replaced: set[str] = set()
        in_place: list[tuple[str, Definition, Definition]] = []
        going = self._going()
        for key in sorted(live.keys() & desired.keys()):
            old, new = live[key], desired[key]
            if old.definition == new.definition:
                continue
            if _alterable(old, new) and not self.uses[key] & going:
                in_place.append((key, old, new))
            else:  # also when its live version uses what the DROP phase removes
                replaced.add(key)
        for key in sorted(replaced):
            if live[key].kind in HELD_MEANWHILE:  # its columns change type twice
                for table, column, _ in self._columns_using(key):
                    self._rewrite(table, column.name)
        self.recreate = self._closure(replaced)
        for key, old, new in in_place:
            if key in self.recreate:
                continue  # dropped and created again anyway
            if old.kind == "enum":
                self.add(Change("add_enum_values", key, Phase.PREPARE, before=old, after=new))
            elif old.kind == "domain":
                self.add(Change("alter_domain", key, Phase.CREATE, before=old, after=new))
            elif old.kind == "extension":
                self.add(Change("alter_extension", key, Phase.CREATE, before=old, after=new))
            else:
                self.add(Change("replace_definition", key, Phase.CREATE, before=old, after=new))
        for key in sorted(live.keys() - desired.keys()):
            old = live[key]
            if old.kind == "schema" or owner_of(key, self.live) in self.dropped_tables:
                continue
            phase = self._drop_phase(key)
            self.add(Change("drop_definition", key, phase, definition_tables(old), before=old))
        for key in sorted(desired.keys() - live.keys()):
            self.add(
                Change(
                    "create_definition",
                    key,
                    Phase.CREATE,
                    definition_tables(desired[key]),
                    after=desired[key],
                )
            )

    def _going(self) -> set[str]:
        """Live objects the plan removes for good: tables, columns, definitions, sequences."""
        going = set(self.dropped_tables - self.new_tables)
        going |= {
            f"column:{c.key.removeprefix('table:')}.{c.detail}"
            for c in self.changes
            if c.op == "drop_column"
        }
        going |= self.live.definitions.keys() - self.desired.definitions.keys()
        going |= self.live.sequences.keys() - self.desired.sequences.keys()
        return going


def _alterable(old: Definition, new: Definition) -> bool:
    """Whether ``old`` can become ``new`` without being dropped."""
    if old.kind == "enum":
        return _labels_appended(old, new)
    if old.kind == "domain":
        return _same_domain_base(old, new)
    if old.kind == "extension":
        return True
    if old.kind == "function":
        return old.fact("result") == new.fact("result") and (
            old.fact("arguments") == new.fact("arguments")
        )
    return old.kind == "view" and _columns_extended(old, new)


def _labels_appended(old: Definition, new: Definition) -> bool:
    """New enum labels only inserted, none removed or reordered: ``ADD VALUE`` can do it."""
    before = json.loads(old.fact("labels") or "[]")
    after = json.loads(new.fact("labels") or "[]")
    remaining = iter(after)
    return all(label in remaining for label in before)


def _same_domain_base(old: Definition, new: Definition) -> bool:
    a = json.loads(old.fact("facts") or "{}")
    b = json.loads(new.fact("facts") or "{}")
    return bool(a.get("base") == b.get("base") and a.get("collation") == b.get("collation"))


def _columns_extended(old: Definition, new: Definition) -> bool:
    before, after = old.fact("columns") or "", new.fact("columns") or ""
    return after == before or (bool(before) and after.startswith(before + ", "))
