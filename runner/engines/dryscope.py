"""How much of the live schema a dry run rebuilds: the part the plan can affect.

Rebuilding the whole live schema for every dry run costs as much as loading it (thousands of
statements for a large schema) while a plan usually touches a few objects. The dry run's
question is only whether the plan's statements take the objects they affect to the desired
state, so it rebuilds the **scope**:

* every live object a change names, and the tables it touches;
* everything that depends on those, transitively (a view over a changed table, a foreign key
  referencing a dropped one): the plan may drop and recreate it;
* everything those need to exist, transitively, in the live and the desired dependency
  edges (a table a new foreign key references, a type a column uses), with the primary key
  and unique constraints of such tables (a foreign key needs them);
* schemas, extensions and types, always (few, and often used without a recorded edge).

The rest of the live schema must then equal the desired schema object for object
(:func:`untouched_equal`: the differ found no change there, and this checks it), the
rebuilt scope plus the plan must reach the desired schema on the scope and the objects the
plan creates, and the fingerprint the plan promises is that of the live objects outside the
scope together with the dry run's result inside it (:func:`merged`). A dry run that fails
on a scope is done again on the whole live schema, so a missing edge can only cost time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace

from runner.engines.changes import Change
from runner.engines.model import Database, Grant, Ownership, object_of

__all__ = ["dry_run_scope", "merged", "restrict", "untouched_equal"]

_ALWAYS = frozenset({"schema", "extension", "collation", "enum", "composite", "domain", "type"})


def _closure(start: Iterable[str], edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    pending = list(start)
    while pending:
        key = pending.pop()
        if key in seen:
            continue
        seen.add(key)
        pending.extend(edges.get(key, ()))
    return seen


def _owners(db: Database) -> dict[str, str]:
    """Sub-object -> its table (constraints, indexes, triggers, policies)."""
    owners = {k: c.table for k, c in db.constraints.items()}
    owners |= {k: i.table for k, i in db.indexes.items()}
    owners |= {k: d.table for k, d in db.definitions.items() if d.table is not None}
    return owners


def _commented(on: str) -> str:
    """The object a comment is on; a column's comment goes with its table."""
    if on.startswith("column:"):
        return "table:" + on.removeprefix("column:").rsplit(".", 1)[0]
    return on


def dry_run_scope(live: Database, desired: Database, changes: Iterable[Change]) -> set[str]:
    """The live objects a dry run of ``changes`` rebuilds (see the module docstring)."""
    live_keys = live.object_keys()
    touched: set[str] = set()
    for change in changes:
        touched.add(change.key)
        touched.update(change.tables)
        if change.key.startswith("comment:"):  # a comment goes with what it is on
            touched.add(_commented(change.key.removeprefix("comment:")))
        subject = change.after if change.after is not None else change.before
        if isinstance(subject, (Grant, Ownership)):  # so do a grant and an owner
            touched.add(object_of(subject.on))
    dependents: dict[str, set[str]] = defaultdict(set)
    needs: dict[str, set[str]] = defaultdict(set)
    for dependent, dependency in live.depends | desired.depends:
        needs[dependent].add(dependency)
    for dependent, dependency in live.depends:
        dependents[dependency].add(dependent)
    owners = {**_owners(desired), **_owners(live)}
    for sub, table in owners.items():  # a table's sub-objects go with it
        dependents[table].add(sub)
        needs[sub].add(table)
    affected = _closure(touched & live_keys, dependents)
    scope = _closure(affected | touched, needs) & live_keys
    for key, constraint in live.constraints.items():
        if constraint.table in scope and constraint.kind in ("p", "u"):
            scope.add(key)
    scope |= {k for k, d in live.definitions.items() if d.kind in _ALWAYS}
    return scope


def restrict(db: Database, keys: set[str]) -> Database:
    """``db`` with only the objects ``keys`` names (and their comments, grants and owners;
    default privileges belong to no object and are always kept)."""
    tables = {k: t for k, t in db.tables.items() if k in keys}
    comments = {k: c for k, c in db.comments.items() if _commented(c.on) in keys}
    return replace(
        db,
        grants={k: g for k, g in db.grants.items() if object_of(g.on) in keys},
        owners={k: o for k, o in db.owners.items() if object_of(o.on) in keys},
        tables=tables,
        constraints={k: c for k, c in db.constraints.items() if k in keys},
        indexes={k: i for k, i in db.indexes.items() if k in keys},
        sequences={k: s for k, s in db.sequences.items() if k in keys},
        definitions={k: d for k, d in db.definitions.items() if k in keys},
        comments=comments,
        depends=frozenset((a, b) for a, b in db.depends if a in keys and b in keys),
    )


def untouched_equal(
    live: Database,
    desired: Database,
    scope: set[str],
    differ: Callable[[Database, Database], list[Change]],
) -> bool:
    """Whether every live object outside ``scope`` is in the desired schema, unchanged."""
    outside = live.object_keys() - scope
    return not differ(restrict(live, outside), restrict(desired, outside))


def merged(live: Database, result: Database, scope: set[str], created: set[str]) -> Database:
    """The whole schema after the plan: the live objects outside ``scope``, and the dry
    run's ``result`` on the scope and the objects the plan ``created``."""
    outside = restrict(live, live.object_keys() - scope)
    inside = restrict(result, scope | created)
    return replace(
        live,
        tables={**outside.tables, **inside.tables},
        constraints={**outside.constraints, **inside.constraints},
        indexes={**outside.indexes, **inside.indexes},
        sequences={**outside.sequences, **inside.sequences},
        definitions={**outside.definitions, **inside.definitions},
        comments={**outside.comments, **inside.comments},
        grants={**outside.grants, **inside.grants},
        owners={**outside.owners, **inside.owners},
        default_grants=inside.default_grants,
        depends=frozenset(),
    )


def created_keys(live: Database, desired: Database) -> set[str]:
    """Objects the desired schema has and the live one does not."""
    return desired.object_keys() - live.object_keys()
