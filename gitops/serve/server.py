"""An HTTP/1.1 server that holds under hostile, unauthenticated clients.

Anyone who can reach ``seshat run --listen`` may connect; nothing they send is trusted
before a route says so. Every resource a client can make the controller hold has a bound
(:class:`Limits`):

* **connections**: at most ``max_connections`` open at once and at most ``max_per_client``
  from one address (so that one source, an ingress say, cannot take the connections the
  kubelet's probes and Prometheus need); past the latter, a new connection is answered
  ``503`` at once and closed, nothing of it read. When all are taken, the connection that
  has waited longest for its request to arrive (idle, trickling, holding its body back) is
  cut to make room: a cap that stalled connections could fill would be a way to deny
  service, this way a client that sends its request at once always gets in;
* **time**: a connection that sends nothing for ``idle_timeout`` seconds is closed; from a
  request's first byte, its head *and* body must have arrived within ``request_deadline``
  seconds (one deadline for the whole request, not one per read: a client trickling a byte
  a second is answered ``408`` at the deadline); an answer must be taken within that long
  too;
* **size**: the request line and headers at most ``max_head`` bytes (``431``); a body only
  with a ``Content-Length`` of ASCII digits (``400`` for another, ``411`` for chunked), no
  larger than ``max_body`` (``413``, before a byte of it is read), read ``chunk`` bytes at a
  time; the route may refuse a request on its head alone (:meth:`Routes.head`), and then
  its body is never read either;
* **memory**: a body of up to ``small_body`` bytes is always admitted (the connection cap
  bounds them all); larger ones share ``large_bodies`` bytes, and one that would not fit is
  answered ``503`` before it is read, so small requests (a push webhook, a probe) are never
  starved by large ones;
* **threads**: one thread runs the event loop for every connection; routes run on a fixed
  pool of ``workers`` threads. A thousand connections hold no more threads than one.

HTTP/1.1 framing (request line, headers, ``Content-Length``, ``Expect: 100-continue``,
keep-alive) is h11's (MIT, python-hyper): a sans-I/O parser that refuses what the RFCs
refuse (conflicting or non-digit lengths, a missing ``Host``) instead of guessing. The I/O,
the deadlines and the caps are asyncio's and this module's.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from http import HTTPStatus
from typing import Protocol

import h11

__all__ = ["Limits", "Refusal", "Request", "Response", "Routes", "Server"]

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds of :class:`Server`; see the module's documentation."""

    max_connections: int = 64
    max_per_client: int = 16
    request_deadline: float = 10.0
    idle_timeout: float = 10.0
    max_head: int = 16 * 1024
    max_body: int = 4 * _MIB
    small_body: int = 64 * 1024
    large_bodies: int = 8 * _MIB
    workers: int = 4
    chunk: int = 64 * 1024

    def __post_init__(self) -> None:
        if self.max_connections < 1 or not 1 <= self.max_per_client <= self.max_connections:
            raise ValueError("need 1 <= max_per_client <= max_connections")
        if self.request_deadline <= 0 or self.idle_timeout <= 0:
            raise ValueError("deadlines must be positive")
        if self.workers < 1:
            raise ValueError("need at least one worker")


@dataclass(frozen=True, slots=True)
class Request:
    """A request's head: what a route decides on before any body is read."""

    method: str
    path: str  # the target without its query
    headers: Mapping[str, str]  # by lowercase name; values as sent (Latin-1), repeats joined
    content_length: int | None  # None: no body announced
    client: str  # the peer's address


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    close: bool = False  # end the connection after it

    @classmethod
    def text(cls, status: int, text: str, *, close: bool = False) -> Response:
        return cls(status, (text + "\n").encode("utf-8"), close=close)


class Routes(Protocol):
    """What the server serves."""

    def head(self, request: Request) -> Response | None:
        """On the event loop, before any body: a response that refuses the request now
        (its body is never read), or None to read the body and :meth:`handle` it. Must not
        block."""

    def handle(self, request: Request, body: bytes) -> Response:
        """On a worker thread: the answer to a request whose body (at most ``max_body``
        bytes, exactly its ``Content-Length``) has arrived."""


class Refusal(StrEnum):
    """Why the server itself refused a connection or request (the ``reason`` label of
    ``seshat_listener_refusals_total``)."""

    CAPACITY = "capacity"  # max_connections reached, every connection busy with a request
    EVICTED = "evicted"  # a stalled connection cut to make room for a new one
    CLIENT_CAPACITY = "client_capacity"  # max_per_client reached
    DEADLINE = "deadline"  # the request did not arrive whole in time
    MALFORMED = "malformed"  # not HTTP/1.1 h11 accepts: 400, or 431 for a head too large
    LENGTH = "length"  # a body without Content-Length (411) or over max_body (413)
    BUSY = "busy"  # a large body that the large-body budget cannot hold now
    INTERNAL = "internal"  # a fault of the server's own: the connection was cut


