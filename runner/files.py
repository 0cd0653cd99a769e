"""Reading a file that someone else may have put in place: a regular file, bounded.

Declarations, signatures, OCI layouts and cache entries are all written by someone the
reader does not trust, so they are opened without following a last symbolic link and
without blocking (``O_NOFOLLOW``, ``O_NONBLOCK``: a FIFO cannot hang the reader), checked to
be a regular file on the descriptor itself (not a folder, not a device such as
``/dev/zero``), and read to at most ``limit`` bytes. :class:`NotReadable` says why not, in a
stable ``reason`` and words that name no content.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

__all__ = ["NotReadable", "read_inside", "read_regular_file"]

Why = Literal["symlink", "not_regular", "too_large", "unreadable", "outside"]


class NotReadable(Exception):
    """``reason``: symlink, not_regular, too_large, unreadable or outside (a link out of
    the folder); ``detail`` in words."""

    def __init__(self, reason: Why, detail: str) -> None:
        super().__init__(detail)
        self.reason: Why = reason
        self.detail = detail


def read_regular_file(path: Path, limit: int) -> bytes | None:
    """The bytes of the regular file ``path``, at most ``limit`` of them; None when there
    is no such file."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if path.is_symlink():
            raise NotReadable("symlink", "is a symbolic link") from None
        raise NotReadable("unreadable", f"cannot be read ({error.strerror})") from None
    try:
        # Checked on the descriptor itself: os.fdopen refuses a folder with its own error.
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise NotReadable("not_regular", "is not a regular file")
        if info.st_size > limit:
            raise NotReadable("too_large", f"file is {info.st_size} bytes; the limit is {limit}")
    except BaseException:
        os.close(handle)
        raise
    with os.fdopen(handle, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise NotReadable("too_large", f"file is over {limit} bytes; the limit is {limit}")
    return data


def read_inside(root: Path, path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` (absolute, or relative to ``root``) if it is a regular file
    inside the folder ``root`` (a symbolic link may lead to another file of it, never out
    of it); None when it does not exist."""
    base = root.resolve()
    full = path if path.is_absolute() else base / path
    try:
        resolved = full.resolve(strict=True)
    except FileNotFoundError:
        if full.is_symlink():
            raise NotReadable("symlink", "is a symbolic link to nothing") from None
        return None
    except (OSError, RuntimeError):  # a loop of symbolic links
        raise NotReadable("symlink", "cannot be resolved (a loop of symbolic links?)") from None
    if resolved != base and base not in resolved.parents:
        raise NotReadable("outside", "is a symbolic link that leads outside the repository")
    return read_regular_file(resolved, limit)
