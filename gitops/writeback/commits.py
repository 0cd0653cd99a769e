"""Seshat's commit messages: a subject, a body, and machine-readable trailers.

Trailers (``git interpret-trailers`` syntax, one per line at the end of the message): for
each resource the commit changes, a ``Seshat-Resource`` line followed by its ``Seshat-Phase``
and, when it has a current plan, its ``Seshat-Plan``; then, once, the declarations' commit
the pass read::

    Seshat-Resource: DatabaseSchema shop/orders
    Seshat-Phase: AwaitingApproval
    Seshat-Plan: sha256:...
    Seshat-Resource: DatabaseMigration shop/ledger
    Seshat-Phase: InSync
    Seshat-Source-Revision: 0123abcd...

A ``Seshat-Phase`` or ``Seshat-Plan`` belongs to the ``Seshat-Resource`` above it. A commit
that changes one resource reads exactly as it did before commits carried several.

A commit is Seshat's own when its author is the configured bot identity and it carries a
``Seshat-Resource`` trailer; Seshat skips its own commits when it looks for changes, so its
write-back never triggers another pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import git

from gitops.resources.config import CommitIdentity

__all__ = ["ResourceTrailers", "Trailers", "is_own_commit", "message", "parse_trailers"]

RESOURCE, PHASE, PLAN, SOURCE_REVISION = (
    "Seshat-Resource",
    "Seshat-Phase",
    "Seshat-Plan",
    "Seshat-Source-Revision",
)
_KEYS = (RESOURCE, PHASE, PLAN, SOURCE_REVISION)


@dataclass(frozen=True, slots=True)
class ResourceTrailers:
    """One resource's trailers: which resource, its phase and its current plan."""

    resource: str  # "DatabaseSchema shop/orders"
    phase: str
    plan: str | None = None

    def lines(self) -> list[str]:
        lines = [f"{RESOURCE}: {self.resource}", f"{PHASE}: {self.phase}"]
        return lines + ([f"{PLAN}: {self.plan}"] if self.plan else [])


@dataclass(frozen=True, slots=True)
class Trailers:
    """A commit's trailers: every resource it changes, and the declarations' commit."""

    resources: tuple[ResourceTrailers, ...] = ()
    source_revision: str | None = None

    @classmethod
    def one(
        cls, resource: str, phase: str, plan: str | None = None, source_revision: str | None = None
    ) -> Trailers:
        return cls((ResourceTrailers(resource, phase, plan),), source_revision)

    def lines(self) -> list[str]:
        lines = [line for r in self.resources for line in r.lines()]
        return lines + (
            [f"{SOURCE_REVISION}: {self.source_revision}"] if self.source_revision else []
        )


def message(subject: str, body: str, trailers: Trailers, records: Sequence[str] = ()) -> str:
    """A commit message: subject line, optional body, a blank line, then the trailers (and
    any ``Seshat-Record`` lines, see :mod:`gitops.writeback.ledger`)."""
    parts = [_one_line(subject)[:120] or "seshat"]
    if body.strip():
        parts.append(_paragraphs(body.strip()))
    parts.append("\n".join([*trailers.lines(), *records]))
    return "\n\n".join(parts) + "\n"


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def _paragraphs(text: str) -> str:
    """``text`` with no line that could pass for a trailer of Seshat's: a body may quote what
    a server or an artifact said."""
    return "\n".join(
        f" {line}" if line.split(":", 1)[0].strip() in (*_KEYS, "Seshat-Record") else line
        for line in text.splitlines()
    )


def parse_trailers(text: str) -> Trailers:
    """The Seshat trailers of a commit message (the last paragraph's ``Key: value`` lines);
    a phase or plan with no resource line above it is ignored."""
    paragraph = text.strip().split("\n\n")[-1]
    resources: list[ResourceTrailers] = []
    revision: str | None = None
    for line in paragraph.splitlines():
        key, sep, raw = line.partition(":")  # an indented line (a quoted one) is not a trailer
        value = raw.strip()
        if not sep or not value:
            continue
        if key == RESOURCE:
            resources.append(ResourceTrailers(value, ""))
        elif key == SOURCE_REVISION:
            revision = value
        elif key == PHASE and resources:
            resources[-1] = ResourceTrailers(resources[-1].resource, value, resources[-1].plan)
        elif key == PLAN and resources:
            resources[-1] = ResourceTrailers(resources[-1].resource, resources[-1].phase, value)
    return Trailers(tuple(resources), revision)


def is_own_commit(commit: git.Commit, identity: CommitIdentity) -> bool:
    """Whether ``commit`` was written by Seshat (bot author and a Seshat-Resource trailer)."""
    text = commit.message if isinstance(commit.message, str) else commit.message.decode()
    return commit.author.email == identity.email and bool(parse_trailers(text).resources)
