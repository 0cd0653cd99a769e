"""Realms side by side within a pass; one realm's resources one after another."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.executors import HookedExecutor
from harness.reconcile_world import World, schema_yaml, tables

from gitops.execution.executor import EnvValue
from gitops.reconcile.passes import run_pass
from runner.protocol.messages import OperationInput

SQL = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n"


class Recording(HookedExecutor):
    """The real runner; records when each invocation ran and for which database (the URL
    variable it was given), and holds each one open a little so overlaps are visible."""

    def __init__(self, work_dir: Path) -> None:
        super().__init__(work_dir)
        self.lock = threading.Lock()
        self.runs: list[tuple[str, float, float]] = []
        self.started: dict[int, float] = {}  # by thread

    def before(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        self.started[threading.get_ident()] = time.monotonic()

    def after(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        time.sleep(0.3)
        started = self.started[threading.get_ident()]
        with self.lock:
            self.runs.append((",".join(sorted(environment)), started, time.monotonic()))


def _overlap(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_realms_run_side_by_side_and_a_shared_realm_one_at_a_time(world: World) -> None:
    layout = world.artifact("l", SQL)
    for name in ("alpha", "beta", "gamma"):
        world.database(name)
    world.database("shared")
    world.remote.write_file("databases/alpha.yaml", schema_yaml("alpha", layout, apply="Always"))
    world.remote.write_file("databases/beta.yaml", schema_yaml("beta", layout, apply="Always"))
    world.remote.write_file("databases/gamma.yaml", schema_yaml("gamma", layout, apply="Always"))
    world.remote.write_file(
        "databases/shared.yaml",
        schema_yaml("one", layout, apply="Always", key="shared", shared=True)
        + "---\n"
        + schema_yaml("two", layout, apply="Always", key="shared", shared=True),
    )
    world.remote.commit_all("declare")
    executor = Recording(world.work / "operations")

    report = run_pass(world.remote.remote_url, world.work, executor=executor, workers=4)

    assert set(report.phases.values()) == {"InSync"}, report.reasons
    for name in ("alpha", "beta", "gamma", "shared"):
        assert tables(world.tmp / f"{name}.db") == ["items"]
    database_runs = [run for run in executor.runs if run[0]]  # Resolve and Verify take none
    shared = [run for run in database_runs if run[0] == "SHARED_URL"]
    others = [run for run in database_runs if run[0] != "SHARED_URL"]
    # Two resources on one database, never two runners at once: the first refreshes,
    # applies and refreshes; the second, after it, finds the table there and is InSync.
    assert len(shared) == 4
    assert not any(_overlap(a, b) for i, a in enumerate(shared) for b in shared[i + 1 :])
    # Different databases: their runners overlapped.
    assert any(_overlap(a, b) for a in others for b in others if a[0] != b[0])
    # Every verdict reached the status branch, whichever worker decided it.
    for name in ("alpha", "beta", "gamma", "one", "two"):
        assert world.phases(name)[0] == "InSync"


def test_one_worker_runs_one_runner_at_a_time(world: World) -> None:
    layout = world.artifact("l", SQL)
    for name in ("alpha", "beta"):
        world.database(name, SQL)
        world.remote.write_file(f"databases/{name}.yaml", schema_yaml(name, layout))
    world.remote.commit_all("declare")
    executor = Recording(world.work / "operations")

    report = run_pass(world.remote.remote_url, world.work, executor=executor, workers=1)

    assert report.phases == {"shop/alpha": "InSync", "shop/beta": "InSync"}
    runs = executor.runs
    assert not any(_overlap(a, b) for i, a in enumerate(runs) for b in runs[i + 1 :])
