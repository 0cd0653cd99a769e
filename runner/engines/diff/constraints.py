"""Constraints and indexes: changed ones dropped and created again, those of a dropped
table left to go with it."""

from __future__ import annotations

from runner.engines.changes import Change, Phase
from runner.engines.diff.state import DiffState, constraint_differs, tables_of

__all__ = ["ConstraintDiffer"]


class ConstraintDiffer(DiffState):
    def constraints(self) -> None:
        live, desired = self.live.constraints, self.desired.constraints
        for key in sorted(live.keys() | desired.keys()):
            old, new = live.get(key), desired.get(key)
            # A foreign key between two dropped tables goes first, so the tables can go in
            # any order; other sub-objects of a dropped table go with it.
            if old is not None and (
                (
                    old.table not in self.dropped_tables
                    and (new is None or constraint_differs(old, new))
                )
                or (
                    old.kind == "f"
                    and old.references not in (None, old.table)
                    and old.table in self.dropped_tables
                    and old.references in self.dropped_tables
                )
            ):
                self.add(
                    Change(
                        "drop_constraint",
                        key,
                        Phase.DROP,
                        tables_of(old),
                        before=old,
                        existing_table=True,
                    )
                )
            if new is not None and (
                old is None or constraint_differs(old, new) or old.table in self.dropped_tables
            ):
                self.add(
                    Change(
                        "add_constraint",
                        key,
                        Phase.CREATE,
                        tables_of(new),
                        after=new,
                        existing_table=self.existing(new.table)
                        and new.table not in self.new_tables,
                        detail=self._partitioned(new.table),
                    )
                )

    def indexes(self) -> None:
        live, desired = self.live.indexes, self.desired.indexes
        for key in sorted(live.keys() | desired.keys()):
            old, new = live.get(key), desired.get(key)
            # An invalid index (a CREATE INDEX CONCURRENTLY that did not finish) is rebuilt.
            changed = old is not None and (
                new is None or old.definition != new.definition or not old.valid
            )
            if old is not None and changed and old.table not in self.dropped_tables:
                # Dropped without blocking writes, unless on a partitioned table (where
                # PostgreSQL cannot drop concurrently).
                table = self.live.tables.get(old.table)
                on_partitioned = table is not None and table.partition_key is not None
                detail = "" if old.valid or on_partitioned else "invalid"
                self.add(
                    Change("drop_index", key, Phase.DROP, (old.table,), before=old, detail=detail)
                )
            if new is not None and (old is None or changed or old.table in self.dropped_tables):
                existing = new.table in self.live.tables and new.table not in self.new_tables
                self.add(
                    Change(
                        "create_index",
                        key,
                        Phase.CREATE,
                        (new.table,),
                        after=new,
                        existing_table=existing,
                        detail=self._partitioned(new.table),
                    )
                )
