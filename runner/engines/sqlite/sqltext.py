"""Reading SQLite's stored CREATE text with sqlglot's SQLite tokenizer.

The pragmas tell columns, types, defaults, NOT NULL, primary keys, unique constraints,
foreign keys and index columns; what they do not tell (CHECK constraints, column
collations, generation expressions, AUTOINCREMENT, constraint names) is read here from
``sqlite_schema.sql``. The text is tokenized by sqlglot (strings, quoted identifiers in all
four SQLite spellings, comments) and read by a small recursive reader over the tokens, so a
comma or parenthesis inside a string or a nested expression never confuses it.

sqlglot is imported when the first text is tokenized, not with this module: importing it
costs more than a whole runner start should, and a runner that reads an unchanged catalog
from the planning cache (:mod:`runner.engines.sqlite.introspect`) tokenizes nothing. The
reader therefore knows tokens by its own :class:`Kind`, not by sqlglot's ``TokenType``.

:func:`normalize` is the canonical spelling two definitions are compared in: the tokens'
own source text joined by single spaces, comments dropped, identifiers unquoted where
quoting changes nothing. Case is kept, so a normalized text is still valid SQL with the
meaning of the original.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cache, lru_cache
from typing import TYPE_CHECKING

from runner.errors import SeshatError

if TYPE_CHECKING:
    from sqlglot.tokenizer_core import Token, TokenType

__all__ = [
    "ColumnText",
    "Kind",
    "Piece",
    "SqlTextError",
    "TableText",
    "ident",
    "normalize",
    "parse_create_table",
    "split_script",
    "tokens",
]

_TABLE_CONSTRAINTS = {"CONSTRAINT", "PRIMARY KEY", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN KEY"}


class SqlTextError(SeshatError):
    """Stored or desired SQL text that the reader cannot tokenize."""


class Kind(Enum):
    """The kinds of token the reader tells apart, named as sqlglot's ``TokenType`` names
    them; every other token (a keyword, an operator, a number) is ``OTHER``."""

    IDENTIFIER = "IDENTIFIER"  # a quoted name
    VAR = "VAR"  # an unquoted name (a word that is not a keyword)
    STRING = "STRING"
    L_PAREN = "L_PAREN"
    R_PAREN = "R_PAREN"
    COMMA = "COMMA"
    DOT = "DOT"
    AUTO_INCREMENT = "AUTO_INCREMENT"
    OTHER = "OTHER"


@dataclass(frozen=True, slots=True)
class Piece:
    """One token: its kind, its value (unquoted for identifiers) and its source spelling."""

    kind: Kind
    text: str
    source: str
    start: int
    end: int  # inclusive, as sqlglot reports it

    @property
    def word(self) -> str:
        """The keyword spelling (upper case, single spaces); empty for names and literals."""
        if self.kind in (Kind.IDENTIFIER, Kind.STRING):
            return ""
        return " ".join(self.text.upper().split())


def tokens(sql: str) -> list[Piece]:
    """The tokens of ``sql`` (comments dropped)."""
    return list(_tokens(sql))


def _tokenize(sql: str) -> list[Token]:
    """sqlglot's SQLite tokens of ``sql``, or :class:`SqlTextError` (sqlglot is imported
    here, on first use: see the module docstring)."""
    from sqlglot.dialects.sqlite import SQLite
    from sqlglot.errors import TokenError

    try:
        found: list[Token] = SQLite().tokenizer().tokenize(sql)
    except TokenError as error:
        raise SqlTextError(f"cannot read SQL text: {str(error).splitlines()[0]}") from None
    return found


@cache
def _kinds() -> dict[TokenType, Kind]:
    """The kind of each of sqlglot's token types the reader tells apart."""
    from sqlglot.tokenizer_core import TokenType

    return {TokenType[kind.value]: kind for kind in Kind if kind is not Kind.OTHER}


@lru_cache(maxsize=65536)
def _tokens(sql: str) -> tuple[Piece, ...]:
    # Cached: a plan reads the same stored text up to three times (live, desired, dry run).
    kinds = _kinds()
    return tuple(
        Piece(kinds.get(t.token_type, Kind.OTHER), t.text, sql[t.start : t.end + 1], t.start, t.end)
        for t in _tokenize(sql)
    )


def ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@lru_cache(maxsize=4096)
def _bare(name: str) -> str:
    """``name`` unquoted if it reads back as the same plain identifier, else quoted."""
    if (
        name
        and (name[0].isalpha() or name[0] == "_")
        and all(c.isalnum() or c == "_" for c in name)
    ):
        try:
            found = _tokenize(name)
        except SqlTextError:
            return ident(name)
        if (
            len(found) == 1
            and _kinds().get(found[0].token_type) is Kind.VAR
            and found[0].text == name
        ):
            return name
    return ident(name)


