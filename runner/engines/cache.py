"""The runner's planning cache: normalized desired models and dry-run verdicts, by content.

A plan's expensive steps depend only on their inputs, so their results are kept under a
digest of those inputs and reused by the next plan with the same inputs (the seed's second
plan, and every refresh of a converged database):

* **the normalized desired model**, keyed by the desired files' bytes, the dialect, the
  server's version and settings, the engine's own code and the planning options;
* **the dry-run verdict** (the fingerprint the dry run reached, and the statements as the
  dry run judged them, lock probes included), keyed by the live fingerprint, the desired
  fingerprint, the statements' digest, the server and the engine;
* **a live model read before** (SQLite), keyed by the rows introspection read, the SQLite
  library and the engine: reading a SQLite schema means tokenizing its stored CREATE text,
  which an unchanged database then needs no parser for.

Each entry is a file named by its key: the digest of the rest, then canonical JSON; an entry
that does not verify, or cannot be read, is a miss (and removed). Entries
are safe to delete at any time. ``--no-cache`` (``SESHAT_NO_CACHE=1``) plans without reading
or writing them; the private servers' initialized data directories
(:mod:`runner.engines.servers`) are kept either way, since they are no planning result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final, TypeVar

from runner.digests import Digest, canonical_json, sha256_digest
from runner.engines.model import (
    Column,
    Comment,
    Constraint,
    Database,
    DefaultGrant,
    Definition,
    Grant,
    Index,
    Ownership,
    Sequence,
    Table,
)
from runner.engines.planner import fingerprint, model_rows, remember_fingerprint

__all__ = [
    "MAX_ENTRY",
    "PlanCache",
    "engine_version",
    "model_entry",
    "model_from_entry",
    "planning_cache",
]

T = TypeVar("T")

MAX_ENTRY: Final = 256 * 1024 * 1024


@cache
def engine_version() -> str:
    """A digest of the engine's own code and of the SQL text handling it loads desired files
    with (``runner/sql``: the splitters, what a desired schema may hold): a cached result is
    only reused by the code that made it (and a changed engine never reads an old
    normalization)."""
    root = Path(__file__).resolve().parent
    hasher = hashlib.sha256()
    for folder in (root, root.parent / "sql"):
        for path in sorted(folder.rglob("*.py")):
            hasher.update(path.relative_to(root.parent).as_posix().encode() + b"\0")
            hasher.update(path.read_bytes() + b"\0")
    return "sha256:" + hasher.hexdigest()


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(a), str(b)) for a, b in value)


def _builder(kind: type[T], **convert: Callable[[Any], Any]) -> Callable[[list[Any]], T]:
    """``kind`` from its fields' values in order, converting the named fields."""
    names = [f.name for f in dataclasses.fields(kind)]  # type: ignore[arg-type]
    steps = [(names.index(name), function) for name, function in convert.items()]

    def build(values: list[Any]) -> T:
        if len(values) != len(names):
            raise ValueError(f"{kind.__name__}: {len(values)} values for {len(names)} fields")
        for index, function in steps:
            values[index] = function(values[index])
        return kind(*values)

    return build


_column = _builder(Column, identity_options=tuple, extra=_pairs)
_table = _builder(
    Table, columns=lambda cs: tuple(_column(c) for c in cs), options=_pairs, inherits=tuple
)
_constraint = _builder(Constraint, columns=tuple)
_index = _builder(Index)
_sequence = _builder(Sequence)
_definition = _builder(Definition, extra=_pairs)
_comment = _builder(Comment)
_grant = _builder(Grant, privileges=tuple, grantable=tuple)
_default_grant = _builder(DefaultGrant, privileges=tuple, grantable=tuple)
_ownership = _builder(Ownership)


def model_entry(db: Database) -> dict[str, Any]:
    """``db`` as a cache entry: its :func:`~runner.engines.planner.model_rows` (each object
    as its fields' values in order; an entry is read back by the same engine version, so the
    order is known) and its edges, sorted."""
    return {
        **model_rows(db),
        "depends": sorted([a, b] for a, b in db.depends),
        "casts": sorted([a, b, c] for a, b, c in db.casts),
    }


