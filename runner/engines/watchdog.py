"""Statement deadlines a sandbox cannot change: the runner cancels from outside.

A statement timeout set on a sandbox server (``statement_timeout``, ``max_statement_time``)
is a setting the desired SQL can set back to zero. A :class:`Watchdog` is a thread of the
runner that cancels the statement running on one sandbox session once it has run
:func:`statement_seconds` (the session's driver cancel: PostgreSQL's cancel request,
MariaDB's ``KILL QUERY`` from another session); the statement then fails with the
driver's "cancelled" error, which :meth:`Watchdog.explain` words for people.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

from runner.deadline import leave_signals_to_the_main_thread

__all__ = ["CANCELLED", "STATEMENT_SECONDS", "Watchdog", "statement_seconds", "watching"]

CANCELLED: Final = (
    "canceling statement due to user request",  # PostgreSQL, after a cancel request
    "Query execution was interrupted",  # MariaDB, after KILL QUERY
)
"""What a driver says of a statement a cancel stopped: on a private sandbox, only the
watchdog sends one."""

STATEMENT_SECONDS: Final = 120.0
"""How long one sandbox statement may run; ``SESHAT_SANDBOX_STATEMENT_SECONDS`` sets another."""


def statement_seconds() -> float:
    configured = os.environ.get("SESHAT_SANDBOX_STATEMENT_SECONDS")
    try:
        return float(configured) if configured else STATEMENT_SECONDS
    except ValueError:
        return STATEMENT_SECONDS


class Watchdog:
    """Cancels, with ``cancel``, a statement of one session that runs too long."""

    def __init__(self, seconds: float, cancel: Callable[[], None]) -> None:
        self.seconds = seconds
        self._cancel = cancel
        self._started: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.fired = False  # the last statement was cancelled by this watchdog
        self.fires = 0  # how many statements it cancelled in all
        self._thread = threading.Thread(target=self._watch, name="seshat-watchdog", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        leave_signals_to_the_main_thread()
        tick = min(0.5, self.seconds / 4)
        while not self._stop.wait(tick):
            with self._lock:
                started = self._started
                if started is None or time.monotonic() - started < self.seconds:
                    continue
                self._started = None
                self.fired = True
                self.fires += 1
            with contextlib.suppress(Exception):  # a cancel that fails leaves the deadline
                self._cancel()

    @contextlib.contextmanager
    def statement(self) -> Iterator[None]:
        """One statement (or one batch) under the deadline."""
        with self._lock:
            self._started, self.fired = time.monotonic(), False
        try:
            yield
        finally:
            with self._lock:
                self._started = None

    def explain(self, message: str) -> str:
        """``message`` of a failed statement, saying so when the watchdog cancelled it.

        A cancelled statement is the watchdog's also when a later statement has started
        since (clearing :attr:`fired`) before the error was worded: under load the
        cancel's own call can end after the session has moved on, and a retry of the same
        statement can be worded after another statement began. Nothing else on a sandbox
        session sends a cancel, so a driver's "cancelled" after any fire is a fire's."""
        if self.fired or (self.fires and any(text in message for text in CANCELLED)):
            return f"ran longer than the sandbox allows a statement ({self.seconds:.0f} s)"
        return message

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def watching(cancel: Callable[[], None], seconds: float | None = None) -> Iterator[Watchdog]:
    """A :class:`Watchdog` over one session for the block."""
    watchdog = Watchdog(statement_seconds() if seconds is None else seconds, cancel)
    try:
        yield watchdog
    finally:
        watchdog.close()
