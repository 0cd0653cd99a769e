"""The runner's planning cache: normalized desired models and dry-run verdicts, by content.

A plan's expensive steps depend only on their inputs, so their results are kept under a
digest of those inputs and reused by the next plan with the same inputs (the seed's second
plan, and every refresh of a converged database):

* **the normalized desired model**, keyed by the desired files' bytes, the dialect, the
  server's version and settings, the engine's own code and the planning options;
* **the dry-run verdict** (the fingerprint the dry run reached, and the statements as the
  dry run judged them, lock probes included), keyed by the live fingerprint, the desired
  fingerprint, the statements' digest, the server and the engine.

Each entry is a canonical JSON file named by its key and carrying the digest of its own
content; an entry that does not verify, or cannot be read, is a miss (and removed). Entries
are safe to delete at any time. ``--no-cache`` (``SESHAT_NO_CACHE=1``) plans without reading
or writing them; the private servers' initialized data directories
(:mod:`runner.engines.servers`) are kept either way, since they are no planning result.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

from runner.digests import Digest, canonical_json, digest
from runner.engines.model import (
    Column,
    Comment,
    Constraint,
    Database,
    Definition,
    Index,
    Sequence,
    Table,
)
from runner.engines.planner import model_document

__all__ = ["MAX_ENTRY", "PlanCache", "engine_version", "model_from_document", "planning_cache"]

MAX_ENTRY: Final = 256 * 1024 * 1024


@cache
def engine_version() -> str:
    """A digest of the engine's own code: a cached result is only reused by the code that
    made it (and a changed engine never reads an old normalization)."""
    root = Path(__file__).resolve().parent
    hasher = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        hasher.update(path.relative_to(root).as_posix().encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return "sha256:" + hasher.hexdigest()


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(a), str(b)) for a, b in value)


def model_from_document(document: Mapping[str, Any], depends: list[list[str]]) -> Database:
    """The :class:`Database` a :func:`~runner.engines.planner.model_document` describes."""

    def column(data: Mapping[str, Any]) -> Column:
        return Column(
            **{
                **data,
                "identity_options": tuple(data["identity_options"]),
                "extra": _pairs(data["extra"]),
            }
        )

    return Database(
        dialect=str(document["dialect"]),
        server_major=int(document["serverMajor"]),
        tables={
            k: Table(
                **{
                    **v,
                    "columns": tuple(column(c) for c in v["columns"]),
                    "options": _pairs(v["options"]),
                }
            )
            for k, v in document["tables"].items()
        },
        constraints={
            k: Constraint(**{**v, "columns": tuple(v["columns"])})
            for k, v in document["constraints"].items()
        },
        indexes={k: Index(**v) for k, v in document["indexes"].items()},
        sequences={k: Sequence(**v) for k, v in document["sequences"].items()},
        definitions={
            k: Definition(**{**v, "extra": _pairs(v["extra"])})
            for k, v in document["definitions"].items()
        },
        comments={k: Comment(**v) for k, v in document["comments"].items()},
        depends=frozenset((str(a), str(b)) for a, b in depends),
    )


class PlanCache:
    """Entries under ``root`` (see the module docstring); ``enabled=False`` is a cache that
    never hits and never writes."""

    def __init__(self, root: Path, *, enabled: bool = True) -> None:
        self.root = root
        self.enabled = enabled

    def _path(self, kind: str, key: Digest) -> Path:
        return self.root / kind / f"{key.hex}.json"

    def _read(self, kind: str, key: Digest) -> Any:
        if not self.enabled:
            return None
        path = self._path(kind, key)
        try:
            with path.open("rb") as stream:
                data = stream.read(MAX_ENTRY + 1)
            entry = json.loads(data)
            body = entry["body"]
            if (
                len(data) > MAX_ENTRY
                or digest("plan-cache-entry", {"body": body}) != entry["digest"]
            ):
                raise ValueError("damaged")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            path.unlink(missing_ok=True)  # a damaged entry is computed again
            return None
        return body

    def _write(self, kind: str, key: Digest, body: Any) -> None:
        if not self.enabled:
            return
        path = self._path(kind, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"body": body, "digest": digest("plan-cache-entry", {"body": body})}
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(canonical_json(entry))
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    # -- the normalized desired model ----------------------------------------------------

    def desired(self, key: Digest) -> Database | None:
        body = self._read("desired", key)
        if body is None:
            return None
        try:
            return model_from_document(body["model"], body["depends"])
        except (KeyError, TypeError, ValueError):
            self._path("desired", key).unlink(missing_ok=True)
            return None

    def keep_desired(self, key: Digest, model: Database) -> None:
        self._write(
            "desired",
            key,
            {"model": model_document(model), "depends": sorted([a, b] for a, b in model.depends)},
        )

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
