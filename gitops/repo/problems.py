"""A problem found in a repository: where it is, which field, what is wrong, whose it is."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from runner.models import wire_fields

__all__ = ["MAX_PROBLEMS_PER_FILE", "Problem", "ResourceKey", "problem_lines"]

MAX_PROBLEMS_PER_FILE: Final = 100
"""``seshat validate`` prints at most this many problems of one file (see problem_lines)."""


@dataclass(frozen=True, slots=True, order=True)
class ResourceKey:
    """(kind, namespace, name): what identifies a resource within one repository."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a declaration cannot be used, located as ``path:line: field: message``.

    ``path`` is relative to the repository root, ``line`` is 1-based (``None`` when the
    problem is about a whole file), ``field`` is the dotted field path (empty for the whole
    document) and ``resource`` names the resource the problem belongs to, when known, so the
    reconciler can give that resource a ``Blocked/ConfigurationError`` verdict of its own.
    Messages never contain a value that could be a credential.
    """

    path: str
    line: int | None
    field: str
    message: str
    resource: ResourceKey | None = None

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )

    def to_json(self) -> dict[str, object]:
        """The ``seshat validate --format json`` form of this problem."""
        return wire_fields(self) | {"resource": str(self.resource) if self.resource else None}

    def sort_key(self) -> tuple[str, int, str, str]:
        """Problems are reported in file, line and field order, so output is stable."""
        return (self.path, self.line or 0, self.field, self.message)


def problem_lines(problems: Iterable[Problem], limit: int = MAX_PROBLEMS_PER_FILE) -> list[str]:
    """``problems`` as ``path:line: field: message`` lines, at most ``limit`` per file, in
    the order given (files in order of their first problem). A file with more problems ends
    with ``path: ... and N more problems in this file``: 100,000 problems of one file are
    not read by anyone, and printing them is what would take the time."""
    by_path: dict[str, list[Problem]] = defaultdict(list)
    for problem in problems:
        by_path[problem.path].append(problem)
    lines: list[str] = []
    for path, found in by_path.items():
        lines += [str(problem) for problem in found[:limit]]
        hidden = len(found) - limit
        if hidden > 0:
            noun = "problem" if hidden == 1 else "problems"
            lines.append(f"{path}: ... and {hidden} more {noun} in this file")
    return lines
