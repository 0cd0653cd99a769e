"""The read-only half of both lifecycles, for ``seshat preview``.

:class:`SchemaPreviewPass` and :class:`MigrationPreviewPass` subclass the reconciler's own
passes and keep their Resolve, Verify, Observe, Plan and History steps (the same runner
operations, the same Blocked reasons, the same plan id from
:meth:`~gitops.reconcile.schema.SchemaPass.bind` and
:meth:`~gitops.reconcile.migration.MigrationPass.bind`);
what they replace is the end of the lifecycle: they stop at the verdict a merge would reach
and never dispatch an Apply, take no lease, consume no approval and stage no commit.

The database is reached through the **base** branch's target (its ``previewUrl`` when it
names one, else its ``url``), never the head's: a pull request cannot point a preview at
another database or credential. The same holds for a schema's ``dev`` sandbox, and for the
trust anchors: the passes run in a context whose :attr:`~gitops.reconcile.lifecycle.
PassContext.trust` is the base, so the head's artifact is verified with the base's
VerificationPolicy (and keys) and counted against the base's ApprovalPolicy; one the base
refuses stops at Verify, before any operation that reads its content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitops.approvals.verify import matching_rule, required_approvals
from gitops.reconcile.identities import coordination_digest, migration_plan_id, plan_id
from gitops.reconcile.lifecycle import BLOCKED, PassContext, ResourcePass, Stop, Verdict
from gitops.reconcile.migration import MigrationPass
from gitops.reconcile.schema import SchemaPass
from gitops.repo.loader import LoadedResource
from gitops.resources.database import ApplyPolicy, Target
from gitops.resources.migration import DatabaseMigration
from gitops.resources.policies import ApprovalPolicy
from gitops.resources.schema import DevDatabase
from gitops.resources.status import (
    DatabaseMigrationStatus,
    DatabaseSchemaStatus,
    MigrationPhase,
    Reason,
    SchemaPhase,
)
from runner.engines.impact import describe
from runner.engines.plan import plan_sql

__all__ = [
    "MigrationPreviewPass",
    "PlanPreview",
    "SchemaPreviewPass",
    "preview_verdict",
    "resolved_digest",
    "runner_target",
]


def runner_target(base: Target) -> Target:
    """The base's target as the preview's runner reaches it: the read-only ``previewUrl``
    when the declaration names one."""
    return base.model_copy(update={"url": base.preview_url or base.url})


@dataclass(frozen=True, slots=True)
class PlanPreview:
    """The plan a preview computed: its id (non-binding), and what a reviewer reads."""

    id: str
    statements: int = 0
    destructive: bool = False
    privilege_changes: tuple[str, ...] = ()
    hazards: tuple[tuple[str, int], ...] = ()  # hazard code -> statements with it
    sql: str = ""  # plan.sql (schemas); migrations carry no SQL
    files: tuple[tuple[str, str, str], ...] = ()  # migrations: (version, name, checksum)
    history: str = ""  # migrations: the history verdict
    approvals: int | None = None  # approvals needed; None: none can be (no rule matches)
    automatic: bool = False  # apply: Always would apply it without an approval
    impact: tuple[str, ...] = ()  # the plan's impact figures, worded (schemas)


def preview_verdict(one: ResourcePass[Any, Any], census: tuple[Reason, str] | None) -> Verdict:
    """The verdict a pass of the merged resource would reach now, nothing written: the
    pass's own checks before its lifecycle (suspend, realm census, engine), then the preview
    lifecycle, which ends before any Apply."""
    try:
        return one._not_started(census) or one.lifecycle()
    except Stop as stop:
        return stop.verdict


def resolved_digest(one: ResourcePass[Any, Any]) -> str | None:
    """The digest the head's artifact reference resolves to now (None: it cannot be)."""
    try:
        return one._resolve(one._source(one.spec.artifact.ref))
    except Stop:
        return None


def _required(one: ResourcePass[Any, Any], *, destructive: bool, privilege: bool) -> int | None:
    """Approvals a plan needs under the trusted (the base's) ApprovalPolicy (None: no rule
    matches)."""
    policies = [
        r.resource for r in one.ctx.trust.resources if isinstance(r.resource, ApprovalPolicy)
    ]
    found = matching_rule(policies, one.ref)
    if found is None:
        return None
    return required_approvals(found[1], destructive=destructive, privilege=privilege)


def _merged(
    apply: ApplyPolicy, planned: PlanPreview, what: str, ready: str, awaiting: str
) -> Verdict:
    """What a merge would do with ``what`` (``planned``) under ``apply``: record it only
    (Never), apply it without an approval (``planned.automatic``; phase ``ready``), or wait
    for the approvals it needs (phase ``awaiting``)."""
    if apply is ApplyPolicy.NEVER:
        return Verdict(
            BLOCKED, Reason.APPLY_DISABLED, f"apply: Never; {what} would be recorded only"
        )
    if planned.automatic:
        return Verdict(
            ready,
            Reason.READY_TO_APPLY,
            f"{what} would be applied without an approval (apply: Always)",
        )
    if planned.approvals is None:
        return Verdict(
            awaiting,
            Reason.AWAITING_APPROVAL,
            f"{what} needs an approval, and no ApprovalPolicy rule matches this resource: "
            "no approval can be accepted",
        )
    return Verdict(
        awaiting,
        Reason.AWAITING_APPROVAL,
        f"{what} needs {planned.approvals} approval(s) naming plan {planned.id}",
    )


