"""Rename hints: sqldef's ``@renamed from=old`` comments in the desired SQL.

A desired schema says that an object was renamed with a comment on the object's own
declaration, so the plan renames it instead of dropping the old object and creating the new
one (which loses its rows)::

    CREATE TABLE accounts ( -- @renamed from=old_accounts
      username text, -- @renamed from=user_name
      CONSTRAINT accounts_email UNIQUE (email) /* @renamed from=old_email */
    );
    CREATE INDEX email_idx /* @renamed from="EmailIndex" */ ON accounts (email);
    CREATE TYPE order_status /* @renamed from=order_state */ AS ENUM (
      'new',
      'settled' /* @renamed from=paid */
    );

The server never sees comments, so hints are read here, from the files the engine was given
(:func:`read_hints`), and resolved against the normalized desired model (:func:`resolve`)
into keys: a :class:`Renames` value. Applying it to the live model is
:mod:`runner.engines.renamed`'s work.

Where a hint counts: on a table or type, after its name and before the body's first element
(``CREATE TABLE t /* here */ ( -- or here``); on a column, index or constraint of a
``CREATE TABLE``, anywhere after the start of that element and before the next one; in a
``CREATE INDEX``, after the index's name; on an enum label, after it and before the next
one (the old label is taken as written). The first hint that counts for an object wins;
others (``CREATE /* @renamed ... */ TYPE``) are ignored, as sqldef ignores them. Names
follow the dialect's rules: ``from=Old`` folds as an unquoted identifier would,
``from="Old Name"`` (or ```Old Name```) is exact, ``from=schema.old`` names the schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runner.engines.desired import DesiredSchemaError
from runner.engines.model import Database
from runner.sql.split import skip_quoted
from runner.sql.tokens import block_comment_end

__all__ = [
    "NO_RENAMES",
    "Hint",
    "Naming",
    "Rename",
    "Renames",
    "Splitter",
    "Token",
    "lex",
    "read_hints",
    "resolve",
    "short_name",
]

Ident = tuple[str, bool]
"""An identifier as written: its text (unquoted) and whether it was quoted."""

_HINT = re.compile(r"@renamed\s+from=")
# [A-Za-z_\u0080-\uffff] then [\w$\u0080-\uffff]*, the start spelled as a negated set, which
# compiles in microseconds instead of milliseconds (runner/sql/charsets.py).
_WORD = re.compile(r"[^\x00-\x40\x5b-\x5e\x60\x7b-\x7f\U00010000-\U0010ffff][\w$\u0080-\uffff]*")
_BARE_PART = re.compile(r"[^\s.\"`*]+")


@dataclass(frozen=True, slots=True)
class Token:
    """One token of a statement: ``kind`` is word, ident (quoted), string, comment, punct
    or number; ``start``/``end`` are offsets into the statement."""

    kind: str
    text: str
    start: int
    end: int

    @property
    def ident(self) -> Ident | None:
        """The identifier this token spells, if it spells one."""
        if self.kind == "word":
            return (self.text, False)
        if self.kind == "ident":
            quote = self.text[0]
            close = "]" if quote == "[" else quote
            return (self.text[1:-1].replace(close * 2, close), True)
        return None

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


def lex(sql: str) -> list[Token]:
    """``sql`` as tokens, comments included (every dialect's quotes: ``'s'``, ``"i"``,
    ```i```, ``[i]``; ``--`` and nested ``/* */`` comments; dollar-quoted bodies as one
    string). What no rule knows is a one-character ``punct``: good enough to find names
    and comments, never used to run anything."""
    found: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
            continue
        start = i
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i, kind = (n if end < 0 else end), "comment"
        elif sql.startswith("/*", i):
            i, kind = block_comment_end(sql, i), "comment"
        elif ch == "'":
            i, kind = skip_quoted(sql, i, backslash=False), "string"
        elif ch in '"`':
            i, kind = skip_quoted(sql, i, backslash=False), "ident"
        elif ch == "[" and (close := sql.find("]", i)) > 0 and "\n" not in sql[i:close]:
            i, kind = close + 1, "ident"
        elif ch == "$" and (m := re.match(r"\$(\w*)\$", sql[i:])):
            end = sql.find(m.group(0), i + len(m.group(0)))
            i, kind = (n if end < 0 else end + len(m.group(0))), "string"
        elif m := _WORD.match(sql, i):
            i, kind = m.end(), "word"
        elif ch.isdigit():
            i = re.compile(r"[\w.]+").match(sql, i).end()  # type: ignore[union-attr]
            kind = "number"
        else:
            i, kind = i + 1, "punct"
        found.append(Token(kind, sql[start:i], start, min(i, n)))
    return found


# -- hints as written ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hint:
    """One ``@renamed`` hint as written, attached to the object declared where it is.

    ``kind``: ``table`` or ``type`` (``name`` is the object's qualified name), ``column``
    or ``index`` (an index or a constraint; ``table`` is the owning table, ``name`` the
    element's own name). ``old`` is the hint's ``from=`` name; ``where`` is ``file:line``.
    """

    kind: str
    name: tuple[Ident, ...]
    old: tuple[Ident, ...]
    where: str
    table: tuple[Ident, ...] = ()
    value: str = ""
    """For ``enum_value``: the label the hint is on (``name`` is then its type)."""


def _old_name(comment: str) -> tuple[Ident, ...] | None:
    """The ``from=`` name of a hint comment: dotted parts, each bare or quoted."""
    match = _HINT.search(comment)
    if match is None:
        return None
    parts: list[Ident] = []
    i = match.end()
    while i < len(comment):
        if comment[i] in '"`':
            end = skip_quoted(comment, i, backslash=False)
            quote = comment[i]
            parts.append((comment[i + 1 : end - 1].replace(quote * 2, quote), True))
            i = end
        elif bare := _BARE_PART.match(comment, i):
            parts.append((bare.group(0), False))
            i = bare.end()
        else:
            break
        if i < len(comment) and comment[i] == ".":
            i += 1
            continue
        break
    return tuple(parts) or None


def _qualified(code: list[Token], i: int) -> tuple[tuple[Ident, ...], int]:
    """The dotted name starting at ``code[i]``, and the index just past it."""
    parts: list[Ident] = []
    while i < len(code) and (ident := code[i].ident) is not None:
        parts.append(ident)
        if i + 1 < len(code) and code[i + 1].text == ".":
            i += 2
            continue
        i += 1
        break
    return tuple(parts), i


def _skip_words(code: list[Token], i: int, *words: str) -> int:
    while i < len(code) and code[i].upper in words:
        i += 1
    return i


def _close(code: list[Token], i: int) -> int:
    """The index of the parenthesis that closes the one at ``code[i]``."""
    depth = 0
    for j in range(i, len(code)):
        if code[j].text == "(":
            depth += 1
        elif code[j].text == ")":
            depth -= 1
            if depth == 0:
                return j
    return len(code)


def _elements(code: list[Token], open_at: int) -> list[int]:
    """Where each element of the parenthesized list opening at ``open_at`` starts."""
    starts, depth = [open_at + 1], 0
    for j in range(open_at + 1, _close(code, open_at)):
        if code[j].text in "([":
            depth += 1
        elif code[j].text in ")]":
            depth -= 1
        elif code[j].text == "," and depth == 0:
            starts.append(j + 1)
    return starts


_NOT_NAMED = frozenset({"PRIMARY", "FOREIGN", "CHECK", "EXCLUDE", "LIKE", "PERIOD"})


def _element(code: list[Token], start: int) -> tuple[str, Ident] | None:
    """What a CREATE TABLE element declares: (``column`` | ``index``, its name)."""
    first = code[start].upper if start < len(code) else ""
    if first in _NOT_NAMED or start >= len(code):
        return None
    if first in ("CONSTRAINT", "INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL"):
        at = _skip_words(code, start, "CONSTRAINT", "UNIQUE", "FULLTEXT", "SPATIAL")
        at = _skip_words(code, at, "INDEX", "KEY") if first != "CONSTRAINT" else at
        ident = code[at].ident if at < len(code) and code[at].text != "(" else None
        return ("index", ident) if ident is not None else None
    ident = code[start].ident
    return ("column", ident) if ident is not None else None


@dataclass(frozen=True, slots=True)
class _Statement:
    """One statement as the hint readers see it: its ``code`` tokens, its hint ``comments``
    (the index of the code token after each, the comment, the old name it gives) and
    ``where``, which names the line of an offset."""

    code: list[Token]
    comments: list[tuple[int, Token, tuple[Ident, ...]]]
    where: Callable[[int], str]

    def object_hint(self, kind: str, name: tuple[Ident, ...], accepted: set[int]) -> list[Hint]:
        """The first hint at one of the ``accepted`` positions, for the object itself."""
        for position, token, old in self.comments:
            if position in accepted:
                return [Hint(kind, name, old, self.where(token.start))]
        return []


def _statement_hints(sql: str, where: Callable[[int], str]) -> list[Hint]:
    """The hints of one statement (``where`` names the line of an offset)."""
    tokens = lex(sql)
    code = [t for t in tokens if t.kind != "comment"]
    comments: list[tuple[int, Token, tuple[Ident, ...]]] = []  # (code index after, comment)
    seen = 0
    for token in tokens:
        if token.kind != "comment":
            seen += 1
        elif (old := _old_name(token.text)) is not None:
            comments.append((seen, token, old))
    if not comments:
        return []
    at = _skip_words(code, 0, "CREATE", "OR", "REPLACE", "GLOBAL", "LOCAL")
    at = _skip_words(code, at, "TEMP", "TEMPORARY", "UNLOGGED", "VIRTUAL")
    kind = code[at].upper if at < len(code) else ""
    statement = _Statement(code, comments, where)
    if kind == "TABLE":
        return _table_hints(statement, at + 1)
    if kind == "TYPE":
        return _type_hints(statement, at + 1)
    if kind in ("INDEX", "UNIQUE", "FULLTEXT", "SPATIAL"):
        return _index_hints(statement, at)
    return []


def _table_hints(statement: _Statement, at: int) -> list[Hint]:
    code, comments, where = statement.code, statement.comments, statement.where
    at = _skip_words(code, at, "IF", "NOT", "EXISTS")
    name, after = _qualified(code, at)
    if not name or after >= len(code) or code[after].text != "(":
        return []
    hints = statement.object_hint("table", name, {after, after + 1})
    starts = _elements(code, after)
    end = _close(code, after)
    taken: set[int] = set()
    for position, token, old in comments:
        if not after + 1 < position <= end:
            continue
        owner = max(s for s in starts if s < position)
        declared = _element(code, owner)
        if declared is None or owner in taken:
            continue
        taken.add(owner)
        element_kind, element_name = declared
        hints.append(Hint(element_kind, (element_name,), old, where(token.start), table=name))
    return hints


def _type_hints(statement: _Statement, at: int) -> list[Hint]:
    code, comments, where = statement.code, statement.comments, statement.where
    name, after = _qualified(code, at)
    if not name or code[after].upper != "AS":
        return []
    opening = _skip_words(code, after + 1, "ENUM")
    accepted = {after}
    if opening >= len(code) or code[opening].text != "(":
        return statement.object_hint("type", name, accepted)
    accepted.add(opening + 1)  # right after the parenthesis, before the first value
    hints = statement.object_hint("type", name, accepted)
    starts = _elements(code, opening)
    for position, token, old in comments:
        if not opening + 1 < position <= _close(code, opening):
            continue
        label = code[max(s for s in starts if s < position)]
        if label.kind == "string" and not any(
            h.kind == "enum_value" and h.value == _label(label) for h in hints
        ):
            hints.append(Hint("enum_value", name, old, where(token.start), value=_label(label)))
    return hints


def _label(token: Token) -> str:
    """The text of a ``'...'`` literal."""
    return token.text[1:-1].replace("''", "'")


def _index_hints(statement: _Statement, at: int) -> list[Hint]:
    code, comments, where = statement.code, statement.comments, statement.where
    at = _skip_words(code, at, "UNIQUE", "FULLTEXT", "SPATIAL")
    at = _skip_words(code, at + 1 if code[at].upper == "INDEX" else at, "CONCURRENTLY")
    at = _skip_words(code, at, "IF", "NOT", "EXISTS")
    name, after = _qualified(code, at)
    on = next((i for i in range(after, len(code)) if code[i].upper == "ON"), None)
    if not name or on is None:
        return []
    table, _ = _qualified(code, _skip_words(code, on + 1, "ONLY"))
    for position, token, old in comments:
        if position >= after:
            return [Hint("index", name[-1:], old, where(token.start), table=table)]
    return []


Splitter = Callable[[str], Sequence[tuple[int, str]]]
"""A dialect's statement splitter: (line, statement text) of each statement of a file."""


def read_hints(files: Sequence[tuple[str, str]], split: Splitter) -> tuple[Hint, ...]:
    """Every rename hint of the desired ``files`` (name, text), in file order."""
    hints: list[Hint] = []
    for file, text in files:
        if "@renamed" not in text:
            continue
        for line, sql in split(text):
            if "@renamed" not in sql:
                continue

            def where(offset: int, file: str = file, line: int = line, sql: str = sql) -> str:
                return f"{file}:{line + sql.count(chr(10), 0, offset)}"

            hints += _statement_hints(sql, where)
    return tuple(hints)


# -- hints resolved against the desired model ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Naming:
    """How a dialect turns written names into model keys."""

    default_schema: str
    fold_unquoted: bool = False
    """PostgreSQL folds an unquoted identifier to lower case."""
    schemas: bool = True
    """False where every key has the one fixed schema (MySQL's ``db``, SQLite's ``main``)."""

    def name(self, ident: Ident) -> str:
        text, quoted = ident
        return text.lower() if self.fold_unquoted and not quoted else text

    def schema(self, name: tuple[Ident, ...]) -> str:
        if self.schemas and len(name) > 1:
            return self.name(name[-2])
        return self.default_schema


@dataclass(frozen=True, slots=True)
class Rename:
    """One rename: ``kind`` (table, column, index, constraint, type, enum_value; sequence
    for one that follows its table), the ``table`` key it is about (the renamed table's new
    key for a table, the type's for an enum label), the ``new`` and ``old`` names (for a
    table or type: its key), and where its hint is (empty for one that follows)."""

    kind: str
    table: str
    new: str
    old: str
    where: str


@dataclass(frozen=True, slots=True)
class Renames:
    """What the desired schema says was renamed, by model key; sorted, so a plan made with
    them is the same whatever order the files declare them in."""

    items: tuple[Rename, ...] = ()

    def of(self, kind: str) -> tuple[Rename, ...]:
        return tuple(r for r in self.items if r.kind == kind)


NO_RENAMES = Renames()


def _conflict(kind: str, old: str, new: str, where: str) -> DesiredSchemaError:
    return DesiredSchemaError(
        f"{where}: cannot rename {kind} {old!r} to {new!r} - {kind} {old!r} still exists"
    )


def resolve(hints: Sequence[Hint], desired: Database, naming: Naming) -> Renames:
    """The ``hints`` as keys of ``desired``. A hint that names an object the desired schema
    does not declare is ignored; one whose old name the desired schema still declares
    contradicts it, and is a :class:`~runner.engines.desired.DesiredSchemaError`."""
    found: dict[tuple[str, str, str], Rename] = {}
    for hint in hints:
        rename = _resolved(hint, desired, naming)
        if rename is not None and rename.new != rename.old:
            found.setdefault((rename.kind, rename.table, rename.new), rename)
    return Renames(tuple(found[k] for k in sorted(found)))


def _resolved(hint: Hint, desired: Database, naming: Naming) -> Rename | None:
    if hint.kind == "enum_value":
        return _enum_value(hint, desired, naming)
    if hint.kind in ("table", "type"):
        prefix = hint.kind
        new = f"{prefix}:{naming.schema(hint.name)}.{naming.name(hint.name[-1])}"
        old_schema = naming.schema(hint.old) if len(hint.old) > 1 else naming.schema(hint.name)
        old = f"{prefix}:{old_schema}.{naming.name(hint.old[-1])}"
        objects = desired.tables if prefix == "table" else desired.definitions
        if new not in objects:
            return None
        if old in objects and old != new:
            raise _conflict(prefix, old.split(".", 1)[1], new.split(".", 1)[1], hint.where)
        return Rename(prefix, new if prefix == "table" else "", new, old, hint.where)
    table_key = f"table:{naming.schema(hint.table)}.{naming.name(hint.table[-1])}"
    table = desired.tables.get(table_key)
    if table is None:
        return None
    new, old = naming.name(hint.name[0]), naming.name(hint.old[-1])
    if hint.kind == "column":
        if table.column(new) is None:
            return None
        if old != new and table.column(old) is not None:
            raise _conflict("column", old, new, hint.where)
        return Rename("column", table_key, new, old, hint.where)
    kind = _sub_kind(desired, table_key, new)
    if kind is None:
        return None
    if old != new and _sub_kind(desired, table_key, old) is not None:
        raise _conflict(kind, old, new, hint.where)
    return Rename(kind, table_key, new, old, hint.where)


def _enum_value(hint: Hint, desired: Database, naming: Naming) -> Rename | None:
    """An enum label's rename: the old label is the hint's ``from=`` text, as written."""
    key = f"type:{naming.schema(hint.name)}.{naming.name(hint.name[-1])}"
    found = desired.definitions.get(key)
    if found is None or found.kind != "enum":
        return None
    labels = json.loads(found.fact("labels") or "[]")
    old = ".".join(text for text, _ in hint.old)
    if hint.value not in labels:
        return None
    if old != hint.value and old in labels:
        raise _conflict("value", old, hint.value, hint.where)
    return Rename("enum_value", key, hint.value, old, hint.where)


def short_name(name: str, table: str) -> str:
    """An index's own name: MySQL's model names indexes ``<table>.<name>`` (per table)."""
    prefix = table.split(".", 1)[1] + "."
    return name[len(prefix) :] if name.startswith(prefix) else name


def _sub_kind(db: Database, table: str, name: str) -> str | None:
    """Whether ``table`` has an index or a constraint named ``name`` (case-insensitively
    for an index, as MySQL compares index names), and which."""
    if any(
        i.table == table and short_name(i.name, table).lower() == name.lower()
        for i in db.indexes.values()
    ):
        return "index"
    if any(c.table == table and c.name == name for c in db.constraints.values()):
        return "constraint"
    return None
