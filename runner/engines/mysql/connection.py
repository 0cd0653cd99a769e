"""Connecting to MySQL or MariaDB, and the one place PyMySQL errors become Seshat errors.

The URL is ``mysql://user@host:port/db`` (or ``mariadb://``); the password comes from the
URL or from ``MYSQL_PWD``. Every session uses utf8mb4 and autocommit: MySQL DDL commits
implicitly anyway.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pymysql

from runner.errors import CanNotRunError, ConfigurationError

__all__ = ["Target", "connect", "connection", "error_text", "parse_url", "rows"]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a MySQL URL points."""

    host: str
    port: int
    user: str
    password: str
    database: str


def parse_url(url: str) -> Target:
    """The parts of ``mysql://user[:password]@host[:port]/db``."""
    parts = urlsplit(url)
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise ConfigurationError("a MySQL URL must name one database: mysql://user@host:port/db")
    password = unquote(parts.password) if parts.password else os.environ.get("MYSQL_PWD", "")
    return Target(
        host=parts.hostname or "localhost",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        password=password,
        database=database,
    )


def connect(url: str, database: str | None = None) -> Any:
    """A session on ``url``'s server, using ``database`` (default: the URL's)."""
    target = parse_url(url)
    try:
        return pymysql.connect(
            host=target.host,
            port=target.port,
            user=target.user,
            password=target.password,
            database=target.database if database is None else database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=10,
        )
    except pymysql.MySQLError as error:
        raise CanNotRunError(f"cannot connect to the database: {error_text(error)}") from None


@contextlib.contextmanager
def connection(url: str, database: str | None = None) -> Iterator[Any]:
    conn = connect(url, database)
    try:
        yield conn
    finally:
        with contextlib.suppress(pymysql.MySQLError):
            conn.close()


def error_text(error: BaseException) -> str:
    """The server's message without the error number tuple."""
    args: tuple[object, ...] = tuple(getattr(error, "args", ()))
    if len(args) >= 2 and isinstance(args[1], str):
        return args[1]
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def rows(conn: Any, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())
