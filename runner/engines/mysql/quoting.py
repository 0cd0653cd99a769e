"""Quoting MySQL identifiers and string literals."""

from __future__ import annotations

__all__ = ["ident", "literal"]


def ident(name: str) -> str:
    """A backquoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def literal(text: str) -> str:
    """A single-quoted string literal (backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
