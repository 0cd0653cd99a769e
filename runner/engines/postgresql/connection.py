"""Connecting to PostgreSQL, and the one place psycopg errors become Seshat errors.

The driver is given the parsed URL's parts as separate keywords, never the URL text, so it
cannot split a password differently than Seshat did (libpq would end the user information at
the first ``@``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg

from runner.errors import CanNotRunError
from runner.url import DatabaseURL

__all__ = ["connect", "connection", "libpq_keywords"]

APPLICATION_NAME = "seshat-runner"


def libpq_keywords(url: DatabaseURL) -> dict[str, str]:
    """``url`` as libpq connection keywords (only the parts it names)."""
    keywords = dict(url.params)
    for name, value in (
        ("host", url.host),
        ("port", str(url.port) if url.port is not None else ""),
        ("user", url.user),
        ("password", url.password),
        ("dbname", url.database),
    ):
        if value:
            keywords[name] = value
    return keywords


def connect(
    url: DatabaseURL, *, autocommit: bool = True, read_only: bool = False
) -> psycopg.Connection[Any]:
    """A connection to ``url``; failures become :class:`CanNotRunError` without the URL.

    ``read_only``: the session defaults to read-only transactions
    (``default_transaction_read_only``) and the connection reads in one
    ``REPEATABLE READ, READ ONLY`` transaction, so everything read is one snapshot and
    nothing can be written through it, whatever runs on it.
    """
    keywords: dict[str, Any] = {"connect_timeout": 10, "application_name": APPLICATION_NAME}
    keywords |= libpq_keywords(url)
    if read_only:
        options = keywords.get("options", "")
        keywords["options"] = f"{options} -c default_transaction_read_only=on".strip()
    try:
        conn = psycopg.connect(autocommit=autocommit and not read_only, **keywords)
    except psycopg.OperationalError as error:
        # The message names host and user but, from libpq, never the password; the caller's
        # redactor still scrubs it.
        raise CanNotRunError(f"cannot connect to the database: {str(error).strip()}") from None
    if read_only:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
    return conn


@contextlib.contextmanager
def connection(
    url: DatabaseURL, *, autocommit: bool = True, read_only: bool = False
) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(url, autocommit=autocommit, read_only=read_only)
    try:
        yield conn
    finally:
        conn.close()
