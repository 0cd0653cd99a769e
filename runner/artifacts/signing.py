"""Static-key signatures over a manifest digest, in cosign's format.

The signed payload is cosign's "simple signing" JSON naming the repository and the manifest
digest; the signature (ECDSA P-256 over SHA-256, DER, or Ed25519) is base64 in the layer
annotation ``dev.cosignproject.cosign/signature``. A signature is stored two ways, so both
older and newer tools find it:

* the cosign tag layout: a manifest tagged ``sha256-<hex>.sig`` whose layers are the
  payloads, one per signature;
* an OCI 1.1 referrer: a manifest whose ``subject`` is the signed manifest (found through
  the referrers API, or the ``sha256-<hex>`` fallback index the signer maintains when the
  registry has no such API).

Keys are PEM files: PKCS#8 private keys (optionally encrypted, the password from
``SESHAT_SIGNING_KEY_PASSWORD``) and SubjectPublicKeyInfo public keys. cosign's own
scrypt-encrypted key format is not read: export the key to PKCS#8 first.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from runner.artifacts.errors import ArtifactError
from runner.artifacts.format import (
    EMPTY_CONFIG,
    EMPTY_CONFIG_BYTES,
    EMPTY_CONFIG_DIGEST,
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    load_json,
    parse_descriptor,
)
from runner.artifacts.reference import Reference
from runner.artifacts.store import Descriptor, Store
from runner.digests import Digest, canonical_json, sha256_digest

__all__ = [
    "SIGNATURE_ANNOTATION",
    "SIMPLE_SIGNING",
    "FoundSignature",
    "find_signatures",
    "load_private_key",
    "load_public_key",
    "push_referrer",
    "sign",
    "verify_signature",
]

SIMPLE_SIGNING: Final = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION: Final = "dev.cosignproject.cosign/signature"
_MAX_PAYLOAD = 64 * 1024

PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey


def load_private_key(path: Path) -> PrivateKey:
    password = os.environ.get("SESHAT_SIGNING_KEY_PASSWORD")
    try:
        key = serialization.load_pem_private_key(
            path.read_bytes(), password.encode() if password else None
        )
    except (OSError, ValueError, TypeError) as error:
        raise ArtifactError(
            "invalid_reference", f"{path}: not a usable private key ({error})"
        ) from None
    _supported(key, str(path))
    assert isinstance(key, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey)
    return key


def load_public_key(data: bytes, where: str) -> PublicKey:
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as error:
        raise ArtifactError(
            "invalid_reference", f"{where}: not a PEM public key ({error})"
        ) from None
    _supported(key, where)
    assert isinstance(key, ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey)
    return key


def _supported(key: object, where: str) -> None:
    """Refuse a key of any kind but ECDSA P-256 and Ed25519 (private or public)."""
    p256 = isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) and isinstance(
        key.curve, ec.SECP256R1
    )
    if not (p256 or isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey)):
        raise ArtifactError(
            "invalid_reference", f"{where}: only ECDSA P-256 and Ed25519 keys are supported"
        )


def payload_for(reference: Reference, digest: Digest) -> bytes:
    """cosign's simple-signing payload for ``digest`` in ``reference``'s repository."""
    identity = (
        f"{reference.registry}/{reference.repository}"
        if reference.transport == "oci"
        else reference.layout
    )
    return json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": identity},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        },
        separators=(",", ":"),
    ).encode()


def _sign_bytes(key: PrivateKey, data: bytes) -> bytes:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(data)
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def verify_signature(key: PublicKey, payload: bytes, signature: bytes) -> bool:
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, payload)
        else:
            key.verify(signature, payload, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def _layer(payload: bytes, signature: bytes) -> dict[str, Any]:
    return {
        "mediaType": SIMPLE_SIGNING,
        "digest": sha256_digest(payload),
        "size": len(payload),
        "annotations": {SIGNATURE_ANNOTATION: base64.b64encode(signature).decode("ascii")},
    }


def _list(document: dict[str, Any], name: str) -> list[Any]:
    """``document[name]`` if it is a list; anything else holds nothing."""
    value = document.get(name)
    return value if isinstance(value, list) else []


def _cosign_tag(digest: Digest) -> str:
    return f"{digest.algorithm}-{digest.hex}.sig"


def sign(store: Store, reference: Reference, digest: Digest, key: PrivateKey) -> list[Digest]:
    """Sign ``digest`` with ``key`` in both layouts; the digests of the manifests written."""
    payload = payload_for(reference, digest)
    layer = _layer(payload, _sign_bytes(key, payload))
    store.push_blob(sha256_digest(payload), payload)
    store.push_blob(EMPTY_CONFIG_DIGEST, EMPTY_CONFIG_BYTES)
    written: list[Digest] = []
    # 1. The cosign tag layout: append to the existing .sig manifest, if any.
    layers: list[dict[str, Any]] = []
    try:
        existing = store.resolve(_cosign_tag(digest))
        document = load_json(store.manifest(existing.digest, 4 * 1024 * 1024), "signatures")
        layers = [entry for entry in _list(document, "layers") if isinstance(entry, dict)]
    except ArtifactError as error:
        if error.reason != "not_found":
            raise
    if layer not in layers:
        layers.append(layer)
    cosign_manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": dict(EMPTY_CONFIG),
            "layers": layers,
        }
    )
    written.append(store.push_manifest(cosign_manifest, MANIFEST_MEDIA_TYPE, _cosign_tag(digest)))
    # 2. An OCI 1.1 referrer naming the signed manifest as its subject.
    written.append(push_referrer(store, digest, SIMPLE_SIGNING, [layer]))
    return written


def push_referrer(
    store: Store, digest: Digest, artifact_type: str, layers: list[dict[str, Any]]
) -> Digest:
    """Push an OCI 1.1 referrer of ``digest`` (its blobs are pushed already) and list it
    where the registry has no referrers API; the referrer's digest."""
    subject = store.manifest(digest, 4 * 1024 * 1024)
    referrer = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": artifact_type,
            "config": dict(EMPTY_CONFIG),
            "layers": layers,
            "subject": {"mediaType": MANIFEST_MEDIA_TYPE, "digest": digest, "size": len(subject)},
        }
    )
    written = store.push_manifest(referrer, MANIFEST_MEDIA_TYPE, None)
    _update_fallback_index(
        store, digest, Descriptor(written, len(referrer), MANIFEST_MEDIA_TYPE, artifact_type)
    )
    return written


