"""A private Sigstore deployment, built offline in the test with ``cryptography``.

Three keys stand in for the three public services:

* a Fulcio-like CA (a self-signed root) issuing short-lived code-signing certificates whose
  SAN (e-mail or URI) is the subject and whose OIDC issuer is in both the legacy extension
  (1.3.6.1.4.1.57264.1.1, raw bytes) and the current one (.1.8, a DER UTF8String);
* a CT log key signing a real embedded SCT over the precertificate (RFC 6962: the TBS
  certificate without the SCT list extension, issued again with it);
* a Rekor-like transparency log key producing a ``hashedrekord`` 0.0.1 entry for each
  signature: an inclusion proof in an RFC 6962 Merkle tree (with other entries around it),
  a signed checkpoint (signed-note format) and an inclusion promise (SET).

:meth:`PrivateSigstore.trusted_root` is the protobuf-specs ``TrustedRoot`` JSON naming the
CA, the CT log and the tlog, which the unmodified ``sigstore.verify.Verifier`` accepts
bundles from :meth:`PrivateSigstore.mint_bundle` against.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["BUNDLE_MEDIA_TYPE", "PrivateSigstore"]

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
TRUSTED_ROOT_MEDIA_TYPE = "application/vnd.dev.sigstore.trustedroot+json;version=0.1"
_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_SCT_LIST = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _spki(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _key_id(key: ec.EllipticCurvePrivateKey) -> bytes:
    return hashlib.sha256(_spki(key)).digest()


def _der_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    body = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than ``size`` (RFC 6962, 2.1)."""
    k = 1
    while k * 2 < size:
        k *= 2
    return k


