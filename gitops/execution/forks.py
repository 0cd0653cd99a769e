"""The local executor's runner fork server, seen from the controller.

A runner process spends most of its life importing; the controller therefore keeps one
``seshat-runner serve-forks`` process (:mod:`runner.forks`) that has imported the runner's
modules once, and asks it for each runner: a forked runner costs a few milliseconds of CPU
where a fresh one costs a few hundred. What a forked runner gets is what a fresh one gets:
the invocation's environment only (the server itself was started with the runner's minimal
base environment and no credential), its own process, process group and exit status.

One server per controller process (and per runner command), started from a thread of its own
when the process asks for its first runner; it ends when the controller does (its socket
closes). A server costs about what two runners started afresh cost, and a pass runs several
runners per resource (four or five for one resource in the test suite: resolve and verify,
drift, plan, apply, the proving plan), so waiting for a third runner before starting one
(as this module once did) cost about two fresh runners in every ``seshat reconcile --once``
and at every controller start; a process that runs a single runner pays about twice what it
would have without a server. A runner command whose server never says it is ready is
started afresh from then on. A request the server could not take (it ended, or the socket
broke) is answered by starting the runner afresh, and the next request starts a new server;
a request it took and never answered is :class:`ForkUncertain` (a runner may have run: its
outcome is unknown, and it is never started again afresh).
``SESHAT_RUNNER_FORKS=0`` in the controller's environment starts every runner afresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ForkUncertain", "ForkedRunner", "RunnerForks", "enabled"]

_START_SECONDS = 60.0


def enabled() -> bool:
    """Whether runners are forked from a fork server (``SESHAT_RUNNER_FORKS``, default on)."""
    return os.environ.get("SESHAT_RUNNER_FORKS", "1") not in ("0", "false", "no")


class ForkUncertain(OSError):
    """The request reached the server and no pid came back: a runner may have started (and
    may have done its work) before it was stopped. Never started again afresh: the caller
    treats the invocation's outcome as unknown."""


class ForkedRunner:
    """A runner the fork server forked: its pid (the leader of its own process group), its
    stdout, and how it ended (the server's handler says)."""

    def __init__(self, pid: int, stdout: int, reply: socket.socket, said: bytes) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._stdout = stdout
        self._reply = reply
        self._said = said  # what the handler wrote after the pid: its status, when it ended
        self._output = bytearray()

    def kill(self) -> None:
        """SIGKILL to its process group (what it started too)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def communicate(self, timeout: float | None) -> bytes:
        """Its whole stdout once it has ended and closed it; ``subprocess.TimeoutExpired``
        after ``timeout`` seconds (then :meth:`kill` it and call this again)."""
        until = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            if self._stdout >= 0:
                selector.register(self._stdout, selectors.EVENT_READ, "stdout")
            if self.returncode is None and self._reply.fileno() >= 0:
                selector.register(self._reply, selectors.EVENT_READ, "reply")
            while selector.get_map():
                left = None if until is None else until - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired("seshat-runner", timeout or 0.0)
                for key, _ in selector.select(left):
                    if key.data == "stdout":
                        chunk = os.read(self._stdout, 1 << 16)
                        self._output += chunk
                        if not chunk:
                            selector.unregister(self._stdout)
                            self._close_stdout()
                        continue
                    chunk = self._reply.recv(4096)
                    self._said += chunk
                    self.returncode = _status(self._said)
                    if not chunk or self.returncode is not None:
                        selector.unregister(self._reply)
                        self._reply.close()
        return bytes(self._output)

    def _close_stdout(self) -> None:
        if self._stdout >= 0:
            os.close(self._stdout)
            self._stdout = -1

    def close(self) -> None:
        self._close_stdout()
        self._reply.close()


def _status(said: bytes) -> int | None:
    """The exit status in the handler's ``{"status": S}`` line, once it has been read."""
    for line in said.split(b"\n")[:-1]:
        with contextlib.suppress(ValueError, AttributeError):
            found = json.loads(line).get("status")
            if isinstance(found, int):
                return found
    return None


