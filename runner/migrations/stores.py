"""Where each dialect keeps the revision table, and how it runs a file.

The table ``seshat_schema_migrations`` is created on the first apply. A transactional file
runs with its history row in the same transaction, so either both are committed or neither
is. A ``no-transaction`` file first records a ``running`` row, then runs statement by
statement, counting progress in the row, and ends ``applied`` (or ``failed`` with the count
of statements that did run). A file whose first statement fails leaves no row: nothing of
it ran.

MySQL and MariaDB commit every DDL statement implicitly, so there every file runs statement
by statement with its progress recorded (``transactional_ddl = False``): a failure after the
first statement is a ``Partial`` run, never silently rolled back.
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

from runner.engines.report import StatementFailed
from runner.errors import CanNotRunError
from runner.migrations.history import HistoryRow
from runner.url import DatabaseURL

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


class HistoryStore(Protocol):
    dialect: str
    transactional_ddl: bool

    def rows(self) -> list[HistoryRow]: ...
    def lock(self) -> contextlib.AbstractContextManager[None]: ...
    def run_transactional(self, statements: list[str], row: HistoryRow) -> None: ...
    def run_stepwise(self, statements: list[str], row: HistoryRow) -> None: ...
    def all_or_nothing(self) -> contextlib.AbstractContextManager[None]: ...
    def record(self, rows: list[HistoryRow]) -> None: ...
    def mark(self, version: str, state: str | None) -> bool: ...
    def close(self) -> None: ...


class _Store:
    """What every dialect's store shares: running a file (a dialect supplies how one
    statement runs, :meth:`_run`), and writing rows directly (a baseline's rows, and a
    person settling a dirty row)."""

    marker = "%s"

    def _exec(self, sql: str, params: tuple[object, ...] = ()) -> int:
        raise NotImplementedError

    def _run(self, index: int, sql: str) -> None:
        """Run statement ``index`` of a file; its failure is :class:`StatementFailed`."""
        raise NotImplementedError

    def _insert(self, row: HistoryRow) -> None:
        marks = ", ".join([self.marker] * 11)
        self._exec(f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES ({marks})", _values(row))

    def _run_then_record(self, statements: list[str], row: HistoryRow) -> None:
        """A transactional file's body (the caller holds the transaction): the statements,
        then the row with how long they took."""
        self._exec(_CREATE)
        started = time.monotonic()
        for index, sql in enumerate(statements):
            self._run(index, sql)
        self._insert(replace(row, execution_ms=_ms_since(started)))

    def all_or_nothing(self) -> contextlib.AbstractContextManager[None]:
        """One transaction around a whole run (``transactionMode: all``): each file's own
        transaction nests in it, and an exception rolls back every file. Only dialects with
        transactional DDL have one (the caller checks ``transactional_ddl`` first)."""
        raise CanNotRunError("this database cannot run migrations all or nothing")

    def run_stepwise(self, statements: list[str], row: HistoryRow) -> None:
        """The row first (``running``), then each statement with the count of those done;
        a failure ends the row as :func:`_ended_sql` says."""
        self._exec(_CREATE)
        started = time.monotonic()
        self._insert(row)
        for index, sql in enumerate(statements):
            try:
                self._run(index, sql)
            except StatementFailed:
                self._exec(*_ended_sql(index, row.version, self.marker))
                raise
            self._exec(
                f"UPDATE {TABLE} SET statements_applied = {self.marker}"
                f" WHERE version = {self.marker}",
                (index + 1, row.version),
            )
        self._applied(row.version, _ms_since(started))

    def _applied(self, version: str, execution_ms: int) -> None:
        """End a stepwise file's row ``applied`` (its ``execution_ms`` stays as written)."""
        self._exec(
            f"UPDATE {TABLE} SET state = 'applied' WHERE version = {self.marker}", (version,)
        )

    def record(self, rows: list[HistoryRow]) -> None:
        self._exec(_CREATE)
        for row in rows:
            self._insert(row)

    def mark(self, version: str, state: str | None) -> bool:
        """Set ``version``'s row to ``applied``, or delete it (``None``); whether it existed."""
        if state is None:
            return self._exec(f"DELETE FROM {TABLE} WHERE version = {self.marker}", (version,)) > 0
        return (
            self._exec(
                f"UPDATE {TABLE} SET state = {self.marker}, statements_applied = statements_total"
                f" WHERE version = {self.marker}",
                (state, version),
            )
            > 0
        )


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


