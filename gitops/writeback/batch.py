"""One status commit per pass: every verdict a pass decided, committed together.

A pass *stages* each resource's verdict (its status file, its plan files and its safety
records) as a :class:`Change`; :meth:`Batch.commit` at the end of the pass makes one commit
of every staged change whose files differ from the branch's tip or that carries a record,
and no commit when there is none. The one exception is the dispatch marker an Apply needs
before it starts: :meth:`Batch.commit` with the ``marker`` pushes it at once, together with
every verdict staged so far. A verdict staged while that Apply runs waits at most
:attr:`Batch.hold` seconds (2): it usually goes out with the next Apply's marker, which its
worker pushes a moment later; if none comes, :meth:`Batch.flush_overdue` (called by the
pass twice a second) or the next :meth:`Batch.stage` commits it. So an Apply that runs for
an hour never holds other resources' verdicts back, and a rollout of a thousand Applies on
two workers makes about one commit per Apply, not two.

The message lists each change on a line of its own (the subject, when there is one), sorted
by resource, so the commit does not depend on which worker finished first::

    seshat: 2 resources changed

    shop/ledger: InSync -> Blocked (ChecksumModified)
    shop/orders: AwaitingApproval -> InSync

    Seshat-Resource: DatabaseMigration shop/ledger
    Seshat-Phase: Blocked
    Seshat-Resource: DatabaseSchema shop/orders
    Seshat-Phase: InSync
    Seshat-Source-Revision: 0123abcd...
    Seshat-Record: {...}
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import git

from gitops.resources.status import ConditionType, DatabaseMigrationStatus, DatabaseSchemaStatus
from gitops.writeback.bare import blob_id, safe_path
from gitops.writeback.commits import ResourceTrailers, Trailers
from gitops.writeback.ledger import AnyRecord
from gitops.writeback.status_branch import PushRejected, StatusBranch, Written
from runner.errors import SeshatError

__all__ = ["Batch", "Change", "change_lines", "shown", "status_change"]


def shown(phase: str, reason: str) -> str:
    """How a change line shows a verdict: ``InSync``, ``Blocked (ProtectedTable)``."""
    return phase if reason in ("", phase) else f"{phase} ({reason})"


@dataclass(frozen=True, slots=True)
class Change:
    """One resource's part of a status commit."""

    resource: str  # "DatabaseSchema shop/orders", as trailers and safety records name it
    phase: str  # the phase this pass decided
    before: str | None  # the verdict the status file held when the pass read it, shown()
    after: str  # the verdict this pass decided, shown()
    plan: str | None = None  # the current plan's id, if any
    files: Mapping[str, bytes | None] = field(default_factory=dict)  # None deletes
    records: tuple[AnyRecord, ...] = ()
    updated: tuple[str, ...] = ()  # the status fields that changed besides the verdict

    @property
    def key(self) -> str:
        return self.resource.partition(" ")[2]

    def line(self) -> str:
        """``shop/orders: AwaitingApproval -> InSync``; ``shop/orders: InSync`` for a first
        status; ``shop/orders: InSync; updated drift`` when the verdict stayed."""
        if self.before is None:
            return f"{self.key}: {self.after}"
        if self.before != self.after:
            return f"{self.key}: {self.before} -> {self.after}"
        what = f"; updated {', '.join(self.updated)}" if self.updated else ""
        return f"{self.key}: {self.after}{what}"

    def then(self, later: Change) -> Change:
        """This change followed by ``later`` of the same resource, as one change."""
        assert later.resource == self.resource
        return replace(
            later,
            before=self.before,
            files={**self.files, **later.files},
            records=self.records + later.records,
            updated=tuple(dict.fromkeys(self.updated + later.updated)),
        )


