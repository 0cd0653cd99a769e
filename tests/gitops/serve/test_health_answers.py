"""What /healthz and /readyz answer from what the run loop reports (gitops/serve/health.py)."""

from __future__ import annotations

from gitops.serve.health import Health


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_healthy_while_the_loop_goes_round_or_a_pass_runs() -> None:
    clock = _Clock()
    health = Health(stale_after=30, clock=clock)
    health.beat(None)
    clock.now += 29
    assert health.healthy().ok
    clock.now += 2
    assert not health.healthy().ok  # the loop stopped going round
    health.pass_started()
    clock.now += 3600  # a long Apply: the pass is alive, its operations have deadlines
    assert health.healthy().ok
    health.pass_ended(True)
    assert health.healthy().ok


def test_ready_after_a_first_pass_or_while_standing_by() -> None:
    health = Health(stale_after=30)
    health.beat(None)
    assert not health.ready().ok  # local mode: no pass yet
    health.pass_started()
    health.pass_ended(False)  # the repository could not be read
    assert not health.ready().ok
    health.pass_ended(True)
    assert health.ready().ok and health.ready().text == "ready: running"
    standby = Health(stale_after=30)
    standby.beat(False)
    assert standby.ready().ok and "standing by" in standby.ready().text
    standby.beat(True)  # it took the Lease over: ready once its first pass ran
    assert not standby.ready().ok
