"""Status models: phases from the seed's two lifecycles, conditions, and what each records.

Status is written only by Seshat, on the status branch; a declaration that carries a
``status`` is refused by the loader. The condition reasons are stable CamelCase words: tools
(Argo CD, Flux, scripts) match on them, so a reason is added, never renamed.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from gitops.resources.base import Model
from runner.digests import Sha256
from runner.protocol.results import HistoryVerdict, RunOutcome

__all__ = [
    "SETTLED_PHASES",
    "Condition",
    "ConditionType",
    "DatabaseMigrationStatus",
    "DatabaseSchemaStatus",
    "DriftSummary",
    "FleetAttention",
    "FleetPlan",
    "FleetStatus",
    "FleetStep",
    "HistorySummary",
    "ImpactSummary",
    "MigrationPhase",
    "PlanSummary",
    "Reason",
    "RejectedApproval",
    "RejectionReason",
    "RunRecord",
    "SchemaPhase",
    "SharedPhase",
    "SourceStatus",
]


class SharedPhase(StrEnum):
    """The phases both lifecycles have, under the same names (each lifecycle's own enum
    below holds them too): the settled verdicts and the steps they share."""

    PENDING = "Pending"
    AWAITING_APPROVAL = "AwaitingApproval"
    APPLYING = "Applying"
    IN_SYNC = "InSync"
    BLOCKED = "Blocked"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


SETTLED_PHASES = frozenset(
    {SharedPhase.IN_SYNC, SharedPhase.BLOCKED, SharedPhase.FAILED, SharedPhase.SUSPENDED}
)
"""Where a pass leaves a resource with nothing under way; every other phase is progress."""


class SchemaPhase(StrEnum):
    """The states of the declared-schema lifecycle (seed: "The schema lifecycle")."""

    PENDING = "Pending"
    RESOLVING = "Resolving"
    VERIFYING = "Verifying"
    OBSERVING = "Observing"
    PLANNING = "Planning"
    AWAITING_APPROVAL = "AwaitingApproval"
    READY_TO_APPLY = "ReadyToApply"
    APPLYING = "Applying"
    VERIFYING_CONVERGENCE = "VerifyingConvergence"
    IN_SYNC = "InSync"
    BLOCKED = "Blocked"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


class MigrationPhase(StrEnum):
    """The states of the versioned-migration lifecycle (seed: "The migration lifecycle")."""

    PENDING = "Pending"
    RESOLVING = "Resolving"
    VERIFYING = "Verifying"
    READING = "Reading"
    PLANNING = "Planning"
    AWAITING_APPROVAL = "AwaitingApproval"
    APPLYING = "Applying"
    VERIFYING_HISTORY = "VerifyingHistory"
    IN_SYNC = "InSync"
    BLOCKED = "Blocked"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


class ConditionType(StrEnum):
    """Kubernetes-style summary conditions plus the specific ones each step sets."""

    READY = "Ready"
    RECONCILING = "Reconciling"
    STALLED = "Stalled"
    SOURCE_RESOLVED = "SourceResolved"
    SOURCE_VERIFIED = "SourceVerified"
    ENGINE_SUPPORTED = "EngineSupported"
    REALM_EXCLUSIVE = "RealmExclusive"
    PLANNED = "Planned"
    APPROVED = "Approved"
    APPLIED = "Applied"
    HISTORY_CLEAN = "HistoryClean"


class Reason(StrEnum):
    """Every stable reason a condition or verdict can carry."""

    # Progress and success.
    PROGRESSING = "Progressing"
    IN_SYNC = "InSync"
    AWAITING_APPROVAL = "AwaitingApproval"
    READY_TO_APPLY = "ReadyToApply"
    APPLYING = "Applying"
    SUSPENDED = "Suspended"
    # Blocked: a refusal that will not change until an input changes.
    CONFIGURATION_ERROR = "ConfigurationError"
    REALM_CONFLICT = "RealmConflict"
    UNSUPPORTED_ENGINE = "UnsupportedEngine"
    ARTIFACT_REFUSED = "ArtifactRefused"
    PROTECTED_TABLE = "ProtectedTable"
    DESTRUCTIVE_DISALLOWED = "DestructiveChangesDisallowed"
    APPLY_DISABLED = "ApplyDisabled"
    HISTORY_DIRTY = "HistoryDirty"
    CHECKSUM_MODIFIED = "ChecksumModified"
    HISTORY_OUT_OF_ORDER = "HistoryOutOfOrder"
    DATABASE_AHEAD = "DatabaseAhead"
    RUN_UNRESOLVED = "RunUnresolved"
    STATUS_TAMPERED = "StatusTampered"
    SANDBOX_UNAVAILABLE = "SandboxUnavailable"  # no sandbox to plan in: a configuration fault
    RECOVERY_NEEDED = "RecoveryNeeded"  # an interrupted write the runner cannot recover
    WOULD_FAIL_ON_DATA = "WouldFailOnData"  # the rows already there make the plan fail
    # Fleet members (docs/fleets.md).
    ROLLOUT_WAITING = "RolloutWaiting"  # may apply, but its rollout step is not reached
    LEFT_FLEET = "LeftFleet"  # no longer a member: not reconciled, its database untouched
    ROLLOUT_HALTED = "RolloutHalted"  # a fleet: a failing member halts its rollout
    ROLLOUT_PAUSED = "RolloutPaused"  # a fleet: a step's pause holds the later steps
    # Failed: a fault where a retry is reasonable.
    DISPATCH_FAILED = "DispatchFailed"
    OPERATION_FAILED = "OperationFailed"
    APPLY_FAILED = "ApplyFailed"
    LEASE_CONTINUITY_LOST = "LeaseContinuityLost"
    INTERNAL_ERROR = "InternalError"


_LEGACY = frozenset({"observedRevision", "observed_revision"})


def _without_revision(data: Any) -> Any:
    """A status (or condition) as read, without the ``observedRevision`` that status files
    held before the declarations' commit moved to the commit trailer
    (``Seshat-Source-Revision``): read and dropped, never written again."""
    if isinstance(data, dict) and not _LEGACY.isdisjoint(data):
        return {k: v for k, v in data.items() if k not in _LEGACY}
    return data


class Condition(Model):
    """One Kubernetes-style condition. It names no revision: it changes only when its
    status, reason or message does, so a pass over a newer commit that decides the same
    rewrites nothing."""

    type: ConditionType
    status: Literal["True", "False", "Unknown"]
    reason: Annotated[str, Field(pattern=r"^[A-Z][A-Za-z0-9]*$", max_length=64)]
    message: Annotated[str, Field(max_length=1024)] = ""
    last_transition_time: datetime

    @model_validator(mode="before")
    @classmethod
    def _read_legacy(cls, data: Any) -> Any:
        return _without_revision(data)


Digest = Sha256


class SourceStatus(Model):
    """The artifact as requested and as pinned by Resolve."""

    requested: str
    digest: Digest | None = None
    verified: bool = False


class DriftSummary(Model):
    """The bounded aggregates of an Observe; the detail stays inside the runner."""

    digest: Digest
    dialect: str
    total: Annotated[int, Field(ge=0)]
    highest_severity: Literal["none", "info", "warning", "destructive"]
    missing: Annotated[int, Field(ge=0)] = 0
    extra: Annotated[int, Field(ge=0)] = 0
    changed: Annotated[int, Field(ge=0)] = 0
    invalid: Annotated[int, Field(ge=0)] = 0


class ImpactSummary(Model):
    """Bounded aggregates of a plan's impact figures (docs/engine.md, "Impact"); each figure,
    worded for people, is in the file ``path`` beside the plan."""

    mode: Literal["estimate", "exact"]
    counted: Annotated[int, Field(ge=0)] = 0  # figures above zero (rows, values, sizes)
    none: Annotated[int, Field(ge=0)] = 0  # measured zero
    unknown: Annotated[int, Field(ge=0)] = 0  # not measured, and why, in the file
    path: str = ""


class PlanSummary(Model):
    """The plan a status points at; the documents live beside it on the status branch."""

    id: Digest
    statements: Annotated[int, Field(ge=0)] = 0
    destructive: bool = False
    privilege_changes: list[str] = Field(default_factory=list)
    path: str = ""
    procedural_schema: Literal[True] | None = None
    """The plan let procedural statements of the desired schema run (absent otherwise)."""
    sandbox_isolation: Literal["none"] | None = None
    """The plan was made with a sandbox server outside its OS jail (absent otherwise)."""
    skipped_drops: Annotated[int, Field(ge=0)] | None = None
    """``drops: Skip``: how many removals the plan left out (what only the database has;
    the plan document lists them). Absent for a plan made with ``drops: Plan``."""
    impact: ImpactSummary | None = None
    """What the plan does to the rows already there, measured read-only (absent when not
    measured); observations beside the plan, not part of its id."""
    fleet_plan: Digest | None = None
    """A fleet member's: the fleet plan id (the plan's content without what is the member's
    own), which one approval of the fleet names for every member sharing it (absent for a
    resource outside a fleet)."""


class RejectionReason(StrEnum):
    """Why an approval file naming a resource authorizes nothing (stable words: scripts and
    the ``seshat_approvals`` metric match on them, so one is added, never renamed)."""

    STALE_PLAN = "stale_plan"  # it names a plan other than the current one
    WRONG_RESOURCE = "wrong_resource"  # another lifetime (uid) or kind of the resource
    EXPIRED = "expired"  # past expiresAt, or older than the rule's maxAge
    DATED_IN_FUTURE = "dated_in_future"  # approvedAt later than the clock allows
    BAD_SIGNATURE = "bad_signature"  # no signature verifies over the file's bytes
    UNTRUSTED_SIGNER = "untrusted_signer"  # valid signatures by nobody the policy allows
    QUORUM_NOT_MET = "quorum_not_met"  # fewer distinct allowed signers than required
    CONSUMED = "consumed"  # accepted once and spent on an Apply; a new approval is needed
    MALFORMED = "malformed"  # the file (or its signatures) cannot be read as an Approval


MAX_REJECTED = 32
"""The most rejected approvals a status lists (by file name); a status stays small."""


class RejectedApproval(Model):
    """One approval file naming the resource that the pass did not accept, and why."""

    file: Annotated[str, Field(max_length=1024)]
    reason: RejectionReason
    detail: Annotated[str, Field(max_length=1024)] = ""


class RunRecord(Model):
    """One Apply as it ended (``lastApplied``) or as it was left uncertain (``unresolvedRun``)."""

    operation_id: str
    plan_id: Digest
    outcome: RunOutcome
    target_identity_digest: Digest | None = None
    recorded_at: datetime
    applied_versions: Annotated[list[str], Field(max_length=256)] = Field(default_factory=list)
    message: Annotated[str, Field(max_length=1024)] = ""
    settled_by: Annotated[str, Field(max_length=256)] | None = None
    """How an outcome that was ``Unknown`` came to be known (a fresh plan, a history reading
    with nothing pending); unset while it is what the run itself reported."""


class HistorySummary(Model):
    """What a migration history reading found (versions listed explicitly, never counted)."""

    verdict: HistoryVerdict
    fingerprint: Digest
    current_version: str | None = None
    checkpoint_version: str | None = None  # the checkpoint floor, or the one a fresh DB runs
    applied_count: Annotated[int, Field(ge=0)] = 0
    pending_versions: Annotated[list[str], Field(max_length=256)] = Field(default_factory=list)
    involved_versions: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)


class _Status(Model):
    """What a status file holds: a verdict and what it rests on, never the declarations'
    commit a pass read (that is the commit's ``Seshat-Source-Revision`` trailer), so the file
    changes only when something a person would care about changes."""

    @model_validator(mode="before")
    @classmethod
    def _read_legacy(cls, data: Any) -> Any:
        return _without_revision(data)

    # Kubernetes mode only (the custom resource's status, never a status file): the
    # generation of the cluster's object whose spec this status describes.
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    source: SourceStatus | None = None
    plan: PlanSummary | None = None
    last_applied: RunRecord | None = None
    # Approval files naming the resource that this pass did not accept (sorted by file);
    # None when there are none, so a status without them keeps the bytes it always had.
    rejected_approvals: Annotated[list[RejectedApproval], Field(max_length=MAX_REJECTED)] | None = (
        None
    )


class DatabaseSchemaStatus(_Status):
    """Status of a ``DatabaseSchema`` (written to ``status/<namespace>/<name>.yaml``)."""

    phase: SchemaPhase = SchemaPhase.PENDING
    drift: DriftSummary | None = None


class DatabaseMigrationStatus(_Status):
    """Status of a ``DatabaseMigration``; ``unresolvedRun`` blocks every Apply while set."""

    phase: MigrationPhase = MigrationPhase.PENDING
    history: HistorySummary | None = None
    unresolved_run: RunRecord | None = None


MAX_FLEET_LIST = 100
"""The longest list a fleet status keeps (plans, steps' members, attention): a fleet of
thousands stays a readable file; the counts are always whole."""


class FleetPlan(Model):
    """One distinct plan of a fleet: the members whose plans share its content."""

    id: Sha256  # the fleet plan id an approval of the fleet names
    members: int
    names: Annotated[list[str], Field(max_length=MAX_FLEET_LIST)] = Field(default_factory=list)
    approved: bool = False  # an accepted approval of the fleet names it
    statements: int = 0
    destructive: bool = False


class FleetStep(Model):
    """One rollout step's progress this pass."""

    index: int  # 1-based
    match: dict[str, str] = Field(default_factory=dict)
    members: int = 0
    in_sync: int = 0
    state: Literal["Done", "Rolling", "Waiting", "Halted", "Paused"] = "Waiting"
    message: Annotated[str, Field(max_length=1024)] = ""


class FleetAttention(Model):
    """A member a person should look at (Failed, Blocked, or left the fleet)."""

    member: str
    phase: str
    reason: str
    message: Annotated[str, Field(max_length=1024)] = ""


class FleetStatus(Model):
    """Status of a ``DatabaseFleet`` (``status/<namespace>/<fleet>.yaml``): aggregates only;
    each member has its own file under ``status/<namespace>/<fleet>/``. On the fleet's
    custom resource, each list keeps at most 10 entries (docs/kubernetes.md)."""

    # Kubernetes mode only (the custom resource's status, never a status file): the
    # generation of the cluster's object whose spec this status describes.
    observed_generation: int | None = None
    phase: Literal["Progressing", "InSync", "Halted", "Paused", "AwaitingApproval"] = "Progressing"
    message: Annotated[str, Field(max_length=1024)] = ""
    # Ready / Reconciling / Stalled, as every kind has them (gitops/reconcile/conditions.py).
    conditions: Annotated[list[Condition], Field(max_length=3)] = Field(default_factory=list)
    members: int = 0
    phases: dict[str, int] = Field(default_factory=dict)
    distinct_plans: int = 0  # how many distinct plans wait or roll out (``plans`` lists some)
    plans: Annotated[list[FleetPlan], Field(max_length=MAX_FLEET_LIST)] = Field(
        default_factory=list
    )
    steps: Annotated[list[FleetStep], Field(max_length=64)] = Field(default_factory=list)
    attention: Annotated[list[FleetAttention], Field(max_length=MAX_FLEET_LIST)] = Field(
        default_factory=list
    )
    resume: str | None = None  # the token spec.rollout.resume must name to go on
    left: Annotated[list[str], Field(max_length=MAX_FLEET_LIST)] = Field(default_factory=list)
