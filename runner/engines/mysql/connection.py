"""Connecting to MySQL or MariaDB, and the one place PyMySQL errors become Seshat errors.

The URL is ``mysql://user@host:port/db`` (or ``mariadb://``; ``?unix_socket=PATH`` for a
socket); the password comes from the URL or from ``MYSQL_PWD``. Every session uses utf8mb4
and autocommit: MySQL DDL commits implicitly anyway. No session asks for multi-statements
(``CLIENT.MULTI_STATEMENTS``): a text the server reads as two statements is an error, so
what runs is exactly what the desired schema's classifier saw (:mod:`runner.sql.classify`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import ssl
from collections.abc import Iterator
from typing import Any

import pymysql
from pymysql.constants import CLIENT

from runner.errors import CanNotRunError, ConfigurationError
from runner.url import DatabaseURL

__all__ = ["connect", "connection", "database_name", "error_text", "rows"]


def database_name(url: DatabaseURL) -> str:
    """The one database a MySQL URL names, or :class:`ConfigurationError`."""
    if not url.database or "/" in url.database:
        raise ConfigurationError("a MySQL URL must name one database: mysql://user@host:port/db")
    return url.database


def connect(url: DatabaseURL, database: str | None = None, *, env_password: bool = True) -> Any:
    """A session on ``url``'s server, using ``database`` (default: the URL's), connected
    from the parsed parts; the password comes from the URL or (``env_password``, the
    target's) ``MYSQL_PWD``."""
    socket = url.param("unix_socket")
    try:
        conn = _Session(
            host=url.host or "localhost",
            port=url.port or 3306,
            unix_socket=socket,
            user=url.user or "root",
            password=url.password or (os.environ.get("MYSQL_PWD", "") if env_password else ""),
            database=database_name(url) if database is None else database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=10,
            client_flag=0,
        )
    except pymysql.MySQLError as error:
        raise CanNotRunError(f"cannot connect to the database: {error_text(error)}") from None
    if conn.client_flag & CLIENT.MULTI_STATEMENTS:  # PyMySQL never adds it of its own accord
        conn.close()
        raise CanNotRunError("a MySQL session must not allow several statements per query")
    return conn


class _Session(pymysql.connections.Connection):  # type: ignore[misc]
    """PyMySQL's connection, with TLS "preferred" (no TLS option given: encrypted when the
    server offers it, its certificate not verified, as PyMySQL does it) from one context per
    process. PyMySQL builds a context per connection and loads the system's CA store into it,
    about 25 ms of CPU, for a context that verifies nothing; a plan opens several sessions."""

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if isinstance(sslp, dict) and not sslp:
            return _preferred_tls()
        return super()._create_ssl_ctx(sslp)


@functools.cache
def _preferred_tls() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@contextlib.contextmanager
def connection(
    url: DatabaseURL, database: str | None = None, *, env_password: bool = True
) -> Iterator[Any]:
    conn = connect(url, database, env_password=env_password)
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
