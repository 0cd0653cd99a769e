"""Canonical JSON and the ``sha256:<hex>`` digests every contract is built on.

This is the only place Seshat turns data into a digest. Plans, approvals, status files and
the runner protocol all name things by these digests, so the encoding must be byte-identical
on every machine, Python version and hash seed:

* object keys sorted by Unicode code point (Python's ``str`` order; the pinned test
  vectors in ``tests/runner/test_digests.py`` depend on it);
* no insignificant whitespace (``,`` and ``:`` separators only);
* UTF-8 output with non-ASCII characters written as themselves, not ``\\u`` escapes;
* integers only: a float has more than one spelling (``1.0``, ``1e0``) and cannot be part of
  a digest, so it is refused, as are NaN, booleans used as numbers and non-string keys.

Every digested document carries an explicit ``contract_version``; :func:`digest` adds it so
that a future change of what a digest covers can never collide with today's.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Final

__all__ = [
    "CONTRACT_VERSION",
    "DIGEST_PATTERN",
    "CanonicalJSONError",
    "canonical_json",
    "digest",
    "digest_hex",
    "sha256_digest",
]

CONTRACT_VERSION: Final = 1
"""Version of what the digests cover. Bump it, never reinterpret it."""

DIGEST_PATTERN: Final = re.compile(r"^sha256:[0-9a-f]{64}$")

JSONValue = None | bool | int | str | Sequence["JSONValue"] | Mapping[str, "JSONValue"]


class CanonicalJSONError(ValueError):
    """A value that has no single canonical spelling (a float, a non-string key, ...)."""


def _check(value: object, path: str) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        raise CanonicalJSONError(f"{path}: floats are not allowed in canonical JSON")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJSONError(f"{path}: object keys must be strings, got {key!r}")
            _check(item, f"{path}.{key}")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    raise CanonicalJSONError(f"{path}: {type(value).__name__} is not a JSON value")


def canonical_json(value: object) -> bytes:
    """Encode ``value`` as canonical JSON bytes (see the module docstring for the rules)."""
    _check(value, "$")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes (blobs, plan files, artifact layers)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(contract: str, document: Mapping[str, object]) -> str:
    """The digest of a ``document`` under a named ``contract`` (``"plan"``, ``"uid"``, ...).

    What is hashed is ``{"contract": contract, "contract_version": CONTRACT_VERSION,
    "document": document}``, so two contracts never share a digest even where their fields
    agree, and a document may use any field name.
    """
    framed = {"contract": contract, "contract_version": CONTRACT_VERSION, "document": document}
    return sha256_digest(canonical_json(framed))


def digest_hex(value: str) -> str:
    """The hex part of a ``sha256:<hex>`` digest, validated (used in file names)."""
    if not DIGEST_PATTERN.match(value):
        raise ValueError(f"not a sha256 digest: {value!r}")
    return value.removeprefix("sha256:")
