"""Fleets end to end on real components (Git with a bare remote, signed OCI layouts, SQLite
and PostgreSQL, the real seshat-runner, SSH-signed approvals): one approval per distinct
plan, rollout steps, members joining and leaving."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.postgres import PostgresDatabase, PostgresServer, temporary_postgres_database
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


def test_one_approval_of_the_fleet_applies_to_twenty_identical_members(world: World) -> None:
    layout = world.artifact("tenants-v1", V1)
    # Twenty tenants with the same schema, the table without its column: one distinct plan.
    names = [f"t{n:02d}" for n in range(1, 21)]
    old = "CREATE TABLE accounts (id INTEGER PRIMARY KEY);"
    databases = {name: tenant(world, name, old) for name in names}
    world.remote.write_file("databases/tenants.yaml", fleet_yaml(layout, listed(*names)))
    world.remote.commit_all("declare the tenants fleet")

    commits = len(world.status_log())
    waiting = world.reconcile()
    assert waiting == {f"shop/tenants/{n}": "AwaitingApproval/AwaitingApproval" for n in names}
    # The pass wrote the twenty members' statuses and the fleet's in its one status commit.
    assert world.status_log()[: len(world.status_log()) - commits] == [
        "seshat: 21 resources changed"
    ]
    [plan] = state(world, "tenants")["plans"]
    assert (plan["members"], plan["approved"]) == (20, False)

    # One approval, of the fleet's only distinct plan, and one pass later all twenty applied.
    said = approve(world, "shop/tenants")
    assert f"fleet plan {plan['id']}: 20 member(s): t01, t02," in said
    assert "and 10 more" in said
    hexa = str(plan["id"]).removeprefix("sha256:")
    assert world.remote.work_dir.joinpath(f"approvals/shop/tenants/{hexa}.yaml").is_file()
    start = world.git("rev-parse", "refs/heads/seshat/status").strip()
    assert world.reconcile() == {f"shop/tenants/{n}": "InSync/InSync" for n in names}
    assert all(_columns(databases[n]) == ["id", "name"] for n in names)
    # Each member applied once (one dispatch marker each), spending its own use of the approval.
    history = {n: world.phases(f"tenants/{n}") for n in names}
    assert history == {n: ["InSync", "Applying", "AwaitingApproval"] for n in names}
    fleet = state(world, "tenants")
    assert (fleet["phase"], fleet["members"], fleet["phases"]) == ("InSync", 20, {"InSync": 20})
    assert [(s["members"], s["inSync"], s["state"]) for s in fleet["steps"]] == [(20, 20, "Done")]
    # Beside the dispatch markers, the fleet's status changed once in that pass: in its last
    # commit (docs/reconciler.md, "One commit per pass").
    since = f"{start}..refs/heads/seshat/status"
    fleet_commits = world.git("log", "--format=%H", since, "--", "status/shop/tenants.yaml")
    assert fleet_commits.split() == [world.git("rev-parse", "refs/heads/seshat/status").strip()]


@pytest.fixture
def three_postgres_databases(
    postgres_server: PostgresServer,
) -> Iterator[list[PostgresDatabase]]:
    """Three fresh databases on the session's PostgreSQL server, dropped afterwards."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(temporary_postgres_database(postgres_server)) for _ in "abc"]


def _pg_schema(database: PostgresDatabase) -> tuple[list[str], list[str]]:
    """The columns of ``accounts`` and the indexes of the ``public`` schema, as the catalog
    says."""
    with database.connect() as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name = 'accounts' ORDER BY ordinal_position"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname"
        ).fetchall()
    return [str(c) for (c,) in columns], [str(i) for (i,) in indexes]


