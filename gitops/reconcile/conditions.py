"""Kubernetes-style summary conditions for a phase, keeping transition times stable.

``Ready`` (InSync), ``Reconciling`` (work is under way or will be retried) and ``Stalled``
(Blocked: nothing changes until an input does). A condition keeps its
``lastTransitionTime`` while its status and reason stay the same, so an unchanged verdict
writes the same bytes and makes no commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gitops.resources.status import Condition, ConditionType

__all__ = ["summary_conditions"]

_PROGRESS = {
    "Pending",
    "Resolving",
    "Verifying",
    "Observing",
    "Planning",
    "AwaitingApproval",
    "ReadyToApply",
    "Applying",
    "VerifyingConvergence",
    "Reading",
    "VerifyingHistory",
}


def summary_conditions(
    phase: str,
    reason: str,
    message: str,
    revision: str,
    now: datetime,
    previous: Sequence[Condition] = (),
) -> list[Condition]:
    ready = ("True", "InSync") if phase == "InSync" else ("False", reason)
    reconciling = ("True", reason) if phase in _PROGRESS or phase == "Failed" else ("False", reason)
    stalled = ("True", reason) if phase == "Blocked" else ("False", reason)
    before = {c.type: c for c in previous}
    conditions = []
    for kind, (status, why) in (
        (ConditionType.READY, ready),
        (ConditionType.RECONCILING, reconciling),
        (ConditionType.STALLED, stalled),
    ):
        old = before.get(kind)
        same = old is not None and (old.status, old.reason) == (status, why)
        conditions.append(
            Condition(
                type=kind,
                status=status,
                reason=why,
                message=message[:1024],
                last_transition_time=old.last_transition_time if same and old else now,
                observed_revision=revision,
            )
        )
    return conditions
