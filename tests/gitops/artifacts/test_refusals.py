"""Every artifact refusal, each with its stable reason, on real OCI layout directories.

Tampering needs write access to the storage, so these build artifacts in a layout (the same
verification code serves registries: a store only returns bytes; fetch checks them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from harness.seshat_cli import SeshatRunner

from gitops.artifacts.errors import ArtifactError
from gitops.artifacts.fetch import fetch
from gitops.artifacts.format import (
    ARTIFACT_TYPES,
    EMPTY_CONFIG,
    EMPTY_CONFIG_BYTES,
    FILE_MEDIA_TYPE,
    Limits,
    package_folder,
)
from gitops.artifacts.layout import LayoutStore
from gitops.artifacts.reference import parse_reference
from runner.digests import canonical_json, sha256_digest


def _layer(store: LayoutStore, title: str, data: bytes, size: int | None = None) -> dict[str, Any]:
    digest = sha256_digest(data)
    store.push_blob(digest, data)
    return {
        "mediaType": FILE_MEDIA_TYPE,
        "digest": digest,
        "size": len(data) if size is None else size,
        "annotations": {"org.opencontainers.image.title": title},
    }


def _crafted(root: Path, layers: list[dict[str, Any]], kind: str = "schema") -> str:
    store = LayoutStore(str(root))
    store.push_blob(str(EMPTY_CONFIG["digest"]), EMPTY_CONFIG_BYTES)
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": ARTIFACT_TYPES[kind],
            "config": EMPTY_CONFIG,
            "layers": layers,
        }
    )
    return store.push_manifest(manifest, "application/vnd.oci.image.manifest.v1+json", "v1")


def _reason(root: Path, limits: Limits | None = None, **kwargs: Any) -> str:
    with pytest.raises(ArtifactError) as caught:
        fetch(
            LayoutStore(str(root)),
            parse_reference(f"oci-layout://{root}:v1"),
            limits=limits or Limits(),
            **kwargs,
        )
    return caught.value.reason


@pytest.mark.parametrize(
    ("title", "reason"),
    [
        ("../escape.sql", "unsafe_path"),
        ("/etc/passwd", "unsafe_path"),
        ("a/./b.sql", "unsafe_path"),
        ("a//b.sql", "unsafe_path"),
        ("bad\nname.sql", "invalid_name"),
        ("back\\slash.sql", "invalid_name"),
    ],
)
def test_unsafe_titles_are_refused(tmp_path: Path, title: str, reason: str) -> None:
    store = LayoutStore(str(tmp_path / "l"))
    _crafted(tmp_path / "l", [_layer(store, title, b"SELECT 1;")])
    assert _reason(tmp_path / "l") == reason


def test_duplicate_titles_are_refused(tmp_path: Path) -> None:
    store = LayoutStore(str(tmp_path / "l"))
    layers = [_layer(store, "a.sql", b"SELECT 1;"), _layer(store, "a.sql", b"SELECT 2;")]
    _crafted(tmp_path / "l", layers)
    assert _reason(tmp_path / "l") == "duplicate_title"


def test_bounds_are_enforced_before_downloading(tmp_path: Path) -> None:
    store = LayoutStore(str(tmp_path / "l"))
    # The descriptor claims 5 MiB: refused from the manifest alone (the blob is tiny).
    _crafted(tmp_path / "l", [_layer(store, "big.sql", b"x", size=5 * 1024 * 1024)])
    assert _reason(tmp_path / "l") == "file_too_large"
    many = [_layer(store, f"{i:03}.sql", f"SELECT {i};".encode()) for i in range(3)]
    _crafted(tmp_path / "l", many)
    assert _reason(tmp_path / "l", Limits(max_files=2)) == "too_many_files"
    assert _reason(tmp_path / "l", Limits(max_total_bytes=10)) == "artifact_too_large"


def test_wrong_artifact_type(seshat: SeshatRunner, schema_folder: Path, tmp_path: Path) -> None:
    ref = f"oci-layout://{tmp_path / 'l'}:v1"
    assert seshat("artifact", "push", schema_folder, ref, "--type", "schema").returncode == 0
    refused = seshat("artifact", "pull", ref, tmp_path / "out", "--type", "migrations")
    assert refused.returncode == 1
    assert "wrong_artifact_type" in refused.stderr
    assert not (tmp_path / "out").exists()


def test_altered_manifest_and_blobs(schema_folder: Path, tmp_path: Path) -> None:
    root = tmp_path / "l"
    store = LayoutStore(str(root))
    packaged = package_folder(schema_folder, "schema", {})
    for digest, data in packaged.blobs.items():
        store.push_blob(digest, data)
    digest = store.push_manifest(
        packaged.manifest, "application/vnd.oci.image.manifest.v1+json", "v1"
    )
    blobs = root / "blobs" / "sha256"

    # A layer altered on storage.
    layer = json.loads(packaged.manifest)["layers"][0]
    layer_path = blobs / layer["digest"].removeprefix("sha256:")
    original = layer_path.read_bytes()
    layer_path.write_bytes(original.replace(b"orders", b"ORDERS"))
    assert _reason(root) == "digest_mismatch"
    layer_path.write_bytes(original + b"-- more\n")
    assert _reason(root) == "size_mismatch"
    layer_path.write_bytes(original)

    # The manifest itself altered: it no longer hashes to the digest the tag names.
    manifest_path = blobs / digest.removeprefix("sha256:")
    manifest_path.write_bytes(packaged.manifest.replace(b"types.sql", b"typez.sql"))
    assert _reason(root) == "digest_mismatch"
    manifest_path.write_bytes(packaged.manifest)
    assert [t for t, _ in fetch(store, parse_reference(f"oci-layout://{root}:v1")).files] == [
        "tables/orders.sql",
        "types.sql",
    ]


def test_push_refuses_symlinks_and_non_utf8_names(
    seshat: SeshatRunner, schema_folder: Path, tmp_path: Path
) -> None:
    ref = f"oci-layout://{tmp_path / 'l'}:v1"
    (schema_folder / "link.sql").symlink_to(schema_folder / "types.sql")
    linked = seshat("artifact", "push", schema_folder, ref, "--type", "schema")
    assert linked.returncode == 1 and "symlink" in linked.stderr
    (schema_folder / "link.sql").unlink()
    os.close(os.open(os.fsencode(schema_folder) + b"/bad\xff.sql", os.O_CREAT | os.O_WRONLY))
    named = seshat("artifact", "push", schema_folder, ref, "--type", "schema")
    assert named.returncode == 1 and "invalid_name" in named.stderr


def test_invalid_references_are_refused_with_a_reason(seshat: SeshatRunner) -> None:
    for ref in ("docker://x/y:z", "oci://", "oci://host/UPPER:tag", "oci://host/repo@sha256:12"):
        done = seshat("artifact", "resolve", ref)
        assert done.returncode == 1, ref
        assert "invalid_reference" in done.stderr, ref
