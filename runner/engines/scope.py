"""The managed scope, applied to both sides before anything compares.

Two ways to narrow it, combinable:

* **schemas**: ``schemas`` (only these are managed; empty: every schema) and
  ``exclude_schemas`` (never these). An object's schema is the first part of its qualified
  name; a schema itself (``CREATE SCHEMA``) and an extension (by the schema it is installed
  in) are judged the same way.
* **exclude** patterns: a shell-style glob matched against an object's qualified name
  (``audit.events``, ``public.orders.orders_pkey`` for a constraint).

Sub-objects of a table out of scope (its constraints, indexes, triggers, policies, comments)
go with it. What is out of scope is never planned, never dropped and not fingerprinted: the
objects of a database shared with another tool are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Final

from runner.engines.model import Database, object_of

__all__ = ["EVERYTHING", "Scope", "apply_scope"]


@dataclass(frozen=True, slots=True)
class Scope:
    """What of a database a plan manages (see the module docstring)."""

    exclude: tuple[str, ...] = ()
    schemas: tuple[str, ...] = ()
    exclude_schemas: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        exclude: Sequence[str] = (),
        schemas: Sequence[str] = (),
        exclude_schemas: Sequence[str] = (),
    ) -> Scope:
        """A scope with each list sorted and without repeats (so equal scopes are equal)."""
        return cls(
            tuple(sorted(set(exclude))),
            tuple(sorted(set(schemas))),
            tuple(sorted(set(exclude_schemas))),
        )

    @property
    def everything(self) -> bool:
        return not (self.exclude or self.schemas or self.exclude_schemas)

    def key(self) -> dict[str, list[str]]:
        """The scope in a cache key or digest. The schema lists are named only when set, so
        a key without them is what it was before they existed."""
        key = {"exclude": sorted(set(self.exclude))}
        if self.schemas:
            key["schemas"] = sorted(set(self.schemas))
        if self.exclude_schemas:
            key["excludeSchemas"] = sorted(set(self.exclude_schemas))
        return key

    def schema_in(self, schema: str) -> bool:
        if schema in self.exclude_schemas:
            return False
        return not self.schemas or schema in self.schemas


EVERYTHING: Final = Scope()
"""The whole database (the default)."""


def _body(key: str) -> str:
    return key.split(":", 1)[1] if ":" in key else key


def _schema_of(key: str, db: Database) -> str:
    """The schema an object lives in, read from its key (an extension's from where it is
    installed: its definition is ``name schema``)."""
    kind, _, body = key.partition(":")
    if kind == "schema":
        return body
    if kind == "extension":
        definition = db.definitions.get(key)
        return definition.definition.split(" ", 1)[-1] if definition else ""
    if kind == "comment":
        return _schema_of(body, db)
    return body.split(".", 1)[0]


def apply_scope(db: Database, scope: Scope) -> Database:
    """``db`` without the objects out of ``scope``."""
    if scope.everything:
        return db
    patterns = scope.exclude

    def excluded(key: str, owner: str | None = None) -> bool:
        if not scope.schema_in(_schema_of(key, db)):
            return True
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
