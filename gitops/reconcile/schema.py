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

import json
import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gitops.approvals.ssh import APPROVAL_NAMESPACE
from gitops.approvals.verify import load_bundles, sigstore_path, verify_statement
from gitops.artifacts.errors import ArtifactError
from gitops.artifacts.fetch import ContentCache, fetch, write_files
from gitops.artifacts.reference import Reference, parse_reference
from gitops.artifacts.registry import RegistryOptions
from gitops.artifacts.store import open_store
from gitops.artifacts.verify import policy_digest, verify_artifact
from gitops.execution.executor import Executor, Outcome
from gitops.reconcile.conditions import summary_conditions
from gitops.reconcile.identities import PlanBinding, coordination_digest, plan_id
from gitops.reconcile.state import Lease, StateFile
from gitops.repo.loader import LoadedResource, Repository
from gitops.resources.approvals import Approval, ResourceRef
from gitops.resources.database import ApplyPolicy, UrlReference
from gitops.resources.policies import ApprovalPolicy, VerificationPolicy
from gitops.resources.schema import DatabaseSchema
from gitops.resources.status import (
    DatabaseSchemaStatus,
    DriftSummary,
    PlanSummary,
    Reason,
    RunRecord,
    SchemaPhase,
    SourceStatus,
)
from gitops.writeback.commits import Trailers
from gitops.writeback.status_branch import StatusBranch
from gitops.writeback.status_files import plan_paths, status_bytes, status_path
from runner.digests import digest, sha256_digest
from runner.engines.plan import PlanDocument, plan_bytes, plan_sql
from runner.errors import SeshatError
from runner.protocol.frame import PROTOCOL_VERSION
from runner.protocol.messages import OperationInput, PlanSettings
from runner.protocol.messages import UrlReference as RunnerUrl

__all__ = ["PassContext", "reconcile_schema", "schema_policy_digest"]

SUPPORTED_ENGINES = ("postgresql", "mysql", "sqlite")


@dataclass
class PassContext:
    """What one pass shares between resources."""

    repository: Repository
    revision: str
    state: StateFile
    executor: Executor
    status_branch: StatusBranch
    work_dir: Path
    holder: str
    registry: RegistryOptions = field(default_factory=RegistryOptions)
    deadline: float = 600.0
    now: Callable[[], datetime] = lambda: datetime.now(UTC).replace(microsecond=0)
    log: Callable[[str], None] = lambda _: None


