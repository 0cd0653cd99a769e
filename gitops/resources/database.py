"""The spec parts a ``DatabaseSchema`` and a ``DatabaseMigration`` share.

A database URL carries a password, so it never appears in Git: ``target.url`` (and a
schema's ``dev.url``) is only ever a *reference* that the runner resolves in its own process.
The control plane passes the reference along and never reads what it names.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from gitops.resources.base import (
    DatabaseObjectMeta,
    Declaration,
    Interval,
    Model,
    OperationTimeout,
    RetryInterval,
    exactly_one,
)

__all__ = [
    "KNOWN_ENGINES",
    "ApplyPolicy",
    "Artifact",
    "ArtifactVerification",
    "DatabaseDeclaration",
    "DatabaseSpec",
    "OperationTimeouts",
    "SecretKeyRef",
    "Target",
    "UrlReference",
]

KNOWN_ENGINES = ("postgresql", "mysql", "sqlite")
"""Engines the runner implements. Other names are accepted here and refused at run time."""

ARTIFACT_REF = (
    r"^(oci://[^\s?#@]+(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}|@sha256:[0-9a-f]{64})"
    r"|oci-layout://[^\s?#@]+(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}|@sha256:[0-9a-f]{64}))$"
)
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
COORDINATION_KEY = r"^[a-z0-9]([a-z0-9._:/-]{0,251}[a-z0-9])?$"


class ApplyPolicy(StrEnum):
    """When a computed plan may be applied."""

    ON_APPROVAL = "OnApproval"
    ALWAYS = "Always"
    NEVER = "Never"


class OperationTimeouts(Model):
    """How long each kind of runner operation may take before the runner stops it.

    ``plan`` bounds every read-only operation (Resolve, Verify, Observe, Plan, History);
    ``apply`` a schema Apply and ``migrate`` a migration run. The runner enforces the
    deadline itself; the local executor's process timeout and a Job's
    ``activeDeadlineSeconds`` follow it plus a small stop margin. Timeouts decide when an
    operation is abandoned, never what a plan does, so they are left out of the policy
    digest (and the plan id): changing one never invalidates an approval.
    """

    plan: OperationTimeout = 600
    apply: OperationTimeout = 6 * 3600
    migrate: OperationTimeout = 6 * 3600


class SecretKeyRef(Model):
    """A key of a Kubernetes Secret in the resource's namespace (Kubernetes mode)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]
    key: Annotated[str, Field(pattern=r"^[-._a-zA-Z0-9]{1,253}$")]


class UrlReference(Model):
    """Where the runner finds a database URL: exactly one of the three sources."""

    from_env: Annotated[str, Field(pattern=ENV_NAME, max_length=128)] | None = None
    from_file: Annotated[str, Field(pattern=r"^/\S*$", max_length=4096)] | None = None
    secret_key_ref: SecretKeyRef | None = None

    @model_validator(mode="before")
    @classmethod
    def _refuse_inline(cls, data: Any) -> Any:
        if isinstance(data, str):
            # Never include the value: it is very likely a URL with a password in it.
            raise PydanticCustomError(
                "inline_credential",
                "a database URL must not be written in Git; reference it with fromEnv, "
                "fromFile or secretKeyRef (the value is not shown)",
            )
        return data

    _exactly_one = exactly_one("url_reference", "from_env", "from_file", "secret_key_ref")


class Target(Model):
    """The database a resource converges, named for coordination without its credential."""

    engine: Annotated[str, Field(pattern=r"^[a-z][a-z0-9]{0,31}$")]
    url: UrlReference
    coordination_key: Annotated[str, Field(pattern=COORDINATION_KEY)] | None = None
    realm: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")] | None = None
    shared_realm: bool = False
    preview_url: UrlReference | None = None
    """A read-only credential for ``seshat preview`` (docs/preview.md); ``url`` when unset.
    A preview only observes and plans, so it never needs the credential that may write."""

    _one_coordination_name = exactly_one("coordination", "coordination_key", "realm")


class ArtifactVerification(Model):
    """Which ``VerificationPolicy`` (same namespace) the artifact must satisfy."""

    policy: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]


class Artifact(Model):
    """The OCI artifact holding the desired schema or the migration directory."""

    ref: Annotated[str, Field(max_length=1024)]
    verification: ArtifactVerification

    @field_validator("ref")
    @classmethod
    def _ref_shape(cls, ref: str) -> str:
        if not re.match(ARTIFACT_REF, ref):
            raise PydanticCustomError(
                "artifact_ref",
                "must be oci://HOST/REPOSITORY:TAG, oci://HOST/REPOSITORY@sha256:DIGEST "
                "or oci-layout://PATH:TAG",
            )
        return ref


class DatabaseSpec(Model):
    """Fields both lifecycles share."""

    target: Target
    artifact: Artifact
    interval: Interval = 600
    retry_interval: RetryInterval = 30
    suspend: bool = False


class DatabaseDeclaration(Declaration):
    """A ``DatabaseSchema`` or a ``DatabaseMigration``: a database resource, whose name
    becomes file names and a branch name (:class:`DatabaseObjectMeta`)."""

    metadata: DatabaseObjectMeta
