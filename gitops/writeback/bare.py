"""Reading and writing Seshat's branches through Git's object database, never a checkout.

Everyone who can push to the remote can push to ``seshat/status`` and the review branches,
so what Seshat reads back from them is untrusted input. A checkout would follow what the
branch holds: a status file replaced by a symlink made Seshat write through the link, a
symlinked folder made it create files in the link's target. :class:`BareClone` has no work
tree at all:

* a commit is built from memory: blobs and trees written to the object database (loose
  objects, from this process), only the trees on a changed path read and rewritten, each
  path set as ``update-index --replace`` would (a symlink, a file or a folder in the way is
  replaced; ``tests/fuzz/test_fuzz_trees.py`` holds the two to the same tree ids), then
  ``commit-tree``; a tree it cannot parse is built through a temporary index instead;
  nothing is written to the filesystem except Git's own objects;
* a read returns the bytes of a regular blob (mode ``100644`` or ``100755``) of bounded
  size, and nothing for a symlink, a submodule or a folder at that path;
* pushes are never forced.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path, PurePosixPath

import git
from gitdb import IStream
from gitdb.db.loose import LooseObjectDB

from gitops.repo.locks import PatientRepo
from runner.errors import CanNotRunError

__all__ = ["MAX_BLOB", "BareClone", "Identity", "Signer", "blob_id", "safe_path"]

MAX_BLOB = 16 * 1024 * 1024
"""The largest file Seshat reads back from its branches (a plan is at most 8 MiB)."""

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
_REGULAR = ("100644", "100755")
_REF_PART = re.compile(r"^[A-Za-z0-9._/-]+$")


def blob_id(data: bytes, like: str) -> str:
    """The object id Git gives a blob of ``data``, in the hash of the object id ``like``
    (SHA-1 or SHA-256, by its length)."""
    hashed = hashlib.sha256() if len(like) == 64 else hashlib.sha1()
    hashed.update(b"blob %d\0" % len(data))
    hashed.update(data)
    return hashed.hexdigest()


def safe_path(path: str) -> str:
    """``path`` if it is a plain relative path Seshat may write on its branches."""
    pure = PurePosixPath(path)
    parts = path.split("/")
    if (
        pure.is_absolute()
        or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts)
        or any(ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in path)
        or any(len(p.encode("utf-8")) > 255 for p in parts)
    ):
        raise ValueError(f"refusing to write {path!r} on a branch")
    return path


@dataclass(frozen=True, slots=True)
class Identity:
    name: str
    email: str


@dataclass(frozen=True, slots=True)
class Signer:
    """How to sign commits: ``git -c gpg.format=<format> -c user.signingKey=<key>``."""

    format: str  # "ssh" | "openpgp"
    key: str


class BareClone:
    """A bare clone of ``remote_url`` at ``path``: fetch, read blobs, commit, push."""

    def __init__(
        self, path: Path, remote_url: str, environment: Mapping[str, str] | None = None
    ) -> None:
        self.path = path
        self.remote_url = remote_url
        self.environment = {**_GIT_ENV, **(environment or {})}
        self._repo: git.Repo | None = None
        self._loose: LooseObjectDB | None = None

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            if (self.path / "HEAD").is_file():
                self._repo = PatientRepo(self.path)
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                self._repo = PatientRepo.init(self.path, bare=True)
                self._repo.create_remote("origin", self.remote_url)
            self._repo.git.update_environment(**self.environment)
        return self._repo

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    # -- reading -------------------------------------------------------------------------

    def fetch(self, *branches: str) -> None:
        """Fetch ``branches`` (every branch if none is named) into ``refs/remotes/origin``;
        a branch the remote does not have is not an error."""
        specs = [f"+refs/heads/{b}:refs/remotes/origin/{b}" for b in branches] or [
            "+refs/heads/*:refs/remotes/origin/*"
        ]
        try:
            self.repo.git.fetch("--quiet", "--prune", "--no-tags", "origin", *specs)
        except git.GitCommandError as error:
            if branches and "couldn't find remote ref" in str(error.stderr or ""):
                found = self._remote_heads()
                present = [s for b, s in zip(branches, specs, strict=True) if b in found]
                if not present:
                    return
                try:
                    self.repo.git.fetch("--quiet", "--prune", "--no-tags", "origin", *present)
                    return
                except git.GitCommandError as again:
                    error = again
            raise CanNotRunError(f"cannot fetch from the remote: {git_error(error)}") from None

    def _remote_heads(self) -> set[str]:
        try:
            listed = str(self.repo.git.ls_remote("--heads", "origin"))
        except git.GitCommandError as error:
            raise CanNotRunError(f"cannot list the remote: {git_error(error)}") from None
        return {
            line.split("\t", 1)[1].removeprefix("refs/heads/")
            for line in listed.splitlines()
            if "\t" in line
        }

    def tip(self, branch: str) -> str | None:
        """The fetched tip of ``branch``, or None if the remote has no such branch."""
        return self.resolve(f"refs/remotes/origin/{branch}")

    def resolve(self, ref: str) -> str | None:
        try:
            return str(self.repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}"))
        except git.GitCommandError:
            return None

    def read(self, commit: str, path: str, limit: int = MAX_BLOB) -> bytes | None:
        """The bytes of the regular file ``path`` in ``commit``; None when there is none (or
        something else is there: a symlink, a folder, a submodule) or it is too large."""
        listed = str(self.repo.git.ls_tree("-z", commit, "--", safe_path(path)))
        if not listed:
            return None
        meta, _, name = listed.rstrip("\0").partition("\t")
        mode, kind, sha = meta.split(" ")
        if name != path or kind != "blob" or mode not in _REGULAR:
            return None
        binsha = bytes.fromhex(sha)
        if self.repo.odb.info(binsha).size > limit:
            return None
        data: bytes = self.repo.odb.stream(binsha).read()
        return data

    def blob_ids(self, commit: str, paths: Sequence[str]) -> dict[str, str]:
        """The object id of each of ``paths`` that is a regular file in ``commit`` (one
        ``git ls-tree`` per 500 paths, however many there are)."""
        found: dict[str, str] = {}
        wanted = sorted({safe_path(p) for p in paths})
        for start in range(0, len(wanted), 500):
            listed = str(self.repo.git.ls_tree("-z", commit, "--", *wanted[start : start + 500]))
            for entry in listed.split("\0"):
                meta, _, name = entry.partition("\t")
                if not name:
                    continue
                mode, kind, sha = meta.split(" ")
                if kind == "blob" and mode in _REGULAR:
                    found[name] = sha
        return found

    def files(self, commit: str, folder: str) -> list[str]:
        """The regular files under ``folder`` in ``commit`` (paths from the root)."""
        listed = str(self.repo.git.ls_tree("-r", "-z", commit, "--", safe_path(folder) + "/"))
        found = []
        for entry in listed.split("\0"):
            meta, _, name = entry.partition("\t")
            if name and meta.split(" ")[0] in _REGULAR:
                found.append(name)
        return sorted(found)

    def tree_of(self, commit: str) -> str:
        """The tree of ``commit`` (a full object id: read from the object database, no
        process; anything else through ``git rev-parse``)."""
        if re.fullmatch(r"[0-9a-f]{40}", commit):
            with contextlib.suppress(ValueError, KeyError, OSError):
                stream = self.repo.odb.stream(bytes.fromhex(commit))
                # Read whole: a stream of the persistent cat-file left half read would be
                # drained only when it is collected.
                head = stream.read() if stream.type == b"commit" else b""
                if head.startswith(b"tree ") and len(head) >= 46 and head[45:46] == b"\n":
                    return head[5:45].decode("ascii")
        return str(self.repo.git.rev_parse(f"{commit}^{{tree}}"))

    # -- writing -------------------------------------------------------------------------

    def commit(
        self,
        parent: str | None,
        files: Mapping[str, bytes | None],
        message: str,
        author: Identity,
        signer: Signer | None = None,
        *,
        allow_empty: bool = False,
    ) -> str | None:
        """A commit of ``parent``'s tree with ``files`` set (None removes one); None when
        the tree would not change (unless ``allow_empty``). Nothing is checked out and no
        hook runs."""
        for path in files:
            safe_path(path)
        base = self.tree_of(parent) if parent is not None else None
        try:
            tree = self._tree_in_memory(base, files)
        except (ValueError, KeyError, OSError):  # an object it cannot read or parse
            tree = self._tree_through_index(parent, files)
        if base is not None and tree == base and not allow_empty:
            return None
        identity = {
            "GIT_AUTHOR_NAME": author.name,
            "GIT_AUTHOR_EMAIL": author.email,
            "GIT_COMMITTER_NAME": author.name,
            "GIT_COMMITTER_EMAIL": author.email,
        }
        options: list[str] = []
        arguments = [tree, *(["-p", parent] if parent else [])]
        if signer is not None:
            options = ["-c", f"gpg.format={signer.format}", "-c", f"user.signingKey={signer.key}"]
            arguments.append("-S")
        with tempfile.TemporaryDirectory(prefix="seshat-message-") as folder:
            message_file = Path(folder) / "message"
            message_file.write_text(message, encoding="utf-8")
            try:
                created = self.repo.git.execute(
                    ["git", *options, "commit-tree", *arguments, "-F", str(message_file)],
                    env={**os.environ, **self.environment, **identity},
                )
            except git.GitCommandError as error:
                raise CanNotRunError(f"cannot commit: {git_error(error)}") from None
        return str(created).strip()

    def _tree_in_memory(self, base: str | None, files: Mapping[str, bytes | None]) -> str:
        """The tree ``base`` with ``files`` set, built from the changed folders only: each
        tree on a changed path is read, changed and written back (a status branch of a
        thousand fleet members has thousands of files; an index of them all, read and
        written by three Git processes per commit, cost more than the commit)."""
        changes: dict[tuple[str, ...], bytes | None] = {}
        for path, content in files.items():
            changes[tuple(path.split("/"))] = content
        built = self._tree_with(bytes.fromhex(base) if base else None, changes)
        return (built or self._store("tree", b"")).hex()

    def _tree_with(
        self, base: bytes | None, changes: Mapping[tuple[str, ...], bytes | None]
    ) -> bytes | None:
        """The tree ``base`` (None: none) with ``changes`` (path parts below it) applied, as
        ``update-index --replace`` would: a file replaces a folder or symlink in its way, a
        folder replaces a file in its way, a deletion of what is not there changes nothing,
        a folder left empty goes. None when the tree would be empty."""
        entries = _read_tree(self.repo, base) if base is not None else {}
        below: dict[str, dict[tuple[str, ...], bytes | None]] = {}
        for parts, content in changes.items():
            if len(parts) > 1:
                below.setdefault(parts[0], {})[parts[1:]] = content
            elif content is None:
                if entries.get(parts[0], (b"", b""))[0] != _TREE_MODE:
                    entries.pop(parts[0], None)
            else:
                entries[parts[0]] = (b"100644", self._store("blob", content))
        for name, inner in below.items():
            mode, sha = entries.get(name, (b"", b""))
            folder = sha if mode == _TREE_MODE else None
            if folder is None and all(content is None for content in inner.values()):
                continue  # deleting below a file or nothing: nothing to delete
            built = self._tree_with(folder, inner)
            if built is None:
                entries.pop(name, None)
            else:
                entries[name] = (_TREE_MODE, built)
        if not entries:
            return None
        return self._store("tree", _tree_bytes(entries))

    def _store(self, kind: str, data: bytes) -> bytes:
        """Write an object (loose, zlib-compressed, as Git does) from this process: the
        repository's own object database starts a ``git hash-object`` for each."""
        if self._loose is None:
            self._loose = LooseObjectDB(str(Path(self.repo.git_dir) / "objects"))
        stored = self._loose.store(IStream(kind, len(data), BytesIO(data)))
        return bytes(stored.binsha)

    def _tree_through_index(self, base: str | None, files: Mapping[str, bytes | None]) -> str:
        """The tree (or commit) ``base`` with ``files`` set, through a temporary index: what
        :meth:`_tree_in_memory` builds, for a tree it cannot parse (Git reads what Git
        wrote)."""
        repo = self.repo
        lines = []
        for path in sorted(files):
            content = files[path]
            if content is None:
                lines.append(f"0 {'0' * 40}\t{path}\0")
                continue
            blob = repo.odb.store(IStream("blob", len(content), BytesIO(content)))
            lines.append(f"100644 {blob.hexsha.decode()}\t{path}\0")
        with tempfile.TemporaryDirectory(prefix="seshat-index-") as folder:
            env = {**os.environ, **self.environment, "GIT_INDEX_FILE": f"{folder}/index"}
            repo.git.read_tree(base or "--empty", env=env)
            info = Path(folder) / "info"
            info.write_text("".join(lines), encoding="utf-8")
            with info.open("rb") as stream:
                # --replace: a symlink, file or folder in the way of a path is replaced.
                repo.git.update_index(
                    "--add", "--replace", "-z", "--index-info", istream=stream, env=env
                )
            return str(repo.git.write_tree(env=env))

    def push(self, commit: str, branch: str) -> bool:
        """Push ``commit`` to ``branch`` without forcing; False when the remote refused it
        because the branch moved (fetch, rebuild, retry)."""
        if not _REF_PART.match(branch) or ".." in branch or branch.endswith(".lock"):
            raise ValueError(f"refusing to push to {branch!r}")
        try:
            self.repo.git.push("--quiet", "origin", f"{commit}:refs/heads/{branch}")
        except git.GitCommandError as error:
            if rejected(error):
                return False
            raise CanNotRunError(f"cannot push {branch}: {git_error(error)}") from None
        return True

    def log(self, ref: str, limit: int = 20) -> list[git.Commit]:
        return list(self.repo.iter_commits(ref, max_count=limit))


