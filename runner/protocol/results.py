"""What each operation answers: one typed, frozen model per operation, and the error codes.

A result crosses the process boundary as JSON in the runner's one frame
(:class:`~runner.protocol.messages.OperationResult`); the control plane reads it back into
the same models, tagged by ``operation``, and decides a verdict by looking codes and reasons
up in tables. Nothing is recovered from message text: a refusal carries its stable
``reason`` in a field of its own, and each :class:`ErrorCode` says whether the operation ran
nothing and whether the resource is Blocked (a fault of its inputs or configuration, not
retried until they change) or Failed.

Keys are camelCase on the wire, as they have always been (``planDigest``, ``rolledBack``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, JsonValue

from runner.digests import Sha256
from runner.engines.impact import ImpactReport
from runner.engines.plan import PlanDocument
from runner.engines.report import ApplyReport
from runner.models import Model

__all__ = [
    "REASON_PATTERN",
    "ApplyReportModel",
    "ApplyResult",
    "DriftCategories",
    "DriftReport",
    "DriftResult",
    "ErrorCode",
    "HistoryReport",
    "HistoryResult",
    "HistoryVerdict",
    "InspectResult",
    "MigrateReport",
    "MigrateResult",
    "OperationPayload",
    "Pending",
    "PlanResult",
    "RecoverResult",
    "RecoveryReport",
    "RefusalReason",
    "ResolveResult",
    "RunOutcome",
    "VerifyCheck",
    "VerifyResult",
]


REASON_PATTERN: Final = r"^[a-z][a-z0-9_]{0,63}$"
"""A refusal reason: one of Seshat's snake_case constants."""

RefusalReason = Annotated[str, Field(pattern=REASON_PATTERN)]


class ErrorCode(StrEnum):
    """Why an operation gave no result. Members know what their failure means."""

    INVALID_INPUT = "invalid_input"
    CREDENTIAL_UNAVAILABLE = "credential_unavailable"
    INVALID_URL = "invalid_url"
    CANNOT_CONNECT = "cannot_connect"
    DESIRED_SCHEMA_INVALID = "desired_schema_invalid"
    MIGRATIONS_INVALID = "migrations_invalid"
    ARTIFACT_REFUSED = "artifact_refused"  # the artifact cannot be used: see ``reason``
    REGISTRY_UNAVAILABLE = "registry_unavailable"  # a transient registry fault: retried
    PLAN_REFUSED = "plan_refused"
    UNSUPPORTED_ENGINE = "unsupported_engine"
    OPERATION_FAILED = "operation_failed"
    INTERRUPTED = "interrupted"
    DEADLINE_EXCEEDED = "deadline_exceeded"  # the operation outlived its deadline_seconds
    INTERNAL = "internal"
    NOT_RUN = "not_run"  # in a batch, after an operation that failed: never started
    RECOVERY_NEEDED = "recovery_needed"  # an interrupted write must be recovered first
    NOT_WRITABLE = "not_writable"  # the runner cannot write the database (file or folder)

    @property
    def ran_nothing(self) -> bool:
        """The runner stopped before it could change the database (reading its input,
        connecting, taking the lock, reading the artifact, or refusing on evidence); for
        any other code an Apply's outcome is unknown."""
        return self not in _MAY_HAVE_RUN

    @property
    def blocked(self) -> bool:
        """A fault of the resource's inputs or configuration (Blocked until they change);
        otherwise the operation Failed and the next pass tries again. A refusal blocks when
        its ``reason`` is one the lifecycle knows (see the control plane's tables)."""
        return self in _BLOCKING


_MAY_HAVE_RUN = frozenset(
    {
        ErrorCode.OPERATION_FAILED,
        ErrorCode.INTERRUPTED,
        ErrorCode.DEADLINE_EXCEEDED,
        ErrorCode.INTERNAL,
    }
)
_BLOCKING = frozenset(
    {
        ErrorCode.INVALID_URL,
        ErrorCode.DESIRED_SCHEMA_INVALID,
        ErrorCode.MIGRATIONS_INVALID,
        ErrorCode.ARTIFACT_REFUSED,
        ErrorCode.PLAN_REFUSED,
        ErrorCode.UNSUPPORTED_ENGINE,
    }
)


class HistoryVerdict(StrEnum):
    """The verdicts on a migration history, in precedence order: the first that holds wins."""

    DIRTY = "dirty"
    CHECKSUM_MODIFIED = "checksum_modified"
    DATABASE_AHEAD = "database_ahead"
    OUT_OF_ORDER = "out_of_order"
    NOTHING_PENDING = "nothing_pending"
    READY = "ready"

    @property
    def blocking(self) -> bool:
        """Nothing may be applied until the history is repaired."""
        return self not in (HistoryVerdict.NOTHING_PENDING, HistoryVerdict.READY)


RunOutcome = Literal["Applied", "UpToDate", "Failed", "Partial", "Unknown"]
"""How an Apply ended: nothing to do, all of it, part of it (committed), none of it (rolled
back), or not known (the runner was lost midway)."""


