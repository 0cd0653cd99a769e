"""Reading a file of the declarations repository: a regular file inside it, bounded.

Everything in the repository is written by people with commit access, so every file the
control plane reads from it goes through :func:`read_in_repository`: the path must resolve
inside the repository (a symbolic link may point to another file of the repository, never
out of it), the file is opened without following a last symbolic link and without blocking
(``O_NOFOLLOW``, ``O_NONBLOCK``: a FIFO cannot hang the controller), it must be a regular
file (``fstat``: not a device such as ``/dev/zero``), and at most ``limit`` bytes are read.
Anything else is an :class:`UnreadableFile` whose message names the path relative to the
repository, for the caller to report as a problem of that path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from gitops.repo.yamlfile import MAX_FILE_BYTES
from runner.files import NotReadable, read_inside, read_regular_file

__all__ = [
    "MAX_SIGNATURE_BYTES",
    "MAX_STATEMENT_BYTES",
    "UnreadableFile",
    "read_in_repository",
    "read_regular",
]

MAX_STATEMENT_BYTES: Final = MAX_FILE_BYTES
"""An approval or acknowledgment file: the bound of any declaration file."""
MAX_SIGNATURE_BYTES: Final = 256 * 1024
"""A ``.sig`` or ``.sigstore.json`` file beside a statement."""


class UnreadableFile(Exception):
    """A file the control plane will not read; ``reason`` says why, without its content."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def read_regular(path: Path, limit: int, shown: str | None = None) -> bytes | None:
    """The bytes of the regular file ``path``, at most ``limit`` of them; None when there
    is no such file. ``shown`` is how messages name it (default: the path)."""
    try:
        return read_regular_file(path, limit)
    except NotReadable as error:
        raise UnreadableFile(shown if shown is not None else str(path), error.detail) from None


def read_in_repository(root: Path, path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` (absolute, or relative to ``root``) if it is a regular file
    inside the repository at ``root``; None when it does not exist."""
    base = root.resolve()
    full = path if path.is_absolute() else base / path
    try:
        shown = full.relative_to(base).as_posix()
    except ValueError:
        shown = full.as_posix()
    try:
        return read_inside(base, full, limit)
    except NotReadable as error:
        raise UnreadableFile(shown, error.detail) from None
