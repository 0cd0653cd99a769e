"""``seshat reconcile`` and ``seshat run``: the controller's commands.

They parse options and loop; what runs operations, who holds leases and what time it is
come from :mod:`gitops.wiring`, the one place they are built.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gitops.execution.leases import Leader
from gitops.execution.workfolder import WorkFolder, WorkFolderBusy, claim_work_folder
from gitops.logs import LogFormat
from gitops.repo.locks import remove_stale_locks
from gitops.wiring import Wiring, registry_options, wire
from runner.errors import SeshatError

__all__ = ["reconcile", "run"]

F = TypeVar("F", bound=Callable[..., Any])


def _default_work() -> Path:
    return Path.home() / ".local" / "state" / "seshat"


def _source_options(command: F) -> F:
    """The options naming what is reconciled and where the work is kept (shared by
    reconcile and run): ``source``, ``branch`` and ``work``."""
    options = [
        click.option(
            "--repo",
            "source",
            required=True,
            help="The Git repository: a local path or a URL Git can fetch.",
        ),
        click.option(
            "--branch",
            default="main",
            show_default=True,
            help="The watched branch (seshat.yaml's spec.branch wins when it differs).",
        ),
        click.option(
            "--work",
            # Absolute: the runner runs in a folder of its own and is handed plan files under it.
            type=click.Path(file_okay=False, path_type=Path, resolve_path=True),
            help="Working directory: clones, the state file, plan files for the runner "
            "(default ~/.local/state/seshat).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


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
            "--runner-sandbox-security",
            default="runtime-default",
            show_default=True,
            metavar="runtime-default|unconfined|localhost:PROFILE",
            help="Kubernetes: the seccomp profile of the Jobs that plan (Observe, Plan), whose "
            "private sandbox server runs in a bubblewrap jail that needs user namespaces: "
            "runtime-default refuses them (such plans are Blocked/SandboxUnavailable unless "
            "the declaration names a dev database), unconfined allows them (AppArmor "
            "unconfined too), localhost:PROFILE names a node's profile that does "
            "(docs/kubernetes.md).",
        ),
        registry_options,
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
@_source_options
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
    _own(work_dir, lambda text: click.echo(text, err=True))
    while True:
        try:
            report = mode.one_pass(source, work_dir, branch, say, due_only=False)
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
@_source_options
@click.option(
    "--poll",
    type=click.FloatRange(min=0.5),
    default=5,
    show_default=True,
    help="Seconds between looks at the branch tip (git ls-remote, no fetch); when it moved, "
    "the resources the new commits touch are reconciled at once.",
)
@click.option(
    "--tick",
    type=click.FloatRange(min=1),
    default=10,
    show_default=True,
    help="Seconds between passes for the schedule (each resource's spec.interval, "
    "spec.retryInterval after Failed), pushes or not.",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help="Serve /metrics, /healthz and /readyz (and webhooks, with a secret) on this address, "
    "e.g. 127.0.0.1:9187 (default: no server).",
)
@click.option(
    "--webhook-secret-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Accept push webhooks (GitHub, GitLab, generic HMAC) signed with the secret in this "
    "file; needs --listen.",
)
@click.option(
    "--webhook-secret-env",
    metavar="VAR",
    help="The same, with the secret in this environment variable.",
)
@click.option(
    "--listen-max-connections",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Connections the listener holds at once; past it, the one that has waited longest "
    "for its request is cut to make room.",
)
@click.option(
    "--listen-max-per-client",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Connections one address may hold at once (more are answered 503).",
)
@click.option(
    "--listen-deadline",
    type=click.FloatRange(min=0.5, max=300),
    default=10,
    show_default=True,
    help="Seconds a request may take to arrive whole (head and body, from its first byte), "
    "and a connection may stay idle.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object per line (time, level, message, resource) on stdout.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print each operation as it starts.")
@_mode_options
def run(
    source: str,
    branch: str,
    work: Path | None,
    poll: float,
    tick: float,
    listen: str | None,
    webhook_secret_file: Path | None,
    webhook_secret_env: str | None,
    listen_max_connections: int,
    listen_max_per_client: int,
    listen_deadline: float,
    log_format: LogFormat,
    verbose: bool,
    **mode_options: Any,
) -> None:
    """Reconcile until SIGTERM or Ctrl-C: pushes at once, the rest on a schedule.

    Every --poll seconds the branch tip is looked at (a verified webhook looks at once); when
    it moved, the resources the new commits touch (their declarations, artifacts in the
    repository, the policies they use, approvals and acknowledgments naming them) are
    reconciled at once. Every --tick seconds the resources that are due are: InSync, Blocked
    and AwaitingApproval ones every spec.interval, Failed ones every spec.retryInterval.
    SIGTERM lets the running pass finish, then exits 0. With --executor kubernetes, only the
    replica holding the controller Lease runs passes.
    """
    import signal

    from gitops.logs import configure
    from gitops.runloop import LoopSettings, RunLoop
    from gitops.serve import http
    from gitops.serve.health import Health
    from gitops.serve.webhooks import load_secret

    logger = configure(log_format, verbose)
    try:
        secret = load_secret(webhook_secret_file, webhook_secret_env)
        if secret is not None and listen is None:
            raise ValueError("webhooks need --listen (the address they are sent to)")
        if listen is not None:
            http.parse_address(listen)
        limits = http.Limits(
            max_connections=listen_max_connections,
            max_per_client=listen_max_per_client,
            request_deadline=listen_deadline,
            idle_timeout=listen_deadline,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    work_dir = work or _default_work()
    mode = _wire_or_exit(logger.debug, mode_options)
    _own(work_dir, logger.info)
    leader = Leader(mode.leases, f"{socket.gethostname()}:{work_dir.resolve()}", logger.debug)
    health = Health(stale_after=3 * poll + 60)
    settings = LoopSettings(source, work_dir, branch, poll, tick)
    loop = RunLoop(settings, mode, leader, health, logger, logger.debug)
    listener = None
    if listen is not None:
        try:
            listener = http.start(listen, health, loop.wake, secret, logger.warning, limits)
        except OSError as error:
            logger.error(f"seshat: cannot listen on {listen}: {error.strerror}")
            sys.exit(2)
        webhooks = "" if secret is None else ", webhooks at /webhooks/{github,gitlab,generic}"
        logger.info(f"seshat: listening on http://{listener.address}{webhooks}")

    def stop(*_: object) -> None:
        logger.info("seshat: stopping after the current pass")
        loop.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        loop.run()
    finally:
        leader.step_down()
        if listener is not None:
            listener.stop()
    logger.info("seshat: stopped")


def _own(work_dir: Path, log: Callable[[str], None]) -> WorkFolder:
    """Take the work folder for this controller (exit 2 if another one holds it), then
    remove the Git locks a killed controller left in its clones (docs/reconciler.md)."""
    try:
        owned = claim_work_folder(work_dir)
    except WorkFolderBusy as error:
        click.echo(f"seshat: {error}", err=True)
        sys.exit(2)
    remove_stale_locks(owned.clones(), owned.since, log)
    return owned


def _wired(verbose: bool, mode_options: dict[str, Any]) -> tuple[Callable[[str], None], Wiring]:
    """How a command reports progress (``-v``), and its wiring; exit 2 if it cannot be built."""
    say: Callable[[str], None] = (
        (lambda text: click.echo(text, err=True)) if verbose else (lambda _: None)
    )
    return say, _wire_or_exit(say, mode_options)


def _wire_or_exit(say: Callable[[str], None], mode_options: dict[str, Any]) -> Wiring:
    try:
        return wire(say, **mode_options)
    except SeshatError as error:
        click.echo(f"seshat: {error}", err=True)
        sys.exit(2)
