"""The local executor's runner fork server (gitops.execution.forks, runner.forks), with the
real ``seshat-runner``: what a forked runner sees, how it ends, and that it never outlives
the server it came from.

A runner is made to hang, where a test needs one that does, the way a real runner can: its
``--input`` is a FIFO nobody writes, so it waits in ``open``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from harness.pids import pid_alive

from gitops.execution.executor import LocalExecutor
from gitops.execution.forks import RunnerForks
from runner.protocol.messages import OperationInput
from runner.protocol.results import InspectResult

RUNNER = [str(Path(sys.executable).parent / "seshat-runner")]


def _hanging_input(tmp_path: Path) -> Path:
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    return fifo


def _until_gone(pid: int, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while pid_alive(pid):
        assert time.monotonic() < deadline, f"process {pid} is still alive"
        time.sleep(0.02)


def test_the_executor_forks_the_installed_runner_and_it_sees_only_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    conn.close()
    assert LocalExecutor(tmp_path / "ops").forks is not None  # the default: forked
    forks = RunnerForks(after=0)
    executor = LocalExecutor(tmp_path / "ops", forks=forks)
    inspect = OperationInput.model_validate(
        {"operation": "inspect", "id": "op-1", "url": {"from_env": "APP_DB"}}
    )
    done = executor.run(inspect, {"APP_DB": f"sqlite:///{path}"}, deadline=60)
    assert done.kind == "done", done.detail
    assert done.result is not None and isinstance(done.result.result, InspectResult)
    assert "table:main.items" in done.result.result.model["tables"]  # type: ignore[operator]
    # The controller's own environment holds the variable; the invocation was not given it:
    # the forked runner does not see it (its environment is the invocation's, whole).
    monkeypatch.setenv("APP_DB", f"sqlite:///{path}")
    missing = executor.run(inspect, {}, deadline=60)
    assert missing.kind == "failed" and missing.detail.startswith("credential_unavailable")
    assert len(forks._servers) == 1  # both runners were forked, from one server
    forks.stop()


def test_a_forked_runner_is_its_own_process_group_and_a_deadline_kills_it(
    tmp_path: Path,
) -> None:
    forks = RunnerForks(after=0)
    try:
        runner = forks.fork(RUNNER, ["op", "--input", str(_hanging_input(tmp_path))], {}, tmp_path)
        assert runner is not None
        assert os.getpgid(runner.pid) == runner.pid
        with pytest.raises(subprocess.TimeoutExpired):
            runner.communicate(timeout=0.5)
        runner.kill()
        assert runner.communicate(timeout=10) == b""
        assert runner.returncode == -signal.SIGKILL
        _until_gone(runner.pid)
    finally:
        forks.stop()


def test_runners_die_with_their_server_and_the_server_with_its_socket(tmp_path: Path) -> None:
    forks = RunnerForks(after=0)
    hanging = ["op", "--input", str(_hanging_input(tmp_path))]
    try:
        runner = forks.fork(RUNNER, hanging, {}, tmp_path)
        assert runner is not None
        (server,) = forks._servers.values()
        os.kill(server.process.pid, signal.SIGKILL)  # ours, by its PID
        _until_gone(runner.pid)  # its handler died with the server, and it with its handler
        runner.close()
        again = forks.fork(RUNNER, hanging, {}, tmp_path)  # a new server takes it
        assert again is not None
        (server,) = forks._servers.values()
    finally:
        forks.stop()  # each socket closes: its server ends, and the runners it forked
    assert server.process.wait(timeout=10) == 0
    _until_gone(again.pid)
    again.close()


def test_a_command_that_serves_no_forks_is_started_afresh(tmp_path: Path) -> None:
    forks = RunnerForks(after=0)
    assert forks.fork(["/bin/false"], ["op", "--input", "x"], {}, tmp_path) is None
    executor = LocalExecutor(tmp_path / "ops", command=["/bin/false"])
    assert executor.forks is None  # another runner command than the installed one


def test_a_request_the_server_took_and_never_answered_is_lost_never_started_again(
    tmp_path: Path,
) -> None:
    """A server that took the request may have forked the runner (an Apply may have run):
    the outcome is unknown, and the executor does not start the runner afresh instead."""
    forks = RunnerForks(after=0, answer_seconds=0.5)
    executor = LocalExecutor(tmp_path / "ops", forks=forks)
    inspect = OperationInput.model_validate(
        {"operation": "inspect", "id": "op-1", "url": {"from_env": "APP_DB"}}
    )
    assert executor.run(inspect, {}, deadline=60).kind == "failed"  # the server is up
    (server,) = forks._servers.values()
    os.kill(server.process.pid, signal.SIGSTOP)  # ours, by its PID: it takes, never answers
    resume = threading.Timer(1.0, os.kill, (server.process.pid, signal.SIGCONT))
    resume.start()
    try:
        outcome = executor.run(inspect, {}, deadline=60)
    finally:
        resume.join()
    assert outcome.kind == "lost" and "did not answer" in outcome.detail
    assert not list((tmp_path / "ops").glob("op-*"))  # nothing else was started to read it
    assert server.process.wait(timeout=10) == 0  # that server was let go
    assert forks._servers == {}
