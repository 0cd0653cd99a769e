"""``DatabaseMigration``: a database advanced through a versioned migration directory."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from gitops.resources.base import MigrationLockTimeout, Model
from gitops.resources.database import ApplyPolicy, DatabaseDeclaration, DatabaseSpec
from gitops.resources.status import DatabaseMigrationStatus

__all__ = ["DatabaseMigration", "DatabaseMigrationSpec", "MigrationPolicy"]


class MigrationTransactionMode(StrEnum):
    """``file``: each file in its own transaction unless it opts out; ``none``: never."""

    FILE = "file"
    NONE = "none"


class MigrationPolicy(Model):
    """When pending migrations are applied and which histories are accepted."""

    apply: ApplyPolicy = ApplyPolicy.ON_APPROVAL
    transaction_mode: MigrationTransactionMode = MigrationTransactionMode.FILE
    out_of_order: bool = False
    lock_timeout: MigrationLockTimeout = 300


class DatabaseMigrationSpec(DatabaseSpec):
    """The declared migration directory for one database."""

    policy: MigrationPolicy = Field(default_factory=MigrationPolicy)


class DatabaseMigration(DatabaseDeclaration):
    """A database whose recorded migration history Seshat advances."""

    kind: Literal["DatabaseMigration"] = "DatabaseMigration"
    spec: DatabaseMigrationSpec
    status: DatabaseMigrationStatus | None = None
