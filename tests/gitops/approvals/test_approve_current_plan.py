"""``seshat approve NS/NAME`` without ``--plan``: the current plan from the status branch,
shown, confirmed on a terminal, ``--yes`` for scripts, and a refusal without either."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

from harness.reconcile_world import World, schema_yaml
from harness.seshat_cli import SESHAT

from runner.digests import digest_hex


def _declared(world: World) -> str:
    layout = world.artifact("cp", "CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT);\n")
    world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    plan = world.status("orders")["status"]["plan"]["id"]  # type: ignore[index]
    assert isinstance(plan, str)
    return plan


def _approve(
    world: World, *extra: str, stdin: int | None = None
) -> subprocess.CompletedProcess[str]:
    command = [
        SESHAT,
        "approve",
        "shop/orders",
        "--repo",
        str(world.remote.work_dir),
        "--key",
        str(world.alice.private_key),
        *extra,
    ]
    return subprocess.run(
        command,
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _approval_file(world: World, plan: str) -> Path:
    return world.remote.work_dir / "approvals" / "shop" / "orders" / f"{digest_hex(plan)}.yaml"


def test_yes_approves_the_plan_the_status_records_and_it_applies(world: World) -> None:
    plan = _declared(world)
    done = _approve(world, "--yes")
    assert done.returncode == 0, done.stderr
    assert f"shop/orders: plan {plan} (AwaitingApproval" in done.stdout
    assert "statements  1; destructive: False" in done.stdout
    assert _approval_file(world, plan).is_file()
    world.remote.commit_all("approve the current plan")
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}


def test_without_a_terminal_and_without_yes_nothing_is_written(world: World) -> None:
    plan = _declared(world)
    done = _approve(world)
    assert done.returncode == 2
    assert "not a terminal" in done.stderr and "--yes" in done.stderr and plan in done.stderr
    assert not (world.remote.work_dir / "approvals").exists()


def test_on_a_terminal_the_question_decides(world: World) -> None:
    plan = _declared(world)
    for answer, code in ((b"n\n", 1), (b"y\n", 0)):
        main, terminal = pty.openpty()
        try:
            os.write(main, answer)
            done = _approve(world, stdin=terminal)
        finally:
            os.close(main)
            os.close(terminal)
        assert done.returncode == code, done.stderr
        assert f"Approve plan {plan}?" in done.stdout
        assert _approval_file(world, plan).is_file() == (code == 0)


def test_no_current_plan_is_refused(world: World) -> None:
    world.database("orders", "CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT);")
    layout = world.artifact("cp", "CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT);\n")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare")
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    done = _approve(world, "--yes")
    assert done.returncode == 2
    assert "names no current plan" in done.stderr
