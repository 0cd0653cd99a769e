"""The status branch: a local clone Seshat commits its verdicts to, and pushes.

* A commit is made only when the files differ from the branch's tip (something material
  changed); the same status written twice makes no commit.
* Pushes are never forced. When a push is rejected because someone else pushed first, the
  branch is fetched, Seshat's change is replayed on the new tip (the status files are
  written again and committed if they still differ: a rebase of its single commit) and the
  push is retried, a bounded number of times.
* Commits use the bot identity from ``seshat.yaml`` and, when configured, are signed with
  an SSH key (``gpg.format=ssh``) or a GPG key.
* The branch is created on first use as an orphan branch holding only Seshat's files.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import git

from gitops.resources.config import CommitSettings
from gitops.writeback.commits import Trailers, message
from runner.errors import CanNotRunError, SeshatError

__all__ = ["PushRejected", "StatusBranch", "Written"]

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}


class PushRejected(SeshatError):
    """The push kept being rejected after every retry; nothing was forced."""

    code = "PushRejected"


@dataclass(frozen=True, slots=True)
class Written:
    """The result of one publish: the commit made (None: nothing changed) and attempts."""

    commit: str | None
    attempts: int


def _safe(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(p in ("", ".", "..", ".git") for p in path.split("/")):
        raise ValueError(f"refusing to write {path!r} on the status branch")
    return path


class StatusBranch:
    """A clone of ``remote_url`` in ``workdir`` with ``branch`` checked out."""

    def __init__(
        self,
        workdir: Path,
        remote_url: str,
        branch: str,
        settings: CommitSettings,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.remote_url = remote_url
        self.branch = branch
        self.settings = settings
        self.environment = {**_GIT_ENV, **(environment or {})}
        self._repo: git.Repo | None = None

    # -- the clone -----------------------------------------------------------------------

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            if (self.workdir / ".git").is_dir():
                self._repo = git.Repo(self.workdir)
            else:
                self.workdir.mkdir(parents=True, exist_ok=True)
                self._repo = git.Repo.init(self.workdir)
                self._repo.create_remote("origin", self.remote_url)
            self._repo.git.update_environment(**self.environment)
            with self._repo.config_writer() as config:
                config.set_value("user", "name", self.settings.author.name)
                config.set_value("user", "email", self.settings.author.email)
                config.set_value("commit", "gpgsign", "false")
        return self._repo

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    def sync(self) -> None:
        """Fetch and put the work tree exactly at the remote branch's tip (or an empty one)."""
        repo = self.repo
        try:
            repo.git.fetch("--quiet", "--prune", "origin")
        except git.GitCommandError as error:
            raise CanNotRunError(f"cannot fetch the status branch: {_git_error(error)}") from None
        remote_ref = f"refs/remotes/origin/{self.branch}"
        if any(ref.path == remote_ref for ref in repo.refs):
            repo.git.checkout("--quiet", "-B", self.branch, remote_ref)
            repo.git.reset("--quiet", "--hard", remote_ref)
        else:
            repo.git.checkout("--quiet", "--orphan", self.branch)
            repo.git.rm("-rf", "--quiet", "--ignore-unmatch", ".")
        repo.git.clean("-fdq")

    def read(self, path: str) -> bytes | None:
        """A file as it is on the branch's (synced) tip."""
        full = self.workdir / _safe(path)
        return full.read_bytes() if full.is_file() else None

    # -- committing ----------------------------------------------------------------------

    def _write(self, files: Mapping[str, bytes | None]) -> None:
        for path in sorted(files):
            full = self.workdir / _safe(path)
            content = files[path]
            if content is None:
                if full.exists():
                    self.repo.git.rm("--quiet", "--", path)
                continue
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(content)
            self.repo.git.add("--", path)

    def _commit(self, text: str) -> str | None:
        repo = self.repo
        if not repo.git.status("--porcelain"):
            return None
        signing = self.settings.signing
        key_path: Path | None = None
        with tempfile.TemporaryDirectory(prefix="seshat-commit-") as folder:
            message_file = Path(folder) / "message"
            message_file.write_text(text, encoding="utf-8")
            args = ["--quiet", "--no-verify", "--file", str(message_file)]
            try:
                if signing is not None:
                    key_path = self._signing_key()
                    with repo.config_writer() as config:
                        config.set_value(
                            "gpg", "format", "ssh" if signing.format == "ssh" else "openpgp"
                        )
                        config.set_value("user", "signingkey", str(key_path))
                    args.insert(0, "--gpg-sign")
                repo.git.commit(*args)
            except git.GitCommandError as error:
                raise CanNotRunError(
                    f"cannot commit to the status branch: {_git_error(error)}"
                ) from None
            finally:
                if key_path is not None and signing is not None and signing.key_from_env:
                    key_path.unlink(missing_ok=True)
        return repo.head.commit.hexsha

    def _signing_key(self) -> Path:
        signing = self.settings.signing
        assert signing is not None
        if signing.key_file is not None:
            return Path(signing.key_file)
        assert signing.key_from_env is not None
        value = os.environ.get(signing.key_from_env)
        if not value:
            raise CanNotRunError(f"environment variable {signing.key_from_env} is not set")
        if signing.format == "gpg":
            return Path(value.strip())  # a key id for gpg, not key material
        handle, name = tempfile.mkstemp(prefix="seshat-signing-")
        with os.fdopen(handle, "w") as out:
            out.write(value if value.endswith("\n") else value + "\n")
        os.chmod(name, stat.S_IRUSR | stat.S_IWUSR)
        return Path(name)

    def publish(
        self,
        files: Mapping[str, bytes | None],
        subject: str,
        trailers: Trailers,
        body: str = "",
        *,
        attempts: int = 5,
    ) -> Written:
        """Write ``files`` (None deletes), commit if anything changed, push; replay on races."""
        text = message(subject, body, trailers)
        for attempt in range(1, attempts + 1):
            self.sync()
            self._write(files)
            commit = self._commit(text)
            if commit is None:
                return Written(None, attempt)
            try:
                self.repo.git.push("--quiet", "origin", f"HEAD:refs/heads/{self.branch}")
            except git.GitCommandError as error:
                if _rejected(error):
                    continue  # someone pushed first: fetch, replay, retry
                raise CanNotRunError(
                    f"cannot push the status branch: {_git_error(error)}"
                ) from None
            return Written(commit, attempt)
        raise PushRejected(f"the push to {self.branch} was rejected {attempts} times")

    def log(self, limit: int = 20) -> Sequence[git.Commit]:
        return list(self.repo.iter_commits(self.branch, max_count=limit))


def _rejected(error: git.GitCommandError) -> bool:
    detail = str(error.stderr or "") + str(error.stdout or "")
    return any(
        word in detail for word in ("[rejected]", "non-fast-forward", "fetch first", "stale info")
    )


def _git_error(error: git.GitCommandError) -> str:
    lines = [line.strip() for line in str(error.stderr or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"git exited with {error.status}"
