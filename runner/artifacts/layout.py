"""An OCI image layout directory (``oci-layout``, ``index.json``, ``blobs/sha256/``).

Tags are ``org.opencontainers.image.ref.name`` annotations on ``index.json`` entries;
referrers are the manifests in the index whose ``subject`` names the digest. Writes go to
a temporary file renamed into place, so a crash never leaves a half-written blob or index.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from runner.artifacts.errors import ArtifactError
from runner.artifacts.format import (
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    Descriptor,
    load_json,
    parse_digest,
    parse_index,
)
from runner.digests import Digest, sha256_digest
from runner.files import NotReadable, read_regular_file

__all__ = ["LayoutStore"]

REF_NAME = "org.opencontainers.image.ref.name"
_MAX_INDEX = 4 * 1024 * 1024


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


_REFUSALS = {"symlink": "symlink", "too_large": "size_mismatch", "not_regular": "unsafe_path"}
"""Why a layout file was not read -> the artifact refusal reason (else ``not_found``)."""


def _read_regular(path: Path, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of a regular file in the layout (see :mod:`runner.files`)."""
    try:
        data = read_regular_file(path, limit)
    except NotReadable as error:
        reason = _REFUSALS.get(error.reason, "not_found")
        if error.reason == "too_large":
            raise ArtifactError(reason, f"{what} is larger than {limit} bytes") from None
        raise ArtifactError(reason, f"{path} {error.detail}") from None
    if data is None:
        raise ArtifactError("not_found", f"{path.parent}: no {what}")
    return data


class LayoutStore:
    """Read and write one OCI layout directory."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    # -- reading -------------------------------------------------------------------------

    def _index(self) -> tuple[dict[str, Any], tuple[Descriptor, ...]]:
        """``index.json``, parsed once (:func:`parse_index`): a malformed index, or any
        malformed entry in it, is ``manifest_invalid`` for every use of the layout."""
        path = self.root / "index.json"
        return parse_index(_read_regular(path, _MAX_INDEX, "index.json"), str(path))

    def _entries(self) -> tuple[Descriptor, ...]:
        return self._index()[1]

    def _blob_path(self, digest: Digest) -> Path:
        digest = parse_digest(digest, "blob")
        return self.root / "blobs" / digest.algorithm / digest.hex

    def _read(self, digest: Digest, limit: int) -> bytes:
        digest = parse_digest(digest, "blob")
        data = _read_regular(self._blob_path(digest), limit, f"blob {digest}")
        if not digest.matches(data):
            raise ArtifactError("digest_mismatch", f"blob {digest} in {self.root} was altered")
        return data

    def resolve(self, tag: str) -> Descriptor:
        for entry in self._entries():
            if entry.annotation(REF_NAME) == tag:
                return Descriptor(
                    entry.digest,
                    entry.size,
                    entry.media_type or MANIFEST_MEDIA_TYPE,
                    entry.artifact_type,
                )
        raise ArtifactError("not_found", f"{self.root}: no tag {tag!r}")

    def manifest(self, digest: Digest, max_bytes: int) -> bytes:
        return self._read(digest, max_bytes)

    def blob(self, digest: Digest, size: int) -> bytes:
        data = self._read(digest, size)
        if len(data) != size:
            raise ArtifactError(
                "size_mismatch", f"blob {digest} is {len(data)} bytes, its descriptor says {size}"
            )
        return data

    def referrers(self, digest: Digest) -> list[Descriptor]:
        digest = parse_digest(digest, "subject")
        found: list[Descriptor] = []
        for entry in self._entries():
            if (entry.media_type or MANIFEST_MEDIA_TYPE) != MANIFEST_MEDIA_TYPE:
                continue
            try:
                document = load_json(self._read(entry.digest, _MAX_INDEX), "referrer")
            except ArtifactError:
                continue  # not a manifest Seshat can read: it refers to nothing
            subject = document.get("subject")
            artifact_type = document.get("artifactType", "")
            notes = document.get("annotations") or {}
            if (
                isinstance(subject, dict)
                and subject.get("digest") == digest
                and isinstance(artifact_type, str)
                and isinstance(notes, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in notes.items())
            ):
                found.append(
                    Descriptor(
                        entry.digest,
                        entry.size,
                        MANIFEST_MEDIA_TYPE,
                        artifact_type,
                        tuple(sorted(notes.items())),
                    )
                )
        return sorted(found, key=lambda d: d.digest)

    # -- writing -------------------------------------------------------------------------

    def _init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        marker = self.root / "oci-layout"
        if not marker.exists():
            _write_atomically(marker, b'{"imageLayoutVersion":"1.0.0"}')
        if not (self.root / "index.json").exists():
            index = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": []}
            _write_atomically(self.root / "index.json", json.dumps(index).encode())

    def push_blob(self, digest: Digest, data: bytes) -> None:
        digest = parse_digest(digest, "blob")
        if not digest.matches(data):
            raise ArtifactError("digest_mismatch", f"refusing to store a blob as {digest}")
        self._init()
        path = self._blob_path(digest)
        if not path.exists():
            _write_atomically(path, data)

    def push_manifest(self, data: bytes, media_type: str, tag: str | None) -> Digest:
        document = load_json(data, "manifest")
        digest = sha256_digest(data)
        self.push_blob(digest, data)
        index, parsed = self._index()  # refuses to rewrite an index with a malformed entry
        entries = [
            raw
            for raw, entry in zip(index["manifests"], parsed, strict=True)
            if tag is None or entry.annotation(REF_NAME) != tag
        ]
        entry: dict[str, Any] = {"mediaType": media_type, "digest": digest, "size": len(data)}
        artifact_type = document.get("artifactType")
        if artifact_type and isinstance(artifact_type, str):
            entry["artifactType"] = artifact_type
        if tag is not None:
            entry["annotations"] = {REF_NAME: tag}
        if entry not in entries:
            entries.append(entry)
        index["manifests"] = entries
        _write_atomically(self.root / "index.json", json.dumps(index, indent=2).encode())
        return digest
