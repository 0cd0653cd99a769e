"""Turning pydantic's validation errors into the messages people read.

pydantic's own texts ("Input should be 'OnApproval', 'Always' or 'Never'") are written for
programmers and sometimes quote the input. Here each error becomes a short sentence about
the field, and the input is quoted only for choices (enums), where it is a word the user
typed and knowing it helps; nothing that could hold a credential is ever repeated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

__all__ = ["FieldError", "field_errors", "format_field"]

FieldPath = tuple[str | int, ...]
FieldError = tuple[FieldPath, str]

_QUOTED = re.compile(r"'([^']*)'")
_SECRET_NAME = re.compile(r"(pass(word|wd)?|secret|token|credential|dsn|url)$", re.IGNORECASE)

_TYPES = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "list_type": "must be a list",
    "datetime_type": "must be a date and time such as 2026-12-31T00:00:00Z",
    "datetime_parsing": "must be a date and time such as 2026-12-31T00:00:00Z",
    "datetime_from_date_parsing": "must be a date and time such as 2026-12-31T00:00:00Z",
    "timezone_aware": "must include a time zone, such as Z",
    "missing": "required field is missing",
}


def format_field(path: FieldPath) -> str:
    """``("spec", "rules", 0, "count")`` as ``spec.rules[0].count``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _clean(loc: tuple[Any, ...]) -> FieldPath:
    # Union members and validator wrappers show up in pydantic's loc as their own names.
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and "(" not in p))


def _message(error: Any) -> str:
    kind: str = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    loc = _clean(error["loc"])
    if kind == "extra_forbidden":
        name = loc[-1] if loc else ""
        if isinstance(name, str) and _SECRET_NAME.search(name):
            return (
                "unknown field; credentials are never written in declarations, reference "
                "the database URL with fromEnv, fromFile or secretKeyRef (the value is not shown)"
            )
        return "unknown field"
    if kind in ("literal_error", "enum"):
        choices = ", ".join(_QUOTED.findall(str(ctx.get("expected", ""))))
        given = error.get("input")
        if isinstance(given, (str, int)) and not isinstance(given, bool) and len(str(given)) <= 64:
            return f"'{given}' is not one of {choices}"
        return f"must be one of {choices}"
    if kind == "string_pattern_mismatch":
        return f"must match {ctx.get('pattern')}"
    if kind == "string_too_short":
        return f"must be at least {ctx.get('min_length')} characters long"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} items"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} items"
    if kind in ("greater_than_equal", "greater_than"):
        return f"must be at least {ctx.get('ge', ctx.get('gt'))}"
    if kind in ("less_than_equal", "less_than"):
        return f"must be at most {ctx.get('le', ctx.get('lt'))}"
    if kind in _TYPES:
        return _TYPES[kind]
    message: str = error["msg"]
    return message.removeprefix("Value error, ")


def field_errors(error: ValidationError) -> Iterator[FieldError]:
    """Each error of ``error`` as (field path, message), in pydantic's order."""
    for item in error.errors(include_url=False, include_input=True):
        yield _clean(item["loc"]), _message(item)
