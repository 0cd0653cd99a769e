"""``drops: Skip``: leave what only the live database has alone instead of dropping it.

sqldef's ``enable_drop: false`` and Atlas's "skip drop" diff policy: the plan creates and
changes what the desired schema declares, and removes nothing the desired schema merely
does not mention. It is done on the models, before the differ runs: every object (and part
of an object) that only the live schema has is added to the desired model as it is, so the
differ, the recreate closure, the dry run's convergence check and the next plan all see it
as wanted and plan nothing for it. So the rule is the same for every dialect and every
differ, and a plan that has nothing else to do is empty.

What counts as a removal, and is kept (:class:`Kept.skipped` lists each, for the plan):

* a table, constraint, index, sequence, view, materialized view, function, procedure,
  trigger, policy, rule, type, domain, extension, event (every model object) that only the
  live schema has; what belongs to a kept table (its constraints, indexes, triggers,
  policies, comments) is kept with it and not listed again;
* a column only the live table has (in its live place among the desired columns);
* row-level security (and ``FORCE``) that the live table has and the desired one lacks
  (``DISABLE ROW LEVEL SECURITY`` is a removal);
* managed privileges (grants and default privileges) that only the live schema holds: a
  ``REVOKE`` is a removal, so a grant keeps every privilege it holds.

What is not a removal, and still happens: a drop that is part of changing an object the
desired schema still declares (a view, function or index dropped and created again, a
table replaced, a dependent rebuilt), and a live object whose name a desired object of
another kind takes (a view that becomes a materialized view, a table that becomes a view,
an index that becomes a unique constraint of its name, a primary key under a new name):
that object is replaced, not removed. Comments follow their object; column defaults, NOT
NULL, enum labels, partitions and inheritance are parts of a definition that changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from runner.engines.model import (
    Column,
    Constraint,
    Database,
    DefaultGrant,
    Definition,
    Grant,
    Index,
    Sequence,
    Table,
    object_of,
)

__all__ = ["Kept", "SkippedRemoval", "keep_live_only"]

Obj = TypeVar("Obj", Constraint, Index, Sequence, Definition)
G = TypeVar("G", Grant, DefaultGrant)


@dataclass(frozen=True, slots=True, order=True)
class SkippedRemoval:
    """One removal the plan leaves out: the change it would have been and the object."""

    key: str
    op: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Kept:
    """The desired model with what only the live one has added, and what that skipped."""

    desired: Database
    skipped: tuple[SkippedRemoval, ...]
    kept_parts: frozenset[str]
    """``column:`` keys of kept columns and keys of kept constraints of tables both models
    have (a dialect that rebuilds a table from its desired text cannot keep them)."""


def _name(key: str) -> str:
    """What a key names, without its kind: two objects of one name cannot both exist."""
    return key.split(":", 1)[1] if ":" in key else key


def _taken(desired: Database) -> set[str]:
    """The names the desired schema's objects use (PostgreSQL: a primary key, unique or
    exclusion constraint also names its index, a relation of its schema)."""
    names = {_name(k) for k in desired.object_keys()}
    if desired.dialect == "postgresql":
        for constraint in desired.constraints.values():
            if constraint.kind in ("p", "u", "x"):
                schema = _name(constraint.table).split(".", 1)[0]
                names.add(f"{schema}.{constraint.name}")
    return names


def _own_names(key: str, thing: object, dialect: str) -> set[str]:
    names = {_name(key)}
    if dialect == "postgresql" and isinstance(thing, Constraint) and thing.kind in "pux":
        names.add(f"{_name(thing.table).split('.', 1)[0]}.{thing.name}")
    return names


def _merged_columns(live: Table, desired: Table) -> tuple[tuple[Column, ...], list[str]]:
    """The desired columns with the live-only ones in their live place (after the live
    column before them that the result has, else first)."""
    wanted = {c.name for c in desired.columns}
    result = list(desired.columns)
    added: list[str] = []
    for index, column in enumerate(live.columns):
        if column.name in wanted:
            continue
        place = 0
        for before in reversed(live.columns[:index]):
            names = [c.name for c in result]
            if before.name in names:
                place = names.index(before.name) + 1
                break
        result.insert(place, column)
        added.append(column.name)
    return tuple(result), added


def _union(live: G, desired: G) -> G:
    privileges = tuple(sorted(set(live.privileges) | set(desired.privileges)))
    grantable = tuple(sorted(set(live.grantable) | set(desired.grantable)))
    return dataclasses.replace(desired, privileges=privileges, grantable=grantable)


def _grants(
    live: Mapping[str, G],
    desired: Mapping[str, G],
    present: Iterable[str],
    live_objects: set[str],
    skipped: list[SkippedRemoval],
) -> dict[str, G]:
    """``desired`` with every privilege only ``live`` holds, on objects the result has (a
    grant on a name no live object holds, MariaDB's left by a drop, is kept too)."""
    result = dict(desired)
    there = set(present)
    for key, grant in sorted(live.items()):
        on = object_of(grant.on) if isinstance(grant, Grant) else ""
        if on and on not in there and on in live_objects:
            continue  # its object is replaced: its grants are the new one's
        found = result.get(key)
        extra = sorted(set(grant.privileges) - set(found.privileges if found else ()))
        extra_option = sorted(set(grant.grantable) - set(found.grantable if found else ()))
        if not extra and not extra_option:
            continue
        result[key] = grant if found is None else _union(grant, found)
        detail = ", ".join(extra) + (
            f" (grant option: {', '.join(extra_option)})" if extra_option else ""
        )
        skipped.append(SkippedRemoval(key, "revoke", detail))
    return dict(sorted(result.items()))


def keep_live_only(live: Database, desired: Database) -> Kept:
    """``desired`` with everything only ``live`` has added as it is (module docstring);
    ``live`` is the live model as the plan diffs it (renames applied)."""
    taken = _taken(desired)
    dialect = live.dialect
    skipped: list[SkippedRemoval] = []
    kept: set[str] = set()  # keys of kept top-level objects
    kept_parts: set[str] = set()

    def keep(key: str, thing: object) -> bool:
        return key not in taken_keys and not (_own_names(key, thing, dialect) & taken)

    taken_keys = desired.object_keys()
    tables = dict(desired.tables)
    for key, table in sorted(live.tables.items()):
        found = desired.tables.get(key)
        if found is None:
            if keep(key, table):
                tables[key] = table
                kept.add(key)
                skipped.append(SkippedRemoval(key, "drop_table"))
            continue
        columns, added = _merged_columns(table, found)
        row_security = found.row_security or table.row_security
        force = found.force_row_security or table.force_row_security
        if added or (row_security, force) != (found.row_security, found.force_row_security):
            tables[key] = dataclasses.replace(
                found, columns=columns, row_security=row_security, force_row_security=force
            )
        for name in added:
            column_key = f"column:{_name(key)}.{name}"
            kept_parts.add(column_key)
            skipped.append(SkippedRemoval(column_key, "drop_column"))
        if table.row_security and not found.row_security:
            skipped.append(SkippedRemoval(key, "set_row_security", "DISABLE ROW LEVEL SECURITY"))
        if table.force_row_security and not found.force_row_security:
            skipped.append(SkippedRemoval(key, "set_row_security", "NO FORCE ROW LEVEL SECURITY"))

    def objects(
        live_part: Mapping[str, Obj], desired_part: Mapping[str, Obj], op: str
    ) -> dict[str, Obj]:
        result = dict(desired_part)
        for key, thing in sorted(live_part.items()):
            if key in result or not keep(key, thing):
                continue
            table = getattr(thing, "table", None)
            if isinstance(thing, Constraint) and thing.kind == "p":
                found = tables.get(thing.table)
                wanted = [
                    c
                    for c in desired.constraints.values()
                    if c.table == thing.table and c.kind == "p"
                ]
                if found is not None and wanted:
                    continue  # the primary key changes name: replaced, not removed
            if table is not None and table.startswith("table:") and table not in tables:
                continue  # its table is replaced or gone: it goes with it
            result[key] = thing
            kept.add(key)
            if table is not None and table in kept:
                continue  # kept with its table, listed there
            if isinstance(thing, Constraint) and table is not None:
                kept_parts.add(key)
            skipped.append(SkippedRemoval(key, op))
        return dict(sorted(result.items()))

    constraints = objects(live.constraints, desired.constraints, "drop_constraint")
    indexes = objects(live.indexes, desired.indexes, "drop_index")
    sequences = objects(live.sequences, desired.sequences, "drop_sequence")
    definitions = objects(live.definitions, desired.definitions, "drop_definition")
    comments = dict(desired.comments)
    kept_columns = {
        f"column:{_name(k)}.{c.name}"
        for k in kept
        if k.startswith("table:")
        for c in live.tables[k].columns
    }
    for key, comment in sorted(live.comments.items()):
        if key not in comments and (comment.on in kept or comment.on in kept_parts | kept_columns):
            comments[key] = comment
    present = set(tables) | set(constraints) | set(indexes) | set(sequences) | set(definitions)
    live_objects = set(live.tables) | set(live.sequences) | set(live.definitions)
    grants = _grants(live.grants, desired.grants, present, live_objects, skipped)
    default_grants = _grants(
        live.default_grants, desired.default_grants, present, live_objects, skipped
    )
    columns_of_kept = kept_parts | kept_columns
    depends = set(desired.depends)
    for dependent, dependency in live.depends:
        if dependent in kept or dependent in columns_of_kept:
            depends.add((dependent, dependency))
    result = dataclasses.replace(
        desired,
        tables=dict(sorted(tables.items())),
        constraints=constraints,
        indexes=indexes,
        sequences=sequences,
        definitions=definitions,
        comments=dict(sorted(comments.items())),
        grants=grants,
        default_grants=default_grants,
        depends=frozenset(depends),
    )
    return Kept(result, tuple(sorted(set(skipped))), frozenset(kept_parts))
