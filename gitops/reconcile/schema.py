"""The declared-schema lifecycle for one resource in one pass (seed: "The schema lifecycle").

    Pending -> Resolving -> Verifying -> Observing -> Planning
      -> InSync | AwaitingApproval | ReadyToApply | Blocked
    ReadyToApply -> Applying -> VerifyingConvergence -> InSync
    Applying -> Failed (retried on retryInterval); Pending -> Suspended

Every step that touches the database runs through the executor as a ``seshat-runner op``;
this module never sees a database URL, only the reference to it. Material transitions are
commits on the status branch: a new plan (AwaitingApproval / Blocked with a plan), the
dispatch marker (Applying, pushed *before* the runner starts: if it cannot be pushed the
Apply does not run), and the verdict of the pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from gitops.execution.executor import Outcome
from gitops.reconcile.identities import (
    PlanBinding,
    coordination_digest,
    fleet_plan_id,
    plan_id,
)
from gitops.reconcile.lifecycle import (
    BLOCKED,
    FAILED,
    IN_SYNC,
    ResourcePass,
    Stop,
    Verdict,
)
from gitops.resources.database import ApplyPolicy
from gitops.resources.schema import (
    DatabaseSchema,
    DevDatabase,
    DropPolicy,
    ImpactMode,
    SandboxIsolation,
)
from gitops.resources.status import (
    DatabaseSchemaStatus,
    DriftSummary,
    ImpactSummary,
    PlanSummary,
    Reason,
    SchemaPhase,
)
from gitops.writeback.ledger import Dispatched, Recovered, Settled
from gitops.writeback.status_files import binding_path, impact_bytes, impact_path, plan_paths
from runner.digests import canonical_json, digest, digest_hex, sha256_digest
from runner.engines.impact import ImpactReport
from runner.engines.plan import PlanDocument, plan_bytes, plan_sql
from runner.protocol.frame import PROTOCOL_VERSION
from runner.protocol.messages import ArtifactSource, PlanSettings
from runner.protocol.results import (
    ApplyResult,
    DriftReport,
    DriftResult,
    ErrorCode,
    PlanResult,
    RecoverResult,
    RunOutcome,
)

__all__ = ["SchemaPass", "schema_policy_digest"]


_PRIVILEGE_POLICY = {
    "managedRoles": [],
    "manageOwnership": False,
    "proceduralSchema": False,
    "drops": "Plan",
}
"""Policy fields left out of the digest while unset, so a policy without them digests as it
did before they existed (no resource re-plans for an upgrade alone)."""


def schema_policy_digest(resource: DatabaseSchema) -> str:
    """The fingerprint of what decides a plan; ``timeouts`` decide only when an operation is
    abandoned and ``impact`` only how its figures are measured (they are observations beside
    the plan), so changing one keeps the plan id and its approvals."""
    policy = resource.spec.policy.model_dump(
        mode="json", by_alias=True, exclude={"timeouts", "impact"}
    )
    for name, unset in _PRIVILEGE_POLICY.items():
        if policy.get(name) == unset:
            policy.pop(name, None)
    return digest("schema-policy", policy)


class SchemaPass(ResourcePass[DatabaseSchemaStatus, DatabaseSchema]):
    model = DatabaseSchema
    artifact_kind = "schema"
    apply_operation = "apply"
    phases = SchemaPhase
    refusals: ClassVar[dict[str, Reason]] = {
        "protected_table": Reason.PROTECTED_TABLE,
        "destructive_disallowed": Reason.DESTRUCTIVE_DISALLOWED,
        "sandbox_unavailable": Reason.SANDBOX_UNAVAILABLE,
        "sandbox_refused": Reason.SANDBOX_UNAVAILABLE,
        "catalog_not_visible": Reason.CONFIGURATION_ERROR,
        "unknown_role": Reason.CONFIGURATION_ERROR,
        "unsupported_option": Reason.CONFIGURATION_ERROR,
        "transaction_mode_unsupported": Reason.CONFIGURATION_ERROR,
        "statement_not_declarative": Reason.ARTIFACT_REFUSED,
        "superuser_required": Reason.ARTIFACT_REFUSED,
        "sandbox_limit_exceeded": Reason.ARTIFACT_REFUSED,
        "would_fail_on_data": Reason.WOULD_FAIL_ON_DATA,
    }

    impact: ImpactReport | None = None  # the figures of the last plan, beside it

    def initial_status(self) -> DatabaseSchemaStatus:
        status = DatabaseSchemaStatus()
        if self.previous is not None:
            status = status.model_copy(update={"last_applied": self.previous.last_applied})
        return status

    def settings(self) -> PlanSettings:
        policy = self.resource.spec.policy
        dev: DevDatabase | None = getattr(self.spec, "dev", None)  # a preview's: the base's
        return PlanSettings(
            allow_destructive=policy.allow_destructive,
            protected_tables=list(policy.protected_tables),
            exclude=list(policy.exclude),
            schemas=list(policy.schemas),
            exclude_schemas=list(policy.exclude_schemas),
            managed_roles=list(policy.managed_roles) or None,  # unset: left out of the input
            manage_ownership=policy.manage_ownership or None,
            procedural_schema=self.procedural() or None,  # unset: left out of the input
            sandbox_isolation="none"
            if dev is not None and dev.isolation is SandboxIsolation.NONE
            else None,
            drops="skip" if policy.drops is DropPolicy.SKIP else None,  # unset: Plan
            lock_timeout_ms=policy.lock_timeout * 1000,
            transaction_mode=policy.transaction_mode.value,
            impact=None if policy.impact is ImpactMode.ESTIMATE else policy.impact.value,
        )

    def procedural(self) -> bool:
        """Whether the declaration lets procedural statements of its desired schema run
        (``spec.policy.proceduralSchema``)."""
        return self.resource.spec.policy.procedural_schema

    # -- the lifecycle -------------------------------------------------------------------

    def lifecycle(self) -> Verdict:
        spec = self.resource.spec
        # Resolving and Verifying.
        desired, artifact_digest, verification = self.resolve_and_verify()
        # Observing and Planning, under the realm lease: one runner invocation.
        coordination = coordination_digest(self.ref.namespace, spec.target)
        self.lease = self.take_lease(coordination)
        if self.lease is None:
            return Verdict(
                FAILED,
                Reason.DISPATCH_FAILED,
                "another controller holds this database's lease",
            )
        document, data, target_identity = self._refresh(desired)
        if document.empty:
            self._settle_uncertain(None, target_identity)
            return self._in_sync("the database matches the declared schema")
        binding = self.bind(document, artifact_digest, coordination, target_identity, verification)
        current = plan_id(binding)
        fleet_plan = fleet_plan_id(binding) if self.member is not None else None
        self._settle_uncertain(current, target_identity)
        json_path, sql_path = plan_paths(self.ref.namespace, self.ref.name, current)
        self.files[json_path] = data
        self.files[sql_path] = plan_sql(document, current).encode("utf-8")
        binding_file = binding_path(self.ref.namespace, self.ref.name, current)
        self.files[binding_file] = canonical_json(binding.document()) + b"\n"
        self.status = self.status.model_copy(
            update={
                "plan": PlanSummary(
                    id=current,
                    statements=document.summary.statements,
                    destructive=document.summary.destructive,
                    privilege_changes=list(document.summary.privilege_changes),
                    path=json_path,
                    procedural_schema=document.procedural_schema,
                    sandbox_isolation=document.sandbox_isolation,
                    skipped_drops=None if document.skipped is None else len(document.skipped),
                    impact=self._impact(current),
                    fleet_plan=fleet_plan,
                )
            }
        )
        if spec.policy.apply is ApplyPolicy.NEVER:
            return Verdict(
                BLOCKED,
                Reason.APPLY_DISABLED,
                f"apply: Never; plan {current} is recorded and not applied",
            )
        dispatched_before = (
            self.ctx.state.dispatched(self.ref.uid, current)
            or self.ledger.dispatched(self.record_key, current)
            or (
                self.previous is not None
                and self.previous.phase is SchemaPhase.APPLYING
                and self.previous.plan is not None
                and self.previous.plan.id == current
            )
        )
        approval = self._approval(current, document, fleet_plan)
        automatic = (
            spec.policy.apply is ApplyPolicy.ALWAYS
            and not document.summary.privilege_changes
            and not dispatched_before
        )
        if approval is None and not automatic:
            why = (
                "its Apply was dispatched before with an uncertain outcome and is never "
                "started again without a new approval"
                if dispatched_before
                else "needs an approval naming this plan"
            )
            return Verdict(
                SchemaPhase.AWAITING_APPROVAL,
                Reason.AWAITING_APPROVAL,
                f"plan {current} {why}: {self.approve_hint(current, fleet_plan)}",
            )
        held = self.held(current)
        if held is not None:
            return held
        return self._apply(current, document, data, approval, desired, target_identity)

    def bind(
        self,
        document: PlanDocument,
        artifact_digest: str,
        coordination: str,
        target_identity: str,
        verification: str,
    ) -> PlanBinding:
        """Everything that decided ``document``: its digest is the plan id ``seshat approve
        --plan`` names. The lifecycle and ``seshat preview`` both bind a plan here, so a
        preview shows the id a pass would reach from the same inputs."""
        return PlanBinding(
            resource_uid=self.ref.uid,
            plan_digest=sha256_digest(plan_bytes(document)),
            artifact_digest=artifact_digest,
            coordination_digest=coordination,
            target_identity=target_identity,
            observed=document.observed,
            desired=document.desired,
            policy=schema_policy_digest(self.resource),
            verification_policy=verification,
            engine=f"{document.dialect} {document.server_major}",
            runner_protocol=PROTOCOL_VERSION,
            destructive=document.summary.destructive,
            privilege_changes=tuple(document.summary.privilege_changes),
            statements=document.summary.statements,
        )

    def _refresh(self, desired: ArtifactSource, when: str = "") -> tuple[PlanDocument, bytes, str]:
        """Observe, then two independent plans (only byte-identical ones are accepted): one
        runner invocation with the database credential. The drift goes to the status."""
        fields: dict[str, object] = {"artifact": desired}
        self.step(SchemaPhase.VERIFYING_CONVERGENCE if when else SchemaPhase.PLANNING)
        batch: list[tuple[str, Mapping[str, object]]] = [
            ("drift", fields),
            ("plan", fields),
            ("plan", fields),
        ]
        outcomes = self.run_batch(batch)
        if _needs_recovery(outcomes[0]) and self.lease is not None:  # a preview never writes
            self._recover(outcomes[0].detail)
            outcomes = self.run_batch(batch)
        drift = self.result(outcomes[0], f"Observe{when}", DriftResult).drift
        self.status = self.status.model_copy(update={"drift": _drift(drift)})
        first = self.result(outcomes[1], f"Plan{when}", PlanResult)
        second = self.result(outcomes[2], f"Plan{when} (second)", PlanResult)
        if first.plan_digest != second.plan_digest:
            raise Stop(
                FAILED,
                Reason.OPERATION_FAILED,
                "two plans of the same inputs differ; nothing is applied",
            )
        document = first.plan
        self.impact = first.impact  # observations beside the plan: never part of its id
        data = plan_bytes(document)
        if sha256_digest(data) != first.plan_digest:
            raise Stop(
                FAILED,
                Reason.OPERATION_FAILED,
                "the plan does not hash to the digest the runner reported",
            )
        assert outcomes[1].result is not None
        return document, data, outcomes[1].result.target_identity or ""

    def _impact(self, current: str) -> ImpactSummary | None:
        """The status's aggregates of the plan's figures; the figures themselves, worded,
        go to a file beside the plan, written when the plan is new or its aggregates change
        (a figure that moves alone rewrites nothing: no commit per pass for a busy table)."""
        if self.impact is None:
            return None
        path = impact_path(self.ref.namespace, self.ref.name, current)
        figures = self.impact.figures
        summary = ImpactSummary(
            mode=self.impact.mode,
            counted=sum(1 for f in figures if f.verdict == "count"),
            none=sum(1 for f in figures if f.verdict == "none"),
            unknown=sum(1 for f in figures if f.verdict == "unknown"),
            path=path,
        )
        before = self.previous.plan if self.previous is not None else None
        if before is None or before.id != current or before.impact != summary:
            self.files[path] = impact_bytes(current, self.impact)
        return summary

    # -- an interrupted write, an uncertain Apply ------------------------------------------

    def _recover(self, why: str) -> None:
        """Observe found a write interrupted midway (SQLite's hot journal): recover it as a
        step of its own, under the realm lease this pass holds, with the Apply's
        credential, and record it. What SQLite rolls back is the interrupted Apply's
        partial work, so that run stays uncertain: the Observe and Plan that follow settle
        it (:meth:`_settle_uncertain`), and it is never started again."""
        op_id = self.op_id("recover")
        self.ctx.log(f"{self.key}: {why}; recovering it ({op_id})")
        outcome = self.run_operation("recover", op_id)
        error = outcome.result.error if outcome.result is not None else None
        if error is not None and error.code is ErrorCode.NOT_WRITABLE:
            raise Stop(BLOCKED, Reason.RECOVERY_NEEDED, f"Recover: {error.message}")
        report = self.result(outcome, "Recover", RecoverResult).recovery
        if report.leftovers:  # named for a person, never settled by Seshat
            said = "; ".join(report.leftovers)
            raise Stop(BLOCKED, Reason.RECOVERY_NEEDED, f"a killed session left: {said}"[:1024])
        if report.found == "none":
            return  # settled meanwhile (another writer opened it): Observe again
        if not report.recovered:
            raise Stop(BLOCKED, Reason.RECOVERY_NEEDED, f"Recover: {report.detail}")
        last = self.status.last_applied
        uncertain = last is not None and last.outcome == "Unknown" and last.settled_by is None
        run = last.operation_id if uncertain and last is not None else op_id
        self.records.append(
            Recovered.model_validate(
                {
                    "resource": self.record_key,
                    "operationId": run,
                    "recovery": op_id,
                    "found": report.found,
                }
            )
        )
        if uncertain and last is not None:
            said = f"{last.message}; recovered by {op_id}: {report.detail}"
            self.status = self.status.model_copy(
                update={"last_applied": last.model_copy(update={"message": said[:1024]})}
            )
        self.ctx.log(f"{self.key}: {op_id}: {report.detail}")

    def _settle_uncertain(self, current: str | None, identity: str) -> None:
        """A fresh Observe and Plan of the database the uncertain Apply in ``lastApplied``
        ran on settle its outcome where they can: no plan left (``current`` None) is
        Applied, the very plan it was dispatched with is Failed (none of it applied: the
        database is as it was); any other plan leaves it Unknown, never guessed."""
        last = self.status.last_applied
        if last is None or last.outcome != "Unknown" or last.settled_by is not None:
            return
        if last.target_identity_digest not in (None, identity):
            return  # another database than the one it ran on
        ended: RunOutcome
        if current is None:
            ended, by = "Applied", "a fresh Observe and Plan: no change is left"
        elif current == last.plan_id:
            ended, by = "Failed", "a fresh Observe and Plan: the same plan, so none of it applied"
        else:
            return
        self.ctx.log(f"{self.key}: run {last.operation_id} settled {ended} by {by}")
        self.records.append(
            Settled.model_validate(
                {
                    "resource": self.record_key,
                    "operationId": last.operation_id,
                    "by": by,
                    "outcome": ended,
                }
            )
        )
        self.status = self.status.model_copy(
            update={"last_applied": last.model_copy(update={"outcome": ended, "settled_by": by})}
        )

    def _approval(self, current: str, document: PlanDocument, fleet_plan: str | None) -> str | None:
        previous = self.previous

        def spent_before(identity: str) -> bool:
            last = previous.last_applied if previous is not None else None
            return last is not None and f"approval {identity}" in last.message

        return self.approval(
            current,
            destructive=document.summary.destructive,
            privilege=bool(document.summary.privilege_changes),
            spent_before=spent_before,
            fleet_plan=fleet_plan,
        )

    def _apply(
        self,
        current: str,
        document: PlanDocument,
        data: bytes,
        approval: str | None,
        desired: ArtifactSource,
        target_identity: str,
    ) -> Verdict:
        op_id = self.op_id("apply")
        plan_file = self.ctx.work_dir / "plans" / f"{digest_hex(current)}.json"
        plan_file.parent.mkdir(parents=True, exist_ok=True)
        plan_file.write_bytes(data)
        outcome = self.dispatch(
            current,
            approval,
            op_id,
            (SchemaPhase.APPLYING, f"applying plan {current} (operation {op_id})"),
            "apply",
            target_identity=target_identity,
            plan=str(plan_file),
            expect_digest=sha256_digest(data),
        )
        now = self.ctx.now()
        if outcome.kind == "lost":
            self.record_run(op_id, current, "Unknown", outcome.detail, now=now)
            return Verdict(
                FAILED,
                Reason.APPLY_FAILED,
                f"the Apply's outcome is unknown ({outcome.detail}); the next pass "
                "observes and plans afresh, and never starts this Apply again",
            )
        report = (
            self.result(outcome, "Apply", ApplyResult).apply if outcome.kind == "done" else None
        )
        if report is None or report.failed is not None:
            detail = report.model_dump_json(by_alias=True) if report is not None else outcome.detail
            self.record_run(op_id, current, "Failed", detail, now=now)
            return Verdict(FAILED, Reason.APPLY_FAILED, f"the Apply failed: {detail}")
        self.record_run(op_id, current, "Applied", "", now=now)
        # VerifyingConvergence: a fresh Observe and Plan under the same lease.
        after, _, _ = self._refresh(desired, " after Apply")
        if not after.empty:
            return Verdict(
                FAILED,
                Reason.APPLY_FAILED,
                f"after the Apply a plan of {after.summary.statements} statements "
                "remains; convergence is not proven",
            )
        return self._in_sync("the database matches the declared schema")  # lastApplied: how

    def record_dispatch(self, op_id: str, current: str) -> None:
        self.record_run(op_id, current, "Unknown", "dispatched", final=False)

    def adopted(self, dispatched: Dispatched, outcome: Outcome) -> RunOutcome:
        """An adopted Apply's end, read as :meth:`_apply` reads its own; the lifecycle then
        observes and plans afresh, as after any Apply (only an empty plan is InSync)."""
        answer = outcome.result.result if outcome.result is not None else None
        ended: RunOutcome
        if outcome.kind == "lost":
            ended, detail = "Unknown", outcome.detail
        elif isinstance(answer, ApplyResult) and answer.apply.failed is None:
            ended, detail = "Applied", ""
        else:
            ended = "Failed"
            detail = (
                answer.apply.model_dump_json(by_alias=True)
                if isinstance(answer, ApplyResult)
                else outcome.detail
            )
        identity = dispatched.target_identity or ""
        self.record_run(
            dispatched.operation_id, dispatched.plan_id, ended, detail, identity=identity
        )
        return ended

    def _in_sync(self, message: str) -> Verdict:
        self.status = self.status.model_copy(update={"plan": None})
        return Verdict(IN_SYNC, Reason.IN_SYNC, message)


def _needs_recovery(outcome: Outcome) -> bool:
    error = outcome.result.error if outcome.result is not None else None
    return error is not None and error.code is ErrorCode.RECOVERY_NEEDED


def _drift(report: DriftReport) -> DriftSummary:
    counts = report.categories
    return DriftSummary(
        digest=report.digest,
        dialect=report.dialect,
        total=report.total,
        highest_severity=report.highest_severity,
        missing=counts.missing,
        extra=counts.extra,
        changed=counts.changed,
        invalid=counts.invalid,
    )
