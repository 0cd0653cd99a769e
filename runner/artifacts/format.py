"""The two artifact formats and their bounds: packaging a folder, checking a manifest.

A Seshat artifact is an OCI 1.1 image manifest whose ``artifactType`` says what it holds:

* ``application/vnd.seshat.schema.v1``: the desired schema's ``.sql`` files;
* ``application/vnd.seshat.migrations.v1``: a migration directory's ``.sql`` files.

The config is the OCI empty descriptor; there is one layer per file, of media type
``application/vnd.seshat.file.v1``, titled (``org.opencontainers.image.title``) with the
file's path relative to the folder, '/'-separated; layers are sorted by title. Manifest
annotations carry ``org.opencontainers.image.source``, ``.revision`` and ``.created``. The
manifest is serialized as canonical JSON, so the same files and annotations always give the
same digest. docs/artifacts.md describes the format for people.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

from runner.artifacts.errors import ArtifactError
from runner.digests import Digest, InvalidDigest, canonical_json, sha256_digest

__all__ = [
    "ANNOTATION_CREATED",
    "ANNOTATION_REVISION",
    "ANNOTATION_SOURCE",
    "ANNOTATION_TITLE",
    "ARTIFACT_TYPES",
    "DEFAULT_LIMITS",
    "EMPTY_CONFIG",
    "EMPTY_CONFIG_DIGEST",
    "FILE_MEDIA_TYPE",
    "INDEX_MEDIA_TYPE",
    "MANIFEST_MEDIA_TYPE",
    "Descriptor",
    "Limits",
    "Manifest",
    "Packaged",
    "check_title",
    "check_titles",
    "load_json",
    "package_folder",
    "parse_descriptor",
    "parse_digest",
    "parse_index",
    "parse_manifest",
]

MANIFEST_MEDIA_TYPE: Final = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE: Final = "application/vnd.oci.image.index.v1+json"
FILE_MEDIA_TYPE: Final = "application/vnd.seshat.file.v1"
ARTIFACT_TYPES: Final = {
    "schema": "application/vnd.seshat.schema.v1",
    "migrations": "application/vnd.seshat.migrations.v1",
}
ANNOTATION_TITLE: Final = "org.opencontainers.image.title"
ANNOTATION_SOURCE: Final = "org.opencontainers.image.source"
ANNOTATION_REVISION: Final = "org.opencontainers.image.revision"
ANNOTATION_CREATED: Final = "org.opencontainers.image.created"
EMPTY_CONFIG_DIGEST: Final = Digest(
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
)
EMPTY_CONFIG: Final[dict[str, str | int]] = {
    "mediaType": "application/vnd.oci.empty.v1+json",
    "digest": EMPTY_CONFIG_DIGEST,
    "size": 2,
}
EMPTY_CONFIG_BYTES: Final = b"{}"
MAX_NAME_BYTES: Final = 255
"""The longest path component a title may have: what every common filesystem allows."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what Seshat packages or reads (documented in docs/artifacts.md)."""

    max_files: int = 1000
    max_file_bytes: int = 4 * 1024 * 1024
    max_total_bytes: int = 64 * 1024 * 1024
    max_manifest_bytes: int = 4 * 1024 * 1024
    max_title_bytes: int = 1024


DEFAULT_LIMITS: Final = Limits()


@dataclass(frozen=True, slots=True)
class Layer:
    title: str
    digest: Digest
    size: int


@dataclass(frozen=True, slots=True)
class Manifest:
    """A checked (or just packaged) artifact manifest: its type, annotations and layers
    (sorted by title), and its bytes."""

    digest: Digest
    artifact_type: str
    annotations: dict[str, str]
    layers: tuple[Layer, ...]
    raw: bytes


@dataclass(frozen=True, slots=True)
class Packaged:
    """A packaged folder: its manifest, as :func:`parse_manifest` reads it back after a
    push, and every blob it names."""

    manifest: Manifest
    blobs: dict[Digest, bytes]

    @property
    def digest(self) -> Digest:
        return self.manifest.digest

    @property
    def titles(self) -> tuple[str, ...]:
        return tuple(layer.title for layer in self.manifest.layers)


def _shown(title: str) -> str:
    """A title for a message: quoted, control characters escaped, at most 60 characters."""
    return repr(title[:60]) + ("..." if len(title) > 60 else "")


