"""Sequences: created, dropped, altered, and their owning column (released before a drop
that would take them along)."""

from __future__ import annotations

import dataclasses

from runner.engines.changes import Change, Phase
from runner.engines.diff.state import DiffState

__all__ = ["SequenceDiffer"]


class SequenceDiffer(DiffState):
    def sequences(self) -> None:
        live, desired = self.live.sequences, self.desired.sequences
        for key in sorted(live.keys() - desired.keys()):
            if not self._goes_with_its_column(live[key].owned_by):
                self.add(Change("drop_sequence", key, self._drop_phase(key), before=live[key]))
        for key in sorted(desired.keys() - live.keys()):
            self.add(Change("create_sequence", key, Phase.CREATE, after=desired[key]))
            if desired[key].owned_by:
                self.add(Change("set_sequence_owner", key, Phase.FINISH, after=desired[key]))
        for key in sorted(live.keys() & desired.keys()):
            old, new = live[key], desired[key]
            if (
                old.data_type,
                old.start,
                old.increment,
                old.minimum,
                old.maximum,
                old.cache,
                old.cycle,
            ) != (
                new.data_type,
                new.start,
                new.increment,
                new.minimum,
                new.maximum,
                new.cache,
                new.cycle,
            ):
                self.add(Change("alter_sequence", key, Phase.CREATE, before=old, after=new))
            if old.owned_by != new.owned_by:
                if self._goes_with_its_column(old.owned_by):
                    # Dropping the owner would drop the sequence: it is released first.
                    released = dataclasses.replace(new, owned_by=None)
                    self.add(
                        Change("set_sequence_owner", key, Phase.PREPARE, before=old, after=released)
                    )
                if new.owned_by is not None or not self._goes_with_its_column(old.owned_by):
                    self.add(Change("set_sequence_owner", key, Phase.FINISH, before=old, after=new))

    def _goes_with_its_column(self, owner: str | None) -> bool:
        """Whether a sequence owned by ``owner`` is dropped with its table or column."""
        if owner is None:
            return False
        table_part, _, column = owner.removeprefix("column:").rpartition(".")
        table = f"table:{table_part}"
        if table in self.dropped_tables:
            return True
        return any(
            c.op == "drop_column" and c.key == table and c.detail == column for c in self.changes
        )
