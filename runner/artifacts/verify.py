"""Evaluating a ``VerificationPolicy`` against an artifact: a typed verdict, check by check.

The order is fixed: digest pin, artifact type, required annotations, then signatures. Each
requirement becomes a :class:`VerifyCheck` (what was required, whether it passed, why), so
``seshat artifact verify`` can print them and the reconciler can store the first failure's
stable ``reason``. In ``warn`` mode failed signature checks are reported but do not refuse.

A static-key authority is satisfied by a signature that verifies under its key *and* whose
payload names this manifest digest (a valid signature of another digest counts for
nothing). Authorities are distinct by name, so one key signing twice satisfies one.

A keyless authority is satisfied by a Sigstore bundle referrer (``runner.artifacts.keyless``)
that verifies against the authority's ``trustedRoot`` with a certificate identity it allows
(``runner.artifacts.sigstore``) *and* whose payload names this manifest digest. Each signer
identity (OIDC issuer and subject) satisfies at most one keyless authority, so one identity
signing twice, or two authorities whose patterns both match it, count once. A valid keyless
signature of this digest by an identity no authority allows is ``identity_mismatch``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from runner.artifacts.errors import ArtifactError
from runner.artifacts.format import DEFAULT_LIMITS, Limits, Manifest, parse_manifest
from runner.artifacts.policy import (
    Authority,
    SignatureMode,
    VerificationPolicySpec,
    policy_digest,
)
from runner.artifacts.reference import Reference
from runner.artifacts.signing import (
    FoundSignature,
    find_signatures,
    load_public_key,
    verify_signature,
)
from runner.artifacts.store import Store
from runner.digests import Digest
from runner.files import NotReadable, read_inside
from runner.protocol.results import VerifyCheck

if TYPE_CHECKING:
    from runner.artifacts.keyless import FoundBundle

__all__ = ["Verdict", "policy_digest", "verify_artifact"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """``accepted``, or refused with a stable ``reason``; ``checks`` says what was judged."""

    accepted: bool
    reason: str | None
    digest: Digest | None
    checks: tuple[VerifyCheck, ...]
    manifest: Manifest | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "accepted": self.accepted,
            "reason": self.reason,
            "digest": self.digest,
            "checks": [
                {"requirement": c.requirement, "passed": c.passed, "detail": c.detail}
                for c in self.checks
            ],
        }


def _payload_digest(payload: bytes) -> str | None:
    try:
        document = json.loads(payload)
        value = document["critical"]["image"]["docker-manifest-digest"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _assign(candidates: dict[str, set[str]]) -> dict[str, str]:
    """Authorities to distinct signers, as many as possible (augmenting paths)."""
    owner: dict[str, str] = {}

    def place(authority: str, seen: set[str]) -> bool:
        for signer in sorted(candidates[authority]):
            if signer in seen:
                continue
            seen.add(signer)
            if signer not in owner or place(owner[signer], seen):
                owner[signer] = authority
                return True
        return False

    for authority in candidates:
        place(authority, set())
    return {authority: signer for signer, authority in owner.items()}


@dataclass(frozen=True, slots=True)
class _Keyless:
    candidates: dict[str, set[str]]  # authority name -> signer identities that satisfy it
    invalid: int
    other_digest: int
    mismatched: int


MAX_PUBLIC_KEY: Final = 64 * 1024


def _key_file(repo: Path, relative: str) -> bytes:
    """A policy's public key file: a regular file of the repository, bounded."""
    try:
        data = read_inside(repo, Path(relative), MAX_PUBLIC_KEY)
    except NotReadable as error:
        raise ArtifactError("invalid_reference", f"{relative}: {error.detail}") from None
    if data is None:
        raise ArtifactError("invalid_reference", f"{relative}: no such file in the repository")
    return data


def _keyless(
    authorities: list[Authority], repo: Path, digest: str, found: list[FoundBundle]
) -> _Keyless:
    from runner.artifacts.sigstore import BAD_SIGNATURE, verify_bundle

    keyless = [a for a in authorities if a.keyless is not None]
    candidates: dict[str, set[str]] = {a.name: set() for a in keyless}
    invalid = other_digest = mismatched = 0
    allowed = [a.keyless for a in keyless if a.keyless is not None]
    for bundle in found if allowed else []:  # bundles mean nothing to a keys-only policy
        judged = verify_bundle(bundle.payload, bundle.bundle, allowed, repo)
        if judged.signer is None or judged.reason == BAD_SIGNATURE:
            invalid += 1
            continue
        if _payload_digest(bundle.payload) != digest:
            other_digest += 1
            continue
        if not judged.ok:
            mismatched += 1
            continue
        for authority in keyless:
            if authority.keyless in judged.matched:
                candidates[authority.name].add(judged.signer.key)
    return _Keyless(candidates, invalid, other_digest, mismatched)


