"""What the private PostgreSQL and MariaDB servers have in common: URLs and database names.

Why shared: Seshat receives database credentials as URLs, so both harness
servers hand tests URLs built the same way (user and password percent-encoded,
so random passwords survive), and both name per-test databases the same way.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote


def database_url(
    scheme: str, host: str, port: int, user: str, dbname: str, password: str | None = None
) -> str:
    """``SCHEME://user[:password]@host:port/dbname``, user, password and name percent-encoded."""
    auth = quote(user, safe="")
    if password is not None:
        auth += ":" + quote(password, safe="")
    return f"{scheme}://{auth}@{host}:{port}/{quote(dbname, safe='')}"


def unique_database_name(prefix: str) -> str:
    """``PREFIX_<12 hex digits>``: unique per test, short enough for either server's limit."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"
