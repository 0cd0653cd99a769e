"""Git's lock files in the controller's clones: waited for when fresh, removed when stale.

Git takes a lock by creating ``<file>.lock`` (``index.lock``, ``HEAD.lock``,
``refs/.../<branch>.lock``, ``packed-refs.lock``, ``config.lock``) and removes it when it is
done; a Git process killed in between (with the controller that ran it) leaves the lock, and
every later Git command on that clone fails at once with "File exists". Two things follow:

* :class:`PatientGit`: a command that meets a lock waits and tries again, for at most
  :attr:`PatientGit.lock_wait` seconds (a lock another Git process holds is released within
  moments); then it fails with Git's own error plus which lock was held for how long, so the
  pass fails with that reason instead of hanging or failing forever. A command that met a
  lock did nothing, so running it again is safe. :class:`PatientRepo` is a ``git.Repo``
  whose commands are run so.
* :func:`remove_stale_locks`: when a controller starts, holding its work folder's lock
  (:mod:`gitops.execution.workfolder`), a lock file in one of its clones that is older than
  that start and that no live Git process can be holding was left by a killed one: it is
  removed, and said.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import git

__all__ = ["PatientGit", "PatientRepo", "git_processes", "remove_stale_locks"]

_HELD = re.compile(
    r"(?:Unable to create '(?P<a>[^']+\.lock)': File exists"
    r"|could not lock config file (?P<b>\S+): File exists)"
)


def held_lock(error: git.GitCommandError) -> str | None:
    """The lock file a Git command failed on because it exists, if that is why it failed."""
    found = _HELD.search(str(error.stderr or ""))
    return (found.group("a") or found.group("b")) if found else None


class PatientGit(git.Git):
    """``git.Git`` whose commands wait for a lock file another Git process holds."""

    lock_wait: ClassVar[float] = 10.0
    """Seconds a command waits in all for the locks it meets."""
    pause: ClassVar[float] = 0.2

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        until = time.monotonic() + self.lock_wait
        while True:
            try:
                return super().execute(*args, **kwargs)
            except git.GitCommandError as error:
                lock = held_lock(error)
                if lock is None:
                    raise
                if time.monotonic() >= until:
                    said = (
                        f"{str(error.stderr or '').strip()}\n(seshat: the Git lock {lock} was "
                        f"still held after {self.lock_wait:g} s of waiting; if no Git process "
                        "uses it, a controller start removes it, or a person may delete it)"
                    )
                    raise git.GitCommandError(error.command, error.status, said) from None
                time.sleep(self.pause)


class PatientRepo(git.Repo):
    """A ``git.Repo`` (also from ``clone_from`` and ``init``) running :class:`PatientGit`."""

    GitCommandWrapperType = PatientGit


def git_processes() -> Iterator[tuple[int, Path | None, str]]:
    """Each live Git process: its pid, working directory (None if unreadable) and command
    line."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            if not name.startswith("git"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            if state in ("Z", "X"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        try:
            cwd: Path | None = Path(os.readlink(entry / "cwd"))
        except OSError:
            cwd = None
        yield int(entry.name), cwd, command


def _lock_files(git_dir: Path) -> Iterator[Path]:
    """The lock files in a Git directory (objects are never locked this way: skipped)."""
    for path in git_dir.iterdir():
        if path.name == "objects":
            continue
        if path.is_dir() and not path.is_symlink():
            yield from (p for p in path.rglob("*.lock") if p.is_file() and not p.is_symlink())
        elif path.name.endswith(".lock") and path.is_file() and not path.is_symlink():
            yield path


def remove_stale_locks(clones: list[Path], before: float, log: Callable[[str], None]) -> int:
    """Remove the lock files of the Git directories ``clones`` (those that exist) that were
    made before ``before`` (a time, seconds since the epoch) and that no live Git process
    working in that clone can hold; how many were removed. Each removal and each lock kept
    is logged."""
    removed = 0
    for clone in clones:
        if not clone.is_dir():
            continue
        top = clone.parent if clone.name == ".git" else clone
        for lock in sorted(_lock_files(clone)):
            try:
                made = lock.stat().st_mtime
            except OSError:
                continue
            if made >= before:
                log(f"seshat: kept {lock}: made after this controller started")
                continue
            users = [
                pid
                for pid, cwd, command in git_processes()
                if (cwd is not None and cwd.is_relative_to(top)) or str(top) in command
            ]
            if users:
                log(f"seshat: kept {lock}: git process {users[0]} works in {top}")
                continue
            lock.unlink(missing_ok=True)
            removed += 1
            age = max(0.0, before - made)
            log(f"seshat: removed a stale Git lock {lock} ({age:.0f} s old, no Git process has it)")
    return removed
