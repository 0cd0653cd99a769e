"""Splitting a PostgreSQL script into statements, with the line each one starts on.

Semicolons inside string literals (``'...'``, ``E'...'``), quoted identifiers, dollar-quoted
bodies (``$$ ... $$``, ``$fn$ ... $fn$``) and comments (``--`` and nested ``/* */``) do not
end a statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from runner.sql.charsets import DOLLAR_QUOTE, NAME

__all__ = [
    "Piece",
    "block_comment_end",
    "emit_piece",
    "skip_quoted",
    "split_postgresql",
    "strip_block_comments",
]


@dataclass(frozen=True, slots=True)
class Piece:
    sql: str
    line: int  # 1-based line of the statement's first character


_ROUTINE_HEADS = (("CREATE", "FUNCTION"), ("CREATE", "PROCEDURE"))


def split_postgresql(script: str) -> list[Piece]:
    pieces: list[Piece] = []
    lines = [0, 1]
    i, n, start = 0, len(script), 0
    # A SQL-standard routine body (``BEGIN ATOMIC ... END``) holds semicolons. As psql counts
    # them: in a statement that starts CREATE [OR REPLACE] FUNCTION|PROCEDURE, outside
    # parentheses, BEGIN opens a block, CASE inside one opens another, END closes one, and a
    # semicolon inside a block does not end the statement.
    head: list[str] = []  # the statement's first words, upper case (at most four)
    routine = False  # the statement creates a function or a procedure
    body = 0  # blocks open
    parens = 0  # parentheses open (in a routine)
    while i < n:
        ch = script[i]
        if ch == "-" and script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end + 1
        elif ch == "/" and script.startswith("/*", i):
            i = block_comment_end(script, i)
        elif ch in ("'", '"'):
            i = skip_quoted(script, i, backslash=False)
        elif (name := NAME.match(script, i)) is not None:
            i = name.end()
            if i - name.start() == 1 and ch in "eE" and script.startswith("'", i):
                i = skip_quoted(script, i, backslash=True)  # E'...': backslashes escape
                continue
            if len(head) < 4:
                head.append(name.group(0).upper())
                kept = tuple(w for w in head if w not in ("OR", "REPLACE"))[:2]
                routine = kept in _ROUTINE_HEADS
            if routine and parens == 0:
                word = name.group(0).upper()
                if word == "BEGIN" or (word == "CASE" and body > 0):
                    body += 1
                elif word == "END" and body > 0:
                    body -= 1
        elif ch == "$" and (match := DOLLAR_QUOTE.match(script, i)):
            tag = match.group(0)
            end = script.find(tag, match.end())
            i = n if end < 0 else end + len(tag)
        elif ch == ";" and body == 0:
            emit_piece(script, start, i, pieces, lines, _strip_comments)
            i += 1
            start = i
            head, routine, parens = [], False, 0
        else:
            if routine and ch in "()":
                parens = parens + 1 if ch == "(" else max(0, parens - 1)
            i += 1
    emit_piece(script, start, n, pieces, lines, _strip_comments)
    return pieces


def skip_quoted(script: str, i: int, *, backslash: bool) -> int:
    """The position just past the quoted text that starts at ``i`` (its first character is
    the quote): a doubled quote does not end it, nor, with ``backslash``, an escaped one."""
    quote, n = script[i], len(script)
    i += 1
    while i < n:
        if backslash and script[i] == "\\":
            i += 2
            continue
        if script[i] == quote:
            if i + 1 < n and script[i + 1] == quote:
                i += 2
                continue
            break
        i += 1
    return i + 1


def emit_piece(
    script: str,
    start: int,
    end: int,
    pieces: list[Piece],
    lines: list[int],
    strip_comments: Callable[[str], str],
) -> None:
    """Append ``script[start:end]`` to ``pieces`` unless it holds nothing but comments
    (``strip_comments``, the dialect's) and white space."""
    text = script[start:end]
    if not strip_comments(text).strip():
        return
    offset = start + (len(text) - len(text.lstrip()))
    # ``lines`` carries (position, line) of the last piece, so counting stays linear: from
    # the start each time, 100,000 statements took seconds.
    lines[1] += script.count("\n", lines[0], offset)
    lines[0] = offset
    pieces.append(Piece(text.strip(), lines[1]))


def _strip_comments(text: str) -> str:
    text = re.sub(r"--[^\n]*", "", text)
    return strip_block_comments(text)


def block_comment_end(sql: str, i: int, nested: bool = True) -> int:
    """The position after the ``/* ... */`` comment starting at ``i`` (nested or not)."""
    if not nested:
        end = sql.find("*/", i + 2)
        return len(sql) if end < 0 else end + 2
    depth, i, n = 1, i + 2, len(sql)
    while i < n and depth:
        if sql.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif sql.startswith("*/", i):
            depth, i = depth - 1, i + 2
        else:
            i += 1
    return i


def strip_block_comments(text: str, keep: str | None = None) -> str:
    """``text`` without ``/* ... */`` comments (not nested: each ends at the first ``*/``),
    except those that start with ``/*`` and then ``keep`` (MySQL's ``/*!`` comments are code).

    What ``re.sub(r"/\\*.*?\\*/", "", text, flags=re.DOTALL)`` does, in linear time: that
    regular expression scans to the end for every ``/*`` that has no ``*/`` after it, so
    150 KB of ``/* `` took half a minute.
    """
    if "/*" not in text:
        return text
    kept: list[str] = []
    done = start = 0
    while (opening := text.find("/*", start)) >= 0:
        if keep is not None and text.startswith(keep, opening + 2):
            start = opening + 1
            continue
        closing = text.find("*/", opening + 2)
        if closing < 0:
            break  # no comment ends after this one, so none after it does either
        kept.append(text[done:opening])
        done = start = closing + 2
    kept.append(text[done:])
    return "".join(kept)
