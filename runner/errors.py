"""The error hierarchy every Seshat component raises::

    SeshatError                      an error Seshat raises on purpose
    ├── ConfigurationError           the declarations (or a URL, a folder) cannot be used
    └── CanNotRunError               a path, tool or server is missing; nothing changed
        ├── RecoveryNeeded           a write was interrupted (SQLite's hot journal): the
        │                            database must be recovered before it can be read
        └── NotWritable              the database cannot be written by this runner

What an error means for a verdict is decided where it crosses a boundary, not here: a
runner operation's error becomes an :class:`~runner.protocol.results.ErrorCode` (which says
whether it ran nothing and whether it blocks), a refusal carries its stable ``reason``
(``PlanRefused``, ``MigrationRefused``, ``ArtifactError``), and the control plane looks
verdicts up in tables. Driver and library exceptions are translated in the one module that
talks to that library, never here.
"""

from __future__ import annotations

__all__ = [
    "CanNotRunError",
    "ConfigurationError",
    "NotWritable",
    "RecoveryNeeded",
    "SeshatError",
]


class SeshatError(Exception):
    """Base of every error Seshat raises on purpose."""


class ConfigurationError(SeshatError):
    """The declarations cannot be used as written."""


class CanNotRunError(SeshatError):
    """A command could not run at all (a missing file, tool or server); nothing changed."""


class RecoveryNeeded(CanNotRunError):
    """A write to the database was interrupted and left something only a writer can settle
    (SQLite: a hot rollback journal, or a WAL needing recovery). A read-only session
    cannot read it as it is; the ``recover`` operation settles it. Nothing changed."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind  # "rollback_journal" | "wal"


class NotWritable(CanNotRunError):
    """The database (or the folder it lives in) cannot be written by this runner's user:
    SQLite's "attempt to write a readonly database". Nothing changed."""
