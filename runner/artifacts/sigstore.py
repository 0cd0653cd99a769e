"""Sigstore keyless verification against a trusted root in the repository, never the network.

:func:`verify_bundle` judges one Sigstore bundle (a message signature over the SHA-256 of
``payload``) against the ``KeylessIdentity`` entries a policy allows:

1. The bundle is verified by sigstore-python's unmodified ``Verifier``, built from
   ``TrustedRoot.from_file(repo / identity.trustedRoot)``: the certificate chains to the
   root's CA at the log's integrated time, its embedded SCT verifies under the root's CT
   log key, the log entry's inclusion proof, signed checkpoint and inclusion promise verify
   under the root's transparency log key, the entry matches the signature and certificate,
   and the signature verifies over ``payload``. Any failure is ``bad_signature``.
2. Only then is the certificate's identity compared: the OIDC issuer (extension
   1.3.6.1.4.1.57264.1.8, else the legacy .1.1) against ``issuer`` or ``issuerRegExp``, and
   the subject (a SAN: e-mail, URI or Sigstore's other name) against ``subject`` or
   ``subjectRegExp``. Regular expressions must match the whole value (``re.fullmatch``), so
   ``acme`` never matches ``acme-evil``. No identity matching is ``signer_not_allowed``.

Identities are grouped by trusted root; a bundle may verify under one root and not another.
An identity without ``trustedRoot`` is never satisfied: Seshat does not fetch Sigstore's
public trusted root (that is a TUF download), so it cannot verify offline against it; put
the public root's ``trusted_root.json`` in the repository and name it to use public Sigstore.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from cryptography import x509
from cryptography.hazmat import asn1

from runner.artifacts.policy import KeylessIdentity
from runner.files import NotReadable, read_inside

if TYPE_CHECKING:
    from sigstore.models import TrustedRoot

# sigstore-python itself (with its TUF, Rekor and HTTP clients) is imported where a bundle is
# verified: it is a fifth of a `seshat` process's start-up, and most processes verify none.

__all__ = [
    "BAD_SIGNATURE",
    "SIGNER_NOT_ALLOWED",
    "BundleVerdict",
    "SignerIdentity",
    "certificate_identity",
    "identity_matches",
    "verify_bundle",
]

BAD_SIGNATURE: Final = "bad_signature"
SIGNER_NOT_ALLOWED: Final = "signer_not_allowed"
MAX_BUNDLE_BYTES: Final = 256 * 1024

_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_OTHER_NAME = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.7")


@dataclass(frozen=True, slots=True)
class SignerIdentity:
    """Who a Fulcio-style certificate was issued to: OIDC issuer and subjects (SANs)."""

    issuer: str | None
    subjects: tuple[str, ...]

    @property
    def key(self) -> str:
        """One signer, for counting distinct signers: issuer and first subject."""
        return f"{self.issuer or '?'} {self.subjects[0] if self.subjects else '?'}"


@dataclass(frozen=True, slots=True)
class BundleVerdict:
    """``matched`` (the allowed identities the signer satisfies) or a ``reason``."""

    reason: str | None
    detail: str
    signer: SignerIdentity | None = None
    matched: tuple[KeylessIdentity, ...] = ()

    @property
    def ok(self) -> bool:
        return self.reason is None


class _Capture:
    """A ``VerificationPolicy`` that keeps the certificate; identities are judged after."""

    def __init__(self) -> None:
        self.certificate: x509.Certificate | None = None

    def verify(self, cert: x509.Certificate) -> None:
        self.certificate = cert


def certificate_identity(cert: x509.Certificate) -> SignerIdentity:
    issuer: str | None = None
    try:
        value = cert.extensions.get_extension_for_oid(_ISSUER_V2).value
        if isinstance(value, x509.UnrecognizedExtension):
            issuer = asn1.decode_der(str, value.value)
    except (x509.ExtensionNotFound, ValueError):
        issuer = None
    if issuer is None:
        try:
            value = cert.extensions.get_extension_for_oid(_ISSUER_V1).value
            if isinstance(value, x509.UnrecognizedExtension):
                issuer = value.value.decode("utf-8")
        except (x509.ExtensionNotFound, UnicodeDecodeError):
            issuer = None
    subjects: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return SignerIdentity(issuer, ())
    subjects += san.get_values_for_type(x509.RFC822Name)
    subjects += san.get_values_for_type(x509.UniformResourceIdentifier)
    for other in san.get_values_for_type(x509.OtherName):
        if other.type_id == _OTHER_NAME:
            try:
                subjects.append(asn1.decode_der(str, other.value))
            except ValueError:
                continue
    return SignerIdentity(issuer, tuple(subjects))


def _matches(value: str | None, exact: str | None, pattern: str | None) -> bool:
    if value is None:
        return False
    if exact is not None:
        return value == exact
    return pattern is not None and re.fullmatch(pattern, value) is not None


def identity_matches(identity: KeylessIdentity, signer: SignerIdentity) -> bool:
    """Issuer and one subject both match (exact, or the whole value by the regex)."""
    if not _matches(signer.issuer, identity.issuer, identity.issuer_reg_exp):
        return False
    return any(_matches(s, identity.subject, identity.subject_reg_exp) for s in signer.subjects)


MAX_TRUSTED_ROOT_BYTES: Final = 4 * 1024 * 1024


def _trusted_root(repo: Path, relative: str) -> TrustedRoot:
    """A trusted root file of the repository (a regular file inside it, bounded)."""
    from sigstore.models import TrustedRoot

    data = read_inside(repo, Path(relative), MAX_TRUSTED_ROOT_BYTES)
    if data is None:
        raise ValueError("no such file in the repository")
    # sigstore reads a root only from a path: hand it a private copy of the checked bytes.
    with tempfile.NamedTemporaryFile(prefix="seshat-root-", suffix=".json") as copy:
        copy.write(data)
        copy.flush()
        return TrustedRoot.from_file(copy.name)


def verify_bundle(
    payload: bytes, bundle: bytes, identities: Sequence[KeylessIdentity], repo: Path
) -> BundleVerdict:
    """Judge ``bundle`` over ``payload`` against ``identities``; see the module docstring."""
    from sigstore.errors import Error as SigstoreError
    from sigstore.models import Bundle
    from sigstore.verify import Verifier

    if len(bundle) > MAX_BUNDLE_BYTES:
        return BundleVerdict(BAD_SIGNATURE, f"bundle larger than {MAX_BUNDLE_BYTES} bytes")
    try:
        parsed = Bundle.from_json(bundle)
    except (SigstoreError, ValueError, TypeError, KeyError) as error:
        return BundleVerdict(BAD_SIGNATURE, f"not a usable Sigstore bundle: {error}")
    roots: dict[str, list[KeylessIdentity]] = {}
    for identity in identities:
        if identity.trusted_root is not None:
            roots.setdefault(identity.trusted_root, []).append(identity)
    if not roots:
        return BundleVerdict(
            BAD_SIGNATURE, "no allowed identity names a trustedRoot (needed to verify offline)"
        )
    failures: list[str] = []
    verified: SignerIdentity | None = None
    for root_path, group in roots.items():
        try:
            root = _trusted_root(repo, root_path)
        except (NotReadable, SigstoreError, ValueError) as error:
            failures.append(f"{root_path}: unreadable trusted root ({error})")
            continue
        capture = _Capture()
        try:
            Verifier(trusted_root=root).verify_artifact(payload, parsed, capture)
        except (SigstoreError, ValueError) as error:
            failures.append(f"{root_path}: {error}")
            continue
        if capture.certificate is None:  # pragma: no cover - the verifier always asks
            failures.append(f"{root_path}: no certificate was checked")
            continue
        signer = certificate_identity(capture.certificate)
        verified = signer
        matched = tuple(i for i in group if identity_matches(i, signer))
        if matched:
            return BundleVerdict(None, f"signed by {signer.key} ({root_path})", signer, matched)
    if verified is not None:
        return BundleVerdict(
            SIGNER_NOT_ALLOWED,
            f"signed by {verified.key}, which no allowed identity matches",
            verified,
        )
    return BundleVerdict(BAD_SIGNATURE, "; ".join(failures))
