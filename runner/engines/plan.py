"""The canonical plan document, its digest, and the SQL rendering made from it alone.

``plan.json`` is the canonical JSON of :class:`PlanDocument` (sorted keys, no whitespace,
UTF-8, integers only) followed by one newline; the plan's content digest is the SHA-256 of
those bytes. ``plan.sql`` is rendered from the document only, so what a reviewer reads in
Git is exactly what the apply path executes. Nothing host- or time-specific is in it.

Its comment lines carry names chosen by whoever wrote the desired schema (a table may be
called ``"x<newline>DROP TABLE important; --"``). A line break in a comment would end it and
make the rest a statement for ``psql -f``, the ``mariadb`` client or the ``sqlite3`` shell
(whose dot commands run programs), so :func:`comment_text` writes every character of a
comment that is not printable (control, format, line and paragraph separators) as an
escape (``\\n``, ``\\x1b``, ``\\u2028``).
"""

from __future__ import annotations

import itertools
import json
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

from runner.digests import CONTRACT_VERSION, Sha256, canonical_json, sha256_digest
from runner.engines.scope import Scope

__all__ = [
    "CLIENT_DELIMITED",
    "FORMAT_VERSION",
    "MAX_PLAN_BYTES",
    "UNRECORDED",
    "HazardEntry",
    "PlanDocument",
    "PlanPrivileges",
    "PlanStatement",
    "PlanSummary",
    "SkippedDrop",
    "comment_text",
    "plan_bytes",
    "plan_digest",
    "plan_header",
    "plan_sql",
    "read_plan",
    "sandbox_notes",
]

FORMAT_VERSION = 1
MAX_PLAN_BYTES = 8 * 1024 * 1024
Digest = Sha256


class _Frozen(BaseModel):
    # Validators are built on first use: a process uses a few of these models.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class HazardEntry(_Frozen):
    kind: Literal["destructive", "data", "lock", "privilege"]
    code: str


class PlanStatement(_Frozen):
    op: str
    key: str
    sql: str
    transactional: bool
    hazards: list[HazardEntry]


class PlanSummary(_Frozen):
    statements: int
    destructive: bool
    privilege_changes: list[str]
    hazards: dict[str, int]


class SkippedDrop(_Frozen):
    """A removal a ``drops: skip`` plan left out: what only the live schema has
    (:mod:`runner.engines.keep`). ``op`` is the change it would have been (``drop_table``,
    ``drop_column``, ``drop_index``, ``drop_definition``, ``set_row_security``, ``revoke``,
    ...), ``key`` the object, ``detail`` what of it (the privileges a revoke would take)."""

    op: str
    key: str
    detail: str


class PlanPrivileges(_Frozen):
    """The privileges a plan manages, so apply re-reads the live schema the same way."""

    managed_roles: list[str]
    manage_ownership: bool


class PlanDocument(_Frozen):
    """Everything a plan says; its bytes are what an approval ultimately authorizes."""

    contract_version: Literal[1] = 1
    format_version: Literal[1] = 1
    dialect: str
    server_major: int
    observed: Digest  # fingerprint of the live schema the plan was computed from
    desired: Digest  # fingerprint of the normalized desired schema
    expected: Digest  # fingerprint of the live schema once the plan has run (from the dry run)
    options: Digest  # digest of the planning options (exclude, protected tables, ...)
    exclude: list[str]  # the managed scope, so apply re-reads the live schema the same way
    # The schema scope; absent (not null, not empty) when unset, like ``privileges``.
    schemas: list[str] | None = None  # only these schemas
    exclude_schemas: list[str] | None = None  # never these
    statements: list[PlanStatement]
    summary: PlanSummary
    privileges: PlanPrivileges | None = None  # absent (not null) when none are managed
    # How the desired schema ran; absent (not null) for the defaults, like ``privileges``.
    procedural_schema: Literal[True] | None = None  # procedural statements ran (opt-in)
    sandbox_isolation: Literal["none"] | None = None  # the sandbox server ran without a jail
    # ``drops: Skip``: what only the live schema has is left alone; absent by default.
    drops: Literal["skip"] | None = None
    skipped: list[SkippedDrop] | None = None  # with ``drops``: what was left alone, sorted

    @property
    def empty(self) -> bool:
        return not self.statements

    @property
    def scope(self) -> Scope:
        """What of the database the plan manages: apply reads the live schema through it."""
        return Scope.of(self.exclude, self.schemas or (), self.exclude_schemas or ())


_OPTIONAL: Final = (
    "privileges",
    "schemas",
    "exclude_schemas",
    "procedural_schema",
    "sandbox_isolation",
    "drops",
    "skipped",
)


def plan_bytes(document: PlanDocument) -> bytes:
    """The exact bytes of ``plan.json``. The fields of :data:`_OPTIONAL` are left out when
    unset: a plan that uses none of them is byte for byte what it was before they existed."""
    unset = {name for name in _OPTIONAL if getattr(document, name) is None}
    return canonical_json(document.model_dump(mode="json", exclude=unset)) + b"\n"