def check_title(title: object, limits: Limits = DEFAULT_LIMITS) -> str:
    """A layer title Seshat may write to disk: a plain relative path, or a refusal.

    Only one title is judged here; :func:`check_titles` judges a whole artifact's titles
    (duplicates, a title that is also another's folder) and is what every caller uses.
    """
    if not isinstance(title, str) or not title:
        raise ArtifactError("invalid_name", "a layer has no title")
    size = len(title.encode("utf-8", "surrogatepass"))
    if size > limits.max_title_bytes:
        raise ArtifactError(
            "invalid_name",
            f"layer title {_shown(title)} is {size} bytes (at most {limits.max_title_bytes})",
        )
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in title) or "\\" in title:
        raise ArtifactError(
            "invalid_name", f"layer title {_shown(title)} has control characters or a backslash"
        )
    try:
        title.encode("utf-8")
    except UnicodeEncodeError:
        raise ArtifactError("invalid_name", f"layer title {_shown(title)} is not UTF-8") from None
    parts = title.split("/")
    if PurePosixPath(title).is_absolute() or any(part in ("", ".", "..") for part in parts):
        raise ArtifactError(
            "unsafe_path", f"layer title {_shown(title)} is absolute or leaves the artifact folder"
        )
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in parts):
        raise ArtifactError(
            "invalid_name",
            f"layer title {_shown(title)}: a path component over {MAX_NAME_BYTES} bytes",
        )
    return title


def check_titles(titles: Iterable[object], limits: Limits = DEFAULT_LIMITS) -> tuple[str, ...]:
    """Every title of one artifact, judged together before any file is written: each is a
    plain relative path (:func:`check_title`), no two are equal, and none is also the
    folder of another (``a`` and ``a/b.sql`` cannot both be written)."""
    checked = tuple(check_title(title, limits) for title in titles)
    ordered = sorted(checked)
    for before, after in itertools.pairwise(ordered):
        if before == after:
            raise ArtifactError("duplicate_title", f"two layers are titled {_shown(before)}")
    for title in ordered:
        # Titles under the folder ``title/`` sort together, right from ``title + "/"``.
        found = bisect.bisect_left(ordered, title + "/")
        if found < len(ordered) and ordered[found].startswith(title + "/"):
            raise ArtifactError(
                "duplicate_title",
                f"{_shown(title)} is both a file and the folder of another layer "
                f"({_shown(ordered[found])})",
            )
    return checked


def _files(folder: Path) -> list[tuple[str, Path]]:
    """(title, path) of every ``.sql`` file under ``folder``, refusing symlinks."""
    found: list[tuple[str, Path]] = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        base = Path(root)
        for name in sorted(dirs):
            if (base / name).is_symlink():
                raise ArtifactError("symlink", f"{base / name} is a symbolic link")
        for name in sorted(names):
            path = base / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise ArtifactError("symlink", f"{path} is a symbolic link")
            if not name.endswith(".sql") or not stat.S_ISREG(mode):
                continue
            relative = path.relative_to(folder).as_posix()
            try:
                relative.encode("utf-8")
            except UnicodeEncodeError:
                raise ArtifactError(
                    "invalid_name", f"{os.fsencode(path)!r}: file name is not UTF-8"
                ) from None
            found.append((relative, path))
    check_titles(title for title, _ in found)  # what a pull would refuse is never pushed
    return sorted(found)


