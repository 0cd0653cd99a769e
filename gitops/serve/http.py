"""``seshat run --listen ADDR``: one small HTTP server on a thread of its own.

=======================  ======  ========================================================
path                     method  answer
=======================  ======  ========================================================
``/metrics``             GET     Prometheus text format (:data:`gitops.metrics.REGISTRY`)
``/healthz``             GET     200 alive, 503 the loop stopped going round
``/readyz``              GET     200 ready, 503 not yet (:mod:`gitops.serve.health`)
``/webhooks/github``     POST    202 a verified push (wakes the loop), 200 another event,
``/webhooks/gitlab``             401 no proof, 403 a wrong one, 400 not JSON, 411/413/415
``/webhooks/generic``            a body of unknown, too large or non-JSON length/type;
                                 404 when no webhook secret is configured
=======================  ======  ========================================================

Anything else is 404 (405 for a known path and another method). Requests are handled one
thread each, with a socket timeout, and never logged with their bodies.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gitops import metrics
from gitops.serve.health import Answer, Health
from gitops.serve.webhooks import MAX_BODY, Check, Forge, WebhookSecret, verify, wakes

__all__ = ["Listener", "parse_address", "start"]

REQUEST_TIMEOUT = 10.0  # seconds a client may take to send its request


@dataclass(frozen=True, slots=True)
class Listener:
    """A running server: where it listens, and how to stop it."""

    server: ThreadingHTTPServer
    thread: threading.Thread

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        text = host.decode("ascii") if isinstance(host, bytes) else host
        return f"[{text}]:{port}" if ":" in text else f"{text}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6; port 0 picks a free one); ValueError if not."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:9187 or [::1]:9187)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    health: Health
    secret: WebhookSecret | None
    wake: Callable[[], None]
    log: Callable[[str], None]

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away or stalled: nothing to print (the stdlib prints a
        traceback to stderr)."""


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = REQUEST_TIMEOUT
    server_version = "seshat"
    sys_version = ""

    # -- routes ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, generate_latest(metrics.REGISTRY), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            self._answer(self.server.health.healthy())
        elif path == "/readyz":
            self._answer(self.server.health.ready())
        elif self._forge(path) is not None:
            self._text(405, "POST only")
        else:
            self._text(404, "not found")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        forge = self._forge(path)
        if forge is None:
            self._text(405 if path in ("/metrics", "/healthz", "/readyz") else 404, "not found")
            return
        secret = self.server.secret
        assert secret is not None  # _forge answers None without one
        status, text = self._webhook(forge, secret)
        self._text(status, text)

    def _forge(self, path: str) -> Forge | None:
        """The forge a webhook path is for; None for any path when webhooks are off."""
        if self.server.secret is None or not path.startswith("/webhooks/"):
            return None
        try:
            return Forge(path.removeprefix("/webhooks/"))
        except ValueError:
            return None

    def _webhook(self, forge: Forge, secret: WebhookSecret) -> tuple[int, str]:
        refused = _refusal(self.headers.get("Content-Type"), self.headers.get("Content-Length"))
        if refused is not None:
            metrics.webhook_received("refused")
            self.close_connection = True  # the body, if any, is not read
            return refused
        try:
            body = self.rfile.read(int(self.headers["Content-Length"]))
        except OSError:  # the client stalled past the timeout
            metrics.webhook_received("refused")
            self.close_connection = True
            return 408, "the body did not arrive in time"
        headers = {name.lower(): value for name, value in self.headers.items()}
        check = verify(forge, secret, headers, body)
        if check is not Check.VERIFIED:
            metrics.webhook_received("refused")
            self.server.log(f"seshat: a {forge} webhook was refused: {check.value} signature")
            return (401, "no signature") if check is Check.MISSING else (403, "bad signature")
        try:
            json.loads(body)
        except (ValueError, RecursionError):
            metrics.webhook_received("refused")
            return 400, "not JSON"
        if not wakes(forge, headers):
            metrics.webhook_received("ignored")
            return 200, "ignored: not a push"
        metrics.webhook_received("accepted")
        self.server.wake()
        return 202, "accepted"

    # -- answers --------------------------------------------------------------------------

    def _answer(self, answer: Answer) -> None:
        self._text(200 if answer.ok else 503, answer.text)

    def _text(self, status: int, text: str) -> None:
        self._send(status, (text + "\n").encode("utf-8"), "text/plain; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Request lines are not logged: a path is all they would add."""


def _refusal(content_type: str | None, length: str | None) -> tuple[int, str] | None:
    """Why a webhook request is refused before its body is read, if it is."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        return 415, "the body must be application/json"
    if length is None or not length.strip().isdigit():
        return 411, "Content-Length required"
    if int(length) > MAX_BODY:
        return 413, f"the body is larger than {MAX_BODY} bytes"
    return None


def start(
    address: str,
    health: Health,
    wake: Callable[[], None],
    secret: WebhookSecret | None,
    log: Callable[[str], None],
) -> Listener:
    """Serve on ``address`` (``HOST:PORT``) from a daemon thread; raises ValueError or
    OSError when it cannot listen there."""
    host, port = parse_address(address)
    server = (_Server6 if ":" in host else _Server)((host, port), _Handler)
    server.health, server.secret, server.wake, server.log = health, secret, wake, log
    thread = threading.Thread(target=server.serve_forever, name="seshat-listen", daemon=True)
    thread.start()
    return Listener(server, thread)