def rejected(error: git.GitCommandError) -> bool:
    detail = str(error.stderr or "") + str(error.stdout or "")
    return any(
        word in detail for word in ("[rejected]", "non-fast-forward", "fetch first", "stale info")
    )


def git_error(error: git.GitCommandError) -> str:
    lines = [line.strip() for line in str(error.stderr or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"git exited with {error.status}"


_TREE_MODE = b"40000"


def _read_tree(repo: git.Repo, sha: bytes) -> dict[str, tuple[bytes, bytes]]:
    """A tree object's entries: name -> (mode, binary object id). ValueError when it is not
    a tree or does not parse."""
    stream = repo.odb.stream(sha)
    if stream.type != b"tree":
        raise ValueError(f"{sha.hex()} is not a tree")
    return _parse_tree(stream.read())


def _parse_tree(data: bytes) -> dict[str, tuple[bytes, bytes]]:
    entries: dict[str, tuple[bytes, bytes]] = {}
    at = 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        if nul + 21 > len(data):
            raise ValueError("a truncated tree entry")
        name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
        entries[name] = (data[at:space], data[nul + 1 : nul + 21])
        at = nul + 21
    return entries


def _tree_bytes(entries: Mapping[str, tuple[bytes, bytes]]) -> bytes:
    """A tree object's bytes, its entries in Git's order (a folder sorts as if its name
    ended in ``/``)."""

    def order(name: str) -> bytes:
        raw = name.encode("utf-8", "surrogateescape")
        return raw + b"/" if entries[name][0] == _TREE_MODE else raw

    return b"".join(
        mode + b" " + name.encode("utf-8", "surrogateescape") + b"\0" + sha
        for name in sorted(entries, key=order)
        for mode, sha in [entries[name]]
    )
