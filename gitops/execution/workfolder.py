"""One controller per work folder: an OS lock held for the controller's whole life.

The work folder holds the clones, the state file, the runners' inputs and their records;
two controllers in one folder would take each other's Git locks for stale, follow each
other's runners and share leases under two holders. So ``seshat reconcile`` and ``seshat
run`` take an exclusive ``flock`` on ``<work>/controller.lock`` before anything else, keep
it until they exit (the kernel lets go of it when the process dies, however it dies), and
a second one exits with an error naming the folder and the holder's pid.

What the lock file says (pid, start time) is for people; the lock itself is the ``flock``.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from runner.errors import CanNotRunError

__all__ = ["WorkFolder", "WorkFolderBusy", "claim_work_folder"]

LOCK_NAME = "controller.lock"


class WorkFolderBusy(CanNotRunError):
    """Another controller holds this work folder."""


@dataclass
class WorkFolder:
    path: Path
    since: float  # when this controller took the folder (seconds since the epoch)
    handle: TextIO  # open for as long as the lock is held

    def clones(self) -> list[Path]:
        """The Git directories of the controller's clones in this folder."""
        return [self.path / "source" / ".git", self.path / "status.git", self.path / "reviews.git"]

    def release(self) -> None:
        self.handle.close()


def claim_work_folder(path: Path) -> WorkFolder:
    """Take ``path`` for this controller (created if needed); raise :class:`WorkFolderBusy`
    when another controller holds it."""
    path.mkdir(parents=True, exist_ok=True)
    lock = path / LOCK_NAME
    handle = open(lock, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the process's life
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        said = handle.read(200).strip() or "unknown"
        handle.close()
        raise WorkFolderBusy(
            f"another controller is running in the work folder {path} ({said}); one "
            "controller per work folder: stop it, or give this one another --work"
        ) from None
    since = time.time()
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}, since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    handle.flush()
    return WorkFolder(path, since, handle)
