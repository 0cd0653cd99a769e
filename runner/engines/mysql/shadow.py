"""Shadow schemas: where the desired schema is normalized and plans are dry-run.

A shadow schema is a database created on the target server under a random name
``seshat_shadow_<creation time, hex>_<random>`` with the target's default character set
and collation, and dropped afterwards, also when the operation fails or the runner is told
to stop (SIGTERM unwinds through ``finally``). A runner killed outright cannot clean up, so
the name carries its creation time and every later run drops shadow schemas older than
:data:`LEFTOVER_AGE` seconds. The name is a secret: callers redact it from all output.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
from typing import Any, Final

import pymysql

from runner.engines.mysql.connection import rows
from runner.engines.mysql.quoting import ident

__all__ = ["LEFTOVER_AGE", "PREFIX", "drop_leftovers", "shadow_schema"]

PREFIX: Final = "seshat_shadow_"
LEFTOVER_AGE: Final = 600


def drop_leftovers(conn: Any, now: float | None = None) -> list[str]:
    """Drop shadow schemas a killed runner left behind; returns their names."""
    now = time.time() if now is None else now
    dropped: list[str] = []
    for (name,) in rows(
        conn,
        "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE %s ORDER BY 1",
        (PREFIX.replace("_", r"\_") + "%",),
    ):
        stamp = str(name).removeprefix(PREFIX).split("_", 1)[0]
        try:
            created = int(stamp, 16)
        except ValueError:
            continue
        if now - created > LEFTOVER_AGE:
            with contextlib.suppress(pymysql.MySQLError), conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {ident(str(name))}")
                dropped.append(str(name))
    return dropped


def defaults(conn: Any, database: str) -> tuple[str, str]:
    """The default character set and collation of ``database``."""
    found = rows(
        conn,
        "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME"
        " FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
        (database,),
    )
    if not found:
        return "utf8mb4", "utf8mb4_general_ci"
    return str(found[0][0]), str(found[0][1])


@contextlib.contextmanager
def shadow_schema(conn: Any, like: str, names: list[str]) -> Iterator[str]:
    """Create a shadow schema with ``like``'s defaults; yields its name and always drops it.

    The name is appended to ``names`` before the schema exists, so it is redacted even if
    creating it fails.
    """
    with contextlib.suppress(pymysql.MySQLError):
        drop_leftovers(conn)
    charset, collation = defaults(conn, like)
    name = f"{PREFIX}{int(time.time()):x}_{secrets.token_hex(8)}"
    names.append(name)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {ident(name)} CHARACTER SET {charset} COLLATE {collation}")
    try:
        yield name
    finally:
        with contextlib.suppress(pymysql.MySQLError), conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {ident(name)}")
