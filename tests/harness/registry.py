"""Throw-away OCI registries (CNCF distribution, Debian's ``docker-registry``).

Why a real registry: Seshat ships migrations as OCI artifacts, and the upload
protocol (chunked-upload sessions, digests, manifest media types, auth
challenges, TLS) is exactly where fakes drift from reality.

Two flavours are provided: a plain HTTP registry without auth, and one that
requires htpasswd basic auth over TLS with a self-signed certificate whose
path is exposed so clients can verify it as their CA.  Storage lives under the
session base directory and deletes are enabled so tests can exercise them.

Requests from the helpers bypass any ``http_proxy`` in the environment: a proxy
must never see (or break) traffic to 127.0.0.1.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import secrets
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import TypeVar

from . import secret_scan
from .ports import LOOPBACK
from .processes import (
    ManagedProcess,
    clean_environment,
    log_size,
    require_binary,
    run_captured,
    run_logged,
    serving_on_free_port,
    wait_for_start,
)

PACKAGE = "docker-registry"
_START_TIMEOUT = 15.0
_POLL_INTERVAL = 0.05


@dataclass(frozen=True)
class RegistryResponse:
    """Status, headers and body of one registry HTTP exchange (errors included)."""

    status: int
    headers: Message
    body: bytes


@dataclass(frozen=True)
class RegistryServer:
    """A running registry: where it listens and a minimal HTTP helper to talk to it."""

    host: str
    port: int
    root_dir: Path
    config_path: Path
    log_path: Path
    pid: int
    scheme: str = field(default="http")

    @property
    def address(self) -> str:
        """``host:port``, the form image references use (``127.0.0.1:PORT/name:tag``)."""
        return f"{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http(s)://host:port``."""
        return f"{self.scheme}://{self.address}"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context clients need (None for plain HTTP)."""
        return None

    def auth_headers(self) -> dict[str, str]:
        """Headers that authenticate a request (none for an open registry)."""
        return {}

    def request(
        self,
        method: str,
        path_or_url: str,
        *,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        authenticate: bool = True,
        timeout: float = 10.0,
    ) -> RegistryResponse:
        """One HTTP request; returns 4xx/5xx responses instead of raising."""
        url = path_or_url if "://" in path_or_url else self.base_url + path_or_url
        all_headers = dict(self.auth_headers()) if authenticate else {}
        all_headers.update(headers or {})
        req = urllib.request.Request(url, data=data, headers=all_headers, method=method)
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
        context = self.ssl_context()
        if context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=context))
        opener = urllib.request.build_opener(*handlers)
        try:
            with opener.open(req, timeout=timeout) as resp:
                return RegistryResponse(resp.status, resp.headers, resp.read())
        except urllib.error.HTTPError as err:
            with err:
                return RegistryResponse(err.code, err.headers, err.read())


@dataclass(frozen=True)
class AuthRegistryServer(RegistryServer):
    """A registry behind htpasswd basic auth and TLS with a self-signed certificate."""

    ca_path: Path = field(kw_only=True)
    username: str = field(kw_only=True)
    password: str = field(kw_only=True)

    def ssl_context(self) -> ssl.SSLContext:
        """A verifying TLS context that trusts only the registry's self-signed certificate."""
        return ssl.create_default_context(cafile=str(self.ca_path))

    def auth_headers(self) -> dict[str, str]:
        """``Authorization: Basic …`` for the test user."""
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}


_Server = TypeVar("_Server", bound=RegistryServer)


def _config_yaml(
    root: Path,
    port: int,
    *,
    tls: tuple[Path, Path] | None,
    htpasswd: Path | None,
    auth: list[str] | None = None,
) -> str:
    """The registry's config.yml; JSON strings double as YAML scalars for paths."""
    lines = [
        "version: 0.1",
        "log:",
        "  level: warn",
        "  accesslog:",
        "    disabled: true",
        "storage:",
        "  filesystem:",
        f"    rootdirectory: {json.dumps(str(root / 'data'))}",
        "  delete:",
        "    enabled: true",
        "http:",
        f"  addr: {json.dumps(f'{LOOPBACK}:{port}')}",
        f"  secret: {json.dumps(secrets.token_hex(32))}",
    ]
    if tls is not None:
        cert, key = tls
        lines += [
            "  tls:",
            f"    certificate: {json.dumps(str(cert))}",
            f"    key: {json.dumps(str(key))}",
        ]
    if htpasswd is not None:
        lines += [
            "auth:",
            "  htpasswd:",
            "    realm: seshat-test",
            f"    path: {json.dumps(str(htpasswd))}",
        ]
    if auth is not None:
        lines += ["auth:", *auth]
    return "\n".join(lines) + "\n"


