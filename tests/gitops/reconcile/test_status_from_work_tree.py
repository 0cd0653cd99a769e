"""``seshat status`` and ``seshat plan show`` run in a clone made to edit declarations: the
clone has no local status branch, so they read it from the clone's origin (where Seshat
pushes), as ``seshat approve`` does."""

from __future__ import annotations

import subprocess

from harness.reconcile_world import World, schema_yaml
from harness.seshat_cli import SESHAT


def _seshat(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SESHAT, *args, "--repo", "."],
        cwd=world.remote.work_dir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_status_and_plan_show_in_a_clone_read_its_origin(world: World) -> None:
    layout = world.artifact("wt", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    plan = world.status("orders")["status"]["plan"]["id"]  # type: ignore[index]
    local = subprocess.run(
        ["git", "-C", str(world.remote.work_dir), "branch", "--list", "seshat/status"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert local.stdout.strip() == ""  # the clone itself holds no status branch

    status = _seshat(world, "status", "--format", "json")
    assert status.returncode == 0, status.stderr
    assert '"AwaitingApproval"' in status.stdout and plan in status.stdout

    shown = _seshat(world, "plan", "show", "shop/orders")
    assert shown.returncode == 0, shown.stderr
    assert f"-- Seshat plan {plan}" in shown.stdout
    assert "CREATE TABLE" in shown.stdout
