"""One reconciliation pass over a repository: fetch, read at one commit, census, lifecycles.

``run_pass`` clones (first time) or fetches the repository into ``work/source``, checks out
the watched branch's tip detached (that commit is the ``Seshat-Source-Revision`` of the
pass's status commit), reads the declarations there, takes the realm census, reads each
resource's previous status from the status branch, and drives each ``DatabaseSchema``
through :class:`~gitops.reconcile.schema.SchemaPass` and each ``DatabaseMigration``
through :class:`~gitops.reconcile.migration.MigrationPass`. A declaration with problems
gets a ``Blocked/ConfigurationError`` status of its own; the others proceed.

Every verdict is staged in the pass's :class:`~gitops.writeback.batch.Batch` and committed
in one commit when the pass ends (no commit when nothing changed); only a dispatch marker
is pushed earlier, carrying what was staged before it. Reviews are published after that
commit, so a review's plan is already on the status branch.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import git

from gitops.execution.executor import Executor, LocalExecutor
from gitops.execution.leases import Leases
from gitops.execution.runners import RunnerBook
from gitops.reconcile.conditions import summary_conditions
from gitops.reconcile.fleets import Fleets
from gitops.reconcile.identities import coordination_digest
from gitops.reconcile.lifecycle import Gate, PassContext, utc_now
from gitops.reconcile.migration import MigrationPass
from gitops.reconcile.schema import SchemaPass
from gitops.reconcile.state import StateFile
from gitops.reconcile.touched import touched_by
from gitops.reconcile.workers import in_parallel
from gitops.repo.loader import LoadedResource, Repository, load_repository
from gitops.repo.locks import PatientRepo
from gitops.repo.problems import ResourceKey
from gitops.repo.tip import complaint
from gitops.resources.approvals import ResourceRef
from gitops.resources.base import storable_name
from gitops.resources.migration import DatabaseMigration
from gitops.resources.schema import DatabaseSchema
from gitops.resources.status import (
    ConditionType,
    DatabaseMigrationStatus,
    DatabaseSchemaStatus,
    FleetStatus,
    Reason,
    SharedPhase,
)
from gitops.reviews.review import Reviews
from gitops.writeback.batch import Batch, status_change
from gitops.writeback.status_branch import StatusBranch
from gitops.writeback.status_files import (
    impact_lines,
    impact_path,
    plan_paths,
    read_status,
    status_bytes,
    status_path,
)
from runner.errors import CanNotRunError, SeshatError
from runner.protocol.messages import RegistrySettings

__all__ = ["PassReport", "realm_census", "run_pass"]


@dataclass
class PassReport:
    revision: str
    problems: list[str] = field(default_factory=list)
    # "ns/name" -> the resource's kind and the status this pass gave it
    statuses: dict[str, tuple[str, Status]] = field(default_factory=dict)
    repository: Repository | None = None  # the declarations the pass read
    branch: str = ""  # the branch read (seshat.yaml's spec.branch)
    # With report_idle: "ns/name" -> kind and last recorded status of those not due
    idle: dict[str, tuple[str, Status]] = field(default_factory=dict)
    # "ns/fleet" -> the status this pass gave each fleet (aggregates of its members)
    fleets: dict[str, FleetStatus] = field(default_factory=dict)

    @property
    def phases(self) -> dict[str, str]:
        return {key: status.phase.value for key, (_, status) in self.statuses.items()}

    @property
    def reasons(self) -> dict[str, str]:
        """Each resource's Ready reason."""
        return {key: _ready_reason(status) for key, (_, status) in self.statuses.items()}

    def standing(self) -> dict[str, tuple[str, str, str]]:
        """``"ns/name"`` -> (kind, phase, Ready reason) of each resource this pass
        reconciled, and of each idle one it reported."""
        return {
            key: (kind, status.phase.value, _ready_reason(status))
            for key, (kind, status) in (self.idle | self.statuses).items()
        }


def _ready_reason(status: Status) -> str:
    ready = next((c for c in status.conditions if c.type == ConditionType.READY), None)
    return ready.reason if ready is not None else ""


