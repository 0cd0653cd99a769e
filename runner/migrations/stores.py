"""Where each dialect keeps the revision table, and how it runs a file.

The table ``seshat_schema_migrations`` is created on the first apply. A transactional file
runs with its history row in the same transaction, so either both are committed or neither
is. A ``no-transaction`` file first records a ``running`` row, then runs statement by
statement, counting progress in the row, and ends ``applied`` (or ``failed`` with the count
of statements that did run).
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from runner.errors import CanNotRunError
from runner.migrations.history import HistoryRow

__all__ = ["TABLE", "HistoryStore", "StatementFailed", "open_store"]

TABLE = "seshat_schema_migrations"
_COLUMNS = (
    "version, description, checksum, algorithm, state, statements_applied, statements_total,"
    " applied_at, execution_ms, runner_version, operation_id"
)
_CREATE = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    version VARCHAR(32) PRIMARY KEY,
    description VARCHAR(512) NOT NULL,
    checksum VARCHAR(80) NOT NULL,
    algorithm VARCHAR(32) NOT NULL,
    state VARCHAR(16) NOT NULL,
    statements_applied INTEGER NOT NULL,
    statements_total INTEGER NOT NULL,
    applied_at VARCHAR(32) NOT NULL,
    execution_ms INTEGER NOT NULL,
    runner_version VARCHAR(32) NOT NULL,
    operation_id VARCHAR(128) NOT NULL
)"""
_LOCK_KEY = int.from_bytes(hashlib.sha256(b"seshat-migrations").digest()[:8], "big", signed=True)


class StatementFailed(Exception):
    def __init__(self, index: int, error: str) -> None:
        super().__init__(error)
        self.index, self.error = index, error


class HistoryStore(Protocol):
    dialect: str

    def rows(self) -> list[HistoryRow]: ...
    def lock(self) -> contextlib.AbstractContextManager[None]: ...
    def run_transactional(self, statements: list[str], row: HistoryRow) -> None: ...
    def run_stepwise(self, statements: list[str], row: HistoryRow) -> None: ...
    def close(self) -> None: ...


def _row(values: tuple[Any, ...]) -> HistoryRow:
    (version, description, checksum, algorithm, state, done, total, at, ms, runner, op) = values
    return HistoryRow(
        str(version),
        str(description),
        str(checksum),
        str(algorithm),
        str(state),
        int(done),
        int(total),
        str(at),
        int(ms),
        str(runner),
        str(op),
    )


def _values(row: HistoryRow) -> tuple[object, ...]:
    return (
        row.version,
        row.description,
        row.checksum,
        row.algorithm,
        row.state,
        row.statements_applied,
        row.statements_total,
        row.applied_at,
        row.execution_ms,
        row.runner_version,
        row.operation_id,
    )


def now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class SqliteStore:
    dialect = "sqlite"

    def __init__(self, url: str) -> None:
        from runner.engines.sqlite.engine import database_path

        path: Path = database_path(url)
        if not path.is_file():
            raise CanNotRunError(f"{path}: no such SQLite database file")
        self.conn = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=rw", uri=True, isolation_level=None, timeout=30
        )

    def close(self) -> None:
        self.conn.close()

    def rows(self) -> list[HistoryRow]:
        exists = self.conn.execute(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", (TABLE,)
        ).fetchone()
        if not exists:
            return []
        return [_row(r) for r in self.conn.execute(f"SELECT {_COLUMNS} FROM {TABLE}")]

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        yield  # each file's transaction takes SQLite's write lock (BEGIN IMMEDIATE)

    def run_transactional(self, statements: list[str], row: HistoryRow) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute(_CREATE)
            started = time.monotonic()
            for index, sql in enumerate(statements):
                try:
                    self.conn.execute(sql)
                except sqlite3.Error as error:
                    raise StatementFailed(index, str(error)) from None
            row = replace(row, execution_ms=int((time.monotonic() - started) * 1000))
            self.conn.execute(
                f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES ({', '.join('?' * 11)})", _values(row)
            )
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def run_stepwise(self, statements: list[str], row: HistoryRow) -> None:
        self.conn.execute(_CREATE)
        self.conn.execute(
            f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES ({', '.join('?' * 11)})", _values(row)
        )
        for index, sql in enumerate(statements):
            try:
                self.conn.execute(sql)
            except sqlite3.Error as error:
                self.conn.execute(
                    f"UPDATE {TABLE} SET state = 'failed' WHERE version = ?", (row.version,)
                )
                raise StatementFailed(index, str(error)) from None
            self.conn.execute(
                f"UPDATE {TABLE} SET statements_applied = ? WHERE version = ?",
                (index + 1, row.version),
            )
        self.conn.execute(f"UPDATE {TABLE} SET state = 'applied' WHERE version = ?", (row.version,))


class PostgresStore:
    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        from runner.engines.postgresql.connection import connect

        self.conn = connect(url, autocommit=True)

    def close(self) -> None:
        self.conn.close()

    def rows(self) -> list[HistoryRow]:
        exists = self.conn.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone()
        if exists is None or exists[0] is None:
            return []
        return [_row(r) for r in self.conn.execute(f"SELECT {_COLUMNS} FROM {TABLE}")]

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        self.conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            yield
        finally:
            self.conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))

    def run_transactional(self, statements: list[str], row: HistoryRow) -> None:
        import psycopg

        with self.conn.transaction():
            self.conn.execute(_CREATE)
            started = time.monotonic()
            for index, sql in enumerate(statements):
                try:
                    self.conn.execute(sql.encode("utf-8"))
                except psycopg.Error as error:
                    raise StatementFailed(index, _pg_error(error)) from None
            row = replace(row, execution_ms=int((time.monotonic() - started) * 1000))
            self.conn.execute(
                f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES ({', '.join(['%s'] * 11)})",
                _values(row),
            )

    def run_stepwise(self, statements: list[str], row: HistoryRow) -> None:
        import psycopg

        self.conn.execute(_CREATE)
        self.conn.execute(
            f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES ({', '.join(['%s'] * 11)})", _values(row)
        )
        for index, sql in enumerate(statements):
            try:
                self.conn.execute(sql.encode("utf-8"))
            except psycopg.Error as error:
                self.conn.execute(
                    f"UPDATE {TABLE} SET state = 'failed' WHERE version = %s", (row.version,)
                )
                raise StatementFailed(index, _pg_error(error)) from None
            self.conn.execute(
                f"UPDATE {TABLE} SET statements_applied = %s WHERE version = %s",
                (index + 1, row.version),
            )
        self.conn.execute(
            f"UPDATE {TABLE} SET state = 'applied' WHERE version = %s", (row.version,)
        )


def _pg_error(error: Exception) -> str:
    diag = getattr(error, "diag", None)
    primary = getattr(diag, "message_primary", None)
    return str(primary or str(error).strip().splitlines()[0])


def open_store(url: str) -> HistoryStore:
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        return SqliteStore(url)
    if scheme in ("postgresql", "postgres"):
        return PostgresStore(url)
    raise CanNotRunError(f"migrations are not supported for {scheme}:// targets yet")
