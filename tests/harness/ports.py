"""Free loopback TCP ports, chosen at run time.

Why: a system PostgreSQL and MariaDB already listen on 5432/3306, and several
test runs may share a machine, so no server started by the harness may use a
fixed port.  The kernel picks an unused port when we bind to port 0; we release
it right away and hand it to the server.  That leaves a small window in which
another program could take the port, so the server start-up code retries with a
fresh port when it sees "address already in use" (see :func:`is_port_conflict`).
"""

from __future__ import annotations

import socket
import threading

LOOPBACK = "127.0.0.1"

_lock = threading.Lock()
# Ports handed out in this process: never hand out the same one twice, even if
# the first server has not bound it yet.
_handed_out: set[int] = set()

_CONFLICT_MARKERS = (
    "address already in use",
    "could not bind",
    "can't start server: bind",
    "do you already have another server running",
)


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on *host* that was free a moment ago and is new to this process."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        with _lock:
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise RuntimeError(f"could not find a free TCP port on {host}")


def is_port_conflict(log_text: str) -> bool:
    """Tell whether a server's log says it failed because its port was taken."""
    lowered = log_text.lower()
    return any(marker in lowered for marker in _CONFLICT_MARKERS)
