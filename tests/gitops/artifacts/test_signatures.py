"""Static-key signatures and VerificationPolicy verdicts, against a real registry and layouts.

The test registry (CNCF distribution 2.8) has no referrers API, so referrers are found
through the ``sha256-<hex>`` fallback index the signer maintains; each discovery path is
tested alone by deleting the other's manifest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from harness.registry import RegistryServer
from harness.seshat_cli import SeshatRunner

from gitops.resources.policies import VerificationPolicySpec
from runner.artifacts.format import MANIFEST_MEDIA_TYPE
from runner.artifacts.layout import LayoutStore
from runner.artifacts.reference import parse_reference
from runner.artifacts.registry import RegistryOptions, RegistryStore
from runner.artifacts.signing import SIGNATURE_ANNOTATION, find_signatures
from runner.artifacts.verify import policy_digest, verify_artifact
from runner.digests import Digest, canonical_json, sha256_digest


def _key_pair(directory: Path, name: str, kind: str = "ecdsa") -> tuple[Path, Path]:
    key = (
        ec.generate_private_key(ec.SECP256R1())
        if kind == "ecdsa"
        else (ed25519.Ed25519PrivateKey.generate())
    )
    private = directory / f"{name}.pem"
    public = directory / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def _policy(
    repo: Path,
    keys: dict[str, str],
    *,
    count: int = 1,
    mode: str = "enforce",
    pin: bool = False,
    annotations: tuple[str, ...] = (),
) -> Path:
    path = repo / "policy.yaml"
    authorities = [{"name": name, "key": {"publicKey": key}} for name, key in keys.items()]
    document = {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "VerificationPolicy",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {
            "artifactTypes": ["application/vnd.seshat.schema.v1"],
            "requiredAnnotations": list(annotations),
            "requireDigestPin": pin,
            "signatures": {"mode": mode, "count": count, "authorities": authorities},
        },
    }
    path.write_text(json.dumps(document))  # JSON is YAML
    return path


@pytest.fixture
def layout_ref(seshat: SeshatRunner, schema_folder: Path, tmp_path: Path) -> str:
    ref = f"oci-layout://{tmp_path / 'layout'}:v1"
    pushed = seshat(
        "artifact", "push", schema_folder, ref, "--type", "schema", "--source", "git@x:y"
    )
    assert pushed.returncode == 0, pushed.stderr
    return ref


@pytest.mark.parametrize("kind", ["ecdsa", "ed25519"])
def test_sign_and_verify_with_a_static_key(
    seshat: SeshatRunner, layout_ref: str, tmp_path: Path, kind: str
) -> None:
    private, _ = _key_pair(tmp_path, "ci", kind)
    policy = _policy(tmp_path, {"ci": "ci.pub"}, annotations=("org.opencontainers.image.source",))
    unsigned = seshat("artifact", "verify", layout_ref, "--policy", policy, "--repo", tmp_path)
    assert unsigned.returncode == 1 and "refused: unsigned" in unsigned.stdout

    signed = seshat("artifact", "sign", layout_ref, "--key", private)
    assert signed.returncode == 0, signed.stderr
    verified = seshat("artifact", "verify", layout_ref, "--policy", policy, "--repo", tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "pass  authority ci: signed" in verified.stdout
    assert "pass  required annotations: present" in verified.stdout

    as_json = seshat(
        "artifact",
        "verify",
        layout_ref,
        "--policy",
        policy,
        "--repo",
        tmp_path,
        "--format",
        "json",
    )
    verdict = json.loads(as_json.stdout)
    assert verdict["accepted"] is True and verdict["reason"] is None
    assert verdict["policyDigest"].startswith("sha256:")


def test_both_discovery_paths_on_a_registry(
    seshat: SeshatRunner, schema_folder: Path, oci_registry: RegistryServer, tmp_path: Path
) -> None:
    plain = ("--plain-http", oci_registry.address)
    ref = f"oci://{oci_registry.address}/signed/schema:v1"
    digest = seshat("artifact", *plain, "push", schema_folder, ref, "--type", "schema").stdout
    digest = Digest(digest.strip())
    private, _ = _key_pair(tmp_path, "ci")
    assert seshat("artifact", *plain, "sign", ref, "--key", private).returncode == 0
    store = RegistryStore(
        oci_registry.address,
        "signed/schema",
        RegistryOptions(plain_http=frozenset({oci_registry.address})),
    )
    assert sorted(s.source for s in find_signatures(store, digest)) == ["cosign-tag", "referrer"]
    policy = _policy(tmp_path, {"ci": "ci.pub"})

    def verify() -> int:
        return seshat(
            "artifact", *plain, "verify", ref, "--policy", policy, "--repo", tmp_path
        ).returncode

    # Only the referrer (through the fallback index): delete the cosign .sig manifest.
    cosign = store.resolve(digest.replace(":", "-") + ".sig")
    assert (
        oci_registry.request("DELETE", f"/v2/signed/schema/manifests/{cosign.digest}").status == 202
    )
    assert [s.source for s in find_signatures(store, digest)] == ["referrer"]
    assert verify() == 0
    # Only the cosign tag layout: sign again (restores it), then delete the fallback index.
    assert seshat("artifact", *plain, "sign", ref, "--key", private).returncode == 0
    fallback = store.resolve(digest.replace(":", "-"))  # ECDSA signatures differ each time
    assert (
        oci_registry.request("DELETE", f"/v2/signed/schema/manifests/{fallback.digest}").status
        == 202
    )
    assert [s.source for s in find_signatures(store, digest)] == ["cosign-tag"]
    assert verify() == 0


def _rewrite_cosign_layers(store: LayoutStore, digest: str, edit: object) -> None:
    tag = digest.replace(":", "-") + ".sig"
    document = json.loads(store.manifest(store.resolve(tag).digest, 1 << 20))
    assert callable(edit)
    document["layers"] = edit(document["layers"])
    store.push_manifest(canonical_json(document), MANIFEST_MEDIA_TYPE, tag)


def _drop_referrers(store: LayoutStore, root: Path) -> None:
    index = json.loads((root / "index.json").read_text())
    index["manifests"] = [m for m in index["manifests"] if "annotations" in m]
    (root / "index.json").write_text(json.dumps(index))


def _verdict_reason(store: LayoutStore, ref: str, repo: Path, **policy: object) -> str | None:
    spec_path = _policy(repo, **policy)  # type: ignore[arg-type]
    spec = VerificationPolicySpec.model_validate(json.loads(spec_path.read_text())["spec"])
    return verify_artifact(store, parse_reference(ref), spec, repo).reason


def test_tampered_and_misplaced_signatures(
    seshat: SeshatRunner, layout_ref: str, schema_folder: Path, tmp_path: Path
) -> None:
    root = tmp_path / "layout"
    store = LayoutStore(str(root))
    private, _ = _key_pair(tmp_path, "ci")
    _key_pair(tmp_path, "other")
    digest = Digest(seshat("artifact", "resolve", layout_ref).stdout.strip())
    assert seshat("artifact", "sign", layout_ref, "--key", private).returncode == 0
    _drop_referrers(store, root)  # judge the cosign layout alone
    assert _verdict_reason(store, layout_ref, tmp_path, keys={"ci": "ci.pub"}) is None

    # A signature by a key the policy does not list.
    assert _verdict_reason(store, layout_ref, tmp_path, keys={"other": "other.pub"}) == (
        "bad_signature"
    )

    # The payload modified (its descriptor recomputed), the signature kept.
    def modify(layers: list[dict[str, object]]) -> list[dict[str, object]]:
        original = store.blob(Digest(layers[0]["digest"]), int(str(layers[0]["size"])))
        changed = original.replace(b"cosign container image signature", b"something else")
        store.push_blob(sha256_digest(changed), changed)
        return [layers[0] | {"digest": sha256_digest(changed), "size": len(changed)}]

    _rewrite_cosign_layers(store, digest, modify)
    assert _verdict_reason(store, layout_ref, tmp_path, keys={"ci": "ci.pub"}) == "bad_signature"

    # A valid signature made for another digest, moved onto this one.
    other_ref = f"oci-layout://{tmp_path / 'other'}:v1"
    (schema_folder / "extra.sql").write_text("CREATE TABLE extra (id int);\n")
    assert seshat("artifact", "push", schema_folder, other_ref, "--type", "schema").returncode == 0
    assert seshat("artifact", "sign", other_ref, "--key", private).returncode == 0
    other_store = LayoutStore(str(tmp_path / "other"))
    other_digest = other_store.resolve("v1").digest
    other_sig = json.loads(
        other_store.manifest(
            other_store.resolve(other_digest.replace(":", "-") + ".sig").digest, 1 << 20
        )
    )["layers"]
    for layer in other_sig:
        store.push_blob(layer["digest"], other_store.blob(layer["digest"], layer["size"]))
    assert SIGNATURE_ANNOTATION in other_sig[0]["annotations"]
    _rewrite_cosign_layers(store, digest, lambda _: other_sig)
    assert _verdict_reason(store, layout_ref, tmp_path, keys={"ci": "ci.pub"}) == (
        "signature_for_other_digest"
    )


def test_quorum_warn_pin_and_annotations(
    seshat: SeshatRunner, layout_ref: str, tmp_path: Path
) -> None:
    store = LayoutStore(str(tmp_path / "layout"))
    first, _ = _key_pair(tmp_path, "alice")
    _key_pair(tmp_path, "bob")
    two = {"alice": "alice.pub", "bob": "bob.pub"}
    # One signer signing twice satisfies one authority, not a quorum of two.
    assert seshat("artifact", "sign", layout_ref, "--key", first).returncode == 0
    assert seshat("artifact", "sign", layout_ref, "--key", first).returncode == 0
    assert _verdict_reason(store, layout_ref, tmp_path, keys=two, count=2) == "quorum_not_met"
    assert _verdict_reason(store, layout_ref, tmp_path, keys=two, count=1) is None

    # warn: the failed requirement is reported, the artifact accepted.
    policy = _policy(tmp_path, {"bob": "bob.pub"}, mode="warn")
    warned = seshat("artifact", "verify", layout_ref, "--policy", policy, "--repo", tmp_path)
    assert warned.returncode == 0
    assert "FAIL  authority bob" in warned.stdout and "accepted despite bad_signature" in (
        warned.stdout
    )

    # A tag where the policy wants a digest; then the digest itself.
    assert _verdict_reason(store, layout_ref, tmp_path, keys=two, pin=True) == (
        "digest_pin_required"
    )
    digest = store.resolve("v1").digest
    pinned = layout_ref.rsplit(":", 1)[0] + "@" + digest
    assert _verdict_reason(store, pinned, tmp_path, keys={"alice": "alice.pub"}, pin=True) is None

    missing = _verdict_reason(
        store, layout_ref, tmp_path, keys=two, annotations=("org.opencontainers.image.revision",)
    )
    assert missing == "missing_annotation"


def test_policy_digest_is_canonical() -> None:
    base = {
        "artifactTypes": ["application/vnd.seshat.schema.v1"],
        "signatures": {"authorities": [{"name": "a", "key": {"publicKey": "k.pub"}}]},
    }
    a = VerificationPolicySpec.model_validate(base)
    b = VerificationPolicySpec.model_validate(json.loads(json.dumps(base)))
    c = VerificationPolicySpec.model_validate(base | {"requireDigestPin": True})
    assert policy_digest(a) == policy_digest(b) != policy_digest(c)
