"""What the control plane sends the runner, and what the runner answers.

The input (a JSON file named by ``seshat-runner op --input FILE``) never carries a
credential: the database URL is named by reference, an environment variable or a file the
runner reads itself. The answer is one framed :class:`OperationResult` on stdout.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runner.digests import Sha256
from runner.protocol.frame import PROTOCOL_VERSION
from runner.protocol.results import ErrorCode, OperationPayload, Pending

__all__ = [
    "REASON_PATTERN",
    "OperationError",
    "OperationInput",
    "OperationResult",
    "PlanSettings",
    "UrlReference",
]


REASON_PATTERN: Final = r"^[a-z][a-z0-9_]{0,63}$"
"""A refusal reason: one of Seshat's snake_case constants."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


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


class PlanSettings(_Frozen):
    allow_destructive: bool = False
    protected_tables: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    lock_timeout_ms: Annotated[int, Field(ge=1, le=3_600_000)] = 30_000
    out_of_order: bool = False  # migrations: accept pending versions below an applied one


class OperationInput(_Frozen):
    """One operation for the runner."""

    protocol: Literal[1] = PROTOCOL_VERSION
    operation: Literal["inspect", "drift", "plan", "apply", "history", "migrate"]
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,128}$")]
    url: UrlReference
    dev_url: UrlReference | None = None
    desired: str | None = None  # a folder of .sql files (the verified artifact's content)
    plan: str | None = None  # a plan file, for apply
    expect_digest: Sha256 | None = None
    journal: str | None = None  # apply, MySQL: the per-statement journal file (see docs)
    migrations: str | None = None  # history, migrate: the migration directory
    expect_pending: list[Pending] | None = None  # migrate: the approved (version, checksum)s
    settings: PlanSettings = Field(default_factory=PlanSettings)

    @model_validator(mode="after")
    def _needs(self) -> Self:
        if self.operation in ("drift", "plan") and not self.desired:
            raise ValueError(f"{self.operation} needs desired")
        if self.operation == "apply" and (not self.plan or not self.expect_digest):
            raise ValueError("apply needs plan and expect_digest")
        if self.operation in ("history", "migrate") and not self.migrations:
            raise ValueError(f"{self.operation} needs migrations")
        if self.operation == "migrate" and not self.expect_pending:
            raise ValueError("migrate needs expect_pending (the approved sequence)")
        return self


class OperationError(_Frozen):
    code: ErrorCode
    reason: Annotated[str, Field(pattern=REASON_PATTERN)] | None = None
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