def plan_digest(document: PlanDocument) -> str:
    """The plan's content digest: ``sha256`` of :func:`plan_bytes`."""
    assert document.contract_version == CONTRACT_VERSION
    return sha256_digest(plan_bytes(document))


def read_plan(data: bytes) -> PlanDocument:
    """Parse plan bytes; anything that is not a plan is a :class:`ValueError` (over
    :data:`MAX_PLAN_BYTES`, nested past the parser's depth, or text that is not Unicode: a
    lone surrogate escape would not survive being written out again)."""
    if len(data) > MAX_PLAN_BYTES:
        raise ValueError(f"plan is {len(data)} bytes; the limit is {MAX_PLAN_BYTES}")
    try:
        parsed = json.loads(data)
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        raise ValueError("the plan is nested too deeply") from None
    except UnicodeEncodeError:
        raise ValueError("the plan holds text that is not Unicode (a lone surrogate)") from None
    return PlanDocument.model_validate(parsed)


_NAMED_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    """One character as it may appear in a comment line (``str.isprintable`` is false for
    control, format, separator, surrogate and unassigned characters)."""
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def comment_text(text: str) -> str:
    """``text`` made safe for one SQL comment line: characters that could end the line or
    hide text from a reader are escaped, and so is the backslash (the escape is unambiguous)."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(char) for char in text)


CLIENT_DELIMITED: Final = frozenset({"mariadb", "mysql"})
"""Dialects whose command-line client ends a statement at every ``;`` it sees, even inside
a ``BEGIN ... END`` body, unless a ``DELIMITER`` line names another terminator."""


def _terminated(sql: str, dialect: str) -> list[str]:
    """``sql`` as lines a dialect's client runs as one statement."""
    if dialect not in CLIENT_DELIMITED or ";" not in sql:
        return [f"{sql};"]
    candidates = itertools.chain(("$$", "//"), (f"$${n}$$" for n in itertools.count(1)))
    delimiter = next(d for d in candidates if d not in sql)
    return [f"DELIMITER {delimiter}", f"{sql}{delimiter}", "DELIMITER ;"]


UNRECORDED: Final = "(not recorded)"
"""What the header names in place of a plan id when nobody recorded the plan (the runner's
own ``schema plan`` command): the id binds what only the control plane knows (the resource's
uid, the policies, the artifact's verification), so the runner never prints an id of its own."""


def plan_header(document: PlanDocument, plan_id: str | None) -> str:
    """The first line of ``plan.sql``: the plan id ``seshat approve --plan`` takes, the same
    id the status, ``seshat plan show`` and the review show; or, for a plan nobody recorded,
    :data:`UNRECORDED` and the content digest (which is not an id anything accepts)."""
    if plan_id is not None:
        return f"-- Seshat plan {plan_id}"
    return f"-- Seshat plan {UNRECORDED}; content {plan_digest(document)}"


def sandbox_notes(document: PlanDocument) -> list[str]:
    """Comment lines saying how the desired schema ran, when not as by default: procedural
    statements allowed (``proceduralSchema``), a sandbox server without its jail."""
    notes: list[str] = []
    if document.procedural_schema:
        notes.append("-- proceduralSchema: procedural statements of the desired schema ran")
    if document.sandbox_isolation == "none":
        notes.append("-- sandbox isolation: none (the sandbox server ran without its OS jail)")
    if document.drops == "skip":
        skipped = document.skipped or []
        notes.append(
            f"-- drops: skip; {len(skipped)} removal(s) left out (only in the database, left alone)"
        )
        for item in skipped:
            detail = f" ({item.detail})" if item.detail else ""
            notes.append(f"--   skipped: {comment_text(f'{item.op} {item.key}{detail}')}")
    return notes


def plan_sql(document: PlanDocument, plan_id: str | None = None) -> str:
    """``plan.sql``: a commented SQL rendering of the document and nothing else; its header
    names ``plan_id`` (:func:`plan_header`)."""
    lines = [
        plan_header(document, plan_id),
        f"-- {comment_text(str(document.dialect))} {document.server_major}; "
        f"{document.summary.statements} statements"
        + ("; DESTRUCTIVE" if document.summary.destructive else ""),
        *sandbox_notes(document),
        "",
    ]
    for number, statement in enumerate(document.statements, start=1):
        hazards = comment_text(",".join(h.code for h in statement.hazards) or "none")
        where = "" if statement.transactional else " (outside a transaction)"
        op, key = comment_text(statement.op), comment_text(statement.key)
        lines.append(f"-- [{number:04d}] {op} {key} hazards={hazards}{where}")
        lines += _terminated(statement.sql, document.dialect)
        lines.append("")
    return "\n".join(lines)
