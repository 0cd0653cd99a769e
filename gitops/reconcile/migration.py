"""The versioned-migration lifecycle for one resource in one pass (seed: "The migration
lifecycle").

    Pending -> Resolving -> Verifying -> Reading
      -> InSync (nothing pending) | Planning (pending versions) | Blocked (dirty, modified,
         out of order, ahead)
    Planning -> AwaitingApproval | Applying (apply: Always)
    Applying -> VerifyingHistory -> InSync;  Applying -> Blocked (Partial or Unknown)
    Failed (dispatch or configuration) is retried on retryInterval; Pending -> Suspended

Four operations: Resolve and Verify (here, in the control plane's artifact client), History
(``seshat-runner op history``, read-only, no lease) and Apply (``op migrate``, the only one
that takes the realm lease; the runner also takes the database's lock and re-reads the
history under it). The plan is the ordered list of pending files with their checksums, bound
to the history fingerprint, the artifact, the target and the policies; it carries no SQL.

A run that ended Partial or Unknown is recorded as ``unresolvedRun`` and blocks every later
Apply until a history reading of the same target shows nothing pending, or a signed
``RunAcknowledgment`` names its operation id. A retry never clears it.
"""

from __future__ import annotations

import json
import secrets
from typing import ClassVar

from gitops.execution.executor import Outcome
from gitops.reconcile.identities import (
    MigrationPlanBinding,
    coordination_digest,
    fleet_plan_id,
    migration_plan_id,
)
from gitops.reconcile.lifecycle import (
    BLOCKED,
    FAILED,
    IN_SYNC,
    PassContext,
    ResourcePass,
    Verdict,
)
from gitops.repo.loader import LoadedResource
from gitops.resources.database import ApplyPolicy
from gitops.resources.migration import DatabaseMigration
from gitops.resources.status import (
    DatabaseMigrationStatus,
    HistorySummary,
    MigrationPhase,
    PlanSummary,
    Reason,
    RunRecord,
)
from gitops.writeback.ledger import Dispatched, Settled
from gitops.writeback.status_files import plan_paths
from runner.digests import canonical_json, digest
from runner.protocol.frame import PROTOCOL_VERSION
from runner.protocol.messages import ArtifactSource, PlanSettings
from runner.protocol.results import (
    HistoryReport,
    HistoryResult,
    HistoryVerdict,
    MigrateResult,
    RunOutcome,
)

__all__ = ["VERDICT_REASONS", "MigrationPass", "migration_policy_digest"]

VERDICT_REASONS = {
    HistoryVerdict.DIRTY: Reason.HISTORY_DIRTY,
    HistoryVerdict.CHECKSUM_MODIFIED: Reason.CHECKSUM_MODIFIED,
    HistoryVerdict.DATABASE_AHEAD: Reason.DATABASE_AHEAD,
    HistoryVerdict.OUT_OF_ORDER: Reason.HISTORY_OUT_OF_ORDER,
}
"""The blocking history verdicts and the Blocked reason each one is reported with."""


def migration_policy_digest(resource: DatabaseMigration) -> str:
    """The fingerprint of the policy fields that decide a run (``timeouts`` do not: changing
    one keeps the plan id and its approvals)."""
    policy = resource.spec.policy.model_dump(mode="json", by_alias=True, exclude={"timeouts"})
    return digest("migration-policy", policy)


def _summary(history: HistoryReport) -> HistorySummary:
    return HistorySummary(
        verdict=history.verdict,
        fingerprint=history.fingerprint,
        current_version=history.current_version,
        checkpoint_version=history.checkpoint_version,
        applied_count=history.applied_count,
        pending_versions=history.pending[:256],
        involved_versions=history.versions[:64],
    )


