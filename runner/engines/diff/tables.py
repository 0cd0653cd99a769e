"""Tables: created, dropped, replaced (partitioning that cannot be altered), moved between
partitioned parents, their inheritance, options, row security and replica identity."""

from __future__ import annotations

import dataclasses

from runner.engines.changes import Change, Phase
from runner.engines.diff.columns import ColumnDiffer
from runner.engines.diff.state import column_change
from runner.engines.model import Column, Database, Table

__all__ = ["TableDiffer"]


class TableDiffer(ColumnDiffer):
    def tables(self) -> None:
        for key in sorted(self.dropped_tables):
            self.add(Change("drop_table", key, Phase.DROP, (key,), before=self.live.tables[key]))
        for key in sorted(self.new_tables):
            self.add(
                Change("create_table", key, Phase.CREATE, (key,), after=self.desired.tables[key])
            )
            if _replica_identity(self.desired.tables[key]):
                self._set_replica_identity(self.desired.tables[key])
        for key in sorted(self.live.tables.keys() & self.desired.tables.keys()):
            self.table(self.live.tables[key], self.desired.tables[key])
        self._replace_partitions()
        self._rewrite_partitions()

    def _rewrite_partitions(self) -> None:
        """A partitioned table's column change reaches its partitions' columns (and the views
        over a partition that read them)."""
        pending = sorted(self.rewritten_columns)
        while pending:
            table_part, _, name = pending.pop().removeprefix("column:").rpartition(".")
            for key, table in sorted(self.live.tables.items()):
                column = f"column:{key.removeprefix('table:')}.{name}"
                if table.partition_of == f"table:{table_part}" and (
                    column not in self.rewritten_columns
                ):
                    self._rewrite(key, name)
                    pending.append(column)

    def _replace_partitions(self) -> None:
        """A replaced partitioned table takes its partitions with it: they are created again."""
        pending = sorted(self.dropped_tables & self.new_tables)
        while pending:
            parent = pending.pop()
            for key in sorted(self.live.tables.keys() & self.desired.tables.keys()):
                if self.live.tables[key].partition_of == parent and key not in self.new_tables:
                    old, new = self.live.tables[key], self.desired.tables[key]
                    # Replaced, not altered: what table() planned for it is moot.
                    self.changes = [c for c in self.changes if c.key != key]
                    self.add(Change("drop_table", key, Phase.DROP, (key,), before=old))
                    self.add(Change("create_table", key, Phase.CREATE, (key,), after=new))
                    self.dropped_tables.add(key)
                    self.new_tables.add(key)
                    pending.append(key)

    def table(self, old: Table, new: Table) -> None:
        key = old.key
        moved = (old.partition_of, old.partition_bound) != (new.partition_of, new.partition_bound)
        if old.partition_key != new.partition_key or (moved and not self._postgresql):
            # A table's own partitioning cannot be altered in place: the table is replaced.
            self.add(Change("drop_table", key, Phase.DROP, (key,), before=old))
            self.add(Change("create_table", key, Phase.CREATE, (key,), after=new))
            self.dropped_tables.add(key)
            self.new_tables.add(key)
            return
        if moved:
            old, new = self._move_partition(old, new)
        old_columns = {c.name: c for c in old.columns}
        new_columns = {c.name: c for c in new.columns}
        inherited = self._from_parents(old, new)
        self._inherited_in_order(old, new)
        for name in sorted(old_columns.keys() - new_columns.keys()):
            self._rewrite(key, name)
            if name not in inherited:
                self.add(column_change("drop_column", key, Phase.DROP, before=old_columns[name]))
        for position, column in enumerate(new.columns):
            if column.name not in old_columns and column.name not in inherited:
                # New columns are added in their desired order (``position``), not by name.
                self.add(
                    column_change("add_column", key, Phase.CREATE, after=column, position=position)
                )
        regenerated = self._kept_in_order(
            old, new, self._regenerated(key, old_columns, new_columns)
        )
        positions = {c.name: i for i, c in enumerate(new.columns)}
        for name in sorted(old_columns.keys() & new_columns.keys()):
            self.column(
                key,
                old_columns[name],
                new_columns[name],
                replace=name in regenerated,
                position=positions[name],
                inherited=name in inherited,
            )
        if old.unlogged != new.unlogged:
            self.add(Change("set_logged", key, Phase.CREATE, (key,), before=old, after=new))
        if (old.row_security, old.force_row_security) != (new.row_security, new.force_row_security):
            self.add(Change("set_row_security", key, Phase.CREATE, (key,), before=old, after=new))
        if _options(old) != _options(new):
            self.add(
                Change("alter_table_options", key, Phase.CREATE, (key,), before=old, after=new)
            )
        if _replica_identity(old) != _replica_identity(new):
            self._set_replica_identity(new)
        for parent in old.inherits:
            if parent not in new.inherits and parent not in self.dropped_tables:
                self.add(Change("no_inherit", key, Phase.DROP, (key,), before=old, detail=parent))
        for parent in new.inherits:
            if parent not in old.inherits:
                self.add(Change("inherit", key, Phase.CREATE, (key,), after=new, detail=parent))

    def _from_parents(self, old: Table, new: Table) -> set[str]:
        """Columns whose change reaches ``old`` from an inheritance parent it keeps: ``ALTER
        TABLE`` on a parent adds, drops and retypes the column in its children too (and a
        child may not retype an inherited column itself), so the child's change is the
        parent's. Partitions' columns are their parent's in the model already."""
        found: set[str] = set()
        for parent in old.inherits:
            before, after = self.live.tables.get(parent), self.desired.tables.get(parent)
            if parent not in new.inherits or before is None or after is None:
                continue
            if parent in self.dropped_tables or parent in self.new_tables:
                continue
            was = {c.name: c for c in before.columns}
            now = {c.name: c for c in after.columns}
            found |= was.keys() ^ now.keys()
            found |= {n for n in was.keys() & now.keys() if was[n].type != now[n].type}
        return found

    def _move_partition(self, old: Table, new: Table) -> tuple[Table, Table]:
        """A partition whose parent or bounds change, or a table that becomes or stops
        being a partition, keeps its rows: ``DETACH PARTITION`` from the old parent, ``ATTACH
        PARTITION`` to the new one (which checks the rows against the new bounds). The two
        sides are compared by every column they have, a partition's being its parent's."""
        key = old.key
        if old.partition_of is not None:
            self.add(Change("detach_partition", key, Phase.DROP, (key,), before=old))
        if new.partition_of is not None:
            self.add(
                Change(
                    "attach_partition", key, Phase.CREATE, (key,), after=new, existing_table=True
                )
            )
        return (
            dataclasses.replace(old, columns=_all_columns(old, self.live)),
            dataclasses.replace(new, columns=_all_columns(new, self.desired)),
        )

    def _set_replica_identity(self, table: Table) -> None:
        """PostgreSQL's ``REPLICA IDENTITY``, set once the table's indexes exist (the one it
        names may be new)."""
        self.add(Change("set_replica_identity", table.key, Phase.FINISH, (table.key,), after=table))


def _all_columns(table: Table, db: Database) -> tuple[Column, ...]:
    """Every column ``table`` has: a partition's are its parent's (the model lists only the
    ones it declares itself, which stand in for the parent's of the same name)."""
    parent = db.tables.get(table.partition_of or "")
    if parent is None:
        return table.columns
    own = {c.name: c for c in table.columns}
    inherited = tuple(own.pop(c.name, c) for c in _all_columns(parent, db))
    return inherited + tuple(own.values())


_REPLICA_IDENTITY = "replica_identity"


def _replica_identity(table: Table) -> str:
    """A PostgreSQL table's ``REPLICA IDENTITY`` other than ``DEFAULT`` (its own change,
    :meth:`TableDiffer._set_replica_identity`), else ``""``."""
    return dict(table.options).get(_REPLICA_IDENTITY, "")


def _options(table: Table) -> tuple[tuple[str, str], ...]:
    """The dialect facts ``alter_table_options`` changes: all but the replica identity."""
    return tuple(o for o in table.options if o[0] != _REPLICA_IDENTITY)
