"""``seshat reconcile``: run reconciliation passes over a repository."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from gitops.reconcile.passes import run_pass
from runner.errors import SeshatError

__all__ = ["reconcile", "run"]


def _default_work() -> Path:
    return Path.home() / ".local" / "state" / "seshat"


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
    help="Working directory: clones, the state file, fetched artifacts "
    "(default ~/.local/state/seshat).",
)
@click.option("--once", is_flag=True, help="Run one pass and exit.")
@click.option(
    "--every", default=60, show_default=True, help="Seconds between passes without --once."
)
@click.option("-v", "--verbose", is_flag=True, help="Print each operation as it starts.")
def reconcile(
    source: str, branch: str, work: Path | None, once: bool, every: int, verbose: bool
) -> None:
    """Converge every declared database: resolve, verify, observe, plan, apply on approval.

    Each pass reads the declarations at the watched branch's tip, drives each resource
    through its lifecycle with seshat-runner, and commits the verdicts to the status branch.
    Exit status with --once: 0 the pass ran (see each resource's phase), 2 it could not run.
    """
    work_dir = work or _default_work()
    say = (lambda text: click.echo(text, err=True)) if verbose else (lambda _: None)
    while True:
        try:
            report = run_pass(source, work_dir, branch=branch, log=say)
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
def run(source: str, branch: str, work: Path | None, tick: int, verbose: bool) -> None:
    """Reconcile on a schedule until SIGTERM or Ctrl-C.

    Every --tick seconds the repository is fetched and each resource that is due is
    reconciled: InSync, Blocked and AwaitingApproval resources every spec.interval, Failed
    ones every spec.retryInterval. SIGTERM lets the running pass finish, then exits 0.
    """
    import signal

    from apscheduler.schedulers.blocking import BlockingScheduler

    work_dir = work or _default_work()
    say = (lambda text: click.echo(text, err=True)) if verbose else (lambda _: None)

    def tick_once() -> None:
        try:
            report = run_pass(source, work_dir, branch=branch, log=say, due_only=True)
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
        next_run_time=datetime.now(UTC),
    )

    def stop(*_: object) -> None:
        click.echo("seshat: stopping after the current pass", err=True)
        scheduler.shutdown(wait=False)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    scheduler.start()
    click.echo("seshat: stopped", err=True)