def model_from_entry(entry: Mapping[str, Any]) -> Database:
    """The :class:`Database` :func:`model_entry` wrote; ``ValueError`` or ``TypeError`` when
    the entry does not describe one."""
    return Database(
        dialect=str(entry["dialect"]),
        server_major=int(entry["serverMajor"]),
        tables={k: _table(v) for k, v in entry["tables"].items()},
        constraints={k: _constraint(v) for k, v in entry["constraints"].items()},
        indexes={k: _index(v) for k, v in entry["indexes"].items()},
        sequences={k: _sequence(v) for k, v in entry["sequences"].items()},
        definitions={k: _definition(v) for k, v in entry["definitions"].items()},
        comments={k: _comment(v) for k, v in entry["comments"].items()},
        grants={k: _grant(v) for k, v in entry.get("grants", {}).items()},
        default_grants={k: _default_grant(v) for k, v in entry.get("defaultGrants", {}).items()},
        owners={k: _ownership(v) for k, v in entry.get("owners", {}).items()},
        depends=frozenset((str(a), str(b)) for a, b in entry["depends"]),
        casts=frozenset((str(a), str(b), str(c)) for a, b, c in entry["casts"]),
    )


class PlanCache:
    """Entries under ``root`` (see the module docstring); ``enabled=False`` is a cache that
    never hits and never writes."""

    def __init__(self, root: Path, *, enabled: bool = True) -> None:
        self.root = root
        self.enabled = enabled
        self._checked = False

    def _path(self, kind: str, key: Digest) -> Path:
        if not self._checked:  # the first use: a cache others can write is refused
            from runner.engines.servers import private_folder

            private_folder(self.root.parent)
            private_folder(self.root)
            self._checked = True
        return self.root / kind / f"{key.hex}.json"

    def _read(self, kind: str, key: Digest) -> Any:
        """An entry's body: its first line is the digest of the rest (canonical JSON)."""
        if not self.enabled:
            return None
        path = self._path(kind, key)
        try:
            with path.open("rb") as stream:
                data = stream.read(MAX_ENTRY + 1)
            header, _, body = data.partition(b"\n")
            if len(data) > MAX_ENTRY or not Digest(header.decode("ascii")).matches(body):
                raise ValueError("damaged")
            return json.loads(body)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            path.unlink(missing_ok=True)  # a damaged entry is computed again
            return None

    def _write(self, kind: str, key: Digest, body: Any) -> None:
        if not self.enabled:
            return
        path = self._path(kind, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = canonical_json(body)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(sha256_digest(data).encode("ascii") + b"\n" + data)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    # -- models: the normalized desired model, a live model read before ------------------

    def _model(self, kind: str, key: Digest) -> Database | None:
        body = self._read(kind, key)
        if body is None:
            return None
        try:
            model = model_from_entry(body["model"])
            remember_fingerprint(model, str(body["fingerprint"]))
        except (KeyError, TypeError, ValueError):
            self._path(kind, key).unlink(missing_ok=True)
            return None
        return model

    def _keep_model(self, kind: str, key: Digest, model: Database) -> None:
        self._write(kind, key, {"model": model_entry(model), "fingerprint": fingerprint(model)})

    def desired(self, key: Digest) -> Database | None:
        return self._model("desired", key)

    def keep_desired(self, key: Digest, model: Database) -> None:
        self._keep_model("desired", key, model)

    def live(self, key: Digest) -> Database | None:
        return self._model("live", key)

    def keep_live(self, key: Digest, model: Database) -> None:
        self._keep_model("live", key, model)

    # -- the dry-run verdict -------------------------------------------------------------

    def verdict(self, key: Digest) -> dict[str, Any] | None:
        body = self._read("verdict", key)
        return body if isinstance(body, dict) else None

    def keep_verdict(self, key: Digest, verdict: dict[str, Any]) -> None:
        self._write("verdict", key, verdict)


def planning_cache(*, disabled: bool = False) -> PlanCache:
    """The runner's planning cache (under :func:`~runner.engines.servers.cache_root`), or one
    that neither reads nor keeps anything with ``disabled`` or ``SESHAT_NO_CACHE=1``."""
    from runner.engines.servers import cache_root

    off = disabled or os.environ.get("SESHAT_NO_CACHE", "") not in ("", "0")
    return PlanCache(cache_root() / "plans", enabled=not off)
