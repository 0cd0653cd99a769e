"""The sandbox watchdog's wording of a cancelled statement (runner/engines/watchdog.py), and
the signals the runner's own threads leave to the main thread (runner/deadline.py).

A real :class:`Watchdog` thread with a short deadline and a cancel that only counts. The
end-to-end cancels against PostgreSQL and MariaDB are in test_sandbox_walls.py and
test_sandbox_limits.py; this pins the race those showed once under load: the statement was
cancelled by the watchdog, but another statement had started before the error was worded,
and the plan said the driver's "canceling statement due to user request" instead of the
sandbox's limit.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from runner.deadline import deadline
from runner.engines.watchdog import CANCELLED, Watchdog


def _fired(watchdog: Watchdog) -> None:
    with watchdog.statement():
        ends = time.monotonic() + 5
        while not watchdog.fired:
            assert time.monotonic() < ends, "the watchdog never fired"
            time.sleep(0.01)


def test_a_cancel_is_worded_as_the_limit_even_after_another_statement_began() -> None:
    cancels: list[float] = []
    watchdog = Watchdog(0.05, lambda: cancels.append(time.monotonic()))
    try:
        _fired(watchdog)
        assert len(cancels) == 1
        limit = "ran longer than the sandbox allows a statement (0 s)"
        assert watchdog.explain(CANCELLED[0]) == limit
        with watchdog.statement():  # the session moved on before the error was worded
            pass
        assert not watchdog.fired
        assert watchdog.explain(CANCELLED[0]) == limit
        assert watchdog.explain(f"{CANCELLED[1]}") == limit
        # Any other error stays as the driver said it.
        assert watchdog.explain('syntax error at or near "AT"') == 'syntax error at or near "AT"'
    finally:
        watchdog.close()


def test_a_cancel_without_any_fire_is_not_the_watchdogs() -> None:
    watchdog = Watchdog(60, lambda: None)
    try:
        with watchdog.statement():
            pass
        assert watchdog.explain(CANCELLED[0]) == CANCELLED[0]
    finally:
        watchdog.close()


def _blocked(thread: threading.Thread) -> set[int]:
    """The signals ``thread`` blocks, as Linux reports them (``SigBlk`` in its status)."""
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    mask = int(next(line.split()[1] for line in status.splitlines() if line[:7] == "SigBlk:"), 16)
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


def test_the_runners_own_threads_leave_its_deadline_and_stop_signals_to_the_main_thread() -> None:
    """The kernel hands a process's signal to any thread that does not block it; one handed
    to a helper thread waits, unhandled, until the main thread next runs Python code, which a
    statement running on the server may not let it do for minutes. The watchdog threads block
    the timer and stop signals, so the kernel must hand those to the main thread."""
    wanted = {signal.SIGALRM, signal.SIGTERM, signal.SIGINT}
    watchdog = Watchdog(60, lambda: None)
    try:
        with deadline(60):
            helpers = [
                t for t in threading.enumerate() if t.name in ("seshat-watchdog", "seshat-deadline")
            ]
            assert sorted(t.name for t in helpers) == ["seshat-deadline", "seshat-watchdog"]
            ends = time.monotonic() + 10  # each thread blocks them first thing it does
            while not all(wanted <= _blocked(t) for t in helpers):
                assert time.monotonic() < ends, [(t.name, _blocked(t)) for t in helpers]
                time.sleep(0.01)
            assert not wanted & _blocked(threading.current_thread())
    finally:
        watchdog.close()
