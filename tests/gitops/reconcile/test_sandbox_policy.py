"""``spec.policy.proceduralSchema`` and ``spec.dev.isolation``: from the declaration to the
runner's plan, the status and ``seshat status``; a pull request's own opt-in does not count in
its preview.

A desired schema is declarations: a procedural statement blocks the resource
(ArtifactRefused, ``statement_not_declarative``, naming file and line) until the declaration
opts in, and the plan records the opt-in, as it records a sandbox without its jail.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.executors import RecordingExecutor
from harness.preview_pr import ORDERS_V1, commit, open_branch, preview
from harness.reconcile_world import World, schema_yaml
from harness.seshat_cli import SESHAT

from gitops.reconcile.passes import run_pass
from runner.protocol.messages import PlanSettings

SEEDED = ORDERS_V1 + "-- seed it\nCREATE TABLE seeded AS SELECT 1 AS a;\n"


def _declare(world: World, layout: Path, extra: str = "", dev: str = "") -> None:
    text = schema_yaml("orders", layout, extra=extra) + dev
    world.remote.write_file("databases/orders/schema.yaml", text)
    world.remote.commit_all(f"orders{extra}{dev}")


def _pass(world: World) -> tuple[str, list[PlanSettings]]:
    executor = RecordingExecutor(world.work)
    report = run_pass(world.remote.remote_url, world.work, executor=executor)
    return f"{report.phases['shop/orders']}/{report.reasons['shop/orders']}", executor.plans


def _seshat(world: World, *args: str) -> str:
    done = subprocess.run(
        [SESHAT, *args, "--repo", str(world.remote.remote_url)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_procedural_statement_blocks_until_the_declaration_opts_in(world: World) -> None:
    layout = world.artifact("seeded", SEEDED)
    world.database("orders")
    _declare(world, layout)
    verdict, plans = _pass(world)
    assert verdict == "Blocked/ArtifactRefused"
    assert plans and all(p.procedural_schema is None for p in plans)
    message = world.status("orders")["status"]["conditions"][0]["message"]  # type: ignore[index]
    assert "schema.sql:3: CREATE TABLE AS is not a declaration (statement_not_declarative)" in (
        message
    )

    _declare(world, layout, extra=", proceduralSchema: true")
    verdict, plans = _pass(world)
    assert verdict == "AwaitingApproval/AwaitingApproval"
    assert plans and all(p.procedural_schema is True for p in plans)
    plan = world.status("orders")["status"]["plan"]  # type: ignore[index]
    assert plan["proceduralSchema"] is True and "sandboxIsolation" not in plan
    recorded = json.loads(world.show("seshat/status", plan["path"]))
    assert recorded["procedural_schema"] is True
    assert "(procedural)" in _seshat(world, "status")
    shown = _seshat(world, "plan", "show", "shop/orders")
    assert "ran as       proceduralSchema: procedural statements of the desired schema ran" in (
        shown
    )
    assert "-- proceduralSchema: procedural statements of the desired schema ran" in shown


def test_a_sandbox_without_its_jail_is_recorded_and_shown(world: World) -> None:
    layout = world.artifact("plain", ORDERS_V1)
    world.database("orders")
    _declare(world, layout)
    assert _pass(world)[0] == "AwaitingApproval/AwaitingApproval"
    jailed = world.status("orders")["status"]["plan"]  # type: ignore[index]
    assert "sandboxIsolation" not in jailed

    _declare(world, layout, dev="  dev: {isolation: none}\n")
    verdict, plans = _pass(world)
    assert verdict == "AwaitingApproval/AwaitingApproval"
    assert plans and all(p.sandbox_isolation == "none" for p in plans)
    unjailed = world.status("orders")["status"]["plan"]  # type: ignore[index]
    assert unjailed["sandboxIsolation"] == "none"
    assert unjailed["id"] != jailed["id"]  # the same statements, another plan
    assert unjailed["statements"] == jailed["statements"]
    assert "(no jail)" in _seshat(world, "status")
    assert "-- sandbox isolation: none" in _seshat(world, "plan", "show", "shop/orders")


def test_a_pull_requests_own_opt_in_is_left_out_of_its_preview(world: World) -> None:
    layout = world.artifact("orders-v1", ORDERS_V1)
    world.database("orders")
    _declare(world, layout)
    world.reconcile()
    open_branch(world)
    seeded = world.artifact("seeded", SEEDED)
    text = schema_yaml("orders", seeded, extra=", proceduralSchema: true")
    world.remote.write_file("databases/orders/schema.yaml", text)
    commit(world, "seed orders, opting in")

    status, document, _ = preview(world)

    assert status == 1
    [orders] = document["resources"]
    assert (orders["outcome"], orders["reason"]) == ("Blocked", "ArtifactRefused")
    assert "statement_not_declarative" in orders["message"]
    assert "a preview leaves out until the pull request is merged" in orders["message"]
