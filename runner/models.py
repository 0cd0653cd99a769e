"""The base of every model read from or written to Git, shared by both planes.

Declarations are Kubernetes-style documents, so field names are camelCase on the wire and
snake_case in Python; every model is frozen and refuses unknown fields. The control plane's
resources (``gitops/resources``) and the runner's artifact policies (``runner/artifacts``)
are built on it, so a policy means the same on both sides.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

__all__ = ["Model", "plain_path", "wire_fields"]


class Model(BaseModel):
    """Base of every model read from or written to Git, and of the runner's results
    (:mod:`runner.protocol.results`): frozen, strict about fields."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_enum_values=False,
        defer_build=True,
    )


def plain_path(path: str) -> str:
    """``path`` if it can name a file and be shown on one line: a NUL cannot be part of a
    file name (every file call refuses it), and a line break or an escape sequence in a path
    would be printed as it is in ``path:line: message``."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise PydanticCustomError(
            "path_characters", "must not hold control characters (a NUL, a line break, ...)"
        )
    return path


def wire_fields(value: Any) -> dict[str, object]:
    """A dataclass instance's fields, named as on the wire (camelCase, as :class:`Model`
    names them), with their values as they are (not copied, unlike ``dataclasses.asdict``)."""
    return {to_camel(f.name): getattr(value, f.name) for f in dataclasses.fields(value)}
