"""Runner operations counted and timed for ``/metrics`` (``seshat_operations_total``,
``seshat_operation_duration_seconds``), around the one call that runs them."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from gitops import metrics
from gitops.execution.executor import Outcome
from runner.protocol.messages import OperationInput

__all__ = ["Meter", "metered"]

OUTCOMES = {"done": "answered", "failed": "error", "refused": "refused", "lost": "lost"}
"""The ``outcome`` label of each :attr:`Outcome.kind`."""


class Meter:
    """Takes note of the outcomes of one runner invocation and hands them back unchanged."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []

    def all(self, outcomes: list[Outcome]) -> list[Outcome]:
        self.outcomes.extend(outcomes)
        return outcomes

    def one(self, outcome: Outcome) -> Outcome:
        self.outcomes.append(outcome)
        return outcome


@contextmanager
def metered(requests: Sequence[OperationInput]) -> Iterator[Meter]:
    """Count each of ``requests`` (one runner invocation) by the outcome the block hands
    the :class:`Meter`; an operation left without one (the executor raised) counts as
    ``lost``. A batch shares its invocation's wall time equally among its operations: the
    runner reports no time per operation."""
    meter = Meter()
    started = time.monotonic()
    try:
        yield meter
    finally:
        seconds = (time.monotonic() - started) / max(len(requests), 1)
        for index, request in enumerate(requests):
            found = meter.outcomes[index].kind if index < len(meter.outcomes) else "lost"
            metrics.operation_finished(request.operation, OUTCOMES[found], seconds)
