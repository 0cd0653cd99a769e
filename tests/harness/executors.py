"""The real local executor with hooks a test fills in: what happens just before a runner
starts and just after it ends (a person changing the database meanwhile, another controller
taking the lease, a note of what the status branch held)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gitops.execution.executor import EnvValue, LocalExecutor, Outcome, RunOptions
from runner.protocol.messages import OperationInput, PlanSettings

__all__ = ["HookedExecutor", "RecordingExecutor"]


class HookedExecutor(LocalExecutor):
    """Runs every batch with the real runner, between :meth:`before` and :meth:`after`."""

    def before(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        """Called just before the runner starts."""

    def after(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        """Called just after the runner ended, before its outcomes are handed back."""

    def run_batch(self, requests: Sequence[OperationInput], options: RunOptions) -> list[Outcome]:
        self.before(requests, options.environment)
        outcomes = super().run_batch(requests, options)
        self.after(requests, options.environment)
        return outcomes


class RecordingExecutor(HookedExecutor):
    """The local executor's own runner (the ``seshat-runner`` beside this interpreter: this
    checkout's, installed editable), forked as a controller forks it, recording the
    settings each plan was sent. (It once named ``python -c "...runner.cli..."`` as its
    command, which started every runner afresh: half a second of CPU each.)"""

    def __init__(self, work: Path) -> None:
        super().__init__(work / "operations")
        self.plans: list[PlanSettings] = []

    def before(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        self.plans += [r.settings for r in requests if r.operation == "plan"]
