"""Start, watch and stop the helper processes the test harness owns.

Why this module exists: every server the harness starts must be stopped by the
harness, by the PID it recorded, whatever happens to the test that used it, and
nothing else may ever be signalled (a system PostgreSQL and MariaDB run on the
same machine).  Three layers make that hold:

* the context managers in the service modules stop their process in ``finally``;
* every stop action is also registered here with :mod:`atexit`, as a last
  resort when pytest exits without running fixture teardown;
* a watchdog process (:mod:`harness.watchdog`) stops every server still
  running when pytest dies without either of the above (``kill -9``); children
  we fork directly also ask the kernel for SIGTERM when pytest dies
  (``PR_SET_PDEATHSIG``).

Server output never goes to pytest's stdout/stderr: it is appended to log files
under the session base directory, and error messages quote the log's tail.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, TypeVar

from . import watchdog
from .ports import free_port, is_port_conflict

_T = TypeVar("_T")

_PR_SET_PDEATHSIG = 1


class HarnessError(RuntimeError):
    """A test service could not be provided; the message says what went wrong and what to do."""


# --------------------------------------------------------------------------- binaries


def require_binary(name: str, package: str) -> str:
    """Return the path of program *name*, or fail naming the Debian *package* that ships it.

    Why fail instead of skip: a missing server binary means the test machine is
    set up wrongly, and a silent skip would hide every test that needs it.
    """
    if os.path.isabs(name):
        if os.access(name, os.X_OK):
            return name
    else:
        search = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"])
        found = shutil.which(name, path=search)
        if found is not None:
            return found
    raise HarnessError(
        f"required program {name!r} was not found; "
        f"install the Debian package {package!r} (apt-get install {package})"
    )


# --------------------------------------------------------------------------- service users


def running_as_root() -> bool:
    """Tell whether we must switch to a service account (servers refuse to run as root)."""
    return os.geteuid() == 0


def as_service_user(user: str, argv: Sequence[str]) -> list[str]:
    """Wrap *argv* so it runs as *user* when we are root, and unchanged otherwise.

    Why: initdb/pg_ctl refuse to run as root; as a normal user we simply run
    them as ourselves, which needs no privileges.
    """
    if running_as_root():
        runuser = require_binary("runuser", "util-linux")
        return [runuser, "-u", user, "--", *argv]
    return list(argv)


def give_to_service_user(path: Path, user: str, package: str) -> None:
    """chown *path* to *user* (when root) so the server can write its data directory."""
    if not running_as_root():
        return
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise HarnessError(
            f"system user {user!r} does not exist; it is created by the Debian package "
            f"{package!r} (apt-get install {package})"
        ) from None
    os.chown(path, entry.pw_uid, entry.pw_gid)


def clean_environment(drop_prefixes: Sequence[str] = ()) -> dict[str, str]:
    """Copy of os.environ without variables that would reconfigure a server behind our back."""
    return {
        key: value
        for key, value in os.environ.items()
        if not any(key.startswith(prefix) for prefix in drop_prefixes)
    }


# --------------------------------------------------------------------------- last-resort cleanup

_cleanup_lock = threading.Lock()
_cleanups: dict[int, Callable[[], object]] = {}
_tokens = itertools.count(1)


def register_cleanup(action: Callable[[], object]) -> int:
    """Remember *action* to run at interpreter exit; the token is for unregister_cleanup."""
    with _cleanup_lock:
        token = next(_tokens)
        _cleanups[token] = action
    return token


def unregister_cleanup(token: int) -> None:
    """Forget a cleanup action because it has already run (or is running) normally."""
    with _cleanup_lock:
        _cleanups.pop(token, None)


def _run_pending_cleanups() -> None:
    """atexit hook: stop whatever fixture teardown did not stop, newest first."""
    with _cleanup_lock:
        pending = sorted(_cleanups.items(), reverse=True)
        _cleanups.clear()
    for _token, action in pending:
        try:
            action()
        except Exception as exc:  # an exit hook must try every action
            print(f"seshat test harness: cleanup at exit failed: {exc!r}", file=sys.stderr)
    watchdog.shutdown()


atexit.register(_run_pending_cleanups)


@contextlib.contextmanager
def cleanup_guard(action: Callable[[], object]) -> Iterator[None]:
    """Run *action* when the block ends, however it ends, and at exit if it never ends.

    Why both: ``finally`` covers failing tests and fixture teardown; the atexit
    registration covers an interpreter that exits without unwinding the fixtures.
    """
    token = register_cleanup(action)
    try:
        yield
    finally:
        unregister_cleanup(token)
        action()


# --------------------------------------------------------------------------- logs and waiting


def tail(path: Path, lines: int = 30) -> str:
    """The last *lines* lines of a log file, for error messages ("" if it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 16384))
            data = handle.read()
    except OSError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def log_size(path: Path) -> int:
    """Current size of a log file (0 if absent), to read only what a later attempt appends."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_from(path: Path, offset: int) -> str:
    """The text of *path* from byte *offset* on ("" if unreadable)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def wait_until(
    ready: Callable[[], bool], *, timeout: float, interval: float, describe: Callable[[], str]
) -> None:
    """Poll *ready* every *interval* seconds; raise HarnessError(describe()) after *timeout*.

    Why bounded: a server that never comes up must fail the session quickly
    with its log, not hang CI.  *ready* may itself raise to abort early (for
    example when the server process has already exited).
    """
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() >= deadline:
            raise HarnessError(describe())
        time.sleep(interval)


