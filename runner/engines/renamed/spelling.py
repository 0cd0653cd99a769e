"""How a dialect spells names in server-rendered text, and references in that text renamed
token by token."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from runner.engines.model import (
    Definition,
)
from runner.engines.renames import lex

__all__ = ["Spelling", "parts", "rewrite", "texts_of"]


@dataclass(frozen=True, slots=True)
class Spelling:
    """What a dialect can rename, and how its server spells names in definitions."""

    quote: Callable[[str], str]
    qualified_references: bool = True
    """PostgreSQL prints every table and type reference schema-qualified (``public.t``);
    MySQL and SQLite print them bare."""
    deparsed_definitions: bool = True
    """PostgreSQL prints a trigger's or policy's text from its catalog, so after a rename it
    names the new table and columns; MySQL and SQLite keep the text as written (it is
    replaced from the desired schema instead of predicted)."""
    literal: Callable[[str], str] = lambda text: "'" + text.replace("'", "''") + "'"
    """A string literal, as the server prints an enum label."""
    index_names_per_table: bool = False
    """MySQL's model names an index ``<table>.<name>``: a table rename renames its keys."""
    kinds: frozenset[str] = frozenset(
        {"table", "column", "index", "constraint", "type", "enum_value", "sequence"}
    )
    """The renames the dialect can express (SQLite renames no index: it drops and creates)."""


def rewrite(
    text: str,
    old: tuple[str, ...],
    new: str,
    quote: Callable[[str], str],
    *,
    first: bool = False,
) -> str:
    """``text`` with each reference to the dotted name ``old`` (identifier tokens, quoted
    or not, outside strings and comments) renamed to ``new`` (its last part); with
    ``first``, only the first (an index definition's own name, not a column of that name)."""
    if old[-1] not in text and old[-1].lower() not in text.lower():
        return text
    code = [t for t in lex(text) if t.kind != "comment"]
    edits: list[tuple[int, int]] = []
    width = 2 * len(old) - 1
    for i in range(len(code) - width + 1):
        if i > 0 and code[i - 1].text == "." and len(old) == 1:
            continue
        window = code[i : i + width]
        names = [t.ident for t in window[::2]]
        dots = all(t.text == "." for t in window[1::2])
        if dots and all(n is not None and _same(n, o) for n, o in zip(names, old, strict=True)):
            last = window[-1]
            edits.append((last.start, last.end))
            if first:
                break
    for start, end in reversed(edits):
        text = text[:start] + quote(new) + text[end:]
    return text


def _same(ident: tuple[str, bool], name: str) -> bool:
    text, quoted = ident
    return text == name if quoted else text.lower() == name.lower()


def parts(key: str) -> tuple[str, str]:
    """(schema, name) of a ``prefix:schema.name`` key."""
    schema, name = key.split(":", 1)[1].split(".", 1)
    return schema, name


def texts_of(definition: Definition, text: Callable[[str], str]) -> Definition:
    """``definition`` with ``text`` applied to its SQL (not to its key)."""
    return replace(
        definition,
        create=text(definition.create),
        drop=text(definition.drop),
        definition=text(definition.definition),
        replace=text(definition.replace) if definition.replace is not None else None,
    )
