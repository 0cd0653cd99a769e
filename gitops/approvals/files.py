"""Reading a statement and its signatures from the repository: regular files, bounded.

Statements and signatures are written by people with commit access, so they are read as
untrusted input: never through a symbolic link, a FIFO or a device (``O_NOFOLLOW``,
``O_NONBLOCK``, then ``fstat``), and never more than a bound. Anything else is a
:class:`~runner.errors.ConfigurationError` naming the file, for the caller to report.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from runner.errors import ConfigurationError

__all__ = [
    "MAX_SIGNATURE_BYTES",
    "MAX_STATEMENT_BYTES",
    "read_regular",
    "read_signature_file",
    "read_signatures",
    "read_statement",
]

MAX_STATEMENT_BYTES: Final = 1024 * 1024
MAX_SIGNATURE_BYTES: Final = 256 * 1024


def read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of the regular file ``path`` (None if there is none), at most ``limit``."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        kind = "a symbolic link" if path.is_symlink() else error.strerror
        raise ConfigurationError(f"{path.name}: cannot be read ({kind})") from None
    with os.fdopen(handle, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise ConfigurationError(f"{path.name}: not a regular file")
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ConfigurationError(f"{path.name}: larger than {limit} bytes")
    return data


def read_statement(path: Path) -> bytes:
    data = read_regular(path, MAX_STATEMENT_BYTES)
    if data is None:
        raise ConfigurationError(f"{path.name}: missing")
    return data


def read_signature_file(path: Path) -> bytes:
    """A ``.sig`` or ``.sigstore.json`` file's bytes; empty when there is none."""
    return read_regular(path, MAX_SIGNATURE_BYTES) or b""


def read_signatures(path: Path) -> str:
    """A ``.sig`` file's armored text (bytes that are not ASCII cannot be armor)."""
    return read_signature_file(path).decode("ascii", errors="replace")
