"""A fleet's rollout gates from its members' statuses (no database, no runner): which step
may apply, pauses, failure budgets, and what a resume token lifts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gitops.reconcile.conditions import summary_conditions
from gitops.reconcile.fleets import Rollout
from gitops.repo.loader import load_repository
from gitops.resources.status import DatabaseSchemaStatus, RunRecord

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
PLAN = "sha256:" + "ab" * 32

FLEET = """\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseFleet
metadata: {{name: tenants, namespace: shop}}
spec:
  template:
    kind: DatabaseSchema
    spec:
      target: {{engine: sqlite, url: {{fromEnv: "T_{{{{ member.name }}}}"}},
               realm: "{{{{ member.name }}}}"}}
      artifact: {{ref: "oci-layout://l:v1", verification: {{policy: ci}}}}
  members:
    list:
      - {{name: c1, labels: {{wave: canary}}}}
      - {{name: a1, labels: {{wave: main}}}}
      - {{name: a2, labels: {{wave: main}}}}
      - {{name: x1, labels: {{wave: x}}}}
  rollout:
    steps:
      - {{match: {{wave: canary}}, maxParallel: 1, pause: {pause}}}
      - {{match: {{wave: main}}, maxParallel: 1}}
    onFailure: {on_failure}
    maxFailures: {budget}
{resume}"""

POLICY = """\
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: ci, namespace: shop}
spec: {artifactTypes: [application/vnd.seshat.schema.v1], signatures: {mode: "off"}}
"""


def rollout(
    tmp_path: Path,
    phases: dict[str, str],
    *,
    pause: str = "null",
    on_failure: str = "Halt",
    budget: int = 0,
    resume: str = "",
    applied_at: datetime | None = None,
) -> Rollout:
    (tmp_path / "databases").mkdir(parents=True, exist_ok=True)
    (tmp_path / "databases" / "policy.yaml").write_text(POLICY)
    text = FLEET.format(
        pause=pause,
        on_failure=on_failure,
        budget=budget,
        resume=f"    resume: {resume}\n" if resume else "",
    )
    (tmp_path / "databases" / "fleet.yaml").write_text(text)
    repository = load_repository(tmp_path)
    assert repository.problems == ()
    loaded = repository.find("DatabaseFleet", "shop", "tenants")
    assert loaded is not None
    members = repository.members("shop", "tenants")
    statuses = {}
    for member in members:
        phase = phases.get(member.key.name.rpartition("/")[2], "InSync")
        last = (
            RunRecord(operation_id="op-1", plan_id=PLAN, outcome="Applied", recorded_at=applied_at)
            if applied_at is not None and member.key.name == "tenants/c1"
            else None
        )
        statuses[member.key.name] = DatabaseSchemaStatus.model_validate(
            {
                "phase": phase,
                "conditions": summary_conditions(phase, phase, f"{phase} here", NOW),
                "lastApplied": last,
            }
        )
    return Rollout(loaded, members, lambda m: statuses[m.key.name], lambda: NOW)


def test_a_later_step_waits_until_every_earlier_member_is_in_sync(tmp_path: Path) -> None:
    waiting = rollout(tmp_path, {"c1": "AwaitingApproval", "a1": "AwaitingApproval"})
    assert waiting.why_not("tenants/c1") is None
    assert waiting.why_not("tenants/a1") == "step 1 is not done (0 of 1 members InSync)"
    # A member that matches no step never applies.
    assert "matches no step" in str(waiting.why_not("tenants/x1"))


def test_max_parallel_lets_one_member_of_a_step_apply_at_a_time(tmp_path: Path) -> None:
    steps = rollout(tmp_path, {"a1": "AwaitingApproval", "a2": "AwaitingApproval"})
    assert steps.enter("tenants/a1") is None
    assert steps.active == [0, 1]
    steps.leave("tenants/a1")
    assert steps.enter("tenants/a2") is None


def test_a_failed_member_halts_under_halt_and_not_within_the_budget_of_continue(
    tmp_path: Path,
) -> None:
    halted = rollout(tmp_path / "halt", {"c1": "Failed", "a1": "AwaitingApproval"})
    why = str(halted.why_not("tenants/a1"))
    assert why.startswith("the rollout of fleet shop/tenants is halted at step 1: ")
    assert "shop/tenants/c1 is Failed" in why
    assert halted.status([]).phase == "Halted"
    token = halted.status([]).resume
    assert token is not None and f"spec.rollout.resume: {token}" in why
    # The token names this failure: committing it lets the rollout go on past it.
    resumed = rollout(
        tmp_path / "resumed", {"c1": "Failed", "a1": "AwaitingApproval"}, resume=token
    )
    assert resumed.why_not("tenants/a1") is None
    # Continue: a failure within maxFailures does not halt.
    tolerated = rollout(
        tmp_path / "continue",
        {"c1": "Blocked", "a1": "AwaitingApproval"},
        on_failure="Continue",
        budget=1,
    )
    assert tolerated.why_not("tenants/a1") is None


@pytest.mark.parametrize("minutes, waits", [(5, True), (15, False)])
def test_a_timed_pause_after_a_step_runs_from_its_last_apply(
    tmp_path: Path, minutes: int, waits: bool
) -> None:
    paused = rollout(
        tmp_path,
        {"a1": "AwaitingApproval"},
        pause="10m",
        applied_at=NOW - timedelta(minutes=minutes),
    )
    why = paused.why_not("tenants/a1")
    assert (why is not None) is waits
    if waits:
        assert str(why).startswith("step 1 is followed by a pause until 2026-12-06T12:05:00")


def test_a_pause_until_resumed_waits_for_its_token(tmp_path: Path) -> None:
    paused = rollout(tmp_path / "a", {"a1": "AwaitingApproval"}, pause="untilResumed",
                     applied_at=NOW)  # fmt: skip
    status = paused.status([])
    assert status.phase == "Paused" and status.resume is not None
    assert "pauses after step 1 until resumed" in str(paused.why_not("tenants/a1"))
    resumed = rollout(
        tmp_path / "b",
        {"a1": "AwaitingApproval"},
        pause="untilResumed",
        applied_at=NOW,
        resume=status.resume,
    )
    assert resumed.why_not("tenants/a1") is None
