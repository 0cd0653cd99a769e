"""The controller owns its work folder: one controller per folder, Git locks a killed Git
left are removed at start, a lock someone holds now is waited for and then named."""

from __future__ import annotations

import os
import threading
import time

import pytest
from harness.reconcile_world import World, schema_yaml

from gitops.execution.workfolder import claim_work_folder
from gitops.reconcile.passes import run_pass
from gitops.repo.locks import PatientGit, remove_stale_locks
from runner.errors import CanNotRunError


def _declared(world: World) -> None:
    layout = world.artifact("locks", "CREATE TABLE orders (id INTEGER PRIMARY KEY);\n")
    world.database("orders")
    world.remote.write_file("databases/orders/schema.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare orders")


def _reconcile_once(world: World) -> tuple[int, str]:
    done = world.seshat(
        "reconcile", "--once", "--repo", world.remote.remote_url, "--work", world.work
    )
    return done.returncode, done.stdout + done.stderr


def test_a_second_controller_on_one_work_folder_exits_with_a_clear_error(world: World) -> None:
    _declared(world)
    owned = claim_work_folder(world.work)  # a controller that holds the folder (this process)
    try:
        status, said = _reconcile_once(world)
    finally:
        owned.release()
    assert status == 2
    assert f"another controller is running in the work folder {world.work}" in said
    assert f"pid {os.getpid()}" in said
    assert not (world.work / "source").exists()  # it touched nothing
    status, said = _reconcile_once(world)  # once the first is gone, the folder is free
    assert status == 0, said


def test_stale_git_locks_in_every_clone_are_removed_and_said(world: World) -> None:
    _declared(world)
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    clones = [world.work / "source" / ".git", world.work / "status.git", world.work / "reviews.git"]
    planted = [clone / "index.lock" for clone in clones] + [
        world.work / "status.git" / "refs" / "remotes" / "origin" / "seshat" / "status.lock",
        world.work / "source" / ".git" / "HEAD.lock",
    ]
    an_hour_ago = time.time() - 3600
    for lock in planted:
        assert lock.parent.is_dir(), lock
        lock.write_text("")
        os.utime(lock, (an_hour_ago, an_hour_ago))
    world.remote.write_file("README.md", "a new commit for the pass to check out\n")
    world.remote.commit_all("readme")

    status, said = _reconcile_once(world)
    assert status == 0, said
    for lock in planted:
        assert not lock.exists(), lock
        assert f"removed a stale Git lock {lock}" in said
    assert "shop/orders: AwaitingApproval" in said


def test_a_lock_held_now_is_waited_for(world: World) -> None:
    _declared(world)
    world.reconcile()
    lock = world.work / "source" / ".git" / "index.lock"
    lock.write_text("")  # a Git process that is about to let go
    timer = threading.Timer(1.0, lambda: lock.unlink())
    timer.start()
    try:
        began = time.monotonic()
        report = run_pass(world.remote.remote_url, world.work)
    finally:
        timer.join()
    assert time.monotonic() - began >= 1.0
    assert report.phases == {"shop/orders": "AwaitingApproval"}


def test_a_lock_held_past_the_deadline_fails_the_pass_naming_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _declared(world)
    world.reconcile()
    lock = world.work / "source" / ".git" / "index.lock"
    lock.write_text("")  # fresh: a start would keep it too
    monkeypatch.setattr(PatientGit, "lock_wait", 1.0)
    began = time.monotonic()
    with pytest.raises(CanNotRunError) as raised:
        run_pass(world.remote.remote_url, world.work)
    assert time.monotonic() - began < 30
    assert f"the Git lock {lock} was still held after 1 s of waiting" in str(raised.value)
    assert lock.exists()  # never taken for stale while a pass runs


def test_a_fresh_lock_survives_a_start(world: World) -> None:
    _declared(world)
    world.reconcile()
    lock = world.work / "status.git" / "packed-refs.lock"
    owned = claim_work_folder(world.work)
    try:
        time.sleep(0.1)  # file times come from a coarser clock than time.time()
        lock.write_text("")  # made after the start: some Git process's, not a dead one's
        said: list[str] = []
        assert remove_stale_locks(owned.clones(), owned.since, said.append) == 0
    finally:
        owned.release()
    assert lock.exists()
    assert said == [f"seshat: kept {lock}: made after this controller started"]