def _tree_hash(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node_hash(_tree_hash(leaves[:k]), _tree_hash(leaves[k:]))


def _audit_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 2.1.1 PATH(m, D[n]), leaf to root."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*_audit_path(index, leaves[:k]), _tree_hash(leaves[k:])]
    return [*_audit_path(index - k, leaves[k:]), _tree_hash(leaves[:k])]


class PrivateSigstore:
    """One private Sigstore instance: CA, CT log and transparency log, all in memory."""

    def __init__(self, name: str = "seshat-test") -> None:
        self.name = name
        self.now = datetime.now(UTC).replace(microsecond=0)
        self.ca_key = ec.generate_private_key(ec.SECP384R1())
        self.ct_key = ec.generate_private_key(ec.SECP256R1())
        self.log_key = ec.generate_private_key(ec.SECP256R1())
        self.origin = f"{name}.rekor.invalid - 1"
        self._entries: list[bytes] = [f"{name} genesis {i}".encode() for i in range(5)]
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, name),
                x509.NameAttribute(NameOID.COMMON_NAME, f"{name} fulcio root"),
            ]
        )
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.now - timedelta(days=1))
            .not_valid_after(self.now + timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.ca_key.public_key()),
                critical=False,
            )
            .sign(self.ca_key, hashes.SHA384())
        )

    # -- the trusted root -------------------------------------------------------------------

    def _public_key(self, key: ec.EllipticCurvePrivateKey) -> dict[str, object]:
        return {
            "rawBytes": _b64(_spki(key)),
            "keyDetails": "PKIX_ECDSA_P256_SHA_256",
            "validFor": {"start": (self.now - timedelta(days=1)).isoformat()},
        }

    def trusted_root(self) -> dict[str, object]:
        """The Sigstore protobuf-specs ``TrustedRoot`` of this instance, as JSON data."""
        return {
            "mediaType": TRUSTED_ROOT_MEDIA_TYPE,
            "tlogs": [
                {
                    "baseUrl": f"https://{self.name}.rekor.invalid",
                    "hashAlgorithm": "SHA2_256",
                    "publicKey": self._public_key(self.log_key),
                    "logId": {"keyId": _b64(_key_id(self.log_key))},
                }
            ],
            "certificateAuthorities": [
                {
                    "subject": {"organization": self.name, "commonName": f"{self.name} fulcio"},
                    "uri": f"https://{self.name}.fulcio.invalid",
                    "certChain": {
                        "certificates": [
                            {
                                "rawBytes": _b64(
                                    self.ca_cert.public_bytes(serialization.Encoding.DER)
                                )
                            }
                        ]
                    },
                    "validFor": {"start": (self.now - timedelta(days=1)).isoformat()},
                }
            ],
            "ctlogs": [
                {
                    "baseUrl": f"https://{self.name}.ctfe.invalid",
                    "hashAlgorithm": "SHA2_256",
                    "publicKey": self._public_key(self.ct_key),
                    "logId": {"keyId": _b64(_key_id(self.ct_key))},
                }
            ],
            "timestampAuthorities": [],
        }

    def write_trusted_root(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.trusted_root(), indent=2) + "\n")
        return path

    # -- Fulcio and the CT log --------------------------------------------------------------

    def _sct_list(self, tbs: bytes, timestamp_ms: int) -> bytes:
        issuer_key_hash = hashlib.sha256(
            self.ca_key.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        ).digest()
        signed = (
            struct.pack("!BBQH", 0, 0, timestamp_ms, 1)
            + issuer_key_hash
            + len(tbs).to_bytes(3, "big")
            + tbs
            + struct.pack("!H", 0)
        )
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (
            struct.pack("!B", 0)
            + _key_id(self.ct_key)
            + struct.pack("!QH", timestamp_ms, 0)
            + struct.pack("!BBH", 4, 3, len(signature))
            + signature
        )
        serialized = struct.pack("!H", len(sct)) + sct
        tls_list = struct.pack("!H", len(serialized)) + serialized
        return b"\x04" + _der_length(len(tls_list)) + tls_list

    def issue(
        self, key: ec.EllipticCurvePrivateKey, identity: str, issuer: str, at: datetime
    ) -> x509.Certificate:
        """A code-signing leaf for ``identity`` (an e-mail, or a URI with '://')."""
        name: x509.GeneralName = (
            x509.UniformResourceIdentifier(identity)
            if "://" in identity
            else x509.RFC822Name(identity)
        )
        issuer_der = b"\x0c" + _der_length(len(issuer.encode())) + issuer.encode()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(at - timedelta(seconds=30))
            .not_valid_after(at + timedelta(minutes=10))
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), False)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()),
                critical=False,
            )
            .add_extension(x509.SubjectAlternativeName([name]), critical=True)
            .add_extension(x509.UnrecognizedExtension(_ISSUER_V1, issuer.encode()), False)
            .add_extension(x509.UnrecognizedExtension(_ISSUER_V2, issuer_der), False)
        )
        precert = builder.sign(self.ca_key, hashes.SHA384())
        sct = self._sct_list(precert.tbs_certificate_bytes, int(at.timestamp()) * 1000)
        final = builder.add_extension(x509.UnrecognizedExtension(_SCT_LIST, sct), False).sign(
            self.ca_key, hashes.SHA384()
        )
        assert final.tbs_precertificate_bytes == precert.tbs_certificate_bytes
        return final

    # -- Rekor ------------------------------------------------------------------------------

    def _log(self, body: bytes, integrated_time: int) -> dict[str, object]:
        index = len(self._entries)
        self._entries.append(body)
        # A few entries after ours too, so the proof has both inner and border hashes.
        self._entries += [f"{self.name} later {index}.{i}".encode() for i in range(2)]
        leaves = [_leaf_hash(entry) for entry in self._entries]
        root = _tree_hash(leaves)
        size = len(leaves)
        note = f"{self.origin}\n{size}\n{_b64(root)}\n"
        note_signature = self.log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = (
            f"{note}\n\u2014 {self.origin.split()[0]} "
            f"{_b64(_key_id(self.log_key)[:4] + note_signature)}\n"
        )
        log_id = _key_id(self.log_key)
        promise = rfc8785.dumps(
            {
                "body": _b64(body),
                "integratedTime": integrated_time,
                "logID": log_id.hex(),
                "logIndex": index,
            }
        )
        return {
            "logIndex": str(index),
            "logId": {"keyId": _b64(log_id)},
            "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionPromise": {
                "signedEntryTimestamp": _b64(self.log_key.sign(promise, ec.ECDSA(hashes.SHA256())))
            },
            "inclusionProof": {
                "logIndex": str(index),
                "rootHash": _b64(root),
                "treeSize": str(size),
                "hashes": [_b64(h) for h in _audit_path(index, leaves)],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": _b64(body),
        }

    # -- signing ----------------------------------------------------------------------------

    def mint_bundle(self, payload: bytes, identity: str, issuer: str) -> bytes:
        """A v0.3 bundle: a message signature over ``sha256(payload)`` by ``identity``."""
        at = datetime.fromtimestamp(int(time.time()), UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self.issue(key, identity, issuer, at)
        digest = hashlib.sha256(payload).digest()
        signature = key.sign(payload, ec.ECDSA(hashes.SHA256()))
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        body = rfc8785.dumps(
            {
                "apiVersion": "0.0.1",
                "kind": "hashedrekord",
                "spec": {
                    "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
                    "signature": {
                        "content": _b64(signature),
                        "publicKey": {"content": _b64(cert_pem)},
                    },
                },
            }
        )
        bundle = {
            "mediaType": BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {
                "certificate": {"rawBytes": _b64(cert.public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [self._log(body, int(at.timestamp()))],
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": _b64(digest)},
                "signature": _b64(signature),
            },
        }
        return json.dumps(bundle, indent=2).encode() + b"\n"
