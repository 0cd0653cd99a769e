"""``VerificationPolicy`` (which artifacts are trusted) and ``ApprovalPolicy`` (who approves).

Key files, trusted roots and allowed-signers files are named by paths relative to the
repository root; the loader refuses a path that leaves the repository or names no file.
Each policy lists them through ``repo_paths()`` so that check lives in one place.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from gitops.resources.base import Declaration, MaxAge, Model
from runner.artifacts.policy import (
    Authority,
    KeyAuthority,
    KeylessIdentity,
    RepoPath,
    SignatureMode,
    SignatureRequirements,
    VerificationPolicySpec,
)

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


class VerificationPolicy(Declaration):
    """A named artifact trust policy, referenced by ``spec.artifact.verification.policy``."""

    kind: Literal["VerificationPolicy"] = "VerificationPolicy"
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


class ApprovalPolicy(Declaration):
    """Who may approve plans, and how many distinct signers each kind of plan needs."""

    kind: Literal["ApprovalPolicy"] = "ApprovalPolicy"
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
