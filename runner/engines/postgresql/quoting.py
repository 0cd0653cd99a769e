"""Quoting identifiers and literals the way PostgreSQL reads them back unchanged."""

from __future__ import annotations

import functools
import re

__all__ = ["ident", "literal", "qualified", "quoted"]

_PLAIN = re.compile(r"^[a-z_][a-z0-9_$]*$")
_RESERVED = frozenset(
    [
        "all",
        "analyse",
        "analyze",
        "and",
        "any",
        "array",
        "as",
        "asc",
        "asymmetric",
        "both",
        "case",
        "cast",
        "check",
        "collate",
        "column",
        "constraint",
        "create",
        "current_catalog",
        "current_date",
        "current_role",
        "current_time",
        "current_timestamp",
        "current_user",
        "default",
        "deferrable",
        "desc",
        "distinct",
        "do",
        "else",
        "end",
        "except",
        "false",
        "fetch",
        "for",
        "foreign",
        "from",
        "grant",
        "group",
        "having",
        "in",
        "initially",
        "intersect",
        "into",
        "lateral",
        "leading",
        "limit",
        "localtime",
        "localtimestamp",
        "not",
        "null",
        "offset",
        "on",
        "only",
        "or",
        "order",
        "placing",
        "primary",
        "references",
        "returning",
        "select",
        "session_user",
        "some",
        "symmetric",
        "table",
        "then",
        "to",
        "trailing",
        "true",
        "union",
        "unique",
        "user",
        "using",
        "variadic",
        "when",
        "where",
        "window",
        "with",
        "authorization",
        "binary",
        "collation",
        "concurrently",
        "cross",
        "current_schema",
        "freeze",
        "full",
        "ilike",
        "inner",
        "is",
        "isnull",
        "join",
        "left",
        "like",
        "natural",
        "notnull",
        "outer",
        "overlaps",
        "right",
        "similar",
        "tablesample",
        "verbose",
    ]
)


@functools.lru_cache(maxsize=1 << 16)  # a schema's names recur; introspection quotes each often
def ident(name: str) -> str:
    """``name`` as an identifier: bare when PostgreSQL would fold it to itself, else quoted."""
    if _PLAIN.match(name) and name not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def qualified(schema: str, name: str) -> str:
    return f"{ident(schema)}.{ident(name)}"


def literal(value: str) -> str:
    """A standard-conforming string literal."""
    return "'" + value.replace("'", "''") + "'"


def quoted(name: str) -> str:
    """``name`` always quoted (GRANT statements spell every name so, as pg_dump and sqldef
    do: a role name is seldom a plain identifier)."""
    return '"' + name.replace('"', '""') + '"'