def test_identical_postgresql_members_share_a_fleet_plan_and_a_drifted_one_waits_for_its_own(
    world: World, three_postgres_databases: list[PostgresDatabase]
) -> None:
    layout = world.artifact("tenants-v1", V1)
    names = ["p1", "p2", "p3"]
    databases = dict(zip(names, three_postgres_databases, strict=True))
    for name, database in databases.items():
        with database.connect_as_app() as conn:
            conn.execute("CREATE TABLE accounts (id integer PRIMARY KEY)")
        world.monkeypatch.setenv(f"TENANT_{name}_URL", database.url_with_password)
    # p3 drifted: someone added an index by hand.
    with databases["p3"].connect_as_app() as conn:
        conn.execute("CREATE INDEX accounts_by_hand ON accounts (id)")
    world.remote.write_file(
        "databases/tenants.yaml", fleet_yaml(layout, listed(*names), engine="postgresql")
    )
    world.remote.commit_all("declare the tenants fleet on PostgreSQL")

    assert world.reconcile() == {
        f"shop/tenants/{n}": "AwaitingApproval/AwaitingApproval" for n in names
    }
    shared = fleet_plan(world, "p1")
    assert fleet_plan(world, "p2") == shared  # two databases, one fleet plan
    drifted = fleet_plan(world, "p3")
    assert drifted != shared
    fleet = state(world, "tenants")
    assert [(p["id"], p["names"]) for p in fleet["plans"]] == [
        (shared, ["p1", "p2"]),
        (drifted, ["p3"]),
    ]

    # One approval of the shared fleet plan applies the two; the drifted one waits.
    approve(world, "shop/tenants", "--plan", shared)
    assert world.reconcile() == {
        "shop/tenants/p1": "InSync/InSync",
        "shop/tenants/p2": "InSync/InSync",
        "shop/tenants/p3": "AwaitingApproval/AwaitingApproval",
    }
    for name in ("p1", "p2"):
        assert _pg_schema(databases[name]) == (["id", "name"], ["accounts_pkey"])
    assert _pg_schema(databases["p3"]) == (["id"], ["accounts_by_hand", "accounts_pkey"])
    # The shared plan's approval does not authorize it: another plan, and it says so.
    [rejected] = state(world, "tenants/p3")["rejectedApprovals"]
    assert rejected["file"] == f"approvals/shop/tenants/{shared.removeprefix('sha256:')}.yaml"
    assert rejected["reason"] == "stale_plan"
    assert f"the current plan is {drifted}" in rejected["detail"]

    # Its own approval, through the member (its fleet plan's), applies it.
    assert f"fleet plan  {drifted}" in approve(world, "shop/tenants/p3")
    assert world.reconcile()["shop/tenants/p3"] == "InSync/InSync"
    assert _pg_schema(databases["p3"]) == (["id", "name"], ["accounts_pkey"])
    assert state(world, "tenants")["phases"] == {"InSync": 3}


def test_approve_fleet_reads_the_fleet_status_but_believes_it_only_when_a_member_agrees(
    world: World,
) -> None:
    """``seshat approve NS/FLEET`` reads the distinct plans from the fleet's status file (one
    read, not one per member), checking one member of each waiting plan. The status branch
    is writable by others: a fleet status naming a plan no member waits on is not believed,
    and the members' own statuses decide what is approved."""
    layout = world.artifact("tenants-v1", V1)
    names = ["t1", "t2", "t3"]
    for name in names:
        tenant(world, name)
    world.remote.write_file("databases/tenants.yaml", fleet_yaml(layout, listed(*names)))
    world.remote.commit_all("declare the tenants fleet")
    world.reconcile()
    plan = fleet_plan(world, "t1")

    fake = "sha256:" + "0" * 64
    with world.tamper("seshat/status", "a fleet status naming another plan") as folder:
        path = folder / "status/shop/tenants.yaml"
        path.write_text(path.read_text().replace(plan, fake))
    assert fake in world.show("seshat/status", "status/shop/tenants.yaml")
    said = approve(world, "shop/tenants")
    assert f"fleet plan {plan}: 3 member(s): t1, t2, t3" in said
    assert fake not in said
    hexa = plan.removeprefix("sha256:")
    assert world.remote.work_dir.joinpath(f"approvals/shop/tenants/{hexa}.yaml").is_file()
    assert world.reconcile() == {f"shop/tenants/{n}": "InSync/InSync" for n in names}
