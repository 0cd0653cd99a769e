"""The change vocabulary shared by the differ, the hazard rules, ordering and rendering.

The differ only produces :class:`Change` objects; it never writes SQL. A change names what
it does (``op``), the object it is about (``key``), the tables it touches (for protected
tables and lock hazards) and carries the model objects before and after, so hazards are
judged from structure, never from SQL text. The dialect renderer turns each change into
statements.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

__all__ = ["Change", "Phase", "Statement", "UnsupportedChange", "renderer_for"]

T = TypeVar("T")


class Phase(IntEnum):
    """Where a change runs. Within a phase, the dependency order decides."""

    PREPARE = 0  # enum values, committed before anything uses them
    DROP = 1  # removals, dependents first (live dependency order)
    CREATE = 2  # creations and alterations, dependencies first (desired dependency order)
    RELEASE = 3  # removals of what kept objects used until CREATE (an enum after its columns)
    FINISH = 4  # validations, concurrent index builds, ownership, comments


@dataclass(frozen=True, slots=True)
class Change:
    """One structured change from the live schema toward the desired one."""

    op: str
    key: str
    phase: Phase
    tables: tuple[str, ...] = ()
    before: object = None
    after: object = None
    detail: str = ""  # e.g. the column a column change is about
    existing_table: bool = False  # the table exists in the live database (has rows)
    position: int = 0  # among changes of one op on one key: the desired order (new columns)
    parts: tuple[Change, ...] = ()  # a composite change (a SQLite table rebuild) stands for these
    cast: str = ""  # alter_column_type: how values convert (runner.engines.casts.CastMode)

    @property
    def sort_key(self) -> tuple[int, str, str, int, str]:
        return (int(self.phase), self.key, self.op, self.position, self.detail)

    # The model object a change carries is the kind its op implies (``add_column``: a
    # Column after); these read it as that kind, and a change that breaks the promise is a
    # bug in the differ (AssertionError), never a plan.

    def new(self, kind: type[T]) -> T:
        """``after``, as a ``kind``."""
        assert isinstance(self.after, kind)
        return self.after

    def old(self, kind: type[T]) -> T:
        """``before``, as a ``kind``."""
        assert isinstance(self.before, kind)
        return self.before

    def subject(self, kind: type[T]) -> T:
        """``after``, or ``before`` for a change that has none (a drop), as a ``kind``."""
        found = self.after if self.after is not None else self.before
        assert isinstance(found, kind)
        return found


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement of a plan, and whether it may run inside a transaction."""

    sql: str
    transactional: bool = True


class UnsupportedChange(Exception):
    """A change the engine cannot express; it is reported, never dropped silently."""

    def __init__(self, change: Change, why: str) -> None:
        super().__init__(f"{change.op} {change.key}: {why}")
        self.change = change
        self.why = why


def renderer_for(renderers: Mapping[str, T], change: Change, dialect: str) -> T:
    """The entry of a dialect's rendering table for ``change``'s op; a change the dialect
    has no rendering for is :class:`UnsupportedChange`."""
    found = renderers.get(change.op)
    if found is None:
        raise UnsupportedChange(change, f"{dialect} has no rendering for this change")
    return found
