#!/usr/bin/env python3
"""How long one reconciliation pass takes over N unchanged SQLite resources.

    .venv/bin/python bench/reconcile_scale.py [--sizes 10,100,300]

For each size: a Git repository with a bare remote declaring N ``DatabaseSchema`` resources,
each on its own SQLite database already converged (so the pass is the steady state: resolve,
verify, observe, plan twice, InSync, no commit), one signed artifact in an OCI layout they all
use. A first pass converges them (not measured); the second pass is measured: wall time and
this process's CPU time per resource, the number of runner processes started, and the share
of the wall time those starts cost (the start-up cost of one ``seshat-runner --version`` is
measured in the same run, median of 5, as the baseline).
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from gitops.execution.executor import EnvValue, LocalExecutor, Outcome  # noqa: E402
from gitops.reconcile.passes import run_pass  # noqa: E402
from runner.artifacts.format import package_folder  # noqa: E402
from runner.artifacts.layout import LayoutStore  # noqa: E402
from runner.artifacts.push import push  # noqa: E402
from runner.artifacts.reference import parse_reference  # noqa: E402
from runner.artifacts.signing import sign  # noqa: E402
from runner.protocol.messages import OperationInput  # noqa: E402

ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
SCHEMA = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price INTEGER);\n"


class CountingExecutor(LocalExecutor):
    """The local executor, counting runner processes."""

    starts = 0

    def run_batch(
        self,
        requests: Sequence[OperationInput],
        environment: Mapping[str, EnvValue],
        deadline: float,
        *,
        namespace: str = "default",
    ) -> list[Outcome]:
        self.starts += 1
        return super().run_batch(requests, environment, deadline, namespace=namespace)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **ENV}, check=True, capture_output=True
    )


def _world(root: Path, size: int) -> tuple[str, Path]:
    remote, work = root / "remote.git", root / "repo"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    subprocess.run(
        ["git", "clone", "-q", str(remote), str(work)],
        check=True,
        env={**os.environ, **ENV},
        capture_output=True,
    )
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
    (work / "policies/ci.yaml").write_text(
        "apiVersion: seshat.dev/v1alpha1\nkind: VerificationPolicy\n"
        "metadata: {name: ci, namespace: bench}\nspec:\n"
        "  artifactTypes: [application/vnd.seshat.schema.v1]\n"
        "  signatures: {authorities: [{name: ci, key: {publicKey: policies/ci.pub}}]}\n"
    )
    source = root / "schema"
    source.mkdir()
    (source / "schema.sql").write_text(SCHEMA)
    layout = root / "oci"
    reference = parse_reference(f"oci-layout://{layout}:v1")
    store = LayoutStore(str(layout))
    digest = push(store, reference, package_folder(source, "schema", {}))
    sign(store, reference, digest, key)
    (work / "databases").mkdir()
    for index in range(size):
        name = f"db{index:04d}"
        database = root / f"{name}.db"
        sqlite3.connect(database).close()
        os.environ[f"BENCH_{index:04d}_URL"] = f"sqlite:///{database}"
        (work / "databases" / f"{name}.yaml").write_text(
            "apiVersion: seshat.dev/v1alpha1\nkind: DatabaseSchema\n"
            f"metadata: {{name: {name}, namespace: bench}}\nspec:\n"
            f"  target: {{engine: sqlite, url: {{fromEnv: BENCH_{index:04d}_URL}}, "
            f"coordinationKey: {name}}}\n"
            f"  artifact: {{ref: 'oci-layout://{layout}:v1', verification: {{policy: ci}}}}\n"
            "  policy: {apply: Always}\n"
        )
    _git(work, "add", "--all")
    _git(work, "commit", "-q", "-m", "declare")
    _git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    return remote.as_uri(), root / "controller"


def _runner_start() -> float:
    runner = Path(sys.executable).parent / "seshat-runner"
    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([str(runner), "--version"], check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,100", help="resource counts (default 10,100)")
    args = parser.parse_args()
    start_cost = _runner_start()
    print(f"baseline: one seshat-runner start = {start_cost * 1000:.0f} ms (median of 5)")
    print(
        f"{'resources':>9} {'wall s':>8} {'wall/res s':>10} {'cpu/res ms':>10} "
        f"{'runners':>8} {'start share':>11}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="seshat-bench-") as folder:
            source, work = _world(Path(folder), size)
            run_pass(source, work)  # converge (not measured)
            executor = CountingExecutor(work / "operations")
            cpu = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            report = run_pass(source, work, executor=executor)
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
            assert set(report.phases.values()) == {"InSync"}, report.phases
            own_cpu = (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime)
            share = executor.starts * start_cost / wall
            print(
                f"{size:>9} {wall:>8.1f} {wall / size:>10.2f} {own_cpu / size * 1000:>10.0f} "
                f"{executor.starts:>8} {share:>10.0%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
