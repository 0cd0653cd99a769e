#!/usr/bin/env python3
"""What a fleet of N SQLite members costs: a quiet pass, and a rollout in waves (issue 36).

    .venv/bin/python bench/fleet.py                      # 1000 members, baseline of 100
    .venv/bin/python bench/fleet.py --members 200 --baseline 50

One world: a Git repository with a bare remote declaring one ``DatabaseFleet`` (namespace
``shop``, members listed in ``fleets/tenants.yaml``, ``apply: OnApproval``), a signed
artifact in an OCI layout, one SQLite file per member already holding the declared schema,
and an SSH approver. The rollout has three steps: one canary (``maxParallel: 1``), 10% of
the members, then the rest.

1. **quiet**: a first pass records every member InSync (not measured); then a pass with
   nothing changed: its wall time, the controller's CPU, runner processes per member (the
   executor's calls, each one process), status commits, and the controller's peak RSS. Each
   pass runs in a process of its own (as ``seshat reconcile --once`` does), so the RSS is
   that pass's own high-water mark, runners excluded.
2. **rollout**: a commit moves the template to an artifact with one more column; passes run
   until every member is InSync, with one ``seshat approve shop/tenants`` (the one distinct
   plan) committed after the first. Wall time from that commit to all applied, and each
   pass's wall time, runner processes and status commits.

Baseline, measured in the same run: the quiet pass over ``--baseline`` plain
``DatabaseSchema`` resources (bench/reconcile_scale.py's world), so the per-member cost is
printed as a ratio of the per-resource one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from harness.reconcile_world import POLICIES, fleet_yaml  # noqa: E402
from harness.sshkeys import SSHKeyFactory  # noqa: E402
from reconcile_scale import (  # noqa: E402
    SQLITE_SCHEMA,
    _world,
    new_repository,
    push_all,
    signed_artifact,
    status_commits,
)

from gitops.execution.executor import LocalExecutor, Outcome, RunOptions  # noqa: E402
from gitops.reconcile.passes import run_pass  # noqa: E402
from runner.protocol.messages import OperationInput  # noqa: E402

V2 = SQLITE_SCHEMA.replace("price INTEGER", "price INTEGER, note TEXT")
SESHAT = str(Path(sys.executable).parent / "seshat")


STEPS = "[{match: {wave: canary}, maxParallel: 1}, {match: {wave: early}}, {}]"
MEMBERS = "    fromFile: fleets/tenants.yaml"


@dataclass
class Fleet:
    source: str
    remote: Path
    work: Path  # the controller's
    checkout: Path
    layout: Path
    key: Any
    approver: Path  # the SSH private key


def _fleet_world(root: Path, size: int) -> Fleet:
    remote, checkout, key = new_repository(root)
    keys = SSHKeyFactory(root / "keys")
    (root / "keys").mkdir()
    alice = keys("alice@example.com")
    (checkout / "policies/shop.yaml").write_text(POLICIES)
    (checkout / "policies/allowed_signers").write_text(
        alice.allowed_signers_line("seshat-approval,seshat-acknowledgment") + "\n"
    )
    layout = root / "oci"
    signed_artifact(layout, "v1", SQLITE_SCHEMA, key, root / "v1")
    early = max(1, size // 10)
    entries = []
    for index in range(size):
        name = f"t{index:04d}"
        wave = "canary" if index == 0 else "early" if index <= early else ""
        entries.append(f"- {{name: {name}" + (f", labels: {{wave: {wave}}}}}" if wave else "}"))
        path = root / f"{name}.db"
        with sqlite3.connect(path) as conn:
            conn.executescript(SQLITE_SCHEMA)
        conn.close()
        os.environ[f"TENANT_{name}_URL"] = f"sqlite:///{path}"
    (checkout / "fleets").mkdir()
    (checkout / "fleets/tenants.yaml").write_text("\n".join(entries) + "\n")
    (checkout / "databases").mkdir()
    (checkout / "databases/tenants.yaml").write_text(fleet_yaml(layout, MEMBERS, steps=STEPS))
    push_all(checkout, "declare the tenants fleet")
    return Fleet(
        remote.as_uri(), remote, root / "controller", checkout, layout, key, alice.private_key
    )


@dataclass
class Pass:
    wall: float
    cpu: float  # the controller's (the pass's process, its threads)
    runners: int
    commits: int
    rss_mib: float
    phases: dict[str, int]
    fleet: str


def _pass(source: str, remote: Path, work: Path, workers: int) -> Pass:
    """One pass in a process of its own (this script with ``--one-pass``)."""
    before = status_commits(remote)
    done = subprocess.run(
        [sys.executable, __file__, "--one-pass", source, str(work), "--workers", str(workers)],
        check=True,
        capture_output=True,
        text=True,
    )
    said = json.loads(done.stdout.splitlines()[-1])
    return Pass(
        said["wall"],
        said["cpu"],
        said["runners"],
        status_commits(remote) - before,
        said["rss_kib"] / 1024,
        said["phases"],
        said["fleet"],
    )


def _one_pass(source: str, work: Path, workers: int) -> None:
    """The child: one pass, counting the runner processes it starts (each executor call is
    one); a JSON line of what it measured."""
    starts = Counter[str]()
    run_batch = LocalExecutor.run_batch

    def counted(
        self: LocalExecutor, requests: Sequence[OperationInput], options: RunOptions
    ) -> list[Outcome]:
        starts["runners"] += 1
        return run_batch(self, requests, options)

    LocalExecutor.run_batch = counted  # type: ignore[method-assign]
    started, cpu = time.perf_counter(), time.process_time()
    report = run_pass(source, work, workers=workers)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    fleet = next(iter(report.fleets.values()), None)
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,
                "runners": starts["runners"],
                "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "phases": Counter(report.phases.values()),
                "fleet": fleet.phase if fleet is not None else "",
            }
        )
    )


def _row(label: str, size: int, p: Pass) -> None:
    print(
        f"{label:<22} {p.wall:>7.1f} {p.wall / size * 1000:>7.1f} {p.cpu / size * 1000:>8.1f} "
        f"{p.runners / size:>8.2f} {p.commits:>7} "
        f"{p.rss_mib:>7.0f}  "
        f"{dict(sorted(p.phases.items()))} {p.fleet}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--baseline", type=int, default=100, help="plain DatabaseSchemas")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--one-pass", nargs=2, metavar=("SOURCE", "WORK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_pass:
        _one_pass(args.one_pass[0], Path(args.one_pass[1]), args.workers)
        return 0
    size = args.members
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{size} members, {args.workers} workers, each pass in a process of its own")
    print(f"load average before: {load} (other work on the machine slows every pass)")
    print(
        f"{'pass':<22} {'wall s':>7} {'ms/res':>7} {'ctl ms/res':>8} {'runners/res':>8} "
        f"{'commits':>7} {'RSS MiB':>7}  phases"
    )
    with tempfile.TemporaryDirectory(prefix="seshat-fleet-") as folder:
        base = Path(folder)
        plain_root = base / "plain"
        plain_root.mkdir()
        plain = _world(plain_root, args.baseline, "sqlite", None)
        _pass(plain.source, plain.remote, plain.work, args.workers)
        baseline = _pass(plain.source, plain.remote, plain.work, args.workers)
        _row(f"plain x{args.baseline}: quiet", args.baseline, baseline)

        world = _fleet_world(base / "fleet", size)
        first = _pass(world.source, world.remote, world.work, args.workers)
        _row("fleet: first", size, first)
        quiet = _pass(world.source, world.remote, world.work, args.workers)
        _row("fleet: quiet", size, quiet)
        assert quiet.phases == {"InSync": size}, quiet.phases
        ratio = (quiet.wall / size) / (baseline.wall / args.baseline)
        print(
            f"quiet pass: {quiet.wall:.1f} s (target <= 90 s), "
            f"{quiet.runners / size:.2f} runners/member (target <= 1), "
            f"{quiet.commits} status commit(s) (target <= 1), "
            f"controller peak RSS {quiet.rss_mib:.0f} MiB (target <= 250); "
            f"per member {ratio:.2f}x a plain DatabaseSchema's"
        )

        # The rollout: one column more, in waves of 1, 10% and the rest, one approval.
        signed_artifact(world.layout, "v2", V2, world.key, base / "v2")
        declared = fleet_yaml(world.layout, MEMBERS, steps=STEPS, tag="v2")
        (world.checkout / "databases/tenants.yaml").write_text(declared)
        push_all(world.checkout, "tenants: v2, one column more")
        started = time.perf_counter()
        approved = False
        for number in range(1, 7):
            p = _pass(world.source, world.remote, world.work, args.workers)
            _row(f"rollout: pass {number}", size, p)
            if p.phases == {"InSync": size}:
                break
            if not approved and p.phases.get("AwaitingApproval") == size:
                took = time.perf_counter()
                subprocess.run(
                    [SESHAT, "approve", "shop/tenants", "--yes", "--repo", str(world.checkout),
                     "--key", str(world.approver)],
                    check=True, capture_output=True,
                )  # fmt: skip
                push_all(world.checkout, "approve the tenants' v2")
                approved = True
                print(f"{'approve + push':<22} {time.perf_counter() - took:>7.1f}")
        else:
            print("rollout: not every member InSync after 6 passes")
            return 1
        total = time.perf_counter() - started
        print(f"rollout: {total:.1f} s from the commit to every member applied (target <= 300 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
