"""Sigstore bundles stored beside an artifact, as OCI 1.1 referrers of its manifest.

A keyless signature of a manifest is a Sigstore bundle (a message signature, made by
``sigstore sign`` or any Sigstore client) over the same simple-signing payload a static-key
signature signs (:func:`runner.artifacts.signing.payload_for`: the repository and the
manifest digest). It is stored as one referrer manifest whose ``subject`` is the signed
manifest, with ``artifactType`` ``application/vnd.dev.sigstore.bundle.v0.3+json`` and two
layers: the bundle (that media type) and the payload it signs (the simple-signing type).
The payload travels with the bundle because a message signature carries only its digest;
the verifier checks the bundle over these bytes, then that they name the manifest digest.
Registries without the referrers API find it through the ``sha256-<hex>`` fallback index.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Final

from runner.artifacts.errors import ArtifactError
from runner.artifacts.format import (
    EMPTY_CONFIG_BYTES,
    EMPTY_CONFIG_DIGEST,
)
from runner.artifacts.signing import SIMPLE_SIGNING, manifest_layers, push_referrer
from runner.artifacts.sigstore import MAX_BUNDLE_BYTES
from runner.artifacts.store import Store
from runner.digests import Digest, sha256_digest

__all__ = ["SIGSTORE_BUNDLE", "FoundBundle", "attach_bundle", "find_bundles"]

SIGSTORE_BUNDLE: Final = "application/vnd.dev.sigstore.bundle.v0.3+json"
_MAX_PAYLOAD = 64 * 1024


@dataclass(frozen=True, slots=True)
class FoundBundle:
    """One keyless signature found for a digest: the referrer, the payload and the bundle."""

    referrer: Digest
    payload: bytes
    bundle: bytes


def _signed_digest(bundle: bytes) -> bytes | None:
    try:
        document = json.loads(bundle)
        encoded = document["messageSignature"]["messageDigest"]["digest"]
        return base64.b64decode(encoded, validate=True)
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def attach_bundle(store: Store, digest: Digest, payload: bytes, bundle: bytes) -> Digest:
    """Store ``bundle`` (over ``payload``) as a referrer of ``digest``; the referrer's digest.

    Refused (``invalid_reference``) when the bundle states a message digest other than the
    payload's: such a bundle could never verify, and attaching it would only mislead.
    """
    if len(bundle) > MAX_BUNDLE_BYTES or len(payload) > _MAX_PAYLOAD:
        raise ArtifactError("invalid_reference", "bundle or payload too large to attach")
    if _signed_digest(bundle) != hashlib.sha256(payload).digest():
        raise ArtifactError(
            "invalid_reference", "the bundle is not a message signature over this payload"
        )
    bundle_digest, payload_digest = sha256_digest(bundle), sha256_digest(payload)
    layers = [
        {"mediaType": SIGSTORE_BUNDLE, "digest": bundle_digest, "size": len(bundle)},
        {"mediaType": SIMPLE_SIGNING, "digest": payload_digest, "size": len(payload)},
    ]
    store.push_blob(bundle_digest, bundle)
    store.push_blob(payload_digest, payload)
    store.push_blob(EMPTY_CONFIG_DIGEST, EMPTY_CONFIG_BYTES)
    return push_referrer(store, digest, SIGSTORE_BUNDLE, layers)


def find_bundles(store: Store, digest: Digest) -> list[FoundBundle]:
    """Every Sigstore bundle referrer of ``digest`` with its payload (malformed ones skipped)."""
    found: list[FoundBundle] = []
    for referrer in store.referrers(digest):
        if referrer.artifact_type != SIGSTORE_BUNDLE:
            continue
        by_type = {layer.media_type: layer for layer in manifest_layers(store, referrer.digest)}
        bundle, payload = by_type.get(SIGSTORE_BUNDLE), by_type.get(SIMPLE_SIGNING)
        if bundle is None or payload is None:
            continue
        if bundle.size > MAX_BUNDLE_BYTES or payload.size > _MAX_PAYLOAD:
            continue
        found.append(
            FoundBundle(
                referrer.digest,
                store.blob(payload.digest, payload.size),
                store.blob(bundle.digest, bundle.size),
            )
        )
    return found
