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
from dataclasses import dataclass
from pathlib import Path

from gitops.resources.config import ConfigSpec, Forge
from gitops.resources.status import DatabaseMigrationStatus, DatabaseSchemaStatus
from gitops.reviews.github import GitHub, PullRequest
from gitops.writeback.bare import BareClone, Identity
from gitops.writeback.commits import Trailers, message
from runner.errors import CanNotRunError

__all__ = ["ReviewOutcome", "Reviews", "review_body", "review_branch"]

_REVIEWED = ("AwaitingApproval", "Blocked", "Failed")
Status = DatabaseSchemaStatus | DatabaseMigrationStatus


def review_branch(namespace: str, name: str) -> str:
    return f"seshat/review/{namespace}/{name}"


def review_body(key: str, status: Status, sql: str | None) -> str:
    ready = next((c for c in status.conditions if c.type.value == "Ready"), None)
    lines = [
        f"## {key}: {status.phase.value}" + (f" ({ready.reason})" if ready else ""),
        "",
        ready.message if ready else "",
        "",
        f"Declarations at `{status.observed_revision}`.",
    ]
    history = status.history if isinstance(status, DatabaseMigrationStatus) else None
    if history is not None:
        lines += ["", f"**History**: {history.verdict}, current {history.current_version or '-'}"]
        if history.involved_versions and history.verdict != "ready":
            lines.append(f"Versions involved: {', '.join(history.involved_versions)}")
    run = status.unresolved_run if isinstance(status, DatabaseMigrationStatus) else None
    if run is not None:
        lines += [
            "",
            f"**Unresolved run** `{run.operation_id}` ({run.outcome}): repair the database, "
            "then acknowledge it:",
            "",
            "```sh",
            f"seshat acknowledge {key} --operation {run.operation_id} --key ~/.ssh/id_ed25519",
            "```",
        ]
    if status.plan is not None and history is not None:
        lines += [
            "",
            f"**Plan** `{status.plan.id}`: apply, in order, "
            + ", ".join(f"`{v}`" for v in history.pending_versions),
        ]
    elif status.plan is not None:
        plan = status.plan
        lines += [
            "",
            f"**Plan** `{plan.id}`: {plan.statements} statements"
            + ("; **destructive**" if plan.destructive else "")
            + (
                f"; privileges: {', '.join(plan.privilege_changes)}"
                if plan.privilege_changes
                else ""
            ),
        ]
        if sql:
            lines += ["", "```sql", sql.rstrip(), "```"]
    if status.plan is not None:
        plan = status.plan
        if status.phase.value == "AwaitingApproval":
            lines += [
                "",
                "Approve exactly this plan:",
                "",
                "```sh",
                f"seshat approve {key} --plan {plan.id} --key ~/.ssh/id_ed25519",
                "git add approvals/ && git commit -m 'Approve' && git push",
                "```",
            ]
    return "\n".join(lines).rstrip() + "\n"


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
        self, kind: str, namespace: str, name: str, status: Status, sql: str | None
    ) -> ReviewOutcome | None:
        """Publish, update or close the review of one resource after its pass."""
        key, branch = f"{namespace}/{name}", review_branch(namespace, name)
        if status.phase.value == "InSync":
            closed = self.forge.close(branch, f"{key} is InSync.") if self.forge else None
            return ReviewOutcome(branch, None, closed) if closed else None
        if status.phase.value not in _REVIEWED:
            return None
        body = review_body(key, status, sql)
        self.clone.fetch(branch, self.config.branch)
        start = self.clone.tip(branch) or status.observed_revision
        plan = status.plan.id if status.plan else None
        text = message(
            f"Review {key}: {status.phase.value}",
            "",
            Trailers(f"{kind} {key}", status.phase.value, plan, status.observed_revision),
        )
        author = self.config.commit.author
        path = f".seshat/reviews/{namespace}/{name}.md"
        commit = self.clone.commit(
            start, {path: body.encode("utf-8")}, text, Identity(author.name, author.email)
        )
        if commit is not None and not self.clone.push(commit, branch):
            raise CanNotRunError(f"the review branch {branch} moved during the pass; next pass")
        pull = None
        if self.forge is not None:
            title = f"Seshat: {key} {status.phase.value}"
            pull = self.forge.open_or_update(branch, self.config.branch, title, body)
        return ReviewOutcome(branch, commit, pull)