@contextlib.contextmanager
def _command_log(argv: Sequence[str], log_path: Path) -> Iterator[BinaryIO]:
    """Open *log_path* for appending, headed by the command line that will write to it.

    Why: several tools and servers share one log; the ``$ argv`` line tells
    which output came from which command.
    """
    with log_path.open("ab") as log:
        log.write(f"\n$ {' '.join(argv)}\n".encode())
        log.flush()
        yield log


def run_logged(
    argv: Sequence[str],
    *,
    log_path: Path,
    what: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    check: bool = True,
) -> int:
    """Run a short-lived tool with its output appended to *log_path*; return its exit code.

    With *check*, a non-zero exit raises HarnessError quoting the log's tail.
    """
    with _command_log(argv, log_path) as log:
        completed = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            timeout=timeout,
            check=False,
        )
    if check and completed.returncode != 0:
        raise HarnessError(
            f"{what} failed with exit code {completed.returncode}; "
            f"log {log_path}:\n{tail(log_path)}"
        )
    return completed.returncode


def run_captured(
    argv: Sequence[str],
    *,
    what: str,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 30.0,
) -> bytes:
    """Run a short-lived tool without a log file; return its stdout.

    Why not :func:`run_logged`: its stdout is the result (a hash entry) or
    nothing, and stderr is the only diagnostic worth keeping, so a non-zero
    exit raises HarnessError quoting stderr instead of a log's tail.
    """
    completed = subprocess.run(
        list(argv),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=dict(env) if env is not None else None,
        timeout=timeout,
        check=False,
    )
    if completed.returncode != 0:
        raise HarnessError(f"{what} failed: {completed.stderr.decode(errors='replace')}")
    return completed.stdout


# --------------------------------------------------------------------------- child processes


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec hook asking Linux to SIGTERM the child when pytest dies (None elsewhere).

    Note: the kernel clears this flag when the child changes its user id, so it
    does not protect servers that drop privileges themselves (mariadbd --user).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def _preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # parent died before prctl took effect
            os._exit(1)

    return _preexec


class ManagedProcess:
    """A long-running child process that the harness started and will stop, by PID.

    The child gets no stdin and writes stdout/stderr to *log_path*; it runs in
    its own session so a Ctrl-C aimed at pytest does not kill it before the
    fixtures shut it down in order.  :meth:`stop` is idempotent and is also
    registered to run at interpreter exit.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log_path: Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        with _command_log(self.argv, log_path) as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                preexec_fn=_die_with_parent(),
            )
        self._token = register_cleanup(self.stop)
        watchdog.watch(self._popen.pid, " ".join(self.argv), signal.SIGTERM)

    @property
    def pid(self) -> int:
        """The PID recorded at start; the only process :meth:`stop` will signal."""
        return self._popen.pid

    def exit_code(self) -> int | None:
        """The exit code if the process has ended, else None."""
        return self._popen.poll()

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Send *sig*, wait up to *timeout* seconds, then SIGKILL; return the exit code."""
        unregister_cleanup(self._token)
        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._popen.send_signal(sig)
            try:
                self._popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait(timeout=10.0)
        watchdog.forget(self._popen.pid)
        return self._popen.returncode


