"""What the control plane sends the runner, and what the runner answers.

The input (a JSON file named by ``seshat-runner op --input FILE``) never carries a
credential: the database URL is named by reference, an environment variable or a file the
runner reads itself. The answer is one framed :class:`OperationResult` on stdout.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Final, Literal, Self

from pydantic import Base64Bytes, BaseModel, ConfigDict, Field, model_validator

from runner.artifacts.policy import MEDIA_TYPE, RepoPath, VerificationPolicySpec
from runner.digests import Sha256
from runner.protocol.frame import PROTOCOL_VERSION
from runner.protocol.results import (
    REASON_PATTERN,
    ErrorCode,
    OperationPayload,
    Pending,
    RefusalReason,
)

__all__ = [
    "DATABASE_OPERATIONS",
    "REASON_PATTERN",
    "ArtifactSource",
    "BatchInput",
    "OperationError",
    "OperationInput",
    "OperationResult",
    "PlanSettings",
    "RegistrySettings",
    "TrustFile",
    "UrlReference",
]

DATABASE_OPERATIONS: Final = frozenset(
    {"inspect", "drift", "plan", "apply", "history", "migrate", "recover"}
)
"""The operations that connect to a database (Resolve and Verify read only a registry)."""


class _Frozen(BaseModel):
    # Validators are built on first use: a process uses a few of these models.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class UrlReference(_Frozen):
    """Exactly one of an environment variable or a file holding the database URL."""

    from_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    from_file: Annotated[str, Field(pattern=r"^/")] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_inline(cls, data: Any) -> Any:
        if isinstance(data, str):
            raise ValueError("the URL must be given by reference (from_env or from_file)")
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.from_env is None) == (self.from_file is None):
            raise ValueError("set exactly one of from_env or from_file")
        return self


class ArtifactSource(_Frozen):
    """Where the runner reads an artifact: a reference and, once resolved, the manifest
    digest every later operation names it by."""

    ref: Annotated[str, Field(min_length=1, max_length=2048)]
    """``oci://host/repository:tag`` or ``oci-layout:///absolute/folder:tag`` (the local
    executor only), as declared."""
    digest: Sha256 | None = None
    artifact_type: Annotated[str, Field(pattern=MEDIA_TYPE)] | None = None
    """The one type the operation accepts (a schema never stands in for migrations)."""


class RegistrySettings(_Frozen):
    """How the runner reaches registries; never a credential (the runner's environment
    carries that: a docker config or ``SESHAT_REGISTRY_*``)."""

    plain_http: list[str] = Field(default_factory=list)  # hosts allowed plain HTTP
    ca_pem: Annotated[str, Field(max_length=1024 * 1024)] | None = None  # extra CA bundle
    timeout: Annotated[float, Field(gt=0, le=600)] = 30.0


class TrustFile(_Frozen):
    """A public key or Sigstore trusted root a verification policy names, as the control
    plane read it from the repository (bounded, inside it)."""

    path: RepoPath
    content: Base64Bytes  # base64 on the wire; validating decodes, so build with :meth:`of`

    @classmethod
    def of(cls, path: str, data: bytes) -> TrustFile:
        return cls(path=path, content=base64.b64encode(data))


class PlanSettings(_Frozen):
    allow_destructive: bool = False
    protected_tables: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    schemas: list[str] = Field(default_factory=list)  # PostgreSQL: only these (empty: all)
    exclude_schemas: list[str] = Field(default_factory=list)  # PostgreSQL: never these
    # Unset (None, left out of the input) unless privileges are managed: a runner that
    # predates them still reads what a newer control plane sends when they are not.
    managed_roles: (
        Annotated[list[Annotated[str, Field(min_length=1, max_length=63)]], Field(max_length=256)]
        | None
    ) = None
    manage_ownership: bool | None = None
    # Unset unless the declaration says otherwise, likewise (docs/engine.md, "What a
    # desired schema may hold"; "Sandboxes").
    procedural_schema: bool | None = None
    """Let procedural statements of the desired schema run (``spec.policy.proceduralSchema``)."""
    sandbox_isolation: Literal["jail", "none"] | None = None
    """How a private sandbox server is isolated (``spec.dev.isolation``); unset, ``jail``."""
    drops: Literal["plan", "skip"] | None = None
    """Plans: what becomes of objects only the database has (``spec.policy.drops``): unset
    or ``plan``, they are dropped; ``skip``, they are left alone and listed as skipped."""
    lock_timeout_ms: Annotated[int, Field(ge=1, le=3_600_000)] = 30_000
    impact: Literal["off", "estimate", "exact"] | None = None
    """Plans: how the impact checks measure (``spec.policy.impact``); unset, ``estimate``."""
    impact_timeout_ms: Annotated[int, Field(ge=1, le=600_000)] | None = None
    """Plans: each impact query's statement timeout; unset, the runner's default."""
    out_of_order: bool = False  # migrations: accept pending versions below an applied one
    transaction_mode: Literal["auto", "file", "all", "none"] | None = None
    """How an Apply is wrapped in transactions (docs/operations.md, "Transaction mode"):
    schemas ``auto`` | ``all`` | ``none``, migrations ``file`` | ``all`` | ``none``; unset,
    the engine's default (``auto``, ``file``). A mode the engine cannot honour is refused
    (``transaction_mode_unsupported``) before anything runs."""


class OperationInput(_Frozen):
    """One operation for the runner."""

    protocol: Literal[1] = PROTOCOL_VERSION
    operation: Literal[
        "resolve", "verify", "inspect", "drift", "plan", "apply", "history", "migrate", "recover"
    ]
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,128}$")]
    url: UrlReference | None = None  # every operation but resolve and verify
    dev_url: UrlReference | None = None
    artifact: ArtifactSource | None = None
    """resolve, verify; drift, plan, history, migrate: the verified artifact, by digest."""
    registry: RegistrySettings = Field(default_factory=RegistrySettings)
    policy: VerificationPolicySpec | None = None  # verify
    trust: Annotated[list[TrustFile], Field(max_length=32)] = Field(default_factory=list)
    desired: str | None = None  # a folder of .sql files, instead of an artifact
    plan: str | None = None  # a plan file, for apply
    expect_digest: Sha256 | None = None
    journal: str | None = None  # apply, MySQL: the per-statement journal file (see docs)
    migrations: str | None = None  # history, migrate: a migration folder, instead of one
    expect_pending: list[Pending] | None = None  # migrate: the approved (version, checksum)s
    settings: PlanSettings = Field(default_factory=PlanSettings)
    deadline_seconds: Annotated[int, Field(ge=1, le=7 * 86400)] | None = None
    """How long the operation may take: the runner stops it itself past this (error
    ``deadline_exceeded``); unset, no deadline of its own."""

    @model_validator(mode="after")
    def _needs(self) -> Self:
        if (self.operation in DATABASE_OPERATIONS) != (self.url is not None):
            raise ValueError(f"{self.operation} {'needs' if self.url is None else 'takes no'} url")
        pinned = self.artifact is not None and self.artifact.digest is not None
        if self.operation == "resolve" and self.artifact is None:
            raise ValueError("resolve needs artifact")
        if self.operation == "verify" and (not pinned or self.policy is None):
            raise ValueError("verify needs artifact (with its digest) and policy")
        if self.operation in ("drift", "plan") and not (self.desired or pinned):
            raise ValueError(f"{self.operation} needs desired or artifact (with its digest)")
        if self.operation == "apply" and (not self.plan or not self.expect_digest):
            raise ValueError("apply needs plan and expect_digest")
        if self.operation in ("history", "migrate") and not (self.migrations or pinned):
            raise ValueError(f"{self.operation} needs migrations or artifact (with its digest)")
        if self.operation == "migrate" and not self.expect_pending:
            raise ValueError("migrate needs expect_pending (the approved sequence)")
        return self


MAX_BATCH: Final = 8
ALONE: Final = frozenset({"apply", "migrate", "recover"})
"""The operations that change a database run alone, one per invocation."""


class BatchInput(_Frozen):
    """Several operations for one resource, run in order by one runner process with one
    credential (every operation names the same URL references). The runner writes one frame
    per operation; after one fails, the rest are not started and answer ``not_run``."""

    protocol: Literal[1] = PROTOCOL_VERSION
    batch: Annotated[list[OperationInput], Field(min_length=1, max_length=MAX_BATCH)]

    @model_validator(mode="after")
    def _one_credential(self) -> Self:
        first = self.batch[0]
        for request in self.batch:
            if (request.url, request.dev_url) != (first.url, first.dev_url):
                raise ValueError("every operation of a batch names the same url and dev_url")
            if request.operation in ALONE and len(self.batch) > 1:
                raise ValueError(f"{request.operation} runs alone, never in a batch")
        if len({request.id for request in self.batch}) != len(self.batch):
            raise ValueError("the operations of a batch have distinct ids")
        return self


class OperationError(_Frozen):
    code: ErrorCode
    reason: RefusalReason | None = None
    """A refusal's stable reason (``destructive_changes``, ``stale_plan``, ...)."""
    message: Annotated[str, Field(max_length=4096)]


class OperationResult(_Frozen):
    """The payload of the runner's one frame: a result tagged by its operation, or an
    error."""

    protocol: Literal[1] = PROTOCOL_VERSION
    operation: str
    id: str
    target_identity: str | None = None
    result: OperationPayload | None = None
    error: OperationError | None = None

    @model_validator(mode="after")
    def _one_answer(self) -> Self:
        if (self.result is None) == (self.error is None):
            raise ValueError("a result holds exactly one of result or error")
        if self.result is not None and self.result.operation != self.operation:
            raise ValueError("the result is another operation's")
        return self
