"""Starting ``seshat`` for a test without paying its imports every time.

A ``seshat`` process spends most of its CPU importing (pydantic models, GitPython, Sigstore:
about half a second to a second); the suite starts well over a thousand of them. A fork
server imports the CLI and every command's module once, then forks one child per call: the
child takes the call's environment, working folder, arguments and standard streams and runs
the same ``gitops.cli.main`` the console script runs, in a process of its own (its own pid,
exit status, file descriptors; the runners and Git processes it starts are started as ever).

What a child shares with its server is what a fresh interpreter would have computed the same
way at import, plus one thing it would not: the hash seed. So the harness keeps two servers
with different seeds and alternates between them, and two ``seshat`` calls in a row never
share a seed (as two real processes almost never do); a call whose environment sets any
``PYTHON*`` variable its server was not started with runs as a real process. Tests about
starting ``seshat`` itself (``tests/gitops/test_cli_startup.py``, the console-script tests)
start the real script.

Protocol (one Unix socket per server; one connection per call): the client sends one JSON
line ``{"argv", "env", "cwd", "stdout", "stderr"}`` (the two output paths are files the client
made); the server forks a handler, which forks the child and answers ``{"pid": N}`` and, when
the child has ended, ``{"status": S}`` (``os.waitstatus_to_exitcode``).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ForkServers", "Forked"]

# Every module a command may need, imported by the server so its children import nothing.
_PRELOAD = (
    "gitops.cli",
    "gitops.approvals.cli",
    "gitops.artifacts.cli",
    "gitops.controller",
    "gitops.preview.cli",
    "gitops.statusview",
    "gitops.demo",
    "gitops.crds",
    "runner.artifacts.sigstore",
    "sigstore.models",
    "sigstore.verify",
    "sigstore.sign",
)


@dataclass(frozen=True)
class Forked:
    """What a forked ``seshat`` call ended with (``subprocess.CompletedProcess``'s fields)."""

    returncode: int
    stdout: str
    stderr: str


# -- the server (runs in its own process) ---------------------------------------------------


def _child(request: Mapping[str, Any]) -> None:
    """Become the ``seshat`` process ``request`` describes; never returns."""
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        tempfile.tempdir = None  # TMPDIR is read again, as a new process would
        stdin = os.open(os.devnull, os.O_RDONLY)
        stdout = os.open(request["stdout"], os.O_WRONLY | os.O_TRUNC)
        stderr = os.open(request["stderr"], os.O_WRONLY | os.O_TRUNC)
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
            os.close(source)
        sys.argv = list(request["argv"])
        from gitops.cli import main

        try:
            main()
            code = 0
        except SystemExit as done:
            if done.code is None:
                code = 0
            elif isinstance(done.code, int):
                code = done.code
            else:
                print(done.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _handle(connection: socket.socket) -> None:
    """One call: fork the child, report its pid, wait, report its status; never returns."""
    status = 1
    try:
        with connection, connection.makefile("rwb") as stream:
            request = json.loads(stream.readline())
            pid = os.fork()
            if pid == 0:
                _child(request)
            stream.write(json.dumps({"pid": pid}).encode() + b"\n")
            stream.flush()
            _, wait_status = os.waitpid(pid, 0)
            stream.write(
                json.dumps({"status": os.waitstatus_to_exitcode(wait_status)}).encode() + b"\n"
            )
            stream.flush()
            status = 0
    finally:
        os._exit(status)


def serve(path: str) -> None:
    """Import everything, then answer calls on the Unix socket ``path`` until stdin closes
    (the client stopping or dying). Single-threaded, so that a fork copies no held lock."""
    for module in _PRELOAD:
        importlib.import_module(module)
    # As the console script has it: its own folder first, not the current one ('' of -c).
    sys.path[:] = [str(Path(sys.executable).parent)] + [
        entry for entry in sys.path if entry not in ("", str(Path(__file__).parent))
    ]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    os.write(1, b"ready\n")
    while True:
        readable, _, _ = select.select([listener.fileno(), 0], [], [])
        if 0 in readable and not os.read(0, 4096):
            os._exit(0)
        if listener.fileno() in readable:
            connection, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _handle(connection)
            connection.close()


# -- the client (the pytest worker) ---------------------------------------------------------


class _Server:
    def __init__(self, folder: Path, seed: int) -> None:
        self.socket = str(folder / f"seshat-{seed}.sock")
        self.environment = {**os.environ, "PYTHONHASHSEED": str(seed)}
        code = f"import sys; sys.path[:0] = {[str(Path(__file__).parent)]!r}; "
        code += f"import forkserver; forkserver.serve({self.socket!r})"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self.environment,
            cwd=folder,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if ready != b"ready\n":
            raise RuntimeError(f"the seshat fork server did not start: {ready!r}")

    def python_variables(self) -> dict[str, str]:
        return {k: v for k, v in self.environment.items() if k.startswith("PYTHON")}

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()  # ours, by PID
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class ForkServers:
    """Two fork servers with different hash seeds, used in turn; started on first use."""

    def __init__(self) -> None:
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._servers: list[_Server] = []
        self._turn = 0
        self._lock = threading.Lock()

    def _next(self) -> _Server:
        with self._lock:
            if not self._servers:
                self._folder = tempfile.TemporaryDirectory(prefix="seshat-fork-")
                folder = Path(self._folder.name)
                seed = int.from_bytes(os.urandom(2), "big")
                self._servers = [_Server(folder, seed), _Server(folder, seed + 1)]
            self._turn += 1
            server = self._servers[self._turn % 2]
            if not server.alive():
                raise RuntimeError("a seshat fork server ended (see the test's output)")
            return server

    def run(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float
    ) -> Forked | None:
        """Run ``argv`` (``argv[0]`` is the console script) in a forked child; ``None`` when
        the call must be a real process (its environment sets other ``PYTHON*`` values)."""
        server = self._next()
        theirs = {k: v for k, v in env.items() if k.startswith("PYTHON")}
        if any(server.python_variables().get(k) != v for k, v in theirs.items()):
            return None
        with _outputs() as (stdout, stderr):
            environment = {**env, **server.python_variables()}
            request = {"argv": list(argv), "env": environment, "cwd": str(cwd)}
            request |= {"stdout": str(stdout), "stderr": str(stderr)}
            status = _call(server.socket, request, timeout, argv)
            return Forked(
                status,
                stdout.read_text(encoding="utf-8", errors="replace"),
                stderr.read_text(encoding="utf-8", errors="replace"),
            )

    def stop(self) -> None:
        for server in self._servers:
            server.stop()
        self._servers = []
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


@contextlib.contextmanager
def _outputs() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory(prefix="seshat-call-") as name:
        stdout, stderr = Path(name) / "stdout", Path(name) / "stderr"
        stdout.touch()
        stderr.touch()
        yield stdout, stderr


def _call(path: str, request: Mapping[str, Any], timeout: float, argv: Sequence[str]) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(path)
        connection.settimeout(timeout)
        with connection.makefile("rwb") as stream:
            stream.write(json.dumps(request).encode() + b"\n")
            stream.flush()
            pid = int(json.loads(stream.readline())["pid"])
            try:
                line = stream.readline()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # the child we asked for, by its pid
                raise subprocess.TimeoutExpired(list(argv), timeout) from None
            return int(json.loads(line)["status"])
