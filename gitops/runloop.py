"""``seshat run``'s loop: look at the branch tip often, reconcile what a push touched at
once, and what the schedule says is due every tick.

APScheduler drives two interval jobs on one worker thread, so they never overlap:

- ``look`` every ``poll`` seconds renews (or seeks) the controller Lease (only the leader runs
  passes) and asks ``git ls-remote`` for the branch tip; when it moved from the revision the
  last pass read, a pass runs at once. A verified webhook brings the next look forward to now.
- ``tick`` every ``tick`` seconds (the first one at start) runs a pass for the schedule:
  ``spec.interval``, ``spec.retryInterval``.

A pass reconciles the resources that are due and those the new commits touched
(:mod:`gitops.reconcile.touched`), nothing else. Around each pass the loop keeps the
Prometheus metrics (:mod:`gitops.metrics`) and the health answers (:mod:`gitops.serve.health`)
current. A job that comes due while a pass runs is coalesced into one run after it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from gitops import metrics
from gitops.execution.leases import Leader
from gitops.reconcile.passes import PassReport
from gitops.repo.tip import remote_tip
from gitops.serve.health import Health
from gitops.wiring import Wiring
from runner.errors import SeshatError

__all__ = ["LoopSettings", "RunLoop"]

_STOP_POLL = 0.2
"""Seconds between the main thread's looks at whether it was asked to stop."""


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
        self.stopping = False  # set by :meth:`stop` (a signal handler's only write)
        self.scheduler = _scheduler()
        self.branch = settings.branch  # seshat.yaml's spec.branch once a pass read it
        self.seen: str | None = None  # the tip the last pass was started for
        self.tip_error = ""  # the last ls-remote complaint, logged once until it changes
        # "ns/name" -> (kind, phase, reason) of every declared resource, for the gauge.
        self.standing: dict[str, tuple[str, str, str]] = {}
        self.complete = False  # whether standing covers resources no pass reconciled yet

    def wake(self) -> None:
        """Look at the tip now (a verified webhook): the next ``look`` is brought forward."""
        with contextlib.suppress(JobLookupError):  # not started yet, or stopping
            self.scheduler.modify_job("look", next_run_time=datetime.now(UTC))

    def stop(self) -> None:
        """Stop after the pass under way. Safe in a signal handler: it takes no lock (one
        that the interrupted main thread may hold, as it does inside ``Event.wait``)."""
        self.stopping = True

    def run(self) -> None:
        """Run the jobs until :meth:`stop`; a pass under way is finished first."""
        now = datetime.now(UTC)
        poll, tick = self.settings.poll, self.settings.tick
        # The first pass at start is the tick's; the first look follows one poll later.
        self.scheduler.add_job(
            self._tick, IntervalTrigger(seconds=tick), id="tick", next_run_time=now
        )
        # Two instances of the look: the one running and one waiting for the worker thread.
        # A webhook that arrives while a look (and its pass) runs queues the second, which
        # looks at the tip once the pass is over; with one instance the scheduler dropped it
        # and the push waited for the next poll.
        self.scheduler.add_job(
            self._look,
            IntervalTrigger(seconds=poll),
            id="look",
            next_run_time=now + timedelta(seconds=poll),
            max_instances=2,
        )
        self.scheduler.start()
        try:
            # Not one blocking wait: the kernel may hand SIGTERM to any thread, and when it
            # is not this one, the handler (Python runs it here) waited for this thread to
            # wake; a controller once ignored SIGTERM for minutes that way.
            while not self.stopping:
                time.sleep(_STOP_POLL)
        finally:
            self.stopping = True  # the jobs still queued start no pass
            self.scheduler.shutdown(wait=True)

    def _leading(self) -> bool:
        leading = self.leader.leading()
        self.health.beat(leading if self.mode.leases is not None else None)
        return leading and not self.stopping

    def _look(self) -> None:
        if not self._leading():
            return
        tip = self._tip()
        if tip is None or tip == self.seen:
            return
        self.say(f"seshat: {self.branch} moved to {tip[:12]}")
        self._pass(tip)

    def _tick(self) -> None:
        if self._leading():
            self._pass(None)

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


def _scheduler() -> BackgroundScheduler:
    """One worker thread (passes never overlap); a job that came due several times while
    another job's pass ran runs once after it, however late (the look also when it came due
    during its own run: ``max_instances=2`` in :meth:`RunLoop.run`)."""
    # A look that comes due during a long pass is skipped with a warning: expected, not news.
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    return BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(max_workers=1)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        timezone=UTC,
    )
