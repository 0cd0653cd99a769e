"""A tiny watchdog process that stops our servers if pytest dies without cleaning up.

Why: fixture teardown and atexit both need a living Python interpreter.  When
pytest is SIGKILLed (OOM killer, a CI runner's hard timeout), a daemonised
postmaster and a privilege-dropping mariadbd would otherwise run forever
(``PR_SET_PDEATHSIG`` cannot cover them: pg_ctl detaches the postmaster, and
the kernel clears the flag when mariadbd switches to the mysql user).

How: on first use we start ``python -c …reaper_main()`` with a pipe on its
stdin and tell it ``watch PID SIGNAL NEEDLE`` for each server and ``forget PID``
once the harness stopped it.  The kernel closes the pipe however pytest dies;
on end-of-file the watchdog stops every PID still watched (checking that the
command line still contains NEEDLE, see :mod:`harness.pids`) and exits.  After
a clean run nothing is watched any more and it just exits.

This module imports only the standard library, because the watchdog process
imports it too.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TextIO

from .pids import terminate_pid

_HARNESS_PARENT = Path(__file__).resolve().parent.parent


def reaper_main(stream: TextIO) -> None:
    """Watchdog body: read commands until EOF, then stop whatever is still watched."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watched: dict[int, tuple[str, signal.Signals]] = {}
    for line in stream:
        parts = line.rstrip("\n").split(" ", 3)
        if parts[0] == "watch" and len(parts) == 4:
            watched[int(parts[1])] = (parts[3], signal.Signals(int(parts[2])))
        elif parts[0] == "forget" and len(parts) == 2:
            watched.pop(int(parts[1]), None)
    # Newest first, like fixture teardown.
    for pid, (needle, sig) in reversed(list(watched.items())):
        with contextlib.suppress(Exception):
            terminate_pid(pid, expect_in_cmdline=needle, sig=sig)


class _Watchdog:
    """The pytest side: starts the watchdog lazily and sends it commands."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None

    def _send(self, line: str) -> None:
        with self._lock:
            if self._process is None:
                code = (
                    "import sys; sys.path.insert(0, sys.argv[1]); "
                    "from harness.watchdog import reaper_main; reaper_main(sys.stdin)"
                )
                self._process = subprocess.Popen(
                    [sys.executable, "-c", code, str(_HARNESS_PARENT)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    start_new_session=True,
                )
            assert self._process.stdin is not None
            # Best effort: a dead watchdog must not break the tests it protects.
            with contextlib.suppress(BrokenPipeError, ValueError):
                self._process.stdin.write(line + "\n")
                self._process.stdin.flush()

    def watch(self, pid: int, needle: str, sig: signal.Signals) -> None:
        """Have the watchdog stop *pid* with *sig* if pytest dies first."""
        if "\n" in needle:
            raise ValueError("needle must be a single line")
        self._send(f"watch {pid} {int(sig)} {needle}")

    def forget(self, pid: int) -> None:
        """The harness has stopped *pid* itself; the watchdog must leave it alone."""
        if self._process is not None:
            self._send(f"forget {pid}")

    def shutdown(self) -> None:
        """Close the pipe (the watchdog stops what is left, then exits) and reap it."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


_WATCHDOG = _Watchdog()
watch = _WATCHDOG.watch
forget = _WATCHDOG.forget
shutdown = _WATCHDOG.shutdown
