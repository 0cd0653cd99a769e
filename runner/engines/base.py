"""What every schema engine offers, and which engine serves a database URL.

The CLI and ``seshat-runner op`` speak only to :class:`SchemaEngine`; a dialect package
(``postgresql/``, ``sqlite/``, ``mysql/``) implements it with the shared model, differ,
ordering, hazards, policy and plan document, and only its own introspection, rendering,
scratch space and apply loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from runner.engines.model import Database
from runner.engines.plan import PlanDocument
from runner.engines.planner import PlanOptions
from runner.engines.report import ApplyReport
from runner.errors import ConfigurationError
from runner.url import DatabaseURL

__all__ = ["SchemaEngine", "engine_for"]


class SchemaEngine(Protocol):
    """One target database (and optionally an empty dev database to work in)."""

    dialect: str
    scratch_names: list[str]
    """Names of scratch databases or schemas this engine made: secrets, redacted from output."""

    def inspect(self, exclude: Sequence[str] = ()) -> Database: ...

    def plan(self, desired_path: Path, options: PlanOptions) -> PlanDocument: ...

    def apply(self, document: PlanDocument, *, lock_timeout_ms: int = 30_000) -> ApplyReport: ...

    def drift(self, desired_path: Path, exclude: Sequence[str] = ()) -> dict[str, object]: ...


def engine_for(url: DatabaseURL, dev_url: DatabaseURL | None = None) -> SchemaEngine:
    """The engine for ``url``'s engine (a parsed URL names only engines Seshat has)."""
    if dev_url is not None and dev_url.engine != url.engine:
        raise ConfigurationError(
            f"the dev database is {dev_url.engine}, the target is {url.engine}: they must match"
        )
    dialect = url.engine
    if dialect == "postgresql":
        from runner.engines.postgresql.engine import PostgresEngine

        return PostgresEngine(url, dev_url)
    if dialect == "sqlite":
        from runner.engines.sqlite.engine import SqliteEngine

        return SqliteEngine(url, dev_url)
    assert dialect == "mysql", dialect
    from runner.engines.mysql.engine import MysqlEngine

    return MysqlEngine(url, dev_url)