# --------------------------------------------------------------------------- start-up on free ports


def fail_unless_port_conflict(
    failure: str,
    *,
    log_name: str,
    log_path: Path,
    log_offset: int,
    tool_log: Path | None = None,
) -> None:
    """After a failed start: return if the server's log says its port was taken, else raise.

    Why: :func:`~harness.ports.free_port` cannot reserve the port, so another
    program may take it first; only that case is worth a retry on a fresh port.
    Anything else raises HarnessError quoting what this attempt appended to
    *log_path* (from *log_offset*) and, if given, the tail of *tool_log*.
    """
    recent = read_from(log_path, log_offset)
    if is_port_conflict(recent):
        return
    message = f"{failure}; {log_name} {log_path}:\n{recent}"
    if tool_log is not None:
        message += f"\ntool log {tool_log}:\n{tail(tool_log)}"
    raise HarnessError(message)


def wait_for_start(
    process: ManagedProcess,
    *,
    ready: Callable[[], bool],
    what: str,
    not_ready: str,
    timeout: float,
    interval: float,
    log_name: str,
    log_path: Path,
    log_offset: int,
    tool_log: Path | None = None,
) -> ManagedProcess | None:
    """Wait until the just-started *process* is *ready*; None if it exited over a port conflict.

    Why one place: a server that exits during start-up must not be polled
    until the timeout, and must be stopped (by PID) whichever way the wait
    ends.  A timeout raises HarnessError starting with *not_ready*; an exit
    for any reason but a taken port raises one naming *what* and its exit code
    (see :func:`fail_unless_port_conflict` for the logs it quotes).
    """
    try:
        wait_until(
            # An exited server ends the polling; the exit is examined below.
            lambda: process.exit_code() is not None or ready(),
            timeout=timeout,
            interval=interval,
            describe=lambda: (
                f"{not_ready} within {timeout:.0f}s; {log_name} {log_path}:\n{tail(log_path)}"
            ),
        )
    except BaseException:
        process.stop()
        raise
    if process.exit_code() is None:
        return process
    process.stop()
    fail_unless_port_conflict(
        f"{what} exited with code {process.exit_code()} during start-up",
        log_name=log_name,
        log_path=log_path,
        log_offset=log_offset,
        tool_log=tool_log,
    )
    return None


def start_on_free_port(
    start: Callable[[int], _T | None], *, attempts: int, what: str
) -> tuple[_T, int]:
    """Call ``start(port)`` with fresh free ports until it succeeds; return its result and the port.

    *start* returns None when the port turned out to be taken (someone bound
    it between :func:`~harness.ports.free_port` and the server's bind); other
    failures should raise.  After *attempts* conflicts, HarnessError names *what*.
    """
    for _ in range(attempts):
        port = free_port()
        started = start(port)
        if started is not None:
            return started, port
    raise HarnessError(f"{what} could not bind a free port in {attempts} attempts")


@contextlib.contextmanager
def serving_on_free_port(
    start: Callable[[int], ManagedProcess | None], *, attempts: int, what: str, stop_timeout: float
) -> Iterator[tuple[ManagedProcess, int]]:
    """Start a server process as :func:`start_on_free_port` does; stop it when the block ends.

    Yields the process and its port.  Failed attempts are already stopped by
    *start* (see :func:`wait_for_start`); the one that succeeded is stopped by
    PID, with *stop_timeout* before SIGKILL, however the block ends.
    """
    process, port = start_on_free_port(start, attempts=attempts, what=what)
    with cleanup_guard(lambda: process.stop(timeout=stop_timeout)):
        yield process, port
