"""``VerificationPolicy`` (which artifacts are trusted) and ``ApprovalPolicy`` (who approves).

Key files, trusted roots and allowed-signers files are named by paths relative to the
repository root; the loader refuses a path that leaves the repository or names no file.
Each policy lists them through ``repo_paths()`` so that check lives in one place.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from gitops.resources.base import API_VERSION, MaxAge, Model, ObjectMeta, plain_path

__all__ = [
    "ApprovalPolicy",
    "ApprovalPolicySpec",
    "ApprovalRule",
    "Approvers",
    "Authority",
    "KeyAuthority",
    "KeylessIdentity",
    "RepoPath",
    "RuleMatch",
    "SignatureMode",
    "SignatureRequirements",
    "VerificationPolicy",
    "VerificationPolicySpec",
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


class VerificationPolicy(Model):
    """A named artifact trust policy, referenced by ``spec.artifact.verification.policy``."""

    api_version: Literal["seshat.dev/v1alpha1"] = API_VERSION
    kind: Literal["VerificationPolicy"] = "VerificationPolicy"
    metadata: ObjectMeta
    spec: VerificationPolicySpec

    def repo_paths(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Each repository file this policy names, with the field location naming it."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        for index, authority in enumerate(self.spec.signatures.authorities):
            where = ("spec", "signatures", "authorities", index)
            if authority.key is not None:
                found.append(((*where, "key", "publicKey"), authority.key.public_key))
            if authority.keyless is not None and authority.keyless.trusted_root is not None:
                found.append(((*where, "keyless", "trustedRoot"), authority.keyless.trusted_root))
        return found


class RuleMatch(Model):
    """Which resources a rule covers: shell-style patterns; an empty list matches all."""

    namespaces: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)
    names: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)


class Approvers(Model):
    """Who may sign approvals: SSH keys in an allowed-signers file, or Sigstore identities."""

    allowed_signers: RepoPath | None = None
    keyless: Annotated[list[KeylessIdentity], Field(max_length=32)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _someone(self) -> Self:
        if self.allowed_signers is None and not self.keyless:
            raise PydanticCustomError("approvers", "set allowedSigners, keyless, or both")
        return self


class ApprovalRule(Model):
    """A quorum for the resources a rule matches; the first matching rule applies."""

    match: RuleMatch = Field(default_factory=RuleMatch)
    approvers: Approvers
    count: Annotated[int, Field(ge=1, le=16)] = 1
    destructive_count: Annotated[int, Field(ge=1, le=16)] | None = None
    privilege_count: Annotated[int, Field(ge=1, le=16)] | None = None
    max_age: MaxAge | None = None

    @model_validator(mode="after")
    def _higher_quorums(self) -> Self:
        for field, value in (
            ("destructiveCount", self.destructive_count),
            ("privilegeCount", self.privilege_count),
        ):
            if value is not None and value < self.count:
                raise PydanticCustomError(
                    "quorum",
                    "{field} ({value}) must not be lower than count ({count})",
                    {"field": field, "value": value, "count": self.count},
                )
        return self


class ApprovalPolicySpec(Model):
    """The ordered approval rules of a repository."""

    rules: Annotated[list[ApprovalRule], Field(min_length=1, max_length=64)]


class ApprovalPolicy(Model):
    """Who may approve plans, and how many distinct signers each kind of plan needs."""

    api_version: Literal["seshat.dev/v1alpha1"] = API_VERSION
    kind: Literal["ApprovalPolicy"] = "ApprovalPolicy"
    metadata: ObjectMeta
    spec: ApprovalPolicySpec

    def repo_paths(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Each repository file this policy names, with the field location naming it."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        for index, rule in enumerate(self.spec.rules):
            where = ("spec", "rules", index, "approvers")
            if rule.approvers.allowed_signers is not None:
                found.append(((*where, "allowedSigners"), rule.approvers.allowed_signers))
            for number, identity in enumerate(rule.approvers.keyless):
                if identity.trusted_root is not None:
                    found.append(
                        ((*where, "keyless", number, "trustedRoot"), identity.trusted_root)
                    )
        return found