def package_folder(
    folder: Path,
    kind: str,
    annotations: dict[str, str],
    limits: Limits = DEFAULT_LIMITS,
) -> Packaged:
    """Package the ``.sql`` files under ``folder`` as a ``kind`` (schema|migrations) artifact."""
    if kind not in ARTIFACT_TYPES:
        raise ArtifactError("wrong_artifact_type", f"unknown artifact kind {kind!r}")
    if not folder.is_dir():
        raise ArtifactError("not_found", f"{folder}: not a folder")
    files = _files(folder)
    if not files:
        raise ArtifactError("empty_artifact", f"{folder}: no .sql files to package")
    if len(files) > limits.max_files:
        raise ArtifactError(
            "too_many_files", f"{folder}: {len(files)} files (at most {limits.max_files})"
        )
    blobs: dict[Digest, bytes] = {}
    layers: list[Layer] = []
    total = 0
    for title, path in files:
        data = path.read_bytes()
        if len(data) > limits.max_file_bytes:
            raise ArtifactError(
                "file_too_large",
                f"{title}: {len(data)} bytes (at most {limits.max_file_bytes})",
            )
        total += len(data)
        if total > limits.max_total_bytes:
            raise ArtifactError(
                "artifact_too_large", f"{folder}: more than {limits.max_total_bytes} bytes"
            )
        digest = sha256_digest(data)
        blobs[digest] = data
        layers.append(Layer(title, digest, len(data)))
    blobs[EMPTY_CONFIG_DIGEST] = EMPTY_CONFIG_BYTES
    annotations = dict(sorted(annotations.items()))
    document: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": ARTIFACT_TYPES[kind],
        "config": dict(EMPTY_CONFIG),
        "layers": [
            {
                "mediaType": FILE_MEDIA_TYPE,
                "digest": layer.digest,
                "size": layer.size,
                "annotations": {ANNOTATION_TITLE: layer.title},
            }
            for layer in layers
        ],
    }
    if annotations:
        document["annotations"] = annotations
    raw = canonical_json(document)
    manifest = Manifest(sha256_digest(raw), ARTIFACT_TYPES[kind], annotations, tuple(layers), raw)
    return Packaged(manifest, blobs)


@dataclass(frozen=True, slots=True)
class Descriptor:
    """An OCI content descriptor as read from untrusted JSON: a parsed digest, a size, and
    the optional media type, artifact type and annotations (strings only)."""

    digest: Digest
    size: int
    media_type: str = ""
    artifact_type: str = ""
    annotations: tuple[tuple[str, str], ...] = ()

    def annotation(self, name: str) -> str | None:
        return dict(self.annotations).get(name)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "mediaType": self.media_type,
            "digest": str(self.digest),
            "size": self.size,
        }
        if self.artifact_type:
            data["artifactType"] = self.artifact_type
        if self.annotations:
            data["annotations"] = dict(self.annotations)
        return data


def parse_digest(value: object, where: str) -> Digest:
    """``value`` as a :class:`Digest`, or ``manifest_invalid`` naming ``where``. Stores call
    it on every digest they are handed, so even a caller holding an unchecked string
    (JSON read by a test or a tool) never reaches a path or a URL with it."""
    try:
        return Digest(value)
    except InvalidDigest as error:
        raise ArtifactError("manifest_invalid", f"{where}: {error}") from None


