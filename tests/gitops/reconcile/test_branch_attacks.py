"""Seshat's own branches are untrusted input (the hardening issue, part two).

Each test plays an attacker who can push to the real bare remote (as every approver can) and
tampers with ``seshat/status`` or a review branch between passes; the controller must not
follow what it finds there, lose a safety record, or stop.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.reconcile_world import World, schema_yaml

STATUS, REVIEW = "seshat/status", "seshat/review/shop/orders"


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside everything the controller is given, with one precious file."""
    folder = Path(tempfile.mkdtemp(prefix="seshat-outside-"))
    (folder / "precious").write_text("precious\n")
    (folder / "empty").mkdir()
    yield folder
    shutil.rmtree(folder)


def _declare(world: World, layout: Path) -> None:
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare orders")


def _replace_with_link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    os.symlink(target, path)


def test_symlinks_on_the_status_and_review_branches_are_never_followed(
    world: World, outside: Path
) -> None:
    world.database("orders")
    _declare(world, world.artifact("one", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n"))
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    with world.tamper(STATUS) as tree:
        _replace_with_link(tree / "status/shop/orders.yaml", outside / "precious")
        _replace_with_link(tree / "plans/shop/orders", outside / "empty")
    with world.tamper(REVIEW) as tree:
        _replace_with_link(tree / ".seshat/reviews/shop/orders.md", outside / "precious")
    assert world.entry(STATUS, "status/shop/orders.yaml") == "120000"

    # A new artifact: a new plan, a new status, a new review text, all written again.
    _declare(world, world.artifact("two", "CREATE TABLE t (id INTEGER PRIMARY KEY, n TEXT);\n"))
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}

    assert (outside / "precious").read_text() == "precious\n"
    assert list((outside / "empty").iterdir()) == []
    # What the branches hold now are regular files written from memory.
    assert world.entry(STATUS, "status/shop/orders.yaml") == "100644"
    assert world.entry(REVIEW, ".seshat/reviews/shop/orders.md") == "100644"
    plan = str(world.status("orders")["status"]["plan"]["path"])  # type: ignore[index]
    assert world.entry(STATUS, plan) == "100644"
    assert "CREATE TABLE" not in (outside / "precious").read_text()
