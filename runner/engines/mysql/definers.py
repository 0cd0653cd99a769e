"""Definers: who a view, trigger, event, procedure or function runs as, and where each one
in a model comes from.

An object's definer (``user@host``, as ``information_schema`` spells it) is part of its
definition (``DEFINER=`app`@`%` EVENT ...``) and a ``definer`` fact. The sandbox cannot
hold it: its user may not name another definer (:func:`~.sandbox.rewrite_definers` makes
every definer ``CURRENT_USER`` there). So:

* a desired object has a definer only when the desired SQL names one (``DEFINER=...``,
  read from the text, :func:`named_definers`); without one, the object belongs to whoever
  applies the plan, and the live object's definer is no difference (:func:`comparable`);
* the dry run's result gets the definers the target will have after the apply
  (:func:`expected_definers`): the one a planned statement names, else the applying
  account's for an object a statement creates, else the live one.

A definer that names ``CURRENT_USER`` is the applying account.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from runner.engines.model import Database, Definition
from runner.engines.mysql.quoting import ident
from runner.engines.plan import PlanStatement

__all__ = [
    "DEFINED_KINDS",
    "attach",
    "body_of",
    "comparable",
    "definer_of",
    "expected_definers",
    "named_definers",
    "split_account",
    "with_definer",
]

DEFINED_KINDS = frozenset({"event", "function", "procedure", "trigger", "view"})
"""The kinds of object that run as their definer."""

_PART = r"(?:`(?:[^`]|``)*`|'(?:[^'\\]|''|\\.)*'|\"(?:[^\"\\]|\"\"|\\.)*\"|[\w.$%-]+)"
_ACCOUNT = rf"(?:CURRENT_USER(?:\s*\(\s*\))?|{_PART}\s*@\s*{_PART})"
_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_CREATE = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:ALGORITHM\s*=\s*\w+\s+)?"
    rf"DEFINER\s*=\s*(?P<account>{_ACCOUNT})\s+(?:SQL\s+SECURITY\s+\w+\s+)?"
    r"(?P<kind>EVENT|PROCEDURE|FUNCTION|TRIGGER|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    rf"(?:{_NAME}\s*\.\s*)?(?P<name>{_NAME})",
    re.IGNORECASE,
)
_HEAD = re.compile(r"^ALGORITHM=\w+ ")


def _unquote(part: str) -> str:
    part = part.strip()
    if part[:1] == "`":
        return part[1:-1].replace("``", "`")
    if part[:1] in ("'", '"'):
        quote = part[0]
        inner = part[1:-1].replace(quote * 2, quote)
        return re.sub(r"\\(.)", r"\1", inner)
    return part


def _account(text: str, current: str) -> str:
    """``user@host`` for a parsed ``DEFINER`` value (``CURRENT_USER``: ``current``)."""
    if text.upper().startswith("CURRENT_USER"):
        return current
    parts = re.fullmatch(rf"({_PART})\s*@\s*({_PART})", text.strip())
    assert parts is not None  # the caller matched _ACCOUNT
    return f"{_unquote(parts.group(1))}@{_unquote(parts.group(2))}"


def split_account(account: str) -> tuple[str, str]:
    """(user, host) of ``user@host`` (a host has no ``@``; a user name may)."""
    user, _, host = account.rpartition("@")
    return user, host


def _clause(definer: str | None) -> str:
    if definer is None:
        return ""
    user, host = split_account(definer)
    return f"DEFINER={ident(user)}@{ident(host)} "


def definer_of(sql: str, current: str) -> tuple[str, str, str] | None:
    """(kind, name, ``user@host``) of a ``CREATE ... DEFINER=...`` statement, or ``None``."""
    match = _CREATE.match(sql)
    if match is None:
        return None
    return (
        match.group("kind").lower(),
        _unquote(match.group("name")),
        _account(match.group("account"), current),
    )


def named_definers(statements: Iterable[str], current: str) -> dict[tuple[str, str], str]:
    """The definer each desired statement names, by (kind, name); the last one wins, as the
    last ``CREATE OR REPLACE`` would. Trigger and routine names are case-insensitive."""
    found: dict[tuple[str, str], str] = {}
    for sql in statements:
        if (named := definer_of(sql, current)) is not None:
            kind, name, account = named
            found[(kind, name if kind == "view" else name.lower())] = account
    return found


def body_of(definition: Definition) -> str:
    """The definition without its definer clause (what its text says it does)."""
    return definition.definition.removeprefix(_clause(definition.fact("definer")))


def _created(body: str, definer: str | None, *, or_replace: bool = False) -> str:
    """``CREATE [OR REPLACE] [ALGORITHM=x] [DEFINER=...] <rest>`` of a definer-less body."""
    head = _HEAD.match(body)
    at = head.end() if head else 0
    verb = "CREATE OR REPLACE " if or_replace else "CREATE "
    return f"{verb}{body[:at]}{_clause(definer)}{body[at:]}"


def with_definer(definition: Definition, definer: str | None) -> Definition:
    """``definition`` owned by ``definer`` (``None``: by whoever creates it)."""
    body = body_of(definition)
    extra = tuple(sorted((k, v) for k, v in definition.extra if k != "definer"))
    if definer is not None:
        extra = tuple(sorted((*extra, ("definer", definer))))
    return dataclasses.replace(
        definition,
        definition=_clause(definer) + body,
        create=_created(body, definer),
        replace=(
            _created(body, definer, or_replace=True) if definition.replace is not None else None
        ),
        extra=extra,
    )


def _name_of(definition: Definition) -> tuple[str, str]:
    name = definition.key.split(":", 1)[1].split(".", 1)[1]
    return definition.kind, name if definition.kind == "view" else name.lower()


def _remapped(db: Database, definers: Mapping[str, str | None]) -> Database:
    definitions = dict(db.definitions)
    for key, definer in definers.items():
        if key in definitions:
            definitions[key] = with_definer(definitions[key], definer)
    return dataclasses.replace(db, definitions=definitions)


def attach(desired: Database, named: Mapping[tuple[str, str], str]) -> Database:
    """A desired model read from the sandbox, with the definers its SQL named (and no other:
    the sandbox's own user is nobody's definer on the target)."""
    definers = {
        key: named.get(_name_of(definition))
        for key, definition in desired.definitions.items()
        if definition.kind in DEFINED_KINDS
    }
    return _remapped(desired, definers)


def comparable(live: Database, desired: Database) -> Database:
    """``live`` with the definer left out of each object whose desired twin names none."""
    definers: dict[str, str | None] = {
        key: None
        for key, definition in live.definitions.items()
        if definition.fact("definer") is not None
        and key in desired.definitions
        and desired.definitions[key].fact("definer") is None
    }
    return _remapped(live, definers) if definers else live


_CREATING = frozenset({"create_definition", "replace_definition"})


def expected_definers(
    result: Database, baseline: Database, statements: Sequence[PlanStatement], current: str
) -> Database:
    """The dry run's ``result`` with the definers the target will have after the apply."""
    created = {s.key: s.sql for s in statements if s.op in _CREATING}
    definers: dict[str, str | None] = {}
    for key, definition in result.definitions.items():
        if definition.kind not in DEFINED_KINDS:
            continue
        if key in created:
            named = definer_of(created[key], current)
            definers[key] = named[2] if named is not None else current
        elif key in baseline.definitions:
            definers[key] = baseline.definitions[key].fact("definer")
        else:
            definers[key] = current
    return _remapped(result, definers)
