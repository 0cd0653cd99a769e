"""Where SQLite runs what is not the approved plan: an in-memory database that can reach
nothing else.

The desired schema (an artifact's SQL) and the dry run execute in a connection to
``:memory:`` that cannot attach a file (the authorizer refuses ``ATTACH``, which also covers
``VACUUM INTO``, and the attached-database limit is zero), cannot load an extension
(``load_extension`` refused, extension loading never enabled), cannot change where temporary
files go or edit the schema table by hand, is interrupted after :data:`DEADLINE` seconds of
work and may allocate :data:`HEAP_LIMIT` bytes (:func:`limited`). The dry run copies the
live database's *schema* into such a connection (its stored ``CREATE`` statements, never a
row), so nothing of the live data ever leaves the file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from typing import Final

from runner.engines.planner import PlanRefused

__all__ = ["DEADLINE", "HEAP_LIMIT", "SandboxRefused", "copy_schema", "limited", "sandbox"]

HEAP_LIMIT: Final = 256 << 20
"""Bytes SQLite may allocate in all (``PRAGMA hard_heap_limit``, which the sandbox refuses to
desired SQL): past it a statement fails with ``SQLITE_NOMEM`` (Python's ``MemoryError``),
refused as ``sandbox_limit_exceeded``, and the runner stays well under 1 GiB."""

DEADLINE: Final = 120.0
"""Seconds of statement work a sandbox allows in all (a recursive CTE cannot run forever);
``SESHAT_SQLITE_DEADLINE`` sets another."""

_REFUSED_PRAGMAS: Final = frozenset(
    {
        "temp_store_directory",
        "data_store_directory",
        "writable_schema",
        "hard_heap_limit",
        "soft_heap_limit",
        "mmap_size",
    }
)
_REFUSED_FUNCTIONS: Final = frozenset({"load_extension", "readfile", "writefile", "edit"})


class SandboxRefused(Exception):
    """What the sandbox's authorizer refused, for the message."""


def _authorizer(
    action: int, first: str | None, second: str | None, database: str | None, trigger: str | None
) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and (first or "").lower() in _REFUSED_PRAGMAS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (second or "").lower() in _REFUSED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def sandbox(deadline: float | None = None) -> sqlite3.Connection:
    """A fresh in-memory database that can reach no file (see the module docstring)."""
    if deadline is None:
        deadline = float(os.environ.get("SESHAT_SQLITE_DEADLINE") or DEADLINE)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT}")  # for the whole process
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.set_authorizer(_authorizer)
    stop = time.monotonic() + deadline
    conn.set_progress_handler(lambda: int(time.monotonic() > stop), 10_000)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("PRAGMA legacy_alter_table = ON")
    conn.execute("PRAGMA trusted_schema = OFF")
    return conn


_ORDER = "CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END"


def copy_schema(source: sqlite3.Connection, target: sqlite3.Connection) -> None:
    """Create in ``target`` every table, index, view and trigger of ``source`` from their
    stored ``CREATE`` text, in dependency-safe order; no row is copied."""
    rows = source.execute(
        "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' "
        f"ESCAPE '\\' ORDER BY {_ORDER}, rowid"
    ).fetchall()
    for (sql,) in rows:
        target.execute(sql)


@contextlib.contextmanager
def limited() -> Iterator[None]:
    """A sandbox step whose memory ran out (:data:`HEAP_LIMIT`) becomes a refusal,
    ``sandbox_limit_exceeded``, not a traceback."""
    try:
        yield
    except MemoryError:
        raise PlanRefused(
            "sandbox_limit_exceeded",
            f"the SQLite sandbox ran out of the {HEAP_LIMIT >> 20} MiB it may use: the desired "
            "schema (or the dry run) needs more memory than a schema should",
        ) from None
