"""Resolve, Verify, and operations that read an artifact by digest: the runner is the one
process that talks to a registry, against the real ``docker-registry`` (open over plain
HTTP, and behind basic auth and TLS)."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from harness.registry import AuthRegistryServer, RegistryServer
from harness.runner_cli import RunnerCLI, write
from harness.seshat_cli import SeshatRunner

from runner.protocol.frame import Found, find_last_frame
from runner.protocol.messages import TrustFile

SCHEMA_TYPE = "application/vnd.seshat.schema.v1"
MIGRATIONS_TYPE = "application/vnd.seshat.migrations.v1"


def _key(path: Path) -> bytes:
    """A signing key written to ``path``; returns its public key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _policy(key_path: str = "keys/ci.pub") -> dict[str, Any]:
    return {
        "artifactTypes": [SCHEMA_TYPE, MIGRATIONS_TYPE],
        "signatures": {"count": 1, "authorities": [{"name": "ci", "key": {"publicKey": key_path}}]},
    }


def _op(
    runner: RunnerCLI, tmp_path: Path, request: dict[str, Any], env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    path = write(tmp_path / f"{request['id']}.json", json.dumps(request))
    done = runner("op", "--input", str(path), env=env)
    frame = find_last_frame(done.stdout)
    assert isinstance(frame, Found), done.stdout + done.stderr
    return done.returncode, frame.payload


@pytest.fixture
def pushed(seshat: SeshatRunner, oci_registry: RegistryServer, tmp_path: Path) -> tuple[str, bytes]:
    """A signed schema artifact in the open registry, and the signer's public key."""
    folder = tmp_path / "schema"
    folder.mkdir()
    (folder / "schema.sql").write_text("CREATE TABLE items (id INTEGER PRIMARY KEY, n TEXT);\n")
    ref = f"oci://{oci_registry.address}/runner/{tmp_path.name.lower()}:v1"
    plain = ("--plain-http", oci_registry.address)
    public = _key(tmp_path / "ci.pem")
    for command in (
        ("push", folder, ref, "--type", "schema"),
        ("sign", ref, "--key", tmp_path / "ci.pem"),
    ):
        done = seshat("artifact", *plain, *command)
        assert done.returncode == 0, done.stderr
    return ref, public


def test_resolve_verify_and_plan_by_digest(
    pushed: tuple[str, bytes], oci_registry: RegistryServer, tmp_path: Path
) -> None:
    ref, public = pushed
    runner = RunnerCLI()
    registry = {"plain_http": [oci_registry.address]}
    status, resolved = _op(
        runner,
        tmp_path,
        {"operation": "resolve", "id": "r-1", "artifact": {"ref": ref}, "registry": registry},
    )
    assert status == 0 and "target_identity" not in resolved  # no database involved
    digest = resolved["result"]["digest"]
    assert digest.startswith("sha256:")
    artifact = {"ref": ref, "digest": digest}
    trust = [TrustFile.of("keys/ci.pub", public).model_dump(mode="json")]
    status, verified = _op(
        runner,
        tmp_path,
        {
            "operation": "verify",
            "id": "v-1",
            "artifact": artifact,
            "registry": registry,
            "policy": _policy(),
            "trust": trust,
        },
    )
    assert status == 0
    result = verified["result"]
    assert (result["accepted"], result["digest"], result["artifactType"]) == (
        True,
        digest,
        SCHEMA_TYPE,
    )
    assert [c["requirement"] for c in result["checks"]][-1] == "1 of 1 authorities"

    # Another key than the one that signed: refused with a stable reason, not an error.
    other = TrustFile.of("keys/ci.pub", _key(tmp_path / "other.pem")).model_dump(mode="json")
    _, refused = _op(
        runner,
        tmp_path,
        {
            "operation": "verify",
            "id": "v-2",
            "artifact": artifact,
            "registry": registry,
            "policy": _policy(),
            "trust": [other],
        },
    )
    assert (refused["result"]["accepted"], refused["result"]["reason"]) == (False, "bad_signature")

    # Plan reads the artifact by its digest (through the runner's cache), typed; and a
    # schema never stands in for migrations.
    database = tmp_path / "orders.db"
    sqlite3.connect(database).close()

    def on_database(operation: str, artifact_type: str) -> tuple[int, dict[str, Any]]:
        request = {
            "operation": operation,
            "id": f"{operation}-1",
            "url": {"from_env": "DB_URL"},
            "artifact": artifact | {"artifact_type": artifact_type},
            "registry": registry,
        }
        return _op(runner, tmp_path, request, env={"DB_URL": f"sqlite:///{database}"})

    status, planned = on_database("plan", SCHEMA_TYPE)
    assert status == 0, planned
    statements = [s["sql"] for s in planned["result"]["plan"]["statements"]]
    assert len(statements) == 1 and statements[0].startswith("CREATE TABLE"), statements
    status, wrong = on_database("history", MIGRATIONS_TYPE)
    assert status == 2
    assert (wrong["error"]["code"], wrong["error"]["reason"]) == (
        "artifact_refused",
        "wrong_artifact_type",
    )


def test_an_unreachable_registry_is_a_retryable_fault(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    request = {
        "operation": "resolve",
        "id": "r-down",
        "artifact": {"ref": f"oci://{address}/shop/orders:v1"},
        "registry": {"plain_http": [address], "timeout": 5},
    }
    status, payload = _op(RunnerCLI(), tmp_path, request)
    assert status == 2 and payload["error"]["code"] == "registry_unavailable"


def test_the_registry_credential_comes_from_the_runners_environment_only(
    seshat: SeshatRunner, oci_registry_auth: AuthRegistryServer, tmp_path: Path
) -> None:
    registry = oci_registry_auth
    credentials = {
        "SESHAT_REGISTRY_USERNAME": registry.username,
        "SESHAT_REGISTRY_PASSWORD": registry.password,
    }
    folder = tmp_path / "schema"
    folder.mkdir()
    (folder / "schema.sql").write_text("CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    ref = f"oci://{registry.address}/runner/{tmp_path.name.lower()}:v1"
    done = seshat(
        "artifact",
        "--ca-file",
        registry.ca_path,
        "push",
        folder,
        ref,
        "--type",
        "schema",
        env=credentials,
        secrets=[registry.password],
    )
    assert done.returncode == 0, done.stderr
    runner = RunnerCLI(secrets=[registry.password])
    request = {
        "operation": "resolve",
        "id": "r-auth",
        "artifact": {"ref": ref},
        "registry": {"ca_pem": registry.ca_path.read_text()},
    }
    status, payload = _op(runner, tmp_path, request, env=credentials)
    assert status == 0 and payload["result"]["digest"].startswith("sha256:")
    status, refused = _op(runner, tmp_path, request | {"id": "r-anonymous"})
    assert status == 2
    assert (refused["error"]["code"], refused["error"]["reason"]) == (
        "artifact_refused",
        "unauthorized",
    )
    assert runner.leaks() == []
