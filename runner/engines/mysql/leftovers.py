"""What a killed MariaDB session can leave behind that outlives it, found and named.

The server rolls back a killed session's open transaction and releases its metadata locks by
itself, so a schema Apply or a migration killed midway leaves nothing to replay (what a
statement had committed stays; DDL commits implicitly). One thing does outlive a session: a
*prepared XA transaction* (``XA PREPARE``: since MariaDB 10.5 it keeps its locks and its
changes after its connection ends, neither committed nor rolled back, until someone decides).
``XA RECOVER`` lists them for the whole server and says nothing of the database they touch,
so each one found is named for every database of that server: Seshat does not decide it for
anyone, and does not guess that it is someone else's.
"""

from __future__ import annotations

from typing import Any

from runner.engines.mysql.connection import rows

__all__ = ["leftovers"]

MAX_NAMED = 20


def leftovers(conn: Any) -> list[str]:
    """Each prepared XA transaction on the server (at most :data:`MAX_NAMED`), named with
    the statements a person chooses between."""
    found: list[str] = []
    for row in rows(conn, "XA RECOVER FORMAT='SQL'")[:MAX_NAMED]:
        xid = str(row[3])
        found.append(
            f"prepared XA transaction {xid} on this server holds its locks and changes "
            f"(MariaDB does not say which database it touches): decide, then XA COMMIT {xid} "
            f"or XA ROLLBACK {xid}"
        )
    return found
