"""Keyless authorities of a VerificationPolicy: Sigstore bundles from a private Sigstore
instance, attached as OCI 1.1 referrers (OCI layouts and the real registry), verified by the
unmodified sigstore-python verifier against the repository's trusted root."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from harness.registry import RegistryServer
from harness.seshat_cli import SeshatRunner
from harness.sigstore_root import PrivateSigstore

from gitops.resources.policies import VerificationPolicySpec
from runner.artifacts.errors import ArtifactError
from runner.artifacts.format import MANIFEST_MEDIA_TYPE
from runner.artifacts.keyless import SIGSTORE_BUNDLE, attach_bundle, find_bundles
from runner.artifacts.layout import LayoutStore
from runner.artifacts.reference import parse_reference
from runner.artifacts.registry import RegistryOptions, RegistryStore
from runner.artifacts.signing import SIMPLE_SIGNING, payload_for
from runner.artifacts.store import Store
from runner.artifacts.verify import Verdict, verify_artifact
from runner.digests import Digest, canonical_json, sha256_digest

ISSUER = "https://token.actions.githubusercontent.com"
RELEASE = "https://github.com/acme/db/.github/workflows/release.yml@refs/tags/v1"
OTHER_RELEASE = "https://github.com/acme/web/.github/workflows/release.yml@refs/tags/v1"
ROOT = "policies/sigstore/trusted_root.json"
ACME = {
    "issuer": ISSUER,
    "subjectRegExp": "https://github.com/acme/.*",
    "trustedRoot": ROOT,
}


def _spec(authorities: dict[str, dict[str, str]], count: int = 1) -> dict[str, object]:
    return {
        "artifactTypes": ["application/vnd.seshat.schema.v1"],
        "signatures": {
            "mode": "enforce",
            "count": count,
            "authorities": [{"name": n, "keyless": k} for n, k in authorities.items()],
        },
    }


def _verify(store: Store, ref: str, repo: Path, spec: dict[str, object]) -> Verdict:
    parsed = VerificationPolicySpec.model_validate(spec)
    return verify_artifact(store, parse_reference(ref), parsed, repo)


@pytest.fixture
def repo(tmp_path: Path, sigstore_instance: PrivateSigstore) -> Path:
    root = tmp_path / "repo"
    sigstore_instance.write_trusted_root(root / ROOT)
    return root


@pytest.fixture
def layout(seshat: SeshatRunner, schema_folder: Path, tmp_path: Path) -> tuple[str, Digest]:
    """A pushed schema artifact in an OCI layout: its reference and manifest digest."""
    ref = f"oci-layout://{tmp_path / 'layout'}:v1"
    pushed = seshat("artifact", "push", schema_folder, ref, "--type", "schema")
    assert pushed.returncode == 0, pushed.stderr
    return ref, Digest(pushed.stdout.strip())


def _store(ref: str) -> LayoutStore:
    return LayoutStore(parse_reference(ref).layout)


def _payload(ref: str, digest: Digest) -> bytes:
    return payload_for(parse_reference(ref), digest)


def test_attach_bundle_and_verify_with_the_cli(
    seshat: SeshatRunner,
    layout: tuple[str, Digest],
    repo: Path,
    sigstore_instance: PrivateSigstore,
    tmp_path: Path,
) -> None:
    ref, digest = layout
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        json.dumps(
            {
                "apiVersion": "seshat.dev/v1alpha1",
                "kind": "VerificationPolicy",
                "metadata": {"name": "p", "namespace": "shop"},
                "spec": _spec({"release": ACME}),
            }
        )
    )
    verify = ("artifact", "verify", ref, "--policy", policy, "--repo", repo)
    unsigned = seshat(*verify)
    assert unsigned.returncode == 1 and "refused: unsigned" in unsigned.stdout

    payload = seshat("artifact", "payload", ref)
    assert payload.returncode == 0, payload.stderr
    assert json.loads(payload.stdout)["critical"]["image"]["docker-manifest-digest"] == digest
    (tmp_path / "payload.json").write_text(payload.stdout)
    (tmp_path / "bundle.json").write_bytes(
        sigstore_instance.mint_bundle(payload.stdout.encode(), RELEASE, ISSUER)
    )
    attached = seshat(
        "artifact",
        "attach-bundle",
        ref,
        "--bundle",
        tmp_path / "bundle.json",
        "--payload",
        tmp_path / "payload.json",
    )
    assert attached.returncode == 0, attached.stderr
    referrer = _store(ref).referrers(digest)
    assert [r.artifact_type for r in referrer] == [SIGSTORE_BUNDLE]
    assert referrer[0].digest == attached.stdout.strip()

    verified = seshat(*verify)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"pass  authority release: signed by {ISSUER} {RELEASE}" in verified.stdout

    # A bundle over other bytes is refused before anything is stored.
    (tmp_path / "other.json").write_bytes(sigstore_instance.mint_bundle(b"x", RELEASE, ISSUER))
    refused = seshat("artifact", "attach-bundle", ref, "--bundle", tmp_path / "other.json")
    assert refused.returncode == 1 and "not a message signature over this payload" in (
        refused.stderr
    )
    assert len(_store(ref).referrers(digest)) == 1


def test_found_on_a_registry_through_the_fallback_index(
    seshat: SeshatRunner,
    schema_folder: Path,
    oci_registry: RegistryServer,
    repo: Path,
    sigstore_instance: PrivateSigstore,
) -> None:
    plain = ("--plain-http", oci_registry.address)
    ref = f"oci://{oci_registry.address}/keyless/schema:v1"
    pushed = seshat("artifact", *plain, "push", schema_folder, ref, "--type", "schema")
    assert pushed.returncode == 0, pushed.stderr
    digest = Digest(pushed.stdout.strip())
    store = RegistryStore(
        oci_registry.address,
        "keyless/schema",
        RegistryOptions(plain_http=frozenset({oci_registry.address})),
    )
    spec = _spec({"release": ACME})
    assert _verify(store, ref, repo, spec).reason == "unsigned"
    payload = _payload(ref, digest)
    attach_bundle(store, digest, payload, sigstore_instance.mint_bundle(payload, RELEASE, ISSUER))
    assert not store.has_referrers_api(digest)  # found through the sha256-<hex> index
    assert [b.payload for b in find_bundles(store, digest)] == [payload]
    verdict = _verify(store, ref, repo, spec)
    assert verdict.accepted, verdict.checks


def _swap_payload(ref: str, digest: Digest, payload: bytes) -> None:
    """Replace the payload layer of the one bundle referrer (its descriptor recomputed)."""
    store = _store(ref)
    (old,) = store.referrers(digest)
    document = json.loads(store.manifest(old.digest, 1 << 20))
    for layer in document["layers"]:
        if layer["mediaType"] == SIMPLE_SIGNING:
            layer["digest"], layer["size"] = sha256_digest(payload), len(payload)
    store.push_blob(sha256_digest(payload), payload)
    store.push_manifest(canonical_json(document), MANIFEST_MEDIA_TYPE, None)
    index_path = Path(parse_reference(ref).layout) / "index.json"
    index = json.loads(index_path.read_text())
    index["manifests"] = [m for m in index["manifests"] if m["digest"] != old.digest]
    index_path.write_text(json.dumps(index))


def test_tampered_payload_is_a_bad_signature(
    layout: tuple[str, Digest], repo: Path, sigstore_instance: PrivateSigstore
) -> None:
    ref, digest = layout
    payload = _payload(ref, digest)
    bundle = sigstore_instance.mint_bundle(payload, RELEASE, ISSUER)
    attach_bundle(_store(ref), digest, payload, bundle)
    assert _verify(_store(ref), ref, repo, _spec({"release": ACME})).accepted
    # Still naming this digest, but not the bytes that were signed.
    edited = payload.replace(b"cosign container image signature", b"cosign container image sig")
    assert edited != payload
    _swap_payload(ref, digest, edited)
    verdict = _verify(_store(ref), ref, repo, _spec({"release": ACME}))
    assert verdict.reason == "bad_signature", verdict.checks


def test_bundle_for_another_digest(
    layout: tuple[str, Digest], repo: Path, sigstore_instance: PrivateSigstore
) -> None:
    ref, digest = layout
    other = _payload(ref, Digest("sha256:" + "0" * 64))
    attach_bundle(_store(ref), digest, other, sigstore_instance.mint_bundle(other, RELEASE, ISSUER))
    verdict = _verify(_store(ref), ref, repo, _spec({"release": ACME}))
    assert verdict.reason == "signature_for_other_digest", verdict.checks


@pytest.mark.parametrize(
    ("subject", "issuer"),
    [
        ("https://github.com/evil/db/.github/workflows/release.yml@refs/tags/v1", ISSUER),
        # the allowed pattern inside a longer subject: only a whole-value match counts
        ("https://github.com/evil/x?https://github.com/acme/db", ISSUER),
        (RELEASE, "https://accounts.example.com"),
    ],
)
def test_identity_not_allowed(
    layout: tuple[str, Digest],
    repo: Path,
    sigstore_instance: PrivateSigstore,
    subject: str,
    issuer: str,
) -> None:
    ref, digest = layout
    payload = _payload(ref, digest)
    attach_bundle(
        _store(ref), digest, payload, sigstore_instance.mint_bundle(payload, subject, issuer)
    )
    verdict = _verify(_store(ref), ref, repo, _spec({"release": ACME}))
    assert verdict.reason == "identity_mismatch", verdict.checks


def test_a_pattern_without_anchors_is_still_anchored(
    layout: tuple[str, Digest], repo: Path, sigstore_instance: PrivateSigstore
) -> None:
    ref, digest = layout
    payload = _payload(ref, digest)
    store = _store(ref)
    attach_bundle(store, digest, payload, sigstore_instance.mint_bundle(payload, RELEASE, ISSUER))
    loose = {"issuer": ISSUER, "subjectRegExp": "github.com/acme", "trustedRoot": ROOT}
    assert _verify(store, ref, repo, _spec({"release": loose})).reason == "identity_mismatch"
    prefix = {"issuerRegExp": "https://token", "subject": RELEASE, "trustedRoot": ROOT}
    assert _verify(store, ref, repo, _spec({"release": prefix})).reason == "identity_mismatch"


def test_one_identity_signing_twice_satisfies_one_authority(
    layout: tuple[str, Digest], repo: Path, sigstore_instance: PrivateSigstore
) -> None:
    ref, digest = layout
    payload = _payload(ref, digest)
    store = _store(ref)
    for _ in range(2):  # two certificates and log entries, one identity
        attach_bundle(
            store, digest, payload, sigstore_instance.mint_bundle(payload, RELEASE, ISSUER)
        )
    assert len(find_bundles(store, digest)) == 2
    two = _spec({"db": ACME, "org": ACME}, count=2)  # both patterns match the one signer
    verdict = _verify(store, ref, repo, two)
    assert verdict.reason == "quorum_not_met", verdict.checks
    attach_bundle(
        store, digest, payload, sigstore_instance.mint_bundle(payload, OTHER_RELEASE, ISSUER)
    )
    verdict = _verify(store, ref, repo, two)
    assert verdict.accepted, verdict.checks


def test_bundle_from_a_ca_outside_the_trusted_root(
    layout: tuple[str, Digest], repo: Path, untrusted_sigstore: PrivateSigstore
) -> None:
    ref, digest = layout
    payload = _payload(ref, digest)
    attach_bundle(
        _store(ref), digest, payload, untrusted_sigstore.mint_bundle(payload, RELEASE, ISSUER)
    )
    verdict = _verify(_store(ref), ref, repo, _spec({"release": ACME}))
    assert verdict.reason == "bad_signature", verdict.checks


def test_an_identity_without_a_trusted_root_is_never_satisfied(
    layout: tuple[str, Digest], repo: Path, sigstore_instance: PrivateSigstore
) -> None:
    ref, digest = layout
    payload = _payload(ref, digest)
    store = _store(ref)
    attach_bundle(store, digest, payload, sigstore_instance.mint_bundle(payload, RELEASE, ISSUER))
    public = {"issuer": ISSUER, "subject": RELEASE}  # would need the network (TUF): refused
    verdict = _verify(store, ref, repo, _spec({"release": public}))
    assert verdict.reason == "bad_signature", verdict.checks
    assert any("no trustedRoot" in check.detail for check in verdict.checks)
    assert _verify(store, ref, repo, _spec({"release": ACME})).accepted


def test_attach_refuses_a_bundle_over_other_bytes(
    layout: tuple[str, Digest], sigstore_instance: PrivateSigstore
) -> None:
    ref, digest = layout
    with pytest.raises(ArtifactError) as refused:
        attach_bundle(
            _store(ref),
            digest,
            _payload(ref, digest),
            sigstore_instance.mint_bundle(b"x", RELEASE, ISSUER),
        )
    assert refused.value.reason == "invalid_reference"
    assert _store(ref).referrers(digest) == []


def test_verification_never_touches_the_network(
    layout: tuple[str, Digest],
    repo: Path,
    sigstore_instance: PrivateSigstore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ref, digest = layout
    payload = _payload(ref, digest)
    store = _store(ref)
    attach_bundle(store, digest, payload, sigstore_instance.mint_bundle(payload, RELEASE, ISSUER))
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network access in an offline verification")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    verdict = _verify(store, ref, repo, _spec({"release": ACME}))
    assert verdict.accepted, verdict.checks
    assert attempts == []
