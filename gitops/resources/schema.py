"""``DatabaseSchema``: a database converged toward a declared schema artifact."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from gitops.resources.base import Model, SchemaLockTimeout
from gitops.resources.database import (
    ApplyPolicy,
    DatabaseDeclaration,
    DatabaseSpec,
    OperationTimeouts,
    UrlReference,
)
from gitops.resources.status import DatabaseSchemaStatus

__all__ = [
    "DatabaseSchema",
    "DatabaseSchemaSpec",
    "DevDatabase",
    "DropPolicy",
    "SandboxIsolation",
    "SchemaPolicy",
]

TABLE_NAME = r"^[A-Za-z_][A-Za-z0-9_$]{0,62}(\.[A-Za-z_][A-Za-z0-9_$]{0,62})?$"
SchemaName = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""A PostgreSQL schema's name as the catalog holds it (case matters; no control characters)."""


class SchemaTransactionMode(StrEnum):
    """How a schema plan's statements are wrapped.

    ``auto`` runs the plan in one transaction where the engine's DDL is transactional and runs
    statements that cannot be in a transaction (``CREATE INDEX CONCURRENTLY``) outside it;
    ``all`` refuses a plan that cannot run as one transaction (and an engine whose DDL
    commits implicitly, MySQL/MariaDB: ``transaction_mode_unsupported``); ``none`` runs each
    statement on its own (SQLite refuses it: a table rebuild is only safe as one
    transaction).
    """

    AUTO = "auto"
    ALL = "all"
    NONE = "none"


class ImpactMode(StrEnum):
    """``off`` (nothing measured), ``estimate`` (exact counts on small tables, statistics
    on large ones) or ``exact`` (every count exact, each bounded by a statement timeout)."""

    OFF = "off"
    ESTIMATE = "estimate"
    EXACT = "exact"


class DropPolicy(StrEnum):
    """What a plan does with objects only the database has (docs/engine.md, "Skipping
    drops").

    ``Plan`` (the default) drops them, as the desired schema says (``allowDestructive``
    still decides whether a drop that loses rows may be planned); ``Skip`` leaves them
    alone, as sqldef's ``enable_drop: false`` and Atlas's skip-drop policy do: tables,
    columns, constraints, indexes, sequences, views, functions, triggers, policies, types,
    domains, extensions, row-level security and managed grants that only the database has
    are not removed, and the plan lists them as skipped. A drop that is part of changing an
    object the schema still declares (a view or index replaced) still happens.
    """

    PLAN = "Plan"
    SKIP = "Skip"


class SchemaPolicy(Model):
    """What a schema plan may do and when it is applied."""

    apply: ApplyPolicy = ApplyPolicy.ON_APPROVAL
    allow_destructive: bool = False
    protected_tables: Annotated[
        list[Annotated[str, Field(pattern=TABLE_NAME)]], Field(max_length=128)
    ] = Field(default_factory=list)
    exclude: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=128)
    ] = Field(default_factory=list)
    schemas: Annotated[list[SchemaName], Field(max_length=128)] = Field(default_factory=list)
    """PostgreSQL: manage only these schemas (empty: every schema)."""
    exclude_schemas: Annotated[list[SchemaName], Field(max_length=128)] = Field(
        default_factory=list
    )
    """PostgreSQL: leave these schemas and everything in them alone."""
    lock_timeout: SchemaLockTimeout = 30
    transaction_mode: SchemaTransactionMode = SchemaTransactionMode.AUTO
    managed_roles: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=63)]], Field(max_length=256)
    ] = Field(default_factory=list)
    """Roles whose privileges the schema manages (GRANT what is declared, REVOKE the rest;
    ``PUBLIC`` too); no role's by default. PostgreSQL; on MariaDB, accounts (``user@host``,
    ``app`` meaning ``app@%``)."""
    manage_ownership: bool = False
    """Plan ``ALTER ... OWNER TO`` for owners the schema declares. PostgreSQL only."""
    procedural_schema: bool = False
    """Let procedural statements of the desired schema run in the sandbox (DO blocks, CALL,
    queries, DML, CREATE TABLE AS, ...); by default a desired schema holds declarations
    only, and anything else is refused ``statement_not_declarative`` (docs/engine.md). The
    plan records it. A pull request that sets it is previewed without it: the opt-in counts
    once it is reviewed and merged."""
    drops: DropPolicy = DropPolicy.PLAN
    """What becomes of objects only the database has: ``Plan`` drops them, ``Skip`` leaves
    them alone and the plan lists them (:class:`DropPolicy`). Part of the policy digest and
    recorded in the plan when ``Skip``."""
    timeouts: OperationTimeouts = Field(default_factory=OperationTimeouts)
    """How long each operation may take (not part of the policy digest)."""
    impact: ImpactMode = ImpactMode.ESTIMATE
    """How a plan's impact checks measure the rows already there (docs/engine.md, "Impact");
    not part of the policy digest: figures are observations beside the plan, never in it."""


class SandboxIsolation(StrEnum):
    """How a private sandbox server is isolated from the host.

    ``jail`` (the default) runs it in an OS jail; ``none`` runs it without one, an
    operator's acceptance of the risk for trusted artifacts where no jail can be made. The
    plan records ``none``, and ``seshat status`` shows it (docs/engine.md, "Sandboxes").
    """

    JAIL = "jail"
    NONE = "none"


class DevDatabase(Model):
    """Where the desired schema is normalized: an explicit scratch database of the same
    engine (``url``), or the runner's private sandbox server and how it is isolated."""

    url: UrlReference | None = None
    isolation: SandboxIsolation = SandboxIsolation.JAIL


class DatabaseSchemaSpec(DatabaseSpec):
    """The declared state of one database's schema."""

    policy: SchemaPolicy = Field(default_factory=SchemaPolicy)
    dev: DevDatabase | None = None


class DatabaseSchema(DatabaseDeclaration):
    """A database whose schema Seshat converges to the artifact's DDL."""

    kind: Literal["DatabaseSchema"] = "DatabaseSchema"
    spec: DatabaseSchemaSpec
    status: DatabaseSchemaStatus | None = None
