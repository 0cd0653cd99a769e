"""What a killed PostgreSQL session can leave behind that outlives it, found and named.

The server rolls back a killed session's open transaction by itself, so a schema Apply
killed midway leaves nothing to replay. Two things do outlive a session and change what a
plan would mean: a *prepared transaction* (``PREPARE TRANSACTION``: it keeps its locks and
its changes, neither committed nor rolled back, until someone decides), and an *INVALID
index* (a ``CREATE INDEX CONCURRENTLY`` or ``REINDEX CONCURRENTLY`` that stopped: it has a
name and a definition, so a reading would take it for a built index, but no query uses
it). Seshat does not decide either for anyone: each is named with the statements a person
chooses between.
"""

from __future__ import annotations

import psycopg

from runner.engines.postgresql.quoting import ident, literal

__all__ = ["leftovers"]

_PREPARED = """
SELECT gid, owner::text, prepared::text FROM pg_prepared_xacts
WHERE database = current_database() ORDER BY gid
"""
_INVALID = """
SELECT n.nspname, c.relname FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT i.indisvalid AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%'
ORDER BY 1, 2
"""


def leftovers(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    """Each prepared transaction of this database and each INVALID index, named with what a
    person may do about it (at most 20 of each)."""
    found: list[str] = []
    for gid, owner, prepared in conn.execute(_PREPARED).fetchall()[:20]:
        said = literal(str(gid))
        found.append(
            f"prepared transaction {said} (owner {owner}, prepared {prepared}) holds its locks "
            f"and changes: decide, then COMMIT PREPARED {said} or ROLLBACK PREPARED {said}"
        )
    for schema, name in conn.execute(_INVALID).fetchall()[:20]:
        index = f"{ident(str(schema))}.{ident(str(name))}"
        found.append(
            f"index {index} is INVALID (a concurrent build or reindex stopped): "
            f"DROP INDEX CONCURRENTLY {index}, or REINDEX INDEX CONCURRENTLY {index}"
        )
    return found
