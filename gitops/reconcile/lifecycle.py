"""What the two lifecycles share: one pass of one resource, its steps and its commits.

:class:`ResourcePass` holds the pass's status, runs operations through the executor (this
package never sees a database URL, only the reference to it), resolves and verifies the
artifact, finds an accepted, unconsumed approval of a plan, and stages its verdict for the
pass's one status commit (the dispatch marker an Apply needs is pushed at once, with every
verdict staged before it). :mod:`.schema` and :mod:`.migration` subclass it with their
own phases and steps.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Generic, Protocol, TypeVar

from gitops.approvals.files import read_signatures, read_statement
from gitops.approvals.ssh import ACKNOWLEDGMENT_NAMESPACE
from gitops.approvals.verify import (
    verify_statement,
)
from gitops.execution.executor import (
    CredentialUnavailable,
    Dispatch,
    Executor,
    Outcome,
    RunOptions,
    Started,
)
from gitops.execution.leases import Lease, Leases
from gitops.execution.metered import metered
from gitops.execution.runners import RunnerBook, RunnerRecord, same_controller
from gitops.reconcile.approvals import judge_approvals
from gitops.reconcile.conditions import summary_conditions
from gitops.reconcile.identities import coordination_digest, fleet_approval_use
from gitops.reconcile.state import StateFile
from gitops.reconcile.workers import Books
from gitops.repo.loader import LoadedResource, Repository
from gitops.resources.approvals import ResourceRef, RunAcknowledgment
from gitops.resources.database import DatabaseSpec, OperationTimeouts
from gitops.resources.migration import DatabaseMigration
from gitops.resources.policies import ApprovalPolicy, VerificationPolicy
from gitops.resources.schema import DatabaseSchema
from gitops.resources.status import (
    MAX_REJECTED,
    DatabaseMigrationStatus,
    DatabaseSchemaStatus,
    MigrationPhase,
    Reason,
    RunRecord,
    SchemaPhase,
    SharedPhase,
    SourceStatus,
)
from gitops.writeback.batch import Batch, Change, status_change
from gitops.writeback.ledger import AnyRecord, Dispatched, Finished, Ledger
from gitops.writeback.status_branch import StatusBranch
from gitops.writeback.status_files import status_bytes, status_path
from runner.artifacts.errors import ArtifactError
from runner.artifacts.format import ARTIFACT_TYPES
from runner.artifacts.policy import VerificationPolicySpec, policy_digest, trust_paths
from runner.artifacts.reference import parse_reference
from runner.deadline import STOP_MARGIN
from runner.errors import ConfigurationError
from runner.files import NotReadable, read_inside
from runner.protocol.messages import (
    ArtifactSource,
    OperationInput,
    PlanSettings,
    RegistrySettings,
    TrustFile,
)
from runner.protocol.results import (
    ErrorCode,
    OperationPayload,
    ResolveResult,
    RunOutcome,
    VerifyResult,
)

__all__ = ["SUPPORTED_ENGINES", "Gate", "PassContext", "ResourcePass", "Stop", "Verdict"]

SUPPORTED_ENGINES = ("postgresql", "mysql", "sqlite")
MAX_TRUST_FILE = 4 * 1024 * 1024  # a public key or a Sigstore trusted root

StatusT = TypeVar("StatusT", DatabaseSchemaStatus, DatabaseMigrationStatus)
ResourceT = TypeVar("ResourceT", DatabaseSchema, DatabaseMigration)
PayloadT = TypeVar("PayloadT", bound=OperationPayload)

BLOCKED_BY_CODE: dict[ErrorCode, Reason] = {
    ErrorCode.UNSUPPORTED_ENGINE: Reason.UNSUPPORTED_ENGINE,
    ErrorCode.INVALID_URL: Reason.CONFIGURATION_ERROR,
    ErrorCode.DESIRED_SCHEMA_INVALID: Reason.ARTIFACT_REFUSED,
    ErrorCode.MIGRATIONS_INVALID: Reason.ARTIFACT_REFUSED,
    ErrorCode.ARTIFACT_REFUSED: Reason.ARTIFACT_REFUSED,
}
"""The Blocked reason of each runner error code that blocks (a refusal's reason is looked up
in the lifecycle's own ``refusals``); every other code is a Failed operation."""


def utc_now() -> datetime:
    """The controller's clock: UTC, whole seconds (what status files record)."""
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class PassContext:
    """What one pass shares between resources."""

    repository: Repository
    revision: str
    state: StateFile
    executor: Executor
    status_branch: StatusBranch
    batch: Batch  # the pass's status commit, staged resource by resource
    work_dir: Path
    holder: str
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    now: Callable[[], datetime] = field(default=utc_now)
    log: Callable[[str], None] = lambda _: None
    progress: Callable[[str, str, str], None] = lambda *_: None
    """Told (kind, "ns/name", phase) as a resource's pass enters a step (Resolving,
    Planning, Applying...): Kubernetes mode shows it on the custom resource; never Git."""
    leases: Leases | None = None  # None: the state file's
    runners: RunnerBook | None = None
    """Local mode: the records of running runners, this start's and earlier starts' (a
    realm an earlier start's runner still works on is followed before its lease is taken)."""
    books: Books = field(default_factory=Books)
    """What the pass's workers share is used by one at a time, except while a runner works."""
    resolved: dict[str, str] = field(default_factory=dict)
    """Resolve's answers this pass: the digest of each reference (as the runner reads it)."""
    verified: dict[tuple[str, str], VerifyResult] = field(default_factory=dict)
    """Verify's answers this pass, by (the artifact pinned to its digest, policy digest):
    resources sharing an artifact resolve and verify it once per pass."""
    trust_from: Repository | None = None
    """Where the trust anchors are read (None: :attr:`repository`): see :attr:`trust`."""

    @property
    def lease_store(self) -> Leases:
        return self.leases if self.leases is not None else self.state

    @property
    def trust(self) -> Repository:
        """The repository whose trust anchors judge :attr:`repository`'s declarations: the
        VerificationPolicy an artifact is verified with and the keys and trusted roots it
        names, the ApprovalPolicy and the allowed-signers files approvals and
        acknowledgments are checked against. A pass reads them from the watched branch it
        reconciles (the root of trust); a preview from the pull request's base, never from
        the head it judges (docs/preview.md)."""
        return self.trust_from if self.trust_from is not None else self.repository


class Gate(Protocol):
    """A fleet member's rollout step (``gitops/reconcile/fleets.py``): whether the member
    may apply now, taking one of the step's ``maxParallel`` places while it does."""

    def enter(self) -> str | None:
        """None: the member may apply (a place is taken until :meth:`leave`); else why
        not (the step is not reached, the rollout is halted or paused)."""
        ...

    def leave(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where one pass of one resource ends: ``phase`` (a phase both lifecycles share, or one
    of the resource's own), ``reason`` and a message for people. A lifecycle returns one;
    :meth:`ResourcePass.run` stages it for the pass's status commit."""

    phase: str
    reason: Reason
    message: str


class Stop(Exception):
    """A step deep inside a lifecycle (an operation's failure, a refused artifact, a lost
    lease) found the pass over: it carries the :class:`Verdict` the lifecycle would have
    returned."""

    def __init__(self, phase: str, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.verdict = Verdict(phase, reason, message)


BLOCKED, FAILED, IN_SYNC = SharedPhase.BLOCKED, SharedPhase.FAILED, SharedPhase.IN_SYNC


class ResourcePass(Generic[StatusT, ResourceT]):
    """One pass of one resource (of the kind :attr:`model` declares, with a status of
    ``StatusT``); subclasses implement :meth:`lifecycle`."""

    model: type[ResourceT]  # DatabaseSchema | DatabaseMigration: what the pass reconciles
    artifact_kind: ClassVar[str]  # "schema" | "migrations"
    apply_operation: ClassVar[str]  # "apply" | "migrate": the runner operation of an Apply
    phases: ClassVar[type[SchemaPhase] | type[MigrationPhase]]
    refusals: ClassVar[dict[str, Reason]]  # runner refusal reason -> Blocked reason

    def __init__(self, loaded: LoadedResource, ctx: PassContext, previous: StatusT | None) -> None:
        resource = loaded.resource
        assert isinstance(resource, self.model)
        self.resource: ResourceT = resource
        self.spec: DatabaseSpec = resource.spec
        self.timeouts: OperationTimeouts = resource.spec.policy.timeouts
        self.ctx = ctx
        self.previous: StatusT | None = previous
        meta = resource.metadata
        self.ref = ResourceRef(
            kind=resource.kind, namespace=meta.namespace, name=meta.name, uid=str(meta.uid)
        )
        self.key = f"{self.ref.namespace}/{self.ref.name}"
        self.record_key = f"{self.ref.kind} {self.key}"  # how safety records name it
        self.member = loaded.member  # a fleet member's fleet and name (None: not a member)
        self.gate: Gate | None = None  # a fleet member's rollout step
        self._entered = False
        self.records: list[AnyRecord] = []  # for the next change
        self.status: StatusT = self.initial_status()
        self.files: dict[str, bytes | None] = {}
        self.lease: Lease | None = None
        self.consumed = ""  # which approval (or policy) an Apply of this pass consumed

    def initial_status(self) -> StatusT:
        raise NotImplementedError

    def lifecycle(self) -> Verdict:
        raise NotImplementedError

    def settings(self) -> PlanSettings:
        raise NotImplementedError

    def step(self, phase: str) -> None:
        """The pass enters ``phase``: progress for the cluster's readers, not a verdict."""
        self.ctx.progress(self.ref.kind, self.key, str(phase))

    # -- operations ----------------------------------------------------------------------

    def op_id(self, operation: str) -> str:
        return f"{operation}-{secrets.token_hex(8)}"

    def deadline(self, operation: str) -> int:
        """How long ``operation`` may run (``spec.policy.timeouts``): ``apply`` and
        ``migrate`` their own, every read-only operation ``plan``'s."""
        timeouts = self.timeouts
        if operation == "apply":
            return timeouts.apply
        return timeouts.migrate if operation == "migrate" else timeouts.plan

    def run_operation(
        self,
        operation: str,
        op_id: str | None = None,
        dispatch: Dispatch | None = None,
        **fields: object,
    ) -> Outcome:
        """One operation on the resource's database (an Apply runs alone, with its id and
        its ``dispatch`` record)."""
        return self.run_batch([(operation, fields)], op_id, dispatch)[0]

    def run_batch(
        self,
        operations: Sequence[tuple[str, Mapping[str, object]]],
        op_id: str | None = None,
        dispatch: Dispatch | None = None,
    ) -> list[Outcome]:
        """``operations`` (each a name and its input fields) in one runner invocation with
        the database credential, in order; one outcome each. After one fails, the runner
        starts none of the rest (they answer ``not_run``)."""
        executor = self.ctx.executor
        try:
            url, env = executor.bind(self.spec.target.url, "url")
            urls: dict[str, object] = {"url": url}
            dev = getattr(self.spec, "dev", None)
            if dev is not None and dev.url is not None:
                dev_url, dev_env = executor.bind(dev.url, "dev_url")
                urls["dev_url"] = dev_url
                env = {**env, **dev_env}
        except CredentialUnavailable as error:
            raise Stop(BLOCKED, Reason.CONFIGURATION_ERROR, str(error)) from None
        requests = [
            OperationInput.model_validate(
                {
                    "operation": operation,
                    "id": op_id or self.op_id(operation),
                    **urls,
                    "registry": self.ctx.registry,
                    **fields,
                    "settings": self.settings(),
                    "deadline_seconds": self.deadline(operation),
                }
            )
            for operation, fields in operations
        ]
        self.ctx.log(f"{self.key}: {', '.join(name for name, _ in operations)}")
        # The runner stops each operation at its own deadline; the executor waits that long
        # for all of them, plus a margin for the runner's answer (runner/deadline.py).
        deadline = sum(r.deadline_seconds or 0 for r in requests) + STOP_MARGIN
        with self.ctx.books.released(), metered(requests) as meter:
            return meter.all(
                executor.run_batch(
                    requests, RunOptions(env, deadline, self.ref.namespace, self.ref, dispatch)
                )
            )

    def run_registry_operation(self, operation: str, **fields: object) -> Outcome:
        """Resolve or Verify: an operation that reads a registry and no database, so the
        runner gets no database credential for it."""
        request = OperationInput.model_validate(
            {
                "operation": operation,
                "id": self.op_id(operation),
                "registry": self.ctx.registry,
                **fields,
                "deadline_seconds": self.deadline(operation),
            }
        )
        self.ctx.log(f"{self.key}: {operation}")
        deadline = self.deadline(operation) + STOP_MARGIN
        with self.ctx.books.released(), metered([request]) as meter:
            return meter.one(
                self.ctx.executor.run(
                    request, {}, deadline, namespace=self.ref.namespace, resource=self.ref
                )
            )

    def result(self, outcome: Outcome, what: str, kind: type[PayloadT]) -> PayloadT:
        """The operation's result, or the Stop its failure means: Blocked with the reason
        the tables below give for the error code (or the refusal's reason), else Failed."""
        if self.lease is not None and not self.ctx.lease_store.holds(self.lease):
            raise Stop(
                FAILED,
                Reason.LEASE_CONTINUITY_LOST,
                f"the realm lease changed hands during {what}; its result is discarded",
            )
        answer = outcome.result
        if outcome.kind == "done" and answer is not None and answer.result is not None:
            if not isinstance(answer.result, kind):
                detail = f"{what}: the runner answered a {answer.result.operation} result"
                raise Stop(FAILED, Reason.OPERATION_FAILED, detail)
            return answer.result
        error = answer.error if answer is not None else None
        if error is not None and error.code is ErrorCode.PLAN_REFUSED:
            blocked = self.refusals.get(error.reason or "")
            if blocked is not None:
                raise Stop(BLOCKED, blocked, outcome.detail)
        elif error is not None and error.code in BLOCKED_BY_CODE:
            raise Stop(BLOCKED, BLOCKED_BY_CODE[error.code], f"{what}: {outcome.detail}")
        reason = Reason.DISPATCH_FAILED if outcome.kind == "lost" else Reason.OPERATION_FAILED
        raise Stop(FAILED, reason, f"{what}: {outcome.detail}")

    # -- the realm lease ------------------------------------------------------------------

    def take_lease(self, coordination: str) -> Lease | None:
        """A new holding of the realm lease, or None while another controller holds it.

        A lease an earlier start of this same controller still holds (it was killed before
        it released it) is taken over only once none of that start's runners works on the
        realm any more: a live one is followed to its end first (its result is lost with
        the controller that read it, so what it did is settled as any uncertain run is), and
        while it runs nothing else is dispatched on the realm."""
        store, holder = self.ctx.lease_store, self.ctx.holder
        lease = store.acquire(coordination, holder)
        book = self.ctx.runners
        if lease is not None or book is None or not isinstance(store, StateFile):
            return lease
        earlier = store.holder_of(coordination)
        if earlier is None or not same_controller(earlier, holder):
            return None
        live = [
            r
            for r in book.live_of_earlier_starts()
            if r.holder == earlier and self._on_realm(r, coordination)
        ]
        if live:
            deadline = self.deadline(self.apply_operation) + STOP_MARGIN
            with self.ctx.books.released():
                running = book.follow(live, deadline, self.ctx.log)
            if running:
                first = running[0]
                raise Stop(
                    FAILED,
                    Reason.DISPATCH_FAILED,
                    f"runner {first.op_id} (pid {first.pid}, {', '.join(first.operations)}) "
                    "of an earlier start of this controller still runs on this database; "
                    "nothing else is dispatched here until it ends",
                )
            followed = ", ".join(f"{r.op_id} (pid {r.pid})" for r in live)
            self.ctx.log(f"{self.key}: followed runner(s) {followed} of {earlier} to their end")
        self.ctx.log(f"{self.key}: the realm lease of an earlier start ({earlier}) taken over")
        return store.take_over(coordination, earlier, holder)

    def _on_realm(self, record: RunnerRecord, coordination: str) -> bool:
        """Whether the runner ``record`` works on the realm ``coordination`` (True when that
        cannot be told: a resource no longer declared)."""
        kind, _, key = record.resource.partition(" ")
        namespace, _, name = key.partition("/")
        found = self.ctx.repository.find(kind, namespace, name)
        resource = found.resource if found is not None else None
        if not isinstance(resource, (DatabaseSchema, DatabaseMigration)):
            return True
        return coordination_digest(namespace, resource.spec.target) == coordination

    # -- commits -------------------------------------------------------------------------

    def commit(self, phase: str, reason: Reason, message: str) -> None:
        """Stage the verdict (the status file, plan files and records) for the pass's status
        commit, made when the pass ends or with the next dispatch marker."""
        self.ctx.batch.stage(self.change(phase, reason, message))
        self._advance()

    def change(self, phase: str, reason: Reason, message: str) -> Change:
        """The status at ``phase`` (conditions keep their transition times while they stay
        the same) and its change from the status last staged or pushed."""
        previous = self.previous.conditions if self.previous is not None else []
        self.status = self.status.model_copy(
            update={
                "phase": self.phases(phase),
                "conditions": summary_conditions(
                    phase, reason.value, message, self.ctx.now(), previous
                ),
            }
        )
        files = dict(self.files)
        files[status_path(self.ref.namespace, self.ref.name)] = status_bytes(self.ref, self.status)
        return status_change(self.record_key, self.previous, self.status, files, self.records)

    def _advance(self) -> None:
        """The status just staged or pushed is what the next change starts from."""
        self.previous = self.status
        self.files = {}
        self.records = []

    @property
    def ledger(self) -> Ledger:
        """The safety records of the status branch's history (and of this pass so far)."""
        return self.ctx.status_branch.ledger

    def record_run(
        self,
        op_id: str,
        current: str,
        outcome: RunOutcome,
        message: str,
        *,
        applied: Sequence[str] = (),
        identity: str = "",
        now: datetime | None = None,
        final: bool = True,
    ) -> None:
        """``lastApplied``: how the Apply ``op_id`` of plan ``current`` ended (or, with
        ``final`` false, that it was dispatched); a final outcome is also a ``finished``
        safety record."""
        if final:
            self.finish(op_id, outcome)
        text = f"{self.consumed}; {message}" if message else self.consumed
        record = RunRecord(
            operation_id=op_id,
            plan_id=current,
            outcome=outcome,
            target_identity_digest=identity or None,
            recorded_at=now or self.ctx.now(),
            applied_versions=list(applied)[:256],
            message=text[:1024],
        )
        self.status = self.status.model_copy(update={"last_applied": record})

    def finish(self, op_id: str, outcome: str) -> None:
        """Record how the Apply ``op_id`` ended, in the next commit."""
        self.records.append(
            Finished.model_validate(
                {"resource": self.record_key, "operationId": op_id, "outcome": outcome}
            )
        )

    def record_dispatch(self, op_id: str, current: str) -> None:
        """Put the dispatched run in ``lastApplied`` (outcome Unknown) before the marker."""
        raise NotImplementedError

    # -- a restart: runs a previous controller started -----------------------------------

    def adopt_runs(self) -> list[str]:
        """Follow the runs of this resource that a previous controller dispatched and never
        saw end (a ``dispatched`` record with no ``finished`` one) while their Job still
        runs, each to its end, and record each outcome once (``lastApplied`` and a
        ``finished`` record in this pass's commit); what was adopted, for the verdict.

        This pass is the one following them, so nothing else starts for the resource
        meanwhile. The realm lease is held while a run is followed (taken first: the
        previous holding died with its controller) and released only after its outcome is
        recorded: the staged release that a suspension during a live operation follows
        (docs/operations.md, "What a restart does"). A run whose Job is gone has an outcome
        nobody can read any more: it is recorded Unknown, so it is looked for only once.
        """
        executor = self.ctx.executor
        runs = self.ledger.unfinished(self.record_key) if executor.adopts else []
        adopted: list[str] = []
        for dispatched in runs:
            op_id = dispatched.operation_id
            coordination = coordination_digest(self.ref.namespace, self.spec.target)
            lease = self.take_lease(coordination)
            if lease is None:
                raise Stop(
                    FAILED,
                    Reason.DISPATCH_FAILED,
                    f"run {op_id} may still be running and another controller holds this "
                    "database's lease; it is followed once the lease is free",
                )
            try:
                self.consumed = (
                    f"approval {dispatched.approval}" if dispatched.approval else "apply: Always"
                )
                deadline = self.deadline(self.apply_operation) + STOP_MARGIN
                self.ctx.log(f"{self.key}: following run {op_id}, started before a restart")
                # The Job is known by what only this controller's dispatch record holds (its
                # nonce) and what the run must be (resource, plan), never by its label alone.
                record = Dispatch(dispatched.plan_id, self.ctx.state.dispatch_nonce(op_id))
                started = Started(self.apply_operation, op_id, self.ref, record)
                with self.ctx.books.released():
                    outcome = executor.adopt(started, deadline, namespace=self.ref.namespace)
                if outcome is None:
                    outcome = Outcome(
                        "lost", None, "its Job is gone; whoever started it stopped first", None
                    )
                elif not self.ctx.lease_store.holds(lease):
                    outcome = Outcome(
                        "lost", None, "the realm lease changed hands while it was followed", None
                    )
                ended = self.adopted(dispatched, outcome)
                self.ctx.state.mark_finished(op_id)
                self.ctx.state.release_claim(self.ref.uid, "apply")
                adopted.append(f"run {op_id}, started before a restart, ended {ended}")
            finally:
                self.ctx.lease_store.release(lease)
        return adopted

    def adopted(self, dispatched: Dispatched, outcome: Outcome) -> RunOutcome:
        """Record how the adopted run ``dispatched`` ended (``outcome``); that end."""
        raise NotImplementedError

    def dispatch(
        self,
        current: str,
        approval: str | None,
        op_id: str,
        marker: tuple[str, str],
        operation: str,
        target_identity: str = "",
        **fields: object,
    ) -> Outcome:
        """Start the Apply of plan ``current``: the claim, the dispatch marker (``marker`` is
        its phase and message) with its ``dispatched`` record, pushed before the runner
        starts or nothing runs (in one commit with every verdict the pass staged so far, so
        the Apply holds none of them back), the approval consumed, then the operation."""
        state, uid = self.ctx.state, self.ref.uid
        state.claim(uid, "apply", op_id, current)
        # The approval consumed is named in the marker's record, so neither a lost state
        # file nor an edited status file can make it count again.
        self.consumed = f"approval {approval}" if approval is not None else "apply: Always"
        self.records.append(
            Dispatched.model_validate(
                {
                    "resource": self.record_key,
                    "operationId": op_id,
                    "uid": uid,
                    "planId": current,
                    "approval": approval,
                    "targetIdentity": target_identity or None,
                }
            )
        )
        self.record_dispatch(op_id, current)
        try:
            self.ctx.batch.commit(marker=self.change(marker[0], Reason.APPLYING, marker[1]))
        except Exception as error:
            state.release_claim(uid, "apply")
            self.records = []  # nothing was dispatched
            raise Stop(
                FAILED,
                Reason.DISPATCH_FAILED,
                f"the dispatch marker could not be pushed, so nothing ran: {error}",
            ) from None
        self._advance()
        self.step(marker[0])
        if approval is not None:
            state.consume(approval, uid, op_id)
        # A secret of this dispatch alone, in the state file and on the Job, never in Git.
        nonce = secrets.token_hex(16)
        state.mark_dispatched(op_id, uid, current, nonce)
        outcome = self.run_operation(operation, op_id, Dispatch(current, nonce), **fields)
        state.mark_finished(op_id)
        state.release_claim(uid, "apply")
        return outcome

    # -- the pass ------------------------------------------------------------------------

    def run(self, census: tuple[Reason, str] | None) -> StatusT:
        """The pass: its verdict (the lifecycle's, or why it did not start), staged for the
        pass's status commit."""
        try:
            try:
                adopted = self.adopt_runs()
                verdict = self._not_started(census, adopted) or self.lifecycle()
            except Stop as stop:
                verdict = stop.verdict
            if verdict.phase == IN_SYNC:  # no plan waits for an approval: none is rejected
                self.status = self.status.model_copy(update={"rejected_approvals": None})
            self.commit(verdict.phase, verdict.reason, verdict.message)
        finally:
            if self._entered and self.gate is not None:
                self.gate.leave()
            if self.lease is not None:
                self.ctx.lease_store.release(self.lease)
        return self.status

    def held(self, current: str) -> Verdict | None:
        """A fleet member whose plan ``current`` may apply, held back while its rollout step
        is not reached (or the rollout is halted or paused): it keeps its plan and says
        what it would do. None: it may apply now."""
        if self.gate is None:
            return None
        with self.ctx.books.released():  # waiting for a place lets the others record theirs
            why = self.gate.enter()
        if why is None:
            self._entered = True
            return None
        return Verdict(
            SharedPhase.PENDING,
            Reason.ROLLOUT_WAITING,
            f"plan {current} may apply, but {why}"[:1024],
        )

    def _not_started(
        self, census: tuple[Reason, str] | None, adopted: Sequence[str] = ()
    ) -> Verdict | None:
        """Why the lifecycle does not run at all this pass, if it does not (``adopted``: the
        runs this pass followed to their end first)."""
        if self.spec.suspend:
            followed = (
                f"; {'; '.join(adopted)}: followed to its end, then the lease was released"
                if adopted
                else ""
            )
            message = f"spec.suspend is set{followed}"[:1024]
            return Verdict(SharedPhase.SUSPENDED, Reason.SUSPENDED, message)
        if census is not None:
            return Verdict(BLOCKED, census[0], census[1])
        self._refuse_tampering()
        if self.spec.target.engine not in SUPPORTED_ENGINES:
            return Verdict(
                BLOCKED,
                Reason.UNSUPPORTED_ENGINE,
                f"engine {self.spec.target.engine!r} is not one of {', '.join(SUPPORTED_ENGINES)}",
            )
        return None

    # -- Resolving and Verifying ---------------------------------------------------------

    def resolve_and_verify(self) -> tuple[ArtifactSource, str, str]:
        """The verified artifact as later operations name it (by digest), its digest, and
        the verification policy's digest. The runner resolves and verifies: the control
        plane never contacts a registry."""
        spec = self.spec
        self.step(self.phases.RESOLVING)
        wanted = ARTIFACT_TYPES[self.artifact_kind]
        declared = spec.artifact.ref
        named = spec.artifact.verification.policy
        found = self.ctx.trust.find("VerificationPolicy", self.ref.namespace, named)
        if found is None or not isinstance(found.resource, VerificationPolicy):
            # The loader keeps a pass's declarations to policies its own branch declares;
            # a preview's head may name one only the head declares: nothing judges it.
            raise Stop(
                BLOCKED,
                Reason.ARTIFACT_REFUSED,
                f"unknown_policy: the artifact names VerificationPolicy {named!r}, which the "
                f"trusted branch does not declare in namespace {self.ref.namespace!r}; an "
                "artifact is judged only by a policy already trusted",
            )
        policy = found.resource.spec
        verification = policy_digest(policy)
        self.status = self.status.model_copy(update={"source": SourceStatus(requested=declared)})
        source = self._source(declared)
        source = source.model_copy(update={"digest": self._resolve(source)})
        assert source.digest is not None
        key = (str(parse_reference(source.ref).pinned(source.digest)), verification)
        with self.ctx.books.one_at_a_time(("verify", key)):
            verified = self.ctx.verified.get(key)
            if verified is None:
                self.step(self.phases.VERIFYING)
                verified = self._verify(source, policy)
                self.ctx.verified[key] = verified
        self.status = self.status.model_copy(
            update={
                "source": SourceStatus(
                    requested=declared, digest=verified.digest, verified=verified.accepted
                )
            }
        )
        if not verified.accepted or verified.digest is None:
            failed = next((c for c in verified.checks if not c.passed), None)
            detail = f" ({failed.requirement}: {failed.detail})" if failed else ""
            raise Stop(BLOCKED, Reason.ARTIFACT_REFUSED, f"{verified.reason}{detail}")
        if verified.artifact_type != wanted:  # a schema never stands in for migrations
            raise Stop(
                BLOCKED,
                Reason.ARTIFACT_REFUSED,
                f"wrong_artifact_type: the artifact is {verified.artifact_type or 'untyped'}; "
                f"a {self.ref.kind} reads only {wanted}",
            )
        pinned = source.model_copy(update={"digest": verified.digest, "artifact_type": wanted})
        return pinned, verified.digest, verification

    def _source(self, declared: str) -> ArtifactSource:
        """The reference as the runner reads it: an OCI layout folder made absolute (it is
        relative to the repository), and refused where the runner has no such folder."""
        try:
            reference = parse_reference(declared)
        except ArtifactError as error:
            raise Stop(BLOCKED, Reason.ARTIFACT_REFUSED, str(error)) from None
        if reference.transport != "oci-layout":
            return ArtifactSource(ref=declared)
        if not self.ctx.executor.local_files:
            raise Stop(
                BLOCKED,
                Reason.CONFIGURATION_ERROR,
                f"{declared}: an oci-layout reference is a folder on the controller's machine; "
                "the Kubernetes executor's runners read artifacts from a registry (oci://)",
            )
        layout = Path(reference.layout)
        if not layout.is_absolute():
            layout = self.ctx.repository.root / layout
        version = f"@{reference.digest}" if reference.digest else f":{reference.tag or 'latest'}"
        return ArtifactSource(ref=f"oci-layout://{layout}{version}")

    def _resolve(self, source: ArtifactSource) -> str:
        """The manifest digest the reference names: its own pin, or Resolve's answer (a
        runner operation, once per reference per pass)."""
        pinned = parse_reference(source.ref).digest
        if pinned is not None:
            return pinned
        with self.ctx.books.one_at_a_time(("resolve", source.ref)):
            digest = self.ctx.resolved.get(source.ref)
            if digest is None:
                outcome = self.run_registry_operation("resolve", artifact=source)
                digest = self.result(outcome, "Resolve", ResolveResult).digest
                self.ctx.resolved[source.ref] = digest
        return digest

    def _verify(self, source: ArtifactSource, policy: VerificationPolicySpec) -> VerifyResult:
        """Verify the artifact ``source`` pins against ``policy``: a runner operation."""
        trust = [TrustFile.of(path, self._trust_file(path)) for path in trust_paths(policy)]
        outcome = self.run_registry_operation("verify", artifact=source, policy=policy, trust=trust)
        return self.result(outcome, "Verify", VerifyResult)

    def _trust_file(self, path: str) -> bytes:
        """A key or trusted root the policy names: a regular file inside the repository."""
        try:
            data = read_inside(self.ctx.trust.root, Path(path), MAX_TRUST_FILE)
        except NotReadable as error:
            raise Stop(
                BLOCKED, Reason.ARTIFACT_REFUSED, f"invalid_reference: {path}: {error.detail}"
            ) from None
        if data is None:
            raise Stop(
                BLOCKED,
                Reason.ARTIFACT_REFUSED,
                f"invalid_reference: {path}: no such file in the repository",
            )
        return data

    # -- approvals -----------------------------------------------------------------------

    def approval(
        self,
        current: str,
        *,
        destructive: bool,
        privilege: bool,
        spent_before: Callable[[str], bool],
        fleet_plan: str | None = None,
    ) -> str | None:
        """The digest of an accepted, unconsumed approval of ``current``, if there is one;
        every approval file of the resource that is not one goes to ``rejectedApprovals``
        (:mod:`gitops.reconcile.approvals`).

        ``spent_before(identity)`` says whether the previous status proves it consumed. A
        fleet member (``fleet_plan``: its fleet plan id) is also authorized by an approval
        of its fleet naming that fleet plan id; what it spends of one is its own use
        (:func:`~gitops.reconcile.identities.fleet_approval_use`), so every member sharing
        the plan applies once with the same approval, and the policy's counts apply once
        per distinct plan.
        """

        def spent(key: str) -> bool:
            return self.ctx.state.is_consumed(key) or spent_before(key) or self.ledger.consumed(key)

        judged = judge_approvals(
            self.ctx.repository,
            self.ref,
            current,
            destructive=destructive,
            privilege=privilege,
            spent=spent,
            now=self.ctx.now(),
            log=self.ctx.log,
            trust=self.ctx.trust,
        )
        accepted, rejected = judged.accepted, list(judged.rejected)
        fleet = self.fleet_ref()
        if accepted is None and fleet_plan is not None and fleet is not None:
            uid = self.ref.uid
            by_fleet = judge_approvals(
                self.ctx.repository,
                fleet,
                fleet_plan,
                destructive=destructive,
                privilege=privilege,
                spent=lambda key: spent(fleet_approval_use(key, uid)),
                now=self.ctx.now(),
                log=self.ctx.log,
                trust=self.ctx.trust,
            )
            rejected += by_fleet.rejected
            if by_fleet.accepted is not None:
                accepted = fleet_approval_use(by_fleet.accepted, uid)
        self.status = self.status.model_copy(
            update={"rejected_approvals": rejected[:MAX_REJECTED] or None}
        )
        return accepted

    def approve_hint(self, current: str, fleet_plan: str | None) -> str:
        """The command that approves the plan: a member's fleet plan (for every member
        sharing it), or the resource's own plan."""
        if fleet_plan is not None:
            return f"seshat approve {self.key} (fleet plan {fleet_plan})"
        return f"seshat approve {self.key} --plan {current}"

    def fleet_ref(self) -> ResourceRef | None:
        """The fleet a member belongs to, as its approvals name it (None: not a member)."""
        if self.member is None:
            return None
        found = self.ctx.repository.find("DatabaseFleet", self.ref.namespace, self.member.fleet)
        if found is None:
            return None
        return ResourceRef(
            kind="DatabaseFleet",
            namespace=self.ref.namespace,
            name=self.member.fleet,
            uid=str(found.resource.metadata.uid),
        )

    # -- acknowledgments and tampering ---------------------------------------------------

    def acknowledged(self, operation_id: str) -> str | None:
        """Who acknowledged ``operation_id`` (a run, or a tampered status commit) in an
        accepted, signed ``RunAcknowledgment`` of this resource; None if nobody did."""
        repository, trust = self.ctx.repository, self.ctx.trust
        policies = [r.resource for r in trust.resources if isinstance(r.resource, ApprovalPolicy)]
        for loaded in repository.resources:
            statement = loaded.resource
            if (
                not isinstance(statement, RunAcknowledgment)
                or statement.spec.operation_id != operation_id
            ):
                continue
            path = repository.root / loaded.path
            try:
                data = read_statement(repository.root, path)
                signatures = read_signatures(repository.root, path.with_name(path.name + ".sig"))
            except ConfigurationError as error:
                self.ctx.log(f"{self.key}: acknowledgment {loaded.path} not read: {error}")
                continue
            verdict = verify_statement(
                statement,
                data,
                signatures,
                policies,
                trust.root,  # the allowed-signers files the trusted policies name
                namespace=ACKNOWLEDGMENT_NAMESPACE,
                expected=self.ref,
                now=self.ctx.now(),
            )
            if verdict.accepted:
                return verdict.message
            self.ctx.log(f"{self.key}: acknowledgment {loaded.path} refused: {verdict.reason}")
        return None

    def _refuse_tampering(self) -> None:
        """Blocked while a record naming this resource sits in a status commit that the
        controller's key did not sign, unless a person acknowledged that commit."""
        commits = self.ledger.tampered.get(self.record_key, [])
        open_commits = [c for c in commits if self.acknowledged(c) is None]
        if open_commits:
            raise Stop(
                BLOCKED,
                Reason.STATUS_TAMPERED,
                f"commit {open_commits[0]} on {self.ctx.status_branch.branch} carries a safety "
                "record the controller did not sign; it is not honoured, and nothing is "
                "applied until a person investigates and acknowledges it: seshat acknowledge "
                f"{self.key} --operation {open_commits[0]} (docs/security.md)",
            )
