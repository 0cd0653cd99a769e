"""``seshat run``: passes on a schedule, a resource reconciled only when due, SIGTERM exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.reconcile_world import World, schema_yaml, tables

from gitops.reconcile.passes import run_pass


def test_only_due_resources_are_reconciled(world: World) -> None:
    layout = world.artifact("due", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    world.database("orders")
    world.remote.write_file("databases/orders.yaml", schema_yaml("orders", layout, apply="Always"))
    world.remote.commit_all("declare")
    first = run_pass(world.remote.remote_url, world.work, due_only=True)
    assert first.phases == {"shop/orders": "InSync"}
    second = run_pass(world.remote.remote_url, world.work, due_only=True)
    assert second.phases == {}  # interval (10 minutes by default) not yet elapsed
    assert run_pass(world.remote.remote_url, world.work).phases == {"shop/orders": "InSync"}


def test_seshat_run_reconciles_and_stops_on_sigterm(world: World) -> None:
    layout = world.artifact("run", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file("databases/orders.yaml", schema_yaml("orders", layout, apply="Always"))
    world.remote.commit_all("declare")
    seshat = Path(sys.executable).parent / "seshat"
    process = subprocess.Popen(
        [
            str(seshat),
            "run",
            "--repo",
            world.remote.remote_url,
            "--work",
            world.work.name,  # relative, as people type it: the Apply still finds its plan
            "--tick",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        cwd=world.work.parent,
    )
    try:
        deadline = time.monotonic() + 120
        while tables(database) != ["t"]:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.5)
        time.sleep(2)  # let the pass finish writing its verdict
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "shop/orders: InSync" in out and "seshat: stopped" in err
