"""``seshat preview`` writes nothing and reaches only the database the base declares: no
status commit, no database change, no approval consumed; the base's target and its
``previewUrl``, never the head's (gitops/preview/)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from harness.preview_pr import ORDERS_V1, commit, declare_orders, open_branch, preview
from harness.reconcile_world import World, migration_yaml, schema_yaml, tables

from gitops.preview.render import NEW_RESOURCE, NON_BINDING


def _snapshot(world: World, database: Path) -> dict[str, str]:
    work = world.remote.work.git
    return {
        "remote refs": world.git("for-each-ref"),
        "clone refs": work.for_each_ref(),
        "clone head": work.rev_parse("HEAD"),
        "clone status": work.status("--porcelain", "--ignored"),
        "clone worktrees": work.worktree("list", "--porcelain"),
        "database": hashlib.sha256(database.read_bytes()).hexdigest(),
        "controller": "\n".join(sorted(p.name for p in world.work.iterdir())),
    }


def test_nothing_is_written_and_the_approval_stays_unconsumed(world: World) -> None:
    declare_orders(world)
    plan_id = world.status("orders")["status"]["plan"]["id"]  # type: ignore[index]
    database = world.tmp / "orders.db"
    open_branch(world)
    # The pull request carries the approval of the plan the controller recorded.
    signed = world.seshat(
        "approve",
        "shop/orders",
        "--plan",
        plan_id,
        "--repo",
        world.remote.work_dir,
        "--key",
        world.alice.private_key,
    )
    assert signed.returncode == 0, signed.stderr
    commit(world, "approve orders")
    before = _snapshot(world, database)

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert orders["changes"] == ["approvals of this resource changed"]
    assert orders["plan"]["id"] == plan_id  # same database, same inputs: the same id
    assert _snapshot(world, database) == before
    assert tables(database) == []

    # Merged: the approval was not consumed by the preview, so the Apply runs.
    world.remote.work.git.checkout("--quiet", "main")
    world.remote.work.git.merge("--quiet", "--ff-only", "pr")
    world.remote.work.git.push("--quiet", "origin", "main")
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    assert tables(database) == ["orders"]


@pytest.mark.parametrize(
    "change",
    [
        ("fromEnv: ORDERS_URL", "fromEnv: ELSEWHERE_URL"),
        (
            "coordinationKey: orders",
            "coordinationKey: orders, previewUrl: {fromEnv: ELSEWHERE_URL}",
        ),
    ],
    ids=["url", "previewUrl"],
)
def test_a_head_that_changes_the_target_is_shown_without_a_plan(
    world: World, monkeypatch: pytest.MonkeyPatch, change: tuple[str, str]
) -> None:
    layout = declare_orders(world)
    elsewhere = world.tmp / "elsewhere.db"
    monkeypatch.setenv("ELSEWHERE_URL", f"sqlite:///{elsewhere}")
    open_branch(world)
    text = schema_yaml("orders", layout).replace(*change)
    world.remote.write_file("databases/orders/schema.yaml", text)
    commit(world, "point orders elsewhere")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert (orders["outcome"], orders["plan"]) == ("TargetChanged", None)
    assert any(f["field"].startswith("spec.target.") for f in orders["fields"])
    assert not elsewhere.exists()  # the head's database was never opened


def test_the_base_preview_url_is_the_credential_used(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = world.artifact("orders-v1", ORDERS_V1)
    database = world.database("orders")
    monkeypatch.setenv("ORDERS_RO_URL", f"sqlite:///{database}")
    monkeypatch.setenv("ORDERS_URL", f"sqlite:///{world.tmp}/writer/is/not/here.db")
    with_preview = schema_yaml("orders", layout).replace(
        "coordinationKey: orders", "coordinationKey: orders, previewUrl: {fromEnv: ORDERS_RO_URL}"
    )
    world.remote.write_file("databases/orders/schema.yaml", with_preview)
    world.remote.commit_all("declare orders with a read-only preview credential")
    open_branch(world)
    world.remote.write_file(
        "databases/orders/schema.yaml", with_preview.replace("apply: OnApproval", "apply: Never")
    )
    commit(world, "never apply")

    status, document, _ = preview(world)

    assert status == 1  # apply: Never is Blocked, and the plan was made through ORDERS_RO_URL
    [orders] = document["resources"]
    assert (orders["outcome"], orders["reason"]) == ("Blocked", "ApplyDisabled")
    assert "CREATE TABLE orders" in orders["plan"]["sql"]


def test_a_new_resource_is_previewed_only_on_a_database_the_base_names(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = declare_orders(world)
    billing_db = world.tmp / "billing.db"
    monkeypatch.setenv("BILLING_URL", f"sqlite:///{billing_db}")
    open_branch(world)
    # audit shares the orders database reference (under its own coordination key);
    # billing names a database reference the base declares nowhere.
    audit = schema_yaml("audit", layout).replace("AUDIT_URL", "ORDERS_URL")
    world.remote.write_file("databases/audit/schema.yaml", audit)
    world.remote.write_file("databases/billing/schema.yaml", schema_yaml("billing", layout))
    commit(world, "audit and billing")

    status, document, _ = preview(world)
    markdown = world.seshat(
        "preview", "--repo", world.remote.work_dir, "--base", "main", "--head", "pr"
    )

    assert status == 0
    found = {r["name"]: r for r in document["resources"]}
    assert set(found) == {"audit", "billing"}  # orders is unchanged: not listed
    assert found["audit"]["introduced"] and found["audit"]["plan"]["carriesOver"] is False
    assert found["billing"]["outcome"] == "NotPreviewed" and found["billing"]["plan"] is None
    assert not billing_db.exists()
    assert markdown.returncode == 0, markdown.stderr
    assert NEW_RESOURCE in markdown.stdout and NON_BINDING in markdown.stdout
    assert found["audit"]["plan"]["id"] in markdown.stdout


def test_a_migration_preview_lists_the_files_that_would_run(world: World) -> None:
    first = {"1_items.sql": "CREATE TABLE items (id INTEGER PRIMARY KEY);\n"}
    layout = world.migrations("items-v1", first)
    database = world.database("items")
    world.remote.write_file("databases/items/migrations.yaml", migration_yaml("items", layout))
    world.remote.commit_all("declare items")
    world.reconcile()
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    second = world.migrations(
        "items-v2", {**first, "2_name.sql": "ALTER TABLE items ADD name TEXT;\n"}
    )
    open_branch(world)
    world.remote.write_file("databases/items/migrations.yaml", migration_yaml("items", second))
    commit(world, "items v2")

    status, document, _ = preview(world)

    assert status == 0
    [items] = document["resources"]
    assert (items["outcome"], items["reason"]) == ("Plan", "AwaitingApproval")
    plan = items["plan"]
    assert [f["version"] for f in plan["files"]] == ["1", "2"]  # nothing has run yet
    assert [f["name"] for f in plan["files"]] == ["1_items.sql", "2_name.sql"]
    assert plan["history"] == "ready" and plan["sql"] == ""
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_schema").fetchone() == (0,)
    conn.close()
