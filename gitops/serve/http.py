"""``seshat run --listen ADDR``: what the listener serves, on :mod:`gitops.serve.server`.

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

Anything else is 404 (405 for a known path and another method). A webhook is refused on
its head (type, length, a missing proof, a wrong GitLab token) before its body is read.
The server under it bounds what an unauthenticated client can hold (connections, time,
bytes, threads: :class:`~gitops.serve.server.Limits`); nothing is logged with a body.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gitops import metrics
from gitops.serve.health import Answer, Health
from gitops.serve.server import Limits, Request, Response, Server
from gitops.serve.webhooks import (
    MAX_BODY,
    Check,
    Forge,
    WebhookSecret,
    verify,
    verify_head,
    wakes,
)

__all__ = ["Limits", "Listener", "parse_address", "start"]

_PROBES = ("/metrics", "/healthz", "/readyz")


@dataclass(frozen=True, slots=True)
class Listener:
    """A running server: where it listens, and how to stop it."""

    server: Server

    @property
    def address(self) -> str:
        host, port = self.server.sock.getsockname()[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def stop(self) -> None:
        self.server.stop()


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6; port 0 picks a free one); ValueError if not."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:9187 or [::1]:9187)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class _Routes:
    """The endpoints; see the module's documentation."""

    def __init__(
        self,
        health: Health,
        wake: Callable[[], None],
        secret: WebhookSecret | None,
        log: Callable[[str], None],
    ) -> None:
        self.health, self.wake, self.secret, self.log = health, wake, secret, log

    def head(self, request: Request) -> Response | None:
        if request.method == "GET":
            if request.path in _PROBES or self._forge(request.path) is None:
                if request.content_length:
                    return Response.text(413, "a GET has no body", close=True)
                return None  # answered by handle
            return Response.text(405, "POST only")
        forge = self._forge(request.path)
        if request.method != "POST" or forge is None:
            if request.path in _PROBES:
                return Response.text(405, "GET only")
            return Response.text(405, "POST only") if forge else Response.text(404, "not found")
        secret = self.secret
        assert secret is not None  # _forge answers None without one
        refused = _refusal(request.headers.get("content-type"), request.content_length)
        if refused is None:
            check = verify_head(forge, secret, request.headers)
            if check is not None and check is not Check.VERIFIED:
                refused = self._unproven(forge, check)
        if refused is not None:
            metrics.webhook_received("refused")
        return refused

    def handle(self, request: Request, body: bytes) -> Response:
        if request.method == "GET":
            if request.path == "/metrics":
                return Response(200, generate_latest(metrics.REGISTRY), CONTENT_TYPE_LATEST)
            if request.path == "/healthz":
                return _answer(self.health.healthy())
            if request.path == "/readyz":
                return _answer(self.health.ready())
            return Response.text(404, "not found")
        forge = self._forge(request.path)
        assert forge is not None and self.secret is not None  # head let only these through
        check = verify(forge, self.secret, request.headers, body)
        if check is not Check.VERIFIED:
            metrics.webhook_received("refused")
            return self._unproven(forge, check)
        try:
            json.loads(body)
        except (ValueError, RecursionError):
            metrics.webhook_received("refused")
            return Response.text(400, "not JSON")
        if not wakes(forge, request.headers):
            metrics.webhook_received("ignored")
            return Response.text(200, "ignored: not a push")
        metrics.webhook_received("accepted")
        self.wake()
        return Response.text(202, "accepted")

    def _forge(self, path: str) -> Forge | None:
        """The forge a webhook path is for; None for any path when webhooks are off."""
        if self.secret is None or not path.startswith("/webhooks/"):
            return None
        try:
            return Forge(path.removeprefix("/webhooks/"))
        except ValueError:
            return None

    def _unproven(self, forge: Forge, check: Check) -> Response:
        self.log(f"seshat: a {forge} webhook was refused: {check.value} signature")
        if check is Check.MISSING:
            return Response.text(401, "no signature", close=True)
        return Response.text(403, "bad signature", close=True)


def _answer(answer: Answer) -> Response:
    return Response.text(200 if answer.ok else 503, answer.text)


def _refusal(content_type: str | None, length: int | None) -> Response | None:
    """Why a webhook request is refused on its type and length, if it is (the server has
    parsed the length: ASCII digits, or a 400 before this)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        return Response.text(415, "the body must be application/json", close=True)
    if length is None:
        return Response.text(411, "Content-Length required", close=True)
    if length > MAX_BODY:
        return Response.text(413, f"the body is larger than {MAX_BODY} bytes", close=True)
    return None


def start(
    address: str,
    health: Health,
    wake: Callable[[], None],
    secret: WebhookSecret | None,
    log: Callable[[str], None],
    limits: Limits | None = None,
) -> Listener:
    """Serve on ``address`` (``HOST:PORT``) from a thread of its own, within ``limits``;
    raises ValueError or OSError when it cannot listen there."""
    host, port = parse_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    server = Server(
        sock,
        _Routes(health, wake, secret, log),
        limits or Limits(max_body=MAX_BODY),
        refused=metrics.listener_refused,
        connections=metrics.listener_connections,
    )
    server.start()
    return Listener(server)
