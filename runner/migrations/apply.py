"""Applying the pending sequence, under the lock, exactly as approved.

The history is read again under the lock; if its verdict blocks, or the pending sequence is
not the one expected (versions and checksums, in order), nothing is changed. Then each file
runs as the transaction mode says (docs/operations.md, "Transaction mode"):

* ``file`` (the default): transactional files with their history row in one transaction,
  ``no-transaction`` ones statement by statement;
* ``all``: every pending file and its row in one transaction: a failure anywhere rolls back
  every file of the run. Refused (``transaction_mode_unsupported``) before anything runs
  where DDL commits implicitly (MySQL/MariaDB) or when a pending file opts out of
  transactions;
* ``none``: every file statement by statement, its progress recorded.

Outcomes:

* ``UpToDate``: nothing was pending;
* ``Applied``: every pending file applied;
* ``Failed``: a file failed and nothing of it was committed (earlier files stay applied,
  except in ``all`` mode, where nothing of the run was committed);
* ``Partial``: a file run statement by statement (``no-transaction``, or any file on
  MySQL/MariaDB, whose DDL commits implicitly) failed after some of its statements ran.

A runner killed midway leaves no report at all; the control plane records that run as
``Unknown``.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from runner.errors import SeshatError
from runner.migrations.files import CHECKSUM_ALGORITHM, MigrationFile
from runner.migrations.history import HistoryRow, Verdict, judge
from runner.migrations.stores import HistoryStore, StatementFailed, now_text
from runner.protocol.results import MigrateReport

__all__ = [
    "MigrationRefused",
    "apply_pending",
    "check_mode",
    "statements_of",
]


class MigrationRefused(SeshatError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason, self.message = reason, message


def runner_version() -> str:
    try:
        return version("seshat")
    except PackageNotFoundError:
        return "unknown"


def statements_of(dialect: str, migration: MigrationFile) -> list[str]:
    if dialect == "postgresql":
        from runner.sql.split import split_postgresql

        return [piece.sql for piece in split_postgresql(migration.text)]
    if dialect == "mysql":
        from runner.sql.split_mysql import split_mysql

        return [piece.sql for piece in split_mysql(migration.text)]
    from runner.engines.sqlite.sqltext import split_script

    return [sql for _, sql in split_script(migration.text)]


def check_mode(store: HistoryStore, mode: str, pending: Sequence[MigrationFile]) -> None:
    """Refuse a transaction mode the database or the pending files cannot honour."""
    if mode != "all":
        return
    if not store.transactional_ddl:
        raise MigrationRefused(
            "transaction_mode_unsupported",
            f"transactionMode all needs transactional DDL; {store.dialect} commits every DDL "
            "statement on its own, so a run cannot be all or nothing (use file or none)",
        )
    opted_out = [f.name for f in pending if not f.transactional]
    if opted_out:
        raise MigrationRefused(
            "transaction_mode_unsupported",
            f"transactionMode all runs every file in one transaction, and "
            f"{', '.join(opted_out)} opts out of transactions (-- seshat:no-transaction)",
        )


def apply_pending(
    store: HistoryStore,
    files: list[MigrationFile],
    *,
    operation_id: str,
    expected: Sequence[tuple[str, str]] | None = None,
    allow_out_of_order: bool = False,
    mode: str = "file",
) -> tuple[Verdict, MigrateReport]:
    with store.lock():
        verdict = judge(files, store.rows(), allow_out_of_order=allow_out_of_order)
        if verdict.blocking:
            raise MigrationRefused(verdict.kind, verdict.detail)
        pending = [(f.version, f.checksum) for f in verdict.pending_files]
        if expected is not None and pending != list(expected):
            raise MigrationRefused(
                "history_moved",
                f"pending is now {[v for v, _ in pending]}, the approved sequence was "
                f"{[v for v, _ in expected]}; nothing was changed",
            )
        check_mode(store, mode, verdict.pending_files)
        if mode != "all":
            return verdict, _run_files(store, verdict, operation_id, mode)
        report = MigrateReport(outcome="UpToDate")
        try:
            with store.all_or_nothing():
                report = _run_files(store, verdict, operation_id, mode)
                if report.failed is not None:
                    raise _RollBack
        except _RollBack:
            report = report.model_copy(update={"applied": []})  # the whole run rolled back
        return verdict, report


class _RollBack(Exception):
    """Ends an ``all`` run's transaction with a rollback (a file of it failed)."""


def _run_files(
    store: HistoryStore, verdict: Verdict, operation_id: str, mode: str
) -> MigrateReport:
    """Run the pending files in order; the report says how far they got."""
    applied: list[str] = []
    for migration in verdict.pending_files:
        statements = statements_of(store.dialect, migration)
        atomic = migration.transactional and store.transactional_ddl and mode != "none"
        row = HistoryRow(
            migration.version,
            migration.description,
            migration.checksum,
            CHECKSUM_ALGORITHM,
            "applied" if atomic else "running",
            len(statements) if atomic else 0,
            len(statements),
            now_text(),
            0,
            runner_version(),
            operation_id,
        )
        try:
            if atomic:
                store.run_transactional(statements, row)
            else:
                store.run_stepwise(statements, row)
        except StatementFailed as failure:
            return MigrateReport(
                outcome="Partial" if not atomic and failure.index > 0 else "Failed",
                applied=applied,
                failed=migration.version,
                statement=failure.index + 1,
                statements_applied=0 if atomic else failure.index,
                error=failure.error,
            )
        applied.append(migration.version)
    return MigrateReport(outcome="Applied" if applied else "UpToDate", applied=applied)
