"""``seshat run`` SIGKILLed anywhere, again and again: the promises hold.

Twelve kills (``SESHAT_KILLS=36`` for a longer run than the suite's budget allows) at fixed
pseudo-random moments (a seeded generator) of a controller running two workers over three
SQLite databases: a schema applied automatically (an index on 20,000 rows), a migration
directory applied automatically (each version records itself in a table, so a version run
twice shows twice), and a schema whose plan nobody approves. Between kills, a commit touches
every declaration so each start has passes to run. Each start finds what the previous one
left: Git locks, a lease, runner records, an uncertain run.

Then, with no more kills, passes run until every resource holds a verdict the docs name
(docs/reconciler.md, "Crash windows"); a person approves or acknowledges only where the docs
say a person must, and everything converges. Asserted throughout: no migration ran twice,
nothing was applied without an approval (or ``apply: Always``), no plan was dispatched
twice on one approval, and no controller printed a traceback.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from harness.reconcile_world import World, migration_yaml, schema_yaml, tables

from gitops.writeback.ledger import RECORD_TRAILER

SESHAT = str(Path(sys.executable).parent / "seshat")
KILLS = int(os.environ.get("SESHAT_KILLS", "12"))
FAST = ["--tick", "1", "--poll", "1", "--workers", "2", "-v"]  # -v: what each start did
MIGRATIONS = {
    "1_runs.sql": "CREATE TABLE runs (version TEXT NOT NULL);\nINSERT INTO runs VALUES ('1');\n",
    "2_second.sql": "INSERT INTO runs VALUES ('2');\n",
    "3_third.sql": "INSERT INTO runs VALUES ('3');\n",
}
ORDERS = (
    "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
    "CREATE INDEX items_name ON items (name);\n"
)
# What a resource may be left as after the kills, by the docs: InSync, or waiting for a
# person where an Apply's outcome was uncertain (a schema needs a new approval; a migration
# run that may have stopped midway needs an acknowledgment unless the history settles it).
DOCUMENTED = {
    "shop/orders": {"InSync/InSync", "AwaitingApproval/AwaitingApproval"},
    "shop/ledger": {"InSync/InSync", "Blocked/RunUnresolved"},
    "shop/shadow": {"AwaitingApproval/AwaitingApproval"},
}


def _world(world: World) -> dict[str, Path]:
    orders = world.database(
        "orders", "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    )
    with sqlite3.connect(orders) as conn:
        conn.executemany(
            "INSERT INTO items (name) VALUES (?)", ((f"item-{i:08d}",) for i in range(20_000))
        )
    ledger = world.database("ledger")
    shadow = world.database("shadow")
    world.remote.write_file(
        "databases/orders/schema.yaml",
        schema_yaml("orders", world.artifact("orders", ORDERS), apply="Always"),
    )
    world.remote.write_file(
        "databases/ledger/migrations.yaml",
        migration_yaml("ledger", world.migrations("ledger", MIGRATIONS), apply="Always"),
    )
    world.remote.write_file(
        "databases/shadow/schema.yaml",
        schema_yaml("shadow", world.artifact("shadow", "CREATE TABLE shadow (id INTEGER);\n")),
    )
    world.remote.commit_all("declare three databases")
    return {"orders": orders, "ledger": ledger, "shadow": shadow}


def _run_and_kill(world: World, delay: float, log: Path) -> None:
    with log.open("ab") as output:
        controller = subprocess.Popen(
            [SESHAT, "run", "--repo", world.remote.remote_url, "--work", str(world.work), *FAST],
            stdout=output,
            stderr=output,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # what it said before each kill
            start_new_session=True,
        )
        try:
            time.sleep(delay)
        finally:
            os.kill(controller.pid, signal.SIGKILL)  # the controller alone, by its PID
            controller.wait()


def _records(world: World) -> list[dict[str, object]]:
    return [
        json.loads(line.removeprefix(f"{RECORD_TRAILER}: "))
        for message in world.status_messages()
        for line in message.splitlines()
        if line.startswith(f"{RECORD_TRAILER}: ")
    ]


def _assert_promises(world: World, databases: dict[str, Path]) -> None:
    if "runs" in tables(databases["ledger"]):
        with sqlite3.connect(databases["ledger"]) as conn:
            runs = Counter(row[0] for row in conn.execute("SELECT version FROM runs"))
        assert all(count == 1 for count in runs.values()), f"a migration ran twice: {runs}"
    assert tables(databases["shadow"]) == []  # never approved: never applied
    dispatched = [r for r in _records(world) if r["type"] == "dispatched"]
    ids = Counter(str(r["operationId"]) for r in dispatched)
    assert all(n == 1 for n in ids.values()), f"an operation dispatched twice: {ids}"
    spent = Counter((r["resource"], r["planId"], r.get("approval")) for r in dispatched)
    assert all(n == 1 for n in spent.values()), f"a plan dispatched twice on one go: {spent}"
    assert not any("shop/shadow" in str(r["resource"]) for r in dispatched)


def test_sigkill_anywhere_keeps_every_promise(world: World) -> None:
    databases = _world(world)
    log = world.tmp / "controllers.log"
    moments = random.Random(33)
    for kill in range(KILLS):
        _run_and_kill(world, moments.uniform(0.3, 3.0), log)
        _assert_promises(world, databases)
        if kill % 3 == 2:  # a push touching every declaration: each is due at the next start
            world.remote.write_file("databases/touch.txt", f"{kill}\n")
            for name in ("orders/schema.yaml", "ledger/migrations.yaml", "shadow/schema.yaml"):
                path = world.remote.work_dir / "databases" / name
                path.write_text(path.read_text().replace("namespace: shop}", "namespace: shop }"))
            world.remote.commit_all(f"touch after kill {kill}")
    assert "Traceback" not in log.read_text(errors="replace")

    # No more kills: a start settles what the last one left, and a second changes nothing.
    verdicts = world.reconcile(workers=2)
    assert world.reconcile(workers=2) == verdicts
    for key, verdict in verdicts.items():
        assert verdict in DOCUMENTED[key], (key, verdict)
    _assert_promises(world, databases)

    # A person acts only where the docs say one must; then everything converges.
    for _ in range(4):
        if verdicts["shop/orders"] == verdicts["shop/ledger"] == "InSync/InSync":
            break
        for name in ("orders", "ledger"):
            verdict = verdicts[f"shop/{name}"]
            status = world.status(name)["status"]
            assert isinstance(status, dict)
            if verdict == "AwaitingApproval/AwaitingApproval":
                world.approve(name, str(status["plan"]["id"]))
            elif verdict == "Blocked/RunUnresolved":
                world.acknowledge(name, str(status["unresolvedRun"]["operationId"]))
        verdicts = world.reconcile(workers=2)
    assert verdicts == {
        "shop/orders": "InSync/InSync",
        "shop/ledger": "InSync/InSync",
        "shop/shadow": "AwaitingApproval/AwaitingApproval",
    }
    _assert_promises(world, databases)
    with sqlite3.connect(databases["ledger"]) as conn:
        assert sorted(row[0] for row in conn.execute("SELECT version FROM runs")) == ["1", "2", "3"]
    assert list((world.work / "operations" / "runners").glob("*.json")) == []
