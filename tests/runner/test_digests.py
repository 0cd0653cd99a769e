"""Pinned digests: any change to canonical JSON or framing must show up here first."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from runner.digests import (
    CONTRACT_VERSION,
    CanonicalJSONError,
    canonical_json,
    digest,
    digest_hex,
    sha256_digest,
)


def test_canonical_json_sorts_keys_and_drops_whitespace() -> None:
    assert canonical_json({"b": [1, 2], "a": {"d": None, "c": True}}) == (
        b'{"a":{"c":true,"d":null},"b":[1,2]}'
    )


def test_canonical_json_writes_utf8_not_escapes() -> None:
    assert canonical_json({"name": "café ☕"}) == '{"name":"café ☕"}'.encode()


@pytest.mark.parametrize("value", [1.0, {"x": 0.5}, [float("nan")], {1: "a"}, {"s": {1, 2}}])
def test_canonical_json_refuses_values_without_one_spelling(value: object) -> None:
    with pytest.raises(CanonicalJSONError):
        canonical_json(value)


def test_sha256_digest_of_bytes_is_pinned() -> None:
    assert sha256_digest(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_contract_digest_is_pinned() -> None:
    document = {"engine": "postgresql", "namespace": "shop", "coordinationKey": "orders"}
    framed = (
        b'{"contract":"coordination","contract_version":1,'
        b'"document":{"coordinationKey":"orders","engine":"postgresql","namespace":"shop"}}'
    )
    assert CONTRACT_VERSION == 1
    assert digest("coordination", document) == "sha256:" + hashlib.sha256(framed).hexdigest()
    assert digest("coordination", document) == (
        "sha256:70f7139a4707ebce6aca5e0ffa8583ec551439c82c74322d6cc6e70cd2f3908e"
    )


def test_the_contract_name_separates_digests_of_equal_documents() -> None:
    assert digest("plan", {"a": 1}) != digest("uid", {"a": 1})


def test_digests_do_not_depend_on_the_hash_seed() -> None:
    script = "from runner.digests import digest; print(digest('x', {str(i): i for i in range(50)}))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(outputs) == 1


def test_digest_hex_validates() -> None:
    assert digest_hex("sha256:" + "a" * 64) == "a" * 64
    with pytest.raises(ValueError):
        digest_hex("sha256:xyz")
