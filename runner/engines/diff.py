"""Comparing a live model with a desired one, producing :class:`~runner.engines.changes.Change`.

The differ decides *what* changes; :mod:`runner.engines.order` decides in which order, the
dialect renderer how each is spelled, :mod:`runner.engines.hazards` how risky it is.

Rules worth knowing:

* Schemas are created but never dropped; objects outside the managed scope (excluded by the
  caller) are never seen here, so never dropped.
* Column order is not compared: PostgreSQL cannot reorder columns in place.
* An object whose definition changed in a way that cannot be altered is dropped and created
  again, and so is everything in the live database that depends on it (views on a table
  whose column types change, triggers on a replaced function, ...): the *recreate closure*.
* Sub-objects of a dropped table (its constraints, indexes, triggers, policies, comments)
  are not dropped one by one: dropping the table removes them.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict

from runner.engines.casts import cast_mode
from runner.engines.changes import Change, Phase, UnsupportedChange
from runner.engines.model import Column, Constraint, Database, Definition, Table
from runner.engines.privileges import privilege_changes

__all__ = ["column_change", "diff"]

_RECREATE_ON_COLUMN_CHANGE = ("view", "matview", "policy", "trigger")
_HELD_MEANWHILE = ("enum", "domain")  # replaced types whose columns hold another type meanwhile


def column_change(
    op: str,
    table: str,
    phase: Phase,
    *,
    before: Column | None = None,
    after: Column | None = None,
    position: int = 0,
    cast: str = "",
) -> Change:
    """A change to one column of an existing table (``detail`` names the column)."""
    column = after if after is not None else before
    assert column is not None
    return Change(
        op,
        table,
        phase,
        (table,),
        before=before,
        after=after,
        detail=column.name,
        existing_table=True,
        position=position,
        cast=cast,
    )


def _owner(key: str, db: Database) -> str | None:
    """The table (or view) a sub-object belongs to."""
    if key in db.constraints:
        return db.constraints[key].table
    if key in db.indexes:
        return db.indexes[key].table
    if key in db.definitions:
        return db.definitions[key].table
    return None


class _Differ:
    def __init__(self, live: Database, desired: Database) -> None:
        self.live = live
        self.desired = desired
        self.changes: list[Change] = []
        self.recreate: set[str] = set()  # live keys dropped and created again
        self.dropped_tables = {k for k in live.tables if k not in desired.tables}
        self.new_tables = {k for k in desired.tables if k not in live.tables}
        self.rewritten_tables: set[str] = set()  # column type changes or drops
        self.rewritten_columns: set[str] = set()  # their columns, ``column:s.t.c``
        self.dependents: dict[str, set[str]] = defaultdict(set)
        self.uses: dict[str, set[str]] = defaultdict(set)
        for dependent, dependency in live.depends:
            self.dependents[dependency].add(dependent)
            self.uses[dependent].add(dependency)

    @property
    def _postgresql(self) -> bool:
        return self.live.dialect == "postgresql"

    def add(self, change: Change) -> None:
        self.changes.append(change)

    def _partitioned(self, table: str) -> str:
        """``"partitioned"`` for a table the desired schema partitions (it takes no
        ``NOT VALID`` constraint and no concurrent index build), else ``""``."""
        found = self.desired.tables.get(table)
        return "partitioned" if found is not None and found.partition_key is not None else ""

    def _rewrite(self, table: str, column: str) -> None:
        """Record that ``column`` of ``table`` changes type or goes away."""
        self.rewritten_tables.add(table)
        self.rewritten_columns.add(f"column:{table.removeprefix('table:')}.{column}")

    def _blocks_rewrite(self, view: str, table: str) -> bool:
        """Whether ``view`` must be rebuilt for ``table``'s column changes: it uses one of the
        changing columns (a whole-row use counts as all of them), or the catalog named no
        column of it at all (a dialect without column-level edges)."""
        prefix = f"column:{table.removeprefix('table:')}."
        columns = {c for c in self.uses[view] if c.startswith(prefix)}
        return not columns or bool(columns & self.rewritten_columns)

    def existing(self, table: str | None) -> bool:
        return table is not None and table in self.live.tables and table not in self.recreate

    # -- tables --------------------------------------------------------------------------

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

    def _inherited_in_order(self, old: Table, new: Table) -> None:
        """A table in an inheritance tree whose columns would not end in the desired order
        is refused (:class:`UnsupportedChange`): a new column, its own or a parent's, is
        appended, while a table created with ``INHERITS`` has its parents' columns first.
        Column order is part of the schema and only a rebuild of the table could keep it."""
        if not self._postgresql or not (old.inherits or new.inherits):
            return
        names = {c.name for c in old.columns}
        kept = [c.name for c in old.columns if new.column(c.name) is not None]
        reached = kept + [c.name for c in new.columns if c.name not in names]
        desired = [c.name for c in new.columns]
        if reached == desired:
            return
        at = next(i for i, (a, b) in enumerate(zip(reached, desired, strict=True)) if a != b)
        column = new.column(desired[at])
        assert column is not None
        before = reached[at : reached.index(desired[at])]
        raise UnsupportedChange(
            column_change("add_column", old.key, Phase.CREATE, after=column),
            f"column {desired[at]} would come after {', '.join(before)}"
            " (a column added to an existing table, or reaching it from an inheritance parent,"
            " is appended, where CREATE TABLE ... INHERITS puts the parents' columns first):"
            " column order is part of the schema and only a rebuild of the table could keep"
            " it; rebuild it by hand",
        )

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

    def _regenerated(self, table: str, old: dict[str, Column], new: dict[str, Column]) -> set[str]:
        """Generated columns that read a column changing type or going away: PostgreSQL
        cannot alter such a column, so they are dropped and added again."""
        prefix = f"column:{table.removeprefix('table:')}."
        changing = {
            prefix + name
            for name, column in old.items()
            if name not in new
            or (column.type, column.collation) != (new[name].type, new[name].collation)
        }
        return {
            name
            for name, column in old.items()
            if name in new
            and column.generated is not None
            and new[name].generated is not None
            and self.uses[prefix + name] & changing
        }

    def _kept_in_order(self, old: Table, new: Table, regenerated: set[str]) -> set[str]:
        """``regenerated`` and the generated columns that must be replaced with them so that
        the columns keep the desired order (PostgreSQL, whose ADD COLUMN only appends and
        which cannot reorder): every kept column after the first replaced one, all of them
        generated (their values are computed again, nothing is lost). Where a column that is
        not generated follows, the order cannot be kept without rebuilding the table: the
        change is refused (:class:`UnsupportedChange`), never reordered silently."""
        if not self._postgresql:
            return regenerated
        desired = {c.name: c for c in new.columns}
        replaced = regenerated | {
            c.name
            for c in old.columns
            if c.name in desired
            and c.generated != desired[c.name].generated
            and desired[c.name].generated is not None  # else DROP EXPRESSION keeps it
        }
        common = [c for c in old.columns if c.name in desired]
        kept = [c for c in common if c.name not in replaced]
        # Re-added columns are appended in desired order; the live order is what to keep.
        order = {c.name: i for i, c in enumerate(new.columns)}
        appended = sorted((c for c in common if c.name in replaced), key=lambda c: order[c.name])
        first = next(
            (i for i, (a, b) in enumerate(zip(kept + appended, common, strict=True)) if a != b),
            len(kept),
        )
        follows = kept[first:]  # a replaced column stood at ``first``: these move before it
        blocking = [c for c in follows if c.generated is None or desired[c.name].generated is None]
        if blocking:
            moved = common[first]
            raise UnsupportedChange(
                column_change("add_column", old.key, Phase.CREATE, after=desired[moved.name]),
                f"generated column {moved.name} must be dropped and added again (PostgreSQL "
                "cannot change the type of a column it reads, nor its expression), which would "
                f"move it after {', '.join(c.name for c in blocking)}: column order is part of "
                "the schema and only a rebuild of the table could keep it; rebuild it by hand "
                "or declare the generated column after them",
            )
        return regenerated | {c.name for c in follows}

    def column(
        self,
        table: str,
        old: Column,
        new: Column,
        *,
        replace: bool = False,
        position: int = 0,
        inherited: bool = False,
    ) -> None:
        def change(op: str, phase: Phase = Phase.CREATE) -> None:
            self.add(column_change(op, table, phase, before=old, after=new))

        if inherited and old.type != new.type:
            self._rewrite(table, old.name)  # retyped by its parent's ALTER TABLE
            old = dataclasses.replace(old, type=new.type)

        if old.generated is not None and new.generated is None and self._postgresql:
            # A generated column becomes an ordinary one in place, keeping its values.
            self.add(column_change("drop_expression", table, Phase.DROP, before=old, after=new))
            old = dataclasses.replace(old, generated=None)
        if old.generated != new.generated or replace:
            # A generation expression cannot be altered (nor the type of a column it reads):
            # the column is replaced, where the desired table has it.
            self._rewrite(table, old.name)
            self.add(column_change("drop_column", table, Phase.DROP, before=old))
            self.add(column_change("add_column", table, Phase.CREATE, after=new, position=position))
            return
        dropped_first = False
        if (old.type, old.collation) != (new.type, new.collation):
            self._rewrite(table, old.name)
            cast = cast_mode(old.type, new.type, self.live, self.desired)
            self.add(
                column_change(
                    "alter_column_type", table, Phase.CREATE, before=old, after=new, cast=cast
                )
            )
            # A default of the old type may not convert ("default for column cannot be cast
            # automatically"): unless an assignment cast carries a changing default along, it
            # is dropped first and set again, whether or not its text changes.
            dropped_first = (
                old.default is not None
                and not old.identity
                and (old.default == new.default or cast != "assignment")
            )
            if dropped_first:
                change("drop_default", Phase.DROP)
                if new.default is not None and new.identity == old.identity:
                    change("set_default")
        if old.default != new.default and old.identity == new.identity and not dropped_first:
            if new.default is None:
                change("drop_default", Phase.DROP)
            else:
                change("set_default")
        if old.identity != new.identity:
            if not old.identity:
                if old.default is not None:
                    change("drop_default", Phase.DROP)
                change("add_identity")
            elif not new.identity:
                change("drop_identity", Phase.DROP)
                if new.default is not None:
                    change("set_default")
            else:
                change("set_identity")
        if old.identity and new.identity and old.identity_options != new.identity_options:
            change("set_identity_options")
        if old.not_null != new.not_null:
            change("set_not_null" if new.not_null else "drop_not_null")
        if old.extra != new.extra:
            change("alter_column_options")

    # -- constraints and indexes -----------------------------------------------------------

    def constraints(self) -> None:
        live, desired = self.live.constraints, self.desired.constraints
        for key in sorted(live.keys() | desired.keys()):
            old, new = live.get(key), desired.get(key)
            # A foreign key between two dropped tables goes first, so the tables can go in
            # any order; other sub-objects of a dropped table go with it.
            if old is not None and (
                (
                    old.table not in self.dropped_tables
                    and (new is None or _constraint_differs(old, new))
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
                        _tables_of(old),
                        before=old,
                        existing_table=True,
                    )
                )
            if new is not None and (
                old is None or _constraint_differs(old, new) or old.table in self.dropped_tables
            ):
                self.add(
                    Change(
                        "add_constraint",
                        key,
                        Phase.CREATE,
                        _tables_of(new),
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

    # -- sequences ---------------------------------------------------------------------------

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

    def _drop_phase(self, key: str) -> Phase:
        """DROP, or RELEASE for an object a kept column uses until the CREATE phase changes
        it (an enum type until its columns change type, a function until a default that
        calls it is replaced): the catalog's column-level edges say which columns."""
        for dependent in sorted(self.dependents[key]):
            if not dependent.startswith("column:"):
                continue
            table_part, _, name = dependent.removeprefix("column:").rpartition(".")
            table = self.desired.tables.get(f"table:{table_part}")
            if table is not None and table.key not in self.dropped_tables and table.column(name):
                return Phase.RELEASE
        return Phase.DROP

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

    # -- whole definitions ---------------------------------------------------------------

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
            if live[key].kind in _HELD_MEANWHILE:  # its columns change type twice
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
            if old.kind == "schema" or _owner(key, self.live) in self.dropped_tables:
                continue
            phase = self._drop_phase(key)
            self.add(Change("drop_definition", key, phase, _tables(old), before=old))
        for key in sorted(desired.keys() - live.keys()):
            self.add(
                Change(
                    "create_definition",
                    key,
                    Phase.CREATE,
                    _tables(desired[key]),
                    after=desired[key],
                )
            )

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
            pending += [k for k in sorted(self.live.definitions) if _owner(k, self.live) == table]
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

    def _columns_using(
        self, key: str, *, dropped_too: bool = False
    ) -> list[tuple[str, Column, Column | None]]:
        """(table, live column, desired column) of every column of a kept table the live
        catalog says uses ``key`` (its type, or a function its default calls); the desired
        column is None for a column the desired schema drops (listed with ``dropped_too``)."""
        found: list[tuple[str, Column, Column | None]] = []
        for dependent in sorted(self.dependents[key]):
            if not dependent.startswith("column:"):
                continue
            table_part, _, name = dependent.removeprefix("column:").rpartition(".")
            table = f"table:{table_part}"
            old_table, new_table = self.live.tables.get(table), self.desired.tables.get(table)
            if old_table is None or new_table is None or table in self.dropped_tables:
                continue
            old, new = old_table.column(name), new_table.column(name)
            if old is not None and (new is not None or dropped_too):
                found.append((table, old, new))
        return found

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
                owner = _owner(key, self.live)
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
                            _tables(old),
                            before=old,
                            detail=rebuilt,
                        )
                    )
                self._defaults_using(key)
                if old.kind in _HELD_MEANWHILE:
                    self._held_meanwhile(key)
                if new is not None:
                    self.add(
                        Change(
                            "create_definition",
                            key,
                            Phase.CREATE,
                            _tables(new),
                            after=new,
                            detail=rebuilt,
                        )
                    )
            elif _owner(key, self.live) in self.dropped_tables:
                continue  # constraints() and indexes() create those of a replaced table
            elif key in self.live.indexes and key in self.desired.indexes:
                if self.live.indexes[key].definition == self.desired.indexes[key].definition:
                    self.add(Change("drop_index", key, Phase.DROP, before=self.live.indexes[key]))
                    self.add(
                        Change("create_index", key, Phase.CREATE, after=self.desired.indexes[key])
                    )
            elif key in self.live.constraints and key in self.desired.constraints:
                old_c, new_c = self.live.constraints[key], self.desired.constraints[key]
                if not _constraint_differs(old_c, new_c):
                    self.add(
                        Change(
                            "drop_constraint",
                            key,
                            Phase.DROP,
                            _tables_of(old_c),
                            before=old_c,
                            existing_table=True,
                        )
                    )
                    self.add(
                        Change(
                            "add_constraint",
                            key,
                            Phase.CREATE,
                            _tables_of(new_c),
                            after=new_c,
                            existing_table=True,
                            detail=self._partitioned(new_c.table),
                        )
                    )

    # -- comments ------------------------------------------------------------------------

    def fresh(self) -> set[str]:
        """Keys of the objects (and ``column:`` keys of the columns) the plan creates, or
        drops and creates again: what was attached to their live selves is gone."""
        fresh = {
            c.key
            for c in self.changes
            if c.op
            in (
                "create_table",
                "create_definition",
                "create_index",
                "add_constraint",
                "create_sequence",
            )
        }
        fresh |= {
            f"column:{c.key.removeprefix('table:')}.{c.detail}"
            for c in self.changes
            if c.op == "add_column"
        }
        fresh |= {
            f"column:{c.key.removeprefix('table:')}.{column.name}"
            for c in self.changes
            if c.op == "create_table"
            for column in c.new(Table).columns
        }
        return fresh

    def comments(self) -> None:
        live, desired = self.live.comments, self.desired.comments
        fresh = self.fresh()
        fresh |= {c.key for c in self.changes if c.op == "add_column"}
        for key in sorted(live.keys() | desired.keys()):
            old, new = live.get(key), desired.get(key)
            if new is not None and (old is None or old.text != new.text or new.on in fresh):
                self.add(Change("set_comment", key, Phase.FINISH, after=new))
            elif new is None and old is not None and not self._gone(old.on):
                self.add(Change("drop_comment", key, Phase.FINISH, before=old))

    def _gone(self, key: str) -> bool:
        if key in self.recreate:
            return True
        if key.startswith("column:"):
            table = "table:" + key.removeprefix("column:").rsplit(".", 1)[0]
            name = key.rsplit(".", 1)[1]
            if table in self.dropped_tables:
                return True
            desired_table = self.desired.tables.get(table)
            return desired_table is None or desired_table.column(name) is None
        in_desired = any(
            key in part
            for part in (
                self.desired.tables,
                self.desired.constraints,
                self.desired.indexes,
                self.desired.sequences,
                self.desired.definitions,
            )
        )
        return not in_desired or _owner(key, self.live) in self.dropped_tables


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
    :meth:`_Differ._set_replica_identity`), else ``""``."""
    return dict(table.options).get(_REPLICA_IDENTITY, "")


def _options(table: Table) -> tuple[tuple[str, str], ...]:
    """The dialect facts ``alter_table_options`` changes: all but the replica identity."""
    return tuple(o for o in table.options if o[0] != _REPLICA_IDENTITY)


def _tables_of(constraint: Constraint) -> tuple[str, ...]:
    if constraint.references and constraint.references != constraint.table:
        return (constraint.table, constraint.references)
    return (constraint.table,)


def _tables(definition: Definition) -> tuple[str, ...]:
    return (definition.table,) if definition.table and definition.table.startswith("table:") else ()


def _constraint_differs(old: Constraint, new: Constraint) -> bool:
    return (old.kind, old.definition, old.validated) != (new.kind, new.definition, new.validated)


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


def diff(live: Database, desired: Database) -> list[Change]:
    """Every change that takes ``live`` to ``desired``, in no particular order."""
    differ = _Differ(live, desired)
    differ.tables()
    differ.definitions()  # computes the recreate closure the rest consults
    differ.constraints()
    differ.indexes()
    differ.sequences()
    differ.recreated()
    differ.comments()
    differ.changes += privilege_changes(live, desired, differ.fresh(), differ._gone)
    unique: dict[tuple[int, str, str, int, str], Change] = {}
    for change in differ.changes:
        unique.setdefault(change.sort_key, change)
    return [unique[k] for k in sorted(unique)]
