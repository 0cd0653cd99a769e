"""Columns of a kept table: type, default, identity, generation and nullability changes,
and the column order PostgreSQL can keep (or refuses to lose)."""

from __future__ import annotations

import dataclasses

from runner.engines.casts import cast_mode
from runner.engines.changes import Phase, UnsupportedChange
from runner.engines.diff.state import DiffState, column_change
from runner.engines.model import Column, Table

__all__ = ["ColumnDiffer"]


class ColumnDiffer(DiffState):
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
