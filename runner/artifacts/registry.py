"""A registry repository over the OCI distribution API (``/v2/``), with ``requests``.

Why not oras-py: it retries every failure with sleeps that grow to minutes and logs through
its own logger, while Seshat needs a registry outage reported at once as a retryable error,
bounded reads, and no request detail (which may hold a token) in any message. The API
surface Seshat needs is small: resolve a tag, read a manifest or blob, upload a blob or
manifest, list referrers.

Credentials, first match wins: ``SESHAT_REGISTRY_TOKEN`` (a bearer token), then
``SESHAT_REGISTRY_USERNAME`` with ``SESHAT_REGISTRY_PASSWORD`` (basic, also used to obtain
bearer tokens when the registry asks for them), then the ``auths`` entry for the host in the
docker ``config.json`` (``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``).
TLS is verified against the system roots or ``ca_file``; plain HTTP is used only for hosts
listed in ``plain_http``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from runner.artifacts.errors import ArtifactError
from runner.artifacts.format import (
    INDEX_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    Descriptor,
    load_json,
    parse_descriptor,
    parse_digest,
)
from runner.digests import Digest, InvalidDigest, sha256_digest

__all__ = ["Credentials", "RegistryOptions", "RegistryStore", "credentials_for"]

_ACCEPT = ", ".join(
    [
        MANIFEST_MEDIA_TYPE,
        INDEX_MEDIA_TYPE,
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_MAX_INDEX = 4 * 1024 * 1024


@dataclass(frozen=True)
class Credentials:
    """Basic credentials and/or a bearer token; never printed (see ``__repr__``)."""

    username: str = ""
    password: str = ""
    token: str = ""

    def __repr__(self) -> str:
        return "Credentials(<redacted>)"

    def secrets(self) -> list[str]:
        return [s for s in (self.password, self.token) if s]


def _docker_config() -> dict[str, Any]:
    directory = os.environ.get("DOCKER_CONFIG")
    path = Path(directory) / "config.json" if directory else Path.home() / ".docker/config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def credentials_for(host: str) -> Credentials:
    """The credentials configured for ``host`` (see the module docstring)."""
    if os.environ.get("SESHAT_REGISTRY_TOKEN"):
        return Credentials(token=os.environ["SESHAT_REGISTRY_TOKEN"])
    if os.environ.get("SESHAT_REGISTRY_USERNAME"):
        return Credentials(
            os.environ["SESHAT_REGISTRY_USERNAME"], os.environ.get("SESHAT_REGISTRY_PASSWORD", "")
        )
    auths = _docker_config().get("auths") or {}
    for key in (host, f"https://{host}", f"http://{host}"):
        entry = auths.get(key)
        if not isinstance(entry, dict):
            continue
        if entry.get("auth"):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except ValueError:
                continue
            return Credentials(user, password)
        if entry.get("username"):
            return Credentials(str(entry["username"]), str(entry.get("password", "")))
        if entry.get("registrytoken"):
            return Credentials(token=str(entry["registrytoken"]))
    return Credentials()


@dataclass(frozen=True)
class RegistryOptions:
    """How to reach registries: a CA bundle, hosts allowed plain HTTP, a timeout."""

    ca_file: Path | None = None
    plain_http: frozenset[str] = frozenset()
    timeout: float = 30.0
    credentials: Mapping[str, Credentials] = field(default_factory=dict)


class RegistryStore:
    """One repository on one registry."""

    def __init__(self, host: str, repository: str, options: RegistryOptions) -> None:
        self.host = host
        self.repository = repository
        self.options = options
        scheme = "http" if host in options.plain_http else "https"
        self.base = f"{scheme}://{host}/v2/{repository}"
        self.credentials = options.credentials.get(host) or credentials_for(host)
        self.session = requests.Session()
        self.session.trust_env = False  # no proxies from the environment for registries
        self.bearer = self.credentials.token

    # -- HTTP ----------------------------------------------------------------------------

    def _verify(self) -> bool | str:
        return str(self.options.ca_file) if self.options.ca_file else True

    def _send(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", {}))
        if self.bearer:
            headers["Authorization"] = f"Bearer {self.bearer}"
        elif self.credentials.username:
            headers["Authorization"] = "Basic " + base64.b64encode(
                f"{self.credentials.username}:{self.credentials.password}".encode()
            ).decode("ascii")
        try:
            return self.session.request(
                method,
                url,
                headers=headers,
                timeout=self.options.timeout,
                verify=self._verify(),
                allow_redirects=True,
                **kwargs,
            )
        except requests.exceptions.SSLError:
            raise ArtifactError(
                "registry_unavailable",
                f"{self.host}: TLS verification failed (give its CA with --ca-file, or allow "
                "plain HTTP for it with --plain-http if it speaks no TLS)",
                retryable=True,
            ) from None
        except requests.exceptions.RequestException as error:
            kind = type(error).__name__
            raise ArtifactError(
                "registry_unavailable",
                f"{self.host}: cannot reach the registry ({kind})",
                retryable=True,
            ) from None

    def _token(self, challenge: str) -> bool:
        """Obtain a bearer token for a ``Bearer realm=...`` challenge; False if not possible."""
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm:
            return False
        auth = (
            (self.credentials.username, self.credentials.password)
            if self.credentials.username
            else None
        )
        try:
            response = self.session.get(
                realm,
                params=params,
                auth=auth,
                timeout=self.options.timeout,
                verify=self._verify(),
            )
        except requests.exceptions.RequestException:
            raise ArtifactError(
                "registry_unavailable",
                f"{self.host}: cannot reach its token service",
                retryable=True,
            ) from None
        if response.status_code != 200:
            return False
        try:
            body = response.json()
        except ValueError:
            return False
        token = body.get("token") or body.get("access_token")
        if not isinstance(token, str) or not token:
            return False
        self.bearer = token
        return True

    def _request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        response = self._send(method, url, **kwargs)
        if response.status_code == 401:
            challenge = response.headers.get("WWW-Authenticate", "")
            if challenge.lower().startswith("bearer") and self._token(challenge):
                response = self._send(method, url, **kwargs)
        if response.status_code in (401, 403):
            has = "with" if (self.credentials.username or self.bearer) else "without"
            raise ArtifactError(
                "unauthorized",
                f"{self.host}/{self.repository}: access denied {has} credentials "
                f"(HTTP {response.status_code})",
            )
        if response.status_code >= 500:
            raise ArtifactError(
                "registry_unavailable",
                f"{self.host}: the registry answered HTTP {response.status_code}",
                retryable=True,
            )
        return response

    def _bounded(self, response: requests.Response, limit: int, what: str) -> bytes:
        chunks: list[bytes] = []
        total = 0
        for chunk in response.iter_content(65536):
            total += len(chunk)
            if total > limit:
                response.close()
                raise ArtifactError("size_mismatch", f"{what} is larger than {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    # -- reading -------------------------------------------------------------------------

    def resolve(self, tag: str) -> Descriptor:
        response = self._request(
            "GET", f"{self.base}/manifests/{tag}", headers={"Accept": _ACCEPT}, stream=True
        )
        if response.status_code == 404:
            raise ArtifactError("not_found", f"{self.host}/{self.repository}: no tag {tag!r}")
        if response.status_code != 200:
            raise ArtifactError(
                "not_found", f"{self.host}/{self.repository}:{tag}: HTTP {response.status_code}"
            )
        data = self._bounded(response, 4 * 1024 * 1024, f"manifest {tag}")
        digest = sha256_digest(data)
        announced = response.headers.get("Docker-Content-Digest")
        if announced:
            try:
                stated = Digest(announced)
            except InvalidDigest as error:
                raise ArtifactError(
                    "manifest_invalid", f"{self.host}/{self.repository}:{tag}: {error}"
                ) from None
            if not stated.matches(data):
                raise ArtifactError(
                    "digest_mismatch",
                    f"{self.host}/{self.repository}:{tag}: the registry says {stated}, "
                    f"the bytes hash to {digest}",
                )
        media_type = response.headers.get("Content-Type", MANIFEST_MEDIA_TYPE).split(";")[0]
        artifact_type: object = ""
        with contextlib.suppress(ArtifactError):  # parse_manifest judges the bytes later
            artifact_type = load_json(data, f"manifest {tag}").get("artifactType", "")
        if not isinstance(artifact_type, str):
            artifact_type = ""
        return Descriptor(digest, len(data), media_type, artifact_type)

    def manifest(self, digest: Digest, max_bytes: int) -> bytes:
        digest = parse_digest(digest, "manifest")
        response = self._request(
            "GET", f"{self.base}/manifests/{digest}", headers={"Accept": _ACCEPT}, stream=True
        )
        if response.status_code == 404:
            raise ArtifactError("not_found", f"{self.host}/{self.repository}: no manifest {digest}")
        data = self._bounded(response, max_bytes, f"manifest {digest}")
        if not digest.matches(data):
            raise ArtifactError(
                "digest_mismatch", f"the manifest served as {digest} hashes to something else"
            )
        return data

    def blob(self, digest: Digest, size: int) -> bytes:
        digest = parse_digest(digest, "blob")
        response = self._request("GET", f"{self.base}/blobs/{digest}", stream=True)
        if response.status_code == 404:
            raise ArtifactError("not_found", f"{self.host}/{self.repository}: no blob {digest}")
        data = self._bounded(response, size, f"blob {digest}")
        if len(data) != size:
            raise ArtifactError(
                "size_mismatch", f"blob {digest} is {len(data)} bytes, its descriptor says {size}"
            )
        if not digest.matches(data):
            raise ArtifactError("digest_mismatch", f"blob {digest} hashes to something else")
        return data

    def _index(self, response: requests.Response) -> Any:
        try:
            return load_json(self._bounded(response, _MAX_INDEX, "referrers index"), "index")
        except ArtifactError as error:
            if error.reason != "manifest_invalid":
                raise
            return None  # an unreadable list names no referrer

    def referrers(self, digest: Digest) -> list[Descriptor]:
        digest = parse_digest(digest, "subject")
        response = self._request(
            "GET",
            f"{self.base}/referrers/{digest}",
            headers={"Accept": INDEX_MEDIA_TYPE},
            stream=True,
        )
        index: Any = None
        if response.status_code == 200 and response.headers.get("Content-Type", "").startswith(
            INDEX_MEDIA_TYPE
        ):
            index = self._index(response)
        else:
            response.close()
            # No referrers API: the fallback tag ``sha256-<hex>`` holds an index of them.
            fallback = self._request(
                "GET",
                f"{self.base}/manifests/{_fallback_tag(digest)}",
                headers={"Accept": INDEX_MEDIA_TYPE},
                stream=True,
            )
            if fallback.status_code == 200:
                index = self._index(fallback)
        entries = index.get("manifests") if isinstance(index, dict) else None
        found: list[Descriptor] = []
        for number, entry in enumerate(entries if isinstance(entries, list) else []):
            try:
                found.append(parse_descriptor(entry, f"referrer {number}"))
            except ArtifactError:
                continue  # a malformed entry refers to nothing; it cannot vouch for anything
            if not found[-1].media_type:
                found[-1] = dataclasses.replace(found[-1], media_type=MANIFEST_MEDIA_TYPE)
        return sorted(found, key=lambda d: d.digest)

    def has_referrers_api(self, digest: Digest) -> bool:
        digest = parse_digest(digest, "subject")
        response = self._request(
            "GET", f"{self.base}/referrers/{digest}", headers={"Accept": INDEX_MEDIA_TYPE}
        )
        return response.status_code == 200 and response.headers.get("Content-Type", "").startswith(
            INDEX_MEDIA_TYPE
        )

    # -- writing -------------------------------------------------------------------------

    def push_blob(self, digest: Digest, data: bytes) -> None:
        digest = parse_digest(digest, "blob")
        head = self._request("HEAD", f"{self.base}/blobs/{digest}")
        if head.status_code == 200:
            return
        start = self._request("POST", f"{self.base}/blobs/uploads/")
        if start.status_code != 202 or "Location" not in start.headers:
            raise ArtifactError(
                "registry_unavailable",
                f"{self.host}: could not start an upload (HTTP {start.status_code})",
                retryable=True,
            )
        location = urljoin(self.base + "/", start.headers["Location"])
        separator = "&" if "?" in location else "?"
        done = self._request(
            "PUT",
            f"{location}{separator}digest={digest}",
            data=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        if done.status_code != 201:
            raise ArtifactError(
                "registry_unavailable",
                f"{self.host}: the upload of {digest} failed (HTTP {done.status_code})",
                retryable=True,
            )

    def push_manifest(self, data: bytes, media_type: str, tag: str | None) -> Digest:
        digest = sha256_digest(data)
        response = self._request(
            "PUT",
            f"{self.base}/manifests/{tag or digest}",
            data=data,
            headers={"Content-Type": media_type},
        )
        if response.status_code != 201:
            detail = ""
            try:
                errors = response.json().get("errors") or []
                detail = "; ".join(str(e.get("message", "")) for e in errors)[:300]
            except ValueError:
                pass
            raise ArtifactError(
                "manifest_invalid",
                f"{self.host}/{self.repository}: the registry refused the manifest "
                f"(HTTP {response.status_code}{': ' + detail if detail else ''})",
            )
        return digest


def _fallback_tag(digest: Digest) -> str:
    """The referrers fallback tag of ``digest`` (OCI 1.1: ``<algorithm>-<hex>``)."""
    return f"{digest.algorithm}-{digest.hex}"
