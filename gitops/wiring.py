"""Where operations run, who holds leases, and what time it is: built here, once, and
handed to the passes (``seshat reconcile``, ``seshat run``).

Local mode: each operation is a ``seshat-runner`` child process (the pass's default
executor) and leases live in the state file. Kubernetes mode: each operation is a Job, leases
are ``coordination.k8s.io`` Leases, and verdicts may also be published on the custom
resources. Nothing below this module chooses between the two.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from gitops.execution.executor import Executor
from gitops.execution.leases import Leases
from gitops.reconcile.lifecycle import utc_now
from gitops.reconcile.passes import PassReport, run_pass
from runner.files import NotReadable, read_regular_file
from runner.protocol.messages import RegistrySettings

__all__ = ["Wiring", "registry_options", "registry_settings", "wire"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Wiring:
    executor: Executor | None = None  # None: the pass's local executor
    leases: Leases | None = None  # None: the state file's leases
    publish: Callable[[PassReport], None] | None = None
    progress: Callable[[str, str, str], None] | None = None  # (kind, "ns/name", phase)
    clock: Callable[[], datetime] = field(default=utc_now)
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    workers: int | None = None  # None: the CPU count
    start: str = field(default_factory=lambda: secrets.token_hex(8))
    """This controller start: local mode holds realm leases as it (see run_pass)."""

    def one_pass(
        self,
        source: str,
        work: Path,
        branch: str,
        log: Callable[[str], None],
        *,
        due_only: bool,
        report_idle: bool = False,
    ) -> PassReport:
        """One pass with this wiring, its report published (Kubernetes mode)."""
        report = run_pass(
            source,
            work,
            branch=branch,
            log=log,
            due_only=due_only,
            executor=self.executor,
            leases=self.leases,
            clock=self.clock,
            registry=self.registry,
            workers=self.workers,
            report_idle=report_idle,
            progress=self.progress,
            start=self.start,
        )
        if self.publish is not None:
            self.publish(report)
        return report


def wire(say: Callable[[str], None], **options: Any) -> Wiring:
    """The executor, leases and publisher the controller's mode options ask for."""
    registry = registry_settings(options["registry_plain_http"], options["registry_ca"])
    if options["executor"] == "local":
        if options["publish_status"]:
            raise click.UsageError("--publish-status needs --executor kubernetes")
        if options["registry_secret"]:
            raise click.UsageError(
                "--registry-secret needs --executor kubernetes (a local runner takes the "
                "registry credential from its environment)"
            )
        return Wiring(registry=registry, workers=options["workers"])
    if not options["runner_image"]:
        raise click.UsageError("--executor kubernetes needs --runner-image")
    from gitops.kubernetes.api import load_api
    from gitops.kubernetes.jobs import JobSettings, KubernetesExecutor, sandbox_security
    from gitops.kubernetes.leases import KubernetesLeases
    from gitops.kubernetes.status import publish_fleets, publish_phase, publish_statuses

    try:
        jail = sandbox_security(options["runner_sandbox_security"])
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    api = load_api(options["kubeconfig"])
    settings = JobSettings(
        image=options["runner_image"],
        service_account=options["runner_service_account"],
        cache_claim=options["runner_cache_claim"],
        registry_secret=options["registry_secret"],
        sandbox_security=jail,
    )
    publish = progress = None
    if options["publish_status"]:

        def publish(report: PassReport) -> None:
            publish_statuses(api, report.statuses, report.repository, say, events=True)
            publish_fleets(api, report.fleets, report.repository, say)

        def progress(kind: str, key: str, phase: str) -> None:
            publish_phase(api, kind, key, phase, say)

    from gitops.logs import LOGGER

    return Wiring(
        # Tampering (a Job or pod passing for one of Seshat's) is said as a warning, whether
        # or not -v asked for progress.
        KubernetesExecutor(api, settings, warn=LOGGER.warning),
        KubernetesLeases(api, options["lease_namespace"], options["lease_duration"]),
        publish,
        progress,
        registry=registry,
        workers=options["workers"],
    )


MAX_CA_BUNDLE = 1024 * 1024


def registry_options(command: F) -> F:
    """``--registry-plain-http`` and ``--registry-ca``, the options :func:`registry_settings`
    reads (``seshat reconcile``, ``seshat run``, ``seshat preview``)."""
    options = [
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
    ]
    for option in reversed(options):
        command = option(command)
    return command


def registry_settings(plain_http: tuple[str, ...], ca: Path | None) -> RegistrySettings:
    """How runners reach registries (never a credential: runners hold that)."""
    ca_pem = None
    if ca is not None:
        try:
            data = read_regular_file(ca, MAX_CA_BUNDLE)
        except NotReadable as error:
            raise click.BadParameter(f"{ca}: {error.detail}", param_hint="--registry-ca") from None
        if data is None:
            raise click.BadParameter(f"{ca}: no such file", param_hint="--registry-ca")
        ca_pem = data.decode("utf-8", errors="replace")
    return RegistrySettings(plain_http=sorted(set(plain_http)), ca_pem=ca_pem)
