"""An OCI image layout directory (``oci-layout``, ``index.json``, ``blobs/sha256/``).

Tags are ``org.opencontainers.image.ref.name`` annotations on ``index.json`` entries;
referrers are the manifests in the index whose ``subject`` names the digest. Writes go to
a temporary file renamed into place, so a crash never leaves a half-written blob or index.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from gitops.artifacts.errors import ArtifactError
from gitops.artifacts.format import INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE
from gitops.artifacts.store import Descriptor
from runner.digests import sha256_digest

__all__ = ["LayoutStore"]

REF_NAME = "org.opencontainers.image.ref.name"


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


class LayoutStore:
    """Read and write one OCI layout directory."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    # -- reading -------------------------------------------------------------------------

    def _index(self) -> dict[str, Any]:
        path = self.root / "index.json"
        if not path.is_file():
            raise ArtifactError("not_found", f"{self.root}: not an OCI layout (no index.json)")
        try:
            index = json.loads(path.read_bytes())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ArtifactError("manifest_invalid", f"{path}: not JSON: {error}") from None
        if not isinstance(index, dict) or not isinstance(index.get("manifests", []), list):
            raise ArtifactError("manifest_invalid", f"{path}: not an OCI image index")
        return index

    def _read(self, digest: str, limit: int) -> bytes:
        algorithm, _, hexpart = digest.partition(":")
        if algorithm != "sha256" or len(hexpart) != 64:
            raise ArtifactError("manifest_invalid", f"unsupported digest {digest!r}")
        path = self.root / "blobs" / "sha256" / hexpart
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            raise ArtifactError("not_found", f"{self.root}: no blob {digest}") from None
        if stat.S_ISLNK(mode):
            raise ArtifactError("symlink", f"{path} is a symbolic link")
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise ArtifactError("size_mismatch", f"blob {digest} is larger than {limit} bytes")
        if sha256_digest(data) != digest:
            raise ArtifactError("digest_mismatch", f"blob {digest} in {self.root} was altered")
        return data

    def resolve(self, tag: str) -> Descriptor:
        for entry in self._index().get("manifests", []):
            notes = entry.get("annotations") or {}
            if notes.get(REF_NAME) == tag:
                return Descriptor(
                    entry["digest"],
                    int(entry["size"]),
                    entry.get("mediaType", MANIFEST_MEDIA_TYPE),
                    entry.get("artifactType", ""),
                )
        raise ArtifactError("not_found", f"{self.root}: no tag {tag!r}")

    def manifest(self, digest: str, max_bytes: int) -> bytes:
        return self._read(digest, max_bytes)

    def blob(self, digest: str, size: int) -> bytes:
        data = self._read(digest, size)
        if len(data) != size:
            raise ArtifactError(
                "size_mismatch", f"blob {digest} is {len(data)} bytes, its descriptor says {size}"
            )
        return data

    def referrers(self, digest: str) -> list[Descriptor]:
        found: list[Descriptor] = []
        for entry in self._index().get("manifests", []):
            if entry.get("mediaType", MANIFEST_MEDIA_TYPE) != MANIFEST_MEDIA_TYPE:
                continue
            try:
                document = json.loads(self._read(entry["digest"], 4 * 1024 * 1024))
            except ArtifactError:
                continue
            subject = document.get("subject") or {}
            if subject.get("digest") == digest:
                found.append(
                    Descriptor(
                        entry["digest"],
                        int(entry["size"]),
                        MANIFEST_MEDIA_TYPE,
                        document.get("artifactType", ""),
                        tuple(sorted((document.get("annotations") or {}).items())),
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

    def push_blob(self, digest: str, data: bytes) -> None:
        if sha256_digest(data) != digest:
            raise ArtifactError("digest_mismatch", f"refusing to store a blob as {digest}")
        self._init()
        path = self.root / "blobs" / "sha256" / digest.removeprefix("sha256:")
        if not path.exists():
            _write_atomically(path, data)

    def push_manifest(self, data: bytes, media_type: str, tag: str | None) -> str:
        digest = sha256_digest(data)
        self.push_blob(digest, data)
        index = self._index()
        entries = [
            e
            for e in index.get("manifests", [])
            if tag is None or (e.get("annotations") or {}).get(REF_NAME) != tag
        ]
        entry: dict[str, Any] = {"mediaType": media_type, "digest": digest, "size": len(data)}
        document = json.loads(data)
        if document.get("artifactType"):
            entry["artifactType"] = document["artifactType"]
        if tag is not None:
            entry["annotations"] = {REF_NAME: tag}
        if entry not in entries:
            entries.append(entry)
        index["manifests"] = entries
        _write_atomically(self.root / "index.json", json.dumps(index, indent=2).encode())
        return digest
