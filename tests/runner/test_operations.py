"""``seshat-runner op``: one framed result per operation, nothing secret in it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import secret_scan
from harness.postgres import PostgresDatabase
from harness.runner_cli import RunnerCLI, write

from runner.identity import target_identity
from runner.protocol.frame import Found, find_last_frame
from runner.url import parse_url


@pytest.fixture
def db(postgres_database: PostgresDatabase) -> Iterator[PostgresDatabase]:
    with postgres_database.server.connect() as admin:
        admin.execute(f"ALTER ROLE {postgres_database.server.app_user} CREATEDB")
    with postgres_database.connect_as_app() as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    yield postgres_database


@pytest.fixture
def runner(db: PostgresDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[db.server.app_password])
    yield cli
    assert cli.leaks() == []


def op(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path, request: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    path = write(tmp_path / f"{request['id']}.json", json.dumps(request))
    result = runner("op", "--input", str(path), env={"DB_URL": db.url_with_password})
    frame = find_last_frame(result.stdout)
    assert isinstance(frame, Found), result.stdout + result.stderr
    return result.returncode, frame.payload


def test_plan_and_apply_through_operations(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    desired = tmp_path / "desired"
    desired.mkdir()
    write(
        desired / "schema.sql", "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric);"
    )
    status, payload = op(
        runner,
        db,
        tmp_path,
        {
            "operation": "plan",
            "id": "op-plan-1",
            "url": {"from_env": "DB_URL"},
            "desired": str(desired),
        },
    )
    assert status == 0
    assert (payload["protocol"], payload["operation"], payload["id"]) == (1, "plan", "op-plan-1")
    assert payload["target_identity"] == target_identity(parse_url(db.url_with_password))
    plan = payload["result"]["plan"]
    assert [s["sql"] for s in plan["statements"]] == [
        "ALTER TABLE public.items ADD COLUMN price numeric"
    ]
    plan_file = tmp_path / "plan.json"
    from runner.digests import canonical_json

    plan_file.write_bytes(canonical_json(plan) + b"\n")
    status, payload = op(
        runner,
        db,
        tmp_path,
        {
            "operation": "apply",
            "id": "op-apply-1",
            "url": {"from_env": "DB_URL"},
            "plan": str(plan_file),
            "expect_digest": payload["result"]["planDigest"],
        },
    )
    assert status == 0, payload
    assert payload["result"]["apply"]["converged"] is True


def test_a_refused_plan_is_a_framed_error_with_a_stable_code(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    desired = write(tmp_path / "schema.sql", "CREATE TABLE other (id int);")
    status, payload = op(
        runner,
        db,
        tmp_path,
        {
            "operation": "plan",
            "id": "op-2",
            "url": {"from_env": "DB_URL"},
            "desired": str(desired),
        },
    )
    assert status == 1
    assert payload["error"]["code"] == "plan_refused"
    assert payload["error"]["message"].startswith("destructive_disallowed:")


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        ({"operation": "inspect", "id": "x", "url": "postgresql://u:secret@h/db"}, "invalid_input"),
        (
            {"operation": "inspect", "id": "x", "url": {"from_env": "NOT_SET_ANYWHERE"}},
            "credential_unavailable",
        ),
        (
            {"operation": "inspect", "id": "x", "url": {"from_file": "/nonexistent/url"}},
            "credential_unavailable",
        ),
        ({"operation": "plan", "id": "x", "url": {"from_env": "DB_URL"}}, "invalid_input"),
    ],
)
def test_bad_inputs_get_stable_codes(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path, request_: dict[str, Any], code: str
) -> None:
    runner.secrets.append("secret")
    status, payload = op(runner, db, tmp_path, request_)
    assert status == 2
    assert payload["error"]["code"] == code


def test_inspect_reads_the_url_from_a_file(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    # A credential file the runner reads: an input of the test, not an output to scan.
    url_file = write(secret_scan.input_file(tmp_path / "url"), db.url_with_password + "\n")
    status, payload = op(
        runner,
        db,
        tmp_path,
        {"operation": "inspect", "id": "i", "url": {"from_file": str(url_file)}},
    )
    assert status == 0
    assert "table:public.items" in payload["result"]["model"]["tables"]


def test_a_user_without_createdb_observes_and_no_sandbox_is_a_stable_refusal(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    with postgres_database.server.connect() as admin:  # other tests may have granted it
        admin.execute(f"ALTER ROLE {postgres_database.server.app_user} NOCREATEDB")
    runner = RunnerCLI(secrets=[postgres_database.server.app_password])
    desired = tmp_path / "desired"
    desired.mkdir()
    write(desired / "schema.sql", "CREATE TABLE t (id int);")
    request = {
        "operation": "drift",
        "id": "nodb",
        "url": {"from_env": "DB_URL"},
        "desired": str(desired),
    }
    # Observing needs nothing of the target but reading: the desired schema goes to a sandbox.
    code, payload = op(runner, postgres_database, tmp_path, request)
    assert code == 0, payload
    assert payload["result"]["drift"]["total"] == 1
    # Without server binaries for a sandbox (and no dev URL), a stable refusal says what to do.
    path = write(tmp_path / "again.json", json.dumps(request | {"id": "nobin"}))
    result = runner(
        "op",
        "--input",
        str(path),
        env={
            "DB_URL": postgres_database.url_with_password,
            "SESHAT_PG_BINDIR": "/nonexistent",
            "SESHAT_NO_CACHE": "1",  # a cold plan: the first one's results are cached
        },
    )
    frame = find_last_frame(result.stdout)
    assert isinstance(frame, Found) and result.returncode == 1
    message = frame.payload["error"]["message"]
    assert frame.payload["error"]["code"] == "plan_refused"
    assert message.startswith("sandbox_unavailable: ") and "install postgresql-" in message
    assert runner.leaks() == []


def test_a_short_password_is_redacted_from_values_without_breaking_the_frame(
    tmp_path: Path,
) -> None:
    runner = RunnerCLI(secrets=[])
    path = write(
        tmp_path / "r.json",
        json.dumps({"operation": "inspect", "id": "short", "url": {"from_env": "DB_URL"}}),
    )
    result = runner("op", "--input", str(path), env={"DB_URL": "postgresql://u:p@127.0.0.1:1/db"})
    frame = find_last_frame(result.stdout)
    assert isinstance(frame, Found), result.stdout
    assert set(frame.payload) == {"error", "id", "operation", "protocol", "target_identity"}
    assert frame.payload["operation"] == "inspect"


def test_a_reason_that_is_not_a_constant_never_breaks_the_frame() -> None:
    """A refusal reason travels only when it is one of Seshat's snake_case constants; any
    other text (a line break at its end, capitals) is dropped, and the frame is still made."""
    from runner.operations import _error
    from runner.protocol.results import ErrorCode

    for reason, sent in [("stale_plan", "stale_plan"), ("stale_plan\n", None), ("Stale", None)]:
        result = _error("plan", "p1", None, ErrorCode.PLAN_REFUSED, "refused", reason)
        assert result.error is not None and result.error.reason == sent
