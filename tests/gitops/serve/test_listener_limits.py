"""The listener under hostile, unauthenticated clients, over real sockets on loopback.

What a client that can only reach ``seshat run --listen`` may make it hold is bounded
(gitops/serve/server.py): a request must arrive whole within one deadline from its first
byte (not one per read), connections are capped in all and per address (a stalled one is
cut to make room for a prompt one), a body is refused on its ``Content-Length`` before it is
read, large bodies share a budget, and the threads are a fixed few however many clients
connect. Each test starts the real listener (``gitops.serve.http.start``) in this process
with small limits, so that deadlines pass in a second or two; the clients are raw sockets,
bound to distinct loopback addresses (127.0.0.0/8 is all loopback on Linux) where a test
needs several clients.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from gitops import metrics
from gitops.serve import http
from gitops.serve.health import Health
from gitops.serve.server import Limits
from gitops.serve.webhooks import MAX_BODY, WebhookSecret

SECRET = WebhookSecret(b"listener-limits-secret-0123456789")
PUSH = b'{"ref": "refs/heads/main"}'


@dataclass
class Running:
    address: tuple[str, int]
    woke: list[float] = field(default_factory=list)


@contextlib.contextmanager
def listening(limits: Limits) -> Iterator[Running]:
    health = Health(stale_after=3600)
    health.beat(None)
    running = Running(("", 0))
    listener = http.start(
        "127.0.0.1:0",
        health,
        lambda: running.woke.append(time.monotonic()),
        SECRET,
        lambda _: None,
        limits,
    )
    host, _, port = listener.address.rpartition(":")
    running.address = (host, int(port))
    try:
        yield running
    finally:
        listener.stop()


def client(running: Running, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(running.address, timeout=10, source_address=(source, 0))
    sock.settimeout(10)
    return sock


def answer(sock: socket.socket, timeout: float = 10) -> bytes:
    """Everything the server sends until it closes the connection (or ``timeout``)."""
    sock.settimeout(timeout)
    data = b""
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def status(data: bytes) -> int:
    assert data.startswith(b"HTTP/1.1 "), data[:80]
    return int(data.split(b" ", 2)[1])


def webhook(
    body: bytes, *, proof: str | None = "", length: int | None = None, extra: str = ""
) -> bytes:
    """A generic webhook's head for ``body``, then the body: signed with the secret (unless
    ``proof`` is another signature, or None for none)."""
    if proof == "":
        proof = "sha256=" + hmac.new(SECRET.value, body, hashlib.sha256).hexdigest()
    head = (
        "POST /webhooks/generic HTTP/1.1\r\nHost: seshat\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n"
        + (f"X-Seshat-Signature-256: {proof}\r\n" if proof is not None else "")
        + extra
        + "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def request(running: Running, data: bytes, source: str = "127.0.0.1") -> tuple[int, float]:
    """Send ``data`` at once from ``source``: the answer's status and how long it took."""
    started = time.monotonic()
    with client(running, source) as sock:
        sock.sendall(data)
        got = answer(sock)
    return status(got), time.monotonic() - started


def refusals(reason: str) -> float:
    found = metrics.REGISTRY.get_sample_value("seshat_listener_refusals_total", {"reason": reason})
    return found or 0.0


def open_connections() -> float:
    return metrics.REGISTRY.get_sample_value("seshat_listener_connections") or 0.0


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed (or reset) ``sock`` without answering."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def trickle(sock: socket.socket, data: bytes, every: float = 0.2) -> tuple[bytes, float]:
    """Send ``data`` a byte every ``every`` seconds until the server answers or closes: the
    answer, and the seconds from the first byte to it."""
    started = time.monotonic()
    sock.settimeout(every)
    got = b""
    for byte in data:
        try:
            sock.send(bytes([byte]))
            got = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            pass
        break
    took = time.monotonic() - started
    return got + answer(sock, timeout=2), took


def test_a_trickled_head_is_cut_off_at_the_request_deadline_not_kept_per_read() -> None:
    """One byte every 0.2 s never lets a per-read timeout pass: the old listener (10 s per
    read) kept such a client 119 s and more. The deadline counts from the first byte."""
    limits = Limits(request_deadline=1.5, idle_timeout=5)
    with listening(limits) as running, client(running) as sock:
        got, took = trickle(sock, b"GET /healthz HTTP/1.1\r\nHost: seshat\r\nX: " + b"a" * 999)
    assert status(got) == 408
    assert 1.4 <= took < 4.0, took  # the deadline, plus a shared machine's slack


