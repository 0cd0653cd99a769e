"""The status branch: Seshat's verdicts, committed from memory and pushed.

* Commits are built in a bare clone (:mod:`gitops.writeback.bare`), never through a
  checkout, so nothing on the branch (a symlink in place of a status file, a folder in place
  of a plan) can make Seshat write anywhere but Git's object database.
* A commit is made only when the tree differs from the branch's tip (something material
  changed); the same status written twice makes no commit.
* Pushes are never forced. When a push is rejected because someone else pushed first, the
  branch is fetched, Seshat's change is rebuilt on the new tip (a rebase of its single
  commit) and the push is retried, a bounded number of times.
* Commits use the bot identity from ``seshat.yaml`` and, when configured, are signed with
  an SSH key (``gpg.format=ssh``) or a GPG key.
* The branch is created on first use as an orphan branch holding only Seshat's files.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from gitops.resources.config import CommitSettings
from gitops.writeback.bare import BareClone, Identity, Signer, safe_path
from gitops.writeback.commits import Trailers, message
from gitops.writeback.ledger import (
    AnyRecord,
    Ledger,
    Verifier,
    read_ledger,
    record_lines,
    remember_push,
)
from runner.errors import CanNotRunError, SeshatError

__all__ = ["PushRejected", "StatusBranch", "Written"]


class PushRejected(SeshatError):
    """The push kept being rejected after every retry; nothing was forced."""


@dataclass(frozen=True, slots=True)
class Written:
    """The result of one publish: the commit made (None: nothing changed) and attempts."""

    commit: str | None
    attempts: int


class StatusBranch:
    """The status branch ``branch`` of ``remote_url``, through a bare clone in ``workdir``."""

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
        self.clone = BareClone(workdir, remote_url, environment)
        self.tip: str | None = None
        self.pushed: str | None = None  # the last commit this object pushed
        self.ledger = Ledger()

    def close(self) -> None:
        self.clone.close()

    def sync(self) -> None:
        """Fetch the branch; :attr:`tip` is its commit (None: the branch does not exist)."""
        self.clone.fetch(self.branch)
        self.tip = self.clone.tip(self.branch)

    @property
    def tip_is_own_push(self) -> bool:
        """Whether :attr:`tip` is the commit this object pushed last: a commit built on it
        needs no fetch first, since a push is never forced (when the branch moved since,
        the push is refused, and :meth:`publish` fetches and builds again)."""
        return self.tip is not None and self.tip == self.pushed

    def read(self, path: str) -> bytes | None:
        """A regular file as it is on the branch's (synced) tip; None for anything else."""
        if self.tip is None:
            return None
        return self.clone.read(self.tip, path)

    def blob_ids(self, paths: Sequence[str]) -> dict[str, str]:
        """The object id of each of ``paths`` that is a regular file on the branch's
        (synced) tip, read at once."""
        if self.tip is None:
            return {}
        return self.clone.blob_ids(self.tip, paths)

    def files(self, folder: str) -> list[str]:
        """The regular files under ``folder`` on the branch's (synced) tip."""
        if self.tip is None:
            return []
        return self.clone.files(self.tip, folder)

    # -- committing ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _signer(self) -> Iterator[Signer | None]:
        signing = self.settings.signing
        if signing is None:
            yield None
            return
        kind = "ssh" if signing.format == "ssh" else "openpgp"
        if signing.key_file is not None:
            yield Signer(kind, signing.key_file)
            return
        assert signing.key_from_env is not None
        value = os.environ.get(signing.key_from_env)
        if not value:
            raise CanNotRunError(f"environment variable {signing.key_from_env} is not set")
        if signing.format == "gpg":
            yield Signer(kind, value.strip())  # a key id for gpg, not key material
            return
        handle, name = tempfile.mkstemp(prefix="seshat-signing-")
        try:
            with os.fdopen(handle, "w") as out:
                out.write(value if value.endswith("\n") else value + "\n")
            os.chmod(name, stat.S_IRUSR | stat.S_IWUSR)
            yield Signer(kind, name)
        finally:
            Path(name).unlink(missing_ok=True)

    def publish(
        self,
        files: Mapping[str, bytes | None],
        subject: str,
        trailers: Trailers,
        body: str = "",
        *,
        records: Sequence[AnyRecord] = (),
        attempts: int = 5,
        synced: bool = False,
    ) -> Written:
        """Write ``files`` (None deletes), commit if anything changed (always, when there are
        ``records``), push; replay on races. The records join :attr:`ledger` once pushed.
        ``synced``: the caller has just fetched the branch (:meth:`sync`), so the first
        attempt builds on that tip without fetching again."""
        text = message(subject, body, trailers, record_lines(records))
        author = Identity(self.settings.author.name, self.settings.author.email)
        for path in files:
            safe_path(path)
        for attempt in range(1, attempts + 1):
            if attempt > 1 or not synced:
                self.sync()
            with self._signer() as signer:
                commit = self.clone.commit(
                    self.tip, files, text, author, signer, allow_empty=bool(records)
                )
            if commit is None:
                return Written(None, attempt)
            if not self.clone.push(commit, self.branch):
                continue  # someone pushed first: fetch, rebuild, retry
            parent, self.tip, self.pushed = self.tip, commit, commit
            remember_push(self.clone, commit, parent=parent)
            self.ledger.add(commit, records)
            return Written(commit, attempt)
        raise PushRejected(f"the push to {self.branch} was rejected {attempts} times")

    # -- safety records ------------------------------------------------------------------

    def verifier(self, repo_root: Path | None = None) -> Verifier | None:
        """Who may sign records: the controller's own key (and, for SSH, the earlier keys
        listed in ``commit.signing.verifyWith``); None without signing."""
        signing = self.settings.signing
        if signing is None:
            return None
        if signing.format == "gpg":
            return Verifier("gpg")
        lines = []
        with self._signer() as signer:
            assert signer is not None
            done = subprocess.run(
                ["ssh-keygen", "-y", "-f", signer.key],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        if done.returncode != 0 or not done.stdout.strip():
            raise CanNotRunError("cannot read the public half of the commit signing key")
        lines.append(f'seshat namespaces="git" {done.stdout.strip()}')
        if signing.verify_with is not None and repo_root is not None:
            lines.append(_read_allowed_signers(repo_root, signing.verify_with))
        return Verifier("ssh", "\n".join(lines) + "\n")

    def load_ledger(self, verifier: Verifier | None, verified: set[str] | None = None) -> Ledger:
        """Read every record of the branch's history (after :meth:`sync`)."""
        self.ledger = read_ledger(self.clone, self.tip, verifier, verified)
        return self.ledger

    def log(self, limit: int = 20) -> Sequence[git.Commit]:
        return self.clone.log(self.tip or f"refs/remotes/origin/{self.branch}", limit)


MAX_ALLOWED_SIGNERS = 64 * 1024


def _read_allowed_signers(root: Path, relative: str) -> str:
    """The repository's list of earlier controller keys: a regular file inside it."""
    path = root / relative
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()) or path.is_symlink() or not path.is_file():
        raise CanNotRunError(
            f"commit.signing.verifyWith: {relative} is not a file of the repository"
        )
    with path.open("rb") as stream:
        data = stream.read(MAX_ALLOWED_SIGNERS + 1)
    if len(data) > MAX_ALLOWED_SIGNERS:
        raise CanNotRunError(f"commit.signing.verifyWith: {relative} is too large")
    return data.decode("utf-8", errors="replace")
