"""How a column's values convert when its type changes: PostgreSQL's cast rules, as data.

``ALTER COLUMN c TYPE t`` converts with an implicit or assignment cast, and fails when only
an explicit one exists; ``USING c::t`` takes explicit casts too, but an explicit cast may lose
what an assignment cast refuses (``varchar(200)`` to ``varchar(20)`` silently truncates with
``::``, and fails without it). So a plan says ``USING`` only when it is needed:

* ``assignment``: the same type with other modifiers, an implicit or assignment cast in
  ``pg_cast``, or the I/O conversion *to* a string type: no ``USING``;
* ``explicit``: an explicit cast, or the I/O conversion *from* a string type (text to an
  enum): ``USING c::t``;
* ``text``: one enum to another has no cast; both have text forms: ``USING c::text::t``;
* ``none``: no conversion at all (bigint to timestamp): the change is refused.

Domains convert as their base types; arrays as their elements. The cast table comes from
the catalog (:attr:`~runner.engines.model.Database.casts`); a model without one (MySQL,
SQLite) converts everything by assignment, as those servers do.
"""

from __future__ import annotations

import json
import re
from typing import Final, Literal

from runner.engines.model import Database

__all__ = ["CastMode", "cast_mode"]

CastMode = Literal["assignment", "explicit", "text", "none"]

_MODIFIERS: Final = re.compile(r"\([0-9, ]+\)")


def _bare(type_: str) -> str:
    """A type name without its modifiers (``numeric(10,2)`` -> ``numeric``), as
    ``format_type(oid, NULL)`` prints it."""
    return " ".join(_MODIFIERS.sub("", type_).split())


def _base(type_: str, models: tuple[Database, ...]) -> tuple[str, str]:
    """(the type a value of ``type_`` converts as, its definition kind): a domain is its base
    type, an enum or composite keeps its name."""
    name = _bare(type_)
    for _ in range(8):  # a domain over a domain over ...
        key = f"type:{name}"
        found = next((m.definitions[key] for m in models if key in m.definitions), None)
        if found is None or found.kind != "domain":
            return name, found.kind if found is not None else ""
        name = _bare(str(json.loads(found.fact("facts") or "{}").get("base", name)))
    return name, ""


def _scalar_mode(old: str, new: str, models: tuple[Database, ...]) -> CastMode:
    (a, a_kind), (b, b_kind) = _base(old, models), _base(new, models)
    if a == b:
        return "assignment"
    casts = frozenset().union(*(m.casts for m in models))
    contexts = {c for s, t, c in casts if (s, t) in ((a, b), ("", b), (a, ""))}
    if contexts & {"i", "a"}:
        return "assignment"
    if "e" in contexts:
        return "explicit"
    if a_kind == b_kind == "enum":
        return "text"
    return "none"


def cast_mode(old: str, new: str, live: Database, desired: Database) -> CastMode:
    """How a column of type ``old`` becomes ``new`` (see the module docstring)."""
    models = (live, desired)
    if not live.casts and not desired.casts:
        return "assignment"
    old_array, new_array = old.endswith("[]"), new.endswith("[]")
    if old_array and new_array:
        return _scalar_mode(old.removesuffix("[]"), new.removesuffix("[]"), models)
    if old_array or new_array:
        return "assignment" if _scalar_mode("anyarray", new, models) == "assignment" else "none"
    return _scalar_mode(old, new, models)
