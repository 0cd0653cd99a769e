"""Adopting an existing database: ``seshat-runner migrations baseline``.

A person (never the reconciler) runs it with two credentials: the live database and a
disposable, empty *shadow* database of the same engine. The files up to ``--to`` (default:
all) are applied to the shadow; the engine then inspects both, leaving the revision table
out, and compares them with its own differ. Only when nothing differs are those versions
recorded in the live history as applied (``operation_id`` ``baseline-…``), so the next
``status`` reads ``nothing_pending`` or lists only the later files. When anything differs,
nothing is recorded and the first differences are reported.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from runner.engines.base import engine_for
from runner.engines.changes import Change
from runner.engines.model import Database
from runner.engines.scope import Scope
from runner.errors import ConfigurationError
from runner.migrations.apply import MigrationRefused, apply_pending, runner_version
from runner.migrations.files import CHECKSUM_ALGORITHM, MigrationFile
from runner.migrations.history import HistoryRow
from runner.migrations.stores import TABLE, HistoryStore, now_text
from runner.models import wire_fields
from runner.url import DatabaseURL

__all__ = ["BaselineResult", "baseline"]

_HISTORY_TABLE = Scope(exclude=(TABLE, f"*.{TABLE}"))


@dataclass
class BaselineResult:
    matched: bool
    versions: list[str]
    operation_id: str
    differences: list[str] = field(default_factory=list)  # the first few, "op key"
    total_differences: int = 0

    def to_json(self) -> dict[str, object]:
        return wire_fields(self)


def _differ(dialect: str) -> Callable[[Database, Database], list[Change]]:
    if dialect == "mysql":
        from runner.engines.mysql.diff import diff as mysql_diff

        return mysql_diff
    if dialect == "sqlite":
        from runner.engines.sqlite.rebuild import sqlite_diff

        return sqlite_diff
    from runner.engines.diff import diff

    return diff


def baseline(
    live_url: DatabaseURL,
    live: HistoryStore,
    shadow_url: DatabaseURL,
    shadow: HistoryStore,
    files: list[MigrationFile],
    *,
    to: str | None = None,
) -> BaselineResult:
    """Replay ``files`` (up to version ``to``) into the shadow and record them in ``live``
    if the two schemas then match."""
    if to is not None and not any(f.version == to or f.number == int(to) for f in files):
        raise ConfigurationError(f"--to {to}: the directory has no such version")
    chosen = [f for f in files if not f.checkpoint and (to is None or f.number <= int(to))]
    if not chosen:
        raise ConfigurationError("the directory holds no migration files to baseline")
    if live.rows():
        raise MigrationRefused(
            "history_present", f"the live database already has rows in {TABLE}; nothing changed"
        )
    live_engine = engine_for(live_url)
    shadow_engine = engine_for(shadow_url)
    if live_engine.dialect != shadow_engine.dialect:
        raise ConfigurationError(
            f"the shadow is {shadow_engine.dialect}, the live database {live_engine.dialect}"
        )
    if shadow.rows() or shadow_engine.inspect(_HISTORY_TABLE).tables:
        raise MigrationRefused(
            "shadow_not_empty", "the shadow database must be empty (it is disposable)"
        )
    operation_id = f"baseline-{secrets.token_hex(8)}"
    _, report = apply_pending(shadow, chosen, operation_id=operation_id)
    if report.outcome != "Applied":
        raise MigrationRefused(
            "shadow_failed",
            f"version {report.failed} failed in the shadow at statement {report.statement}: "
            f"{report.error}",
        )
    wanted = shadow_engine.inspect(_HISTORY_TABLE)
    found = live_engine.inspect(_HISTORY_TABLE)
    differences = _differ(live_engine.dialect)(found, wanted)
    versions = [f.version for f in chosen]
    result = BaselineResult(
        matched=not differences,
        versions=versions,
        operation_id=operation_id,
        differences=[f"{c.op} {c.key}" for c in differences[:10]],
        total_differences=len(differences),
    )
    if differences:
        return result
    at = now_text()
    live.record(
        [
            HistoryRow(
                f.version,
                f.description,
                f.checksum,
                CHECKSUM_ALGORITHM,
                "applied",
                0,
                0,
                at,
                0,
                runner_version(),
                operation_id,
            )
            for f in chosen
        ]
    )
    return result
