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

from runner.engines.changes import Change
from runner.engines.diff.comments import CommentDiffer
from runner.engines.diff.constraints import ConstraintDiffer
from runner.engines.diff.definitions import DefinitionDiffer
from runner.engines.diff.sequences import SequenceDiffer
from runner.engines.diff.state import column_change
from runner.engines.diff.tables import TableDiffer
from runner.engines.model import Database
from runner.engines.privileges import privilege_changes

__all__ = ["column_change", "diff"]


class _Differ(TableDiffer, ConstraintDiffer, SequenceDiffer, DefinitionDiffer, CommentDiffer):
    """Every part over one :class:`~runner.engines.diff.state.DiffState`."""


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
