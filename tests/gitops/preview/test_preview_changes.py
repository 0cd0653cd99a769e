"""``seshat preview`` on real components: which resources a pull request changes, the
verdict a merge would reach for each, and that nothing is written anywhere
(gitops/preview/)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from harness.reconcile_world import World, migration_yaml, schema_yaml

ORDERS_V1 = "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER);\n"


def _branch(world: World, name: str = "pr") -> None:
    """Start the pull request's branch from main in the author's clone (fetching the status
    branch the controller pushed, as a CI checkout with full history has it)."""
    repo = world.remote.work
    repo.git.fetch("--quiet", "origin")
    repo.git.checkout("--quiet", "-B", name, "main")


def _commit(world: World, message: str) -> None:
    world.remote.work.git.add("--all")
    world.remote.work.git.commit("--quiet", "--message", message)


def _preview(world: World, *args: str) -> tuple[int, dict[str, Any], str]:
    done = world.seshat(
        "preview",
        "--repo",
        world.remote.work_dir,
        "--base",
        "main",
        "--head",
        "pr",
        "--format",
        "json",
        *args,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def _orders(world: World, sql: str = "", apply: str = "OnApproval", extra: str = "") -> Path:
    """shop/orders declared on main and reconciled once: its status records the digest."""
    layout = world.artifact("orders-v1", ORDERS_V1)
    world.database("orders", sql)
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, apply=apply, extra=extra)
    )
    world.remote.commit_all("declare orders")
    world.reconcile()
    return layout


def _by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in document["resources"]}


def test_an_unrelated_file_changes_no_resource(world: World) -> None:
    _orders(world)
    _branch(world)
    world.remote.write_file("README.md", "# shop\n")
    _commit(world, "docs")

    status, document, _ = _preview(world)

    assert status == 0
    assert document["resources"] == []


def test_a_declaration_edit_shows_the_fields_and_the_plan_a_merge_reaches(world: World) -> None:
    layout = _orders(world)
    _branch(world)
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, extra=", lockTimeout: 7s")
    )
    _commit(world, "a longer lock timeout")

    status, document, _ = _preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert orders["outcome"] == "Plan" and orders["reason"] == "AwaitingApproval"
    assert orders["fields"] == [
        {"field": "spec.policy.lockTimeout", "base": '"30s"', "head": '"7s"'}
    ]
    plan = orders["plan"]
    assert plan["approvals"] == 1 and plan["carriesOver"] is True
    assert "CREATE TABLE orders" in plan["sql"]

    # Merged as is: the reconciler records exactly the plan the preview showed.
    world.remote.work.git.checkout("--quiet", "main")
    world.remote.work.git.merge("--quiet", "--no-ff", "--no-edit", "pr")
    world.remote.work.git.push("--quiet", "origin", "main")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert world.status("orders")["status"]["plan"]["id"] == plan["id"]  # type: ignore[index]