def make_self_signed_cert(directory: Path, log_path: Path) -> tuple[Path, Path]:
    """An EC P-256 self-signed certificate for 127.0.0.1/localhost; returns (cert, key).

    The certificate is its own CA (openssl req -x509 marks it CA:TRUE), so
    clients verify the server with ``cafile=cert``.
    """
    openssl = require_binary("openssl", "openssl")
    cert, key = directory / "registry.crt", directory / "registry.key"
    run_logged(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=seshat-test-registry",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        log_path=log_path,
        what="openssl req (registry TLS certificate)",
    )
    return cert, key


def make_htpasswd(path: Path, username: str, password: str) -> None:
    """Write a bcrypt htpasswd file (the only hash distribution accepts)."""
    htpasswd = require_binary("htpasswd", "apache2-utils")
    entry = run_captured([htpasswd, "-Bbn", username, password], what="htpasswd")
    path.write_bytes(entry.strip() + b"\n")


def _start_once(
    binary: str,
    root: Path,
    port: int,
    tls: tuple[Path, Path] | None,
    htpasswd: Path | None,
    auth: list[str] | None = None,
) -> ManagedProcess | None:
    """Start the registry on *port*; None if the port turned out to be taken."""
    config = _config_path(root)
    log_path = root / "registry.log"
    config.write_text(_config_yaml(root, port, tls=tls, htpasswd=htpasswd, auth=auth))
    offset = log_size(log_path)
    process = ManagedProcess(
        [binary, "serve", str(config)],
        log_path=log_path,
        cwd=root,
        # REGISTRY_* variables override config.yml; keep the config authoritative.
        env=clean_environment(drop_prefixes=("REGISTRY_",)),
    )
    scheme = "https" if tls is not None else "http"
    context = ssl.create_default_context(cafile=str(tls[0])) if tls is not None else None
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )

    def answers() -> bool:
        try:
            with opener.open(f"{scheme}://{LOOPBACK}:{port}/v2/", timeout=1.0) as resp:
                return int(resp.status) == 200
        except urllib.error.HTTPError as err:
            with err:
                return err.code == 401 and (htpasswd is not None or auth is not None)
        except OSError:
            return False

    return wait_for_start(
        process,
        ready=answers,
        what="docker-registry",
        not_ready="registry did not answer GET /v2/",
        timeout=_START_TIMEOUT,
        interval=_POLL_INTERVAL,
        log_name="log",
        log_path=log_path,
        log_offset=offset,
    )


def _config_path(root: Path) -> Path:
    """Where a registry rooted at *root* keeps its config.yml."""
    return root / "config.yml"


@contextlib.contextmanager
def _running(
    root: Path,
    *,
    tls: tuple[Path, Path] | None,
    htpasswd: Path | None,
    attempts: int,
    describe: Callable[..., _Server],
    auth: list[str] | None = None,
) -> Iterator[_Server]:
    """Start a registry in *root* on a free port; yield ``describe(**where)``; stop it afterwards.

    Why *describe*: both flavours share the fields that say where the registry
    runs (host, port, root_dir, config_path, log_path, pid, passed as keywords);
    the caller binds whatever else its dataclass needs (scheme, credentials).
    """
    binary = require_binary("docker-registry", PACKAGE)
    with serving_on_free_port(
        lambda port: _start_once(binary, root, port, tls, htpasswd, auth),
        attempts=attempts,
        what="registry",
        stop_timeout=10.0,
    ) as (process, port):
        yield describe(
            host=LOOPBACK,
            port=port,
            root_dir=root,
            config_path=_config_path(root),
            log_path=process.log_path,
            pid=process.pid,
        )


@contextlib.contextmanager
def running_registry(base_dir: Path, *, attempts: int = 3) -> Iterator[RegistryServer]:
    """An open (no auth, plain HTTP) registry under *base_dir*/registry."""
    root = base_dir / "registry"
    root.mkdir()
    with _running(
        root, tls=None, htpasswd=None, attempts=attempts, describe=RegistryServer
    ) as registry:
        yield registry


@contextlib.contextmanager
def running_auth_registry(
    base_dir: Path, *, username: str = "seshat", attempts: int = 3
) -> Iterator[AuthRegistryServer]:
    """A registry requiring basic auth (random password) over TLS, in *base_dir*/registry-auth."""
    root = base_dir / "registry-auth"
    root.mkdir()
    password = secret_scan.remember(secrets.token_urlsafe(24))
    tls = make_self_signed_cert(root, root / "tools.log")
    htpasswd = root / "htpasswd"
    make_htpasswd(htpasswd, username, password)
    describe = functools.partial(
        AuthRegistryServer, scheme="https", ca_path=tls[0], username=username, password=password
    )
    with _running(
        root, tls=tls, htpasswd=htpasswd, attempts=attempts, describe=describe
    ) as registry:
        yield registry