def _update_fallback_index(store: Store, digest: Digest, entry: Descriptor) -> None:
    """Keep the ``sha256-<hex>`` referrers index current where the registry has no API."""
    from runner.artifacts.registry import RegistryStore

    if not isinstance(store, RegistryStore) or store.has_referrers_api(digest):
        return  # a layout lists referrers from its index.json; the API lists them itself
    tag = f"{digest.algorithm}-{digest.hex}"
    manifests: list[dict[str, Any]] = []
    try:
        current = store.resolve(tag)
        document = load_json(store.manifest(current.digest, 4 * 1024 * 1024), "referrers")
        manifests = [m for m in _list(document, "manifests") if isinstance(m, dict)]
    except ArtifactError as error:
        if error.reason != "not_found":
            raise
    if all(m.get("digest") != entry.digest for m in manifests):
        manifests.append(entry.to_json())
    index = canonical_json(
        {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": manifests}
    )
    store.push_manifest(index, INDEX_MEDIA_TYPE, tag)


@dataclass(frozen=True, slots=True)
class FoundSignature:
    """One signature found for a digest: where, the payload and the raw signature."""

    source: str  # "cosign-tag" | "referrer"
    payload: bytes
    signature: bytes


def manifest_layers(store: Store, manifest_digest: Digest) -> list[Descriptor]:
    """The well-formed layer descriptors of a signature manifest; malformed ones (and a
    manifest that is not JSON) are left out, since they cannot vouch for anything."""
    raw = store.manifest(manifest_digest, 4 * 1024 * 1024)
    try:
        document = load_json(raw, f"signature manifest {manifest_digest}")
    except ArtifactError:
        return []
    found: list[Descriptor] = []
    for number, entry in enumerate(_list(document, "layers")):
        try:
            found.append(parse_descriptor(entry, f"layer {number}"))
        except ArtifactError:
            continue
    return found


def _signatures_in(store: Store, manifest_digest: Digest, source: str) -> list[FoundSignature]:
    found: list[FoundSignature] = []
    for layer in manifest_layers(store, manifest_digest):
        if layer.media_type != SIMPLE_SIGNING or layer.size > _MAX_PAYLOAD:
            continue
        encoded = layer.annotation(SIGNATURE_ANNOTATION)
        if encoded is None:
            continue
        try:
            signature = base64.b64decode(encoded, validate=True)
        except ValueError:
            continue
        payload = store.blob(layer.digest, layer.size)
        found.append(FoundSignature(source, payload, signature))
    return found


def find_signatures(store: Store, digest: Digest) -> list[FoundSignature]:
    """Every simple-signing signature of ``digest``: cosign tag layout and referrers."""
    found: list[FoundSignature] = []
    try:
        tagged = store.resolve(_cosign_tag(digest))
        found += _signatures_in(store, tagged.digest, "cosign-tag")
    except ArtifactError as error:
        if error.reason != "not_found":
            raise
    for referrer in store.referrers(digest):
        if referrer.artifact_type == SIMPLE_SIGNING:
            found += _signatures_in(store, referrer.digest, "referrer")
    return found
