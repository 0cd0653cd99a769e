"""Which engine serves a database URL.

The CLI and ``seshat-runner op`` speak only to :class:`~runner.engines.core.Engine`; a
dialect package (``postgresql/``, ``sqlite/``, ``mysql/``) subclasses it with its hooks. To
add a dialect: a scheme in :data:`runner.url.ENGINES`, a package with an ``Engine``
subclass, and a branch here (imported lazily, so a runner loads one driver only).
"""

from __future__ import annotations

from typing import Any, Unpack

from runner.engines.core import Engine, EnginePolicy
from runner.errors import ConfigurationError
from runner.url import DatabaseURL

__all__ = ["SchemaEngine", "engine_for"]

SchemaEngine = Engine[Any, Any]
"""What every dialect's engine is."""


def engine_for(
    url: DatabaseURL, dev_url: DatabaseURL | None = None, **policy: Unpack[EnginePolicy]
) -> SchemaEngine:
    """The engine for ``url``'s engine (a parsed URL names only engines Seshat has), made
    with ``policy`` (:class:`~runner.engines.core.Engine`'s keywords, and its defaults)."""
    if dev_url is not None and dev_url.engine != url.engine:
        raise ConfigurationError(
            f"the dev database is {dev_url.engine}, the target is {url.engine}: they must match"
        )
    if url.engine == "postgresql":
        from runner.engines.postgresql.engine import PostgresEngine

        return PostgresEngine(url, dev_url, **policy)
    if url.engine == "sqlite":
        from runner.engines.sqlite.engine import SqliteEngine

        return SqliteEngine(url, dev_url, **policy)
    assert url.engine == "mysql", url.engine
    from runner.engines.mysql.engine import MysqlEngine

    return MysqlEngine(url, dev_url, **policy)
