"""Seshat's commit messages: a subject, a body, and machine-readable trailers.

Trailers (``git interpret-trailers`` syntax, one per line at the end of the message)::

    Seshat-Resource: DatabaseSchema shop/orders
    Seshat-Phase: AwaitingApproval
    Seshat-Plan: sha256:...
    Seshat-Source-Revision: 0123abcd...

A commit is Seshat's own when its author is the configured bot identity and it carries a
``Seshat-Resource`` trailer; Seshat skips its own commits when it looks for changes, so its
write-back never triggers another pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import git

from gitops.resources.config import CommitIdentity

__all__ = ["Trailers", "is_own_commit", "message", "parse_trailers"]

_KEYS = ("Seshat-Resource", "Seshat-Phase", "Seshat-Plan", "Seshat-Source-Revision")


@dataclass(frozen=True, slots=True)
class Trailers:
    resource: str  # "DatabaseSchema shop/orders"
    phase: str
    plan: str | None = None
    source_revision: str | None = None

    def lines(self) -> list[str]:
        values = (self.resource, self.phase, self.plan, self.source_revision)
        return [f"{key}: {value}" for key, value in zip(_KEYS, values, strict=True) if value]


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


def parse_trailers(text: str) -> dict[str, str]:
    """The Seshat trailers of a commit message (the last paragraph's ``Key: value`` lines)."""
    paragraph = text.strip().split("\n\n")[-1]
    found: dict[str, str] = {}
    for line in paragraph.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in _KEYS:
            found[key.strip()] = value.strip()
    return found


def is_own_commit(commit: git.Commit, identity: CommitIdentity) -> bool:
    """Whether ``commit`` was written by Seshat (bot author and a Seshat-Resource trailer)."""
    text = commit.message if isinstance(commit.message, str) else commit.message.decode()
    return commit.author.email == identity.email and "Seshat-Resource" in parse_trailers(text)