class Batch:
    """The changes a pass staged on ``branch`` and has not committed yet.

    Not thread-safe: a pass's workers use it while they hold the pass's books
    (:class:`~gitops.reconcile.workers.Books`)."""

    hold: float = 2.0
    """Seconds a verdict staged while another resource's Apply runs may wait for a commit."""

    def __init__(
        self,
        branch: StatusBranch,
        revision: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.branch = branch
        self.revision = revision  # the declarations' commit the pass read
        self.staged: dict[str, Change] = {}
        self.applying: set[str] = set()  # resources whose marker is out, verdict not staged
        self.clock = clock
        self.held_since: float | None = None  # when the oldest verdict held back was staged

    def stage(self, change: Change) -> None:
        """Add ``change`` to the next commit (after the resource's earlier one, if any); a
        path Seshat may not write is refused here (ValueError), never in the commit.

        While another resource's Apply runs (its marker pushed, its verdict not staged: a
        pass whose workers run side by side), the change waits at most :attr:`hold`
        seconds for the next commit (see the module's documentation); if that commit
        fails, it stays staged for the one after."""
        for path in change.files:
            safe_path(path)
        earlier = self.staged.get(change.resource)
        self.staged[change.resource] = earlier.then(change) if earlier else change
        self.applying.discard(change.resource)
        if self.applying and self.held_since is None:
            self.held_since = self.clock()
        self.flush_overdue()

    def overdue(self) -> bool:
        """Whether a verdict staged while an Apply runs has waited :attr:`hold` seconds."""
        since = self.held_since
        return bool(self.applying) and since is not None and self.clock() - since >= self.hold

    def flush_overdue(self) -> None:
        """Commit what was staged if it is :meth:`overdue`; a failed push leaves it staged."""
        if self.overdue():
            with contextlib.suppress(SeshatError, ValueError, git.GitCommandError):
                self.commit()

    def commit(self, marker: Change | None = None) -> Written:
        """Commit and push everything staged (and the dispatch ``marker``, when given) as
        one commit; nothing is committed when no file differs and there is no record.

        Raises what :meth:`StatusBranch.publish` raises; the staged changes (never the
        marker) are then kept for the next commit."""
        changes = dict(self.staged)
        if marker is not None:
            for path in marker.files:
                safe_path(path)
            earlier = changes.get(marker.resource)
            changes[marker.resource] = earlier.then(marker) if earlier else marker
        # A commit built on this controller's own last push needs no fetch first: its push
        # is refused if the branch moved since, and then (or when nothing differs from that
        # tip: someone may have overwritten a file since) it is all decided again on a
        # fetched tip.
        written: Written | None = None
        if self.branch.tip_is_own_push:
            with contextlib.suppress(PushRejected):
                written = self._publish(changes, attempts=1)
        if written is None:
            self.branch.sync()
            written = self._publish(changes) or Written(None, 0)
        self.staged, self.held_since = {}, None
        if marker is not None:
            self.applying.add(marker.resource)
        return written

    def _publish(self, changes: Mapping[str, Change], attempts: int = 5) -> Written | None:
        """One commit of ``changes`` on the branch's tip as it is; None when none differs."""
        listed = self._listed(changes)
        if not listed:
            return None
        lines = [c.line() for c in listed]
        subject = lines[0] if len(lines) == 1 else f"seshat: {len(lines)} resources changed"
        trailers = Trailers(
            tuple(ResourceTrailers(c.resource, c.phase, c.plan) for c in listed),
            self.revision,
        )
        files = {path: data for c in listed for path, data in c.files.items()}
        records = [r for c in listed for r in c.records]
        return self.branch.publish(
            files,
            subject,
            trailers,
            "\n".join(lines) if len(lines) > 1 else "",
            records=records,
            attempts=attempts,
            synced=True,  # the caller fetched it, or it is this controller's own last push
        )

    def _listed(self, changes: Mapping[str, Change]) -> list[Change]:
        """The changes to commit on the branch's tip: those with a record or a file that is
        not there as it is, sorted by resource, so a commit does not depend on which worker
        finished first."""
        # What is on the branch, for every staged file at once (a pass of a thousand fleet
        # members stages a thousand unchanged status files).
        ids = self.branch.blob_ids([path for c in changes.values() for path in c.files])
        return sorted(
            (c for c in changes.values() if c.records or _differs(c, ids)),
            key=lambda c: (c.key, c.resource),
        )


def _differs(change: Change, ids: Mapping[str, str]) -> bool:
    """Whether a file of ``change`` is not on the branch as it is (``ids``: the object id
    of each regular file there)."""
    for path, data in change.files.items():
        found = ids.get(path)
        if data is None:  # a deletion: a change when the file is there
            if found is not None:
                return True
        elif found is None or blob_id(data, found) != found:
            return True
    return False


def status_change(
    resource: str,
    previous: DatabaseSchemaStatus | DatabaseMigrationStatus | None,
    status: DatabaseSchemaStatus | DatabaseMigrationStatus,
    files: Mapping[str, bytes | None],
    records: Sequence[AnyRecord] = (),
) -> Change:
    """The change from ``previous`` (the status the pass read) to ``status``, whose status
    file (and plan files) are ``files``."""
    before = None if previous is None else shown(previous.phase.value, _ready(previous))
    updated: tuple[str, ...] = ()
    if previous is not None:
        old, new = _fields(previous), _fields(status)
        differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        updated = tuple("message" if k == "conditions" else k for k in differ if k != "phase")
    return Change(
        resource=resource,
        phase=status.phase.value,
        before=before,
        after=shown(status.phase.value, _ready(status)),
        plan=status.plan.id if status.plan is not None else None,
        files=dict(files),
        records=tuple(records),
        updated=updated,
    )


def _ready(status: DatabaseSchemaStatus | DatabaseMigrationStatus) -> str:
    return next((c.reason for c in status.conditions if c.type == ConditionType.READY), "")


def _fields(status: DatabaseSchemaStatus | DatabaseMigrationStatus) -> dict[str, object]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def change_lines(message: str) -> list[str]:
    """The change lines of a status commit's ``message``: its subject when it changed one
    resource, else its body's lines (what :meth:`Batch.commit` wrote)."""
    paragraphs = message.strip().split("\n\n")
    subject = paragraphs[0].strip()
    if len(paragraphs) > 2 and subject.startswith("seshat: "):
        return [line.strip() for line in paragraphs[1].splitlines() if line.strip()]
    return [subject]
