"""Where artifacts live: a registry or an OCI image layout, behind one small interface.

Every read is verified here or by the caller against the digest that names it: a store
returns bytes, never trusts them. Tags are resolved to digests exactly once, by
:meth:`Store.resolve`; everything after that addresses content by digest.
"""

from __future__ import annotations

from typing import Any, Protocol

from runner.artifacts.format import Descriptor
from runner.artifacts.reference import Reference
from runner.digests import Digest

__all__ = ["Descriptor", "Store", "open_store"]


class Store(Protocol):
    """One repository in a registry, or one OCI layout directory."""

    def resolve(self, tag: str) -> Descriptor:
        """The manifest a tag names now (not_found if none)."""
        ...

    def manifest(self, digest: Digest, max_bytes: int) -> bytes:
        """A manifest's bytes, verified against ``digest``."""
        ...

    def blob(self, digest: Digest, size: int) -> bytes:
        """A blob's bytes, verified against ``digest`` and ``size``."""
        ...

    def push_blob(self, digest: Digest, data: bytes) -> None: ...

    def push_manifest(self, data: bytes, media_type: str, tag: str | None) -> Digest:
        """Store a manifest (and point ``tag`` at it); returns its digest."""
        ...

    def referrers(self, digest: Digest) -> list[Descriptor]:
        """OCI 1.1 referrers of ``digest`` (the API, or the tag-schema fallback)."""
        ...


def open_store(reference: Reference, options: Any = None) -> Store:
    """The store ``reference`` points into (``options``: registry connection settings)."""
    if reference.transport == "oci-layout":
        from runner.artifacts.layout import LayoutStore

        return LayoutStore(reference.layout)
    from runner.artifacts.registry import RegistryOptions, RegistryStore

    return RegistryStore(reference.registry, reference.repository, options or RegistryOptions())
