"""Resolving, fetching and writing out artifacts, through a content-addressed cache.

``resolve`` turns a reference into a digest once. ``fetch`` reads the manifest and every
layer by digest, checking each against the digest and size that name it and the manifest
against the format's bounds; blobs land in the cache (``<cache>/blobs/sha256/<hex>``) only
after they verified, so a cache hit needs no network and can be trusted as much as a fresh
read (it is verified again when read). ``write_files`` extracts into an empty folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runner.artifacts.errors import ArtifactError
from runner.artifacts.format import (
    ARTIFACT_TYPES,
    DEFAULT_LIMITS,
    Limits,
    Manifest,
    check_titles,
    parse_digest,
    parse_manifest,
)
from runner.artifacts.reference import Reference
from runner.artifacts.store import Store
from runner.digests import Digest
from runner.files import NotReadable, read_regular_file

__all__ = ["ContentCache", "Fetched", "fetch", "resolve", "write_files"]


class ContentCache:
    """Blobs by digest under ``root``; every read is verified again.

    Entry paths are built only from a parsed :class:`Digest` (an algorithm name and hex
    digits), so they stay under ``root``; an entry is read only if it is a regular file (not
    a link, FIFO or device), and only such a damaged entry is ever deleted.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, digest: Digest) -> Path:
        digest = parse_digest(digest, "cache entry")
        return self.root / "blobs" / digest.algorithm / digest.hex

    def get(self, digest: Digest, limit: int = DEFAULT_LIMITS.max_total_bytes) -> bytes | None:
        digest = parse_digest(digest, "cache entry")
        path = self._path(digest)
        try:
            data = read_regular_file(path, limit)
        except NotReadable as error:
            if error.reason == "too_large":
                path.unlink(missing_ok=True)  # a damaged entry (a regular file) is fetched again
            return None  # a link, a folder, a FIFO: never read, never deleted
        if data is not None and not digest.matches(data):
            path.unlink(missing_ok=True)
            return None
        return data

    def put(self, digest: Digest, data: bytes) -> None:
        digest = parse_digest(digest, "cache entry")
        if not digest.matches(data):
            raise ArtifactError("digest_mismatch", f"refusing to cache a blob as {digest}")
        path = self._path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)


@dataclass(frozen=True, slots=True)
class Fetched:
    """A verified artifact: its manifest and each file's bytes by title."""

    reference: Reference
    manifest: Manifest
    files: tuple[tuple[str, bytes], ...]


def resolve(store: Store, reference: Reference) -> Digest:
    """The digest ``reference`` names: its own digest, or what its tag points at now."""
    if reference.digest is not None:
        return reference.digest
    return store.resolve(reference.tag or "latest").digest


def fetch(
    store: Store,
    reference: Reference,
    *,
    allowed_types: tuple[str, ...] = tuple(ARTIFACT_TYPES.values()),
    cache: ContentCache | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Fetched:
    """Fetch ``reference`` by digest (resolving a tag first), verifying everything."""
    digest = resolve(store, reference)
    raw = cache.get(digest, limits.max_manifest_bytes) if cache is not None else None
    if raw is None:
        raw = store.manifest(digest, limits.max_manifest_bytes)
    manifest = parse_manifest(raw, digest, allowed_types, limits)
    if cache is not None:
        cache.put(digest, raw)
    files: list[tuple[str, bytes]] = []
    for layer in manifest.layers:
        data = cache.get(layer.digest, layer.size) if cache is not None else None
        if data is None or len(data) != layer.size:
            data = store.blob(layer.digest, layer.size)
            if cache is not None:
                cache.put(layer.digest, data)
        files.append((layer.title, data))
    return Fetched(reference.pinned(digest), manifest, tuple(files))


def write_files(fetched: Fetched, destination: Path) -> list[Path]:
    """Write the artifact's files under ``destination`` (which must be empty or absent).

    Every title is judged first (:func:`check_titles`, the check :func:`parse_manifest`
    made), so a title that is unsafe, too long, a duplicate or another's folder writes
    nothing at all. A write that fails anyway (a full disk) removes what was written, so
    the folder is left as it was found.
    """
    check_titles(title for title, _ in fetched.files)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise ArtifactError("unsafe_path", f"{destination}: not an empty folder")
    created = not destination.exists()
    destination.mkdir(parents=True, exist_ok=True)
    root = destination.resolve()
    written: list[Path] = []
    try:
        for title, data in fetched.files:
            path = (root / title).resolve()
            if not path.is_relative_to(root):  # check_titles refused this; belt and braces
                raise ArtifactError("unsafe_path", f"{title!r} leaves {destination}")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("xb") as out:
                    out.write(data)
            except OSError as error:
                raise ArtifactError(
                    "unsafe_path", f"{title!r} cannot be written ({error.strerror})"
                ) from None
            written.append(path)
    except ArtifactError:
        _empty(root, remove=created)
        raise
    return written


def _empty(root: Path, *, remove: bool) -> None:
    """Remove what a failed :func:`write_files` wrote under ``root`` (empty before it)."""
    if remove:
        shutil.rmtree(root, ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
