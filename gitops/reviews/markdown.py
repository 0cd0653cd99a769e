"""Markdown that carries untrusted text inertly: review files and pull request bodies.

What a review shows comes partly from an artifact (the plan's SQL, a server's message
quoting it): text whose author is not the reviewer. On a forge, markdown outside a code
block is live: ``@mentions`` notify people, images fetch addresses, links and HTML comments
can hide a statement's header. So every piece of such text is put in a fenced block whose
fence is longer than any backtick run inside it (it cannot be closed early), short values in
code spans that cannot be escaped, and nothing from an artifact anywhere else.
"""

from __future__ import annotations

import re

__all__ = ["MAX_BODY", "code", "fence", "fenced_length"]

MAX_BODY = 60_000
"""Review texts are cut to this many characters (GitHub refuses pull request bodies over
65,536), with a pointer to the full plan on the status branch."""

_BACKTICKS = re.compile(r"`+")


def _fence_for(text: str) -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def fence(text: str, info: str = "") -> str:
    """``text`` in a fenced code block nothing inside it can close."""
    marker = _fence_for(text)
    return f"{marker}{info}\n{text.rstrip()}\n{marker}"


def fenced_length(text: str, info: str = "") -> int:
    return len(fence(text, info))


def code(value: str, limit: int = 200) -> str:
    """A short value as an inline code span: one line, bounded, delimiters that fit."""
    flat = " ".join(value.split())[:limit]
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    ticks = "`" * (longest + 1)
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") or not flat else flat
    return f"{ticks}{padded}{ticks}"
