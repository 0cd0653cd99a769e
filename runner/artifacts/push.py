"""Pushing a packaged artifact: every blob first, then the manifest under its tag."""

from __future__ import annotations

from runner.artifacts.format import MANIFEST_MEDIA_TYPE, Packaged
from runner.artifacts.reference import Reference
from runner.artifacts.store import Store
from runner.digests import Digest

__all__ = ["push"]


def push(store: Store, reference: Reference, packaged: Packaged) -> Digest:
    """Upload ``packaged`` and tag it (``reference.tag``, default ``latest``); its digest."""
    for digest in sorted(packaged.blobs):
        store.push_blob(digest, packaged.blobs[digest])
    tag = reference.tag if reference.digest is None else None
    return store.push_manifest(packaged.manifest.raw, MANIFEST_MEDIA_TYPE, tag or "latest")
