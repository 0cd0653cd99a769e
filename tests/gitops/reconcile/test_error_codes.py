"""The control plane's verdict tables agree with what each runner error code says of itself."""

from __future__ import annotations

from gitops.reconcile.lifecycle import BLOCKED_BY_CODE
from gitops.reconcile.migration import VERDICT_REASONS, MigrationPass
from gitops.reconcile.schema import SchemaPass
from gitops.resources.status import (
    SETTLED_PHASES,
    MigrationPhase,
    Reason,
    SchemaPhase,
    SharedPhase,
)
from runner.protocol.results import ErrorCode, HistoryVerdict


def test_every_blocking_code_has_a_reason_and_no_other_does() -> None:
    blocking = {code for code in ErrorCode if code.blocked}
    # A refusal blocks through its own reason, looked up in the lifecycle's table.
    assert set(BLOCKED_BY_CODE) == blocking - {ErrorCode.PLAN_REFUSED}


def test_codes_that_may_have_changed_the_database_never_block() -> None:
    for code in ErrorCode:
        if not code.ran_nothing:
            assert not code.blocked, code


def test_refusal_tables_name_the_runners_reasons() -> None:
    assert MigrationPass.refusals == {
        **{verdict.value: r for verdict, r in VERDICT_REASONS.items()},
        "transaction_mode_unsupported": Reason.CONFIGURATION_ERROR,
    }
    assert SchemaPass.refusals["transaction_mode_unsupported"] is Reason.CONFIGURATION_ERROR
    assert set(VERDICT_REASONS) == {verdict for verdict in HistoryVerdict if verdict.blocking}
    assert {"destructive_disallowed", "protected_table", "sandbox_refused"} <= set(
        SchemaPass.refusals
    )


def test_the_shared_phases_are_phases_of_both_lifecycles() -> None:
    for phase in SharedPhase:
        assert SchemaPhase(phase.value) and MigrationPhase(phase.value)
    assert set(SharedPhase) >= SETTLED_PHASES
