"""``seshat preview``: the verdict a merge would reach, for each resource a pull request
changes, computed read-only (docs/preview.md).

Nothing is written anywhere: the work tree is read through throwaway clones
(:mod:`.revisions`), the status branch as blobs, the state file and runner work folders
live in a temporary folder removed at the end, no lease is taken, no approval consumed, and
the runner runs Resolve, Verify, Observe, Plan and History only (:mod:`.lifecycles`).

The head is what is judged, so it supplies nothing that judges it: the head's declarations
are read with the base's ``seshat.yaml``, and every pass's trust anchors (policies, the keys
and signers they name) are the base's (docs/preview.md, "What comes from the base, what from
the head"). The head's changes to them are listed in :attr:`PreviewReport.trust_changes`.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from gitops.execution.executor import Executor, LocalExecutor
from gitops.preview.changes import ResourceChange, changed_resources, trust_changes
from gitops.preview.lifecycles import (
    MigrationPreviewPass,
    PlanPreview,
    SchemaPreviewPass,
    preview_verdict,
    resolved_digest,
)
from gitops.preview.revisions import Revisions
from gitops.reconcile.lifecycle import PassContext
from gitops.reconcile.passes import realm_census
from gitops.reconcile.state import StateFile
from gitops.repo.loader import LoadedResource, Repository
from gitops.repo.problems import ResourceKey
from gitops.resources.database import Target
from gitops.resources.migration import DatabaseMigration
from gitops.resources.schema import DatabaseSchema, DevDatabase
from gitops.resources.status import (
    DatabaseMigrationStatus,
    DatabaseSchemaStatus,
    SharedPhase,
    SourceStatus,
)
from gitops.writeback.batch import Batch
from gitops.writeback.status_branch import StatusBranch
from gitops.writeback.status_files import read_status, status_path
from runner.protocol.messages import RegistrySettings

__all__ = ["Outcome", "PreviewReport", "ResourcePreview", "run_preview"]

Database = DatabaseSchema | DatabaseMigration
Status = DatabaseSchemaStatus | DatabaseMigrationStatus
Pass = SchemaPreviewPass | MigrationPreviewPass


class Outcome(StrEnum):
    """What a merge would do to one resource, as the preview tells it."""

    IN_SYNC = "InSync"  # the database already matches
    PLAN = "Plan"  # a plan, awaiting approval or applied automatically
    BLOCKED = "Blocked"
    FAILED = "Failed"  # an operation failed: the preview of this resource could not run
    SUSPENDED = "Suspended"
    TARGET_CHANGED = "TargetChanged"  # the head changes spec.target: shown, never planned
    NOT_PREVIEWED = "NotPreviewed"  # no database the preview may reach (docs/preview.md)
    REMOVED = "Removed"


_BY_PHASE = {
    SharedPhase.IN_SYNC.value: Outcome.IN_SYNC,
    SharedPhase.BLOCKED.value: Outcome.BLOCKED,
    SharedPhase.FAILED.value: Outcome.FAILED,
    SharedPhase.SUSPENDED.value: Outcome.SUSPENDED,
}


@dataclass(frozen=True, slots=True)
class ResourcePreview:
    """One changed resource: what changed, the verdict, and the plan (when one was made)."""

    change: ResourceChange
    outcome: Outcome
    phase: str  # the lifecycle phase a pass would end in ("" when none ran)
    reason: str
    message: str
    plan: PlanPreview | None = None


@dataclass(frozen=True, slots=True)
class PreviewReport:
    base: str
    head: str
    resources: tuple[ResourcePreview, ...]
    problems: tuple[str, ...] = ()  # problems of the head's changed declaration files
    trust_changes: tuple[str, ...] = ()
    """The head's changes to the trust anchors: shown for review, never used to judge it."""

    @property
    def exit_status(self) -> int:
        """2 when a resource's preview could not run, 1 when one would be Blocked (or a
        changed declaration has problems), else 0."""
        outcomes = {r.outcome for r in self.resources}
        if Outcome.FAILED in outcomes:
            return 2
        if Outcome.BLOCKED in outcomes or self.problems:
            return 1
        return 0


