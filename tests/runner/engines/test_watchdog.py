"""The sandbox watchdog's wording of a cancelled statement (runner/engines/watchdog.py).

A real :class:`Watchdog` thread with a short deadline and a cancel that only counts. The
end-to-end cancels against PostgreSQL and MariaDB are in test_sandbox_walls.py and
test_sandbox_limits.py; this pins the race those showed once under load: the statement was
cancelled by the watchdog, but another statement had started before the error was worded,
and the plan said the driver's "canceling statement due to user request" instead of the
sandbox's limit.
"""

from __future__ import annotations

import time

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
