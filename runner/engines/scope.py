"""The managed scope: ``exclude`` patterns, applied to both sides before anything compares.

A pattern is a shell-style glob matched against an object's qualified name
(``audit.events``, ``public.orders_pkey`` for constraints as ``public.orders.orders_pkey``);
sub-objects of an excluded table (its constraints, indexes, triggers, policies, comments) are
excluded with it. What is excluded is never planned, never dropped and not fingerprinted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fnmatch import fnmatchcase

from runner.engines.model import Database, object_of

__all__ = ["apply_exclude"]


def _body(key: str) -> str:
    return key.split(":", 1)[1] if ":" in key else key


def apply_exclude(db: Database, patterns: Sequence[str]) -> Database:
    """``db`` without the objects ``patterns`` exclude."""
    if not patterns:
        return db

    def excluded(key: str, owner: str | None = None) -> bool:
        names = [_body(key)] + ([_body(owner)] if owner else [])
        return any(fnmatchcase(n, p) for n in names for p in patterns)

    tables = {k: t for k, t in db.tables.items() if not excluded(k)}
    kept_owner = set(tables) | {k for k in db.definitions if not excluded(k)}
    constraints = {k: c for k, c in db.constraints.items() if c.table in tables and not excluded(k)}
    indexes = {k: i for k, i in db.indexes.items() if i.table in kept_owner and not excluded(k)}
    sequences = {k: s for k, s in db.sequences.items() if not excluded(k)}
    definitions = {
        k: d
        for k, d in db.definitions.items()
        if not excluded(k, d.table) and (d.table is None or d.table in kept_owner)
    }
    keys = set(tables) | set(constraints) | set(indexes) | set(sequences) | set(definitions)
    comments = {
        k: c
        for k, c in db.comments.items()
        if c.on in keys
        or (c.on.startswith("column:") and "table:" + _body(c.on).rsplit(".", 1)[0] in tables)
    }
    depends = frozenset((a, b) for a, b in db.depends if a in keys and b in keys)
    grants = {k: g for k, g in db.grants.items() if object_of(g.on) in keys}
    owners = {k: o for k, o in db.owners.items() if object_of(o.on) in keys}
    return replace(
        db,
        grants=grants,
        owners=owners,
        tables=tables,
        constraints=constraints,
        indexes=indexes,
        sequences=sequences,
        definitions=definitions,
        comments=comments,
        depends=depends,
    )
