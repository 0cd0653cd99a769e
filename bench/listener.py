#!/usr/bin/env python3
"""What hostile, unauthenticated clients can make ``seshat run --listen`` hold.

    .venv/bin/python bench/listener.py [--before REV] [--trickle-every 1] [--trickle-cap 60]

Each listener runs in a process of its own (``--serve``: the listener alone, with a webhook
secret, as ``seshat run --listen`` starts it) and is measured from outside, in one run:

* ``idle``: its resident memory (``VmRSS``) and threads (``/proc/PID/status``) at rest;
* ``bodies``: after 30 connections each sent a 4 MiB webhook with a wrong signature and hold
  its last byte (each from a loopback address of its own, 127.0.1.N, so that no per-client
  cap hides what the server as a whole holds);
* ``bodies+idle``: 3 s after 300 more connections that send nothing (127.0.2.N and on, all
  started at once) were opened, while the 30 still hold (within the 10 s an old listener
  waited for each read);
* ``webhook``: what a correctly signed push from yet another address gets meanwhile, and how
  long it took; the same for ``/healthz``;
* ``trickle``: after all that is let go, a client sending a request header one byte every
  ``--trickle-every`` seconds: how long the server keeps that connection (the bench stops
  waiting at ``--trickle-cap`` seconds).

``new`` is this checkout's ``gitops.serve.http``; ``before`` is the same module as it was at
``--before`` (default: the last commit before the listener got its limits), read with
``git show`` and run against this checkout's other modules, so both are measured in the same
run on the same machine. The numbers are recorded in bench/README.md. Every connection goes
to 127.0.0.1 only, the loops are bounded, and the bench stops every process it started.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import importlib.util
import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SECRET = b"bench-webhook-secret-0123456789"
BEFORE = "7f8dd03"  # the listener before issue 32's limits
MIB = 1024 * 1024
BODY = 4 * MIB  # the largest body a webhook may have


# -- the server side ----------------------------------------------------------------------


def _listener_module(source: str) -> ModuleType:
    """``new``: gitops.serve.http; else the path of an older copy of that module's text."""
    if source == "new":
        from gitops.serve import http

        return http
    spec = importlib.util.spec_from_file_location("seshat_listener_before", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def serve(source: str, address_file: Path) -> None:
    """Run one listener until killed; write where it listens to ``address_file``."""
    sys.path.insert(0, str(ROOT))
    from gitops.serve.health import Health
    from gitops.serve.webhooks import WebhookSecret

    module = _listener_module(source)
    health = Health(stale_after=3600)
    health.beat(None)
    listener = module.start(
        "127.0.0.1:0", health, lambda: None, WebhookSecret(SECRET), lambda _: None
    )
    address_file.write_text(listener.address)
    while True:
        time.sleep(3600)


# -- the client side ----------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    rss_mib: float
    threads: int


def sample(pid: int) -> Sample:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return Sample(int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"]))


@contextlib.contextmanager
def server(source: str) -> Iterator[tuple[int, tuple[str, int]]]:
    with tempfile.TemporaryDirectory(prefix="seshat-bench-listener-") as folder:
        where = Path(folder) / "address"
        process = subprocess.Popen(
            [sys.executable, __file__, "--serve", source, "--address-file", str(where)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            ends = time.monotonic() + 60
            while not where.exists() or not where.read_text():
                assert process.poll() is None, "the listener did not start"
                assert time.monotonic() < ends, "the listener did not start in 60 s"
                time.sleep(0.05)
            host, _, port = where.read_text().rpartition(":")
            time.sleep(0.5)
            yield process.pid, (host, int(port))
        finally:
            process.kill()
            process.wait()


def connect(address: tuple[str, int], source: str) -> socket.socket | None:
    try:
        return socket.create_connection(address, timeout=5, source_address=(source, 0))
    except OSError:
        return None


def open_many(
    address: tuple[str, int], sources: list[str], wait: float = 0.0
) -> list[socket.socket]:
    """One connection from each of ``sources``: one after the other, each given ``wait``
    seconds to connect (0: all started at once, non-blocking); non-blocking afterwards."""
    socks = []
    for source in sources:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((source, 0))
        if wait:
            sock.settimeout(wait)
            with contextlib.suppress(OSError):  # not accepted in time: held all the same
                sock.connect(address)
            sock.setblocking(False)
        else:
            sock.setblocking(False)
            sock.connect_ex(address)
        socks.append(sock)
    return socks


def head(path: str, length: int, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: seshat\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def hold_bodies(address: tuple[str, int], count: int) -> list[socket.socket]:
    """``count`` connections, each sending a 4 MiB body with a wrong signature, all but its
    last byte, side by side (at most 5 s in all). A connection the server refuses or stops
    reading is kept as it is."""
    body = b'{"ref": "refs/heads/main", "pad": "' + b"x" * (BODY - 40) + b'"}'
    body = body[:BODY]
    wrong = "X-Hub-Signature-256: sha256=" + "0" * 64 + "\r\n"
    data = head("/webhooks/github", len(body), wrong) + body[:-1]
    socks = open_many(address, [f"127.0.1.{n + 1}" for n in range(count)], wait=2)
    sent = dict.fromkeys(range(count), 0)
    ends = time.monotonic() + 5
    while sent and time.monotonic() < ends:
        for n in list(sent):
            try:
                sent[n] += socks[n].send(data[sent[n] : sent[n] + 256 * 1024])
            except BlockingIOError:
                continue
            except OSError:
                del sent[n]  # refused, reset: the server let it go
                continue
            if sent[n] >= len(data):
                del sent[n]
        time.sleep(0.001)
    return socks


def hold_idle(address: tuple[str, int], count: int) -> list[socket.socket]:
    """``count`` connections that send nothing, each from an address of its own."""
    return open_many(address, [f"127.0.{2 + n // 250}.{1 + n % 250}" for n in range(count)])


def answers(socks: list[socket.socket]) -> dict[str, int]:
    """What the held connections were answered so far: status code (or ``none``) -> count."""
    found: dict[str, int] = {}
    for sock in socks:
        try:
            sock.setblocking(False)
            data = sock.recv(64)
        except BlockingIOError:
            data = None
        except OSError:
            data = b""
        if data is None:
            key = "none"
        elif not data:
            key = "closed"
        else:
            parts = data.split(b" ", 2)
            key = parts[1].decode() if len(parts) > 1 else "?"
        found[key] = found.get(key, 0) + 1
    return found


def request(address: tuple[str, int], source: str, data: bytes) -> tuple[str, float]:
    """Send ``data`` from ``source``; the status code it gets and the seconds it took."""
    started = time.monotonic()
    sock = connect(address, source)
    if sock is None:
        return "no connection", time.monotonic() - started
    with sock:
        sock.settimeout(30)
        try:
            sock.sendall(data)
            answer = sock.recv(64)
        except OSError as error:
            return type(error).__name__, time.monotonic() - started
    parts = answer.split(b" ", 2)
    return (parts[1].decode() if len(parts) > 1 else "closed"), time.monotonic() - started


def signed_push() -> bytes:
    body = b'{"ref": "refs/heads/main"}'
    signature = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    return head("/webhooks/github", len(body), f"X-Hub-Signature-256: {signature}\r\n") + body


def trickle(address: tuple[str, int], every: float, cap: float) -> tuple[float, str]:
    """Seconds the server keeps a connection that sends one header byte every ``every``
    seconds, and how it ended (capped at ``cap``)."""
    sock = connect(address, "127.0.0.200")
    assert sock is not None
    text = b"GET /healthz HTTP/1.1\r\nHost: seshat\r\nX-Slow: " + b"a" * 10_000
    started = time.monotonic()
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    with sock, selector:
        for byte in text:
            try:
                sock.send(bytes([byte]))
            except OSError:
                return time.monotonic() - started, "reset"
            if selector.select(timeout=every):
                try:
                    answer = sock.recv(64)
                except OSError:
                    return time.monotonic() - started, "reset"
                status = answer.split(b" ", 2)[1].decode() if answer else "closed"
                return time.monotonic() - started, status
            if time.monotonic() - started > cap:
                return time.monotonic() - started, "still open (bench stopped)"
    return time.monotonic() - started, "whole header sent"


def measure(source: str, every: float, cap: float) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with server(source) as (pid, address):
        result["idle"] = sample(pid).__dict__
        started = time.monotonic()
        bodies = hold_bodies(address, 30)
        result["bodies_seconds"] = round(time.monotonic() - started, 1)
        time.sleep(2)
        result["bodies"] = sample(pid).__dict__
        result["bodies_answers"] = answers(bodies)
        idle = hold_idle(address, 300)
        time.sleep(3)
        result["bodies+idle"] = sample(pid).__dict__
        result["idle_answers"] = answers(idle)
        result["webhook"] = request(address, "127.0.0.9", signed_push())
        result["healthz"] = request(
            address, "127.0.0.10", b"GET /healthz HTTP/1.1\r\nHost: seshat\r\n\r\n"
        )
        result["peak"] = sample(pid).__dict__
        for sock in bodies + idle:
            sock.close()
        time.sleep(1)
        result["trickle"] = trickle(address, every, cap)
    return result


def before_module(revision: str, folder: Path) -> str | None:
    """The listener module as it was at ``revision``, written to ``folder``."""
    try:
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{revision}:gitops/serve/http.py"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = folder / "listener_before.py"
    path.write_text(text)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with")
    parser.add_argument("--trickle-every", type=float, default=1.0)
    parser.add_argument("--trickle-cap", type=float, default=60.0)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--address-file", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve(options.serve, options.address_file)
        return
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="seshat-bench-before-") as folder:
        old = before_module(options.before, Path(folder))
        if old is None:
            print(f"(no {options.before}: the listener before is not measured)")
        for name, source in (("before", old), ("new", "new")):
            if source is None:
                continue
            results[name] = measure(source, options.trickle_every, options.trickle_cap)
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    print()
    print("| | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for key, label in (
        ("idle", "at rest"),
        ("bodies", "30 held 4 MiB bodies"),
        ("bodies+idle", "… and 300 idle connections"),
    ):
        cells = [
            f"{r[key]['rss_mib']:.0f} MiB, {r[key]['threads']} threads" for r in results.values()
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for key, label in (
        ("bodies_answers", "what the 30 bodies were answered"),
        ("idle_answers", "what the 300 idle were answered"),
    ):
        cells = [
            ", ".join(f"{n} {code}" for code, n in sorted(r[key].items())) for r in results.values()
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for key, label in (("webhook", "a signed push meanwhile"), ("healthz", "/healthz meanwhile")):
        cells = [f"{r[key][0]} in {r[key][1]:.2f} s" for r in results.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")
    cells = [f"{r['trickle'][0]:.1f} s ({r['trickle'][1]})" for r in results.values()]
    print(f"| a header trickled 1 byte / {options.trickle_every:g} s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
