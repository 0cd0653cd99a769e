"""``seshat run``'s loop: look at the branch tip often, reconcile what a push touched at
once, and what the schedule says is due every tick.

One thread goes round, waiting at most ``poll`` seconds between rounds (a verified webhook
or SIGTERM cuts the wait short). Each round it

1. renews (or seeks) the controller Lease: only the leader runs passes;
2. runs a pass when ``tick`` seconds went by since the last one started (the schedule:
   ``spec.interval``, ``spec.retryInterval``), or when ``git ls-remote`` shows the branch tip
   moved from the revision the last pass read. The pass reconciles the resources that are
   due, and those the new commits touched (:mod:`gitops.reconcile.touched`), nothing else.

Around each pass it keeps the Prometheus metrics (:mod:`gitops.metrics`) and the health
answers (:mod:`gitops.serve.health`) current.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitops import metrics
from gitops.execution.leases import Leader
from gitops.reconcile.passes import PassReport
from gitops.repo.tip import remote_tip
from gitops.serve.health import Health
from gitops.wiring import Wiring
from runner.errors import SeshatError

__all__ = ["LoopSettings", "RunLoop"]


@dataclass(frozen=True, slots=True)
class LoopSettings:
    source: str
    work: Path
    branch: str
    poll: float  # seconds between looks at the branch tip
    tick: float  # seconds between passes for the schedule


class RunLoop:
    def __init__(
        self,
        settings: LoopSettings,
        mode: Wiring,
        leader: Leader,
        health: Health,
        logger: logging.Logger,
        say: Callable[[str], None],
    ) -> None:
        self.settings, self.mode, self.leader, self.health = settings, mode, leader, health
        self.logger, self.say = logger, say
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.branch = settings.branch  # seshat.yaml's spec.branch once a pass read it
        self.seen: str | None = None  # the tip the last pass was started for
        self.last_start = float("-inf")
        self.tip_error = ""  # the last ls-remote complaint, logged once until it changes
        # "ns/name" -> (kind, phase, reason) of every declared resource, for the gauge.
        self.standing: dict[str, tuple[str, str, str]] = {}
        self.complete = False  # whether standing covers resources no pass reconciled yet

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            leading = self.leader.leading()
            self.health.beat(leading if self.mode.leases is not None else None)
            if leading:
                self._round()
            self.wake.wait(self.settings.poll)
            self.wake.clear()

    def _round(self) -> None:
        tip: str | None = None
        if time.monotonic() - self.last_start < self.settings.tick:
            tip = self._tip()
            if tip is None or tip == self.seen:
                return
            self.say(f"seshat: {self.branch} moved to {tip[:12]}")
        self.last_start = time.monotonic()
        self._pass(tip)

    def _tip(self) -> str | None:
        try:
            tip = remote_tip(self.settings.source, self.branch)
        except SeshatError as error:
            if str(error) != self.tip_error:
                self.tip_error = str(error)
                self.logger.warning(f"seshat: {error}")
            return None
        self.tip_error = ""
        return tip

    def _pass(self, tip: str | None) -> None:
        settings, mode = self.settings, self.mode
        self.health.pass_started()
        started = time.monotonic()
        report: PassReport | None = None
        try:
            report = mode.one_pass(
                settings.source,
                settings.work,
                settings.branch,
                self.say,
                due_only=True,
                report_idle=not self.complete,
            )
        except SeshatError as error:
            self.logger.error(f"seshat: {error}")
        except Exception:  # a fault in one pass never stops the controller
            self.logger.exception("seshat: the pass stopped")
        finally:
            ended = mode.clock().timestamp()
            outcome = "ok" if report is not None else "error"
            metrics.pass_finished(outcome, time.monotonic() - started, ended)
            self.health.pass_ended(report is not None)
        if report is None:
            self.seen = tip or self.seen  # retried on the next tick or the next push
            return
        self.seen, self.branch = report.revision, report.branch or self.branch
        self._phases(report)
        for key in sorted(report.phases):
            self.logger.info(
                f"{report.revision[:12]} {key}: {report.phases[key]} ({report.reasons[key]})",
                extra={"verdict": True, "resource": key},
            )

    def _phases(self, report: PassReport) -> None:
        """``seshat_resources``: every declared resource by kind, phase and Ready reason, as
        the passes so far left them."""
        declared = set(report.statuses)
        if report.repository is not None:
            declared |= {
                f"{r.key.namespace}/{r.key.name}"
                for r in report.repository.resources
                if r.key.kind in ("DatabaseSchema", "DatabaseMigration")
            }
        self.standing = {k: v for k, v in self.standing.items() if k in declared}
        self.standing |= report.standing()
        self.complete = True
        counts = Counter(self.standing.values())
        metrics.resource_phases(dict(counts))
