"""Fuzzing the listener (``seshat run --listen``) over a real socket.

Whatever bytes a client sends before it closes its side: the listener answers with one of
the statuses it documents, or closes without a word; it never hits a fault of its own (the
``internal`` refusal count stays where it was), and it still answers ``/healthz`` after.
The seeds are the requests it serves (probes, each forge's webhook, keep-alive pairs),
mutated at the byte level: heads cut short, lengths that are not digits, stray CR and NUL,
bytes that are not UTF-8.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import re
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given

from fuzz.fuzzkit import budget, mutated_bytes
from gitops import metrics
from gitops.serve import http
from gitops.serve.health import Health
from gitops.serve.server import Limits
from gitops.serve.webhooks import WebhookSecret

SECRET = WebhookSecret(b"fuzz-listener-secret-0123456789")
BODY = b'{"ref": "refs/heads/main"}'
SIGNED = "sha256=" + hmac.new(SECRET.value, BODY, hashlib.sha256).hexdigest()
STATUS_LINE = re.compile(rb"^HTTP/1\.1 (\d{3}) ", re.MULTILINE)
DOCUMENTED = {200, 202, 400, 401, 403, 404, 405, 408, 411, 413, 415, 431, 503}


def _post(path: str, headers: str, body: bytes = BODY) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: seshat\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{headers}\r\n"
    ).encode() + body


SEEDS = [
    b"GET /healthz HTTP/1.1\r\nHost: seshat\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: seshat\r\n\r\nGET /readyz HTTP/1.1\r\nHost: seshat\r\n\r\n",
    _post("/webhooks/github", f"X-GitHub-Event: push\r\nX-Hub-Signature-256: {SIGNED}\r\n"),
    _post("/webhooks/gitlab", f"X-Gitlab-Token: {SECRET.value.decode()}\r\n"),
    _post("/webhooks/generic", f"X-Seshat-Signature-256: {SIGNED}\r\nExpect: 100-continue\r\n"),
    b"POST /webhooks/generic HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
]


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    health = Health(stale_after=3600)
    health.beat(None)
    limits = Limits(request_deadline=1.0, idle_timeout=1.0)
    listener = http.start("127.0.0.1:0", health, lambda: None, SECRET, lambda _: None, limits)
    host, _, port = listener.address.rpartition(":")
    yield host, int(port)
    listener.stop()


def _exchange(address: tuple[str, int], data: bytes) -> bytes:
    with socket.create_connection(address, timeout=5) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                answer += chunk
    return answer


def _internal() -> float:
    found = metrics.REGISTRY.get_sample_value(
        "seshat_listener_refusals_total", {"reason": "internal"}
    )
    return found or 0.0


@given(request=mutated_bytes(SEEDS))
@budget(150)
def test_any_request_is_answered_as_documented_or_closed(
    address: tuple[str, int], request: bytes
) -> None:
    faults = _internal()
    answer = _exchange(address, request)
    if answer:
        assert answer.startswith(b"HTTP/1.1 "), answer[:80]
        statuses = {int(code) for code in STATUS_LINE.findall(answer)}
        assert statuses and statuses - {100} <= DOCUMENTED, answer[:200]
    assert _internal() == faults
    assert _exchange(address, SEEDS[0]).startswith(b"HTTP/1.1 200 ")
