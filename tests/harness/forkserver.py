"""Starting ``seshat`` and ``seshat-runner`` for a test without paying their imports each time.

A ``seshat`` process spends most of its CPU importing (pydantic models, GitPython: about half
a second), a ``seshat-runner`` process a third of a second (the engines, sqlglot, the
drivers), and the suite starts thousands of them. A fork server imports one program's
modules once, then forks one child per call: the child takes the call's environment, working
folder, arguments and standard streams and runs the same ``main`` the console script runs,
in a process of its own (its own pid, exit status and file descriptors; the runners, servers
and Git processes it starts are started as ever). The runners the reconciler starts for its
operations are not forked: they are the product's own processes.

What a child shares with its server is what a fresh interpreter would have computed the same
way at import, plus one thing it would not: the hash seed. ``seshat`` calls alternate
between two servers with different seeds, so two calls in a row never share one (as two real
processes almost never do); a runner call names its seed (``PYTHONHASHSEED``, as the
runner's tests always do) and goes to a server started with that seed. A call whose
environment sets any other ``PYTHON*`` value than its server's runs as a real process. Tests
about starting a program itself (``tests/gitops/test_cli_startup.py``,
``tests/runner/test_op_imports.py``, the console-script tests) start the real script.

A call is either run to its end (:meth:`ForkServers.run`, what the CLI helpers use) or
started (:meth:`ForkServers.start`, what the fake kubelet of ``harness/kube_api.py`` uses for
its ``seshat-runner`` pods): a :class:`Started` call has its child's pid, ``poll``, ``wait``
and ``returncode`` as a :class:`subprocess.Popen` has them, and its output once it ended. A
started call may ask for its child to lead a session of its own (``os.setsid``, as
``start_new_session=True`` does: ``os.killpg(pid, ...)`` then ends it and all it started) and
for its stderr to go where its stdout goes (one log, as a kubelet keeps it).

Protocol (one Unix socket per server; one connection per call): the client sends one JSON
line ``{"argv", "env", "cwd", "stdout", "stderr"}`` (the two output paths are files the client
made), plus, optionally, ``"session": true`` and ``"merge_stderr": true``; the server forks a
handler, which forks the child and answers ``{"pid": N}`` and, when the child has ended,
``{"status": S}`` (``os.waitstatus_to_exitcode``).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ForkServers", "Forked", "Started", "servers"]

# Every module a command may need, imported by the server so its children import nothing.
_PRELOAD_SESHAT = (
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
_PRELOAD_RUNNER = (
    "runner.cli",
    "runner.commands",
    "runner.operations",
    "runner.engines.base",
    "runner.engines.postgresql.engine",
    "runner.engines.mysql.engine",
    "runner.engines.sqlite.engine",
    "runner.migrations.apply",
    "runner.migrations.stores",
    "runner.artifacts.operations",
)
PROGRAMS = {
    "seshat": ("gitops.cli", _PRELOAD_SESHAT),
    "seshat-runner": ("runner.cli", _PRELOAD_RUNNER),
}


@dataclass(frozen=True)
class Forked:
    """What a forked ``seshat`` call ended with (``subprocess.CompletedProcess``'s fields)."""

    returncode: int
    stdout: str
    stderr: str


# -- the server (runs in its own process) ---------------------------------------------------


def _child(request: Mapping[str, Any], main: Any, led: int | None) -> None:
    """Become the ``seshat`` process ``request`` describes; never returns. ``led``: a pipe's
    write end, closed once the child leads a session of its own."""
    code = 1
    try:
        if led is not None:
            os.setsid()  # leads a session and process group of its own, as a pod's process
            os.close(led)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        tempfile.tempdir = None  # TMPDIR is read again, as a new process would
        stdin = os.open(os.devnull, os.O_RDONLY)
        stdout = os.open(request["stdout"], os.O_WRONLY | os.O_TRUNC)
        if request.get("merge_stderr"):
            # One open file for both (one offset): what each writes lands in the order
            # written, as two descriptors of one pipe would have it.
            stderr = os.dup(stdout)
        else:
            stderr = os.open(request["stderr"], os.O_WRONLY | os.O_TRUNC)
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
            os.close(source)
        sys.argv = list(request["argv"])
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


def _handle(connection: socket.socket, main: Any) -> None:
    """One call: fork the child, report its pid, wait, report its status; never returns."""
    status = 1
    try:
        with connection, connection.makefile("rwb") as stream:
            request = json.loads(stream.readline())
            # A child asked to lead a session has done so before its pid is told: whoever
            # gets the pid may kill its process group at once.
            waiting, led = os.pipe() if request.get("session") else (None, None)
            pid = os.fork()
            if pid == 0:
                if waiting is not None:
                    os.close(waiting)
                _child(request, main, led)
            if waiting is not None and led is not None:
                os.close(led)
                os.read(waiting, 1)  # end of file: the child closed its end, or ended
                os.close(waiting)
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


def serve(path: str, program: str = "seshat") -> None:
    """Import ``program``'s modules, then answer calls on the Unix socket ``path`` until
    stdin closes (the client stopping or dying). Single-threaded: a fork copies no held lock."""
    entry, preload = PROGRAMS[program]
    for module in preload:
        importlib.import_module(module)
    main = importlib.import_module(entry).main
    # What the product's runner fork server does once too (runner/forks.py): the models'
    # validators built (and, for the runner, the engine's source digested), so no child
    # does it again.
    from runner.forks import complete_models, prepare

    if program == "seshat-runner":
        prepare()
    else:
        complete_models("gitops", "runner")
    # As the console script has it: its own folder first, not the current one ('' of -c).
    sys.path[:] = [str(Path(sys.executable).parent)] + [
        entry for entry in sys.path if entry not in ("", str(Path(__file__).parent))
    ]
    # What the imports built lives as long as every child: never scanned by a child's
    # collector (which would touch, and so copy, every page of it), as in runner/forks.py.
    gc.collect()
    gc.freeze()
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
                _handle(connection, main)
            connection.close()


# -- the client (the pytest worker) ---------------------------------------------------------


class _Server:
    """One fork server of ``program``, started with ``PYTHONHASHSEED=seed``."""

    def __init__(self, folder: Path, program: str, seed: int) -> None:
        self.socket = str(folder / f"{program}-{seed}.sock")
        self.seed = seed
        self.environment = {**os.environ, "PYTHONHASHSEED": str(seed)}
        code = f"import sys; sys.path[:0] = {[str(Path(__file__).parent)]!r}; "
        code += f"import forkserver; forkserver.serve({self.socket!r}, {program!r})"
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
            raise RuntimeError(f"the {program} fork server did not start: {ready!r}")

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
    """This worker's fork servers, started on first use: two for ``seshat`` (different hash
    seeds, used in turn), one per hash seed asked for for ``seshat-runner`` (at most
    ``MAX_RUNNER_SEEDS``; calls with other seeds run as real processes)."""

    MAX_RUNNER_SEEDS = 6
    """Seeds 0 to 3 are the runner tests' own (``test_fidelity.py`` plans every case again
    with seed 3 to compare), the kubelet's pods use 0 and 1: with three servers, whichever
    seeds a worker met first took the slots and each later call of seed 3 was a fresh
    interpreter (half a second of CPU). A server costs about that once."""

    def __init__(self) -> None:
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._seshat: list[_Server] = []
        self._runners: dict[int, _Server] = {}
        self._turn = 0
        self._lock = threading.Lock()

    def _where(self) -> Path:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="seshat-fork-")
        return Path(self._folder.name)

    def _server(self, program: str, env: Mapping[str, str]) -> _Server | None:
        with self._lock:
            if program == "seshat":
                if not self._seshat:
                    seed = int.from_bytes(os.urandom(2), "big")
                    self._seshat = [_Server(self._where(), program, seed + n) for n in (0, 1)]
                self._turn += 1
                server = self._seshat[self._turn % 2]
            else:
                asked = env.get("PYTHONHASHSEED", "")
                if not asked.isdigit():
                    return None
                if int(asked) not in self._runners:
                    if len(self._runners) >= self.MAX_RUNNER_SEEDS:
                        return None
                    self._runners[int(asked)] = _Server(self._where(), program, int(asked))
                server = self._runners[int(asked)]
            if not server.alive():
                raise RuntimeError(f"a {program} fork server ended (see the test's output)")
            return server

    def run(
        self,
        program: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        timeout: float,
    ) -> Forked | None:
        """Run ``program`` (``seshat`` or ``seshat-runner``) with ``argv`` (``argv[0]`` is
        the console script) in a forked child; ``None`` when the call must be a real process
        (its environment sets other ``PYTHON*`` values than any server of it has)."""
        prepared = self._prepare(program, env)
        if prepared is None:
            return None
        server, environment = prepared
        with tempfile.TemporaryDirectory(prefix="seshat-call-") as name:
            stdout, stderr = _output_files(Path(name))
            request = _request(argv, environment, cwd, stdout, stderr)
            status = _call(server.socket, request, timeout, argv)
            return Forked(
                status,
                stdout.read_text(encoding="utf-8", errors="replace"),
                stderr.read_text(encoding="utf-8", errors="replace"),
            )

    def start(
        self,
        program: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        session: bool = False,
        merge_stderr: bool = False,
    ) -> Started | None:
        """Start ``program`` as :meth:`run` does and return at once, with the child running
        (``None`` when the call must be a real process). ``session``: the child leads a
        session of its own (``start_new_session=True``); ``merge_stderr``: its stderr goes
        to its stdout (``stderr=subprocess.STDOUT``)."""
        prepared = self._prepare(program, env)
        if prepared is None:
            return None
        server, environment = prepared
        folder = tempfile.TemporaryDirectory(prefix="seshat-call-")
        request = _request(argv, environment, cwd, *_output_files(Path(folder.name)))
        request |= {"session": session, "merge_stderr": merge_stderr}
        try:
            return Started(server.socket, request, argv, folder)
        except BaseException:
            folder.cleanup()
            raise

    def _prepare(
        self, program: str, env: Mapping[str, str]
    ) -> tuple[_Server, dict[str, str]] | None:
        """The server for a call with ``env`` and the child's environment, or ``None``."""
        server = self._server(program, env)
        if server is None:
            return None
        theirs = {k: v for k, v in env.items() if k.startswith("PYTHON")}
        if any(server.python_variables().get(k) != v for k, v in theirs.items()):
            return None
        return server, {**env, **server.python_variables()}

    def stop(self) -> None:
        for server in [*self._seshat, *self._runners.values()]:
            server.stop()
        self._seshat, self._runners = [], {}
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


