"""Reading a statement and its signatures from the repository: regular files, bounded.

Statements and signatures are written by people with commit access, so they are read as
untrusted input, through :func:`gitops.repo.files.read_in_repository`: regular files inside
the repository, never a FIFO or a device, never more than a bound. Anything else is a
:class:`~runner.errors.ConfigurationError` naming the file, for the caller to report.
"""

from __future__ import annotations

from pathlib import Path

from gitops.repo.files import (
    MAX_SIGNATURE_BYTES,
    MAX_STATEMENT_BYTES,
    UnreadableFile,
    read_in_repository,
)
from runner.errors import ConfigurationError

__all__ = [
    "MAX_SIGNATURE_BYTES",
    "MAX_STATEMENT_BYTES",
    "read_signature_file",
    "read_signatures",
    "read_statement",
]


def _read(root: Path, path: Path, limit: int) -> bytes | None:
    try:
        return read_in_repository(root, path, limit)
    except UnreadableFile as error:
        raise ConfigurationError(str(error)) from None


def read_statement(root: Path, path: Path) -> bytes:
    """An approval or acknowledgment file of the repository at ``root``."""
    data = _read(root, path, MAX_STATEMENT_BYTES)
    if data is None:
        raise ConfigurationError(f"{path.name}: missing")
    return data


def read_signature_file(root: Path, path: Path) -> bytes:
    """A ``.sig`` or ``.sigstore.json`` file's bytes; empty when there is none."""
    return _read(root, path, MAX_SIGNATURE_BYTES) or b""


def read_signatures(root: Path, path: Path) -> str:
    """A ``.sig`` file's armored text (bytes that are not ASCII cannot be armor)."""
    return read_signature_file(root, path).decode("ascii", errors="replace")
