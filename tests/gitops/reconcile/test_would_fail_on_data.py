"""A plan certain to fail on the rows already there is Blocked/WouldFailOnData, naming the
change and the count, and clears once the data is fixed; the figures of a plan that is
offered stand beside it on the status branch (docs/reconciler.md, "Plans that know the
data")."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from harness.reconcile_world import World, schema_yaml

LIVE = "CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT, legacy TEXT);"
DESIRED = "CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT NOT NULL);\n"


def run(database: Path, statement: str) -> None:
    with contextlib.closing(sqlite3.connect(database)) as conn, conn:
        conn.execute(statement)


def test_blocked_until_the_data_is_fixed(world: World) -> None:
    layout = world.artifact("orders-nn", DESIRED)
    database = world.database(
        "orders", LIVE + "INSERT INTO orders VALUES (1, NULL, 'x'), (2, 'b@x', NULL);"
    )
    world.remote.write_file(
        "databases/orders.yaml",
        schema_yaml("orders", layout, extra=", allowDestructive: true"),
    )
    world.remote.commit_all("declare orders")

    assert world.reconcile() == {"shop/orders": "Blocked/WouldFailOnData"}
    status = world.status("orders")["status"]
    [ready] = [c for c in status["conditions"] if c["type"] == "Ready"]  # type: ignore[index]
    assert "SET NOT NULL on orders.email: 1 rows are NULL (exact)" in ready["message"]
    assert "plan" not in status  # type: ignore[operator]  # nothing offered for approval

    review = world.show("seshat/review/shop/orders", ".seshat/reviews/shop/orders.md")
    assert "WouldFailOnData" in review and "1 rows are NULL (exact)" in review

    # Blocked refreshes like every verdict: the same data, the same verdict, no new commit.
    assert world.reconcile() == {"shop/orders": "Blocked/WouldFailOnData"}
    assert len(world.status_log()) == 1

    run(database, "UPDATE orders SET email = 'a@x' WHERE email IS NULL")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    plan = world.status("orders")["status"]["plan"]  # type: ignore[index]
    impact = plan["impact"]
    assert impact["mode"] == "estimate"
    assert impact["none"] >= 1 and impact["counted"] >= 1  # NULLs none; a dropped value
    figures = json.loads(world.show("seshat/status", impact["path"]))
    assert figures["plan"] == plan["id"]
    assert "SET NOT NULL on orders.email: 0 rows are NULL (exact)" in figures["lines"]
    assert "DROP COLUMN orders.legacy: 1 non-NULL values (exact)" in figures["lines"]

    # Shown where people decide: seshat plan show, seshat status, the review.
    url = world.remote.remote_url
    shown = world.seshat("plan", "show", "shop/orders", "--repo", url)
    assert shown.returncode == 0, shown.stderr
    assert "impact       SET NOT NULL on orders.email: 0 rows are NULL (exact)" in shown.stdout
    assert "impact       DROP COLUMN orders.legacy: 1 non-NULL values (exact)" in shown.stdout
    listed = world.seshat("status", "--repo", url)
    assert "impact: 2 counted" in listed.stdout  # a size, a dropped value, listed.stdout
    review = world.show("seshat/review/shop/orders", ".seshat/reviews/shop/orders.md")
    assert "**Impact**" in review and "DROP COLUMN orders.legacy: 1 non-NULL" in review

    # A figure that moves keeps the plan id: the approval in hand still names the plan.
    commits = len(world.status_log())
    run(database, "INSERT INTO orders VALUES (3, 'c@x', 'y')")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    again = world.status("orders")["status"]["plan"]  # type: ignore[index]
    assert again["id"] == plan["id"]
    assert len(world.status_log()) == commits  # the same aggregates: nothing rewritten
