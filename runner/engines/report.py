"""What an apply did, statement by statement (shared by every dialect)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ConfigDict, Field

from runner.models import Model

__all__ = ["NOT_CONVERGED", "ApplyOptions", "ApplyReport", "StatementFailed"]

NOT_CONVERGED = (
    "every statement ran, but the database does not have the schema the plan's dry run "
    "reached; plan again to see the difference"
)
"""The report's ``error`` when the apply finished without reaching the promised schema."""


@dataclass(frozen=True, slots=True)
class ApplyOptions:
    """How an apply runs, the same for every dialect (what one cannot honour is refused
    before, :meth:`~runner.engines.core.Engine.check_transaction_mode`)."""

    lock_timeout_ms: int = 30_000
    """How long a statement waits for a lock the apply needs."""
    transaction_mode: str = "auto"
    """``auto``, ``all`` or ``none``: consecutive transactional statements in one transaction,
    or each statement on its own."""
    journal: Path | None = None
    """The per-statement journal of an engine that keeps one
    (:attr:`~runner.engines.core.Engine.journals`); the others leave it unread."""


class ApplyReport(Model):
    """What an apply did: each statement ran, failed or did not run.

    The one declaration of the report's fields. A dialect fills it statement by statement,
    so it is not frozen; what crosses the process boundary is its frozen subclass
    :class:`~runner.protocol.results.ApplyReportModel`, field for field the same."""

    model_config = ConfigDict(frozen=False)  # merged into Model's: only this differs

    plan_id: str = Field(alias="plan")
    ran: list[int] = Field(default_factory=list)
    failed: int | None = None
    error: str | None = None
    rolled_back: list[int] = Field(default_factory=list)
    converged: bool = False
    interrupted: bool = False  # the report comes from a journal of an interrupted apply
    unknown: int | None = None  # a statement that started but may not have finished

    def settle(self, converged: bool) -> None:
        """Record whether the schema after the apply is the one the plan promised; one that
        is not says so in ``error``, so a reader learns why the apply failed."""
        self.converged = converged
        if not converged and self.error is None:
            self.error = NOT_CONVERGED

    def to_json(self) -> dict[str, object]:
        """The report as ``seshat-runner schema apply`` prints it: ``interrupted`` and
        ``unknown`` only for an interrupted apply, so other reports keep exactly their keys."""
        hidden = None if self.interrupted else {"interrupted", "unknown"}
        return self.model_dump(by_alias=True, exclude=hidden)


class StatementFailed(Exception):
    """Statement ``index`` (0-based) of a plan failed with ``error``, the server's reason:
    raised inside a dialect's run of the statements, caught where it becomes a report's
    ``failed`` or a dry run's refusal."""

    def __init__(self, index: int, error: str) -> None:
        super().__init__(error)
        self.index = index
        self.error = error
