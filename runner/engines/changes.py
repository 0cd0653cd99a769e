"""The change vocabulary shared by the differ, the hazard rules, ordering and rendering.

The differ only produces :class:`Change` objects; it never writes SQL. A change names what
it does (``op``), the object it is about (``key``), the tables it touches (for protected
tables and lock hazards) and carries the model objects before and after, so hazards are
judged from structure, never from SQL text. The dialect renderer turns each change into
statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = ["Change", "Phase", "Statement", "UnsupportedChange"]


class Phase(IntEnum):
    """Where a change runs. Within a phase, the dependency order decides."""

    PREPARE = 0  # enum values, committed before anything uses them
    DROP = 1  # removals, dependents first (live dependency order)
    CREATE = 2  # creations and alterations, dependencies first (desired dependency order)
    FINISH = 3  # validations, concurrent index builds, ownership, comments


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

    @property
    def sort_key(self) -> tuple[int, str, str, int, str]:
        return (int(self.phase), self.key, self.op, self.position, self.detail)


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
