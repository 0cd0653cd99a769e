"""A runner fork server: the runner's modules imported once, one forked process per operation.

Most of a ``seshat-runner op`` process's life is spent importing (the protocol models, the
engines, the drivers, Sigstore: 0.1 to 0.3 s of CPU) for an operation that often takes a
few milliseconds (a converged SQLite database, a cached plan). A local controller therefore
starts one *fork server* (``seshat-runner serve-forks --fd N``) with the runner's base
environment (no credential of any kind: the same minimal variables every runner gets), and
asks it for each runner it needs. The server imports the modules every operation may need,
then forks once per request; the forked runner takes the request's environment (replaced
whole: the one database or registry credential of that invocation), working folder,
arguments and output pipe, and runs the same :func:`runner.cli.main` as the console script.
Nothing of one request reaches another: each runs in a process of its own, forked from a
server that has never run an operation.

Protocol: a ``SOCK_SEQPACKET`` Unix socket pair the controller made (never a path anyone else
could connect to). The server says ``ready`` once it has imported everything. Each request
is one packet, a JSON object ``{"argv", "env", "cwd"}``, carrying two file descriptors
(``SCM_RIGHTS``): the write end of the runner's stdout pipe and one end of a reply socket
pair. The server forks a *handler* per request, which forks the
runner, writes ``{"pid": N}`` and, when the runner has ended, ``{"status": S}`` (as
``os.waitstatus_to_exitcode``) as JSON lines on the reply socket.

Lifetime: the server ends when the controller's end of the socket closes (the controller
ended, however it ended). Each handler dies with the server and each runner with its handler
(Linux's parent-death signal, armed by the process itself right after the fork, then checked
against the parent it expected), so runners do not outlive their controller. Each runner is
the leader of a process group of its own (its pid), so a deadline kills it and everything it
started at once, as for a runner started afresh.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import random
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any, NoReturn

from pydantic import BaseModel, PydanticUserError

from runner.engines.cache import engine_version

__all__ = ["PRELOAD", "complete_models", "prepare", "serve"]

PRELOAD = (
    "runner.cli",
    "runner.operations",
    "runner.engines.base",
    "runner.engines.sqlite.engine",
    "runner.engines.postgresql.engine",
    "runner.engines.mysql.engine",
    "runner.migrations.apply",
    "runner.migrations.stores",
    "runner.artifacts.operations",
    "runner.artifacts.verify",
    "runner.artifacts.registry",
    "runner.artifacts.layout",
    # Signatures: what a verify imports on first use, about 20 ms of CPU, in every forked
    # runner that verified. Not sigstore itself, which only a keyless bundle needs: 150 ms
    # more at every server's start (one per controller process), paid back only by keyless
    # verifies, which import it themselves.
    "runner.artifacts.sigstore",
    "cryptography.hazmat.backends.openssl",
    # The SQLite engine's SQL reader imports sqlglot on first use (a runner for another
    # dialect never needs it): about 90 ms of CPU that every forked SQLite runner paid.
    "sqlglot.dialects.sqlite",
    "sqlglot.errors",
    "sqlglot.tokenizer_core",
)
"""What the server imports before it forks anything: every module an operation may need,
so that a forked runner imports nothing (a module not listed is imported by the runner that
needs it, as in a runner started afresh). ``tests/runner/test_fork_preload.py`` checks that
the operations of a pass import nothing more (a keyless verify aside: see above)."""

_MAX_REQUEST = 1024 * 1024
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Arm the parent-death signal (SIGKILL) and make sure ``parent`` had not already gone
    before it was armed; leave at once if it had."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _runner(request: Mapping[str, Any], stdout: int) -> NoReturn:
    """Become the runner ``request`` describes: never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        stdin = os.open(os.devnull, os.O_RDWR)
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stdin, 2)
        os.close(stdin)
        os.close(stdout)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        tempfile.tempdir = None  # TMPDIR is read again, as a new process would
        random.seed()  # never the same stream as a sibling's
        sys.argv = ["seshat-runner", *request["argv"]]
        from runner.cli import main

        main()  # leaves by os._exit
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        os._exit(code)


def _handle(packet: bytes, stdout: int, reply_fd: int, server: int) -> NoReturn:
    """One request: fork the runner, say its pid, wait for it, say how it ended."""
    code = 1
    try:
        _die_with(server)
        reply = socket.socket(fileno=reply_fd)
        request = json.loads(packet)
        handler = os.getpid()
        pid = os.fork()
        if pid == 0:
            reply.close()
            _die_with(handler)
            _runner(request, stdout)
        os.close(stdout)
        # The runner's own group before its pid is handed out (it sets it too, first thing).
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        reply.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        reply.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        code = 0
    finally:
        os._exit(code)


def complete_models(*packages: str) -> None:
    """Build the validators of every pydantic model of ``packages`` (default: the runner)
    now, once. A model whose annotations name what its module defines later is completed on
    first use; in a forked process that is every process, each paying for it again (a forked
    SQLite plan took 46 ms of CPU, 14 ms once its server had done this and :func:`prepare`'s
    other steps: bench/runner_start.py)."""
    wanted = packages or ("runner",)
    for name, module in list(sys.modules.items()):
        if not any(name == p or name.startswith(p + ".") for p in wanted):
            continue
        for value in list(vars(module).values()):
            if (
                isinstance(value, type)
                and issubclass(value, BaseModel)
                and value.__module__ == name
                and not value.__pydantic_complete__
            ):
                with contextlib.suppress(PydanticUserError, NameError):
                    value.model_rebuild()


def prepare() -> None:
    """What the server does once so that no runner does it: import :data:`PRELOAD`, build
    the models' validators, and digest the engine's source files (the planning cache's
    key, read from about 80 files)."""
    for module in PRELOAD:
        importlib.import_module(module)
    complete_models()
    engine_version()


def serve(control_fd: int) -> NoReturn:
    """:func:`prepare`, then fork a runner for each request on the socket ``control_fd``
    until the controller's end of it closes."""
    prepare()
    control = socket.socket(fileno=control_fd)
    # What the imports built lives as long as every runner: never scanned again. The
    # runners set their own collector thresholds (runner.cli.main).
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps ended handlers
    server = os.getpid()
    control.send(b"ready")
    while True:
        try:
            packet, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST, 2)
        except InterruptedError:
            continue
        if not packet:
            os._exit(0)  # the controller is gone
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            continue
        if os.fork() == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _handle(packet, fds[0], fds[1], server)
        for fd in fds:
            os.close(fd)