def _spelling(piece: Piece) -> str:
    return _bare(piece.text) if piece.kind is Kind.IDENTIFIER else piece.source


def normalize(pieces: list[Piece] | str) -> str:
    """The canonical spelling of a token sequence (see the module docstring)."""
    if isinstance(pieces, str):
        return _normalize_text(pieces)
    return " ".join(_spelling(p) for p in pieces)


@lru_cache(maxsize=65536)
def _normalize_text(sql: str) -> str:
    return " ".join(_spelling(p) for p in _tokens(sql))


def _close(pieces: list[Piece], index: int) -> int:
    """Index of the parenthesis closing the one at ``pieces[index]``."""
    depth = 0
    for position in range(index, len(pieces)):
        kind = pieces[position].kind
        if kind is Kind.L_PAREN:
            depth += 1
        elif kind is Kind.R_PAREN:
            depth -= 1
            if depth == 0:
                return position
    raise SqlTextError("unbalanced parentheses in SQL text")


def _split(pieces: list[Piece]) -> list[list[Piece]]:
    """Split at top-level commas."""
    items: list[list[Piece]] = [[]]
    depth = 0
    for piece in pieces:
        if piece.kind is Kind.L_PAREN:
            depth += 1
        elif piece.kind is Kind.R_PAREN:
            depth -= 1
        if piece.kind is Kind.COMMA and depth == 0:
            items.append([])
        else:
            items[-1].append(piece)
    return [item for item in items if item]


@dataclass(frozen=True, slots=True)
class ColumnText:
    """What one column definition says beyond the pragmas."""

    name: str
    definition: str  # the whole column definition, normalized
    collation: str | None = None
    generated: str | None = None  # the generation expression, normalized
    checks: tuple[tuple[str | None, str], ...] = ()  # (constraint name, expression)
    autoincrement: bool = False


@dataclass(frozen=True, slots=True)
class TableText:
    """A CREATE TABLE statement, read."""

    name_start: int  # source span of the table name (for renaming a rebuilt copy)
    name_end: int
    columns: tuple[ColumnText, ...] = ()
    constraints: tuple[str, ...] = ()  # table constraints, normalized, in written order
    checks: tuple[tuple[str | None, str], ...] = ()
    autoincrement: bool = False
    tail: str = ""  # table options after the column list, normalized


def _name_of(piece: Piece) -> str:
    return piece.text


def _constraint_parts(pieces: list[Piece]) -> tuple[list[tuple[str | None, str]], str | None]:
    """CHECK expressions (with their CONSTRAINT names) and a COLLATE name in ``pieces``."""
    checks: list[tuple[str | None, str]] = []
    collation: str | None = None
    pending: str | None = None
    index = 0
    while index < len(pieces):
        piece = pieces[index]
        if piece.kind is Kind.L_PAREN:
            index = _close(pieces, index) + 1
            continue
        word = piece.word
        if word == "CONSTRAINT" and index + 1 < len(pieces):
            pending = _name_of(pieces[index + 1])
            index += 2
            continue
        if word == "CHECK" and index + 1 < len(pieces) and pieces[index + 1].kind is Kind.L_PAREN:
            end = _close(pieces, index + 1)
            checks.append((pending, normalize(pieces[index + 2 : end])))
            pending = None
            index = end + 1
            continue
        if word == "COLLATE" and index + 1 < len(pieces):
            collation = _name_of(pieces[index + 1])
            index += 2
            continue
        index += 1
    return checks, collation


def _generated(pieces: list[Piece]) -> str | None:
    for index, piece in enumerate(pieces):
        if (
            piece.word == "AS"
            and index + 1 < len(pieces)
            and pieces[index + 1].kind is Kind.L_PAREN
        ):
            end = _close(pieces, index + 1)
            return normalize(pieces[index + 2 : end])
    return None


def _column(pieces: list[Piece]) -> ColumnText:
    name = _name_of(pieces[0])
    rest = pieces[1:]
    checks, collation = _constraint_parts(rest)
    return ColumnText(
        name=name,
        definition=normalize(pieces),
        collation=collation,
        generated=_generated(rest),
        checks=tuple(checks),
        autoincrement=any(p.kind is Kind.AUTO_INCREMENT for p in rest)
        or any(p.word == "AUTOINCREMENT" for p in rest),
    )


