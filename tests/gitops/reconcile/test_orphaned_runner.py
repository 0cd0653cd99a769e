"""A runner that outlives its controller is followed to its end before its realm sees
anything else; a runner that can die with its controller does.

A runner started afresh (``SESHAT_RUNNER_FORKS=0``) where ``setpriv`` is missing (here: a
PATH holding only ``git``) has nothing to arm its parent-death signal, so it outlives a
controller SIGKILLed by PID: the case a restart must handle from the runner's record (pid and
process start time). A runner forked from the controller's fork server (the default) arms
the signal itself, so it dies with its controller with or without ``setpriv``.
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
from harness.reconcile_world import World, schema_yaml, tables

from gitops.execution.runners import RunnerBook
from gitops.reconcile.passes import run_pass

SESHAT = str(Path(sys.executable).parent / "seshat")


def _controller(world: World, path: str, forks: str = "1") -> subprocess.Popen[bytes]:
    return world.controller(
        env={**os.environ, "PATH": path, "SESHAT_RUNNER_FORKS": forks},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _dispatched(world: World, controller: subprocess.Popen[bytes]) -> None:
    world.until_phase("orders", "Applying", controller)


def _runners(world: World) -> list[int]:
    book = RunnerBook(world.work / "operations" / "runners", "")
    return [r.pid for r in book.records() if r.alive()]


def _declared(world: World) -> Path:
    layout = world.artifact("orphan", "CREATE TABLE orders (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file(
        "databases/orders/schema.yaml",
        schema_yaml("orders", layout, apply="Always", extra=", lockTimeout: 60s"),
    )
    world.remote.commit_all("declare orders")
    return database


def test_a_runner_that_outlives_its_controller_is_followed_before_anything_else(
    world: World, tmp_path: Path
) -> None:
    database = _declared(world)
    bare = tmp_path / "bin-without-setpriv"
    bare.mkdir()
    (bare / "git").symlink_to("/usr/bin/git")
    holder = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # the Apply waits for SQLite's write lock
    controller = _controller(world, str(bare), forks="0")
    try:
        _dispatched(world, controller)
        deadline = time.monotonic() + 30
        while not _runners(world):
            assert time.monotonic() < deadline, "no runner recorded"
            time.sleep(0.05)
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait()
        orphans = _runners(world)
        assert len(orphans) == 1  # the Apply's runner outlived its controller
        # It still waits for the lock; the test lets go of it in 2 s, and the runner applies.
        release = threading.Timer(2.0, lambda: holder.execute("ROLLBACK"))
        release.start()
        said: list[str] = []
        began = time.monotonic()
        report = run_pass(world.remote.remote_url, world.work, log=said.append)
        release.join()
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
            controller.wait()
        holder.close()
    # The restart followed the orphan to its end before it took the realm's lease: the
    # Apply ran once, by the orphan, and the fresh Observe and Plan settled it.
    assert time.monotonic() - began >= 2.0
    assert not pid_alive(orphans[0])
    assert any("followed runner(s) apply-" in line for line in said), said
    assert report.phases == {"shop/orders": "InSync"}
    assert tables(database) == ["orders"]
    assert world.phases("orders").count("Applying") == 1
    last = world.status("orders")["status"]["lastApplied"]  # type: ignore[index]
    assert (last["outcome"], last["settledBy"]) == (
        "Applied",
        "a fresh Observe and Plan: no change is left",
    )
    # Its record and its input files are gone with it.
    assert list((world.work / "operations" / "runners").glob("*")) == []
    assert list((world.work / "operations").glob("op-*.json")) == []
    assert list((world.work / "plans").glob("*")) == []


@pytest.mark.parametrize(
    ("forks", "setpriv"),
    [("1", True), ("1", False), ("0", True)],
    ids=["forked", "forked-without-setpriv", "afresh-under-setpriv"],
)
def test_a_runner_dies_with_its_controller(
    world: World, tmp_path: Path, forks: str, setpriv: bool
) -> None:
    database = _declared(world)
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    path = os.environ["PATH"]
    if not setpriv:
        path = str(tmp_path / "bin-without-setpriv")
        Path(path).mkdir()
        (Path(path) / "git").symlink_to("/usr/bin/git")
    controller = _controller(world, path, forks)
    try:
        _dispatched(world, controller)
        deadline = time.monotonic() + 30
        while not _runners(world):
            assert time.monotonic() < deadline, "no runner recorded"
            time.sleep(0.05)
        runner = _runners(world)[0]
        os.kill(controller.pid, signal.SIGKILL)
        controller.wait()
        deadline = time.monotonic() + 10
        while pid_alive(runner):
            assert time.monotonic() < deadline, "the runner outlived its controller"
            time.sleep(0.05)
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
            controller.wait()
        holder.execute("ROLLBACK")
        holder.close()
    # The next start sweeps what the dead runner left, and never runs that Apply again.
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert tables(database) == []
    assert list((world.work / "operations" / "runners").glob("*")) == []
    assert list((world.work / "plans").glob("*")) == []
    last = world.status("orders")["status"]["lastApplied"]  # type: ignore[index]
    assert (last["outcome"], last["settledBy"]) == (
        "Failed",
        "a fresh Observe and Plan: the same plan, so none of it applied",
    )
