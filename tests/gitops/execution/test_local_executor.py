"""The local executor starts the real ``seshat-runner`` (SQLite targets: no server needed).

Four tests replace the runner with a small Python program to produce what a real runner
cannot be made to do on demand (print its environment, hang, die mid-frame); they say so.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from gitops.execution.executor import LocalExecutor
from runner.protocol.messages import OperationInput
from runner.protocol.results import InspectResult, PlanResult


def _database(tmp_path: Path) -> str:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    conn.close()
    return f"sqlite:///{path}"


def test_inspect_and_plan_through_the_real_runner(tmp_path: Path) -> None:
    url = _database(tmp_path)
    executor = LocalExecutor(tmp_path / "ops")
    inspect = OperationInput.model_validate(
        {"operation": "inspect", "id": "op-1", "url": {"from_env": "APP_DB"}}
    )
    outcome = executor.run(inspect, {"APP_DB": url}, deadline=60)
    assert outcome.kind == "done", outcome.detail
    assert outcome.result is not None and isinstance(outcome.result.result, InspectResult)
    assert "table:main.items" in outcome.result.result.model["tables"]  # type: ignore[operator]

    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price INTEGER);\n"
    )
    plan = OperationInput.model_validate(
        {"operation": "plan", "id": "op-2", "url": {"from_env": "APP_DB"}, "desired": str(desired)}
    )
    planned = executor.run(plan, {"APP_DB": url}, deadline=60)
    assert planned.kind == "done", planned.detail
    assert planned.result is not None and isinstance(planned.result.result, PlanResult)
    assert planned.result.result.plan_digest.startswith("sha256:")
    assert planned.result.target_identity is not None
    assert not list((tmp_path / "ops").iterdir())  # the input file is removed afterwards

    # A credential the operation was not given is reported, not guessed.
    missing = executor.run(plan, {}, deadline=60)
    assert missing.kind == "failed" and missing.detail.startswith("credential_unavailable")


FAKE_RUNNER = """
import json, os, sys
sys.path[:0] = {path!r}
from runner.protocol.frame import encode_frame
request = json.load(open(sys.argv[sys.argv.index("--input") + 1]))
print(encode_frame({{"protocol": 1, "operation": request["operation"], "id": request["id"],
                    "result": {{"operation": "inspect", "model": {{"env": sorted(os.environ)}}}}}}))
"""


NAMES_RUNNER = """
import json, os, sys
sys.path[:0] = {path!r}
from runner.protocol.frame import encode_frame
request = json.load(open(sys.argv[sys.argv.index("--input") + 1]))
print(encode_frame({{"protocol": 1, "operation": request["operation"], "id": request["id"],
                    "error": {{"code": "internal", "message": " ".join(sorted(os.environ))}}}}))
"""


def test_the_runner_gets_only_the_credential_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in runner that reports its environment (a real runner never prints it).
    script = tmp_path / "fake_runner.py"
    script.write_text(FAKE_RUNNER.format(path=sys.path))
    monkeypatch.setenv("SESHAT_FORGE_TOKEN", "forge-secret")
    monkeypatch.setenv("GIT_SSH_COMMAND", "ssh -i /secret/key")
    monkeypatch.setenv("OTHER_DB_URL", "postgresql://u:pw@h/other")
    executor = LocalExecutor(tmp_path / "ops", command=[sys.executable, str(script)])
    request = OperationInput.model_validate(
        {"operation": "inspect", "id": "op-env", "url": {"from_env": "APP_DB"}}
    )
    outcome = executor.run(request, {"APP_DB": "sqlite:///x.db"}, deadline=60)
    assert outcome.kind == "done", outcome.detail
    assert outcome.result is not None and isinstance(outcome.result.result, InspectResult)
    seen = set(outcome.result.result.model["env"])  # type: ignore[arg-type]
    assert "APP_DB" in seen
    assert not seen & {"SESHAT_FORGE_TOKEN", "GIT_SSH_COMMAND", "OTHER_DB_URL"}


def test_the_registry_credential_goes_only_to_a_runner_that_reads_an_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in runner that reports the names in its environment, as an error's message
    # (whatever the operation; a real runner never prints them).
    script = tmp_path / "fake_runner.py"
    script.write_text(NAMES_RUNNER.format(path=sys.path))
    registry = {"SESHAT_REGISTRY_PASSWORD", "SESHAT_REGISTRY_USERNAME", "DOCKER_CONFIG"}
    for name in registry:
        monkeypatch.setenv(name, "registry-value")
    executor = LocalExecutor(tmp_path / "ops", command=[sys.executable, str(script)])

    def environment(request: Mapping[str, object], env: dict[str, str]) -> set[str]:
        outcome = executor.run(OperationInput.model_validate(request), env, deadline=60)
        assert outcome.result is not None and outcome.result.error is not None, outcome.detail
        return set(outcome.result.error.message.split())

    resolve = {"operation": "resolve", "id": "op-r", "artifact": {"ref": "oci://h/r:v1"}}
    assert registry <= environment(resolve, {})
    inspect = {"operation": "inspect", "id": "op-i", "url": {"from_env": "APP_DB"}}
    assert not registry & environment(inspect, {"APP_DB": "sqlite:///x.db"})


def test_a_deadline_kills_the_runner_and_the_outcome_is_lost(tmp_path: Path) -> None:
    # A stand-in runner that hangs.
    executor = LocalExecutor(
        tmp_path / "ops", command=[sys.executable, "-c", "import time; time.sleep(60)"]
    )
    request = OperationInput.model_validate(
        {"operation": "inspect", "id": "op-hang", "url": {"from_env": "APP_DB"}}
    )
    started = time.monotonic()
    outcome = executor.run(request, {}, deadline=1)
    assert outcome.kind == "lost" and "deadline" in outcome.detail
    assert time.monotonic() - started < 10


def test_a_runner_dying_mid_frame_is_lost_not_misread(tmp_path: Path) -> None:
    # A stand-in runner that dies after the frame header.
    header = "<<<SESHAT-RESULT v1 length=99 sha256=" + "0" * 64 + ">>>"
    executor = LocalExecutor(
        tmp_path / "ops",
        command=[
            sys.executable,
            "-c",
            f"import os, sys; print({header!r}); sys.stdout.flush(); os._exit(9)",
        ],
    )
    request = OperationInput.model_validate(
        {"operation": "inspect", "id": "op-die", "url": {"from_env": "APP_DB"}}
    )
    outcome = executor.run(request, {}, deadline=30)
    assert outcome.kind == "lost" and "incomplete" in outcome.detail and outcome.exit_code == 9