@lru_cache(maxsize=65536)
def parse_create_table(sql: str) -> TableText:
    """Read a stored ``CREATE TABLE`` statement."""
    pieces = tokens(sql)
    index = 0
    while index < len(pieces) and pieces[index].word != "TABLE":
        index += 1
    index += 1
    while index < len(pieces) and pieces[index].word in ("IF", "NOT", "EXISTS"):
        index += 1
    if index >= len(pieces):
        raise SqlTextError("not a CREATE TABLE statement")
    name_start = pieces[index].start
    name_end = pieces[index].end
    # schema.name
    while index + 2 < len(pieces) and pieces[index + 1].kind is Kind.DOT:
        index += 2
        name_end = pieces[index].end
    index += 1
    if index >= len(pieces) or pieces[index].kind is not Kind.L_PAREN:
        return TableText(name_start, name_end)  # CREATE TABLE ... AS SELECT
    end = _close(pieces, index)
    columns: list[ColumnText] = []
    constraints: list[str] = []
    checks: list[tuple[str | None, str]] = []
    for item in _split(pieces[index + 1 : end]):
        if item[0].word in _TABLE_CONSTRAINTS:
            constraints.append(normalize(item))
            found, _ = _constraint_parts(item)
            checks += found
        else:
            columns.append(_column(item))
    return TableText(
        name_start=name_start,
        name_end=name_end,
        columns=tuple(columns),
        constraints=tuple(constraints),
        checks=tuple(checks),
        autoincrement=any(c.autoincrement for c in columns),
        tail=normalize(pieces[end + 1 :]),
    )


def _emit(statements: list[tuple[int, str]], line: int, piece: str) -> None:
    """Keep ``piece`` (starting on ``line``) unless it holds nothing but a semicolon,
    blanks and comments."""
    body = piece.strip().rstrip(";").strip()
    if body and _has_code(body):
        lead = piece[: len(piece) - len(piece.lstrip())]
        statements.append((line + lead.count("\n"), piece.strip()))


def _has_code(body: str) -> bool:
    # Cheap first: most statements start with a keyword; only comment-led ones are tokenized.
    return not body.startswith(("--", "/*")) or bool(_tokens(body))


def split_script(text: str) -> list[tuple[int, str]]:
    """(line, statement) for each complete statement of a script (triggers kept whole).

    A statement ends at a semicolon outside strings, quoted names and comments, as SQLite's
    ``sqlite3_complete`` decides, except inside the body of ``CREATE [TEMP] TRIGGER``, which
    ends at ``END ;``. One pass over the text: the time is linear in its length, whatever
    it holds (an unterminated string followed by many semicolons, say).
    """
    statements: list[tuple[int, str]] = []
    start, line = 0, 1
    for end in _statement_ends(text):
        _emit(statements, line, text[start : end + 1])
        line += text.count("\n", start, end + 1)
        start = end + 1
    _emit(statements, line, text[start:])
    return statements


_CLOSING = {"'": "'", '"': '"', "`": "`", "[": "]"}
_WORD_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_WORD = _WORD_START | frozenset("0123456789$")


def _statement_ends(text: str) -> list[int]:
    """The offsets of the semicolons that end a statement."""
    ends: list[int] = []
    words: list[str] = []  # the statement's first tokens: words upper-cased, others ""
    in_trigger = False
    # Since the last semicolon: how many tokens, and whether the only one is END.
    tokens, only_end = 0, False
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        if char in _CLOSING:  # a string or a quoted name: to its closing quote
            closing = _CLOSING[char]
            found = text.find(closing, i + 1)
            while closing != "]" and found >= 0 and text.startswith(closing, found + 1):
                found = text.find(closing, found + 2)  # a doubled quote stands for itself
            i = size if found < 0 else found + 1
            tokens, only_end = tokens + 1, False
            if len(words) < 4:
                words.append("")  # a quoted name is not a keyword
        elif char == "-" and text.startswith("--", i):
            found = text.find("\n", i)
            i = size if found < 0 else found + 1
        elif char == "/" and text.startswith("/*", i):
            found = text.find("*/", i + 2)
            i = size if found < 0 else found + 2
        elif char == ";":
            # In a trigger's body only "; END ;" ends the statement (as sqlite3_complete).
            if not in_trigger or (tokens == 1 and only_end):
                ends.append(i)
                words, in_trigger = [], False
            tokens, only_end = 0, False
            i += 1
        elif char in _WORD_START or char >= "\x80":
            j = i + 1
            while j < size and (text[j] in _WORD or text[j] >= "\x80"):
                j += 1
            word = text[i:j].upper()
            tokens, only_end = tokens + 1, tokens == 0 and word == "END"
            if len(words) < 4:
                words.append(word)
                in_trigger = in_trigger or _opens_trigger(words)
            i = j
        else:
            if not char.isspace():
                tokens, only_end = tokens + 1, False
                if len(words) < 4:
                    words.append("")
            i += 1
    return ends


def _opens_trigger(words: list[str]) -> bool:
    """``[EXPLAIN [QUERY PLAN]] CREATE [TEMP | TEMPORARY] TRIGGER``: a body of statements."""
    while words and words[0] in ("EXPLAIN", "QUERY", "PLAN"):
        words = words[1:]
    if len(words) >= 2 and words[0] == "CREATE" and words[1] in ("TEMP", "TEMPORARY"):
        words = words[:1] + words[2:]
    return len(words) >= 2 and words[:2] == ["CREATE", "TRIGGER"]
