"""Hostile artifacts end in a stable reason, never a traceback, and write nothing anywhere.

Each case builds a real OCI layout on disk (one from a real registry too), runs
``seshat artifact pull`` as a user would, and checks the exit status, the exact
``seshat: <reason>:`` line, that no traceback was printed, and that the whole test folder
is byte for byte what it was before the pull: no destination folder, nothing beside it,
nothing in the cache.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from harness.registry import RegistryServer
from harness.seshat_cli import Run, SeshatRunner

from runner.artifacts.errors import ArtifactError
from runner.artifacts.fetch import Fetched, write_files
from runner.artifacts.format import (
    ANNOTATION_TITLE,
    ARTIFACT_TYPES,
    EMPTY_CONFIG,
    EMPTY_CONFIG_BYTES,
    EMPTY_CONFIG_DIGEST,
    FILE_MEDIA_TYPE,
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    Manifest,
    parse_manifest,
)
from runner.artifacts.layout import LayoutStore
from runner.artifacts.reference import parse_reference
from runner.artifacts.registry import RegistryOptions, RegistryStore
from runner.digests import sha256_digest

REF_NAME = "org.opencontainers.image.ref.name"
SQL = b"SELECT 1;\n"


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with what it is (a folder, or a file's sha256)."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[relative] = "link"
        elif path.is_dir():
            found[relative] = "folder"
        else:
            found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _layer(title: object) -> dict[str, Any]:
    return {
        "mediaType": FILE_MEDIA_TYPE,
        "digest": sha256_digest(SQL),
        "size": len(SQL),
        "annotations": {ANNOTATION_TITLE: title},
    }


def _manifest(titles: list[object]) -> dict[str, Any]:
    return {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": ARTIFACT_TYPES["schema"],
        "config": dict(EMPTY_CONFIG),
        "layers": [_layer(title) for title in titles],
    }


def _layout(root: Path, manifest: bytes) -> None:
    """A layout whose tag ``v1`` names ``manifest`` (any bytes), with its blobs present."""
    store = LayoutStore(str(root))
    store.push_blob(EMPTY_CONFIG_DIGEST, EMPTY_CONFIG_BYTES)
    store.push_blob(sha256_digest(SQL), SQL)
    digest = sha256_digest(manifest)
    store.push_blob(digest, manifest)
    entry = {
        "mediaType": MANIFEST_MEDIA_TYPE,
        "digest": str(digest),
        "size": len(manifest),
        "annotations": {REF_NAME: "v1"},
    }
    index = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": [entry]}
    (root / "index.json").write_text(json.dumps(index))


def _pull_refused(seshat: SeshatRunner, tmp_path: Path, ref: str, *extra: str) -> Run:
    """Pull ``ref`` into ``tmp_path/work/out``; it must be refused and change nothing."""
    (tmp_path / "work").mkdir(exist_ok=True)
    before = _snapshot(tmp_path)
    done = seshat(*extra, "pull", ref, tmp_path / "work" / "out", "--cache", tmp_path / "cache")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr
    assert done.stdout == ""
    assert _snapshot(tmp_path) == before, "something was written"
    return done


def _reason(done: Run) -> str:
    """The reason of the one ``seshat: <reason>: message`` line the command printed."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seshat: "), done.stderr
    return lines[0].split(": ")[1]


# -- titles: one validation of all of them, before anything is written ------------------------

TITLES = [
    # A file and a folder of the same name: both cannot exist on disk.
    (["a", "a/b.sql"], "duplicate_title"),
    (["a/b.sql", "a"], "duplicate_title"),
    (["x/y", "x/y/z/deep.sql", "x/other.sql"], "duplicate_title"),
    (["a.sql", "a.sql"], "duplicate_title"),
    # A path component longer than any filesystem allows (bytes, not characters).
    (["x" * 252 + ".sql"], "invalid_name"),
    (["tables/" + "é" * 126 + ".sql"], "invalid_name"),
    # The whole title unreasonably long, with every component short.
    (["/".join(["d" * 200] * 6) + ".sql"], "invalid_name"),
    (["/".join(["é" * 100] * 6) + ".sql"], "invalid_name"),
    # Titles that would leave the folder, or spell something other than a plain path.
    (["../escape.sql"], "unsafe_path"),
    (["a/../../escape.sql"], "unsafe_path"),
    (["ABSOLUTE"], "unsafe_path"),
    (["..\\escape.sql"], "invalid_name"),
    (["nul\x00.sql"], "invalid_name"),
    (["line\nbreak.sql"], "invalid_name"),
    (["\ud800.sql"], "invalid_name"),
    ([""], "invalid_name"),
    (["a/"], "unsafe_path"),
    (["."], "unsafe_path"),
    ([1], "manifest_invalid"),
]