@dataclass(slots=True)
class _Slot:
    """An open connection."""

    client: str
    task: asyncio.Task[None]
    writer: asyncio.StreamWriter
    since: float  # when it began waiting for its current request (loop time)
    busy: bool = False  # its request arrived whole and is being answered


class Server:
    """Serves :class:`Routes` on a listening socket from a thread of its own."""

    def __init__(
        self,
        sock: socket.socket,
        routes: Routes,
        limits: Limits,
        refused: Callable[[str], None] = lambda _: None,
        connections: Callable[[int], None] = lambda _: None,
    ) -> None:
        self.sock = sock
        self.routes = routes
        self.limits = limits
        self._refused = refused  # told each refusal's reason (a metric)
        self._connections = connections  # told how many connections are open (a metric)
        self._slots: dict[asyncio.Task[None], _Slot] = {}  # the open connections
        self._per_client: Counter[str] = Counter()
        self._large = 0  # bytes of large bodies admitted and not yet answered
        self._pool = ThreadPoolExecutor(limits.workers, thread_name_prefix="seshat-http")
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # every connection's, refused ones too
        self._thread = threading.Thread(target=self._run, name="seshat-listen", daemon=True)

    # -- life -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        """Close the socket and every connection; returns once the loop's thread ended."""
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout=10)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(
            self._accepted, sock=self.sock, limit=self.limits.chunk, backlog=128
        )
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- connections ----------------------------------------------------------------------

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve_connection(reader, writer, task)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # a fault of ours: the connection is cut, counted, never a traceback
            self._refused(Refusal.INTERNAL)
            writer.transport.abort()
        finally:
            self._tasks.discard(task)

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, task: asyncio.Task[None]
    ) -> None:
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        slot = self._admit(client, task, writer)
        if slot is None:
            # Refused at the door: answered, nothing of it read, no slot taken.
            writer.write(_CAPACITY)
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(1):
                    await writer.drain()
            writer.close()
            return
        try:
            conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_head)
            while await self._exchange(conn, reader, writer, slot):
                conn.start_next_cycle()
        finally:
            self._release(slot)
            writer.close()  # what was answered is flushed (a stalled reader was cut already)

    def _admit(
        self, client: str, task: asyncio.Task[None], writer: asyncio.StreamWriter
    ) -> _Slot | None:
        """A slot for a new connection from ``client``, or None when it is refused. With
        every slot taken, the connection that has waited longest for a request of its own
        to arrive (idle, trickling, holding a body back) is cut to make room: a client that
        sends its request at once always gets in, however many others stall."""
        limits = self.limits
        if self._per_client[client] >= limits.max_per_client:
            self._refused(Refusal.CLIENT_CAPACITY)
            return None
        if len(self._slots) >= limits.max_connections:
            waiting = [s for s in self._slots.values() if not s.busy]
            if not waiting:
                self._refused(Refusal.CAPACITY)
                return None
            oldest = min(waiting, key=lambda s: s.since)
            self._refused(Refusal.EVICTED)
            self._release(oldest)
            oldest.writer.transport.abort()
            oldest.task.cancel()
        slot = _Slot(client, task, writer, asyncio.get_running_loop().time())
        self._slots[task] = slot
        self._per_client[client] += 1
        self._connections(len(self._slots))
        return slot

    def _release(self, slot: _Slot) -> None:
        if self._slots.pop(slot.task, None) is None:
            return  # released already (evicted)
        self._per_client[slot.client] -= 1
        if not self._per_client[slot.client]:
            del self._per_client[slot.client]
        self._connections(len(self._slots))

    async def _exchange(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        slot: _Slot,
    ) -> bool:
        """One request and its answer; whether the connection may carry another."""
        limits, loop = self.limits, asyncio.get_running_loop()
        slot.since, slot.busy = loop.time(), False  # waiting for a request: may be evicted
        if not conn.trailing_data[0]:  # nothing of the next request yet: idle
            try:
                async with asyncio.timeout(limits.idle_timeout):
                    data = await reader.read(limits.chunk)
            except TimeoutError:
                return False
            if not data:
                return False
            conn.receive_data(data)
        deadline = loop.time() + limits.request_deadline  # from the request's first byte
        try:
            async with asyncio.timeout_at(deadline):
                request = await self._head(conn, reader, slot.client)
        except TimeoutError:
            self._refused(Refusal.DEADLINE)
            late = Response.text(408, "the request took too long", close=True)
            await self._answer(conn, writer, late)
            return False
        except h11.RemoteProtocolError as error:
            self._refused(Refusal.MALFORMED)
            status = error.error_status_hint if error.error_status_hint in (400, 431) else 400
            with contextlib.suppress(h11.LocalProtocolError):
                malformed = Response.text(status, "malformed request", close=True)
                await self._answer(conn, writer, malformed)
            return False
        if request is None:
            return False
        refusal = self.routes.head(request) or self._limit(request)
        if refusal is not None:
            await self._refuse(conn, reader, writer, refusal, request)
            return False
        length = request.content_length or 0
        large = length > limits.small_body
        if large and self._large + length > limits.large_bodies:
            self._refused(Refusal.BUSY)
            busy = Response.text(503, "busy: too many large requests at once; try later")
            await self._refuse(conn, reader, writer, busy, request)
            return False
        self._large += length if large else 0
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    body = await self._body(conn, reader, writer, length)
            except TimeoutError:
                self._refused(Refusal.DEADLINE)
                late = Response.text(408, "the body took too long", close=True)
                await self._answer(conn, writer, late)
                return False
            except h11.RemoteProtocolError:
                self._refused(Refusal.MALFORMED)
                with contextlib.suppress(h11.LocalProtocolError):
                    malformed = Response.text(400, "malformed body", close=True)
                    await self._answer(conn, writer, malformed)
                return False
            if body is None:
                return False
            slot.busy = True  # the request arrived whole: it is answered, never evicted
            response = await loop.run_in_executor(self._pool, self._handle, request, body)
        finally:
            self._large -= length if large else 0
        await self._answer(conn, writer, response)
        return not response.close and conn.our_state is h11.DONE and conn.their_state is h11.DONE

    def _limit(self, request: Request) -> Response | None:
        """What the server refuses of a request's head that its route let through."""
        if "transfer-encoding" in request.headers:
            self._refused(Refusal.LENGTH)  # chunked: a length must be known before reading
            return Response.text(411, "Content-Length required", close=True)
        if (request.content_length or 0) > self.limits.max_body:
            self._refused(Refusal.LENGTH)
            return Response.text(
                413, f"the body is larger than {self.limits.max_body} bytes", close=True
            )
        return None

    def _handle(self, request: Request, body: bytes) -> Response:
        try:
            return self.routes.handle(request, body)
        except Exception:  # a fault of ours: answered, never a hung or reset connection
            return Response.text(500, "internal error", close=True)

    async def _event(self, conn: h11.Connection, reader: asyncio.StreamReader) -> object:
        """The connection's next event, reading from the client for as long as h11 needs
        more; None when the client stops sending first."""
        while (event := conn.next_event()) is h11.NEED_DATA:
            data = await reader.read(self.limits.chunk)
            if not data:
                return None
            conn.receive_data(data)
        return event

    async def _head(
        self, conn: h11.Connection, reader: asyncio.StreamReader, client: str
    ) -> Request | None:
        event = await self._event(conn, reader)
        if isinstance(event, h11.Request):
            return _request(event, client)
        return None  # the client left, ConnectionClosed, or a PAUSED connection

    async def _body(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        length: int,
    ) -> bytes | None:
        if length and conn.client_is_waiting_for_100_continue:
            go = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
            writer.write(conn.send(go) or b"")
        body = bytearray()
        while True:
            event = await self._event(conn, reader)
            if isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:
                return None

    async def _refuse(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        response: Response,
        request: Request,
    ) -> None:
        """Answer a request whose body is not read, then close. The client may be sending
        that body still: what arrives in the next second (at most 256 KiB) is read and
        dropped, so that closing with it unread does not reset the connection before the
        client has read the answer."""
        await self._answer(conn, writer, Response(response.status, response.body, close=True))
        if not request.content_length and "transfer-encoding" not in request.headers:
            return
        with contextlib.suppress(OSError, TimeoutError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
            async with asyncio.timeout(1):
                dropped = 0
                while dropped < 256 * 1024:
                    data = await reader.read(self.limits.chunk)
                    if not data:
                        break
                    dropped += len(data)

    async def _answer(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, response: Response
    ) -> None:
        """Send ``response``; a client that does not take it within the deadline is cut."""
        headers = [
            ("content-type", response.content_type),
            ("content-length", str(len(response.body))),
            ("cache-control", "no-store"),
            ("server", "seshat"),
        ]
        if response.close:
            headers.append(("connection", "close"))
        phrase = HTTPStatus(response.status).phrase.encode("ascii")
        data = conn.send(h11.Response(status_code=response.status, headers=headers, reason=phrase))
        if response.body:
            data = (data or b"") + (conn.send(h11.Data(data=response.body)) or b"")
        data = (data or b"") + (conn.send(h11.EndOfMessage()) or b"")
        writer.write(data)
        try:
            async with asyncio.timeout(self.limits.request_deadline):
                await writer.drain()
        except TimeoutError:
            writer.transport.abort()


def _request(event: h11.Request, client: str) -> Request:
    headers: dict[str, str] = {}
    for name, value in event.headers:
        key = name.decode("ascii").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    length = headers.get("content-length")
    target = event.target.decode("latin-1")
    return Request(
        method=event.method.decode("ascii"),
        path=target.split("?", 1)[0],
        headers=headers,
        # h11 has checked it: ASCII digits, one value (a list of equal ones is one).
        content_length=int(length.split(",")[0]) if length is not None else None,
        client=client,
    )


_CAPACITY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 31\r\nRetry-After: 10\r\nConnection: close\r\nServer: seshat\r\n\r\n"
    b"busy: too many connections now\n"
)
