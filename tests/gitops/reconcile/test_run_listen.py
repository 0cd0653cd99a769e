"""``seshat run`` as a user runs it: a push reconciled without waiting for the interval, push
webhooks that verify (and those that do not), /metrics, /healthz, /readyz, JSON logs.

Each test starts a real ``seshat run`` process against the world's bare remote; its output
goes to files (scanned for credentials with everything else the suite wrote).
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psycopg
from harness import secret_scan
from harness.postgres import PostgresDatabase
from harness.reconcile_world import World, schema_yaml, tables

from gitops.reconcile.passes import run_pass

SESHAT = str(Path(sys.executable).parent / "seshat")
DEADLINE = 120.0  # seconds; generous: the machine running the suite is shared


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def err(self) -> str:
        return self.stderr.read_text(errors="replace")

    def out(self) -> str:
        return self.stdout.read_text(errors="replace")

    def address(self) -> str:
        """Where ``--listen 127.0.0.1:0`` ended up listening, from its log line."""
        found = _until(lambda: re.search(r"listening on http://(\S+?)[,\s]", self.err()), self)
        return found.group(1)


T = TypeVar("T")


def _until(check: Callable[[], T | None], running: Running | None = None) -> T:
    """``check()``'s first true answer, polled until the deadline."""
    deadline = time.monotonic() + DEADLINE
    while True:
        found = check()
        if found:
            return found
        if running is not None and running.process.poll() is not None:
            raise AssertionError(f"seshat run exited:\n{running.err()[-3000:]}")
        assert time.monotonic() < deadline, running.err()[-3000:] if running else "timed out"
        time.sleep(0.25)


@contextmanager
def _seshat_run(world: World, *options: str) -> Iterator[Running]:
    logs = world.tmp / f"run-{secrets.token_hex(4)}"
    logs.mkdir()
    with (logs / "stdout").open("wb") as out, (logs / "stderr").open("wb") as err:
        process = subprocess.Popen(
            [SESHAT, "run", "--repo", world.remote.remote_url, "--work", str(world.work), *options],
            stdout=out,
            stderr=err,
            # A controller that does not stop is told SIGABRT: every thread's stack is then
            # in its stderr, and in the failure.
            env=os.environ | {"PYTHONFAULTHANDLER": "1"},
        )
    running = Running(process, logs / "stdout", logs / "stderr")
    try:
        yield running
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            process.wait(timeout=DEADLINE)
            raise AssertionError(f"seshat run did not stop:\n{running.err()[-20000:]}") from None
        assert process.returncode == 0, running.err()[-3000:]
        assert "seshat: stopped" in running.err() + running.out()  # text | json
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _phase(world: World, name: str) -> str | None:
    try:
        status = world.status(name)["status"]
    except subprocess.CalledProcessError:
        return None  # no status file yet
    assert isinstance(status, dict)
    return str(status["phase"])


