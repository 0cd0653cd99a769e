"""``seshat reconcile`` and ``seshat run``: the controller's commands.

They parse options and loop; what runs operations, who holds leases and what time it is
come from :mod:`gitops.wiring`, the one place they are built.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from gitops.execution.leases import Leader
from gitops.reconcile.passes import PassReport, run_pass
from gitops.wiring import Wiring, wire
from runner.errors import SeshatError

__all__ = ["reconcile", "run"]

F = TypeVar("F", bound=Callable[..., Any])


def _default_work() -> Path:
    return Path.home() / ".local" / "state" / "seshat"


def _mode_options(command: F) -> F:
    """The options choosing where operations run (shared by reconcile and run)."""
    options = [
        click.option(
            "--executor",
            type=click.Choice(["local", "kubernetes"]),
            default="local",
            show_default=True,
            help="local: each operation is a seshat-runner child process; kubernetes: a Job "
            "in the resource's namespace, with Leases in --lease-namespace.",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1, max=256),
            help="Resources of different realms reconciled side by side within a pass "
            "(default: the CPU count); one realm's resources always run one at a time.",
        ),
        click.option(
            "--runner-image", help="Kubernetes: the image holding seshat-runner (required)."
        ),
        click.option(
            "--runner-service-account",
            default="seshat-runner",
            show_default=True,
            help="Kubernetes: the Jobs' service account (no roles, no token mounted).",
        ),
        click.option(
            "--runner-cache-claim",
            metavar="PVC",
            help="Kubernetes: a PersistentVolumeClaim every runner Job mounts for its cache "
            "(sandbox templates, planning cache); without one each Job plans cold.",
        ),
        click.option(
            "--registry-plain-http",
            metavar="HOST[:PORT]",
            multiple=True,
            help="A registry the runners may reach over plain HTTP (repeatable); every "
            "other registry is HTTPS.",
        ),
        click.option(
            "--registry-ca",
            type=click.Path(dir_okay=False, path_type=Path),
            help="A PEM bundle the runners trust for registry TLS, besides the system roots.",
        ),
        click.option(
            "--registry-secret",
            metavar="SECRET",
            help="Kubernetes: a kubernetes.io/dockerconfigjson Secret (in each resource's "
            "namespace) mounted into the Jobs that read an artifact; the registry credential "
            "never reaches the controller.",
        ),
        click.option(
            "--lease-namespace",
            default="seshat-system",
            show_default=True,
            help="Kubernetes: where the coordination.k8s.io Leases live.",
        ),
        click.option(
            "--lease-duration",
            default=60,
            show_default=True,
            help="Kubernetes: seconds a Lease stays held without renewal.",
        ),
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Kubernetes: a kubeconfig file (default: the pod's service account in a "
            "cluster, else $KUBECONFIG or ~/.kube/config).",
        ),
        click.option(
            "--publish-status",
            is_flag=True,
            help="Kubernetes: also write each verdict to the custom resource's status (for "
            "Argo CD and Flux health checks).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.command()
@click.option(
    "--repo",
    "source",
    required=True,
    help="The Git repository: a local path or a URL Git can fetch.",
)
@click.option(
    "--branch",
    default="main",
    show_default=True,
    help="The watched branch (seshat.yaml's spec.branch wins when it differs).",
)
@click.option(
    "--work",
    type=click.Path(file_okay=False, path_type=Path),
    help="Working directory: clones, the state file, plan files for the runner "
    "(default ~/.local/state/seshat).",
)
@click.option("--once", is_flag=True, help="Run one pass and exit.")
@click.option(
    "--every", default=60, show_default=True, help="Seconds between passes without --once."
)
@click.option("-v", "--verbose", is_flag=True, help="Print each operation as it starts.")
@_mode_options
def reconcile(
    source: str,
    branch: str,
    work: Path | None,
    once: bool,
    every: int,
    verbose: bool,
    **mode_options: Any,
) -> None:
    """Converge every declared database: resolve, verify, observe, plan, apply on approval.

    Each pass reads the declarations at the watched branch's tip, drives each resource
    through its lifecycle with seshat-runner, and commits the verdicts to the status branch.
    Exit status with --once: 0 the pass ran (see each resource's phase), 2 it could not run.
    """
    work_dir = work or _default_work()
    say, mode = _wired(verbose, mode_options)
    while True:
        try:
            report = _one_pass(source, work_dir, branch, say, mode, due_only=False)
        except SeshatError as error:
            click.echo(f"seshat: {error}", err=True)
            if once:
                sys.exit(2)
        else:
            click.echo(f"revision {report.revision}")
            for problem in report.problems:
                click.echo(f"  problem: {problem}")
            for key in sorted(report.phases):
                click.echo(f"  {key}: {report.phases[key]} ({report.reasons[key]})")
        if once:
            return
        time.sleep(every)


@click.command(name="run")
@click.option(
    "--repo",
    "source",
    required=True,
    help="The Git repository: a local path or a URL Git can fetch.",
)
@click.option("--branch", default="main", show_default=True)
@click.option(
    "--work",
    type=click.Path(file_okay=False, path_type=Path),
    help="Working directory (default ~/.local/state/seshat).",
)
@click.option(
    "--tick", default=10, show_default=True, help="Seconds between looks at the schedule."
)
@click.option("-v", "--verbose", is_flag=True, help="Print each operation as it starts.")
@_mode_options
def run(
    source: str, branch: str, work: Path | None, tick: int, verbose: bool, **mode_options: Any
) -> None:
    """Reconcile on a schedule until SIGTERM or Ctrl-C.

    Every --tick seconds the repository is fetched and each resource that is due is
    reconciled: InSync, Blocked and AwaitingApproval resources every spec.interval, Failed
    ones every spec.retryInterval. SIGTERM lets the running pass finish, then exits 0.
    With --executor kubernetes, only the replica holding the controller Lease runs passes.
    """
    import signal

    from apscheduler.schedulers.blocking import BlockingScheduler

    work_dir = work or _default_work()
    say, mode = _wired(verbose, mode_options)
    leader = Leader(mode.leases, f"{socket.gethostname()}:{work_dir.resolve()}", say)

    def tick_once() -> None:
        if not leader.leading():
            return
        try:
            report = _one_pass(source, work_dir, branch, say, mode, due_only=True)
        except SeshatError as error:
            click.echo(f"seshat: {error}", err=True)
            return
        for key in sorted(report.phases):
            click.echo(
                f"{report.revision[:12]} {key}: {report.phases[key]} ({report.reasons[key]})"
            )

    scheduler = BlockingScheduler()
    scheduler.add_job(
        tick_once,
        "interval",
        seconds=tick,
        max_instances=1,
        coalesce=True,
        next_run_time=datetime.now(UTC),  # the scheduler's own clock: start at once
    )

    def stop(*_: object) -> None:
        click.echo("seshat: stopping after the current pass", err=True)
        scheduler.shutdown(wait=False)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    scheduler.start()
    leader.step_down()
    click.echo("seshat: stopped", err=True)


def _wired(verbose: bool, mode_options: dict[str, Any]) -> tuple[Callable[[str], None], Wiring]:
    """How a command reports progress (``-v``), and its wiring; exit 2 if it cannot be built."""
    say: Callable[[str], None] = (
        (lambda text: click.echo(text, err=True)) if verbose else (lambda _: None)
    )
    try:
        return say, wire(say, **mode_options)
    except SeshatError as error:
        click.echo(f"seshat: {error}", err=True)
        sys.exit(2)


def _one_pass(
    source: str,
    work: Path,
    branch: str,
    say: Callable[[str], None],
    mode: Wiring,
    *,
    due_only: bool,
) -> PassReport:
    report = run_pass(
        source,
        work,
        branch=branch,
        log=say,
        due_only=due_only,
        executor=mode.executor,
        leases=mode.leases,
        clock=mode.clock,
        registry=mode.registry,
        workers=mode.workers,
    )
    if mode.publish is not None:
        mode.publish(report)
    return report
