"""Reading the sqldef case corpus (``../shared/corpus/sqldef``) into typed cases.

A case is identified as ``file/name`` within one dialect, where ``file`` is the YAML file's
stem without the ``tests_`` prefix (``tables/CreateTable``). Everything here is
dialect-neutral: which options a dialect cannot honour is decided by its environment.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

__all__ = [
    "DEFAULT_CORPUS",
    "Case",
    "load_cases",
    "matches",
    "version_satisfied",
]

# The corpus is shared beside the checkout (../shared/corpus/sqldef), in CI as here.
DEFAULT_CORPUS = Path(
    os.environ.get(
        "SESHAT_CORPUS",
        str(Path(__file__).resolve().parents[2] / "shared" / "corpus" / "sqldef"),
    )
)

_RENAMED = re.compile(r"@renamed\b")


@dataclass(frozen=True, slots=True)
class Case:
    """One sqldef test case, with the keys the scorer reads."""

    dialect: str
    file: str
    name: str
    current: str
    desired: str
    error: str | None = None
    enable_drop: bool = True
    min_version: str | None = None
    max_version: str | None = None
    flavor: str | None = None
    offline: bool = False
    user: str | None = None
    managed_roles: tuple[str, ...] | None = None  # None: the key is absent
    manage: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    has_up_down: bool = False

    @property
    def id(self) -> str:
        return f"{self.file}/{self.name}"

    @property
    def plan_arguments(self) -> list[str]:
        """What ``schema plan`` is given besides the URL and the files: ``--managed-role``
        for each managed role (``managed_roles: []`` manages none: no argument at all)."""
        return [a for role in self.managed_roles or () for a in ("--managed-role", role)]

    @property
    def renamed_hints(self) -> bool:
        return bool(_RENAMED.search(self.desired))


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _case(dialect: str, file: str, name: str, data: dict[str, Any]) -> Case:
    flavor = data.get("flavor")
    return Case(
        dialect=dialect,
        file=file,
        name=name,
        current=_text(data.get("current")),
        desired=_text(data.get("desired")),
        error=None if data.get("error") is None else str(data["error"]),
        enable_drop=bool(data.get("enable_drop", True)),
        min_version=None if data.get("min_version") is None else str(data["min_version"]),
        max_version=None if data.get("max_version") is None else str(data["max_version"]),
        flavor=None if flavor is None else str(flavor),
        offline=bool(data.get("offline", False)),
        user=None if data.get("user") is None else str(data["user"]),
        managed_roles=(
            None
            if "managed_roles" not in data
            else tuple(str(r) for r in data["managed_roles"] or ())
        ),
        manage=None if "manage" not in data else dict(data["manage"] or {}),
        config=None if "config" not in data else dict(data["config"] or {}),
        has_up_down="up" in data or "down" in data,
    )


def load_cases(dialect: str, corpus: Path = DEFAULT_CORPUS) -> list[Case]:
    """Every case of ``dialect``, in file order then document order."""
    folder = corpus / dialect
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such corpus folder")
    yaml = YAML(typ="safe", pure=True)
    cases: list[Case] = []
    for path in sorted(folder.glob("tests*.yml")):
        file = path.stem.removeprefix("tests_")
        data = yaml.load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of case names to cases")
        for name, body in data.items():
            cases.append(_case(dialect, file, str(name), dict(body or {})))
    return cases


def matches(case: Case, patterns: list[str]) -> bool:
    """True if any glob matches the case's name, its ``file/name`` id, or its file."""
    if not patterns:
        return True
    return any(
        fnmatch.fnmatchcase(candidate, pattern)
        for pattern in patterns
        for candidate in (case.name, case.id, case.file)
    )


def _parts(version: str) -> list[int]:
    numbers: list[int] = []
    for part in version.split("."):
        match = re.match(r"\d+", part)
        numbers.append(int(match.group(0)) if match else 0)
    return numbers


def _compare(a: str, b: str) -> int:
    """sqldef's comparison: leading numbers of each part, as many parts as the shorter has."""
    for x, y in zip(_parts(a), _parts(b), strict=False):
        if x != y:
            return -1 if x < y else 1
    return 0


def version_satisfied(server: str, minimum: str | None, maximum: str | None) -> bool:
    """Whether ``server`` lies within the case's ``min_version``/``max_version`` bounds."""
    if minimum is not None and _compare(server, minimum) < 0:
        return False
    return not (maximum is not None and _compare(server, maximum) > 0)