def _request(
    url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _sample(metrics: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text ``metrics`` (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in metrics.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        metric, _, rest = key.partition("{")
        found = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if metric == name and found == wanted:
            return float(value)
    return 0.0


def test_a_push_is_reconciled_without_waiting_for_the_interval(
    world: World, postgres_database: PostgresDatabase
) -> None:
    """The approval of a plan is applied seconds after it is pushed: ``spec.interval`` is its
    default of 10 minutes and the schedule tick an hour; only the look at the tip can."""
    world.monkeypatch.setenv("ORDERS_URL", postgres_database.url_with_password)
    layout = world.artifact("push", "CREATE TABLE t (id integer PRIMARY KEY);\n")
    world.remote.write_file(
        "databases/orders.yaml", schema_yaml("orders", layout, engine="postgresql")
    )
    world.remote.commit_all("declare")
    with _seshat_run(world, "--poll", "1", "--tick", "3600") as running:
        _until(lambda: _phase(world, "orders") == "AwaitingApproval", running)
        plan = str(world.status("orders")["status"]["plan"]["id"])  # type: ignore[index]
        pushed = time.monotonic()
        world.approve("orders", plan)
        _until(lambda: _phase(world, "orders") == "InSync", running)
        took = time.monotonic() - pushed
    with psycopg.connect(postgres_database.url_with_password) as conn:
        found = conn.execute("SELECT to_regclass('public.t') IS NOT NULL").fetchone()
    assert found == (True,)
    assert took < 60, f"push to verdict took {took:.1f} s"  # 15 s on an idle machine
    assert f"{world.remote.remote_head()[:12]} shop/orders: InSync (InSync)" in running.out()


def test_a_pass_reconciles_only_what_the_new_commits_touch(world: World) -> None:
    layout = world.artifact("touch", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    for name in ("orders", "billing"):
        world.database(name)
        world.remote.write_file(f"databases/{name}.yaml", schema_yaml(name, layout))
    world.remote.commit_all("declare")

    def due_pass() -> dict[str, str]:
        return run_pass(world.remote.remote_url, world.work, due_only=True).phases

    assert due_pass() == {"shop/orders": "AwaitingApproval", "shop/billing": "AwaitingApproval"}
    world.remote.write_file("README.md", "unrelated\n")
    world.remote.commit_all("docs")
    assert due_pass() == {}  # nothing touched, nothing due: interval is 10 minutes
    world.approve("billing", str(world.status("billing")["status"]["plan"]["id"]))  # type: ignore[index]
    assert due_pass() == {"shop/billing": "InSync"}
    assert tables(world.tmp / "billing.db") == ["t"] and tables(world.tmp / "orders.db") == []


def _signed(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_webhooks_verify_before_they_wake_the_loop(world: World) -> None:
    """GitHub's signature and GitLab's token: a request that does not verify is refused, one
    that does wakes the loop at once (its own look at the tip is an hour away)."""
    secret = secret_scan.remember(secrets.token_hex(24))
    secret_file = secret_scan.input_file(world.tmp / "webhook-secret")
    secret_file.write_text(secret + "\n")
    world.database("orders")

    def declare(version: str, sql: str) -> None:
        layout = world.artifact(version, sql)
        world.remote.write_file(
            "databases/orders.yaml", schema_yaml("orders", layout, apply="Always")
        )
        world.remote.commit_all(f"orders {version}")

    declare("v1", "CREATE TABLE a (id INTEGER PRIMARY KEY);\n")
    options = ["--listen", "127.0.0.1:0", "--webhook-secret-file", str(secret_file)]
    with _seshat_run(world, *options, "--poll", "3600", "--tick", "3600") as running:
        base = f"http://{running.address()}"
        _until(lambda: tables(world.tmp / "orders.db") == ["a"], running)
        body = json.dumps({"ref": "refs/heads/main"}).encode()
        json_type = {"Content-Type": "application/json"}

        declare("v2", "CREATE TABLE a (id INTEGER PRIMARY KEY);\nCREATE TABLE b (id INTEGER);\n")
        github = f"{base}/webhooks/github"
        push = json_type | {"X-GitHub-Event": "push"}
        assert _request(github, body, push)[0] == 401  # no signature
        wrong = push | {"X-Hub-Signature-256": _signed("not-the-secret", body)}
        assert _request(github, body, wrong)[0] == 403
        resigned = push | {"X-Hub-Signature-256": _signed(secret, body + b" ")}
        assert _request(github, body, resigned)[0] == 403  # the signature of another body
        form = push | {"Content-Type": "application/x-www-form-urlencoded"}
        assert _request(github, body, form)[0] == 415
        ping = json_type | {"X-GitHub-Event": "ping", "X-Hub-Signature-256": _signed(secret, body)}
        assert _request(github, body, ping) == (200, "ignored: not a push\n")
        metrics = _request(f"{base}/metrics")[1]
        assert _sample(metrics, "seshat_webhooks_total", outcome="refused") == 4
        assert tables(world.tmp / "orders.db") == ["a"]  # none of them woke the loop
        good = push | {"X-Hub-Signature-256": _signed(secret, body)}
        assert _request(github, body, good)[0] == 202
        _until(lambda: tables(world.tmp / "orders.db") == ["a", "b"], running)

        declare(
            "v3",
            "CREATE TABLE a (id INTEGER PRIMARY KEY);\nCREATE TABLE b (id INTEGER);\n"
            "CREATE TABLE c (id INTEGER);\n",
        )
        gitlab = f"{base}/webhooks/gitlab"
        hook = json_type | {"X-Gitlab-Event": "Push Hook"}
        assert _request(gitlab, body, hook)[0] == 401
        assert _request(gitlab, body, hook | {"X-Gitlab-Token": secret[:-1]})[0] == 403
        assert _request(gitlab, body, hook | {"X-Gitlab-Token": secret})[0] == 202
        _until(lambda: tables(world.tmp / "orders.db") == ["a", "b", "c"], running)

        generic = f"{base}/webhooks/generic"
        assert _request(generic, b"{}", json_type)[0] == 401
        signed = json_type | {"X-Seshat-Signature-256": _signed(secret, b"{}")}
        assert _request(generic, b"{}", signed)[0] == 202
        assert (
            _request(
                generic,
                b"not json",
                signed | {"X-Seshat-Signature-256": _signed(secret, b"not json")},
            )[0]
            == 400
        )
        assert _request(github)[0] == 405  # GET
        metrics = _request(f"{base}/metrics")[1]
        assert _sample(metrics, "seshat_webhooks_total", outcome="accepted") == 3
    assert secret not in running.out() + running.err()


def test_metrics_health_and_json_logs(world: World) -> None:
    """Without a webhook secret, only /metrics, /healthz and /readyz answer; the pass counter
    moves from one pass to the next; every log line is a JSON object."""
    layout = world.artifact("metrics", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    world.database("orders")
    world.remote.write_file("databases/orders.yaml", schema_yaml("orders", layout, apply="Always"))
    world.remote.commit_all("declare")
    options = ["--listen", "127.0.0.1:0", "--log-format", "json", "--poll", "1", "--tick", "1"]
    with _seshat_run(world, *options) as running:
        address = _until(
            lambda: next(
                (
                    line["message"].split("http://")[1]
                    for line in map(json.loads, running.out().splitlines())
                    if "listening on" in line["message"]
                ),
                None,
            ),
            running,
        )
        base = f"http://{address}"
        assert _request(f"{base}/healthz")[0] == 200
        _until(lambda: _request(f"{base}/readyz")[0] == 200, running)
        for path in ("/webhooks/github", "/webhooks/gitlab", "/webhooks/generic"):
            assert _request(base + path, b"{}", {"Content-Type": "application/json"})[0] == 404
        assert _request(f"{base}/nothing")[0] == 404

        def passes() -> float:
            return _sample(_request(f"{base}/metrics")[1], "seshat_passes_total", outcome="ok")

        first = _until(passes, running)
        _until(lambda: passes() > first, running)
        metrics = _request(f"{base}/metrics")[1]
        labels = {"kind": "DatabaseSchema", "phase": "InSync", "reason": "InSync"}
        assert _sample(metrics, "seshat_resources", **labels) == 1
        assert _sample(metrics, "seshat_operations_total", kind="plan", outcome="answered") >= 1
        assert _sample(metrics, "seshat_last_successful_pass_timestamp_seconds") > 1.7e9
        assert "seshat_pass_duration_seconds_bucket" in metrics
    lines = [json.loads(line) for line in running.out().splitlines()]
    assert all({"time", "level", "message"} <= line.keys() for line in lines)
    verdicts = [line for line in lines if line.get("resource") == "shop/orders"]
    assert verdicts and verdicts[0]["message"].endswith("shop/orders: InSync (InSync)")
    assert verdicts[0]["level"] == "info"
    assert any(line["message"] == "seshat: stopped" for line in lines)


def test_sigterm_stops_the_controller_whichever_thread_the_kernel_hands_it_to(
    world: World,
) -> None:
    """The kernel may deliver a process's SIGTERM to any of its threads. Python runs the
    handler in the main thread, so a main thread asleep in one long wait never learned of it:
    a controller once ignored SIGTERM for minutes (CI saw it). Here the stop is sent, with
    ``tgkill``, to each thread but the main one in turn, one controller each."""
    tgkill = ctypes.CDLL(None, use_errno=True).tgkill
    world.database("orders")
    layout = world.artifact("v1", "CREATE TABLE a (id INTEGER PRIMARY KEY);\n")
    world.remote.write_file("databases/orders.yaml", schema_yaml("orders", layout, apply="Always"))
    world.remote.commit_all("declare")
    options = ["--listen", "127.0.0.1:0", "--poll", "3600", "--tick", "3600"]
    turn, threads = 0, 1
    while turn < threads:
        with _seshat_run(world, *options) as running:
            running.address()
            _until(lambda: tables(world.tmp / "orders.db") == ["a"], running)
            pid = running.process.pid
            tasks = (int(t.name) for t in Path(f"/proc/{pid}/task").iterdir())
            others = sorted(t for t in tasks if t != pid)  # the main thread's id is the pid
            assert len(others) >= 3, others  # the listener's, the scheduler's, a pass's ...
            if turn == 0:
                threads = len(others)
            target = others[turn % len(others)]
            assert tgkill(pid, target, signal.SIGTERM) == 0, os.strerror(ctypes.get_errno())
            running.process.wait(timeout=30)  # within seconds, not DEADLINE's two minutes
        turn += 1
