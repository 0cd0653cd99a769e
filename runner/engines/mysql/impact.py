"""Impact checks on a MySQL or MariaDB target (:mod:`runner.engines.impact`): one session
in a read-only transaction with a consistent snapshot, each query bounded by the server's
statement limit (MariaDB's ``max_statement_time``, MySQL's ``max_execution_time``).

Sizes and estimated rows come from ``information_schema.TABLES`` (``DATA_LENGTH``,
``TABLE_ROWS``: an estimate for InnoDB) and the page size from ``@@innodb_page_size``;
whether the credential may read a table is asked with ``SELECT ... LIMIT 0``, which reads
no row. Names are bound as parameters in catalog queries and backquoted
(:func:`~runner.engines.mysql.quoting.ident`) in counting queries.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pymysql

from runner.engines.impact import ReaderBase, TableFacts, TimedOut, Unreadable
from runner.engines.mysql.connection import connection, database_name
from runner.engines.mysql.quoting import ident, literal
from runner.url import DatabaseURL

__all__ = ["MySQLReader", "reader"]

_TIMED_OUT = frozenset({1969, 3024, 1317})  # MariaDB's and MySQL's limits, an interruption
_DENIED = frozenset({1142, 1143, 1044})
_LENGTH = re.compile(r"^(?:var)?char\((\d+)\)")
_INTEGERS = {
    "tinyint": 8,
    "smallint": 16,
    "mediumint": 24,
    "int": 32,
    "bigint": 64,
}
_INTEGER = re.compile(r"^(tinyint|smallint|mediumint|int|bigint)(?:\(\d+\))?( unsigned)?")
_ENUM = re.compile(r"^enum\((.*)\)$", re.DOTALL)
_LABEL = re.compile(r"'((?:[^'\\]|''|\\.)*)'")


def _name(key: str) -> str:
    return key.split(":", 1)[1].split(".", 1)[1]


class MySQLReader(ReaderBase):
    implicit_defaults = True

    def __init__(self, conn: Any, database: str, timeout_ms: int, mariadb: bool) -> None:
        self.conn, self.database, self.queries = conn, database, 0
        self.timeout_ms, self.mariadb = timeout_ms, mariadb

    def one(self, sql: str, params: tuple[object, ...] = (), bounded: bool = True) -> Any:
        self.queries += 1
        if bounded and self.mariadb:
            sql = f"SET STATEMENT max_statement_time = {self.timeout_ms / 1000:.3f} FOR {sql}"
        elif bounded:
            sql = sql.replace("SELECT", f"SELECT /*+ MAX_EXECUTION_TIME({self.timeout_ms}) */", 1)
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, params or None)
                return cur.fetchone()
        except pymysql.MySQLError as error:
            code = error.args[0] if error.args else 0
            if code in _TIMED_OUT:
                raise TimedOut from None
            if code in _DENIED:
                raise Unreadable from None
            raise

    def table(self, key: str) -> TableFacts | None:
        row = self.one(
            "SELECT DATA_LENGTH, TABLE_ROWS, @@innodb_page_size FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (self.database, _name(key)),
            bounded=False,
        )
        if row is None:
            return None
        size, rows, page = int(row[0] or 0), row[1], int(row[2] or 16384)
        try:
            self.one(f"SELECT 1 FROM {self.name(key)} LIMIT 0", bounded=False)
            readable = True
        except Unreadable:
            readable = False
        return TableFacts(
            bytes=size,
            pages=size // page,
            rows=None if rows is None else int(rows),
            readable=readable,
        )

    def name(self, key: str) -> str:
        return ident(_name(key))

    def quote(self, name: str) -> str:
        return ident(name)

    def misfit_condition(self, column: str, old: str, new: str) -> str | None:
        length = _LENGTH.match(new)
        if length is not None and old.startswith(("varchar", "char", "text", "tinytext")):
            return f"CHAR_LENGTH({column}) > {int(length.group(1))}"
        found = _INTEGER.match(new)
        if found is not None and _INTEGER.match(old):
            bits = _INTEGERS[found.group(1)]
            low, high = (
                (0, 2**bits - 1) if found.group(2) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
            )
            return f"{column} NOT BETWEEN {low} AND {high}"
        enum = _ENUM.match(new)
        if enum is not None:  # a value no label of the new enum spells is not kept
            labels = [
                label.replace("''", "'").replace("\\\\", "\\")
                for label in _LABEL.findall(enum.group(1))
            ]
            listed = ", ".join(literal(label) for label in labels)
            return f"CAST({column} AS CHAR) NOT IN ({listed})" if labels else None
        return None


@contextlib.contextmanager
def reader(url: DatabaseURL, timeout_ms: int) -> Iterator[MySQLReader]:
    """A reader on ``url``: a read-only transaction, one consistent snapshot."""
    with connection(url) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        try:
            yield MySQLReader(conn, database_name(url), timeout_ms, mariadb)
        finally:
            with contextlib.suppress(pymysql.MySQLError):
                conn.rollback()