def test_a_trickled_body_is_cut_off_at_the_same_deadline() -> None:
    body = b'{"ref": "refs/heads/main", "pad": "' + b"x" * 200 + b'"}'
    data = webhook(body)
    limits = Limits(request_deadline=1.5, idle_timeout=5)
    with listening(limits) as running, client(running) as sock:
        # The head at once, then the body a byte at a time: one deadline for both.
        got, took = trickle(sock, data)
        assert status(got) == 408
        assert 1.4 <= took < 4.0, took
        assert running.woke == []


def test_idle_connections_are_capped_per_address_and_in_all_with_no_thread_each() -> None:
    limits = Limits(max_connections=8, max_per_client=4, request_deadline=30, idle_timeout=30)
    threads = threading.active_count()
    with listening(limits) as running:
        before = refusals("client_capacity")
        mine = [client(running) for _ in range(4)]
        with client(running) as fifth:  # a fifth from the same address: refused at once
            got = answer(fifth, timeout=5)
        assert status(got) == 503 and b"Retry-After: 10" in got
        assert refusals("client_capacity") == before + 1
        # 60 more, each from an address of its own: the listener holds 8 at a time, cutting
        # the one that has waited longest for its request each time one more comes.
        others = [client(running, f"127.0.5.{n}") for n in range(1, 61)]
        time.sleep(0.5)
        assert open_connections() == 8
        assert sum(closed_by_server(s) for s in mine + others) == 64 - 8
        assert all(not closed_by_server(s) for s in others[-8:])  # the newest are held
        # However many clients came, a thread each they did not get.
        assert threading.active_count() <= threads + 1 + limits.workers
        # A client that sends its request at once still gets in (an old idle one makes room).
        assert (
            request(running, b"GET /healthz HTTP/1.1\r\nHost: seshat\r\n\r\n", "127.0.6.1")[0]
            == 200
        )
        for sock in mine + others:
            sock.close()


def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    with listening(Limits(request_deadline=5, idle_timeout=1)) as running:
        with client(running) as sock:
            started = time.monotonic()
            assert answer(sock, timeout=5) == b""  # closed, nothing said
            assert 0.9 <= time.monotonic() - started < 3.0
        with client(running) as sock:  # keep-alive: idle again after an answer
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: seshat\r\n\r\n")
            started = time.monotonic()
            got = answer(sock, timeout=5)
            assert status(got) == 200 and got.endswith(b"ok\n")
            assert 0.9 <= time.monotonic() - started < 3.0


def test_a_body_over_the_limit_is_refused_on_its_length_before_it_is_sent() -> None:
    """The client sends the head alone, never a byte of the body: the answer can only have
    been decided on the Content-Length."""
    with listening(Limits()) as running:
        for length, expected in ((MAX_BODY + 1, 413), (10**19, 413), (10**25, 400)):
            with client(running) as sock:  # 21 digits or more: no length h11 reads
                sock.sendall(webhook(b"", length=length))
                got = answer(sock, timeout=5)
            assert status(got) == expected, got
        # No proof: refused on the head too (the body would be wasted).
        with client(running) as sock:
            sock.sendall(webhook(b"", proof=None, length=MAX_BODY))
            assert status(answer(sock, timeout=5)) == 401
        # Expect: 100-continue: a refusal comes instead of the go-ahead...
        with client(running) as sock:
            sock.sendall(webhook(b"", length=MAX_BODY + 1, extra="Expect: 100-continue\r\n"))
            got = answer(sock, timeout=5)
            assert status(got) == 413 and b"100 Continue" not in got
        # ... and an acceptable head gets it, then its body is read and judged.
        body = PUSH
        data = webhook(body, extra="Expect: 100-continue\r\n")
        with client(running) as sock:
            sock.sendall(data[: len(data) - len(body)])
            assert sock.recv(65536).startswith(b"HTTP/1.1 100 Continue\r\n")
            sock.sendall(body)
            assert status(answer(sock)) == 202
        assert len(running.woke) == 1