@pytest.mark.parametrize(("titles", "reason"), TITLES)
def test_hostile_titles_are_refused_before_anything_is_written(
    seshat: SeshatRunner, tmp_path: Path, titles: list[object], reason: str
) -> None:
    escape = tmp_path / "work" / "absolute.sql"
    titles = [str(escape) if t == "ABSOLUTE" else t for t in titles]
    # The valid files come first: a title refused late must not leave them on disk.
    titles = ["first.sql", "tables/second.sql", *titles]
    _layout(tmp_path / "l", json.dumps(_manifest(titles)).encode())
    done = _pull_refused(seshat, tmp_path, f"oci-layout://{tmp_path / 'l'}:v1", "artifact")
    assert _reason(done) == reason
    assert not escape.exists() and not (tmp_path / "escape.sql").exists()


def _checked_manifest() -> Manifest:
    raw = json.dumps(_manifest(["a.sql"])).encode()
    return parse_manifest(raw, sha256_digest(raw), (ARTIFACT_TYPES["schema"],))


def test_write_files_judges_every_title_before_writing_one(tmp_path: Path) -> None:
    """Even handed a ``Fetched`` nobody checked, extraction writes nothing for a clash."""
    manifest = _checked_manifest()
    fetched = Fetched(
        parse_reference(f"oci-layout://{tmp_path / 'l'}:v1"),
        manifest,
        (("first.sql", SQL), ("a", SQL), ("a/b.sql", SQL)),
    )
    with pytest.raises(ArtifactError) as caught:
        write_files(fetched, tmp_path / "out")
    assert caught.value.reason == "duplicate_title"
    assert not (tmp_path / "out").exists()


def test_a_write_that_fails_midway_leaves_the_folder_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _checked_manifest()
    fetched = Fetched(
        parse_reference(f"oci-layout://{tmp_path / 'l'}:v1"),
        manifest,
        (("a/first.sql", SQL), ("b/second.sql", SQL)),
    )
    real_open = Path.open

    def full_disk(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == "second.sql":
            raise OSError(28, "No space left on device")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full_disk)
    (tmp_path / "empty").mkdir()
    for destination, kept in ((tmp_path / "new", False), (tmp_path / "empty", True)):
        with pytest.raises(ArtifactError) as caught:
            write_files(fetched, destination)
        assert caught.value.reason == "unsafe_path"
        assert "No space left on device" in caught.value.message
        assert destination.exists() is kept
        assert not kept or list(destination.iterdir()) == []


# -- index.json: one parse, every shape error a reason -----------------------------------------

_DIGEST = "sha256:" + "0" * 64


def _entry(**fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "mediaType": MANIFEST_MEDIA_TYPE,
        "digest": _DIGEST,
        "size": 10,
        "annotations": {REF_NAME: "v1"},
    }
    entry.update(fields)
    return {k: v for k, v in entry.items() if v is not None}


def _index_bytes(manifests: object = None, **fields: Any) -> bytes:
    document: dict[str, Any] = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE}
    document["manifests"] = [_entry()] if manifests is None else manifests
    document.update(fields)
    return json.dumps({k: v for k, v in document.items() if v != "DROP"}).encode()


