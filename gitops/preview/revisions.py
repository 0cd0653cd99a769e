"""Reading a pull request's two revisions from a local work tree, without writing to it.

``seshat preview`` runs in CI on a clone with full history. Each revision is read from a
throwaway ``git clone --shared`` of that work tree, checked out at the revision in a
temporary folder: the user's work tree, index and refs are never touched, and each
revision's resource uids come from its own first-parent history, as the reconciler computes
them. The status branch is read as Git blobs (never a checkout, so nothing pushed there is
followed).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gitops.repo.loader import Repository, load_repository
from gitops.resources.config import Config
from runner.errors import CanNotRunError

__all__ = ["Revisions", "git_output"]

_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ADVICE": "0",
    "LC_ALL": "C",
}
MAX_STATUS_FILE = 1024 * 1024


def git_output(worktree: Path, args: Sequence[str]) -> bytes:
    """``git args`` in ``worktree``; its stdout. A failure is CanNotRunError with git's
    first line of complaint (never the environment)."""
    done = subprocess.run(
        ["git", "-C", str(worktree), *args],
        capture_output=True,
        env={**os.environ, **_GIT_ENV},
        check=False,
    )
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CanNotRunError(f"git {' '.join(args[:2])}: {said[0] if said else 'failed'}")
    return done.stdout


@dataclass(frozen=True, slots=True)
class Revisions:
    """The work tree a preview reads and the two commits it compares."""

    worktree: Path
    base: str  # commit ids
    head: str

    @classmethod
    def of(cls, worktree: Path, base: str, head: str) -> Revisions:
        """``base`` and ``head`` (any revision names) resolved to commits in ``worktree``."""
        return cls(worktree.resolve(), _commit(worktree, base), _commit(worktree, head))

    def changed_paths(self) -> list[str]:
        """The paths the head changes since it left the base (``git diff base...head``):
        what the pull request itself changes, whatever else the base gained meanwhile."""
        out = git_output(
            self.worktree,
            ["diff", "--no-renames", "--name-only", "-z", f"{self.base}...{self.head}", "--"],
        )
        return sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p})

    def load(self, commit: str, folder: Path, config: Config | None = None) -> Repository:
        """The repository as declared at ``commit``, checked out in ``folder`` (new), read
        with ``config`` instead of its own ``seshat.yaml`` when given."""
        try:
            subprocess.run(
                [
                    "git",
                    "clone",
                    "--quiet",
                    "--shared",
                    "--no-checkout",
                    str(self.worktree),
                    str(folder),
                ],
                capture_output=True,
                env={**os.environ, **_GIT_ENV},
                check=True,
            )
            subprocess.run(
                ["git", "-C", str(folder), "checkout", "--quiet", "--detach", commit],
                capture_output=True,
                env={**os.environ, **_GIT_ENV},
                check=True,
            )
        except subprocess.CalledProcessError as error:
            said = error.stderr.decode("utf-8", "replace").strip().splitlines()
            raise CanNotRunError(
                f"cannot check out {commit[:12]}: {said[0] if said else 'git failed'}"
            ) from None
        return load_repository(folder, config=config)

    def status_file(self, ref: str, path: str) -> bytes | None:
        """``path`` as committed at ``ref`` (the status branch), None if absent. Read as a
        blob: a symbolic link there is its target's name, which no status parser accepts."""
        done = subprocess.run(
            ["git", "-C", str(self.worktree), "cat-file", "blob", f"{ref}:{path}"],
            capture_output=True,
            env={**os.environ, **_GIT_ENV},
            check=False,
        )
        if done.returncode != 0 or len(done.stdout) > MAX_STATUS_FILE:
            return None
        return done.stdout

    def status_ref(self, branch: str) -> str | None:
        """The status branch as this clone knows it: the remote's copy, else a local one."""
        for ref in (f"refs/remotes/origin/{branch}", f"refs/heads/{branch}"):
            done = subprocess.run(
                ["git", "-C", str(self.worktree), "rev-parse", "--verify", "--quiet", ref],
                capture_output=True,
                env={**os.environ, **_GIT_ENV},
                check=False,
            )
            if done.returncode == 0:
                return ref
        return None


def _commit(worktree: Path, name: str) -> str:
    if name.startswith("-"):
        raise CanNotRunError(f"{name!r} is not a revision")
    try:
        out = git_output(
            worktree,
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}"],
        )
    except CanNotRunError:
        raise CanNotRunError(f"{name!r}: no such commit in {worktree}") from None
    return out.decode("ascii").strip()
