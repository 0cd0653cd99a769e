"""Every artifact refusal, each with its stable reason, on real OCI layout directories.

Tampering needs write access to the storage, so these build artifacts in a layout (the same
verification code serves registries: a store only returns bytes; fetch checks them).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.seshat_cli import SeshatRunner

from runner.artifacts.errors import ArtifactError
from runner.artifacts.fetch import ContentCache, fetch
from runner.artifacts.format import (
    ARTIFACT_TYPES,
    EMPTY_CONFIG,
    EMPTY_CONFIG_BYTES,
    EMPTY_CONFIG_DIGEST,
    FILE_MEDIA_TYPE,
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    Limits,
    package_folder,
)
from runner.artifacts.layout import LayoutStore
from runner.artifacts.reference import parse_reference
from runner.digests import Digest, canonical_json, sha256_digest


def _layer(store: LayoutStore, title: str, data: bytes, size: int | None = None) -> dict[str, Any]:
    digest = sha256_digest(data)
    store.push_blob(digest, data)
    return {
        "mediaType": FILE_MEDIA_TYPE,
        "digest": digest,
        "size": len(data) if size is None else size,
        "annotations": {"org.opencontainers.image.title": title},
    }


def _crafted(root: Path, layers: list[dict[str, Any]], kind: str = "schema") -> Digest:
    store = LayoutStore(str(root))
    store.push_blob(EMPTY_CONFIG_DIGEST, EMPTY_CONFIG_BYTES)
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
        packaged.manifest.raw, "application/vnd.oci.image.manifest.v1+json", "v1"
    )
    blobs = root / "blobs" / "sha256"

    # A layer altered on storage.
    layer = json.loads(packaged.manifest.raw)["layers"][0]
    layer_path = blobs / layer["digest"].removeprefix("sha256:")
    original = layer_path.read_bytes()
    layer_path.write_bytes(original.replace(b"orders", b"ORDERS"))
    assert _reason(root) == "digest_mismatch"
    layer_path.write_bytes(original + b"-- more\n")
    assert _reason(root) == "size_mismatch"
    layer_path.write_bytes(original)

    # The manifest itself altered: it no longer hashes to the digest the tag names.
    manifest_path = blobs / digest.removeprefix("sha256:")
    manifest_path.write_bytes(packaged.manifest.raw.replace(b"types.sql", b"typez.sql"))
    assert _reason(root) == "digest_mismatch"
    manifest_path.write_bytes(packaged.manifest.raw)
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


# -- Crafted digests never reach the filesystem (hardening issue, finding 1) -------------------


def _path_digest(target: Path) -> str:
    """``sha256:`` followed by 64 characters that spell an absolute path to ``target``: the
    shape an attacker uses so that ``blobs/sha256/<rest>`` becomes ``target``."""
    rest = str(target)
    assert len(rest) <= 64, rest
    return "sha256:" + "/" * (64 - len(rest)) + rest


@pytest.fixture
def victim() -> Iterator[Path]:
    """A file outside everything the test hands Seshat, at a path short enough to spell."""
    folder = Path(tempfile.mkdtemp(prefix="seshat-victim-", dir="/tmp"))
    (folder / "v").write_bytes(b"precious")
    yield folder / "v"
    shutil.rmtree(folder)


def _index(root: Path, entries: list[dict[str, Any]]) -> None:
    index = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": entries}
    (root / "index.json").write_text(json.dumps(index))


def test_an_index_entry_with_a_path_for_a_digest_is_refused(
    seshat: SeshatRunner, schema_folder: Path, tmp_path: Path, victim: Path
) -> None:
    root, ref = tmp_path / "l", f"oci-layout://{tmp_path / 'l'}:v1"
    assert seshat("artifact", "push", schema_folder, ref, "--type", "schema").returncode == 0
    crafted = {
        "mediaType": MANIFEST_MEDIA_TYPE,
        "digest": _path_digest(victim),
        "size": 8,
        "annotations": {"org.opencontainers.image.ref.name": "v1"},
    }
    _index(root, [crafted])
    for command in (("pull", ref, tmp_path / "out", "--cache", tmp_path / "c"), ("resolve", ref)):
        done = seshat("artifact", *command)
        assert done.returncode == 1, done.stderr
        assert "manifest_invalid" in done.stderr and "Traceback" not in done.stderr
        assert victim.read_bytes() == b"precious"


def test_a_layer_digest_that_is_a_path_is_refused_and_nothing_is_deleted(
    seshat: SeshatRunner, tmp_path: Path, victim: Path
) -> None:
    store = LayoutStore(str(tmp_path / "l"))
    layer = _layer(store, "a.sql", b"SELECT 1;")
    for spelling in (
        _path_digest(victim),
        "sha256:" + "../" * 21 + "v",
        "sha256:" + "A" * 64,
        "sha512:" + "a" * 64,
        "sha256:" + "a" * 63 + "\n",
    ):
        _crafted(tmp_path / "l", [layer | {"digest": spelling}])
        assert _reason(tmp_path / "l") == "manifest_invalid"
        out = tmp_path / "out"
        pulled = seshat(
            "artifact", "pull", f"oci-layout://{tmp_path / 'l'}:v1", out, "--cache", tmp_path / "c"
        )
        assert pulled.returncode == 1 and "manifest_invalid" in pulled.stderr, pulled.stderr
        assert victim.read_bytes() == b"precious"
        assert not out.exists()


def test_the_cache_reads_and_deletes_only_its_own_regular_entries(
    tmp_path: Path, victim: Path
) -> None:
    cache = ContentCache(tmp_path / "cache")
    # A string that is not a digest is refused before any path is built from it.
    with pytest.raises(ArtifactError) as caught:
        cache.get(_path_digest(victim))  # type: ignore[arg-type]
    assert caught.value.reason == "manifest_invalid"
    # An entry that is a link to a file outside is neither read nor deleted through.
    digest = sha256_digest(b"precious")
    entry = tmp_path / "cache" / "blobs" / "sha256" / digest.hex
    entry.parent.mkdir(parents=True)
    entry.symlink_to(victim)
    assert cache.get(digest) is None
    assert victim.read_bytes() == b"precious"
    # A damaged regular entry is dropped (and fetched again by the caller).
    entry.unlink()
    entry.write_bytes(b"damaged")
    assert cache.get(digest) is None and not entry.exists()


def test_a_fifo_in_a_layout_is_refused_without_hanging(tmp_path: Path) -> None:
    store = LayoutStore(str(tmp_path / "l"))
    digest = _crafted(tmp_path / "l", [_layer(store, "a.sql", b"SELECT 1;")])
    path = tmp_path / "l" / "blobs" / "sha256" / digest.hex
    path.unlink()
    os.mkfifo(path)
    assert _reason(tmp_path / "l") == "unsafe_path"
    (tmp_path / "l" / "index.json").unlink()
    os.mkfifo(tmp_path / "l" / "index.json")
    assert _reason(tmp_path / "l") == "unsafe_path"


@pytest.mark.parametrize(
    "index",
    [
        b"[]",
        b'{"manifests": 1}',
        b'{"manifests": [1]}',
        b'{"manifests": [{"digest": 1, "size": 1}]}',
        b'{"manifests": [{"digest": "sha256:' + b"0" * 64 + b'", "size": -1}]}',
        b"[" * 100_000,
        b"\xff\xfe",
    ],
)
def test_a_malformed_index_is_a_reason_not_a_traceback(
    seshat: SeshatRunner, tmp_path: Path, index: bytes
) -> None:
    root = tmp_path / "l"
    root.mkdir()
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (root / "index.json").write_bytes(index)
    pulled = seshat("artifact", "pull", f"oci-layout://{root}:v1", tmp_path / "out")
    assert pulled.returncode == 1, pulled.stderr
    assert "manifest_invalid" in pulled.stderr and "Traceback" not in pulled.stderr


def test_titles_that_cannot_be_written_are_refused(tmp_path: Path) -> None:
    store = LayoutStore(str(tmp_path / "l"))
    clash = [_layer(store, "a", b"SELECT 1;"), _layer(store, "a/b.sql", b"SELECT 2;")]
    _crafted(tmp_path / "l", clash)
    assert _reason(tmp_path / "l") == "duplicate_title"
    _crafted(tmp_path / "l", [_layer(store, "x" * 252 + ".sql", b"SELECT 1;")])
    assert _reason(tmp_path / "l") == "invalid_name"
