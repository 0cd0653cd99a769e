"""Review branches ``seshat/review/<namespace>/<name>`` and their pull requests.

When a plan awaits approval, or a resource becomes Blocked or Failed, Seshat pushes the
review branch (branched from the declarations' commit) with one file,
``.seshat/reviews/<namespace>/<name>.md``: the verdict, the plan id, its SQL and hazards, and
the exact ``seshat approve`` command. With ``reviews.forge: github`` it opens one pull request
per resource (or updates it), and closes it when the resource is InSync again. Approvers may
push their signed approval onto the review branch and merge the pull request.

The branch is only ever fast-forwarded: a newer verdict is a new commit on top (a person's
commits on it are kept), never a force-push.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gitops.resources.config import ConfigSpec, Forge
from gitops.resources.status import (
    ConditionType,
    DatabaseMigrationStatus,
    DatabaseSchemaStatus,
    FleetStatus,
    RejectedApproval,
    SharedPhase,
)
from gitops.reviews.github import GitHub, PullRequest
from gitops.reviews.markdown import MAX_BODY, code, cut, fence
from gitops.writeback.bare import BareClone, Identity
from gitops.writeback.commits import Trailers, message
from gitops.writeback.status_files import plan_paths
from runner.digests import digest
from runner.errors import CanNotRunError
from runner.protocol.results import HistoryVerdict

__all__ = [
    "ReviewOutcome",
    "Reviews",
    "fleet_review_body",
    "rejection_comment",
    "review_body",
    "review_branch",
]

_REVIEWED = (SharedPhase.AWAITING_APPROVAL, SharedPhase.BLOCKED, SharedPhase.FAILED)
Status = DatabaseSchemaStatus | DatabaseMigrationStatus


CUT_NOTE = (
    "*This text is cut to the forge's size limit: the status file and the plan on the status "
    "branch have all of it (seshat status, seshat plan show).*\n"
)


def review_branch(namespace: str, name: str) -> str:
    return f"seshat/review/{namespace}/{name}"


def fleet_review_body(key: str, status: FleetStatus, revision: str, limit: int = MAX_BODY) -> str:
    """A fleet's review text: its state, each distinct plan with the members it covers and
    the command approving it (once, for all of them), the steps and who needs attention."""
    lines = [f"## Fleet {code(key)}: {status.phase}"]
    if status.message:
        lines += ["", fence(status.message, "text")]
    lines += ["", f"Declarations at {code(revision)}. {status.members} members: "]
    lines[-1] += ", ".join(f"{count} {code(phase)}" for phase, count in status.phases.items())
    for plan in status.plans:
        names = ", ".join(plan.names) + (" ..." if plan.members > len(plan.names) else "")
        state = "approved" if plan.approved else "awaiting approval"
        lines += [
            "",
            f"### Fleet plan {code(plan.id)}: {state}",
            "",
            f"{plan.members} member(s): {code(names, 2000)}; {plan.statements} statements"
            + ("; **destructive**" if plan.destructive else ""),
        ]
        if not plan.approved:
            first = f"{key}/{plan.names[0]}" if plan.names else key
            lines += [
                "",
                f"The plan (each member's is checked against its own id): "
                f"`seshat plan show {first}`. Approve it for every member it covers:",
                "",
                fence(
                    f"seshat approve {key} --plan {plan.id} --key ~/.ssh/id_ed25519\n"
                    "git add approvals/ && git commit -m 'Approve' && git push",
                    "sh",
                ),
            ]
    if status.steps:
        lines += ["", "**Rollout**:"]
        lines += [
            f"- step {s.index}: {code(s.state)}, {s.in_sync}/{s.members} InSync"
            for s in status.steps
        ]
    if status.attention:
        lines += ["", "**Needs attention**:"]
        lines += [
            f"- {code(a.member)}: {code(a.phase)} ({code(a.reason)})" for a in status.attention
        ]
    return cut("\n".join(lines) + "\n", limit, CUT_NOTE)


def review_body(
    key: str,
    status: Status,
    sql: str | None,
    revision: str,
    status_branch: str = "seshat/status",
    limit: int = MAX_BODY,
    impact: Sequence[str] = (),
) -> str:
    """The review text (and pull request body) of one verdict reached on the declarations'
    commit ``revision``: Seshat's own words around
    fenced blocks holding everything that may come from an artifact or a server
    (:mod:`gitops.reviews.markdown`), cut to ``limit`` characters."""
    ready = next((c for c in status.conditions if c.type == ConditionType.READY), None)
    lines = [
        f"## {code(key)}: {status.phase.value}" + (f" ({code(ready.reason)})" if ready else "")
    ]
    if ready is not None and ready.message:
        lines += ["", fence(ready.message, "text")]
    lines += ["", f"Declarations at {code(revision)}."]
    history = status.history if isinstance(status, DatabaseMigrationStatus) else None
    if history is not None:
        current = code(history.current_version or "-")
        lines += ["", f"**History**: {code(history.verdict)}, current {current}"]
        if history.involved_versions and history.verdict is not HistoryVerdict.READY:
            lines.append(f"Versions involved: {code(', '.join(history.involved_versions))}")
    run = status.unresolved_run if isinstance(status, DatabaseMigrationStatus) else None
    if run is not None:
        lines += [
            "",
            f"**Unresolved run** {code(run.operation_id)} ({code(run.outcome)}): repair the "
            "database, then acknowledge it:",
            "",
            fence(
                f"seshat acknowledge {key} --operation {run.operation_id} --key ~/.ssh/id_ed25519",
                "sh",
            ),
        ]
    if status.rejected_approvals:
        lines += ["", "**Approvals not accepted** (the status's `rejectedApprovals`):"]
        lines += [f"- {code(r.file)}: {code(r.reason.value)}" for r in status.rejected_approvals]
    tail: list[str] = []
    if status.plan is not None and status.phase.value == SharedPhase.AWAITING_APPROVAL:
        tail = [
            "",
            "Approve exactly this plan:",
            "",
            fence(
                f"seshat approve {key} --plan {status.plan.id} --key ~/.ssh/id_ed25519\n"
                "git add approvals/ && git commit -m 'Approve' && git push",
                "sh",
            ),
        ]
    if status.plan is not None and history is not None:
        pending = ", ".join(history.pending_versions)
        lines += ["", f"**Plan** {code(status.plan.id)}: apply, in order, {code(pending, 2000)}"]
    elif status.plan is not None:
        plan = status.plan
        lines += [
            "",
            f"**Plan** {code(plan.id)}: {plan.statements} statements"
            + ("; **destructive**" if plan.destructive else "")
            + (
                f"; privileges: {code(', '.join(plan.privilege_changes))}"
                if plan.privilege_changes
                else ""
            ),
        ]
        if impact:
            lines += [
                "",
                "**Impact** (measured read-only on the database; observations beside the "
                "plan, not part of its id):",
                "",
                fence("\n".join(impact), "text"),
            ]
        if sql:
            namespace, _, name = key.partition("/")
            where = plan_paths(namespace, name, plan.id)[1]
            room = limit - len("\n".join(lines + tail)) - 400
            lines += ["", _fitted_sql(sql, room, where, status_branch)]
    return cut("\n".join(lines + tail).rstrip() + "\n", limit, CUT_NOTE)


def _fitted_sql(sql: str, room: int, where: str, branch: str) -> str:
    """The plan's SQL in a fence, or as much of it as fits ``room`` characters, cut at a line,
    with where to read the whole of it."""
    whole = fence(sql.rstrip(), "sql")
    if len(whole) <= room:
        return whole
    kept: list[str] = []
    used = 0
    for line in sql.splitlines():
        if used + len(line) + 1 > max(room - 200, 0):
            break
        kept.append(line)
        used += len(line) + 1
    return (
        fence("\n".join(kept), "sql")
        + f"\n\nThe plan is cut here ({used} of {len(sql)} characters): the whole of it is "
        f"{code(where)} on the {code(branch)} branch (seshat plan show)."
    )


@dataclass(frozen=True, slots=True)
class ReviewOutcome:
    branch: str
    commit: str | None
    pull_request: PullRequest | None


class Reviews:
    """Publishes review branches (and pull requests) for one repository."""

    def __init__(
        self,
        workdir: Path,
        remote_url: str,
        config: ConfigSpec,
        environment: dict[str, str] | None = None,
    ) -> None:
        self.workdir, self.remote_url, self.config = workdir, remote_url, config
        self.clone = BareClone(workdir, remote_url, environment)
        self.forge: GitHub | None = None
        reviews = config.reviews
        if reviews.forge is Forge.GITHUB and reviews.repository and reviews.token_from_env:
            token = os.environ.get(reviews.token_from_env, "")
            if token:
                self.forge = GitHub(reviews.repository, token, reviews.api_url)

    def close(self) -> None:
        self.clone.close()

    def after_verdict(
        self,
        kind: str,
        namespace: str,
        name: str,
        status: Status,
        sql: str | None,
        revision: str,
        impact: Sequence[str] = (),
    ) -> ReviewOutcome | None:
        """Publish, update or close the review of one resource after a pass that read the
        declarations at ``revision``."""
        key, branch = f"{namespace}/{name}", review_branch(namespace, name)
        if status.phase.value == SharedPhase.IN_SYNC:
            closed = self.forge.close(branch, f"{code(key)} is InSync.") if self.forge else None
            return ReviewOutcome(branch, None, closed) if closed else None
        if status.phase.value not in _REVIEWED:
            return None
        body = review_body(key, status, sql, revision, self.config.status_branch, impact=impact)
        plan = status.plan.id if status.plan else None
        outcome = self._publish(f"{kind} {key}", status.phase.value, plan, revision, body)
        if outcome.pull_request is not None:
            self._comment_rejections(outcome.pull_request, key, status)
        return outcome

    def _publish(
        self, resource: str, phase: str, plan: str | None, revision: str, body: str
    ) -> ReviewOutcome:
        """Commit ``body`` to the review branch of ``resource`` ("Kind ns/name") and open or
        update its pull request."""
        key = resource.partition(" ")[2]
        namespace, _, name = key.partition("/")
        branch = review_branch(namespace, name)
        self.clone.fetch(branch, self.config.branch)
        start = self.clone.tip(branch) or revision
        text = message(f"Review {key}: {phase}", "", Trailers.one(resource, phase, plan, revision))
        author = self.config.commit.author
        path = f".seshat/reviews/{namespace}/{name}.md"
        commit = self.clone.commit(
            start, {path: body.encode("utf-8")}, text, Identity(author.name, author.email)
        )
        if commit is not None and not self.clone.push(commit, branch):
            raise CanNotRunError(f"the review branch {branch} moved during the pass; next pass")
        pull = None
        if self.forge is not None:
            title = f"Seshat: {key} {phase}"
            pull = self.forge.open_or_update(branch, self.config.branch, title, body)
        return ReviewOutcome(branch, commit, pull)

    def after_fleet(
        self, namespace: str, fleet: str, status: FleetStatus, revision: str
    ) -> ReviewOutcome | None:
        """Publish, update or close a fleet's review: one for the whole fleet, listing each
        distinct plan with the members it covers (never a review per member)."""
        key, branch = f"{namespace}/{fleet}", review_branch(namespace, fleet)
        if status.phase == "InSync":
            closed = self.forge.close(branch, f"{code(key)} is InSync.") if self.forge else None
            return ReviewOutcome(branch, None, closed) if closed else None
        if status.phase not in ("AwaitingApproval", "Halted", "Paused"):
            return None
        body = fleet_review_body(key, status, revision)
        return self._publish(f"DatabaseFleet {key}", status.phase, None, revision, body)

    def _comment_rejections(self, pull: PullRequest, key: str, status: Status) -> None:
        """One comment per approval newly rejected for the current plan: a comment carries
        a hidden marker naming (plan, file, reason), so a later pass that rejects the same
        file for the same reason finds it in a comment of its own and says nothing again.
        Only comments Seshat's identity wrote count (the marker is built from public data:
        anyone could post it to silence a rejection); when the identity cannot be learned,
        the rejections are posted again."""
        assert self.forge is not None
        rejected = status.rejected_approvals or []
        if not rejected:
            return
        own = self.forge.own_comments(pull.number)
        posted = "\n".join(str(comment.get("body") or "") for comment in own)
        plan = status.plan.id if status.plan is not None else None
        for entry in rejected:
            marker, text = rejection_comment(key, plan, entry)
            if marker not in posted:
                self.forge.comment(pull.number, text)


def rejection_comment(key: str, plan: str | None, entry: RejectedApproval) -> tuple[str, str]:
    """The hidden marker and the text of the comment saying that an approval file of ``key``
    was rejected for ``plan`` (the approval file's detail stays inside a fence: it may quote
    a signer's name or a comment from the repository)."""
    identity = digest(
        "review-rejected-approval",
        {"plan": plan, "file": entry.file, "reason": entry.reason.value},
    )
    marker = f"<!-- seshat:rejected-approval {identity} -->"
    lines = [
        marker,
        f"**Approval not accepted** for {code(key)}: {code(entry.file)} is "
        f"{code(entry.reason.value)}"
        + (f" (the current plan is {code(plan)})" if plan else "")
        + ".",
    ]
    if entry.detail:
        lines += ["", fence(entry.detail, "text")]
    lines += ["", 'See docs/operations.md, "Approvals, visibly", for what each reason means.']
    return marker, "\n".join(lines) + "\n"
