"""A pull request in a reconciler world, for ``seshat preview`` tests: a branch in the
author's clone, commits on it, and the preview run as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .reconcile_world import World, schema_yaml

__all__ = ["ORDERS_V1", "by_name", "commit", "declare_orders", "open_branch", "preview"]

ORDERS_V1 = "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER);\n"


def open_branch(world: World, name: str = "pr") -> None:
    """Start the pull request's branch from main in the author's clone (fetching the status
    branch the controller pushed, as a CI checkout with full history has it)."""
    repo = world.remote.work
    repo.git.fetch("--quiet", "origin")
    repo.git.checkout("--quiet", "-B", name, "main")


def commit(world: World, message: str) -> None:
    world.remote.work.git.add("--all")
    world.remote.work.git.commit("--quiet", "--message", message)


def preview(world: World, *args: str) -> tuple[int, dict[str, Any], str]:
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


def declare_orders(world: World, sql: str = "", apply: str = "OnApproval", extra: str = "") -> Path:
    """shop/orders declared on main and reconciled once: its status records the digest."""
    layout = world.artifact("orders-v1", ORDERS_V1)
    world.database("orders", sql)
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, apply=apply, extra=extra)
    )
    world.remote.commit_all("declare orders")
    world.reconcile()
    return layout


def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in document["resources"]}
