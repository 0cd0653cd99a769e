"""What an apply did, statement by statement (shared by every dialect)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ApplyReport"]


@dataclass
class ApplyReport:
    """What an apply did: each statement ran, failed or did not run."""

    plan_id: str
    ran: list[int] = field(default_factory=list)
    failed: int | None = None
    error: str | None = None
    rolled_back: list[int] = field(default_factory=list)
    converged: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "plan": self.plan_id,
            "ran": self.ran,
            "failed": self.failed,
            "error": self.error,
            "rolledBack": self.rolled_back,
            "converged": self.converged,
        }
