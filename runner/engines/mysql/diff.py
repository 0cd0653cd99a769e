"""The shared differ, adjusted to what MySQL can and must do.

* Column order is part of the model: after the shared changes, columns that are not in
  their desired place are moved (``move_column``); the moves are the fewest the longest
  run of columns already in order allows, each placed after its desired predecessor.
* A new table is created whole with its primary key, indexes and checks (see
  :mod:`.render`), so those are not added one by one.
* An index or primary key whose definition changes is replaced in one statement (a
  foreign key may need it at every moment): the create carries the old object.
* An index that only the live database has is dropped last, after its replacement exists.
* The index the server creates implicitly for a foreign key is no difference: the live
  table's index for the same foreign key stands for it, whatever its name.
* A foreign key dropped and added again keeps an ordinary index where the server had
  generated one (:func:`_generated_keys_kept`).
* A table that loses every column drops them after adding the new ones (MySQL refuses to
  drop a table's last column).
* A definer is compared only where the desired schema names one (:mod:`.definers`).
* A changed procedure, function or event is replaced in one ``CREATE OR REPLACE`` where the
  server has it (MariaDB), else dropped and created again (MySQL).
* Table and column grants are compared by name (:func:`_grants_by_name`): MariaDB keeps them
  when the table or column is dropped, and the next one of that name has them.
"""

from __future__ import annotations

import bisect
import dataclasses
import re

from runner.engines.changes import Change, Phase
from runner.engines.diff import column_change
from runner.engines.diff import diff as shared_diff
from runner.engines.model import Column, Database, Definition, Grant, Index
from runner.engines.mysql.definers import comparable
from runner.engines.mysql.render import (
    auto_key_added,
    auto_key_dropped,
    fk_columns,
    implicit_fk_index,
    index_columns,
    index_name,
)
from runner.engines.privileges import PRIVILEGE_OPS, privilege_changes

__all__ = ["diff"]

_COLUMN = re.compile(r"`((?:[^`]|``)+)`(\(\d+\))?( DESC)?")


def _serving(db: Database, table: str, columns: list[str]) -> list[Index]:
    return [i for i in db.indexes.values() if i.table == table and index_columns(i) == columns]


def _fk_index_only(change: Change, live: Database, desired: Database) -> bool:
    """A change that exists only because the server named a foreign key's index itself.

    The live table's index for a foreign key (however it is named) stands for the index
    the server creates implicitly for the same foreign key in the desired schema.
    """
    if change.op == "drop_index" and change.key not in desired.indexes:
        index = live.indexes[change.key]
        columns = fk_columns(index, desired)
        others = _serving(desired, index.table, columns) if columns is not None else []
        return bool(others) and all(implicit_fk_index(i, desired) for i in others)
    if change.op == "create_index" and change.key not in live.indexes:
        index = desired.indexes[change.key]
        columns = fk_columns(index, live)
        return (
            columns is not None
            and implicit_fk_index(index, desired)
            and bool(_serving(live, index.table, columns))
        )
    return False


def _stored(column: object) -> str | None:
    if not isinstance(column, Column):
        return None
    return next((v for k, v in column.extra if k == "generated"), None)


def _names(definition: str) -> set[str]:
    return {m.group(1).replace("``", "`") for m in _COLUMN.finditer(definition)}


def _longest_increasing(values: list[int]) -> set[int]:
    """Positions (into ``values``) of one longest strictly increasing subsequence."""
    tails: list[int] = []
    tail_at: list[int] = []
    previous = [-1] * len(values)
    for position, value in enumerate(values):
        slot = bisect.bisect_left(tails, value)
        if slot == len(tails):
            tails.append(value)
            tail_at.append(position)
        else:
            tails[slot] = value
            tail_at[slot] = position
        previous[position] = tail_at[slot - 1] if slot else -1
    kept: set[int] = set()
    position = tail_at[-1] if tail_at else -1
    while position >= 0:
        kept.add(position)
        position = previous[position]
    return kept