def _ended_sql(index: int, version: str, marker: str) -> tuple[str, tuple[str]]:
    """How a stepwise file's row ends when statement ``index`` failed: removed when nothing
    ran, ``failed`` (with its progress) otherwise."""
    if index == 0:
        return f"DELETE FROM {TABLE} WHERE version = {marker}", (version,)
    return f"UPDATE {TABLE} SET state = 'failed' WHERE version = {marker}", (version,)


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class SqliteStore(_Store):
    dialect = "sqlite"
    transactional_ddl = True
    marker = "?"

    def __init__(self, url: DatabaseURL) -> None:
        from runner.engines.sqlite.engine import database_path

        path: Path = database_path(url)
        if not path.is_file():
            raise CanNotRunError(f"{path}: no such SQLite database file")
        self.conn = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=rw", uri=True, isolation_level=None, timeout=30
        )

    def close(self) -> None:
        self.conn.close()

    def _exec(self, sql: str, params: tuple[object, ...] = ()) -> int:
        return self.conn.execute(sql, params).rowcount

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

    def _run(self, index: int, sql: str) -> None:
        try:
            self.conn.execute(sql)
        except sqlite3.Error as error:
            raise StatementFailed(index, str(error)) from None

    def run_transactional(self, statements: list[str], row: HistoryRow) -> None:
        with self._atomic():
            self._run_then_record(statements, row)

    def all_or_nothing(self) -> contextlib.AbstractContextManager[None]:
        return self._atomic()

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        """A transaction under SQLite's write lock, or, inside one (``all_or_nothing``), a
        savepoint of it: kept whole when the body returns, undone when it raises."""
        nested = self.conn.in_transaction
        self.conn.execute("SAVEPOINT seshat_file" if nested else "BEGIN IMMEDIATE")
        try:
            yield
            self.conn.execute("RELEASE seshat_file" if nested else "COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK TO seshat_file" if nested else "ROLLBACK")
            if nested:
                self.conn.execute("RELEASE seshat_file")
            raise


class PostgresStore(_Store):
    dialect = "postgresql"
    transactional_ddl = True

    def __init__(self, url: DatabaseURL) -> None:
        from runner.engines.postgresql.connection import connect

        self.conn = connect(url, autocommit=True)

    def close(self) -> None:
        self.conn.close()

    def _exec(self, sql: str, params: tuple[object, ...] = ()) -> int:
        return self.conn.execute(sql.encode("utf-8"), params).rowcount

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

    def _run(self, index: int, sql: str) -> None:
        import psycopg

        try:
            self.conn.execute(sql.encode("utf-8"))
        except psycopg.Error as error:
            raise StatementFailed(index, _pg_error(error)) from None

    def run_transactional(self, statements: list[str], row: HistoryRow) -> None:
        with self.conn.transaction():  # inside all_or_nothing: a savepoint of it
            self._run_then_record(statements, row)

    @contextlib.contextmanager
    def all_or_nothing(self) -> Iterator[None]:
        with self.conn.transaction():
            yield


def _pg_error(error: Exception) -> str:
    diag = getattr(error, "diag", None)
    primary = getattr(diag, "message_primary", None)
    return str(primary or str(error).strip().splitlines()[0])


class MysqlStore(_Store):
    dialect = "mysql"
    transactional_ddl = False

    def __init__(self, url: DatabaseURL, lock_timeout_s: int = 30) -> None:
        from runner.engines.mysql.connection import connect, database_name

        self.database = database_name(url)
        self.lock_timeout_s = lock_timeout_s
        self.conn = connect(url)

    def close(self) -> None:
        self.conn.close()

    def _execute(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        from runner.engines.mysql.connection import rows

        return rows(self.conn, sql, args)

    def _exec(self, sql: str, params: tuple[object, ...] = ()) -> int:
        with self.conn.cursor() as cur:
            return int(cur.execute(sql, params))

    def rows(self) -> list[HistoryRow]:
        exists = self._execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE()"
            " AND table_name = %s",
            (TABLE,),
        )
        if not exists:
            return []
        return [_row(r) for r in self._execute(f"SELECT {_COLUMNS} FROM {TABLE}")]

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        from runner.engines.mysql.engine import lock_name

        name = lock_name(self.database)  # the same lock a schema Apply of this database takes
        got = self._execute("SELECT GET_LOCK(%s, %s)", (name, self.lock_timeout_s))
        if not got or got[0][0] != 1:
            raise CanNotRunError(
                f"another session holds the database's lock; waited {self.lock_timeout_s} s"
            )
        try:
            yield
        finally:
            self._execute("SELECT RELEASE_LOCK(%s)", (name,))

    def run_transactional(self, statements: list[str], row: HistoryRow) -> None:
        self.run_stepwise(statements, row)  # DDL commits implicitly: progress is the record

    def _run(self, index: int, sql: str) -> None:
        import pymysql

        from runner.engines.mysql.connection import error_text

        try:
            self._execute(sql)
        except pymysql.MySQLError as error:
            raise StatementFailed(index, error_text(error)) from None

    def _applied(self, version: str, execution_ms: int) -> None:
        """End the row ``applied`` with how long the file took: here every file runs
        statement by statement, so this is where a file's time is kept."""
        self._exec(
            f"UPDATE {TABLE} SET state = 'applied', execution_ms = %s WHERE version = %s",
            (execution_ms, version),
        )


def open_store(url: DatabaseURL, lock_timeout_s: int = 30) -> HistoryStore:
    if url.engine == "sqlite":
        return SqliteStore(url)
    if url.engine == "postgresql":
        return PostgresStore(url)
    if url.engine == "mysql":
        return MysqlStore(url, lock_timeout_s)
    raise CanNotRunError(f"migrations are not supported for {url.scheme}:// targets")
