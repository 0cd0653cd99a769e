"""Kubernetes-style summary conditions for a phase, keeping transition times stable.

``Ready`` (InSync), ``Reconciling`` (work is under way or will be retried) and ``Stalled``
(Blocked: nothing changes until an input does). A condition keeps its
``lastTransitionTime`` while its status and reason stay the same, and names no revision,
so an unchanged verdict writes the same bytes whatever commit the pass read, and makes no
commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gitops.resources.status import SETTLED_PHASES, Condition, ConditionType, SharedPhase

__all__ = ["summary_conditions"]


def summary_conditions(
    phase: str,
    reason: str,
    message: str,
    now: datetime,
    previous: Sequence[Condition] = (),
) -> list[Condition]:
    in_sync = phase == SharedPhase.IN_SYNC
    ready = ("True", SharedPhase.IN_SYNC.value) if in_sync else ("False", reason)
    under_way = phase not in SETTLED_PHASES or phase == SharedPhase.FAILED  # Failed: retried
    reconciling = ("True", reason) if under_way else ("False", reason)
    stalled = ("True", reason) if phase == SharedPhase.BLOCKED else ("False", reason)
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
            )
        )
    return conditions
