"""Connecting to PostgreSQL, and the one place psycopg errors become Seshat errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from runner.errors import CanNotRunError

__all__ = ["connect", "connection", "with_database"]

APPLICATION_NAME = "seshat-runner"


def connect(url: str, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A connection to ``url``; failures become :class:`CanNotRunError` without the URL."""
    try:
        return psycopg.connect(
            url, autocommit=autocommit, connect_timeout=10, application_name=APPLICATION_NAME
        )
    except psycopg.OperationalError as error:
        # The message names host and user but, from libpq, never the password; the caller's
        # redactor still scrubs it.
        raise CanNotRunError(f"cannot connect to the database: {str(error).strip()}") from None


def with_database(url: str, database: str) -> str:
    """``url`` pointing at another database on the same server, with the same credentials."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


@contextlib.contextmanager
def connection(url: str, *, autocommit: bool = True) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(url, autocommit=autocommit)
    try:
        yield conn
    finally:
        conn.close()
