"""The live model as it will be once the desired schema's renames ran, and the renames.

The differ compares by name, so a renamed column would be a drop and an add (its rows
lost). Before diffing, :func:`renamed` applies each :class:`~runner.engines.renames.Rename`
whose old object exists in the live model (and whose new one does not) to a copy of that
model, and returns one rename change for each: the differ then compares the renamed copy
with the desired model and finds only what the renamed objects still need (a type change
after a column rename). A hint whose old object is gone (the rename already ran) does
nothing, so the next plan is empty.

References to a renamed object inside server-rendered text (an index definition naming its
table and columns, a column typed by a renamed enum) are rewritten token by token. A
rewrite that misses a spelling costs a needless drop and create of that index or constraint,
never a wrong plan: the dry run checks what the statements reach.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runner.engines.changes import Change
from runner.engines.model import Database
from runner.engines.renamed.columns import ColumnRenames
from runner.engines.renamed.owned import OwnedRenames, followers
from runner.engines.renamed.spelling import Spelling, rewrite
from runner.engines.renamed.tables import TableRenames
from runner.engines.renamed.types import TypeRenames
from runner.engines.renames import Rename, Renames

__all__ = ["Renamed", "Spelling", "renamed", "rewrite"]


@dataclass(frozen=True, slots=True)
class Renamed:
    """The live model with the renames applied (``view``), and the rename ``changes``."""

    view: Database
    changes: tuple[Change, ...] = ()


class _Renaming(TypeRenames, TableRenames, ColumnRenames, OwnedRenames):
    """Every kind of rename over one :class:`~runner.engines.renamed.view.RenamedView`."""


def renamed(
    live: Database, renames: Renames, spelling: Spelling, desired: Database | None = None
) -> Renamed:
    """``live`` as the renames leave it, and the rename changes (see the module docstring).

    With ``desired``, what is named after a renamed table or column follows it where the
    desired schema has the derived name (:func:`~runner.engines.renamed.owned.followers`):
    a table's serial sequence and its primary key keep their rows and their dependents too."""
    if not renames.items:
        return Renamed(live)
    work = _Renaming(live, spelling)
    steps: dict[str, Callable[[Rename], None]] = {
        "type": work.type,
        "enum_value": work.enum_value,
        "table": work.table,
        "column": work.column,
        "index": work.index,
        "constraint": work.constraint,
        "sequence": work.sequence,
    }
    for kind in ("type", "enum_value", "table", "column", "index", "constraint"):
        if kind in spelling.kinds:
            for rename in renames.of(kind):
                steps[kind](rename)
    if desired is not None:
        for rename in followers(work, desired):
            if rename.kind in spelling.kinds:
                steps[rename.kind](rename)
    if not work.changes:
        return Renamed(live)
    return Renamed(work.finish(), tuple(work.changes))