class SchemaPreviewPass(SchemaPass):
    """Resolve, Verify, Observe and Plan a ``DatabaseSchema``; the verdict, never an Apply."""

    def __init__(
        self,
        loaded: LoadedResource,
        ctx: PassContext,
        previous: DatabaseSchemaStatus | None,
        target: Target,
        dev: DevDatabase | None,
        procedural: bool = False,
    ) -> None:
        super().__init__(loaded, ctx, previous)
        self.planned: PlanPreview | None = None
        self.base_target = target
        self.spec = self.resource.spec.model_copy(
            update={"target": runner_target(target), "dev": dev}
        )
        self.base_procedural = procedural  # the base's proceduralSchema, never the head's

    def procedural(self) -> bool:
        """The base branch's ``proceduralSchema``: a pull request that sets it is previewed
        without it, since its review is the merge (docs/preview.md)."""
        return self.base_procedural

    def lifecycle(self) -> Verdict:
        try:
            return self._previewed()
        except Stop as stop:
            verdict = stop.verdict
            if (
                verdict.reason is Reason.ARTIFACT_REFUSED
                and self.resource.spec.policy.procedural_schema
                and not self.base_procedural
            ):
                note = (
                    "; this pull request sets spec.policy.proceduralSchema, which a preview "
                    "leaves out until the pull request is merged"
                )
                raise Stop(verdict.phase, verdict.reason, verdict.message + note) from None
            raise

    def _previewed(self) -> Verdict:
        spec = self.resource.spec
        desired, artifact_digest, verification = self.resolve_and_verify()
        document, _, target_identity = self._refresh(desired)
        if document.empty:
            return self._in_sync("the database matches the declared schema")
        coordination = coordination_digest(self.ref.namespace, self.base_target)
        binding = self.bind(document, artifact_digest, coordination, target_identity, verification)
        current = plan_id(binding)
        summary = document.summary
        privilege = bool(summary.privilege_changes)
        automatic = spec.policy.apply is ApplyPolicy.ALWAYS and not privilege
        self.planned = PlanPreview(
            id=current,
            statements=summary.statements,
            destructive=summary.destructive,
            privilege_changes=tuple(summary.privilege_changes),
            hazards=tuple(sorted(summary.hazards.items())),
            sql=plan_sql(document, current),  # the id shown above, not a second one
            approvals=_required(self, destructive=summary.destructive, privilege=privilege),
            automatic=automatic,
            impact=tuple(describe(f) for f in self.impact.figures) if self.impact else (),
        )
        what = f"a plan of {summary.statements} statement(s)" + (
            ", destructive," if summary.destructive else ""
        )
        return _merged(
            spec.policy.apply,
            self.planned,
            what,
            SchemaPhase.READY_TO_APPLY,
            SchemaPhase.AWAITING_APPROVAL,
        )


class MigrationPreviewPass(MigrationPass):
    """Resolve, Verify and read the History of a ``DatabaseMigration``; never a Migrate."""

    def __init__(
        self,
        loaded: LoadedResource,
        ctx: PassContext,
        previous: DatabaseMigrationStatus | None,
        target: Target,
    ) -> None:
        super().__init__(loaded, ctx, previous)
        self.planned: PlanPreview | None = None
        self.base_target = target
        self.spec = self.resource.spec.model_copy(update={"target": runner_target(target)})

    def bound_resource(self) -> DatabaseMigration:
        """The resource with the base branch's target: the one a merged pass would bind."""
        spec = self.resource.spec
        return self.resource.model_copy(
            update={"spec": spec.model_copy(update={"target": self.base_target})}
        )

    def lifecycle(self) -> Verdict:
        spec = self.resource.spec
        artifact, artifact_digest, verification = self.resolve_and_verify()
        history, identity = self._read(artifact, "History")
        settled = self.history_verdict(history, identity)  # an unresolved run still blocks
        if settled is not None:
            return settled
        binding = self.bind(history, artifact_digest, identity, verification)
        current = migration_plan_id(binding)
        automatic = spec.policy.apply is ApplyPolicy.ALWAYS
        self.planned = PlanPreview(
            id=current,
            files=binding.versions,
            history=str(history.verdict),
            approvals=_required(self, destructive=False, privilege=False),
            automatic=automatic,
        )
        what = f"{len(history.pending)} pending migration(s) ({', '.join(history.pending)})"
        return _merged(
            spec.policy.apply,
            self.planned,
            what,
            MigrationPhase.PLANNING,
            MigrationPhase.AWAITING_APPROVAL,
        )
