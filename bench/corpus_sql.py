"""Statement splitting for the corpus loaders, independent of the engine's own splitter.

The scorer must not trust the engine to build its oracle, so it carries its own small
splitter. It understands what the PostgreSQL corpus uses: single-quoted strings (with
``''`` and, after ``E``, backslash escapes), quoted identifiers, dollar quoting
(``$$ … $$``, ``$tag$ … $tag$``), ``--`` comments and nested ``/* … */`` comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Statement", "split_postgresql"]

_DOLLAR = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_$\x80-\uffff]")


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of a script: its text (without the ``;``) and its first line."""

    sql: str
    line: int


def _only_comments(text: str) -> bool:
    stripped = re.sub(r"--[^\n]*", "", text)
    stripped = re.sub(r"/\*.*?\*/", "", stripped, flags=re.DOTALL)
    return not stripped.strip()


def _skip_block_comment(text: str, i: int) -> int:
    """Index just past the (possibly nested) block comment starting at ``text[i:i+2]``."""
    depth, i, n = 1, i + 2, len(text)
    while i < n and depth:
        if text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*/", i):
            depth, i = depth - 1, i + 2
        else:
            i += 1
    return i


def _skip_string(text: str, i: int, backslashes: bool) -> int:
    """Index just past the single-quoted string opening at ``text[i]``."""
    i, n = i + 1, len(text)
    while i < n:
        char = text[i]
        if backslashes and char == "\\":
            i += 2
            continue
        if char == "'":
            if i + 1 < n and text[i + 1] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    return n


def split_postgresql(text: str) -> list[Statement]:
    """Split a PostgreSQL script on top-level semicolons; comment-only pieces are dropped."""
    statements: list[Statement] = []
    start, i, n = 0, 0, len(text)

    def emit(end: int) -> None:
        piece = text[start:end]
        if not _only_comments(piece):
            lead = len(piece) - len(piece.lstrip())
            line = text.count("\n", 0, start + lead) + 1
            statements.append(Statement(piece.strip(), line))

    while i < n:
        char = text[i]
        if text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            i = _skip_block_comment(text, i)
        elif char == "'":
            prefix = text[i - 1] if i else ""
            before = text[i - 2] if i > 1 else ""
            escape = prefix in "Ee" and prefix != "" and not _IDENT_CHAR.match(before or " ")
            i = _skip_string(text, i, escape)
        elif char == '"':
            close = text.find('"', i + 1)
            while close >= 0 and text.startswith('""', close):
                close = text.find('"', close + 2)
            i = n if close < 0 else close + 1
        elif char == "$" and not (i and _IDENT_CHAR.match(text[i - 1])):
            match = _DOLLAR.match(text, i)
            if match is None:
                i += 1
                continue
            close = text.find(match.group(0), match.end())
            i = n if close < 0 else close + len(match.group(0))
        elif char == ";":
            emit(i)
            i += 1
            start = i
        else:
            i += 1
    emit(n)
    return statements