def _moves(live: Database, desired: Database, changes: list[Change]) -> list[Change]:
    moves: list[Change] = []
    for key in sorted(live.tables.keys() & desired.tables.keys()):
        old, new = live.tables[key], desired.tables[key]
        wanted = [c.name for c in new.columns]
        added = {c.detail for c in changes if c.op == "add_column" and c.key == key}
        order = [c.name for c in old.columns if c.name in wanted and c.name not in added]
        for position, name in enumerate(wanted):
            if name in added:
                before = wanted[position - 1] if position else None
                order.insert(order.index(before) + 1 if before in order else 0, name)
        if order == wanted:
            continue
        rank = {name: position for position, name in enumerate(wanted)}
        kept = {order[i] for i in _longest_increasing([rank[n] for n in order])}
        for position, column in enumerate(new.columns):
            if column.name not in kept:
                moves.append(
                    column_change(
                        "move_column",
                        key,
                        Phase.CREATE,
                        before=old.column(column.name),
                        after=column,
                        position=position,
                    )
                )
    return moves


_REPLACEABLE = frozenset({"procedure", "function", "event"})
"""Kinds MariaDB changes with ``CREATE OR REPLACE`` (their ``replace``; MySQL has none)."""


def _generated_keys_kept(live: Database, desired: Database, changes: list[Change]) -> list[Change]:
    """An ordinary index in place of the one the server generated for an unnamed foreign key
    (named after its first column) that the plan drops and adds again.

    Adding the key back, MariaDB replaces a generated index with one named after the
    constraint; an ordinary index of the same columns serves the new key instead. The
    dry run rebuilds every index as an ordinary one, so without this the two would differ.
    """
    touched = {c.key for c in changes if c.op in ("create_index", "drop_index")}
    kept: list[Change] = []
    for change in changes:
        old = live.constraints.get(change.key)
        if change.op != "add_constraint" or old is None or old.kind != "f":
            continue
        for key in sorted(live.indexes.keys() - touched):
            index = live.indexes[key]
            name = index_name(index)
            if (
                index.table != old.table
                or index_columns(index) != list(old.columns)
                or name == old.name
                or name != old.columns[0]
                or desired.indexes.get(key) != index
            ):
                continue
            touched.add(key)
            kept.append(
                Change(
                    "create_index",
                    key,
                    Phase.CREATE,
                    (index.table,),
                    before=index,
                    after=index,
                    existing_table=True,
                )
            )
    return kept


def _emptied(live: Database, changes: list[Change], dropped: dict[str, set[str]]) -> set[str]:
    """Tables that keep their name but lose every column they have (none added back under
    the same name)."""
    added: dict[str, set[str]] = {}
    for change in changes:
        if change.op == "add_column":
            added.setdefault(change.key, set()).add(change.detail)
    return {
        table
        for table, names in dropped.items()
        if table in live.tables
        and names == {c.name for c in live.tables[table].columns}
        and not names & added.get(table, set())
    }


def _routine_changes(changes: list[Change]) -> list[Change]:
    """Routine and event replacements as the server can make them: ``CREATE OR REPLACE``
    (one ``replace_definition``) where the desired object has it, else a drop and a
    create."""
    result: list[Change] = []
    created = {
        c.key: c
        for c in changes
        if c.op == "create_definition"
        and isinstance(c.after, Definition)
        and c.after.kind in _REPLACEABLE
        and c.after.replace is not None
    }
    replaced = {c.key for c in changes if c.op == "drop_definition" and c.key in created}
    for change in changes:
        if change.key in replaced and change.op == "drop_definition":
            continue
        if change.key in replaced and change.op == "create_definition":
            change = dataclasses.replace(change, op="replace_definition")
            change = dataclasses.replace(change, before=_dropped(changes, change.key))
        elif (
            change.op == "replace_definition"
            and isinstance(change.after, Definition)
            and change.after.kind in _REPLACEABLE
            and change.after.replace is None
        ):
            result.append(dataclasses.replace(change, op="drop_definition", phase=Phase.DROP))
            change = dataclasses.replace(change, op="create_definition")
        result.append(change)
    return result


def _dropped(changes: list[Change], key: str) -> object:
    return next(c.before for c in changes if c.op == "drop_definition" and c.key == key)


