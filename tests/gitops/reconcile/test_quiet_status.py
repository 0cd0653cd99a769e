"""Quiet status (issue 16, item 4), end to end on real components.

A status file changes only when something a person would care about changes; the
declarations' commit a pass read is the commit's ``Seshat-Source-Revision`` trailer, never in
the file. No commit when nothing changed.
"""

from __future__ import annotations

from harness.reconcile_world import World, schema_yaml

from gitops.writeback.commits import parse_trailers

STATUS = "seshat/status"
ORDERS = "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER);\n"
ITEMS = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n"


def _main(world: World) -> str:
    return world.git("rev-parse", "refs/heads/main").strip()


def _files(world: World, *names: str) -> dict[str, bytes]:
    return {n: world.show(STATUS, f"status/shop/{n}.yaml").encode() for n in names}


def test_a_pass_over_an_unrelated_commit_makes_no_status_commit(world: World) -> None:
    world.database("orders")
    world.database("items")
    world.remote.write_file(
        "databases/orders.yaml", schema_yaml("orders", world.artifact("o", ORDERS))
    )
    world.remote.write_file(
        "databases/items.yaml", schema_yaml("items", world.artifact("i", ITEMS), apply="Always")
    )
    world.remote.commit_all("declare orders and items")
    first = _main(world)
    verdicts = {"shop/orders": "AwaitingApproval/AwaitingApproval", "shop/items": "InSync/InSync"}
    assert world.reconcile() == verdicts
    log, files = world.status_log(), _files(world, "orders", "items")
    # The revision the pass read is the trailer of the commit that recorded it, never a file.
    assert parse_trailers(world.status_messages()[0]).source_revision == first
    for data in files.values():
        assert first.encode() not in data and b"observedRevision" not in data

    # Commits that touch nothing Seshat reads, then the same pass again: no status commit.
    world.remote.write_file("README.md", "# the shop\n")
    world.remote.commit_all("document the shop")
    world.remote.write_file("docs/notes.md", "notes\n")
    world.remote.commit_all("notes")
    assert _main(world) != first
    for _ in range(2):
        assert world.reconcile() == verdicts
        assert world.status_log() == log
        assert _files(world, "orders", "items") == files
