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

A digest that arrives from outside (an OCI index or manifest, a registry header, a status
file, an operation input) is a :class:`Digest` before anything uses it: parsing is the only
way to get one, so a path or a URL built from a ``Digest`` can never hold ``/``, ``..`` or
anything but lowercase hex.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final

from pydantic import AfterValidator, GetCoreSchemaHandler, WithJsonSchema
from pydantic_core import core_schema

__all__ = [
    "ALGORITHMS",
    "CONTRACT_VERSION",
    "DIGEST_PATTERN",
    "CanonicalJSONError",
    "Digest",
    "InvalidDigest",
    "Sha256",
    "canonical_json",
    "digest",
    "digest_hex",
    "sha256_digest",
]

CONTRACT_VERSION: Final = 1
"""Version of what the digests cover. Bump it, never reinterpret it."""

DIGEST_PATTERN: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
"""What Seshat's own digests look like (plans, fingerprints, identities): always sha256."""

ALGORITHMS: Final = {"sha256": 64, "sha512": 128}
"""Content digest algorithms Seshat reads (OCI's registered ones), and their hex lengths."""


_ANY_PATTERN: Final = "^(" + "|".join(f"{a}:[0-9a-f]{{{n}}}" for a, n in ALGORITHMS.items()) + ")$"


class InvalidDigest(ValueError):
    """A string that is not ``<algorithm>:<lowercase hex of the algorithm's length>``."""


class Digest(str):
    """A validated content digest, ``<algorithm>:<hex>``: the only spelling of a digest
    that may name a file, a URL path or a cache entry.

    It is a ``str`` (so it serializes, compares and hashes as its text), but the constructor
    refuses anything but an algorithm of :data:`ALGORITHMS` followed by exactly that many
    lowercase hex digits. Messages never echo a refused value whole: it may be long, or
    carry control characters, and it came from someone else.
    """

    __slots__ = ()

    def __new__(cls, value: object) -> Digest:
        if isinstance(value, Digest):
            return value
        if not isinstance(value, str):
            raise InvalidDigest(f"a digest is a string, not {type(value).__name__}")
        algorithm, colon, hexpart = value.partition(":")
        length = ALGORITHMS.get(algorithm)
        if not colon or length is None:
            raise InvalidDigest(
                f"{_shown(value)} is not a digest: the algorithm must be one of "
                f"{', '.join(sorted(ALGORITHMS))}"
            )
        if len(hexpart) != length or not all(c in "0123456789abcdef" for c in hexpart):
            raise InvalidDigest(
                f"{_shown(value)} is not a digest: {algorithm} needs {length} lowercase hex digits"
            )
        return super().__new__(cls, value)

    @classmethod
    def of(cls, data: bytes, algorithm: str = "sha256") -> Digest:
        """The digest of ``data`` (sha256 unless another algorithm is named)."""
        if algorithm not in ALGORITHMS:
            raise InvalidDigest(f"unknown digest algorithm {algorithm!r}")
        return cls(f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}")

    @property
    def algorithm(self) -> str:
        return self.partition(":")[0]

    @property
    def hex(self) -> str:
        """The hex digits alone (validated: safe as a file name)."""
        return self.partition(":")[2]

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` hashes to this digest, with this digest's algorithm."""
        return hashlib.new(self.algorithm, data).hexdigest() == self.hex

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(
            cls,
            core_schema.str_schema(pattern=_ANY_PATTERN),
            serialization=core_schema.plain_serializer_function_ser_schema(str),
        )


def _sha256_only(value: Digest) -> Digest:
    if value.algorithm != "sha256":
        raise InvalidDigest(f"{_shown(value)}: Seshat's own digests are sha256")
    return value


Sha256 = Annotated[
    Digest,
    AfterValidator(_sha256_only),
    WithJsonSchema({"type": "string", "pattern": DIGEST_PATTERN.pattern}),
]
"""A field holding one of Seshat's own digests (plan ids, fingerprints): sha256 only."""


def _shown(value: str) -> str:
    """A refused digest as a message may show it: bounded, control characters escaped."""
    return repr(value[:80] + ("..." if len(value) > 80 else ""))


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


def canonical_json(value: object, *, checked: bool = True) -> bytes:
    """Encode ``value`` as canonical JSON bytes (see the module docstring for the rules).

    ``checked=False`` skips the walk that refuses floats and non-string keys, for documents
    built by Seshat's own code from typed models (schema fingerprints), where it only costs.
    """
    if checked:
        _check(value, "$")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def sha256_digest(data: bytes) -> Digest:
    """``sha256:<hex>`` of raw bytes (blobs, plan files, artifact layers)."""
    return Digest("sha256:" + hashlib.sha256(data).hexdigest())


def digest(contract: str, document: Mapping[str, object], *, checked: bool = True) -> Digest:
    """The digest of a ``document`` under a named ``contract`` (``"plan"``, ``"uid"``, ...).

    What is hashed is ``{"contract": contract, "contract_version": CONTRACT_VERSION,
    "document": document}``, so two contracts never share a digest even where their fields
    agree, and a document may use any field name.
    """
    framed = {"contract": contract, "contract_version": CONTRACT_VERSION, "document": document}
    return sha256_digest(canonical_json(framed, checked=checked))


def digest_hex(value: str) -> str:
    """The hex part of one of Seshat's own ``sha256:<hex>`` digests, validated (used in file
    names); :class:`InvalidDigest` (a ``ValueError``) for anything else."""
    parsed = Digest(value)
    if parsed.algorithm != "sha256":
        raise InvalidDigest(f"{_shown(value)} is not a sha256 digest")
    return parsed.hex