INDEXES = {
    "not JSON": b"{not json",
    "empty": b"",
    "not UTF-8": b'{"manifests": "\xff"}',
    "UTF-16": '{"schemaVersion": 2, "manifests": []}'.encode("utf-16"),
    "an array": b"[]",
    "a string": b'"index"',
    "null": b"null",
    "nested too deeply": b"[" * 100_000,
    "an integer of 5,000 digits": b'{"schemaVersion": ' + b"9" * 5000 + b"}",
    "NaN": b'{"schemaVersion": NaN, "manifests": []}',
    "a key twice": b'{"schemaVersion": 2, "manifests": [], "manifests": []}',
    "no schemaVersion": _index_bytes(schemaVersion="DROP"),
    "schemaVersion a string": _index_bytes(schemaVersion="2"),
    "schemaVersion true": _index_bytes(schemaVersion=True),
    "schemaVersion 2.0": _index_bytes(schemaVersion=2.0),
    "mediaType a manifest's": _index_bytes(mediaType=MANIFEST_MEDIA_TYPE),
    "mediaType a number": _index_bytes(mediaType=7),
    "no manifests": _index_bytes(manifests="DROP"),
    "manifests an object": _index_bytes(manifests={"a": _entry()}),
    "manifests null": b'{"schemaVersion": 2, "manifests": null}',
    "manifests a string": _index_bytes(manifests="v1"),
    "an entry a number": _index_bytes(manifests=[1]),
    "an entry an array": _index_bytes(manifests=[[_DIGEST, 10]]),
    "an entry a string": _index_bytes(manifests=[_DIGEST]),
    "an entry without digest": _index_bytes(manifests=[_entry(digest=None)]),
    "a digest a number": _index_bytes(manifests=[_entry(digest=5)]),
    "a digest that is a path": _index_bytes(manifests=[_entry(digest="sha256:../../x")]),
    "an entry without size": _index_bytes(manifests=[_entry(size=None)]),
    "a size a string": _index_bytes(manifests=[_entry(size="10")]),
    "a size negative": _index_bytes(manifests=[_entry(size=-1)]),
    "a size true": _index_bytes(manifests=[_entry(size=True)]),
    "a size a float": _index_bytes(manifests=[_entry(size=10.0)]),
    "a mediaType a list": _index_bytes(manifests=[_entry(mediaType=["x"])]),
    "annotations a list": _index_bytes(manifests=[_entry(annotations=[REF_NAME, "v1"])]),
    "annotations a string": _index_bytes(manifests=[_entry(annotations="v1")]),
    "an annotation a number": _index_bytes(manifests=[_entry(annotations={REF_NAME: 1})]),
    "a malformed entry after a good one": _index_bytes(manifests=[_entry(), 1]),
}


@pytest.mark.parametrize("index", INDEXES.values(), ids=INDEXES.keys())
def test_a_malformed_index_is_refused_with_manifest_invalid(
    seshat: SeshatRunner, tmp_path: Path, index: bytes
) -> None:
    root = tmp_path / "l"
    root.mkdir()
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (root / "index.json").write_bytes(index)
    ref = f"oci-layout://{root}:v1"
    assert _reason(_pull_refused(seshat, tmp_path, ref, "artifact")) == "manifest_invalid"
    resolved = seshat("artifact", "resolve", ref)
    assert resolved.returncode == 1 and "Traceback" not in resolved.stderr
    assert _reason(resolved) == "manifest_invalid"


def test_push_refuses_to_rewrite_a_malformed_index(
    seshat: SeshatRunner, schema_folder: Path, tmp_path: Path
) -> None:
    root = tmp_path / "l"
    root.mkdir()
    (root / "index.json").write_bytes(INDEXES["manifests an object"])
    pushed = seshat(
        "artifact", "push", schema_folder, f"oci-layout://{root}:v1", "--type", "schema"
    )
    assert pushed.returncode == 1 and "Traceback" not in pushed.stderr
    assert _reason(pushed) == "manifest_invalid"
    assert (root / "index.json").read_bytes() == INDEXES["manifests an object"]


# -- manifests: the same parse ----------------------------------------------------------------


def _manifest_bytes(**fields: Any) -> bytes:
    document = _manifest(["a.sql"])
    document.update(fields)
    return json.dumps({k: v for k, v in document.items() if v != "DROP"}).encode()


def _with_layer(**fields: Any) -> bytes:
    layer = _layer("a.sql")
    layer.update(fields)
    return _manifest_bytes(layers=[{k: v for k, v in layer.items() if v != "DROP"}])