class _Stop(Exception):
    """The pass for this resource ends in ``phase`` with ``reason``."""

    def __init__(self, phase: SchemaPhase, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.phase, self.reason, self.message = phase, reason, message


def schema_policy_digest(resource: DatabaseSchema) -> str:
    return digest("schema-policy", resource.spec.policy.model_dump(mode="json", by_alias=True))


def _ref(resource: DatabaseSchema) -> ResourceRef:
    meta = resource.metadata
    return ResourceRef(
        kind="DatabaseSchema", namespace=meta.namespace, name=meta.name, uid=str(meta.uid)
    )


def _credential(reference: UrlReference) -> tuple[RunnerUrl, dict[str, str]]:
    """The runner's URL reference and the environment carrying it; the URL is never read."""
    if reference.from_env is not None:
        value = os.environ.get(reference.from_env)
        return RunnerUrl(from_env=reference.from_env), (
            {reference.from_env: value} if value else {}
        )
    if reference.from_file is not None:
        return RunnerUrl(from_file=reference.from_file), {}
    raise _Stop(
        SchemaPhase.BLOCKED,
        Reason.CONFIGURATION_ERROR,
        "secretKeyRef needs the Kubernetes executor; the local executor takes fromEnv or fromFile",
    )


class _SchemaPass:
    def __init__(
        self, loaded: LoadedResource, ctx: PassContext, previous: DatabaseSchemaStatus | None
    ) -> None:
        assert isinstance(loaded.resource, DatabaseSchema)
        self.resource: DatabaseSchema = loaded.resource
        self.ctx = ctx
        self.previous = previous
        self.ref = _ref(self.resource)
        self.key = f"{self.ref.namespace}/{self.ref.name}"
        self.status = DatabaseSchemaStatus(observed_revision=ctx.revision)
        if previous is not None:
            self.status = self.status.model_copy(update={"last_applied": previous.last_applied})
        self.files: dict[str, bytes | None] = {}
        self.lease: Lease | None = None
        self.consumed = ""  # which approval (or policy) an Apply of this pass consumed

    # -- helpers -------------------------------------------------------------------------

    def _op_id(self, operation: str) -> str:
        return f"{operation}-{secrets.token_hex(8)}"

    def _run(self, operation: str, **fields: object) -> Outcome:
        url, env = _credential(self.resource.spec.target.url)
        request = {"operation": operation, "id": self._op_id(operation), "url": url}
        if self.resource.spec.dev is not None:
            dev_url, dev_env = _credential(self.resource.spec.dev.url)
            request["dev_url"] = dev_url
            env = {**env, **dev_env}
        policy = self.resource.spec.policy
        settings = PlanSettings(
            allow_destructive=policy.allow_destructive,
            protected_tables=list(policy.protected_tables),
            exclude=list(policy.exclude),
            lock_timeout_ms=policy.lock_timeout * 1000,
        )
        operation_input = OperationInput.model_validate({**request, **fields, "settings": settings})
        self.ctx.log(f"{self.key}: {operation}")
        return self.ctx.executor.run(operation_input, env, self.ctx.deadline)

    def _result(self, outcome: Outcome, what: str) -> dict[str, object]:
        if self.lease is not None and not self.ctx.state.holds(self.lease):
            raise _Stop(
                SchemaPhase.FAILED,
                Reason.LEASE_CONTINUITY_LOST,
                f"the realm lease changed hands during {what}; its result is discarded",
            )
        if outcome.kind == "done" and outcome.result is not None and outcome.result.result:
            return outcome.result.result
        if outcome.kind == "refused":
            code = (
                outcome.result.error.message if outcome.result and outcome.result.error else ""
            ).split(":", 1)[0]
            reason = {
                "protected_table": Reason.PROTECTED_TABLE,
                "destructive_disallowed": Reason.DESTRUCTIVE_DISALLOWED,
            }.get(code)
            if reason is not None:
                raise _Stop(SchemaPhase.BLOCKED, reason, outcome.detail)
            raise _Stop(SchemaPhase.FAILED, Reason.OPERATION_FAILED, f"{what}: {outcome.detail}")
        if (
            outcome.result is not None
            and outcome.result.error is not None
            and (outcome.result.error.code == "unsupported_engine")
        ):
            raise _Stop(SchemaPhase.BLOCKED, Reason.UNSUPPORTED_ENGINE, outcome.detail)
        reason = Reason.DISPATCH_FAILED if outcome.kind == "lost" else Reason.OPERATION_FAILED
        raise _Stop(SchemaPhase.FAILED, reason, f"{what}: {outcome.detail}")

    def _commit(self, phase: SchemaPhase, reason: Reason, message: str) -> None:
        now = self.ctx.now()
        previous = self.previous.conditions if self.previous is not None else []
        self.status = self.status.model_copy(
            update={
                "phase": phase,
                "conditions": summary_conditions(
                    phase.value, reason.value, message, self.ctx.revision, now, previous
                ),
            }
        )
        files = dict(self.files)
        files[status_path(self.ref.namespace, self.ref.name)] = status_bytes(self.ref, self.status)
        plan = self.status.plan.id if self.status.plan is not None else None
        trailers = Trailers(f"DatabaseSchema {self.key}", phase.value, plan, self.ctx.revision)
        subject = f"{self.key}: {phase.value}" + (
            f" ({reason.value})" if phase in (SchemaPhase.BLOCKED, SchemaPhase.FAILED) else ""
        )
        self.ctx.status_branch.publish(files, subject, trailers, message)
        self.previous = self.status
        self.files = {}

    # -- the lifecycle -------------------------------------------------------------------

    def run(self, census: tuple[Reason, str] | None) -> DatabaseSchemaStatus:
        try:
            if self.resource.spec.suspend:
                raise _Stop(SchemaPhase.SUSPENDED, Reason.SUSPENDED, "spec.suspend is set")
            if census is not None:
                raise _Stop(SchemaPhase.BLOCKED, census[0], census[1])
            if self.resource.spec.target.engine not in SUPPORTED_ENGINES:
                raise _Stop(
                    SchemaPhase.BLOCKED,
                    Reason.UNSUPPORTED_ENGINE,
                    f"engine {self.resource.spec.target.engine!r} is not one of "
                    f"{', '.join(SUPPORTED_ENGINES)}",
                )
            self._lifecycle()
        except _Stop as stop:
            self._commit(stop.phase, stop.reason, stop.message)
        finally:
            if self.lease is not None:
                self.ctx.state.release(self.lease)
        return self.status

    def _lifecycle(self) -> None:
        spec = self.resource.spec
        # Resolving and Verifying.
        desired, artifact_digest, verification = self._resolve_and_verify()
        # Observing.
        drift = self._result(self._run("drift", desired=str(desired)), "Observe")["drift"]
        assert isinstance(drift, dict)
        self.status = self.status.model_copy(update={"drift": _drift(drift)})
        # Planning, under the realm lease.
        coordination = coordination_digest(self.ref.namespace, spec.target)
        self.lease = self.ctx.state.acquire(coordination, self.ctx.holder)
        if self.lease is None:
            raise _Stop(
                SchemaPhase.FAILED,
                Reason.DISPATCH_FAILED,
                "another controller holds this database's lease",
            )
        document, data, target_identity = self._plan(desired)
        if document.empty:
            self._in_sync("the database matches the declared schema")
            return
        binding = PlanBinding(
            resource_uid=self.ref.uid,
            plan_digest=sha256_digest(data),
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
        current = plan_id(binding)
        json_path, sql_path = plan_paths(self.ref.namespace, self.ref.name, current)
        self.files[json_path] = data
        self.files[sql_path] = plan_sql(document).encode("utf-8")
        self.status = self.status.model_copy(
            update={
                "plan": PlanSummary(
                    id=current,
                    statements=document.summary.statements,
                    destructive=document.summary.destructive,
                    privilege_changes=list(document.summary.privilege_changes),
                    path=json_path,
                )
            }
        )
        if spec.policy.apply is ApplyPolicy.NEVER:
            raise _Stop(
                SchemaPhase.BLOCKED,
                Reason.APPLY_DISABLED,
                f"apply: Never; plan {current} is recorded and not applied",
            )
        dispatched_before = self.ctx.state.dispatched(self.ref.uid, current) or (
            self.previous is not None
            and self.previous.phase is SchemaPhase.APPLYING
            and self.previous.plan is not None
            and self.previous.plan.id == current
        )
        approval = self._approval(current, document)
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
            raise _Stop(
                SchemaPhase.AWAITING_APPROVAL,
                Reason.AWAITING_APPROVAL,
                f"plan {current} {why}: seshat approve {self.key} --plan {current}",
            )
        self._apply(current, document, data, approval, desired)

    def _resolve_and_verify(self) -> tuple[Path, str, str]:
        spec = self.resource.spec
        try:
            reference = parse_reference(spec.artifact.ref)
            if reference.transport == "oci-layout" and not Path(reference.layout).is_absolute():
                reference = Reference(
                    "oci-layout",
                    layout=str(self.ctx.repository.root / reference.layout),
                    tag=reference.tag,
                    digest=reference.digest,
                )
            store = open_store(reference, self.ctx.registry)
            policy = self.ctx.repository.find(
                "VerificationPolicy", self.ref.namespace, spec.artifact.verification.policy
            )
            assert policy is not None and isinstance(policy.resource, VerificationPolicy)
            verdict = verify_artifact(
                store, reference, policy.resource.spec, self.ctx.repository.root
            )
        except ArtifactError as error:
            phase = SchemaPhase.FAILED if error.retryable else SchemaPhase.BLOCKED
            reason = Reason.OPERATION_FAILED if error.retryable else Reason.ARTIFACT_REFUSED
            self.status = self.status.model_copy(
                update={"source": SourceStatus(requested=spec.artifact.ref)}
            )
            raise _Stop(phase, reason, f"{error.reason}: {error.message}") from None
        self.status = self.status.model_copy(
            update={
                "source": SourceStatus(
                    requested=spec.artifact.ref, digest=verdict.digest, verified=verdict.accepted
                )
            }
        )
        if not verdict.accepted or verdict.digest is None:
            failed = next((c for c in verdict.checks if not c.passed), None)
            detail = f" ({failed.requirement}: {failed.detail})" if failed else ""
            if verdict.reason == "registry_unavailable":  # a fault, not a refusal: retried
                raise _Stop(
                    SchemaPhase.FAILED, Reason.OPERATION_FAILED, f"{verdict.reason}{detail}"
                )
            raise _Stop(SchemaPhase.BLOCKED, Reason.ARTIFACT_REFUSED, f"{verdict.reason}{detail}")
        pinned = reference.pinned(verdict.digest)
        folder = self.ctx.work_dir / "artifacts" / verdict.digest.removeprefix("sha256:")
        if not folder.is_dir():
            try:
                fetched = fetch(
                    store,  # the store that resolved and verified it; fetched by digest now
                    pinned,
                    allowed_types=tuple(policy.resource.spec.artifact_types),
                    cache=ContentCache(self.ctx.work_dir / "cache"),
                )
                partial = folder.with_name(folder.name + ".partial")
                if partial.exists():
                    shutil.rmtree(partial)
                write_files(fetched, partial)
                partial.rename(folder)
            except ArtifactError as error:
                phase = SchemaPhase.FAILED if error.retryable else SchemaPhase.BLOCKED
                reason = Reason.OPERATION_FAILED if error.retryable else Reason.ARTIFACT_REFUSED
                raise _Stop(phase, reason, f"{error.reason}: {error.message}") from None
        return folder, verdict.digest, policy_digest(policy.resource.spec)

    def _plan(self, desired: Path) -> tuple[PlanDocument, bytes, str]:
        """Two independent plans; only byte-identical ones are accepted."""
        results = []
        for attempt in ("Plan", "Plan (second)"):
            outcome = self._run("plan", desired=str(desired))
            result = self._result(outcome, attempt)
            assert outcome.result is not None
            results.append((result, outcome.result.target_identity or ""))
        (first, identity), (second, _) = results
        if first["planDigest"] != second["planDigest"]:
            raise _Stop(
                SchemaPhase.FAILED,
                Reason.OPERATION_FAILED,
                "two plans of the same inputs differ; nothing is applied",
            )
        document = PlanDocument.model_validate(first["plan"])
        data = plan_bytes(document)
        if sha256_digest(data) != first["planDigest"]:
            raise _Stop(
                SchemaPhase.FAILED,
                Reason.OPERATION_FAILED,
                "the plan does not hash to the digest the runner reported",
            )
        return document, data, identity

    def _approval(self, current: str, document: PlanDocument) -> str | None:
        """The digest of an accepted, unconsumed approval of ``current``, if there is one."""
        repository = self.ctx.repository
        policies = [
            r.resource for r in repository.resources if isinstance(r.resource, ApprovalPolicy)
        ]
        for loaded in repository.resources:
            approval = loaded.resource
            if not isinstance(approval, Approval) or approval.spec.plan.id != current:
                continue
            if (approval.spec.resource.namespace, approval.spec.resource.name) != (
                self.ref.namespace,
                self.ref.name,
            ):
                continue
            path = repository.root / loaded.path
            data = path.read_bytes()
            signature = path.with_name(path.name + ".sig")
            ssh = signature.read_bytes() if signature.exists() else b""
            bundle_file = sigstore_path(path)
            keyless = bundle_file.read_bytes() if bundle_file.exists() else b""
            try:
                bundles = load_bundles(keyless.decode("utf-8"), str(loaded.path)) if keyless else []
            except (SeshatError, UnicodeDecodeError) as error:
                self.ctx.log(f"{self.key}: approval {loaded.path}: unreadable bundles: {error}")
                bundles = []
            verdict = verify_statement(
                approval,
                data,
                ssh.decode("ascii", errors="replace"),
                policies,
                repository.root,
                namespace=APPROVAL_NAMESPACE,
                expected=self.ref,
                current_plan=current,
                destructive=document.summary.destructive,
                privilege=bool(document.summary.privilege_changes),
                bundles=bundles,
            )
            # Consumed by what was accepted: the file and every signature over it.
            identity = sha256_digest(data + b"\0" + ssh + b"\0" + keyless)
            spent = self.ctx.state.is_consumed(identity) or (
                self.previous is not None
                and self.previous.last_applied is not None
                and f"approval {identity}" in self.previous.last_applied.message
            )
            if verdict.accepted and not spent:
                return identity
            self.ctx.log(f"{self.key}: approval {loaded.path} not accepted: {verdict.reason}")
        return None

    def _apply(
        self, current: str, document: PlanDocument, data: bytes, approval: str | None, desired: Path
    ) -> None:
        op_id = self._op_id("apply")
        plan_file = self.ctx.work_dir / "plans" / f"{current.removeprefix('sha256:')}.json"
        plan_file.parent.mkdir(parents=True, exist_ok=True)
        plan_file.write_bytes(data)
        self.ctx.state.claim(self.ref.uid, "apply", op_id, current)
        # The approval consumed is named in the marker too, so a lost state file cannot make
        # it count again (the status branch is the durable record).
        self.consumed = f"approval {approval}" if approval is not None else "apply: Always"
        self._record(op_id, current, "Unknown", self.ctx.now(), "dispatched")
        # The dispatch marker: pushed before the runner starts, or the Apply does not run.
        try:
            self._commit(
                SchemaPhase.APPLYING,
                Reason.APPLYING,
                f"applying plan {current} (operation {op_id})",
            )
        except Exception as error:
            self.ctx.state.release_claim(self.ref.uid, "apply")
            raise _Stop(
                SchemaPhase.FAILED,
                Reason.DISPATCH_FAILED,
                f"the dispatch marker could not be pushed, so nothing ran: {error}",
            ) from None
        if approval is not None:
            self.ctx.state.consume(approval, self.ref.uid, op_id)
        self.ctx.state.mark_dispatched(op_id, self.ref.uid, current)
        outcome = self._run("apply", plan=str(plan_file), expect_digest=sha256_digest(data))
        self.ctx.state.mark_finished(op_id)
        self.ctx.state.release_claim(self.ref.uid, "apply")
        now = self.ctx.now()
        if outcome.kind == "lost":
            self._record(op_id, current, "Unknown", now, outcome.detail)
            raise _Stop(
                SchemaPhase.FAILED,
                Reason.APPLY_FAILED,
                f"the Apply's outcome is unknown ({outcome.detail}); the next pass "
                "observes and plans afresh, and never starts this Apply again",
            )
        report = self._result(outcome, "Apply") if outcome.kind == "done" else None
        apply_report = report.get("apply") if report else None
        if not isinstance(apply_report, dict) or apply_report.get("failed") is not None:
            detail = json.dumps(apply_report) if apply_report else outcome.detail
            self._record(op_id, current, "Failed", now, detail[:1024])
            raise _Stop(SchemaPhase.FAILED, Reason.APPLY_FAILED, f"the Apply failed: {detail}")
        self._record(op_id, current, "Applied", now, "")
        # VerifyingConvergence: a fresh Observe and Plan under the same lease.
        drift = self._result(self._run("drift", desired=str(desired)), "Observe after Apply")
        assert isinstance(drift["drift"], dict)
        self.status = self.status.model_copy(update={"drift": _drift(drift["drift"])})
        after, _, _ = self._plan(desired)
        if not after.empty:
            raise _Stop(
                SchemaPhase.FAILED,
                Reason.APPLY_FAILED,
                f"after the Apply a plan of {after.summary.statements} statements "
                "remains; convergence is not proven",
            )
        self._in_sync("the database matches the declared schema")  # lastApplied says how

    def _record(self, op_id: str, current: str, outcome: str, now: datetime, message: str) -> None:
        self.status = self.status.model_copy(
            update={
                "last_applied": RunRecord(
                    operation_id=op_id,
                    plan_id=current,
                    outcome=outcome,
                    recorded_at=now,
                    message=f"{self.consumed}; {message}"[:1024] if message else self.consumed,
                )
            }
        )

    def _in_sync(self, message: str) -> None:
        self.status = self.status.model_copy(update={"plan": None})
        raise _Stop(SchemaPhase.IN_SYNC, Reason.IN_SYNC, message)


def _drift(report: Mapping[str, object]) -> DriftSummary:
    categories = report.get("categories")
    counts = categories if isinstance(categories, dict) else {}
    return DriftSummary(
        digest=str(report["digest"]),
        dialect=str(report["dialect"]),
        total=int(str(report["total"])),
        highest_severity=str(report["highestSeverity"]),
        missing=int(counts.get("missing", 0)),
        extra=int(counts.get("extra", 0)),
        changed=int(counts.get("changed", 0)),
        invalid=int(counts.get("invalid", 0)),
    )


def reconcile_schema(
    loaded: LoadedResource,
    ctx: PassContext,
    previous: DatabaseSchemaStatus | None,
    census: tuple[Reason, str] | None = None,
) -> DatabaseSchemaStatus:
    """One pass of the schema lifecycle for ``loaded``; returns the status it committed."""
    return _SchemaPass(loaded, ctx, previous).run(census)