Count = Annotated[int, Field(ge=0)]
Version = Annotated[str, Field(pattern=r"^[0-9]{1,20}$")]
Pending = tuple[Version, Sha256]
"""A pending migration as the approval binds it: its version and its file's checksum."""


class DriftCategories(Model):
    missing: Count = 0
    extra: Count = 0
    changed: Count = 0
    invalid: Count = 0


class DriftReport(Model):
    """Bounded aggregates of what differs (see :func:`runner.engines.drift.drift_report`)."""

    digest: Sha256
    dialect: str
    total: Count
    highest_severity: Literal["none", "warning", "destructive"]
    categories: DriftCategories


class ApplyReportModel(ApplyReport):
    """What an Apply did, statement by statement: the engine's
    :class:`~runner.engines.report.ApplyReport`, frozen once it leaves the engine."""

    model_config = ConfigDict(frozen=True)  # merged into ApplyReport's: only this differs


class HistoryReport(Model):
    """The migration history's verdict and its evidence
    (:meth:`runner.migrations.history.Verdict.to_json`)."""

    model_config = ConfigDict(extra="ignore")  # merged into Model's: only this differs

    verdict: HistoryVerdict
    fingerprint: Sha256
    versions: list[str] = Field(default_factory=list)  # the versions involved
    pending: list[str] = Field(default_factory=list)
    pending_checksums: list[Pending] = Field(default_factory=list)
    pending_names: list[str] = Field(default_factory=list)  # each pending version's file
    current_version: str | None = None
    checkpoint_version: str | None = None
    covered: list[str] = Field(default_factory=list)  # files a checkpoint stands for
    applied_count: Count = 0
    detail: str = ""


class MigrateReport(Model):
    """What a migration Apply did (:func:`runner.migrations.apply.apply_pending`)."""

    outcome: RunOutcome
    applied: list[str] = Field(default_factory=list)
    failed: str | None = None
    statement: int | None = None
    statements_applied: Count = 0
    error: str | None = None


class RecoveryReport(Model):
    """What the ``recover`` operation found and did (:meth:`runner.engines.core.Engine.recover`).

    ``found``: ``none`` (nothing to recover), ``rollback_journal`` (SQLite's hot journal:
    the interrupted transaction's original pages, written back by the recovery, so what the
    interrupted write did is undone) or ``wal`` (a write-ahead log a reader cannot use until
    a writer recovers its index; committed transactions stay). ``leftovers`` names what a
    killed session left that Seshat does not settle itself (PostgreSQL's prepared
    transactions and INVALID indexes): a person decides."""

    found: Literal["none", "rollback_journal", "wal"]
    recovered: bool
    detail: str = ""
    leftovers: list[str] = Field(default_factory=list)


class ResolveResult(Model):
    operation: Literal["resolve"] = "resolve"
    digest: Sha256
    """The manifest digest the reference's tag names now (its own digest when pinned)."""


@dataclass(frozen=True, slots=True)
class VerifyCheck:
    """One requirement of a verification policy, judged (the verifier builds these)."""

    requirement: str
    passed: bool
    detail: str


class VerifyResult(Model):
    """A verification policy judged against one manifest digest, check by check."""

    operation: Literal["verify"] = "verify"
    accepted: bool
    reason: RefusalReason | None = None
    """Why it was refused (``unsigned``, ``missing_annotation``, ...), a stable constant."""
    digest: Sha256 | None = None
    artifact_type: str | None = None
    checks: list[VerifyCheck] = Field(default_factory=list)


class InspectResult(Model):
    operation: Literal["inspect"] = "inspect"
    model: dict[str, JsonValue]
    """The live schema model as canonical JSON (``seshat-runner schema inspect``)."""


class DriftResult(Model):
    operation: Literal["drift"] = "drift"
    drift: DriftReport


class PlanResult(Model):
    operation: Literal["plan"] = "plan"
    plan_digest: Sha256
    plan: PlanDocument
    impact: ImpactReport | None = None
    """What the plan will do to the rows already there, measured read-only: observations
    beside the plan, outside the bytes ``plan_digest`` names (docs/engine.md, "Impact")."""


class ApplyResult(Model):
    operation: Literal["apply"] = "apply"
    apply: ApplyReportModel


class HistoryResult(Model):
    operation: Literal["history"] = "history"
    history: HistoryReport


class MigrateResult(Model):
    operation: Literal["migrate"] = "migrate"
    migrate: MigrateReport


class RecoverResult(Model):
    operation: Literal["recover"] = "recover"
    recovery: RecoveryReport


OperationPayload = Annotated[
    ResolveResult
    | VerifyResult
    | InspectResult
    | DriftResult
    | PlanResult
    | ApplyResult
    | HistoryResult
    | MigrateResult
    | RecoverResult,
    Field(discriminator="operation"),
]
"""One operation's result, tagged by the operation that produced it."""
