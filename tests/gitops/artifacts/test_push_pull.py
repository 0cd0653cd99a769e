"""Pushing, resolving and pulling artifacts against a real registry and an OCI layout."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from harness.registry import AuthRegistryServer, RegistryServer
from harness.seshat_cli import SeshatRunner

from runner.artifacts.format import ARTIFACT_TYPES, package_folder, parse_manifest


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()
    }


def test_push_resolve_pull_round_trip_through_a_registry(
    seshat: SeshatRunner, schema_folder: Path, oci_registry: RegistryServer, tmp_path: Path
) -> None:
    ref = f"oci://{oci_registry.address}/shop/schema:v1"
    plain = ("--plain-http", oci_registry.address)
    pushed = seshat("artifact", *plain, "push", schema_folder, ref, "--type", "schema")
    assert pushed.returncode == 0, pushed.stderr
    digest = pushed.stdout.strip()
    assert digest.startswith("sha256:") and "pushed 2 files" in pushed.stderr

    # The same files and annotations make the same digest; the manifest is what we documented.
    again = seshat("artifact", *plain, "push", schema_folder, ref, "--type", "schema")
    assert again.stdout.strip() == digest
    manifest = json.loads(
        oci_registry.request(
            "GET",
            f"/v2/shop/schema/manifests/{digest}",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        ).body
    )
    assert manifest["artifactType"] == ARTIFACT_TYPES["schema"]
    assert manifest["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
    titles = [
        layer["annotations"]["org.opencontainers.image.title"] for layer in manifest["layers"]
    ]
    assert titles == ["tables/orders.sql", "types.sql"]
    assert manifest["annotations"]["org.opencontainers.image.created"] == "2026-01-01T00:00:00Z"

    resolved = seshat("artifact", *plain, "resolve", ref)
    assert resolved.returncode == 0 and resolved.stdout.strip() == digest

    pulled = seshat(
        "artifact",
        *plain,
        "pull",
        f"oci://{oci_registry.address}/shop/schema@{digest}",
        tmp_path / "out",
    )
    assert pulled.returncode == 0, pulled.stderr
    assert _files(tmp_path / "out") == {
        "tables/orders.sql": "CREATE TABLE orders (id bigint);\n",
        "types.sql": "CREATE TYPE status AS ENUM ('new');\n",
    }
    # The blobs are in the content-addressed cache, named by their digests.
    cached = tmp_path / "xdg-cache" / "seshat" / "artifacts" / "blobs" / "sha256"
    assert (cached / digest.removeprefix("sha256:")).is_file()


def test_plain_http_only_when_allowed_for_that_registry(
    seshat: SeshatRunner, schema_folder: Path, oci_registry: RegistryServer
) -> None:
    ref = f"oci://{oci_registry.address}/shop/schema:v1"
    refused = seshat("artifact", "push", schema_folder, ref, "--type", "schema")
    assert refused.returncode == 2
    assert "registry_unavailable" in refused.stderr
    other = seshat(
        "artifact", "--plain-http", "127.0.0.1:1", "push", schema_folder, ref, "--type", "schema"
    )
    assert other.returncode == 2


def test_basic_auth_and_custom_ca(
    seshat: SeshatRunner,
    schema_folder: Path,
    oci_registry_auth: AuthRegistryServer,
    tmp_path: Path,
) -> None:
    registry = oci_registry_auth
    ref = f"oci://{registry.address}/team/schema:v1"
    ca = ("--ca-file", registry.ca_path)
    secrets = [registry.password]

    anonymous = seshat("artifact", *ca, "push", schema_folder, ref, "--type", "schema")
    assert anonymous.returncode == 1 and "unauthorized" in anonymous.stderr

    env = {
        "SESHAT_REGISTRY_USERNAME": registry.username,
        "SESHAT_REGISTRY_PASSWORD": registry.password,
    }
    untrusted = seshat(
        "artifact", "push", schema_folder, ref, "--type", "schema", env=env, secrets=secrets
    )
    assert untrusted.returncode == 2 and "TLS verification failed" in untrusted.stderr

    pushed = seshat(
        "artifact", *ca, "push", schema_folder, ref, "--type", "schema", env=env, secrets=secrets
    )
    assert pushed.returncode == 0, pushed.stderr

    wrong = {
        "SESHAT_REGISTRY_USERNAME": registry.username,
        "SESHAT_REGISTRY_PASSWORD": "not-the-password",
    }
    denied = seshat("artifact", *ca, "resolve", ref, env=wrong, secrets=["not-the-password"])
    assert denied.returncode == 1 and "unauthorized" in denied.stderr

    # The docker config.json path works as well.
    docker = tmp_path / "docker"
    docker.mkdir()
    import base64

    token = base64.b64encode(f"{registry.username}:{registry.password}".encode()).decode()
    (docker / "config.json").write_text(json.dumps({"auths": {registry.address: {"auth": token}}}))
    pulled = seshat(
        "artifact",
        *ca,
        "pull",
        ref,
        tmp_path / "out",
        env={"DOCKER_CONFIG": str(docker)},
        secrets=[*secrets, token],
    )
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.strip() == pushed.stdout.strip()


def test_registry_down_is_a_quick_retryable_error(
    seshat: SeshatRunner, schema_folder: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before seshat connects
    started = time.monotonic()
    down = seshat(
        "artifact",
        "--plain-http",
        f"127.0.0.1:{port}",
        "resolve",
        f"oci://127.0.0.1:{port}/shop/schema:v1",
    )
    assert down.returncode == 2
    assert "registry_unavailable" in down.stderr and "cannot reach" in down.stderr
    assert time.monotonic() - started < 20  # no hidden retry loop


def test_oci_layout_round_trip_and_pull_refuses_a_non_empty_folder(
    seshat: SeshatRunner, schema_folder: Path, tmp_path: Path
) -> None:
    ref = f"oci-layout://{tmp_path / 'layout'}:v1"
    pushed = seshat("artifact", "push", schema_folder, ref, "--type", "migrations")
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads((tmp_path / "layout" / "oci-layout").read_text()) == {
        "imageLayoutVersion": "1.0.0"
    }
    assert seshat("artifact", "resolve", ref).stdout == pushed.stdout
    out = tmp_path / "out"
    assert seshat("artifact", "pull", ref, out, "--type", "migrations").returncode == 0
    assert sorted(_files(out)) == ["tables/orders.sql", "types.sql"]
    again = seshat("artifact", "pull", ref, out)
    assert again.returncode == 1 and "not an empty folder" in again.stderr


def test_packaging_is_deterministic_and_skips_non_sql_files(schema_folder: Path) -> None:
    first = package_folder(schema_folder, "schema", {"a": "1"})
    second = package_folder(schema_folder, "schema", {"a": "1"})
    assert first.manifest == second.manifest and first.digest == second.digest
    assert first.titles == ("tables/orders.sql", "types.sql")


def test_a_packaged_manifest_is_the_one_a_pull_reads_back(schema_folder: Path) -> None:
    packaged = package_folder(schema_folder, "schema", {"b": "2", "a": "1"})
    raw, digest = packaged.manifest.raw, packaged.digest
    assert parse_manifest(raw, digest, (ARTIFACT_TYPES["schema"],)) == packaged.manifest


def test_bearer_tokens_from_the_registrys_token_service(
    seshat: SeshatRunner, schema_folder: Path, tmp_path: Path
) -> None:
    """The registry's token auth is real; its token service is a small server of the test's
    (see harness/token_registry.py): it checks basic credentials and signs JWTs."""
    from harness.token_registry import running_token_registry

    with running_token_registry(tmp_path) as token:
        address = token.registry.address
        ref = f"oci://{address}/team/schema:v1"
        plain = ("--plain-http", address)
        denied = seshat("artifact", *plain, "push", schema_folder, ref, "--type", "schema")
        assert denied.returncode == 1 and "unauthorized" in denied.stderr
        env = {
            "SESHAT_REGISTRY_USERNAME": token.username,
            "SESHAT_REGISTRY_PASSWORD": token.password,
        }
        pushed = seshat(
            "artifact",
            *plain,
            "push",
            schema_folder,
            ref,
            "--type",
            "schema",
            env=env,
            secrets=[token.password],
        )
        assert pushed.returncode == 0, pushed.stderr
        assert any("push" in scope for scope in token.issued)
        pulled = seshat(
            "artifact", *plain, "pull", ref, tmp_path / "out", env=env, secrets=[token.password]
        )
        assert pulled.returncode == 0, pulled.stderr
        assert pulled.stdout == pushed.stdout
