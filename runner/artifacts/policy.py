"""What an artifact must be, and who must have signed it: the ``spec`` of a
``VerificationPolicy``, which the control plane reads from Git and verification applies.

Key files and trusted roots are named by paths relative to the folder verification reads
them from (the declarations repository); they are read as bounded regular files inside it.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Self

from pydantic import AfterValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from runner.digests import digest
from runner.models import Model, plain_path

__all__ = [
    "MEDIA_TYPE",
    "Authority",
    "KeyAuthority",
    "KeylessIdentity",
    "RepoPath",
    "SignatureMode",
    "SignatureRequirements",
    "VerificationPolicySpec",
    "policy_digest",
    "trust_paths",
]

RepoPath = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(plain_path)]
"""A file in the repository, relative to its root."""

MEDIA_TYPE = r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$"


def _compiles(pattern: str | None) -> str | None:
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            raise PydanticCustomError(
                "regex", "is not a valid regular expression: {why}", {"why": str(error)}
            ) from None
    return pattern


class KeylessIdentity(Model):
    """A Sigstore certificate identity: OIDC issuer and subject, each exact or a regex.

    Regular expressions must match the whole value (they are anchored when evaluated).
    """

    issuer: str | None = None
    issuer_reg_exp: str | None = None
    subject: str | None = None
    subject_reg_exp: str | None = None
    trusted_root: RepoPath | None = None

    _check_issuer_regex = field_validator("issuer_reg_exp", "subject_reg_exp")(_compiles)

    @model_validator(mode="after")
    def _one_each(self) -> Self:
        if (self.issuer is None) == (self.issuer_reg_exp is None):
            raise PydanticCustomError("identity", "set exactly one of issuer or issuerRegExp")
        if (self.subject is None) == (self.subject_reg_exp is None):
            raise PydanticCustomError("identity", "set exactly one of subject or subjectRegExp")
        return self


class KeyAuthority(Model):
    """A static public key (PEM, ECDSA P-256 or Ed25519) in the repository."""

    public_key: RepoPath


class Authority(Model):
    """One party whose signature counts toward ``count``: keyless or a static key."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    keyless: KeylessIdentity | None = None
    key: KeyAuthority | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.keyless is None) == (self.key is None):
            raise PydanticCustomError("authority", "set exactly one of keyless or key")
        return self


class SignatureMode(StrEnum):
    """``enforce`` refuses unsigned artifacts; ``warn`` reports and proceeds; ``off`` skips."""

    ENFORCE = "enforce"
    WARN = "warn"
    OFF = "off"


class SignatureRequirements(Model):
    """How many distinct authorities must have signed the artifact's manifest digest."""

    mode: SignatureMode = SignatureMode.ENFORCE
    count: Annotated[int, Field(ge=1, le=16)] = 1
    authorities: Annotated[list[Authority], Field(max_length=16)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _satisfiable(self) -> Self:
        names = [a.name for a in self.authorities]
        if len(set(names)) != len(names):
            raise PydanticCustomError("authorities", "authority names must be unique")
        if self.mode is not SignatureMode.OFF and self.count > len(self.authorities):
            raise PydanticCustomError(
                "count",
                "count is {count} but only {have} authorities are listed",
                {"count": self.count, "have": len(self.authorities)},
            )
        return self


class VerificationPolicySpec(Model):
    """What an artifact must be, and who must have signed it, before anything reads it."""

    artifact_types: Annotated[
        list[Annotated[str, Field(pattern=MEDIA_TYPE)]], Field(min_length=1, max_length=8)
    ]
    required_annotations: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=32)
    ] = Field(default_factory=list)
    require_digest_pin: bool = False
    signatures: SignatureRequirements = Field(default_factory=SignatureRequirements)


def policy_digest(spec: VerificationPolicySpec) -> str:
    """The digest of a policy's spec (canonical JSON); part of what a plan binds."""
    return digest("verification-policy", spec.model_dump(mode="json", by_alias=True))


def trust_paths(spec: VerificationPolicySpec) -> list[str]:
    """The repository files verification reads: public keys and trusted roots, in order."""
    paths: list[str] = []
    for authority in spec.signatures.authorities:
        if authority.key is not None:
            paths.append(authority.key.public_key)
        if authority.keyless is not None and authority.keyless.trusted_root is not None:
            paths.append(authority.keyless.trusted_root)
    return sorted(set(paths))