class _Server:
    """One running fork server and the controller's end of its socket."""

    def __init__(
        self, command: Sequence[str], environment: Mapping[str, str], answer_seconds: float
    ) -> None:
        self.answer_seconds = answer_seconds
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lock = threading.Lock()
        started: list[subprocess.Popen[bytes] | BaseException] = []
        ready = threading.Event()

        # Started from a thread that lives as long as the controller process: the server's
        # life is tied to its socket, and nothing of a worker thread's end reaches it.
        def start() -> None:
            try:
                started.append(
                    subprocess.Popen(
                        [*command, "serve-forks", "--fd", str(theirs.fileno())],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        env=dict(environment),
                        pass_fds=(theirs.fileno(),),
                        start_new_session=True,
                    )
                )
            except BaseException as error:  # handed to the thread that asked
                started.append(error)
            ready.set()
            if started and isinstance(started[0], subprocess.Popen):
                started[0].wait()

        threading.Thread(target=start, name="seshat-runner-forks", daemon=True).start()
        ready.wait(_START_SECONDS)
        theirs.close()
        if not started or not isinstance(started[0], subprocess.Popen):
            self.control.close()
            raise OSError(f"the runner fork server did not start: {started[:1]}")
        self.process = started[0]
        try:  # it says so once it has imported what runners need (a runner without
            # serve-forks ends instead, and is never asked for anything)
            self.control.settimeout(_START_SECONDS)
            said = self.control.recv(16)
            self.control.settimeout(None)
        except OSError:
            said = b""
        if said != b"ready":
            self.stop()
            raise OSError("the runner fork server did not start")

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, argv: Sequence[str], environment: Mapping[str, str], cwd: Path) -> ForkedRunner:
        """A runner forked with ``argv`` (after the program name), ``environment`` (whole)
        and ``cwd``. Raises ``OSError`` when the request could not be sent (nothing was
        started), :class:`ForkUncertain` when it was sent and no pid came back."""
        packet = json.dumps({"argv": list(argv), "env": dict(environment), "cwd": str(cwd)})
        read_end, write_end = os.pipe()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.lock:
                socket.send_fds(self.control, [packet.encode()], [write_end, theirs.fileno()])
        except OSError:
            os.close(read_end)
            mine.close()
            raise
        finally:
            os.close(write_end)
            theirs.close()
        mine.settimeout(self.answer_seconds)
        try:
            said = b""
            while not said.endswith(b"\n"):
                chunk = mine.recv(4096)
                if not chunk:
                    raise OSError("the runner fork server did not answer")
                said += chunk
            first, _, rest = said.partition(b"\n")
            pid = int(json.loads(first)["pid"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            os.close(read_end)
            mine.close()  # a handler still there fails to answer, dies, and its runner with it
            raise ForkUncertain(f"the runner fork server did not answer: {error}") from None
        mine.settimeout(None)
        return ForkedRunner(pid, read_end, mine, rest)

    def stop(self) -> None:
        self.control.close()  # the server sees its socket close and ends
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


_SERVER_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR")
"""What a fork server is started with besides ``PYTHON*`` variables: no credential, ever
(each forked runner gets its invocation's environment, whole, with its request)."""


class RunnerForks:
    """This controller process's fork servers, one per runner command (and ``PYTHON*``
    variables: where its code is), each started on first use."""

    def __init__(self, after: int = 0, answer_seconds: float = _START_SECONDS) -> None:
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, ...], _Server] = {}
        self._asked: dict[tuple[str, ...], int] = {}
        self._refused: set[tuple[str, ...]] = set()
        self._pid = os.getpid()
        self.after = after
        """How many runners of a command are started afresh before its server is (see the
        module docstring: none, by default)."""
        self.answer_seconds = answer_seconds  # for a forked runner's pid, once asked

    def fork(
        self, command: Sequence[str], argv: Sequence[str], environment: Mapping[str, str], cwd: Path
    ) -> ForkedRunner | None:
        """A runner of ``command`` with ``argv``, ``environment`` (whole) and ``cwd``, forked
        from its server; None when no server could take it (nothing started: the caller
        starts it afresh); :class:`ForkUncertain` when one may have started."""
        base = {
            k: v
            for k, v in os.environ.items()
            if k in _SERVER_ENVIRONMENT or k.startswith("PYTHON")
        }
        key = (*command, *sorted(f"{k}={v}" for k, v in base.items() if k.startswith("PYTHON")))
        with self._lock:
            if self._pid != os.getpid():  # a forked copy of a controller: not its servers
                self._servers, self._asked, self._pid = {}, {}, os.getpid()
                self._refused = set()
            self._asked[key] = asked = self._asked.get(key, 0) + 1
            if asked <= self.after:
                return None
            server = self._servers.get(key)
            if server is not None and not server.alive():
                server.stop()
                server = None
            if server is None:
                if key in self._refused:
                    return None
                try:
                    server = _Server(command, base, self.answer_seconds)
                except OSError:
                    self._refused.add(key)  # this command serves no forks: never asked again
                    return None
                self._servers[key] = server
        try:
            return server.fork(argv, environment, cwd)
        except OSError as error:
            with self._lock:
                if self._servers.get(key) is server:
                    del self._servers[key]
            server.stop()
            if isinstance(error, ForkUncertain):
                raise
            return None

    def stop(self) -> None:
        """End every server (each ends when its socket closes)."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.stop()


forks = RunnerForks()
"""This controller process's runner fork servers."""
