"""What ``/healthz`` and ``/readyz`` answer, from what the run loop reports.

* healthy (``/healthz``): the loop went round within :attr:`Health.stale_after` seconds, or
  a pass is running (a pass may take as long as its operations, which the executor bounds
  by their deadlines). A loop stuck elsewhere (a hung ``git ls-remote`` beyond its own
  timeout, a deadlock) turns it unhealthy, and Kubernetes restarts the pod.
* ready (``/readyz``): a replica that stands by (another holds the controller Lease) is
  ready: it is alive and would take over. One that leads, or runs alone in local mode, is
  ready once a pass has run to its end since it started; a pass that could not run (the
  repository unreachable) leaves it unready until one does.

The loop thread writes, the HTTP threads read; one lock keeps each answer consistent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Answer", "Health"]


@dataclass(frozen=True, slots=True)
class Answer:
    ok: bool
    text: str


class Health:
    def __init__(self, stale_after: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stale_after = stale_after
        self._clock = clock  # intervals only: never a time of day
        self._lock = threading.Lock()
        self._beat = self._clock()
        self._passing_since: float | None = None
        self._passed = False
        self._leading: bool | None = None  # None: no leader election (local mode)

    def beat(self, leading: bool | None) -> None:
        """The loop went round; ``leading`` is whether this replica holds the controller
        Lease (None without leader election)."""
        with self._lock:
            self._beat = self._clock()
            self._leading = leading

    def pass_started(self) -> None:
        with self._lock:
            self._passing_since = self._clock()

    def pass_ended(self, ran: bool) -> None:
        with self._lock:
            self._passing_since = None
            self._beat = self._clock()
            self._passed = self._passed or ran

    def healthy(self) -> Answer:
        with self._lock:
            now = self._clock()
            if self._passing_since is not None:
                return Answer(True, f"ok: a pass is running ({now - self._passing_since:.0f} s)")
            quiet = now - self._beat
            if quiet > self.stale_after:
                return Answer(False, f"the loop has not gone round for {quiet:.0f} s")
            return Answer(True, "ok")

    def ready(self) -> Answer:
        with self._lock:
            if self._leading is False:
                return Answer(True, "ready: standing by (another replica holds the Lease)")
            role = "leading" if self._leading else "running"
            if not self._passed:
                return Answer(False, f"{role}: no pass has run to its end yet")
            return Answer(True, f"ready: {role}")
