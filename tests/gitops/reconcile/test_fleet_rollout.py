"""Fleets end to end on real components (Git with a bare remote, signed OCI layouts, SQLite,
the real seshat-runner, SSH-signed approvals): one approval per distinct plan, rollout
steps, members joining and leaving."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from harness.reconcile_world import World, fleet_yaml, tables

V1 = "CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT);\n"


def listed(*names: str, wave: dict[str, str] | None = None) -> str:
    lines = ["    list:"]
    for name in names:
        label = (wave or {}).get(name)
        labels = f", labels: {{wave: {label}}}" if label else ""
        lines.append(f"      - {{name: {name}{labels}}}")
    return "\n".join(lines)


def tenant(world: World, name: str, sql: str = "") -> Path:
    """The SQLite database of member ``name`` (``TENANT_<name>_URL``)."""
    return world.database(f"tenant-{name}", sql, env=f"TENANT_{name}_URL")


def approve(world: World, target: str, *options: str) -> str:
    done = world.seshat(
        "approve",
        target,
        *options,
        "--yes",
        "--repo",
        world.remote.work_dir,
        "--key",
        world.alice.private_key,
    )
    assert done.returncode == 0, done.stderr
    world.remote.commit_all(f"approve {target}")
    return done.stdout


def state(world: World, name: str) -> dict[str, Any]:
    """The status a status file of ``shop/<name>`` records."""
    found = world.status(name)["status"]
    assert isinstance(found, dict)
    return found


def fleet_plan(world: World, member: str) -> str:
    plan = state(world, f"tenants/{member}")["plan"]
    return str(plan["fleetPlan"])


def test_one_approval_applies_to_every_identical_member_and_a_drifted_one_waits(
    world: World,
) -> None:
    layout = world.artifact("tenants-v1", V1)
    names = ["t1", "t2", "t3", "t4"]
    databases = {name: tenant(world, name) for name in names}
    # t4 drifted: it has the table without its column, so its plan only adds the column.
    databases["t4"] = tenant(world, "t4", "CREATE TABLE accounts (id INTEGER PRIMARY KEY);")
    world.remote.write_file("databases/tenants.yaml", fleet_yaml(layout, listed(*names)))
    world.remote.commit_all("declare the tenants fleet")

    verdicts = world.reconcile()
    assert verdicts == {f"shop/tenants/{n}": "AwaitingApproval/AwaitingApproval" for n in names}
    shared = {fleet_plan(world, n) for n in ("t1", "t2", "t3")}
    assert len(shared) == 1  # identical members share one fleet plan...
    [plan] = shared
    assert fleet_plan(world, "t4") != plan  # ...and the drifted one has its own
    # Their own plan ids differ (each binds its uid and database); the fleet plan does not.
    ids = {state(world, f"tenants/{n}")["plan"]["id"] for n in names}
    assert len(ids) == 4

    # The fleet's status: the distinct plans, the members each covers, their approval state.
    fleet = state(world, "tenants")
    assert fleet["phase"] == "AwaitingApproval"
    assert [(p["id"], p["names"], p["approved"]) for p in fleet["plans"]] == [
        (plan, ["t1", "t2", "t3"], False),
        (fleet_plan(world, "t4"), ["t4"], False),
    ]
    # What people see: the fleet as one row, its members as a table, a member's plan.
    remote = world.remote.remote_url
    overview = world.seshat("status", "--repo", remote).stdout
    assert "shop/tenants" in overview and "[----------] 0/4 InSync" in overview
    assert "shop/tenants/t1" not in overview
    members = world.seshat("status", "shop/tenants", "--repo", remote).stdout
    assert f"fleet plan {plan}: awaiting approval, 3 member(s): t1, t2, t3" in members
    assert "shop/tenants/t4" in members and "AwaitingApproval" in members
    shown = world.seshat("plan", "show", "shop/tenants/t1", "--repo", remote).stdout
    assert f"fleet plan   {plan}" in shown and "CREATE TABLE accounts" in shown

    # One review for the fleet, listing each distinct plan with the members it covers.
    review = world.show("seshat/review/shop/tenants", ".seshat/reviews/shop/tenants.md")
    assert f"### Fleet plan `{plan}`: awaiting approval" in review
    assert "3 member(s): `t1, t2, t3`" in review
    assert f"seshat approve shop/tenants --plan {plan} --key" in review
    assert world.git("branch", "--list", "seshat/review/shop/tenants/*") == ""

    # NAMESPACE/FLEET lists the distinct plans and approves nothing while there are two.
    several = world.seshat(
        "approve", "shop/tenants", "--yes", "--repo", world.remote.work_dir,
        "--key", world.alice.private_key,
    )  # fmt: skip
    assert several.returncode == 2
    assert f"fleet plan {plan}: 3 member(s): t1, t2, t3" in several.stdout
    assert "2 distinct plans wait" in several.stderr

    # One approval, through one member, covers every member sharing its plan.
    said = approve(world, "shop/tenants/t2")
    assert f"fleet plan  {plan}" in said
    assert world.reconcile() == {
        "shop/tenants/t1": "InSync/InSync",
        "shop/tenants/t2": "InSync/InSync",
        "shop/tenants/t3": "InSync/InSync",
        "shop/tenants/t4": "AwaitingApproval/AwaitingApproval",
    }
    for name in ("t1", "t2", "t3"):
        assert tables(databases[name]) == ["accounts"]
    assert _columns(databases["t4"]) == ["id"]  # waits for its own approval
    t4 = state(world, "tenants/t4")
    assert t4["rejectedApprovals"][0]["reason"] == "stale_plan"

    # Now only t4's plan waits: NAMESPACE/FLEET approves it.
    approve(world, "shop/tenants")
    assert world.reconcile()["shop/tenants/t4"] == "InSync/InSync"
    assert _columns(databases["t4"]) == ["id", "name"]


def _columns(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    names = [row[1] for row in conn.execute("PRAGMA table_info(accounts)")]
    conn.close()
    return names


def test_a_blocked_canary_halts_the_next_step_until_a_resume_commit(world: World) -> None:
    layout = world.artifact("tenants-v1", V1)
    # The canary cannot converge without dropping a table: Blocked, so the rollout halts.
    canary = tenant(world, "c1", "CREATE TABLE legacy (id INTEGER);")
    rest = {name: tenant(world, name) for name in ("t2", "t3")}
    members = listed("c1", "t2", "t3", wave={"c1": "canary"})
    steps = '[{match: {wave: canary}, maxParallel: 1}, {maxParallel: "50%"}]'
    world.remote.write_file(
        "databases/tenants.yaml", fleet_yaml(layout, members, steps=steps, apply="Always")
    )
    world.remote.commit_all("declare the tenants fleet in two steps")

    verdicts = world.reconcile()
    assert verdicts == {
        "shop/tenants/c1": "Blocked/DestructiveChangesDisallowed",
        "shop/tenants/t2": "Pending/RolloutWaiting",
        "shop/tenants/t3": "Pending/RolloutWaiting",
    }
    assert [tables(path) for path in rest.values()] == [[], []]  # nothing applied
    # The later step's members planned, and say what they would do and why they wait.
    waiting = state(world, "tenants/t2")
    assert waiting["plan"]["fleetPlan"]
    assert "is halted at step 1: shop/tenants/c1 is Blocked" in str(waiting["conditions"])
    fleet = state(world, "tenants")
    assert fleet["phase"] == "Halted"
    assert fleet["attention"][0]["member"] == "c1"
    assert [s["state"] for s in fleet["steps"]] == ["Halted", "Waiting"]
    token = str(fleet["resume"])
    assert f"commit spec.rollout.resume: {token}" in str(fleet["message"])

    # A person commits the resume the status names: the next step goes on without c1.
    world.remote.write_file(
        "databases/tenants.yaml",
        fleet_yaml(layout, members, steps=steps, apply="Always", resume=token),
    )
    world.remote.commit_all("resume the tenants rollout past c1")
    assert world.reconcile() == {
        "shop/tenants/c1": "Blocked/DestructiveChangesDisallowed",
        "shop/tenants/t2": "InSync/InSync",
        "shop/tenants/t3": "InSync/InSync",
    }
    assert [tables(path) for path in rest.values()] == [["accounts"], ["accounts"]]
    assert tables(canary) == ["legacy"]
    fleet = state(world, "tenants")
    assert fleet["phases"] == {"Blocked": 1, "InSync": 2}
    assert [s["state"] for s in fleet["steps"]] == ["Done", "Done"]


def test_members_joining_and_leaving_the_members_file(world: World) -> None:
    layout = world.artifact("tenants-v1", V1)
    databases = {name: tenant(world, name) for name in ("t1", "t2", "t3")}
    world.remote.write_file("fleets/tenants.yaml", "- {name: t1}\n- {name: t2}\n")
    world.remote.write_file(
        "databases/tenants.yaml", fleet_yaml(layout, "    fromFile: fleets/tenants.yaml")
    )
    world.remote.commit_all("declare the tenants fleet")
    assert world.reconcile() == {
        "shop/tenants/t1": "AwaitingApproval/AwaitingApproval",
        "shop/tenants/t2": "AwaitingApproval/AwaitingApproval",
    }
    before = databases["t2"].read_bytes()

    world.remote.write_file("fleets/tenants.yaml", "- {name: t1}\n- {name: t3}\n")
    world.remote.commit_all("t2 leaves, t3 joins")
    assert world.reconcile() == {
        "shop/tenants/t1": "AwaitingApproval/AwaitingApproval",
        "shop/tenants/t3": "AwaitingApproval/AwaitingApproval",  # planned on the next pass
    }
    gone = state(world, "tenants/t2")
    assert gone["phase"] == "Suspended"
    assert "no longer a member of fleet shop/tenants" in str(gone["conditions"])
    assert databases["t2"].read_bytes() == before  # its database is never touched
    assert state(world, "tenants")["left"] == ["t2"]
    # Marked once: the next pass changes nothing on the status branch.
    commits = len(world.status_log())
    world.reconcile()
    assert len(world.status_log()) == commits
