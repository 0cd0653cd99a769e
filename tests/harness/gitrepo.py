"""A bare Git remote plus a working clone, for tests of the GitOps side.

Why a real bare repository over file://: Seshat watches a Git remote, so tests
need real pushes, real commit IDs and a real fetch path, and file:// makes Git
use its transport machinery (unlike a plain local path, which Git may
hard-link) without any network.

Git runs isolated from the machine's configuration: ``GIT_CONFIG_NOSYSTEM`` and
``GIT_CONFIG_GLOBAL=/dev/null`` are passed to every Git command the harness
runs (not put into os.environ, so the code under test keeps its own
environment); the identity and ``commit.gpgsign=false`` live in the clone's
own config.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import git

from .processes import require_binary, run_captured

BRANCH = "main"
AUTHOR_NAME = "Seshat Test"
AUTHOR_EMAIL = "seshat-test@example.invalid"
GIT_ENV: dict[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


@dataclass(frozen=True)
class GitRemote:
    """A bare remote (``remote_path``/``remote_url``) and a clone of it (``work``)."""

    remote_path: Path
    remote_url: str
    work: git.Repo
    work_dir: Path
    branch: str = BRANCH

    def write_file(self, relative_path: str, content: str | bytes) -> Path:
        """Create or overwrite a file in the working clone (parents created)."""
        path = self.work_dir / relative_path
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    def commit_all(self, message: str) -> str:
        """Stage everything, commit, push to the remote's branch; return the commit SHA."""
        self.work.git.add("--all")
        self.work.git.commit("--message", message)
        self.work.git.push("--set-upstream", "origin", f"HEAD:refs/heads/{self.branch}")
        return self.work.head.commit.hexsha

    def remote_head(self) -> str:
        """The SHA the bare remote's branch points at (read from the remote itself)."""
        out = subprocess.run(
            [
                require_binary("git", "git"),
                "--git-dir",
                str(self.remote_path),
                "rev-parse",
                f"refs/heads/{self.branch}",
            ],
            env={**os.environ, **GIT_ENV},
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()

    @contextlib.contextmanager
    def fresh_clone(self, destination: Path) -> Iterator[git.Repo]:
        """Clone the remote anew into *destination*; the Repo is closed afterwards."""
        repo = git.Repo.clone_from(self.remote_url, destination, env=GIT_ENV)
        try:
            yield repo
        finally:
            repo.close()


def _configure(repo: git.Repo) -> None:
    """Test identity and no signing, in the repository's own config."""
    repo.git.update_environment(**GIT_ENV)
    with repo.config_writer() as config:
        config.set_value("user", "name", AUTHOR_NAME)
        config.set_value("user", "email", AUTHOR_EMAIL)
        config.set_value("commit", "gpgsign", "false")
        config.set_value("tag", "gpgsign", "false")


@contextlib.contextmanager
def git_remote_with_clone(directory: Path) -> Iterator[GitRemote]:
    """``git init --bare --initial-branch=main`` plus a configured clone, under *directory*."""
    git_binary = require_binary("git", "git")
    remote_path = directory / "remote.git"
    work_dir = directory / "work"
    run_captured(
        [git_binary, "init", "--quiet", "--bare", f"--initial-branch={BRANCH}", str(remote_path)],
        what="git init --bare",
        env={**os.environ, **GIT_ENV},
        timeout=None,
    )
    remote_url = remote_path.as_uri()
    work = git.Repo.clone_from(remote_url, work_dir, env=GIT_ENV)
    try:
        _configure(work)
        # A clone of an empty repository may start on another unborn branch.
        work.git.symbolic_ref("HEAD", f"refs/heads/{BRANCH}")
        yield GitRemote(
            remote_path=remote_path, remote_url=remote_url, work=work, work_dir=work_dir
        )
    finally:
        work.close()
