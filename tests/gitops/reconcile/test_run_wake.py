"""A webhook that arrives while a pass runs is not lost: the loop looks again after the pass.

The loop's look at the branch tip is an APScheduler job that runs at most once at a time; a
verified webhook brings its next run forward to now. A webhook that came while a look (and
the pass it started) was running used to be dropped by the scheduler ("maximum number of
running instances reached") and the push waited for the next poll, an hour by default: seen
as a flaky `test_webhooks_verify_before_they_wake_the_loop`.

Here the loop is the real `RunLoop` on a real Git remote; only the pass itself is a stand-in
that records the tip it was started for and can be held, so that the webhook lands inside it
every time (a real pass is the reconciler's, tested everywhere else).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness.gitrepo import GitRemote

from gitops.execution.leases import Leader
from gitops.reconcile.passes import PassReport
from gitops.runloop import LoopSettings, RunLoop
from gitops.serve.health import Health
from gitops.wiring import Wiring
from runner.errors import CanNotRunError


class HeldPasses(Wiring):
    """Records each pass's start; the second one waits until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[float] = []
        self.second_started = threading.Event()
        self.release = threading.Event()

    def one_pass(
        self,
        source: str,
        work: Path,
        branch: str,
        log: Callable[[str], None],
        *,
        due_only: bool,
        report_idle: bool = False,
    ) -> PassReport:
        self.started.append(time.monotonic())
        if len(self.started) == 2:
            self.second_started.set()
            assert self.release.wait(30)
        raise CanNotRunError("a stand-in pass (the loop records it as failed and goes on)")


def _until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_webhook_during_a_pass_makes_another_look_after_it(
    git_remote: GitRemote, tmp_path: Path
) -> None:
    passes = HeldPasses()
    settings = LoopSettings(git_remote.remote_url, tmp_path / "work", "main", 3600.0, 3600.0)
    logger = logging.getLogger("test_run_wake")
    loop = RunLoop(
        settings, passes, Leader(None, "test", logger.debug), Health(60), logger, logger.debug
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        assert _until(lambda: len(passes.started) == 1, 30), "the first tick's pass"
        git_remote.write_file("one.txt", "1\n")
        git_remote.commit_all("one")
        loop.wake()  # a push: the look finds the tip moved and starts pass 2, held
        assert passes.second_started.wait(30)
        git_remote.write_file("two.txt", "2\n")
        git_remote.commit_all("two")
        loop.wake()  # a second push, while pass 2 runs
        passes.release.set()
        assert _until(lambda: len(passes.started) == 3, 30), (
            "the webhook that came during pass 2 started no pass (the next poll is an hour away)"
        )
    finally:
        passes.release.set()
        loop.stop()
        thread.join(30)
    assert not thread.is_alive()