class Started:
    """A forked call that runs on (:meth:`ForkServers.start`): its child's ``pid``, and
    ``poll``, ``wait`` and ``returncode`` as :class:`subprocess.Popen` has them (a signal's
    end is its negative number). The child is the server's handler's, not this process's:
    nothing here may ``waitpid`` it. Its status comes over the call's connection, read by a
    thread of its own, so that any thread may poll or wait. Its outputs are read once it
    ended; :meth:`close` then drops the connection and the output files."""

    def __init__(
        self,
        path: str,
        request: Mapping[str, Any],
        argv: Sequence[str],
        folder: tempfile.TemporaryDirectory[str],
    ) -> None:
        self.args = list(argv)
        self.returncode: int | None = None
        self._folder = folder
        self._ended = threading.Event()
        self._connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._connection.connect(path)
            self._stream = self._connection.makefile("rwb")
            self._stream.write(json.dumps(request).encode() + b"\n")
            self._stream.flush()
            self.pid = int(json.loads(self._stream.readline())["pid"])
        except BaseException:
            self._connection.close()
            raise
        self._follower = threading.Thread(target=self._follow, daemon=True)
        self._follower.start()

    def _follow(self) -> None:
        # A handler that ended without saying (killed): the child's status is unknown, and
        # is no success.
        code = 1
        try:
            line = self._stream.readline()
            if line:
                code = int(json.loads(line)["status"])
        except (OSError, ValueError):
            pass
        finally:
            self.returncode = code
            self._ended.set()

    def poll(self) -> int | None:
        return self.returncode if self._ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def stdout(self) -> bytes:
        """What the child wrote on stdout (and stderr, when merged), once it ended."""
        return (Path(self._folder.name) / "stdout").read_bytes()

    def stderr(self) -> bytes:
        return (Path(self._folder.name) / "stderr").read_bytes()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._connection.shutdown(socket.SHUT_RDWR)
        self._follower.join()
        self._stream.close()
        self._connection.close()
        self._folder.cleanup()


servers = ForkServers()
"""The worker's fork servers (``tests/conftest.py`` stops them at the session's end)."""


def _output_files(folder: Path) -> tuple[Path, Path]:
    """A call's stdout and stderr files (empty) in ``folder``, made by the client."""
    stdout, stderr = folder / "stdout", folder / "stderr"
    stdout.touch()
    stderr.touch()
    return stdout, stderr


def _request(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, stdout: Path, stderr: Path
) -> dict[str, Any]:
    return {
        "argv": list(argv),
        "env": dict(env),
        "cwd": str(cwd),
        "stdout": str(stdout),
        "stderr": str(stderr),
    }


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
                # As a runner is stopped: SIGTERM (it drops its scratch databases), then
                # SIGKILL if it has not ended 20 s later. The child we asked for, by its pid.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                connection.settimeout(20)
                ended = b""
                with contextlib.suppress(TimeoutError, OSError):
                    ended = stream.readline()
                if not ended:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(list(argv), timeout) from None
            return int(json.loads(line)["status"])
