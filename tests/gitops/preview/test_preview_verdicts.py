"""``seshat preview``: each verdict a merge could reach, and the exit status it maps to
(0 plan or converge, 1 Blocked, 2 the preview could not run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.preview_pr import ORDERS_V1, by_name, commit, declare_orders, open_branch, preview
from harness.reconcile_world import World, migration_yaml, schema_yaml


def _edit(world: World, layout: Path, apply: str = "OnApproval", extra: str = "") -> None:
    """The pull request rewrites shop/orders' declaration."""
    text = schema_yaml("orders", layout, apply=apply, extra=extra)
    world.remote.write_file("databases/orders/schema.yaml", text)
    commit(world, "edit orders")


def test_a_database_that_already_matches_is_in_sync(world: World) -> None:
    layout = declare_orders(world, sql=ORDERS_V1)
    open_branch(world)
    _edit(world, layout, extra=", lockTimeout: 7s")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert (orders["outcome"], orders["reason"], orders["plan"]) == ("InSync", "InSync", None)


def test_a_destructive_change_not_allowed_is_blocked(world: World) -> None:
    layout = declare_orders(world, sql=ORDERS_V1 + "CREATE TABLE legacy (id INTEGER);\n")
    open_branch(world)
    _edit(world, layout, extra=", lockTimeout: 7s")

    status, document, _ = preview(world)

    assert status == 1
    [orders] = document["resources"]
    assert (orders["outcome"], orders["reason"]) == ("Blocked", "DestructiveChangesDisallowed")


def test_an_allowed_destructive_plan_needs_the_destructive_quorum(world: World) -> None:
    layout = declare_orders(world, sql=ORDERS_V1 + "CREATE TABLE legacy (id INTEGER);\n")
    policies = world.remote.work_dir / "policies" / "shop.yaml"
    policies.write_text(
        policies.read_text().replace(
            "    - approvers: {allowedSigners: policies/allowed_signers}",
            "    - approvers: {allowedSigners: policies/allowed_signers}\n"
            "      destructiveCount: 2",
        )
    )
    world.remote.commit_all("two approvers for destructive plans")  # on main: the base's rule
    open_branch(world)
    _edit(world, layout, extra=", allowDestructive: true")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert (orders["outcome"], orders["reason"]) == ("Plan", "AwaitingApproval")
    plan = orders["plan"]
    assert plan["destructive"] is True and plan["approvals"] == 2
    assert 'DROP TABLE "legacy"' in plan["sql"] and plan["hazards"] == {"DROP_TABLE": 1}
    assert plan["impact"] == ["DROP TABLE legacy: 0 rows (exact)"]  # measured on the base's


@pytest.mark.parametrize(
    ("apply", "expected", "status"),
    [
        ("Never", ("Blocked", "ApplyDisabled"), 1),
        ("Always", ("Plan", "ReadyToApply"), 0),
    ],
)
def test_the_apply_policy_decides_the_verdict(
    world: World, apply: str, expected: tuple[str, str], status: int
) -> None:
    layout = declare_orders(world)
    open_branch(world)
    _edit(world, layout, apply=apply)

    code, document, _ = preview(world)

    assert code == status
    [orders] = document["resources"]
    assert (orders["outcome"], orders["reason"]) == expected
    assert orders["plan"]["automatic"] is (apply == "Always")


def test_a_second_claimant_of_one_database_blocks_both(world: World) -> None:
    layout = declare_orders(world)
    open_branch(world)
    # billing names the same database reference and coordination key as orders.
    world.remote.write_file(
        "databases/billing/schema.yaml", schema_yaml("billing", layout, key="orders")
    )
    commit(world, "billing on the orders database")

    status, document, _ = preview(world)

    assert status == 1
    found = by_name(document)
    assert set(found) == {"orders", "billing"}
    assert {r["reason"] for r in found.values()} == {"RealmConflict"}
    assert found["billing"]["introduced"] is True


def test_a_suspended_resource_is_shown_suspended(world: World) -> None:
    layout = declare_orders(world)
    open_branch(world)
    text = schema_yaml("orders", layout) + "  suspend: true\n"
    world.remote.write_file("databases/orders/schema.yaml", text)
    commit(world, "suspend orders")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert orders["outcome"] == "Suspended"


def test_an_unreachable_database_means_the_preview_could_not_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = declare_orders(world)
    open_branch(world)
    _edit(world, layout, extra=", lockTimeout: 7s")
    monkeypatch.setenv("ORDERS_URL", f"sqlite:///{world.tmp}/no/such/folder/orders.db")

    status, document, _ = preview(world)

    assert status == 2
    [orders] = document["resources"]
    assert orders["outcome"] == "Failed" and orders["plan"] is None


def test_a_removed_resource_is_listed_without_a_plan_and_alone(world: World) -> None:
    layout = declare_orders(world)
    world.database("billing")
    world.remote.write_file("databases/billing/schema.yaml", schema_yaml("billing", layout))
    world.remote.commit_all("declare billing")
    open_branch(world)
    (world.remote.work_dir / "databases" / "orders" / "schema.yaml").unlink()
    commit(world, "orders is retired")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]  # billing, on another database, is not listed
    assert (orders["name"], orders["outcome"], orders["plan"]) == ("orders", "Removed", None)


def test_a_modified_applied_migration_is_blocked(world: World) -> None:
    first = {"1_items.sql": "CREATE TABLE items (id INTEGER PRIMARY KEY);\n"}
    layout = world.migrations("items-v1", first)
    world.database("items")
    world.remote.write_file(
        "databases/items/migrations.yaml", migration_yaml("items", layout, apply="Always")
    )
    world.remote.commit_all("declare items")
    assert world.reconcile() == {"shop/items": "InSync/InSync"}
    edited = world.migrations(
        "items-v2", {"1_items.sql": "CREATE TABLE items (id INTEGER PRIMARY KEY, x TEXT);\n"}
    )
    open_branch(world)
    world.remote.write_file(
        "databases/items/migrations.yaml", migration_yaml("items", edited, apply="Always")
    )
    commit(world, "edit an applied migration")

    status, document, _ = preview(world)

    assert status == 1
    [items] = document["resources"]
    assert (items["outcome"], items["reason"]) == ("Blocked", "ChecksumModified")