def _checkout(source: str, work: Path, branch: str) -> tuple[Path, str]:
    clone = work / "source"
    try:
        if not (clone / ".git").is_dir():
            repo = PatientRepo.clone_from(source, clone, no_checkout=True)
        else:
            repo = PatientRepo(clone)
            repo.git.fetch("--quiet", "--prune", "origin")
        repo.git.checkout("--quiet", "--detach", "--force", f"origin/{branch}")
        repo.git.clean("-fdxq")
        revision = repo.head.commit.hexsha
        repo.close()
    except git.GitCommandError as error:
        said = complaint(str(error.stderr or "")) or str(error)
        raise CanNotRunError(f"cannot read branch {branch} of the repository: {said}") from None
    return clone, revision


Status = DatabaseSchemaStatus | DatabaseMigrationStatus


def _previous(branch: StatusBranch, namespace: str, name: str, kind: str) -> Status | None:
    """The resource's last status on the status branch, if it is of the same kind."""
    data = branch.read(status_path(namespace, name))
    if data is None:
        return None
    return read_status(data, kind)  # None: unknown, rebuilt by this pass


def realm_census(resources: list[LoadedResource]) -> dict[str, tuple[Reason, str]]:
    """Realm conflicts: two live resources on one database, unless all share the realm."""
    claimants: dict[str, list[LoadedResource]] = defaultdict(list)
    for loaded in resources:
        resource = loaded.resource
        if isinstance(resource, (DatabaseSchema, DatabaseMigration)) and not resource.spec.suspend:
            digest = coordination_digest(resource.metadata.namespace, resource.spec.target)
            claimants[digest].append(loaded)
    blocked: dict[str, tuple[Reason, str]] = {}
    for group in claimants.values():
        if len(group) < 2 or all(g.resource.spec.target.shared_realm for g in group):  # type: ignore[union-attr]
            continue
        names = ", ".join(sorted(f"{g.key.kind} {g.key.namespace}/{g.key.name}" for g in group))
        for loaded in group:
            blocked[str(loaded.key)] = (
                Reason.REALM_CONFLICT,
                f"one database, one writer: {names} claim it (set sharedRealm on all of them "
                "to share it)",
            )
    return blocked


def run_pass(
    source: str,
    work: Path,
    *,
    branch: str = "main",
    executor: Executor | None = None,
    log: Callable[[str], None] = lambda _: None,
    due_only: bool = False,
    registry: RegistrySettings | None = None,
    leases: Leases | None = None,
    clock: Callable[[], datetime] = utc_now,
    workers: int | None = None,
    report_idle: bool = False,
    progress: Callable[[str, str, str], None] | None = None,
    start: str | None = None,
) -> PassReport:
    """One pass over ``source`` (a path or URL of a Git repository).

    With ``due_only``, a resource is reconciled only when its schedule says so (its
    ``interval`` after its last pass, its ``retryInterval`` after Failed) or when the
    commits since the last pass touched it (:mod:`gitops.reconcile.touched`); otherwise
    every resource is. Resources of different realms run side by side on ``workers``
    threads (default: the CPU count). With ``report_idle``, the report also carries the
    last recorded status of each resource not reconciled. ``progress`` is told (kind,
    "ns/name", phase) as each resource's pass enters a step (Kubernetes mode publishes it on
    the custom resource; the status branch records only verdicts). ``start`` names the
    controller start running the pass (local mode: part of the realm leases' holder, so a
    restarted controller is a new holder; default: a new one).
    """
    work.mkdir(parents=True, exist_ok=True)
    checkout, revision = _checkout(source, work, branch)
    repository = load_repository(checkout)
    if repository.config.spec.branch != branch:
        branch = repository.config.spec.branch
        checkout, revision = _checkout(source, work, branch)
        repository = load_repository(checkout)
    config = repository.config.spec
    status_branch = StatusBranch(work / "status.git", source, config.status_branch, config.commit)
    state = StateFile(work / "state.sqlite")
    reviews = Reviews(work / "reviews.git", source, config)
    report = PassReport(revision, repository=repository, branch=branch)
    batch = Batch(status_branch, revision)
    try:
        status_branch.sync()
        verified = state.verified_commits()
        status_branch.load_ledger(status_branch.verifier(repository.root), verified)
        state.remember_verified(verified)
        holder = f"{socket.gethostname()}:{work.resolve()}"
        runners = None
        if executor is None and leases is None:  # local mode: a holder per controller start
            holder += f"#{start or secrets.token_hex(8)}"
            runners = RunnerBook(work / "operations" / "runners", holder)
            leftovers = [*(work / "operations").glob("op-*.json"), *(work / "plans").glob("*")]
            runners.sweep(leftovers, log)
        ctx = PassContext(
            repository=repository,
            revision=revision,
            state=state,
            executor=executor or LocalExecutor(work / "operations", book=runners),
            status_branch=status_branch,
            batch=batch,
            work_dir=work,
            holder=holder,
            log=log,
            registry=registry or RegistrySettings(),
            leases=leases,
            now=clock,
            runners=runners,
        )
        if progress is not None:
            ctx.progress = progress
        for problem in repository.problems:
            report.problems.append(str(problem))
        _blocked_by_problems(ctx, report)
        _due_when_touched(ctx, checkout, branch)
        reconciled: dict[str, tuple[str, float]] = {}  # "ns/name" -> uid, retryInterval
        try:
            cpus = workers or os.cpu_count() or 1
            _lifecycles(ctx, report, reconciled, due_only, cpus, report_idle)
        finally:  # whatever stopped the pass, what it decided is recorded
            _commit(ctx, reconciled)
        for key in reconciled:
            kind, status = report.statuses[key]
            namespace, _, name = key.partition("/")
            if "/" in name:
                continue  # a fleet member: its fleet's review lists the distinct plans
            _review(reviews, status_branch, kind, namespace, name, status, revision, log)
        for key, fleet in report.fleets.items():
            namespace, _, name = key.partition("/")
            try:
                reviews.after_fleet(namespace, name, fleet, revision)
            except (SeshatError, git.GitCommandError, ValueError) as error:
                log(f"{key}: review not published: {error}")
    finally:
        state.close()
        status_branch.close()
        reviews.close()
    return report


