"""Resource uids: one per lifetime of a resource, derived from the repository's history.

A resource's uid must stay the same while it exists and must change when it is deleted and
declared again under the same name, so that an approval signed for the old resource
authorizes nothing for the new one. Seshat derives it from Git, so it needs no state of its
own and any clone computes the same value:

    uid = digest("uid", {kind, namespace, name, introducedIn})

where ``introducedIn`` is the first-parent commit of the watched branch at which the
resource (by kind, namespace and name, in any declaration file) last came into existence.
Walking the first-parent history oldest-first, a resource "comes into existence" at a commit
where some declaration file declares it and none did in the commit before. Moving it between
files, or editing it, keeps its uid; removing it in one commit and adding it back in a later
one gives it a new uid. A resource that is not committed yet (or a directory that is not a
Git work tree) gets ``introducedIn: "worktree"``: such uids are previews and change once the
resource is committed.

The reconciler clones with full history; a shallow clone starts history at its shallow
boundary and so computes different uids for resources introduced before it.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Protocol

from gitops.repo.problems import ResourceKey
from gitops.repo.yamlfile import FileError, read_documents
from gitops.resources.kinds import KINDS
from runner.digests import digest

__all__ = ["WORKTREE", "GitHistoryUids", "UidSource", "uid_from"]

WORKTREE: Final = "worktree"


class UidSource(Protocol):
    """Gives each resource the uid of its current lifetime."""

    def uid_for(self, key: ResourceKey) -> str: ...


def uid_from(key: ResourceKey, introduced_in: str) -> str:
    """The uid of ``key`` introduced at commit ``introduced_in``, in UUID spelling."""
    hexed = digest(
        "uid",
        {
            "kind": key.kind,
            "namespace": key.namespace,
            "name": key.name,
            "introducedIn": introduced_in,
        },
    ).removeprefix("sha256:")
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"


def declared_keys(raw: bytes) -> set[ResourceKey]:
    """The resource keys a YAML file declares. It is read like any declaration file (the
    same size, alias and type guards); a file that does not load declares none."""
    keys: set[ResourceKey] = set()
    try:
        documents = read_documents(raw)
    except FileError:
        return keys
    for document in documents:
        data = document.data
        if not isinstance(data, dict):
            continue
        kind, metadata = data.get("kind"), data.get("metadata")
        if not isinstance(kind, str) or kind not in KINDS or not isinstance(metadata, dict):
            continue
        name, namespace = metadata.get("name"), metadata.get("namespace", "default")
        if isinstance(name, str) and isinstance(namespace, str):
            keys.add(ResourceKey(kind, namespace, name))
    return keys


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def _read_blobs(top: Path, names: list[str]) -> list[bytes | None]:
    """The contents of ``commit:path`` objects in one ``git cat-file --batch`` run."""
    if not names:
        return []
    out = subprocess.run(
        ["git", "cat-file", "--batch"],
        cwd=top,
        input="".join(f"{name}\n" for name in names).encode(),
        check=True,
        capture_output=True,
    ).stdout
    contents: list[bytes | None] = []
    offset = 0
    for _ in names:
        end = out.index(b"\n", offset)
        header = out[offset:end].split()
        offset = end + 1
        if len(header) == 3:  # "<sha> <type> <size>", then the content
            size = int(header[2])
            contents.append(out[offset : offset + size] if header[1] == b"blob" else None)
            offset += size + 1
        else:
            contents.append(None)  # "<name> missing": the file was deleted by this commit
    return contents


class GitHistoryUids:
    """Uids from the first-parent history of ``HEAD`` of the work tree holding ``root``."""

    def __init__(self, root: Path, paths: Iterable[str]) -> None:
        self._introduced: dict[ResourceKey, str] = {}
        try:
            # One process: the top of the work tree, then HEAD's commit (exit 1 without one).
            top = Path(
                _git(root, "rev-parse", "--show-toplevel", "--verify", "-q", "HEAD").split("\n")[0]
            )
        except (subprocess.CalledProcessError, FileNotFoundError):
            return  # not a Git work tree, or no commit yet: every uid is a preview
        prefix = root.resolve().relative_to(top.resolve()).as_posix()
        scoped = [p if prefix == "." else f"{prefix}/{p}" for p in paths]
        self._walk(top, scoped)

    def _walk(self, top: Path, paths: list[str]) -> None:
        log = _git(
            top,
            "log",
            "--first-parent",
            "--reverse",
            "--no-renames",
            "--diff-merges=first-parent",
            "--name-only",
            "--format=%x00%H",
            "HEAD",
            "--",
            *paths,
        )
        changes: list[tuple[str, str]] = []
        for chunk in log.split("\0")[1:]:
            commit, *changed = [line for line in chunk.splitlines() if line.strip()]
            changes += [(commit, path) for path in changed if path.endswith((".yaml", ".yml"))]
        contents = _read_blobs(top, [f"{commit}:{path}" for commit, path in changes])
        in_file: dict[str, set[ResourceKey]] = {}
        present: Counter[ResourceKey] = Counter()
        index = 0
        while index < len(changes):
            commit = changes[index][0]
            # A commit is applied as a whole, so moving a resource between files (removed
            # from one, added to another in the same commit) keeps its lifetime.
            existed: dict[ResourceKey, bool] = {}
            while index < len(changes) and changes[index][0] == commit:
                path, content = changes[index][1], contents[index]
                now = declared_keys(content) if content else set()
                before = in_file.get(path, set())
                for key in before ^ now:
                    existed.setdefault(key, present[key] > 0)
                    present[key] += 1 if key in now else -1
                in_file[path] = now
                index += 1
            for key, was_there in existed.items():
                if was_there and present[key] <= 0:
                    del present[key]
                    self._introduced.pop(key, None)
                elif not was_there and present[key] > 0:
                    self._introduced[key] = commit

    def uid_for(self, key: ResourceKey) -> str:
        return uid_from(key, self._introduced.get(key, WORKTREE))
