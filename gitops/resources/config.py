"""``Config``: the repository-level settings in ``seshat.yaml`` at the repository root.

The file is optional; without it every default below applies. ``paths`` are the folders whose
``.yaml``/``.yml`` files are declarations; every document found there must be a Seshat
resource, so a typo in ``kind`` or ``apiVersion`` is reported instead of ignored.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from gitops.resources.base import API_VERSION, Model, exactly_one, plain_path
from gitops.resources.database import ENV_NAME

__all__ = ["CommitIdentity", "CommitSettings", "Config", "ConfigSpec", "Reviews", "Signing"]

BRANCH = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$"
DEFAULT_PATHS = ("databases", "policies", "approvals", "acknowledgments")


class Forge(StrEnum):
    """Where review pull requests are opened; ``none`` pushes review branches only."""

    GITHUB = "github"
    NONE = "none"


class Reviews(Model):
    """Review pull requests for plans awaiting approval and for Blocked or Failed verdicts."""

    forge: Forge = Forge.NONE
    repository: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")] | None = None
    token_from_env: Annotated[str, Field(pattern=ENV_NAME)] | None = None
    api_url: Annotated[str, Field(pattern=r"^https?://[^\s]+$")] = "https://api.github.com"

    @model_validator(mode="after")
    def _forge_needs_repository(self) -> Self:
        if self.forge is not Forge.NONE and (
            self.repository is None or self.token_from_env is None
        ):
            raise PydanticCustomError(
                "reviews", "forge {forge} needs repository and tokenFromEnv", {"forge": self.forge}
            )
        return self


class CommitIdentity(Model):
    """The bot identity on status commits."""

    name: Annotated[str, Field(min_length=1, max_length=128)] = "seshat"
    email: Annotated[str, Field(pattern=r"^[^\s@<>]+@[^\s@<>]+$")] = "seshat@localhost"


class Signing(Model):
    """Optional signing of status commits with an SSH or GPG key held by the control plane."""

    format: Literal["ssh", "gpg"]
    key_from_env: Annotated[str, Field(pattern=ENV_NAME)] | None = None
    key_file: Annotated[str, Field(pattern=r"^/\S*$")] | None = None
    # SSH: an allowed-signers file in the repository listing earlier controller keys whose
    # signed records still count (the current key always does); see docs/security.md.
    verify_with: Annotated[str, Field(pattern=r"^[^/\s][^\s]*$", max_length=1024)] | None = None

    _one_key = exactly_one("signing", "key_from_env", "key_file")


class CommitSettings(Model):
    """How Seshat's own commits look."""

    author: CommitIdentity = Field(default_factory=CommitIdentity)
    signing: Signing | None = None


class ConfigSpec(Model):
    """Repository settings."""

    branch: Annotated[str, Field(pattern=BRANCH)] = "main"
    paths: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(plain_path)]],
        Field(min_length=1, max_length=64),
    ] = Field(default_factory=lambda: list(DEFAULT_PATHS))
    status_branch: Annotated[str, Field(pattern=BRANCH)] = "seshat/status"
    reviews: Reviews = Field(default_factory=Reviews)
    commit: CommitSettings = Field(default_factory=CommitSettings)

    @model_validator(mode="after")
    def _distinct_branches(self) -> Self:
        if self.branch == self.status_branch:
            raise PydanticCustomError(
                "branches", "statusBranch must differ from the watched branch"
            )
        return self


class Config(Model):
    """The contents of ``seshat.yaml``."""

    api_version: Literal["seshat.dev/v1alpha1"] = API_VERSION
    kind: Literal["Config"] = "Config"
    spec: ConfigSpec = Field(default_factory=ConfigSpec)