def _due_when_touched(ctx: PassContext, clone: Path, branch: str) -> None:
    """The resources the commits since the last pass read ``branch`` touched are due now
    (everything, when that cannot be told); the revision read is remembered for the next.

    Recorded before the lifecycles run, so a pass that stops half-way leaves them due."""
    last = ctx.state.last_revision(branch)
    if last == ctx.revision:
        return
    changed = _changed_paths(clone, last, ctx.revision) if last is not None else None
    touched = touched_by(ctx.repository, changed)
    uids = [
        str(loaded.resource.metadata.uid)
        for loaded in ctx.repository.resources
        if isinstance(loaded.resource, (DatabaseSchema, DatabaseMigration))
        and loaded.key in touched
    ]
    ctx.state.due_now(uids)
    ctx.state.remember_revision(branch, ctx.revision)
    since = f"{last[:12]}..{ctx.revision[:12]}" if last else ctx.revision[:12]
    what = f"everything ({touched.why!r})" if touched.everything else f"{len(uids)} resource(s)"
    ctx.log(f"revision {since}: due now: {what}")


def _changed_paths(clone: Path, old: str, new: str) -> list[str] | None:
    """The paths that differ between the trees of ``old`` and ``new``; None when that
    cannot be told (``old`` is gone: a history rewritten and pruned)."""
    try:
        with PatientRepo(clone) as repo:
            listed = str(repo.git.diff("--name-only", "--no-renames", "-z", old, new, "--"))
    except (git.GitCommandError, ValueError):
        return None
    return [path for path in listed.split("\0") if path]


