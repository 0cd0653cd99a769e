"""``DatabaseMigration``: a database advanced through a versioned migration directory."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from gitops.resources.base import MigrationLockTimeout, Model
from gitops.resources.database import (
    ApplyPolicy,
    DatabaseDeclaration,
    DatabaseSpec,
    OperationTimeouts,
)
from gitops.resources.status import DatabaseMigrationStatus

__all__ = ["DatabaseMigration", "DatabaseMigrationSpec", "MigrationPolicy"]


class MigrationTransactionMode(StrEnum):
    """``file``: each file in its own transaction unless it opts out; ``all``: every pending
    file in one transaction, all or nothing (refused where DDL commits implicitly,
    MySQL/MariaDB, and for a file that opts out of transactions); ``none``: never, each
    statement on its own with its progress recorded."""

    FILE = "file"
    ALL = "all"
    NONE = "none"


class MigrationPolicy(Model):
    """When pending migrations are applied and which histories are accepted."""

    apply: ApplyPolicy = ApplyPolicy.ON_APPROVAL
    transaction_mode: MigrationTransactionMode = MigrationTransactionMode.FILE
    out_of_order: bool = False
    lock_timeout: MigrationLockTimeout = 300
    timeouts: OperationTimeouts = Field(default_factory=OperationTimeouts)
    """How long each operation may take (not part of the policy digest)."""


class DatabaseMigrationSpec(DatabaseSpec):
    """The declared migration directory for one database."""

    policy: MigrationPolicy = Field(default_factory=MigrationPolicy)


class DatabaseMigration(DatabaseDeclaration):
    """A database whose recorded migration history Seshat advances."""

    kind: Literal["DatabaseMigration"] = "DatabaseMigration"
    spec: DatabaseMigrationSpec
    status: DatabaseMigrationStatus | None = None
