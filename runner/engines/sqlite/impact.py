"""Impact checks on a SQLite target (:mod:`runner.engines.impact`): the file opened
read-only, every count bounded by a progress handler that interrupts it past the timeout.

SQLite has no privileges and no statistics the checks could use: counts are exact (in
``estimate`` mode too, under the size bound), sizes are the table's pages from the
``dbstat`` table where SQLite was built with it, else the whole file's.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

from runner.engines.impact import ReaderBase, TableFacts, TimedOut
from runner.engines.sqlite.sqltext import ident

__all__ = ["SqliteReader", "reader"]

_CATALOG_TIMEOUT_MS = 5_000


def _name(key: str) -> str:
    return key.split(":", 1)[1].split(".", 1)[1]


class SqliteReader(ReaderBase):
    def __init__(self, conn: sqlite3.Connection, timeout_ms: int) -> None:
        self.conn, self.timeout_ms, self.queries = conn, timeout_ms, 0

    def one(self, sql: str, params: tuple[object, ...] = (), timeout_ms: int = 0) -> Any:
        self.queries += 1
        ends = time.monotonic() + (timeout_ms or self.timeout_ms) / 1000
        self.conn.set_progress_handler(lambda: int(time.monotonic() > ends), 1000)
        try:
            return self.conn.execute(sql, params).fetchone()
        except sqlite3.OperationalError as error:
            if "interrupt" in str(error):
                raise TimedOut from None
            raise
        finally:
            self.conn.set_progress_handler(None, 0)

    def table(self, key: str) -> TableFacts | None:
        page = self.one("PRAGMA page_size")
        page_size = int(page[0]) if page else 4096
        try:
            row = self.one(
                "SELECT count(*) FROM dbstat WHERE name = ?", (_name(key),), _CATALOG_TIMEOUT_MS
            )
            pages = int(row[0]) if row else 0
        except (sqlite3.OperationalError, TimedOut):  # no dbstat, or too slow: the whole file
            row = self.one("PRAGMA page_count")
            pages = int(row[0]) if row else 0
        return TableFacts(bytes=pages * page_size, pages=pages, rows=None, readable=True)

    def name(self, key: str) -> str:
        return ident(_name(key))

    def quote(self, name: str) -> str:
        return ident(name)


@contextlib.contextmanager
def reader(conn: sqlite3.Connection, timeout_ms: int) -> Iterator[SqliteReader]:
    """A reader on ``conn`` (read-only), in one read transaction: one snapshot."""
    conn.execute("BEGIN")
    try:
        yield SqliteReader(conn, timeout_ms)
    finally:
        conn.execute("ROLLBACK")