def parse_descriptor(value: object, where: str) -> Descriptor:
    """The descriptor ``value`` (from an index, a manifest or a referrers list), or
    ``manifest_invalid`` naming ``where``: every digest is parsed here before it is used."""
    if not isinstance(value, dict):
        raise ArtifactError("manifest_invalid", f"{where} is not a descriptor")
    digest = parse_digest(value.get("digest"), where)
    size = value.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ArtifactError("manifest_invalid", f"{where} has no valid size")
    media_type, artifact_type = value.get("mediaType", ""), value.get("artifactType", "")
    if not isinstance(media_type, str) or not isinstance(artifact_type, str):
        raise ArtifactError("manifest_invalid", f"{where}: mediaType and artifactType are strings")
    notes = value.get("annotations")
    notes = {} if notes is None else notes
    if not isinstance(notes, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in notes.items()
    ):
        raise ArtifactError("manifest_invalid", f"{where}: annotations are not strings")
    return Descriptor(digest, size, media_type, artifact_type, tuple(sorted(notes.items())))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            # Two readers could each believe a different value: refuse, do not pick one.
            raise ValueError(f"the key {_shown(key)} appears twice in one object")
        document[key] = value
    return document


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def load_json(raw: bytes, where: str) -> dict[str, Any]:
    """The JSON object ``raw`` (an index or a manifest), or ``manifest_invalid`` naming
    ``where``. The one place Seshat parses OCI JSON it was handed: bytes that are not UTF-8,
    not JSON, nested too deeply, an integer of thousands of digits, ``NaN``, a key twice
    in one object, or a document that is not an object are all refusals, never exceptions."""
    try:
        document = json.loads(
            raw.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant
        )
    except UnicodeDecodeError as error:
        raise ArtifactError(
            "manifest_invalid", f"{where} is not UTF-8 (byte {error.start})"
        ) from None
    except RecursionError:
        raise ArtifactError("manifest_invalid", f"{where} is not JSON: nested too deeply") from None
    except ValueError as error:  # json.JSONDecodeError, and int() refusing 4,300+ digits
        detail = str(error)
        if "integer string conversion" in detail:
            detail = "an integer with too many digits"
        raise ArtifactError("manifest_invalid", f"{where} is not JSON: {detail[:200]}") from None
    if not isinstance(document, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        raise ArtifactError(
            "manifest_invalid",
            f"{where} is {kind.get(type(document), 'a number')} in JSON, not an object",
        )
    return document


def _string_field(document: dict[str, Any], name: str, where: str) -> str:
    """``document[name]``: absent or null is "", anything but a string is refused."""
    value = document.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ArtifactError("manifest_invalid", f"{where}: {name} is not a string")
    return value


def _schema_version_2(document: dict[str, Any], where: str) -> None:
    version = document.get("schemaVersion")
    if type(version) is not int or version != 2:
        raise ArtifactError("manifest_invalid", f"{where}: schemaVersion is not 2")


def parse_index(raw: bytes, where: str) -> tuple[dict[str, Any], tuple[Descriptor, ...]]:
    """An OCI image index (a layout's ``index.json``): the document and every entry of its
    ``manifests``, each parsed; any shape error refuses the whole index (``manifest_invalid``)."""
    document = load_json(raw, where)
    _schema_version_2(document, where)
    media_type = _string_field(document, "mediaType", where) or INDEX_MEDIA_TYPE
    if media_type != INDEX_MEDIA_TYPE:
        raise ArtifactError(
            "manifest_invalid", f"{where}: media type {_shown(media_type)} is not an index"
        )
    entries = document.get("manifests")
    if not isinstance(entries, list):
        raise ArtifactError("manifest_invalid", f"{where}: manifests is not a list")
    descriptors = tuple(
        parse_descriptor(entry, f"{where} manifests[{number}]")
        for number, entry in enumerate(entries)
    )
    return document, descriptors


def parse_manifest(
    raw: bytes, digest: Digest, allowed_types: tuple[str, ...], limits: Limits = DEFAULT_LIMITS
) -> Manifest:
    """Check the manifest ``raw`` (fetched as ``digest``) and its layers, or refuse it."""
    if len(raw) > limits.max_manifest_bytes:
        raise ArtifactError("manifest_too_large", f"manifest {digest} is {len(raw)} bytes")
    if not digest.matches(raw):
        raise ArtifactError(
            "digest_mismatch", f"the manifest does not hash to {digest}: it was altered"
        )
    where = f"manifest {digest}"
    document = load_json(raw, where)
    _schema_version_2(document, where)
    media_type = _string_field(document, "mediaType", where) or MANIFEST_MEDIA_TYPE
    if media_type != MANIFEST_MEDIA_TYPE:
        raise ArtifactError("manifest_invalid", f"{where} has media type {_shown(media_type)}")
    config = parse_descriptor(document.get("config"), "config")
    artifact_type = _string_field(document, "artifactType", where) or config.media_type
    if artifact_type not in allowed_types:
        raise ArtifactError(
            "wrong_artifact_type",
            f"artifact type {_shown(artifact_type)} is not one of {', '.join(allowed_types)}",
        )
    raw_layers = document.get("layers")
    if not isinstance(raw_layers, list):
        raise ArtifactError("manifest_invalid", "the manifest has no layers list")
    if len(raw_layers) > limits.max_files:
        raise ArtifactError(
            "too_many_files", f"{len(raw_layers)} layers (at most {limits.max_files})"
        )
    descriptors = [parse_descriptor(value, f"layer {n}") for n, value in enumerate(raw_layers)]
    titles = check_titles((d.annotation(ANNOTATION_TITLE) for d in descriptors), limits)
    layers: list[Layer] = []
    total = 0
    for title, layer in zip(titles, descriptors, strict=True):
        if layer.size > limits.max_file_bytes:
            raise ArtifactError(
                "file_too_large",
                f"{title}: {layer.size} bytes (at most {limits.max_file_bytes})",
            )
        total += layer.size
        if total > limits.max_total_bytes:
            raise ArtifactError("artifact_too_large", f"more than {limits.max_total_bytes} bytes")
        layers.append(Layer(title, layer.digest, layer.size))
    annotations = document.get("annotations")
    annotations = {} if annotations is None else annotations
    if not isinstance(annotations, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
    ):
        raise ArtifactError("manifest_invalid", "manifest annotations are not strings")
    return Manifest(
        digest,
        artifact_type,
        dict(annotations),
        tuple(sorted(layers, key=lambda x: x.title)),
        raw,
    )