def _grants_by_name(live: Database, desired: Database) -> list[Change]:
    """Grants and revokes from ``live`` to ``desired`` by the name a grant is on: a table or
    column dropped, created again or never there keeps (or lacks) exactly what the grant
    tables hold for its name, so nothing is assumed gone with an object or new with one.
    A live grant is read under the desired one's key when both name the same thing (a
    table's grants, still held, are the view's that takes its name)."""

    def name(grant: Grant) -> tuple[str, str, str]:
        return grant.target, grant.column, grant.grantee

    keys = {name(g): k for k, g in desired.grants.items()}
    grants = {keys.get(name(g), k): g for k, g in live.grants.items()}
    return privilege_changes(
        dataclasses.replace(live, grants=grants), desired, set(), lambda _: False
    )


def diff(live: Database, desired: Database) -> list[Change]:
    """Every change from ``live`` to ``desired`` on MySQL, in no particular order."""
    live = comparable(live, desired)
    # Partitioning changes in place here (ALTER TABLE ... PARTITION BY), keeping the rows:
    # the shared differ, which would replace the table, sees the desired partitioning.
    adjusted = dict(live.tables)
    repartitioned: list[Change] = []
    for key in sorted(live.tables.keys() & desired.tables.keys()):
        old, new = live.tables[key], desired.tables[key]
        if old.partition_key != new.partition_key:
            adjusted[key] = dataclasses.replace(old, partition_key=new.partition_key)
            repartitioned.append(
                Change("repartition", key, Phase.CREATE, (key,), before=old, after=new)
            )
    changes = _routine_changes(shared_diff(dataclasses.replace(live, tables=adjusted), desired))
    changes = [c for c in changes if c.op not in PRIVILEGE_OPS] + _grants_by_name(live, desired)
    new_tables = {c.key for c in changes if c.op == "create_table"}
    replaced_indexes = {c.key for c in changes if c.op == "create_index"} & set(live.indexes)
    replaced_keys = {
        c.key
        for c in changes
        if c.op == "add_constraint"
        and c.key in live.constraints
        and live.constraints[c.key].kind == "p"
    }
    dropped_columns: dict[str, set[str]] = {}
    for change in changes:
        if change.op == "drop_column":
            dropped_columns.setdefault(change.key, set()).add(change.detail)
    emptied = _emptied(live, changes, dropped_columns)
    result: list[Change] = []
    for change in changes:
        if (
            change.op in ("add_constraint", "drop_constraint")
            and change.key.endswith(".PRIMARY")
            and (
                auto_key_added(live, desired, "table:" + change.key[11:-8])
                or auto_key_dropped(live, desired, "table:" + change.key[11:-8])
            )
        ):
            continue  # carried by the column's own statement
        if change.op in ("add_constraint", "create_index") and change.after is not None:
            owner = getattr(change.after, "table", None)
            kind = getattr(change.after, "kind", "i")
            if owner in new_tables and kind != "f":
                continue  # part of CREATE TABLE
        if change.op == "drop_index" and change.key in replaced_indexes:
            continue
        if change.op == "drop_constraint" and change.key in replaced_keys:
            continue
        if change.op == "create_index" and change.key in replaced_indexes:
            change = dataclasses.replace(change, before=live.indexes[change.key])
        elif change.op == "add_constraint" and change.key in replaced_keys:
            change = dataclasses.replace(change, before=live.constraints[change.key])
        elif _fk_index_only(change, live, desired):
            continue
        elif change.op == "drop_index" and change.key not in desired.indexes:
            index = live.indexes[change.key]
            if not _names(index.definition) & dropped_columns.get(index.table, set()):
                change = dataclasses.replace(change, phase=Phase.FINISH)
        if change.op == "drop_column" and change.key in emptied:
            # MySQL refuses to drop a table's last column: these go once the new ones exist.
            change = dataclasses.replace(change, phase=Phase.FINISH)
        if change.op == "add_constraint" and getattr(change.after, "kind", "") == "f":
            # After every index change: the foreign key needs its index in final shape.
            change = dataclasses.replace(change, phase=Phase.FINISH)
        if change.op == "alter_column_options" and _stored(change.before) != _stored(change.after):
            # VIRTUAL <-> STORED cannot be modified: the column is replaced.
            result.append(dataclasses.replace(change, op="drop_column", phase=Phase.DROP))
            change = dataclasses.replace(change, op="add_column")
        result.append(change)
    result += _moves(live, desired, changes + result) + repartitioned
    result += _generated_keys_kept(live, desired, result)
    return sorted(result, key=lambda c: c.sort_key)