def _signature_checks(
    spec: VerificationPolicySpec,
    repo: Path,
    digest: str,
    found: list[FoundSignature],
    bundles: list[FoundBundle],
) -> tuple[list[VerifyCheck], str | None]:
    requirements = spec.signatures
    satisfied: list[str] = []
    checks: list[VerifyCheck] = []
    invalid = other_digest = 0
    judged = _keyless(requirements.authorities, repo, digest, bundles)
    assigned = _assign(judged.candidates)
    keys = {}
    for authority in requirements.authorities:
        if authority.key is not None:
            keys[authority.name] = load_public_key(
                _key_file(repo, authority.key.public_key), authority.key.public_key
            )
    # Each signature is checked once against each key; everything below reads this table.
    valid_by = {
        name: [s for s in found if verify_signature(key, s.payload, s.signature)]
        for name, key in keys.items()
    }
    for signature in found:
        if not any(signature in valid for valid in valid_by.values()):
            invalid += 1
        elif _payload_digest(signature.payload) != digest:
            other_digest += 1
    for authority in requirements.authorities:
        if authority.key is None:
            signer = assigned.get(authority.name)
            if signer is not None:
                satisfied.append(authority.name)
                checks.append(
                    VerifyCheck(f"authority {authority.name}", True, f"signed by {signer}")
                )
            elif judged.candidates[authority.name]:
                checks.append(
                    VerifyCheck(
                        f"authority {authority.name}",
                        False,
                        "its only signers already count for another authority",
                    )
                )
            else:
                detail = (
                    "no valid Sigstore bundle of this digest by this identity"
                    if authority.keyless is not None and authority.keyless.trusted_root
                    else "no trustedRoot: keyless verification is offline and needs one"
                )
                checks.append(VerifyCheck(f"authority {authority.name}", False, detail))
            continue
        good = [s for s in valid_by[authority.name] if _payload_digest(s.payload) == digest]
        if good:
            satisfied.append(authority.name)
            checks.append(
                VerifyCheck(f"authority {authority.name}", True, f"signed ({good[0].source})")
            )
        else:
            checks.append(
                VerifyCheck(f"authority {authority.name}", False, "no valid signature by this key")
            )
    count_ok = len(satisfied) >= requirements.count
    checks.append(
        VerifyCheck(
            f"{requirements.count} of {len(requirements.authorities)} authorities",
            count_ok,
            f"{len(satisfied)} satisfied ({', '.join(satisfied) or 'none'}); "
            f"{len(found)} signatures and {len(bundles)} Sigstore bundles found",
        )
    )
    if count_ok:
        return checks, None
    if satisfied:
        return checks, "quorum_not_met"
    if other_digest or judged.other_digest:
        return checks, "signature_for_other_digest"
    if judged.mismatched:
        return checks, "identity_mismatch"
    if invalid or judged.invalid:
        return checks, "bad_signature"
    return checks, "unsigned"


def verify_artifact(
    store: Store,
    reference: Reference,
    spec: VerificationPolicySpec,
    repo: Path,
    limits: Limits = DEFAULT_LIMITS,
    *,
    digest: Digest | None = None,
) -> Verdict:
    """Judge ``reference`` against ``spec``; key files are read relative to ``repo``.

    ``digest``: what the reference's tag was resolved to already (by Resolve), so the
    digest pin is still judged on the reference as declared."""
    checks: list[VerifyCheck] = []
    if spec.require_digest_pin:
        pinned = reference.digest is not None
        checks.append(VerifyCheck("reference pinned by digest", pinned, str(reference)))
        if not pinned:
            return Verdict(False, "digest_pin_required", None, tuple(checks))
    try:
        digest = reference.digest or digest or store.resolve(reference.tag or "latest").digest
        raw = store.manifest(digest, limits.max_manifest_bytes)
        manifest = parse_manifest(raw, digest, tuple(spec.artifact_types), limits)
    except ArtifactError as error:
        checks.append(
            VerifyCheck("artifact readable and of an accepted type", False, error.message)
        )
        return Verdict(False, error.reason, None, tuple(checks))
    checks.append(VerifyCheck("artifact type", True, manifest.artifact_type))
    missing = [a for a in spec.required_annotations if not manifest.annotations.get(a)]
    checks.append(
        VerifyCheck(
            "required annotations",
            not missing,
            f"missing {', '.join(missing)}" if missing else "present",
        )
    )
    if missing:
        return Verdict(False, "missing_annotation", digest, tuple(checks), manifest)
    if spec.signatures.mode is SignatureMode.OFF:
        checks.append(VerifyCheck("signatures", True, "not required (mode off)"))
        return Verdict(True, None, digest, tuple(checks), manifest)
    signature_checks, reason = _signature_checks(
        spec, repo, digest, find_signatures(store, digest), _bundles(store, spec, digest)
    )
    checks += signature_checks
    if reason is not None and spec.signatures.mode is SignatureMode.WARN:
        checks.append(VerifyCheck("mode warn", True, f"accepted despite {reason}"))
        return Verdict(True, None, digest, tuple(checks), manifest)
    return Verdict(reason is None, reason, digest, tuple(checks), manifest)


def _bundles(store: Store, spec: VerificationPolicySpec, digest: Digest) -> list[FoundBundle]:
    """The Sigstore bundle referrers of ``digest``, read only for a policy with a keyless
    authority (they mean nothing to a keys-only one, and the Sigstore client is slow to
    import: a runner verifying static keys never loads it)."""
    if not any(a.keyless is not None for a in spec.signatures.authorities):
        return []
    from runner.artifacts.keyless import find_bundles

    return find_bundles(store, digest)
