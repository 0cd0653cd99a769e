#!/usr/bin/env python3
"""How long a steady reconciliation pass takes over N unchanged databases, and what it costs.

    .venv/bin/python bench/reconcile_scale.py                       # 300 SQLite resources
    .venv/bin/python bench/reconcile_scale.py --engine postgresql --sizes 50
    .venv/bin/python bench/reconcile_scale.py --sizes 10,100 --workers 1

For each size: a Git repository with a bare remote declaring N ``DatabaseSchema`` resources,
each on its own database that already holds the declared schema (SQLite files, or databases
of a private PostgreSQL cluster started with the test harness, 100 tables each), all using
one signed artifact in an OCI layout, ``apply: Never``. A first pass records every resource
InSync (not measured). Then, measured:

1. **steady**: a pass with nothing changed: wall time, control-plane CPU per resource (this
   process), runner CPU per resource (the child processes), runner processes per resource,
   status commits;
2. **unrelated**: a commit to the watched branch that touches no declaration, then a pass:
   its wall time and status commits (the goal is none);
3. **drift**: one database changed by hand, then a pass: that resource must leave InSync (the
   database is really read each pass, not remembered).

Peak RSS is this process's (the controller's) high-water mark over the whole run. Baseline,
measured in the same run: one ``seshat-runner --version`` start (median of 5), so the share
of the wall time that process starts cost is printed too.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from gitops.execution.executor import LocalExecutor, Outcome, RunOptions  # noqa: E402
from gitops.reconcile.passes import PassReport, run_pass  # noqa: E402
from runner.artifacts.format import package_folder  # noqa: E402
from runner.artifacts.layout import LayoutStore  # noqa: E402
from runner.artifacts.push import push  # noqa: E402
from runner.artifacts.reference import parse_reference  # noqa: E402
from runner.artifacts.signing import sign  # noqa: E402
from runner.protocol.messages import OperationInput  # noqa: E402

ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
SQLITE_SCHEMA = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price INTEGER);\n"
PG_TABLES = 100


def _pg_schema() -> str:
    """100 tables with keys, a foreign key each and an index each."""
    tables = []
    for i in range(PG_TABLES):
        parent = f",\n    parent_id bigint REFERENCES t{i - 1:03d} (id)" if i else ""
        tables.append(
            f"CREATE TABLE t{i:03d} (\n    id bigint PRIMARY KEY,\n    name text NOT NULL,\n"
            f"    created timestamptz NOT NULL DEFAULT now(){parent}\n);\n"
            f"CREATE INDEX t{i:03d}_name ON t{i:03d} (name);\n"
        )
    return "".join(tables)


class CountingExecutor(LocalExecutor):
    """The local executor, counting runner processes."""

    starts = 0

    def run_batch(self, requests: Sequence[OperationInput], options: RunOptions) -> list[Outcome]:
        self.starts += 1  # one process per call, whatever the batch holds
        return super().run_batch(requests, options)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **ENV}, check=True, capture_output=True
    )
    return done.stdout.decode().strip()


@dataclass
class World:
    source: str
    remote: Path
    work: Path
    checkout: Path
    databases: list[str]  # each database's URL
    schema: str


def new_repository(root: Path) -> tuple[Path, Path, ec.EllipticCurvePrivateKey]:
    """A bare remote ``root/remote.git`` (branch ``main``) and its clone ``root/repo``, with
    the public half of a new CI signing key at ``policies/ci.pub``; (remote, clone, key)."""
    remote, work = root / "remote.git", root / "repo"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    _git(root, "clone", "-q", str(remote), str(work))
    for option, value in (
        ("user.name", "bench"),
        ("user.email", "bench@example.com"),
        ("commit.gpgsign", "false"),
    ):
        _git(work, "config", option, value)
    key = ec.generate_private_key(ec.SECP256R1())
    (work / "policies").mkdir()
    (work / "policies/ci.pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return remote, work, key


def signed_artifact(
    layout: Path, tag: str, schema: str, key: ec.EllipticCurvePrivateKey, folder: Path
) -> str:
    """``schema`` pushed as a schema artifact to the OCI layout ``layout`` under ``tag``
    (its source written into ``folder``) and signed with ``key``; its reference."""
    folder.mkdir()
    (folder / "schema.sql").write_text(schema)
    ref = f"oci-layout://{layout}:{tag}"
    reference = parse_reference(ref)
    store = LayoutStore(str(layout))
    digest = push(store, reference, package_folder(folder, "schema", {}))
    sign(store, reference, digest, key)
    return ref


def push_all(work: Path, message: str) -> None:
    """Commit everything in the clone ``work`` and push it to ``main``."""
    _git(work, "add", "--all")
    _git(work, "commit", "-q", "-m", message)
    _git(work, "push", "-q", "origin", "HEAD:refs/heads/main")


def _world(root: Path, size: int, engine: str, server: Any) -> World:
    remote, work, key = new_repository(root)
    (work / "policies/ci.yaml").write_text(
        "apiVersion: seshat.dev/v1alpha1\nkind: VerificationPolicy\n"
        "metadata: {name: ci, namespace: bench}\nspec:\n"
        "  artifactTypes: [application/vnd.seshat.schema.v1]\n"
        "  signatures: {authorities: [{name: ci, key: {publicKey: policies/ci.pub}}]}\n"
    )
    schema = SQLITE_SCHEMA if engine == "sqlite" else _pg_schema()
    layout = root / "oci"
    signed_artifact(layout, "v1", schema, key, root / "schema")
    (work / "databases").mkdir()
    urls = []
    for index in range(size):
        name = f"db{index:04d}"
        if engine == "sqlite":
            path = root / f"{name}.db"
            with sqlite3.connect(path) as conn:
                conn.executescript(schema)
            conn.close()
            url = f"sqlite:///{path}"
        else:
            with server.connect() as admin:
                admin.execute(f'CREATE DATABASE "{name}" OWNER {server.app_user}')
            with server.connect(dbname=name) as conn:
                conn.execute(f"SET ROLE {server.app_user}")
                conn.execute(schema)
            url = server.url_with_password(name)
        urls.append(url)
        os.environ[f"BENCH_{index:04d}_URL"] = url
        (work / "databases" / f"{name}.yaml").write_text(
            "apiVersion: seshat.dev/v1alpha1\nkind: DatabaseSchema\n"
            f"metadata: {{name: {name}, namespace: bench}}\nspec:\n"
            f"  target: {{engine: {engine}, url: {{fromEnv: BENCH_{index:04d}_URL}}, "
            f"coordinationKey: {name}}}\n"
            f"  artifact: {{ref: 'oci-layout://{layout}:v1', verification: {{policy: ci}}}}\n"
            "  policy: {apply: Never}\n"
        )
    push_all(work, "declare")
    return World(remote.as_uri(), remote, root / "controller", work, urls, schema)


def status_commits(remote: Path) -> int:
    """Commits on the status branch of the bare ``remote`` so far."""
    try:
        return int(_git(remote, "rev-list", "--count", "seshat/status"))
    except subprocess.CalledProcessError:
        return 0


@dataclass
class Measured:
    wall: float
    own_cpu: float
    child_cpu: float
    runners: int
    commits: int
    report: PassReport


def _measure(world: World, workers: int) -> Measured:
    executor = CountingExecutor(world.work / "operations")
    before = status_commits(world.remote)
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    report = run_pass(world.source, world.work, executor=executor, workers=workers)
    wall = time.perf_counter() - started
    own_after = resource.getrusage(resource.RUSAGE_SELF)
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)

    def cpu(a: Any, b: Any) -> float:
        return float((b.ru_utime + b.ru_stime) - (a.ru_utime + a.ru_stime))

    return Measured(
        wall,
        cpu(own, own_after),
        cpu(children, children_after),
        executor.starts,
        status_commits(world.remote) - before,
        report,
    )


def _drift_by_hand(world: World, engine: str, server: Any) -> None:
    if engine == "sqlite":
        path = world.databases[0].removeprefix("sqlite:///")
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE INDEX by_hand ON items (name)")
        conn.close()
    else:
        with server.connect(dbname="db0000") as conn:
            conn.execute(f"SET ROLE {server.app_user}")
            conn.execute("CREATE INDEX by_hand ON t000 (created)")


def _runner_start() -> float:
    runner = Path(sys.executable).parent / "seshat-runner"
    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([str(runner), "--version"], check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@contextlib.contextmanager
def _server(engine: str, base: Path) -> Iterator[Any]:
    if engine == "sqlite":
        yield None
        return
    sys.path.insert(0, str(ROOT / "tests"))
    postgres = importlib.import_module("harness.postgres")
    base.mkdir()
    base.chmod(0o755)
    with postgres.running_postgres(base) as server:
        yield server


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="300", help="resource counts (default 300)")
    parser.add_argument("--engine", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="default: the CPU count"
    )
    args = parser.parse_args()
    start_cost = _runner_start()
    print(f"baseline: one seshat-runner start = {start_cost * 1000:.0f} ms (median of 5)")
    print(f"engine {args.engine}, {args.workers} workers")
    header = (
        f"{'resources':>9} {'pass':>9} {'wall s':>7} {'s/res':>6} {'ctl ms/res':>10} "
        f"{'run ms/res':>10} {'runners/res':>11} {'start share':>11} {'commits':>7}"
    )
    print(header)
    with tempfile.TemporaryDirectory(prefix="seshat-bench-") as folder:
        base = Path(folder)
        base.chmod(0o755)
        with _server(args.engine, base / "server") as server:
            for size in (int(s) for s in args.sizes.split(",")):
                root = base / f"n{size}"
                root.mkdir()
                world = _world(root, size, args.engine, server)
                first = run_pass(world.source, world.work, workers=args.workers)
                assert set(first.phases.values()) == {"InSync"}, first.phases
                rows = [("steady", _measure(world, args.workers))]
                (world.checkout / "README.md").write_text("unrelated\n")
                push_all(world.checkout, "unrelated")
                rows.append(("unrelated", _measure(world, args.workers)))
                _drift_by_hand(world, args.engine, server)
                drift = _measure(world, args.workers)
                rows.append(("drift", drift))
                found = drift.report.phases.get("bench/db0000")
                for label, m in rows:
                    assert label == "drift" or set(m.report.phases.values()) == {"InSync"}
                    print(
                        f"{size:>9} {label:>9} {m.wall:>7.1f} {m.wall / size:>6.3f} "
                        f"{m.own_cpu / size * 1000:>10.0f} {m.child_cpu / size * 1000:>10.0f} "
                        f"{m.runners / size:>11.2f} {m.runners * start_cost / m.wall:>10.0%} "
                        f"{m.commits:>7}"
                    )
                print(f"{'':>9} drift by hand on db0000 found: {found} (expected not InSync)")
                if found == "InSync":
                    return 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"controller peak RSS: {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