class MigrationPass(ResourcePass[DatabaseMigrationStatus, DatabaseMigration]):
    model = DatabaseMigration
    artifact_kind = "migrations"
    apply_operation = "migrate"
    phases = MigrationPhase
    refusals: ClassVar[dict[str, Reason]] = {
        **{v.value: r for v, r in VERDICT_REASONS.items()},
        "transaction_mode_unsupported": Reason.CONFIGURATION_ERROR,
    }

    def __init__(
        self, loaded: LoadedResource, ctx: PassContext, previous: DatabaseMigrationStatus | None
    ) -> None:
        super().__init__(loaded, ctx, previous)
        self.binding: MigrationPlanBinding | None = None  # the plan being applied
        self.ended: dict[str, RunOutcome] = {}  # runs adopted this pass: how each ended

    def initial_status(self) -> DatabaseMigrationStatus:
        status = DatabaseMigrationStatus()
        previous = self.previous
        if previous is None:
            return status
        unresolved = previous.unresolved_run
        if (
            unresolved is None
            and previous.phase is MigrationPhase.APPLYING
            and previous.last_applied is not None
        ):
            # The dispatch marker is the last word: whoever ran this Apply stopped before
            # recording its result, so its outcome is unknown, and it is never run again.
            unresolved = previous.last_applied.model_copy(
                update={
                    "outcome": "Unknown",
                    "message": (
                        f"{previous.last_applied.message}; the pass that dispatched it ended "
                        "before reading its result"
                    )[:1024],
                }
            )
        return status.model_copy(
            update={
                "last_applied": previous.last_applied,
                "unresolved_run": unresolved,
                "history": previous.history,
            }
        )

    def _uncertain_runs(self) -> list[RunRecord]:
        """Every run that blocks an Apply: those the history of safety records shows
        uncertain (whatever the status file says, which anyone can edit), and the status
        file's own ``unresolvedRun`` unless a record settled it."""
        runs: list[RunRecord] = []
        recorded = [  # a run adopted this pass ended as it was recorded
            (dispatched, self.ended.get(dispatched.operation_id, outcome))
            for dispatched, outcome in self.ledger.unresolved(self.record_key)
            if self.ended.get(dispatched.operation_id, outcome) in ("Partial", "Unknown")
        ]
        shown = self.status.unresolved_run
        for dispatched, outcome in recorded:
            if shown is not None and shown.operation_id == dispatched.operation_id:
                runs.append(shown)
                continue
            runs.append(
                RunRecord(
                    operation_id=dispatched.operation_id,
                    plan_id=dispatched.plan_id,
                    outcome=outcome,
                    target_identity_digest=dispatched.target_identity,
                    recorded_at=self.ctx.now(),
                    message="an uncertain run recorded in the status branch's history",
                )
            )
        known = {r.operation_id for r, _ in recorded} | self.ledger.settled(self.record_key)
        known |= set(self.ended)
        if shown is not None and shown.operation_id not in known | {r.operation_id for r in runs}:
            runs.append(shown)  # recorded before safety records existed
        return runs

    def settings(self) -> PlanSettings:
        policy = self.resource.spec.policy
        return PlanSettings(
            lock_timeout_ms=policy.lock_timeout * 1000,
            out_of_order=policy.out_of_order,
            transaction_mode=policy.transaction_mode.value,
        )

    # -- the lifecycle -------------------------------------------------------------------

    def history_verdict(self, history: HistoryReport, identity: str) -> Verdict | None:
        """The verdict the history alone decides (an unresolved run, a refused history, or
        nothing pending), or None when there are files to plan."""
        unsettled = self._settle(history, identity)
        if unsettled is not None:
            return unsettled
        if history.verdict in VERDICT_REASONS:
            involved = ", ".join(history.versions)
            return Verdict(
                BLOCKED,
                VERDICT_REASONS[history.verdict],
                f"{history.verdict} ({involved}): {history.detail}; see docs/migrations.md",
            )
        if history.verdict is HistoryVerdict.NOTHING_PENDING:
            return self._in_sync(history)
        return None

    def lifecycle(self) -> Verdict:
        spec = self.resource.spec
        artifact, artifact_digest, verification = self.resolve_and_verify()
        history, identity = self._read(artifact, "History")
        settled = self.history_verdict(history, identity)
        if settled is not None:
            return settled
        # Planning: the pending files, exactly, bound to everything that decided them.
        binding = self.bind(history, artifact_digest, identity, verification)
        current = migration_plan_id(binding)
        fleet_plan = fleet_plan_id(binding) if self.member is not None else None
        json_path, _ = plan_paths(self.ref.namespace, self.ref.name, current)
        self.files[json_path] = canonical_json(binding.document()) + b"\n"
        self.status = self.status.model_copy(
            update={
                "plan": PlanSummary(id=current, statements=0, path=json_path, fleet_plan=fleet_plan)
            }
        )
        if spec.policy.apply is ApplyPolicy.NEVER:
            return Verdict(
                BLOCKED,
                Reason.APPLY_DISABLED,
                f"apply: Never; plan {current} ({len(history.pending)} pending: "
                f"{', '.join(history.pending)}) is recorded and not applied",
            )
        dispatched_before = (
            self.ctx.state.dispatched(self.ref.uid, current)
            or self.ledger.dispatched(self.record_key, current)
            or (
                self.status.last_applied is not None and self.status.last_applied.plan_id == current
            )
        )
        approval = self._approval(current, fleet_plan)
        automatic = spec.policy.apply is ApplyPolicy.ALWAYS and not dispatched_before
        if approval is None and not automatic:
            why = (
                "was dispatched before and is never started again without a new approval"
                if dispatched_before
                else "needs an approval naming this plan"
            )
            return Verdict(
                MigrationPhase.AWAITING_APPROVAL,
                Reason.AWAITING_APPROVAL,
                f"plan {current} (pending {', '.join(history.pending)}) {why}: "
                f"{self.approve_hint(current, fleet_plan)}",
            )
        held = self.held(current)
        if held is not None:
            return held
        return self._apply(current, binding, approval, artifact)

    def bind(
        self, history: HistoryReport, artifact_digest: str, target_identity: str, verification: str
    ) -> MigrationPlanBinding:
        """The plan of ``history``'s pending files for :meth:`bound_resource`: its id is what
        ``seshat approve --plan`` names. The lifecycle and ``seshat preview`` share it."""
        resource = self.bound_resource()
        spec = resource.spec
        names = dict(zip(history.pending, history.pending_names, strict=False))
        return MigrationPlanBinding(
            resource_uid=self.ref.uid,
            versions=tuple((v, names.get(v, ""), c) for v, c in history.pending_checksums),
            history_fingerprint=history.fingerprint,
            artifact_digest=artifact_digest,
            coordination_digest=coordination_digest(resource.metadata.namespace, spec.target),
            target_identity=target_identity,
            policy=migration_policy_digest(resource),
            verification_policy=verification,
            engine=spec.target.engine,
            runner_protocol=PROTOCOL_VERSION,
        )

    def bound_resource(self) -> DatabaseMigration:
        """The resource a plan is bound to (its target decides the coordination digest)."""
        return self.resource

    def _read(self, artifact: ArtifactSource, what: str) -> tuple[HistoryReport, str]:
        """A history reading and the identity of the target the runner reached."""
        self.step(MigrationPhase.READING if what == "History" else MigrationPhase.VERIFYING_HISTORY)
        outcome = self.run_operation("history", artifact=artifact)
        history = self.result(outcome, what, HistoryResult).history
        assert outcome.result is not None
        self.status = self.status.model_copy(update={"history": _summary(history)})
        return history, outcome.result.target_identity or ""

    # -- an uncertain run ----------------------------------------------------------------

    def _settle(self, history: HistoryReport, identity: str) -> Verdict | None:
        """Settle uncertain runs the database or a person settled; Blocked by any other."""
        runs = self._uncertain_runs()
        remaining: list[RunRecord] = []
        for run in runs:
            if history.verdict is HistoryVerdict.NOTHING_PENDING and (
                run.target_identity_digest in (None, identity)
            ):
                self.ctx.log(f"{self.key}: run {run.operation_id} settled: nothing is pending")
                self._settled(run.operation_id, "a history reading with nothing pending", "Applied")
                continue
            acknowledged = self.acknowledged(run.operation_id)
            if acknowledged is not None:
                self.ctx.log(f"{self.key}: run {run.operation_id} acknowledged ({acknowledged})")
                self._settled(run.operation_id, f"acknowledgment ({acknowledged})"[:256], None)
                continue  # what is still pending is planned afresh and needs a new approval
            remaining.append(run)
        self.status = self.status.model_copy(
            update={"unresolved_run": remaining[0] if remaining else None}
        )
        if not remaining:
            return None
        run = remaining[0]
        return Verdict(
            BLOCKED,
            Reason.RUN_UNRESOLVED,
            f"run {run.operation_id} of plan {run.plan_id} ended {run.outcome}: {run.message}. "
            "Nothing is applied until the history shows nothing pending or the run is "
            f"acknowledged: repair the database, then seshat acknowledge {self.key} "
            f"--operation {run.operation_id} (docs/migrations.md)",
        )

    def _settled(self, op_id: str, by: str, outcome: RunOutcome | None) -> None:
        """Record that the run ``op_id`` is settled ``by`` a reading (``outcome``: how it
        ended, as the reading shows) or a person (None: what it did stays unknown), and
        say so in ``lastApplied`` when that is the run it shows."""
        record = {"resource": self.record_key, "operationId": op_id, "by": by, "outcome": outcome}
        self.records.append(Settled.model_validate(record))
        last = self.status.last_applied
        if last is not None and last.operation_id == op_id and last.settled_by is None:
            settled = {"settled_by": by} | ({"outcome": outcome} if outcome is not None else {})
            self.status = self.status.model_copy(
                update={"last_applied": last.model_copy(update=settled)}
            )

    # -- approval and Apply --------------------------------------------------------------

    def _approval(self, current: str, fleet_plan: str | None) -> str | None:
        last = self.status.last_applied

        def spent_before(identity: str) -> bool:
            return last is not None and f"approval {identity}" in last.message

        return self.approval(
            current,
            destructive=False,
            privilege=False,
            spent_before=spent_before,
            fleet_plan=fleet_plan,
        )

    def _apply(
        self,
        current: str,
        binding: MigrationPlanBinding,
        approval: str | None,
        artifact: ArtifactSource,
    ) -> Verdict:
        self.lease = self.take_lease(binding.coordination_digest)
        if self.lease is None:
            return Verdict(FAILED, Reason.DISPATCH_FAILED, "another controller holds the lease")
        op_id = secrets.token_hex(16)  # hex, so a RunAcknowledgment can name it
        versions = [v for v, _, _ in binding.versions]
        self.binding = binding
        outcome = self.dispatch(
            current,
            approval,
            op_id,
            (
                MigrationPhase.APPLYING,
                f"applying plan {current}: {', '.join(versions)} (operation {op_id})",
            ),
            "migrate",
            target_identity=binding.target_identity,
            artifact=artifact,
            expect_pending=[[v, c] for v, _, c in binding.versions],
        )
        identity = binding.target_identity
        if not self.ctx.lease_store.holds(self.lease):
            # The result was produced across a change of lease holder: it is not read, so
            # what the run did is unknown, and it blocks like any uncertain run.
            self.record_run(op_id, current, "Unknown", "result discarded", identity=identity)
            self.status = self.status.model_copy(
                update={"unresolved_run": self.status.last_applied}
            )
            return Verdict(
                FAILED,
                Reason.LEASE_CONTINUITY_LOST,
                "the realm lease changed hands during the Apply; its result is discarded "
                f"and run {op_id} is unresolved",
            )
        error = outcome.result.error if outcome.result is not None else None
        if outcome.kind != "done" and outcome.kind != "refused":
            if error is not None and error.code.ran_nothing:
                self.record_run(op_id, current, "Failed", outcome.detail, identity=identity)
                return Verdict(
                    FAILED, Reason.APPLY_FAILED, f"the Apply did not start: {outcome.detail}"
                )
            # Lost, killed, or an error midway without a report: the evidence is missing.
            return self._unresolved(op_id, current, "Unknown", [], outcome.detail, identity)
        if outcome.kind == "refused" and error is not None:
            self.record_run(
                op_id, current, "Failed", f"refused: {error.message}", identity=identity
            )
            blocked = self.refusals.get(error.reason or "")
            if blocked is not None:
                refused = f"the Apply was refused: {error.message}"
                return Verdict(BLOCKED, blocked, refused)
            return Verdict(
                FAILED,
                Reason.APPLY_FAILED,
                f"the Apply was refused and changed nothing: {error.message}; the next pass "
                "reads the history again and plans afresh",
            )
        report = self.result(outcome, "Apply", MigrateResult).migrate
        applied = list(report.applied)
        kind = report.outcome
        if kind in ("Partial", "Unknown"):
            detail = json.dumps(report.model_dump(mode="json", by_alias=True), sort_keys=True)
            return self._unresolved(op_id, current, kind, applied, detail, identity)
        if kind == "Failed":
            detail = (
                f"version {report.failed} failed at statement {report.statement} "
                f"and was rolled back: {report.error}"
            )
            self.record_run(op_id, current, "Failed", detail, applied=applied, identity=identity)
            return Verdict(FAILED, Reason.APPLY_FAILED, f"the Apply failed: {detail}")
        self.record_run(op_id, current, kind, "", applied=applied, identity=identity)
        # VerifyingHistory: the history read back must show the sequence applied.
        after, _ = self._read(artifact, "History after Apply")
        if after.verdict is not HistoryVerdict.NOTHING_PENDING:
            return Verdict(
                FAILED,
                Reason.APPLY_FAILED,
                f"after the Apply the history reads {after.verdict} "
                f"({', '.join(after.versions or after.pending)}); it does not match",
            )
        return self._in_sync(after)

    def record_dispatch(self, op_id: str, current: str) -> None:
        binding = self.binding
        assert binding is not None
        versions = [v for v, _, _ in binding.versions]
        self.record_run(
            op_id,
            current,
            "Unknown",
            "dispatched",
            applied=versions,
            identity=binding.target_identity,
            final=False,
        )

    def adopted(self, dispatched: Dispatched, outcome: Outcome) -> RunOutcome:
        """An adopted run's end, read as :meth:`_apply` reads its own: Partial or Unknown
        leave it unresolved; any other end is confirmed by the history reading the
        lifecycle makes next."""
        answer = outcome.result.result if outcome.result is not None else None
        error = outcome.result.error if outcome.result is not None else None
        applied: list[str] = []
        ended: RunOutcome
        if isinstance(answer, MigrateResult):
            ended, applied = answer.migrate.outcome, list(answer.migrate.applied)
            detail = json.dumps(answer.migrate.model_dump(mode="json", by_alias=True))
        elif outcome.kind == "refused" or (error is not None and error.code.ran_nothing):
            ended, detail = "Failed", outcome.detail
        else:
            ended, detail = "Unknown", outcome.detail
        op_id = dispatched.operation_id
        identity = dispatched.target_identity or ""
        self.record_run(
            op_id, dispatched.plan_id, ended, detail, applied=applied, identity=identity
        )
        self.ended[op_id] = ended
        shown = self.status.unresolved_run
        if ended in ("Partial", "Unknown"):
            self.status = self.status.model_copy(
                update={"unresolved_run": self.status.last_applied}
            )
        elif shown is not None and shown.operation_id == op_id:
            self.status = self.status.model_copy(update={"unresolved_run": None})
        return ended

    def _unresolved(
        self,
        op_id: str,
        current: str,
        outcome: RunOutcome,
        applied: list[str],
        detail: str,
        identity: str,
    ) -> Verdict:
        self.record_run(op_id, current, outcome, detail, applied=applied, identity=identity)
        self.status = self.status.model_copy(update={"unresolved_run": self.status.last_applied})
        return Verdict(
            BLOCKED,
            Reason.RUN_UNRESOLVED,
            f"run {op_id} ended {outcome}; it is never retried. Read the history "
            f"(seshat-runner migrations status), repair the database, then "
            f"seshat acknowledge {self.key} --operation {op_id}",
        )

    def _in_sync(self, history: HistoryReport) -> Verdict:
        self.status = self.status.model_copy(update={"plan": None})
        current = history.current_version or "none"
        return Verdict(IN_SYNC, Reason.IN_SYNC, f"every migration is applied (current {current})")
