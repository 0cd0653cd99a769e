"""The result of scoring one case, and the failure categories in pipeline order."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CATEGORIES", "CaseResult"]

CATEGORIES: tuple[str, ...] = (
    "scorer_error",  # the scorer itself failed (pg_dump, a lost connection): not the engine
    "load_error",  # `current` did not load into a fresh database (no starting state)
    "no_oracle",  # `desired` did not load into a fresh database (nothing to compare with)
    "plan_error",  # plan exited 2 (could not run), or crashed, or timed out
    "plan_refused",  # plan exited 1 (refused by policy or by its own dry run)
    "not_refused",  # an `error` case was planned without complaint
    "apply_error",  # apply failed, was refused, or reported that it did not converge
    "drop_not_held",  # enable_drop: false, yet a destructive statement ran or data was lost
    "not_converged",  # after apply, pg_dump of A differs from pg_dump of B
    "not_idempotent",  # the plan after apply is not empty (or failed)
    "not_deterministic",  # two plans from two fresh copies of A differ byte-wise
)
"""Failure categories; a failing case is filed under the first one that applies."""


@dataclass
class CaseResult:
    """What happened to one case. ``None`` in a check means it was not reached/scored."""

    id: str
    file: str
    name: str
    kind: str = "normal"  # normal | error | nodrop
    status: str = "fail"  # pass | fail | skip
    skip_reason: str | None = None
    category: str | None = None
    message: str = ""
    oracle: bool | None = None
    planned: bool | None = None
    statements: int | None = None
    destructive: bool | None = None
    applied: bool | None = None
    converged: bool | None = None
    idempotent: bool | None = None
    deterministic: bool | None = None
    refused: bool | None = None
    drops_held: bool | None = None
    renamed_hints: bool = False
    seconds: float = 0.0
    diff: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def fail(self, category: str, message: str) -> None:
        """Record a failure; the first category (in :data:`CATEGORIES` order) wins."""
        assert category in CATEGORIES, category
        current = CATEGORIES.index(self.category) if self.category else len(CATEGORIES)
        if CATEGORIES.index(category) < current:
            self.category, self.message = category, message
        self.status = "fail"
        self.details.setdefault("failures", []).append({"category": category, "message": message})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
