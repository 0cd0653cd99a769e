"""Scratch databases: where the desired schema is normalized and plans are dry-run.

A scratch database is created on the target server (or the explicit dev server) under a
unique name ``seshat_scratch_<random>``, and dropped afterwards, also when the operation
fails or the runner is told to stop (SIGTERM and SIGINT unwind through ``finally``). A
runner killed outright cannot clean up, so each scratch database is labelled with its
creation time and every later run drops labelled ones that are older than
:data:`LEFTOVER_AGE` seconds and have no sessions. The name is random and never printed:
callers add it to their redactor.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
from typing import Final

import psycopg

from runner.engines.postgresql.connection import connection
from runner.errors import CanNotRunError
from runner.url import DatabaseURL

__all__ = ["LEFTOVER_AGE", "PREFIX", "drop_leftovers", "scratch_database"]

PREFIX: Final = "seshat_scratch_"
LEFTOVER_AGE: Final = 600
_LABEL = "seshat scratch database created at "


def drop_leftovers(admin_url: DatabaseURL, now: float | None = None) -> list[str]:
    """Drop scratch databases a killed runner left behind; returns their names."""
    now = time.time() if now is None else now
    dropped: list[str] = []
    with connection(admin_url) as conn:
        rows = conn.execute(
            "SELECT d.datname, shobj_description(d.oid, 'pg_database') FROM pg_database d"
            " WHERE d.datname LIKE %s AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a"
            " WHERE a.datname = d.datname) ORDER BY 1",
            (PREFIX.replace("_", r"\_") + "%",),
        ).fetchall()
        for name, label in rows:
            if not label or not label.startswith(_LABEL):
                continue
            try:
                created = float(label.removeprefix(_LABEL))
            except ValueError:
                continue
            if now - created > LEFTOVER_AGE:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                    dropped.append(name)
    return dropped


@contextlib.contextmanager
def scratch_database(admin_url: DatabaseURL) -> Iterator[tuple[DatabaseURL, str]]:
    """Create a scratch database; yields (its URL, its name) and always drops it."""
    drop_leftovers(admin_url)
    name = PREFIX + secrets.token_hex(8)
    with connection(admin_url) as conn:
        try:
            conn.execute(f'CREATE DATABASE "{name}"')
        except psycopg.errors.InsufficientPrivilege:
            raise CanNotRunError(
                "the target's user may not create databases, so no scratch database can be "
                "made; give an empty dev database (--dev-url, or spec.dev.url)"
            ) from None
        try:
            conn.execute(f"COMMENT ON DATABASE \"{name}\" IS '{_LABEL}{int(time.time())}'")
            yield admin_url.with_database(name), name
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
