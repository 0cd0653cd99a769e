"""Reading SQL text as each server lexes it, as far as classifying a statement needs.

A token is a keyword or unquoted name (upper case), a quoted name, a string (a dollar-quoted
body too), a number, a symbol, a MySQL variable (``@v``, ``@@v``) or a PostgreSQL parameter;
comments are dropped, and each token knows how many parentheses are open before it. What
matters is that text the server reads as code is never taken for a string or a comment here:
PostgreSQL nests ``/* */`` and reads ``E'...'`` only at a word's start; MySQL runs the content
of ``/*! */`` and ``/*M! */`` (mysqldump writes them), takes ``--`` before a blank or a
control character and ``#`` for comments, and reads quotes as the session's ``sql_mode``
says (:class:`~runner.sql.split_mysql.MysqlLexing`); SQLite has no backslash escapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.sql.charsets import NAME, NAME_PART, NAME_PART_NO_DOLLAR, NAME_START, VARIABLE_PART
from runner.sql.split import block_comment_end
from runner.sql.split_mysql import MysqlLexing

__all__ = [
    "Token",
    "Unreadable",
    "block_comment_end",
    "mysql_tokens",
    "postgresql_outer_words",
    "postgresql_tokens",
    "sqlite_tokens",
]


@dataclass(frozen=True, slots=True)
class Token:
    """One token of a statement."""

    kind: str  # word, name, string, number, symbol, variable, sysvar, param
    value: str  # a word upper case; a name, string or variable as written, unquoted
    start: int
    end: int
    depth: int  # parentheses open before it


class Unreadable(Exception):
    """Text whose reading by the server this module cannot be sure of."""


_SPACE = re.compile(r"\s+")
_PLAIN_STRING = re.compile(r"'(?:[^']|'')*(?:'|$)")
_ESCAPE_STRING = re.compile(r"'(?:[^'\\]|\\.|'')*(?:'|\\?\Z)", re.DOTALL)
_DOUBLE_NAME = re.compile(r'"(?:[^"]|"")*(?:"|$)')
_BACK_NAME = re.compile(r"`(?:[^`]|``)*(?:`|$)")
_BRACKET_NAME = re.compile(r"\[[^\]]*(?:\]|$)")
_DOUBLE_STRING = re.compile(r'"(?:[^"\\]|\\.|"")*(?:"|\\?\Z)', re.DOTALL)
_PLAIN_DOUBLE = re.compile(r'"(?:[^"]|"")*(?:"|$)')
_MY_WORD = re.compile(rf"{NAME_PART}+")
_MY_VARIABLE = re.compile(rf"{VARIABLE_PART}+")
_MY_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|0x[0-9A-Fa-f]+")
_MY_EXECUTABLE = re.compile(r"/\*(M?)!([0-9]{0,6})")


def _unquote(text: str, quote: str) -> str:
    inner = text[1:-1] if len(text) >= 2 and text.endswith(quote) else text[1:]
    return inner.replace(quote * 2, quote)


_PG_TOKEN = re.compile(
    rf"""
      (?P<space>\s+)
    | (?P<line>--[^\n]*)
    | (?P<block>/\*)
    | (?P<escape>[eE](?='))
    | (?P<unicode>[uU]&(?=['"]))
    | (?P<prefix>[bBxXnN](?='))
    | (?P<string>'(?:[^']|'')*(?:'|\Z))
    | (?P<name>"(?:[^"]|"")*(?:"|\Z))
    | (?P<param>\$[0-9]+)
    | (?P<dollar>\$(?:{NAME_START}{NAME_PART_NO_DOLLAR}*)?\$)
    | (?P<word>{NAME_START}{NAME_PART}*)
    | (?P<number>(?:[0-9]|\.[0-9])[0-9A-Za-z_.]*)
    | (?P<symbol>.)
    """,
    re.VERBOSE | re.DOTALL,
)
"""One PostgreSQL token at a token's start (a string prefix is read with its string: ``E``
only where a word would start, so ``a$E'..'`` is the name ``a$E`` and a plain string)."""


def _symbol(tokens: list[Token], ch: str, start: int, end: int, depth: int) -> int:
    """Append the symbol ``ch`` (``sql[start:end]``) at parenthesis ``depth``; the depth after
    it. Every tokenizer counts alike: a parenthesis stands at the depth outside it."""
    if ch == ")":
        depth = max(0, depth - 1)
    tokens.append(Token("symbol", ch, start, end, depth))
    return depth + 1 if ch == "(" else depth


def postgresql_tokens(sql: str, limit: int | None = None) -> list[Token]:
    """PostgreSQL's lexer, as far as a classification needs it (``standard_conforming_strings``
    on, which the runner sets and no allowed statement changes); the first ``limit`` tokens
    only, if given."""
    tokens: list[Token] = []
    i, n, depth = 0, len(sql), 0
    match = _PG_TOKEN.match
    while i < n and (limit is None or len(tokens) < limit):
        found = match(sql, i)
        assert found is not None  # the last alternative takes any character
        kind, start, i = found.lastgroup, i, found.end()
        if kind in ("space", "line"):
            continue
        if kind == "block":
            i = block_comment_end(sql, start, nested=True)
        elif kind == "word":
            tokens.append(Token("word", found.group().upper(), start, i, depth))
        elif kind == "string":
            tokens.append(Token("string", _unquote(found.group(), "'"), start, i, depth))
        elif kind == "name":
            tokens.append(Token("name", _unquote(found.group(), '"'), start, i, depth))
        elif kind == "escape":
            i = _ESCAPE_STRING.match(sql, i).end()  # type: ignore[union-attr]
            tokens.append(Token("string", sql[start + 2 : i - 1], start, i, depth))
        elif kind == "unicode":
            quote = sql[i]
            pattern = _PLAIN_STRING if quote == "'" else _DOUBLE_NAME
            i = pattern.match(sql, i).end()  # type: ignore[union-attr]
            value = _unquote(sql[start + 2 : i], quote)
            tokens.append(Token("string" if quote == "'" else "name", value, start, i, depth))
        elif kind == "prefix":
            i = _PLAIN_STRING.match(sql, i).end()  # type: ignore[union-attr]
            tokens.append(Token("string", _unquote(sql[start + 1 : i], "'"), start, i, depth))
        elif kind == "dollar":
            tag = found.group()
            end = sql.find(tag, i)
            body = sql[i : end if end >= 0 else n]
            i = n if end < 0 else end + len(tag)
            tokens.append(Token("string", body, start, i, depth))
        elif kind in ("param", "number"):
            tokens.append(Token(kind, found.group(), start, i, depth))
        else:
            depth = _symbol(tokens, found.group(), start, i, depth)
    return tokens


def postgresql_outer_words(sql: str) -> set[str]:
    """The words (upper case) outside every parenthesis of a PostgreSQL statement: what
    :func:`postgresql_tokens` would give at depth 0, read without building the tokens (a
    large schema's CREATE TABLE statements are read whole for the ``AS`` of a query)."""
    words: set[str] = set()
    i, n, depth = 0, len(sql), 0
    match = _PG_TOKEN.match
    while i < n:
        found = match(sql, i)
        assert found is not None
        kind, i = found.lastgroup, found.end()
        if kind == "word":
            if depth == 0:
                words.add(found.group().upper())
        elif kind == "symbol":
            ch = found.group()
            depth = depth + 1 if ch == "(" else max(0, depth - 1) if ch == ")" else depth
        elif kind == "block":
            i = block_comment_end(sql, found.start(), nested=True)
        elif kind == "escape":
            i = _ESCAPE_STRING.match(sql, i).end()  # type: ignore[union-attr]
        elif kind == "unicode":
            pattern = _PLAIN_STRING if sql[i] == "'" else _DOUBLE_NAME
            i = pattern.match(sql, i).end()  # type: ignore[union-attr]
        elif kind == "prefix":
            i = _PLAIN_STRING.match(sql, i).end()  # type: ignore[union-attr]
        elif kind == "dollar":
            end = sql.find(found.group(), i)
            i = n if end < 0 else end + len(found.group())
    return words


def _mysql_comment_dash(sql: str, i: int) -> bool:
    """``--`` starts a comment when a blank or a control character (or the end) follows."""
    after = sql[i + 2 : i + 3]
    return sql.startswith("--", i) and (not after or ord(after) <= 32 or after == "\x7f")


def mysql_tokens(sql: str, lexing: MysqlLexing) -> list[Token]:
    """MySQL's and MariaDB's lexer, as far as a classification needs it: the content of
    ``/*! */`` and ``/*M! */`` comments is code. A comment inside one of those is refused as
    unreadable (the servers disagree on it; mysqldump never writes one)."""
    tokens: list[Token] = []
    i, n, depth = 0, len(sql), 0
    executable = False  # inside /*! ... */
    single = _ESCAPE_STRING if lexing.backslash_escapes else _PLAIN_STRING
    double_string = _DOUBLE_STRING if lexing.backslash_escapes else _PLAIN_DOUBLE
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i = _SPACE.match(sql, i).end()  # type: ignore[union-attr]
            continue
        if executable and sql.startswith("*/", i):
            executable, i = False, i + 2
            continue
        if ch == "#" or _mysql_comment_dash(sql, i) or sql.startswith("/*", i):
            if executable:
                raise Unreadable("a comment inside /*! ... */")
            if ch != "/":
                end = sql.find("\n", i)
                i = n if end < 0 else end + 1
                continue
            opening = _MY_EXECUTABLE.match(sql, i)
            if opening is not None and not (opening.group(1) and opening.group(2) == "999999"):
                executable, i = True, opening.end()
                continue
            i = block_comment_end(sql, i, nested=False)  # a comment, or MariaDB's never-run 999999
            continue
        start = i
        if ch == "'":
            i = single.match(sql, i).end()  # type: ignore[union-attr]
            tokens.append(Token("string", _unquote(sql[start:i], "'"), start, i, depth))
        elif ch == '"':
            if lexing.ansi_quotes:
                i = _DOUBLE_NAME.match(sql, i).end()  # type: ignore[union-attr]
                tokens.append(Token("name", _unquote(sql[start:i], '"'), start, i, depth))
            else:
                i = double_string.match(sql, i).end()  # type: ignore[union-attr]
                tokens.append(Token("string", _unquote(sql[start:i], '"'), start, i, depth))
        elif ch == "`":
            i = _BACK_NAME.match(sql, i).end()  # type: ignore[union-attr]
            tokens.append(Token("name", _unquote(sql[start:i], "`"), start, i, depth))
        elif ch == "@":
            system = sql.startswith("@@", i)
            i += 2 if system else 1
            quote = sql[i : i + 1]
            if not system and quote in ("'", '"', "`"):
                pattern = {"'": single, '"': double_string, "`": _BACK_NAME}[quote]
                i = pattern.match(sql, i).end()  # type: ignore[union-attr]
                name = _unquote(sql[start + 1 : i], quote)
            else:
                found = _MY_VARIABLE.match(sql, i)
                i = found.end() if found is not None else i
                name = sql[start + (2 if system else 1) : i]
            tokens.append(Token("sysvar" if system else "variable", name.lower(), start, i, depth))
        elif (word := _MY_WORD.match(sql, i)) is not None:
            number = _MY_NUMBER.match(sql, i)
            if number is not None and number.end() >= word.end():
                i = number.end()
                tokens.append(Token("number", sql[start:i], start, i, depth))
            else:
                i = word.end()
                tokens.append(Token("word", word.group(0).upper(), start, i, depth))
        else:
            i += 1
            depth = _symbol(tokens, ch, start, i, depth)
    return tokens


_SQLITE_NUMBER = re.compile(r"[0-9.][0-9A-Za-z_.]*")


def sqlite_tokens(sql: str) -> list[Token]:
    """SQLite's tokenizer, as far as a classification needs it (no backslash escapes; names
    in double quotes, backquotes or brackets)."""
    tokens: list[Token] = []
    i, n, depth = 0, len(sql), 0
    names = {'"': (_DOUBLE_NAME, '"'), "`": (_BACK_NAME, "`"), "[": (_BRACKET_NAME, "]")}
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i = _SPACE.match(sql, i).end()  # type: ignore[union-attr]
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            i = block_comment_end(sql, i, nested=False)
            continue
        start = i
        if ch == "'":
            i = _PLAIN_STRING.match(sql, i).end()  # type: ignore[union-attr]
            tokens.append(Token("string", _unquote(sql[start:i], "'"), start, i, depth))
        elif ch in names:
            pattern, closing = names[ch]
            i = pattern.match(sql, i).end()  # type: ignore[union-attr]
            value = sql[start + 1 : i - 1] if sql[i - 1 : i] == closing else sql[start + 1 : i]
            tokens.append(Token("name", value.replace(closing * 2, closing), start, i, depth))
        elif (word := NAME.match(sql, i)) is not None:
            i = word.end()
            tokens.append(Token("word", word.group(0).upper(), start, i, depth))
        elif ch.isdigit() or (ch == "." and sql[i + 1 : i + 2].isdigit()):
            i = _SQLITE_NUMBER.match(sql, i).end()  # type: ignore[union-attr]
            tokens.append(Token("number", sql[start:i], start, i, depth))
        else:
            i += 1
            depth = _symbol(tokens, ch, start, i, depth)
    return tokens
