"""What a killed PostgreSQL session can leave behind that outlives it, found and named.

The server rolls back a killed session's open transaction by itself, so a schema Apply
killed midway leaves nothing to replay. One thing does outlive a session and change what a
plan would mean: a *prepared transaction* (``PREPARE TRANSACTION``: it keeps its locks and
its changes, neither committed nor rolled back, until someone decides). Seshat does not
decide it for anyone: each is named with the statements a person chooses between.

An *INVALID index* (a ``CREATE INDEX CONCURRENTLY`` or ``REINDEX CONCURRENTLY`` that
stopped) is no leftover of this kind: introspection reads it as invalid, drift counts it
(category ``invalid``) and the plan drops and builds it again, which a person approves like
any plan.
"""

from __future__ import annotations

import psycopg

from runner.engines.postgresql.quoting import literal

__all__ = ["leftovers"]

_PREPARED = """
SELECT gid, owner::text, prepared::text FROM pg_prepared_xacts
WHERE database = current_database() ORDER BY gid
"""


def leftovers(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    """Each prepared transaction of this database, named with what a person may do about
    it (at most 20)."""
    found: list[str] = []
    for gid, owner, prepared in conn.execute(_PREPARED).fetchall()[:20]:
        said = literal(str(gid))
        found.append(
            f"prepared transaction {said} (owner {owner}, prepared {prepared}) holds its locks "
            f"and changes: decide, then COMMIT PREPARED {said} or ROLLBACK PREPARED {said}"
        )
    return found