def run_preview(
    worktree: Path,
    base: str,
    head: str = "HEAD",
    *,
    executor: Executor | None = None,
    registry: RegistrySettings | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> PreviewReport:
    """Preview the merge of ``head`` into ``base`` (revisions of the Git work tree
    ``worktree``). Raises :class:`~runner.errors.CanNotRunError` when it cannot run at all."""
    revisions = Revisions.of(worktree, base, head)
    paths = revisions.changed_paths()
    with tempfile.TemporaryDirectory(prefix="seshat-preview-") as folder:
        work = Path(folder)
        base_repo = revisions.load(revisions.base, work / "base")
        # The head read with the base's seshat.yaml: its settings are a trust anchor too.
        head_repo = _base_uids(
            revisions.load(revisions.head, work / "head", base_repo.config), base_repo
        )
        session = _Session(revisions, base_repo, head_repo, work, executor, registry, log)
        try:
            changes = changed_resources(
                base_repo,
                head_repo,
                paths,
                recorded=session.recorded_digest,
                resolve=session.resolve,
            )
            previews = tuple(session.preview(change) for change in changes)
        finally:
            session.close()
    known = {str(p) for p in base_repo.problems}
    problems = tuple(
        str(p) for p in head_repo.problems if p.path in paths and str(p) not in known
    )  # the problems the pull request brings (a base that has them already is not its fault)
    return PreviewReport(
        revisions.base,
        revisions.head,
        previews,
        problems,
        trust_changes(base_repo, head_repo, paths),
    )


def _base_uids(head: Repository, base: Repository) -> Repository:
    """The head's resources with the uids the merge gives them: a resource the base declares
    keeps the base's uid (the merge commit's first parent is the base); one the pull request
    introduces keeps the head's, which the merge commit will replace."""
    resources = []
    for loaded in head.resources:
        before = base.find(loaded.key.kind, loaded.key.namespace, loaded.key.name)
        if before is not None:
            meta = loaded.resource.metadata.model_copy(update={"uid": before.resource.metadata.uid})
            loaded = dataclasses.replace(
                loaded, resource=loaded.resource.model_copy(update={"metadata": meta})
            )
        resources.append(loaded)
    return dataclasses.replace(head, resources=tuple(resources))


class _Session:
    """One preview's passes over the head's repository, sharing one pass context."""

    def __init__(
        self,
        revisions: Revisions,
        base: Repository,
        head: Repository,
        work: Path,
        executor: Executor | None,
        registry: RegistrySettings | None,
        log: Callable[[str], None],
    ) -> None:
        self.revisions, self.base, self.head = revisions, base, head
        self.status_ref = revisions.status_ref(base.config.spec.status_branch)
        self.state = StateFile(work / "state.sqlite")
        # Never synced, committed or pushed: the lifecycles need one to exist, and the
        # preview passes stop before anything that would write to it.
        self.status_branch = StatusBranch(
            work / "status.git", str(work / "nowhere"), "preview", base.config.spec.commit
        )
        self.ctx = PassContext(
            repository=head,
            revision=revisions.head,
            state=self.state,
            executor=executor or LocalExecutor(work / "operations"),
            status_branch=self.status_branch,
            batch=Batch(self.status_branch, revisions.head),
            work_dir=work,
            holder="seshat-preview",
            registry=registry or RegistrySettings(),
            log=log,
            trust_from=base,  # the head is judged with the base's trust anchors, never its own
        )
        self.census = realm_census(list(head.resources))
        self.passes: dict[ResourceKey, Pass | None] = {}

    def close(self) -> None:
        self.state.close()
        self.status_branch.close()

    def previous(self, loaded: LoadedResource) -> Status | None:
        if self.status_ref is None:
            return None
        data = self.revisions.status_file(
            self.status_ref, status_path(loaded.key.namespace, loaded.key.name)
        )
        if data is None:
            return None
        return read_status(data, loaded.key.kind)

    def recorded_digest(self, loaded: LoadedResource) -> str | None:
        """The artifact digest the status branch records for this resource, if any."""
        status = self.previous(loaded)
        source: SourceStatus | None = status.source if status is not None else None
        return source.digest if source is not None else None

    def resolve(self, loaded: LoadedResource) -> str | None:
        one = self.one(loaded)
        return resolved_digest(one) if one is not None else None

    def one(self, loaded: LoadedResource) -> Pass | None:
        """The preview pass of ``loaded`` (None: the base names no database it may reach)."""
        if loaded.key in self.passes:
            return self.passes[loaded.key]
        reach = self.reach(loaded)
        made: Pass | None = None
        if reach is not None:
            target, dev = reach
            previous = self.previous(loaded)
            if isinstance(loaded.resource, DatabaseSchema):
                assert previous is None or isinstance(previous, DatabaseSchemaStatus)
                made = SchemaPreviewPass(
                    loaded, self.ctx, previous, target, dev, self.base_procedural(loaded)
                )
            else:
                assert previous is None or isinstance(previous, DatabaseMigrationStatus)
                made = MigrationPreviewPass(loaded, self.ctx, previous, target)
        self.passes[loaded.key] = made
        return made

    def base_procedural(self, loaded: LoadedResource) -> bool:
        """Whether the base branch's declaration of ``loaded`` lets procedural statements of
        its desired schema run: a pull request's own ``proceduralSchema: true`` is reviewed
        by its merge, so its preview runs without it (and says so if it is refused)."""
        before = self.base.find(loaded.key.kind, loaded.key.namespace, loaded.key.name)
        declared = before.resource if before is not None else None
        return isinstance(declared, DatabaseSchema) and declared.spec.policy.procedural_schema

    def reach(self, loaded: LoadedResource) -> tuple[Target, DevDatabase | None] | None:
        """The target (and a schema's dev sandbox) the preview may use, from the base only:
        the base's own declaration of the resource, or, for a resource the pull request
        introduces, a base resource that names the same database reference (so the pull
        request cannot name a database or credential the base does not)."""
        resource = loaded.resource
        assert isinstance(resource, Database)
        before = self.base.find(loaded.key.kind, loaded.key.namespace, loaded.key.name)
        if before is not None:
            assert isinstance(before.resource, Database)
            return before.resource.spec.target, _dev(before.resource)
        target = resource.spec.target
        for other in self.base.resources:
            declared = other.resource
            if (
                isinstance(declared, Database)
                and other.key.namespace == loaded.key.namespace
                and declared.spec.target.engine == target.engine
                and declared.spec.target.url == target.url
            ):
                reached = target.model_copy(
                    update={"preview_url": declared.spec.target.preview_url}
                )
                dev = _dev(resource)
                known = [_dev(r.resource) for r in self.base.resources]
                return reached, dev if dev is not None and dev in known else None
        return None

    def preview(self, change: ResourceChange) -> ResourcePreview:
        if change.removed:
            return ResourcePreview(
                change,
                Outcome.REMOVED,
                "",
                "Removed",
                "the merge stops reconciling it; the database is left as it is",
            )
        if change.target_changed:
            return ResourcePreview(
                change,
                Outcome.TARGET_CHANGED,
                "",
                "TargetChanged",
                "the pull request changes spec.target; a preview reaches only the database "
                "the base branch declares, so this one is planned after the merge",
            )
        loaded = self.head.find(change.key.kind, change.key.namespace, change.key.name)
        assert loaded is not None
        one = self.one(loaded)
        if one is None:
            return ResourcePreview(
                change,
                Outcome.NOT_PREVIEWED,
                "",
                "NotPreviewed",
                "its database reference is not one the base branch declares; a preview "
                "reaches only databases the base names, so it is planned after the merge",
            )
        if one.spec.target.url.secret_key_ref is not None:
            return ResourcePreview(
                change,
                Outcome.NOT_PREVIEWED,
                "",
                "NotPreviewed",
                "the base's credential reference is a secretKeyRef, which a preview's local "
                "runner cannot read: declare spec.target.previewUrl (fromEnv or fromFile) "
                "with a read-only credential",
            )
        verdict = preview_verdict(one, self.census.get(str(loaded.key)))
        outcome = _BY_PHASE.get(verdict.phase, Outcome.PLAN)
        return ResourcePreview(
            change, outcome, verdict.phase, verdict.reason.value, verdict.message, one.planned
        )


def _dev(resource: object) -> DevDatabase | None:
    return resource.spec.dev if isinstance(resource, DatabaseSchema) else None
