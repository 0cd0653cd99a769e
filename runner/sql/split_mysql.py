"""Splitting a MySQL/MariaDB script into statements, with the line each one starts on.

A ``;`` ends a statement except inside string literals (``'...'``, ``"..."``, with
backslash escapes), backquoted identifiers, comments (``-- ``, ``#``, ``/* */``, including
``/*! ... */`` version comments) and compound bodies: ``BEGIN ... END`` and ``CASE ... END``
(or ``END CASE``) nest, while ``END IF``, ``END LOOP``, ``END WHILE`` and ``END REPEAT``
close blocks that do not count. A ``DELIMITER x`` line (the ``mysql`` client's command)
changes the delimiter until the next one; the command itself is not a statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.sql.charsets import NAME
from runner.sql.split import Piece, emit_piece, skip_quoted, strip_block_comments

__all__ = ["MysqlLexing", "split_mysql"]


@dataclass(frozen=True, slots=True)
class MysqlLexing:
    """How a session reads quotes: its ``sql_mode`` decides (``NO_BACKSLASH_ESCAPES``: a
    backslash escapes nothing; ``ANSI_QUOTES``: double quotes name an identifier, in which a
    backslash escapes nothing either)."""

    backslash_escapes: bool = True
    ansi_quotes: bool = False


# A word (charsets.NAME) is an unquoted identifier or keyword: MySQL's identifier characters
# include U+0080 and up, so `größe` is one word (and `À` no longer fails to match where
# isalpha() said a word starts); only ASCII words can be keywords.
_DELIMITER = re.compile(r"[ \t]*DELIMITER[ \t]+(\S+)[ \t]*(?:\r?\n|$)", re.IGNORECASE)
_NOT_NESTING = frozenset({"IF", "LOOP", "WHILE", "REPEAT"})


def _keyword(word: str) -> str:
    """``word`` in upper case if it could be a keyword (``"begın".upper()`` is ``BEGIN``)."""
    return word.upper() if word.isascii() else ""


def _skip_space(script: str, i: int) -> int:
    while i < len(script) and script[i] in " \t\r\n":
        i += 1
    return i


def _dash_comment(script: str, i: int) -> bool:
    """``--`` starts a comment when a blank or a control character follows (or nothing), as
    the server reads it."""
    after = script[i + 2 : i + 3]
    return script.startswith("--", i) and (not after or ord(after) <= 32 or after == "\x7f")


def split_mysql(script: str, lexing: MysqlLexing = MysqlLexing()) -> list[Piece]:
    """The statements of ``script``, quotes read as a session with ``lexing`` reads them."""
    pieces: list[Piece] = []
    lines = [0, 1]  # (position, line) of the last piece emitted
    delimiter = ";"
    i, n, start = 0, len(script), 0
    depth = 0
    first_word = True  # no word seen yet in this statement
    while i < n:
        at_line_start = i == 0 or script[i - 1] == "\n"
        if at_line_start and (match := _DELIMITER.match(script, i)):
            emit_piece(script, start, i, pieces, lines, _strip_comments)
            delimiter = match.group(1)
            i = match.end()
            start, depth, first_word = i, 0, True
            continue
        ch = script[i]
        if script.startswith(delimiter, i) and depth == 0:
            emit_piece(script, start, i, pieces, lines, _strip_comments)
            i += len(delimiter)
            start, first_word = i, True
            continue
        if ch == "#" or (ch == "-" and _dash_comment(script, i)):
            end = script.find("\n", i)
            i = n if end < 0 else end + 1
        elif ch == "/" and script.startswith("/*", i):
            end = script.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in ("'", '"', "`"):
            backslash = lexing.backslash_escapes and not (
                ch == "`" or (ch == '"' and lexing.ansi_quotes)
            )
            i = skip_quoted(script, i, backslash=backslash)
            first_word = False
        elif (match := NAME.match(script, i)) is not None:
            word = _keyword(match.group(0))
            if word in ("BEGIN", "CASE") and not (word == "BEGIN" and first_word):
                depth += 1
            elif word == "END" and depth > 0:
                following = NAME.match(script, _skip_space(script, match.end()))
                closes = _keyword(following.group(0)) if following is not None else ""
                if closes not in _NOT_NESTING:
                    depth -= 1
                if closes == "CASE":  # END CASE closes the CASE; it opens nothing
                    first_word = False
                    i = following.end() if following is not None else match.end()
                    continue
            first_word = False
            i = match.end()
        else:
            i += 1
    emit_piece(script, start, n, pieces, lines, _strip_comments)
    return pieces


def _strip_comments(text: str) -> str:
    text = re.sub(r"(--(?=[\x00-\x20\x7f]|$)[^\n]*|#[^\n]*)", "", text, flags=re.MULTILINE)
    return strip_block_comments(text, keep="!")