def _lifecycles(
    ctx: PassContext,
    report: PassReport,
    reconciled: dict[str, tuple[str, float]],
    due_only: bool,
    workers: int,
    report_idle: bool = False,
) -> None:
    """Each valid resource's lifecycle (those due, with ``due_only``), its verdict staged:
    the resources of one realm one after another, realms side by side on ``workers``
    threads (:mod:`gitops.reconcile.workers`). Fleet members run in rounds, one per rollout
    step, so a step's gate reads what the earlier steps decided this pass
    (:mod:`gitops.reconcile.fleets`); each fleet's status is staged last."""
    census = realm_census(list(ctx.repository.resources))
    known: dict[ResourceKey, Status | None] = {}  # previous statuses, each read once a pass

    def previous(loaded: LoadedResource) -> Status | None:
        if loaded.key not in known:
            meta = loaded.resource.metadata
            known[loaded.key] = _previous(
                ctx.status_branch, meta.namespace, meta.name, loaded.resource.kind
            )
        return known[loaded.key]

    fleets = Fleets(ctx.repository, previous, ctx.now)
    rounds: dict[int, dict[str, list[LoadedResource]]] = defaultdict(lambda: defaultdict(list))
    for loaded in ctx.repository.resources:
        resource = loaded.resource
        if not isinstance(resource, (DatabaseSchema, DatabaseMigration)):
            continue
        if due_only and not ctx.state.due(str(resource.metadata.uid), time.time()):
            if report_idle:
                meta = resource.metadata
                found = previous(loaded)
                if found is not None:
                    report.idle[f"{meta.namespace}/{meta.name}"] = (resource.kind, found)
            continue
        realm = coordination_digest(resource.metadata.namespace, resource.spec.target)
        rounds[fleets.round_of(loaded)][realm].append(loaded)

    def reconcile(loaded: LoadedResource) -> None:
        with ctx.books.held():
            gate = fleets.gate(loaded)
            before = previous(loaded)
            status = _lifecycle(
                ctx, loaded, census.get(str(loaded.key)), report, reconciled, before, gate
            )
            fleets.record(loaded, status)

    def flush() -> None:  # a verdict held back while an Apply runs (writeback/batch.py)
        if ctx.batch.overdue():
            with ctx.books.held():
                ctx.batch.flush_overdue()

    for index in sorted(rounds):
        in_parallel(list(rounds[index].values()), reconcile, workers, tick=flush)
    with ctx.books.held():
        report.fleets = fleets.finish(ctx.status_branch, ctx.batch, ctx.log)


def _lifecycle(
    ctx: PassContext,
    loaded: LoadedResource,
    blocked: tuple[Reason, str] | None,
    report: PassReport,
    reconciled: dict[str, tuple[str, float]],
    previous: Status | None,
    gate: Gate | None = None,
) -> Status:
    """One resource's lifecycle from its ``previous`` status (a fleet member's through its
    rollout ``gate``), its verdict staged and its next pass scheduled; the status it
    reached."""
    resource = loaded.resource
    assert isinstance(resource, (DatabaseSchema, DatabaseMigration))
    meta = resource.metadata
    key = f"{meta.namespace}/{meta.name}"
    status: Status
    try:
        lifecycle: SchemaPass | MigrationPass
        if isinstance(resource, DatabaseSchema):
            assert previous is None or isinstance(previous, DatabaseSchemaStatus)
            lifecycle = SchemaPass(loaded, ctx, previous)
        else:
            assert previous is None or isinstance(previous, DatabaseMigrationStatus)
            lifecycle = MigrationPass(loaded, ctx, previous)
        lifecycle.gate = gate
        status = lifecycle.run(blocked)
    except Exception as error:  # one resource's fault never stops the others
        ctx.log(f"{key}: the pass failed: {type(error).__name__}: {error}")
        status = _failed(ctx, loaded, previous, error)
    report.statuses[key] = (resource.kind, status)
    spec = resource.spec
    failed = status.phase.value == SharedPhase.FAILED
    wait = spec.retry_interval if failed else spec.interval
    ctx.state.schedule(str(meta.uid), time.time() + wait)
    reconciled[key] = (str(meta.uid), spec.retry_interval)
    ctx.log(f"{key}: {status.phase.value} ({_ready_reason(status)})")
    return status


def _commit(ctx: PassContext, reconciled: dict[str, tuple[str, float]]) -> None:
    """The pass's status commit. If it cannot be pushed, the verdicts are not recorded: each
    resource it held is due again after its ``retryInterval``, and the pass goes on."""
    staged = [change.key for change in ctx.batch.staged.values()]
    try:
        written = ctx.batch.commit()
    except (SeshatError, ValueError, git.GitCommandError) as error:
        ctx.log(f"the verdicts of {', '.join(staged)} were not recorded: {error}")
        for key in staged:
            if key in reconciled:
                uid, wait = reconciled[key]
                ctx.state.schedule(uid, time.time() + wait)
        return
    if written.commit is not None:
        ctx.log(f"status commit {written.commit[:12]}")