def test_large_bodies_share_a_budget_and_small_ones_always_get_in() -> None:
    limits = Limits(small_body=64 * 1024, large_bodies=1024 * 1024)
    with listening(limits) as running:
        before = refusals("busy")
        body = b"{" + b" " * (700 * 1024) + b"}"
        holder = client(running, "127.0.7.1")
        data = webhook(body)
        holder.sendall(data[:-1])  # admitted, and held back by its last byte
        time.sleep(0.3)
        second = client(running, "127.0.7.2")
        second.sendall(data[: len(data) - len(body)])  # the head alone
        assert status(answer(second, timeout=5)) == 503
        assert refusals("busy") == before + 1
        # A push of a few bytes is never starved by large ones.
        assert request(running, webhook(PUSH), "127.0.7.3")[0] == 202
        holder.sendall(data[-1:])
        assert status(answer(holder)) == 202  # the held one was read whole, and verified
        holder.close()
        second.close()
    assert len(running.woke) == 2


@pytest.mark.parametrize(
    "length",
    [
        "²".encode(),  # UTF-8: a superscript two
        b"\xb2",  # the same character, one Latin-1 byte: int() took it for 2 and raised
        "١٢".encode(),  # Arabic-Indic digits
        "１２".encode(),  # full-width digits
        b"+12",
        b"-1",
        b"1e3",
        b"0x10",
        b"12 13",
        b"",
    ],
    ids=repr,
)
def test_a_content_length_that_is_not_ascii_digits_is_answered_400(length: bytes) -> None:
    with listening(Limits()) as running:
        head = (
            b"POST /webhooks/generic HTTP/1.1\r\nHost: seshat\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + length + b"\r\n\r\n"
        )
        with client(running) as sock:
            sock.sendall(head + PUSH)
            got = answer(sock, timeout=5)
    assert status(got) == 400, got
    assert running.woke == []


def test_conflicting_lengths_and_chunked_bodies_are_refused() -> None:
    with listening(Limits()) as running:
        conflicting = webhook(PUSH).replace(
            b"Content-Length:", b"Content-Length: 3\r\nContent-Length:", 1
        )
        assert request(running, conflicting)[0] == 400
        chunked = (
            b"POST /webhooks/generic HTTP/1.1\r\nHost: seshat\r\nContent-Type: application/json"
            b"\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\n" + PUSH + b"\r\n0\r\n\r\n"
        )
        assert request(running, chunked)[0] == 411
        assert request(running, b"GET /healthz HTTP/1.1\r\nHost: s\r\nX: " + b"a" * 20000)[0] == 431
        assert running.woke == []


def test_a_signed_webhook_is_accepted_while_the_listener_is_under_that_load() -> None:
    """The production limits, and all at once: 30 clients each sending a 4 MiB body with a
    wrong signature and holding back its end, 300 idle connections and 10 tricklers, each
    from an address of its own, and 300 more idle ones from one address. A push signed with
    the secret still wakes the loop, /healthz still answers, and the listener holds no more
    connections, body bytes and threads than its limits allow."""
    limits = Limits()
    threads = threading.active_count()
    busy, capped = refusals("busy"), refusals("client_capacity")
    with listening(limits) as running:
        held: list[socket.socket] = []
        big = b'{"pad": "' + b"x" * (MAX_BODY - 11) + b'"}'
        assert len(big) == MAX_BODY
        wrong = "sha256=" + "0" * 64
        for n in range(30):
            sock = client(running, f"127.0.8.{n + 1}")
            data = webhook(big, proof=wrong)
            sock.sendall(data[: len(data) - len(big)])
            sock.setblocking(False)
            with contextlib.suppress(OSError):  # as much as the socket takes; never the end
                sock.send(big[: 256 * 1024])
            held.append(sock)
        time.sleep(0.3)
        # Two fit the large-body budget (8 MiB); the others are refused before their body.
        assert refusals("busy") - busy == 30 - limits.large_bodies // MAX_BODY
        held += [client(running, f"127.0.9.{n + 1}") for n in range(250)]
        held += [client(running, f"127.0.10.{n + 1}") for n in range(50)]
        for n in range(10):
            sock = client(running, f"127.0.11.{n + 1}")
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHo")
            held.append(sock)
        for _ in range(300):
            held.append(client(running, "127.0.0.1"))
        time.sleep(0.5)

        assert request(running, webhook(PUSH), "127.0.12.1")[0] == 202
        assert len(running.woke) == 1
        healthz = b"GET /healthz HTTP/1.1\r\nHost: s\r\n\r\n"
        assert request(running, healthz, "127.0.12.2")[0] == 200
        assert open_connections() <= limits.max_connections
        assert refusals("client_capacity") - capped == 300 - limits.max_per_client
        assert threading.active_count() <= threads + 1 + limits.workers
        for sock in held:
            sock.close()
