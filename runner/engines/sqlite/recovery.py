"""What an interrupted write leaves in a SQLite file, told apart and recovered.

A writer killed in the middle of a transaction leaves a *hot* rollback journal
(``<file>-journal``: the original content of every page it changed) or, in WAL mode, a log
whose index a reader cannot rebuild. SQLite settles both itself, but only in a connection
that may write: a read-only one (Observe and Plan open the target ``mode=ro``) gets
``SQLITE_READONLY_ROLLBACK`` or ``SQLITE_READONLY_RECOVERY``, whose message, "attempt to
write a readonly database", says nothing of the cause. Here those two codes are
:class:`~runner.errors.RecoveryNeeded`, and a plain ``SQLITE_READONLY`` is
:class:`~runner.errors.NotWritable`: SQLite's own verdict, never a guess from files alone.

:func:`recover` is the ``recover`` operation's work: open the file for writing and read its
first page, which makes SQLite roll the journal back (or recover the WAL index) under its
own locks, then check that a read-only connection reads it. What a rollback undoes is the
interrupted transaction's partial work: the Apply that wrote it stays uncertain, and only a
fresh Observe and Plan say where the database stands.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from runner.errors import CanNotRunError, NotWritable, RecoveryNeeded

__all__ = ["probe", "recover", "steps_for_a_person", "translated"]

_KINDS = {
    sqlite3.SQLITE_READONLY_ROLLBACK: "rollback_journal",
    sqlite3.SQLITE_READONLY_RECOVERY: "wal",
}
_WHAT = {
    "rollback_journal": "a hot rollback journal (a write to it was interrupted)",
    "wal": "a write-ahead log that needs recovery (a writer was interrupted)",
}


def _uri(path: Path, mode: str) -> str:
    return f"file:{quote(str(path.resolve()))}?mode={mode}"


def steps_for_a_person(path: Path, kind: str) -> str:
    """What a person who may write ``path`` does to recover it, exactly."""
    journal = f"{path}-journal" if kind == "rollback_journal" else f"{path}-wal"
    return (
        f"as a user who may write {path} and its folder {path.parent}, stop every program "
        f"using it and run: sqlite3 {path} 'PRAGMA quick_check;' (opening it for writing "
        f"makes SQLite settle {journal}); never delete {journal} by hand, which would keep "
        "half of an interrupted write"
    )


def translated(error: sqlite3.Error, path: Path) -> CanNotRunError:
    """SQLite's error as Seshat's: an interrupted write, a file it cannot write, or any
    other failure to read the file."""
    code = getattr(error, "sqlite_errorcode", None)
    kind = _KINDS.get(code) if isinstance(code, int) else None
    if kind is not None:
        return RecoveryNeeded(
            f"{path}: holds {_WHAT[kind]}; a read-only session cannot read it until a writer "
            "recovers it (the recover operation)",
            kind,
        )
    if code == sqlite3.SQLITE_READONLY:
        return NotWritable(f"{path}: cannot be written by this runner's user ({error})")
    return CanNotRunError(f"{path}: cannot read: {error}")


def probe(conn: sqlite3.Connection, path: Path) -> None:
    """Read the first page, so that an interrupted write is found before anything else."""
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.Error as error:
        raise translated(error, path) from None


def _pending(path: Path) -> str | None:
    """What a read-only session finds to recover in ``path`` (None: nothing)."""
    try:
        with closing(sqlite3.connect(_uri(path, "ro"), uri=True, isolation_level=None)) as conn:
            probe(conn, path)
    except RecoveryNeeded as needed:
        return needed.kind
    except sqlite3.Error as error:
        raise translated(error, path) from None
    return None


def _writable(path: Path) -> bool:
    """Whether this process may write the file and create and delete files beside it (a
    rollback deletes the journal)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def recover(path: Path, timeout: float) -> dict[str, object]:
    """Recover what an interrupted write left in ``path``, under SQLite's own locks
    (waiting up to ``timeout`` seconds for another connection); the report's fields."""
    if not path.is_file():
        return {"found": "none", "recovered": False, "detail": f"{path}: no such file"}
    kind = _pending(path)
    if kind is None:
        return {"found": "none", "recovered": False, "detail": "nothing to recover"}
    if not _writable(path):
        raise NotWritable(
            f"{path} holds {_WHAT[kind]} and this runner cannot write it: "
            + steps_for_a_person(path, kind)
        )
    try:
        with closing(
            sqlite3.connect(_uri(path, "rw"), uri=True, isolation_level=None, timeout=timeout)
        ) as conn:
            conn.execute("PRAGMA schema_version").fetchone()  # SQLite rolls back or recovers
    except sqlite3.Error as error:
        raise translated(error, path) from None
    left = _pending(path)
    if left is not None:
        return {
            "found": kind,
            "recovered": False,
            "detail": f"SQLite did not settle it: {steps_for_a_person(path, left)}",
        }
    done = (
        "the interrupted transaction was rolled back (its partial work undone)"
        if kind == "rollback_journal"
        else "the write-ahead log was recovered (committed transactions kept)"
    )
    return {"found": kind, "recovered": True, "detail": done}
