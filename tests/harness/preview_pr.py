"""A pull request in a reconciler world, for ``seshat preview`` tests: a branch in the
author's clone, commits on it, and the preview run as a user runs it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gitops.execution.executor import EnvValue
from gitops.preview.run import PreviewReport, run_preview
from runner.protocol.messages import OperationInput

from .executors import HookedExecutor
from .reconcile_world import World, schema_yaml

__all__ = [
    "ORDERS_V1",
    "RecordingExecutor",
    "by_name",
    "commit",
    "declare_orders",
    "open_branch",
    "preview",
    "preview_recorded",
]

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


class RecordingExecutor(HookedExecutor):
    """The real local executor, noting every runner invocation: its operations and the
    names of the environment variables (credentials) it was given."""

    def __init__(self, work_dir: Path) -> None:
        super().__init__(work_dir)
        self.batches: list[tuple[tuple[str, ...], frozenset[str]]] = []

    def before(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        self.batches.append((tuple(r.operation for r in requests), frozenset(environment)))

    @property
    def operations(self) -> set[str]:
        return {operation for batch, _ in self.batches for operation in batch}

    @property
    def credentials(self) -> set[str]:
        return {name for _, names in self.batches for name in names}


def preview_recorded(world: World) -> tuple[PreviewReport, RecordingExecutor]:
    """``seshat preview`` of ``pr`` against ``main`` in this process, through a recording
    executor: the report, and what the runner was asked to do."""
    runs = len(list(world.tmp.glob("preview-ops-*")))
    executor = RecordingExecutor(world.tmp / f"preview-ops-{runs}")
    report = run_preview(world.remote.work_dir, "main", "pr", executor=executor)
    return report, executor