def _review(
    reviews: Reviews,
    status_branch: StatusBranch,
    kind: str,
    namespace: str,
    name: str,
    status: Status,
    revision: str,
    log: Callable[[str], None],
) -> None:
    """Publish the resource's review; a forge or push problem never fails the pass."""
    sql, impact = None, []
    if isinstance(status, DatabaseSchemaStatus) and status.plan is not None:
        _, sql_path = plan_paths(namespace, name, status.plan.id)  # by the id, never a path
        data = status_branch.read(sql_path)
        sql = data.decode("utf-8", errors="replace") if data is not None else None
        impact = impact_lines(status_branch.read(impact_path(namespace, name, status.plan.id)))
    try:
        outcome = reviews.after_verdict(kind, namespace, name, status, sql, revision, impact)
    except (SeshatError, git.GitCommandError, ValueError) as error:
        log(f"{namespace}/{name}: review not published: {error}")
        return
    if outcome is not None and outcome.pull_request is not None:
        log(f"{namespace}/{name}: review {outcome.pull_request.url}")


def _blocked_by_problems(ctx: PassContext, report: PassReport) -> None:
    """Each invalid DatabaseSchema or DatabaseMigration declaration gets its own
    Blocked/ConfigurationError."""
    from gitops.repo.uids import GitHistoryUids

    by_key: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for problem in ctx.repository.problems:
        found = problem.resource
        if found is not None and found.kind in ("DatabaseSchema", "DatabaseMigration"):
            by_key[(found.kind, found.namespace, found.name)].append(str(problem))
    if not by_key:
        return
    uids = GitHistoryUids(ctx.repository.root, ctx.repository.config.spec.paths)
    for (kind, namespace, name), problems in sorted(by_key.items()):
        message = "; ".join(problems)[:1024]
        try:
            ref = ResourceRef(
                kind=kind,
                namespace=namespace,
                name=storable_name(name),
                uid=uids.uid_for(ResourceKey(kind, namespace, name)),
            )
        except (ValueError, SeshatError):
            # A name that cannot be a status file (validate says why): reported, not stored.
            ctx.log(f"{namespace}/{name[:64]}: not reconciled: {message}")
            continue
        previous = _previous(ctx.status_branch, namespace, name, kind)
        model = DatabaseMigrationStatus if kind == "DatabaseMigration" else DatabaseSchemaStatus
        status = model.model_validate(
            {
                "phase": SharedPhase.BLOCKED,
                "conditions": summary_conditions(
                    SharedPhase.BLOCKED,
                    Reason.CONFIGURATION_ERROR.value,
                    message,
                    ctx.now(),
                    previous.conditions if previous else [],
                ),
            }
        )
        files = {status_path(namespace, name): status_bytes(ref, status)}
        try:
            ctx.batch.stage(status_change(f"{kind} {namespace}/{name}", previous, status, files))
        except ValueError as error:
            ctx.log(f"{namespace}/{name}: the Blocked status is not recorded: {error}")
        report.statuses[f"{namespace}/{name}"] = (kind, status)


def _failed(
    ctx: PassContext, loaded: LoadedResource, previous: Status | None, error: Exception
) -> Status:
    """A resource whose pass raised something unexpected: Failed/InternalError, staged for
    the pass's status commit (retried on ``retryInterval``), never a stopped pass."""
    resource = loaded.resource
    assert isinstance(resource, (DatabaseSchema, DatabaseMigration))
    meta = resource.metadata
    model = (
        DatabaseMigrationStatus if resource.kind == "DatabaseMigration" else DatabaseSchemaStatus
    )
    message = f"{type(error).__name__}: {error}"[:1024]
    carried = (
        previous.model_dump(by_alias=True, exclude={"phase", "conditions"}) if previous else {}
    )
    status = model.model_validate(
        carried
        | {
            "phase": SharedPhase.FAILED,
            "conditions": summary_conditions(
                SharedPhase.FAILED,
                Reason.INTERNAL_ERROR.value,
                message,
                ctx.now(),
                previous.conditions if previous else [],
            ),
        }
    )
    ref = ResourceRef(
        kind=resource.kind, namespace=meta.namespace, name=meta.name, uid=str(meta.uid)
    )
    files = {status_path(meta.namespace, meta.name): status_bytes(ref, status)}
    try:
        ctx.batch.stage(
            status_change(f"{resource.kind} {ref.namespace}/{ref.name}", previous, status, files)
        )
    except ValueError as stage_error:
        ctx.log(f"{meta.namespace}/{meta.name}: the Failed status is not recorded: {stage_error}")
    return status
