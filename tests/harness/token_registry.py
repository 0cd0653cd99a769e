"""A registry behind bearer-token auth, and the token service it trusts.

docker-registry's ``auth: token`` mode is real: it answers ``401`` with a
``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` challenge and verifies every
token's ES256 signature against a certificate bundle. The token service beside it is ours (a
small HTTP server on loopback, because no real one is packaged here): it checks basic
credentials and issues JWTs signed with the certificate the registry trusts.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from . import secret_scan
from .ports import LOOPBACK
from .registry import RegistryServer, _running

__all__ = ["TokenRegistry", "running_token_registry"]

SERVICE, ISSUER = "seshat-test-registry", "seshat-test-token-service"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class TokenRegistry:
    registry: RegistryServer
    username: str
    password: str
    issued: list[str]  # scopes of the tokens issued, in order


def _signer(directory: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    bundle = directory / "token-signer.pem"
    bundle.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, bundle


def _token(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate, scope: str, user: str) -> str:
    header = {
        "typ": "JWT",
        "alg": "ES256",
        "x5c": [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()],
    }
    access = []
    if scope:
        kind, name, actions = scope.split(":", 2)
        access.append({"type": kind, "name": name, "actions": actions.split(",")})
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": user,
        "aud": SERVICE,
        "exp": now + 300,
        "nbf": now - 10,
        "iat": now,
        "jti": secrets.token_hex(8),
        "access": access,
    }
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


@contextlib.contextmanager
def running_token_registry(base_dir: Path) -> Iterator[TokenRegistry]:
    root = base_dir / "registry-token"
    root.mkdir()
    key, cert, bundle = _signer(root)
    username, password = "robot", secret_scan.remember(secrets.token_urlsafe(18))
    issued: list[str] = []
    expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.end_headers()
                return
            scope = query.get("scope", [""])[0]
            issued.append(scope)
            body = json.dumps(
                {"token": _token(key, cert, scope, username), "expires_in": 300}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    realm = f"http://{LOOPBACK}:{server.server_address[1]}/token"
    auth = [
        "  token:",
        f"    realm: {json.dumps(realm)}",
        f"    service: {SERVICE}",
        f"    issuer: {ISSUER}",
        f"    rootcertbundle: {json.dumps(str(bundle))}",
    ]
    try:
        with _running(
            root, tls=None, htpasswd=None, attempts=3, describe=RegistryServer, auth=auth
        ) as registry:
            yield TokenRegistry(registry, username, password, issued)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