MANIFESTS = {
    "not JSON": b"{not json",
    "not UTF-8": b'{"schemaVersion": "\xff"}',
    "an array": b"[]",
    "a number": b"2",
    "nested too deeply": b"[" * 100_000,
    "objects nested too deeply": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "an integer of 5,000 digits": b'{"schemaVersion": ' + b"9" * 5000 + b"}",
    "Infinity": b'{"schemaVersion": Infinity}',
    "a key twice": _manifest_bytes()[:-1] + b', "layers": []}',
    "no schemaVersion": _manifest_bytes(schemaVersion="DROP"),
    "schemaVersion a string": _manifest_bytes(schemaVersion="2"),
    "schemaVersion 2.0": _manifest_bytes(schemaVersion=2.0),
    "mediaType an index": _manifest_bytes(mediaType=INDEX_MEDIA_TYPE),
    "mediaType a list": _manifest_bytes(mediaType=[MANIFEST_MEDIA_TYPE]),
    "artifactType a list": _manifest_bytes(artifactType=[ARTIFACT_TYPES["schema"]]),
    "artifactType an object": _manifest_bytes(artifactType={"a": 1}),
    "no config": _manifest_bytes(config="DROP"),
    "config a string": _manifest_bytes(config=EMPTY_CONFIG_DIGEST),
    "config without digest": _manifest_bytes(config={"mediaType": "x", "size": 2}),
    "no layers": _manifest_bytes(layers="DROP"),
    "layers an object": _manifest_bytes(layers={"a.sql": _layer("a.sql")}),
    "a layer a number": _manifest_bytes(layers=[1]),
    "a layer an array": _manifest_bytes(layers=[["a.sql"]]),
    "a layer without digest": _with_layer(digest="DROP"),
    "a layer digest a number": _with_layer(digest=1),
    "a layer size a string": _with_layer(size="10"),
    "a layer size negative": _with_layer(size=-1),
    "layer annotations a list": _with_layer(annotations=[ANNOTATION_TITLE, "a.sql"]),
    "a title a number": _with_layer(annotations={ANNOTATION_TITLE: 7}),
    "manifest annotations a list": _manifest_bytes(annotations=["x"]),
    "a manifest annotation null": _manifest_bytes(annotations={"a": None}),
}


@pytest.mark.parametrize("manifest", MANIFESTS.values(), ids=MANIFESTS.keys())
def test_a_malformed_manifest_is_refused_with_manifest_invalid(
    seshat: SeshatRunner, tmp_path: Path, manifest: bytes
) -> None:
    _layout(tmp_path / "l", manifest)
    done = _pull_refused(seshat, tmp_path, f"oci-layout://{tmp_path / 'l'}:v1", "artifact")
    assert _reason(done) == "manifest_invalid"


def test_a_layout_manifest_without_titles_is_refused(seshat: SeshatRunner, tmp_path: Path) -> None:
    _layout(tmp_path / "l", _with_layer(annotations="DROP"))
    done = _pull_refused(seshat, tmp_path, f"oci-layout://{tmp_path / 'l'}:v1", "artifact")
    assert _reason(done) == "invalid_name"


# -- the same refusals through a registry -----------------------------------------------------


@pytest.mark.parametrize(
    ("titles", "reason"),
    [
        (["a", "a/b.sql"], "duplicate_title"),
        (["x" * 300 + ".sql"], "invalid_name"),
        (["/".join(["d" * 200] * 6) + ".sql"], "invalid_name"),
        (["../escape.sql"], "unsafe_path"),
    ],
)
def test_hostile_titles_from_a_registry_are_refused(
    seshat: SeshatRunner,
    oci_registry: RegistryServer,
    tmp_path: Path,
    titles: list[str],
    reason: str,
) -> None:
    address = oci_registry.address
    store = RegistryStore(address, "shop/hostile", RegistryOptions(plain_http=frozenset({address})))
    store.push_blob(EMPTY_CONFIG_DIGEST, EMPTY_CONFIG_BYTES)
    store.push_blob(sha256_digest(SQL), SQL)
    manifest = json.dumps(_manifest(["first.sql", *titles])).encode()
    digest = store.push_manifest(manifest, MANIFEST_MEDIA_TYPE, "v1")
    for ref in (f"oci://{address}/shop/hostile:v1", f"oci://{address}/shop/hostile@{digest}"):
        done = _pull_refused(seshat, tmp_path, ref, "artifact", "--plain-http", address)
        assert _reason(done) == reason
