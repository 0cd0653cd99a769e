"""Where artifacts live: a registry or an OCI image layout, behind one small interface.

Every read is verified here or by the caller against the digest that names it: a store
returns bytes, never trusts them. Tags are resolved to digests exactly once, by
:meth:`Store.resolve`; everything after that addresses content by digest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gitops.artifacts.reference import Reference

__all__ = ["Descriptor", "Store", "open_store"]


@dataclass(frozen=True, slots=True)
class Descriptor:
    """What a tag resolves to, or one referrer: digest, size, media and artifact type."""

    digest: str
    size: int
    media_type: str
    artifact_type: str = ""
    annotations: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.size,
        }
        if self.artifact_type:
            data["artifactType"] = self.artifact_type
        if self.annotations:
            data["annotations"] = dict(self.annotations)
        return data


class Store(Protocol):
    """One repository in a registry, or one OCI layout directory."""

    def resolve(self, tag: str) -> Descriptor:
        """The manifest a tag names now (not_found if none)."""
        ...

    def manifest(self, digest: str, max_bytes: int) -> bytes:
        """A manifest's bytes, verified against ``digest``."""
        ...

    def blob(self, digest: str, size: int) -> bytes:
        """A blob's bytes, verified against ``digest`` and ``size``."""
        ...

    def push_blob(self, digest: str, data: bytes) -> None: ...

    def push_manifest(self, data: bytes, media_type: str, tag: str | None) -> str:
        """Store a manifest (and point ``tag`` at it); returns its digest."""
        ...

    def referrers(self, digest: str) -> list[Descriptor]:
        """OCI 1.1 referrers of ``digest`` (the API, or the tag-schema fallback)."""
        ...


def open_store(reference: Reference, options: Any = None) -> Store:
    """The store ``reference`` points into (``options``: registry connection settings)."""
    if reference.transport == "oci-layout":
        from gitops.artifacts.layout import LayoutStore

        return LayoutStore(reference.layout)
    from gitops.artifacts.registry import RegistryOptions, RegistryStore

    return RegistryStore(reference.registry, reference.repository, options or RegistryOptions())
