"""The runner's own deadline: an operation that outlives ``deadline_seconds`` is stopped by
the runner itself, which answers ``deadline_exceeded`` instead of being killed without a
word by whoever started it.

Two stages, because a deadline must hold whatever the operation is doing:

1. At the deadline, a timer signal (``SIGALRM``) raises :class:`DeadlineExceeded` in the
   main thread. It derives from ``KeyboardInterrupt`` on purpose: drivers treat an
   interruption as a reason to cancel the statement running on the server (psycopg sends a
   cancel request and waits for it), so a long ``ALTER`` or migration stops in the database
   and its transaction rolls back, instead of running on after the client gave up. It is a
   ``BaseException``, so no ``except Exception`` in an engine swallows it.
2. A call that never returns to the interpreter (a C library blocked in a system call that
   is retried, an SQLite step) would never see the signal: :data:`HARD_STOP_AFTER` seconds
   later a watchdog thread calls ``hard_stop`` (the caller prints the ``deadline_exceeded``
   frame) and ends the process, so the frame still arrives before the executor's own
   timeout, which waits :data:`STOP_MARGIN` beyond the deadline.

The executors (local process timeout, a Job's ``activeDeadlineSeconds``) use the same
deadline plus :data:`STOP_MARGIN`, so the runner's answer always comes first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Final

__all__ = [
    "HARD_STOP_AFTER",
    "MAIN_THREAD_SIGNALS",
    "STOP_MARGIN",
    "DeadlineExceeded",
    "deadline",
    "leave_signals_to_the_main_thread",
]

HARD_STOP_AFTER: Final = 10
"""Seconds after the deadline before the watchdog ends a process the signal did not stop."""
STOP_MARGIN: Final = 30
"""Seconds an executor waits beyond the runner's deadline before it kills the runner (the
runner's own answer, hard stop included, comes within :data:`HARD_STOP_AFTER`)."""


MAIN_THREAD_SIGNALS: Final = frozenset({signal.SIGALRM, signal.SIGTERM, signal.SIGINT})
"""The signals whose handlers must interrupt what the main thread is doing."""


def leave_signals_to_the_main_thread() -> None:
    """Block :data:`MAIN_THREAD_SIGNALS` in the calling thread (a helper thread of the
    runner's that starts no process: a child would inherit the block).

    The kernel hands a process's signal to any thread that does not block it, and Python
    runs the handler in the main thread only when that thread next runs Python code; a main
    thread waiting in a system call (a statement on the server) is woken only by a signal
    handed to it. With every helper thread blocking them, these signals are."""
    signal.pthread_sigmask(signal.SIG_BLOCK, MAIN_THREAD_SIGNALS)


class DeadlineExceeded(KeyboardInterrupt):
    """The operation outlived its deadline (see the module's documentation for why this is
    an interruption)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the operation did not finish within its deadline of {seconds:g} s")
        self.seconds = seconds


@contextlib.contextmanager
def deadline(seconds: float | None, hard_stop: Callable[[], None] | None = None) -> Iterator[None]:
    """Run the body under a deadline of ``seconds`` (None: none). ``hard_stop`` is called
    by the watchdog if the body still runs :data:`HARD_STOP_AFTER` seconds past it; the
    process then exits with status 2."""
    if seconds is None:
        yield
        return
    in_main = threading.current_thread() is threading.main_thread()
    previous: object = None
    if in_main:

        def expire(_signum: int, _frame: object) -> None:
            raise DeadlineExceeded(seconds)

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    done = threading.Event()

    def watchdog() -> None:
        leave_signals_to_the_main_thread()
        if done.wait(seconds + HARD_STOP_AFTER):
            return
        if hard_stop is not None:
            with contextlib.suppress(Exception):
                hard_stop()
        os._exit(2)

    guard = threading.Thread(target=watchdog, name="seshat-deadline", daemon=True)
    guard.start()
    try:
        yield
    finally:
        done.set()
        if in_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)  # type: ignore[arg-type]
