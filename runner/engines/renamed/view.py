"""The live model as the renames so far leave it: the keys they moved, the rename changes,
and, at the end, comments and dependency edges following the moved keys."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from runner.engines.changes import Change, Phase
from runner.engines.model import (
    Column,
    Comment,
    Constraint,
    Database,
    Definition,
    Index,
    Sequence,
    Table,
)
from runner.engines.renamed.spelling import Spelling, parts, rewrite
from runner.engines.renames import short_name

__all__ = ["RenamedView"]


class RenamedView:
    """The renaming's shared state; each kind of rename (types, tables, columns, owned
    objects) is a subclass that adds its step, and :func:`~runner.engines.renamed.renamed`
    runs them in order over one instance."""

    def __init__(self, live: Database, spelling: Spelling) -> None:
        self.db = live
        self.spelling = spelling
        self.moved: dict[str, str] = {}  # old key -> new key
        self.changes: list[Change] = []

    def refs(self, text: str, key: str, new: str) -> str:
        """``text`` with references to the table or type ``key`` renamed to ``new``."""
        schema, name = parts(key)
        text = rewrite(text, (schema, name), new, self.spelling.quote)
        if not self.spelling.qualified_references:
            text = rewrite(text, (name,), new, self.spelling.quote)
        return text

    def edit(self, **sections: object) -> None:
        self.db = replace(self.db, **sections)  # type: ignore[arg-type]

    def _moved(self, old: str, new: str) -> None:
        if old != new:
            self.moved[old] = new

    def _defaults(self, before: str, after: str) -> dict[str, Table]:
        """The tables with ``before`` replaced by ``after`` in their column defaults (a
        literal the server prints there, which no token rewrite sees)."""
        return {
            k: replace(
                t,
                columns=tuple(
                    replace(c, default=c.default.replace(before, after))
                    if c.default is not None and before in c.default
                    else c
                    for c in t.columns
                ),
            )
            for k, t in self.db.tables.items()
        }

    def _renamed_in(self, op: str, key: str, table: str, before: object, after: object) -> None:
        """The rename change of an object of ``table`` (an index, constraint, sequence)."""
        self.changes.append(
            Change(
                op,
                key,
                Phase.PREPARE,
                (table,),
                before=before,
                after=after,
                existing_table=True,
            )
        )

    def _texts(self, owned: Callable[[str | None], bool], text: Callable[[str], str]) -> None:
        """Constraint and index definitions rewritten with ``text``."""
        self.edit(
            constraints={
                k: replace(c, definition=text(c.definition)) if owned(c.table) else c
                for k, c in self.db.constraints.items()
            },
            indexes={
                k: replace(i, definition=text(i.definition)) if owned(i.table) else i
                for k, i in self.db.indexes.items()
            },
        )

    def finish(self) -> Database:
        """The view with comments and dependency edges following the moved keys."""

        tables = {
            f"column:{old.removeprefix('table:')}.": f"column:{new.removeprefix('table:')}."
            for old, new in self.moved.items()
            if old.startswith("table:")
        }

        def key(value: str) -> str:
            for old, new in tables.items():
                if value.startswith(old):
                    value = new + value[len(old) :]
            return self.moved.get(value, value)

        comments: dict[str, Comment] = {}
        for c in self.db.comments.values():
            on = key(c.on)
            moved = replace(c, on=on, target=self._target(c.target) if on != c.on else c.target)
            comments[moved.key] = moved
        return replace(
            self.db,
            comments=dict(sorted(comments.items())),
            depends=frozenset((key(a), key(b)) for a, b in self.db.depends),
        )

    def _target(self, target: str) -> str:
        """A comment's ``COMMENT ON`` target with renamed names in it."""
        for change in self.changes:
            before, after = change.before, change.after
            if isinstance(before, Table) and isinstance(after, Table):
                target = self.refs(target, before.key, after.name)
            elif isinstance(before, Column | Sequence) and isinstance(after, Column | Sequence):
                target = rewrite(target, (before.name,), after.name, self.spelling.quote)
            elif isinstance(before, Index | Constraint) and isinstance(after, Index | Constraint):
                old_name = short_name(before.name, before.table)
                new_name = short_name(after.name, after.table)
                target = rewrite(target, (old_name,), new_name, self.spelling.quote)
            elif isinstance(before, Definition) and isinstance(after, Definition):
                target = self.refs(target, before.key, parts(after.key)[1])
        return target
