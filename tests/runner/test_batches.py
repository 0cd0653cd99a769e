"""``seshat-runner op`` with a batch: one process, one credential, one frame per operation.

A refresh of a resource (Observe, Plan, Plan) runs in one runner invocation; each operation
answers with its own typed result and evidence, and after one fails the rest are not run
and say so.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from harness.postgres import PostgresDatabase, PostgresServer
from harness.runner_cli import RunnerCLI, write

from gitops.execution.executor import LocalExecutor, RunOptions
from runner.protocol.frame import find_frames
from runner.protocol.messages import OperationInput
from runner.protocol.results import DriftResult, ErrorCode, PlanResult

SCHEMA = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"


def _folder(path: Path, sql: str) -> Path:
    path.mkdir()
    write(path / "schema.sql", sql)
    return path


def _database(path: Path, sql: str) -> Path:
    with sqlite3.connect(path) as conn:
        conn.executescript(sql)
    conn.close()
    return path


def _batch(runner: RunnerCLI, tmp_path: Path, operations: list[dict[str, Any]], url: str) -> Any:
    path = write(tmp_path / "batch.json", json.dumps({"protocol": 1, "batch": operations}))
    result = runner("op", "--input", str(path), env={"DB_URL": url})
    payloads = [frame.payload for frame in find_frames(result.stdout)]
    return result.returncode, payloads


def _op(operation: str, op_id: str, desired: Path, **extra: object) -> dict[str, Any]:
    return {
        "operation": operation,
        "id": op_id,
        "url": {"from_env": "DB_URL"},
        "desired": str(desired),
        **extra,
    }


def test_a_refresh_is_one_process_with_a_frame_per_operation(tmp_path: Path) -> None:
    database = _database(tmp_path / "app.db", "CREATE TABLE items (id INTEGER PRIMARY KEY);")
    desired = _folder(tmp_path / "desired", SCHEMA)
    runner = RunnerCLI()
    status, payloads = _batch(
        runner,
        tmp_path,
        [_op("drift", "d-1", desired), _op("plan", "p-1", desired), _op("plan", "p-2", desired)],
        f"sqlite:///{database}",
    )

    assert status == 0
    assert [(p["operation"], p["id"]) for p in payloads] == [
        ("drift", "d-1"),
        ("plan", "p-1"),
        ("plan", "p-2"),
    ]
    drift = DriftResult.model_validate(payloads[0]["result"]).drift
    assert drift.total == 1 and drift.categories.changed == 1  # the table lacks name
    first, second = (PlanResult.model_validate(p["result"]) for p in payloads[1:])
    assert first.plan_digest == second.plan_digest  # two plans, each its own evidence
    assert [s.op for s in first.plan.statements] != []
    assert all(p["target_identity"] == payloads[0]["target_identity"] for p in payloads)


def test_after_a_failure_the_rest_of_the_batch_is_not_run(tmp_path: Path) -> None:
    database = _database(tmp_path / "app.db", "CREATE TABLE items (id INTEGER PRIMARY KEY);")
    good = _folder(tmp_path / "good", SCHEMA)
    broken = _folder(tmp_path / "broken", "CREATE TABLE items (id INTEGER PRIMARY KEY,;\n")
    runner = RunnerCLI()
    status, payloads = _batch(
        runner,
        tmp_path,
        [_op("drift", "d-1", good), _op("plan", "p-1", broken), _op("plan", "p-2", good)],
        f"sqlite:///{database}",
    )

    assert status == 2
    assert [p["id"] for p in payloads] == ["d-1", "p-1", "p-2"]
    assert payloads[0]["result"]["operation"] == "drift"
    assert payloads[1]["error"]["code"] == ErrorCode.DESIRED_SCHEMA_INVALID
    assert payloads[2]["error"]["code"] == ErrorCode.NOT_RUN
    assert "p-1" in payloads[2]["error"]["message"]
    assert "result" not in payloads[2]


def test_a_batch_takes_one_credential_and_never_an_apply(tmp_path: Path) -> None:
    desired = _folder(tmp_path / "desired", SCHEMA)
    runner = RunnerCLI()
    other = {**_op("plan", "p-2", desired), "url": {"from_env": "OTHER_URL"}}
    status, payloads = _batch(
        runner, tmp_path, [_op("drift", "d-1", desired), other], "sqlite:///x.db"
    )
    assert status == 2
    assert payloads[0]["error"]["code"] == ErrorCode.INVALID_INPUT
    assert "same url" in payloads[0]["error"]["message"]

    apply = {
        **_op("apply", "a-1", desired),
        "plan": "/p.json",
        "expect_digest": "sha256:" + "0" * 64,
    }
    status, payloads = _batch(
        runner, tmp_path, [_op("drift", "d-1", desired), apply], "sqlite:///x.db"
    )
    assert status == 2
    assert "apply runs alone" in payloads[0]["error"]["message"]


def test_the_local_executor_returns_one_outcome_per_operation(tmp_path: Path) -> None:
    database = _database(tmp_path / "app.db", SCHEMA)
    desired = _folder(tmp_path / "desired", SCHEMA)
    url = {"from_env": "DB_URL"}
    requests = [
        OperationInput.model_validate(
            {"operation": name, "id": f"{name}-{i}", "url": url, "desired": str(desired)}
        )
        for i, name in enumerate(["drift", "plan", "plan"])
    ]
    outcomes = LocalExecutor(tmp_path / "work").run_batch(
        requests, RunOptions({"DB_URL": f"sqlite:///{database}"}, deadline=120)
    )
    assert [o.kind for o in outcomes] == ["done", "done", "done"]
    assert [o.result.id for o in outcomes if o.result] == ["drift-0", "plan-1", "plan-2"]
    assert isinstance(outcomes[0].result and outcomes[0].result.result, DriftResult)
    plans = [o.result.result for o in outcomes[1:] if o.result]
    assert all(isinstance(p, PlanResult) and p.plan.empty for p in plans)


def test_an_explicit_sandbox_is_the_same_for_every_operation_of_a_batch(
    postgres_database: PostgresDatabase, second_postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """A dev database the runner may not create databases in is lent and emptied between
    uses; emptying it recreates ``public`` as it was (owner, comment), so the desired model
    does not depend on how often it was used before (regression: a comment-less ``public``
    after the first use made the second refresh plan ``COMMENT ON SCHEMA public IS NULL``)."""
    server = second_postgres_server
    dev = f"dev_{postgres_database.name}"
    with server.connect() as admin:
        admin.execute(f'CREATE DATABASE "{dev}" OWNER {server.app_user}')
    desired = _folder(tmp_path / "desired", "CREATE TABLE items (id integer PRIMARY KEY);\n")
    runner = RunnerCLI(secrets=[server.app_password, postgres_database.server.app_password])
    operations = [
        {**_op(name, f"{name}-{i}", desired), "dev_url": {"from_env": "DEV_URL"}}
        for i, name in enumerate(["drift", "plan", "plan", "plan"])
    ]
    path = write(tmp_path / "batch.json", json.dumps({"protocol": 1, "batch": operations}))
    env = {
        "DB_URL": postgres_database.url_with_password,
        "DEV_URL": server.url_with_password(dev),
        "SESHAT_NO_CACHE": "1",  # every operation normalizes in the sandbox itself
    }
    runs = [runner("op", "--input", str(path), env=env) for _ in range(2)]

    plans = [
        p["result"]["plan"]
        for run in runs
        for p in (f.payload for f in find_frames(run.stdout))
        if p["operation"] == "plan"
    ]
    assert len(plans) == 6, runs[0].stdout + runs[0].stderr
    assert {json.dumps(p, sort_keys=True) for p in plans} == {json.dumps(plans[0], sort_keys=True)}
    assert [s["op"] for s in plans[0]["statements"]] == ["create_table", "add_constraint"]
    assert runner.leaks() == []
