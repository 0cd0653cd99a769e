"""Publishing a preview on a forge: one comment (or note) per pull request, and a check.

The comment carries a hidden marker (:data:`MARKER`); a later preview of the same pull
request finds it and edits it in place, so a pull request never collects a pile of
previews. The check follows the preview's exit status (0 success, 1 failure, 2 the preview
could not run).

GitHub: the comment is an issue comment; the check is a check run, which GitHub allows only
to the workflow's ``GITHUB_TOKEN`` or an App's token, so when the token may not create one
(a personal token: 403, or 404 on some hosts) a commit status is set instead. GitLab: a
merge request note and a commit status. Tokens are sent only in headers and never appear in
a message (:class:`~gitops.reviews.github.ForgeError` names the call, not the request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from gitops.reviews.github import ForgeError, GitHub
from gitops.reviews.markdown import MAX_BODY, cut

__all__ = ["COMMENT_LIMIT", "MARKER", "Published", "publish_github", "publish_gitlab"]

MARKER = "<!-- seshat-preview -->"
"""The hidden first line of a preview comment: how the next preview finds it."""

CHECK_NAME = "seshat/preview"
PAGE = 100
MAX_PAGES = 50  # 5,000 comments: past that, a pull request's thread is not read further


@dataclass(frozen=True, slots=True)
class Published:
    """What a preview left on the forge: the comment (created or updated) and the check."""

    comment_url: str
    updated: bool  # True: an earlier preview's comment was edited
    check: str  # "check run" | "commit status"


COMMENT_LIMIT = MAX_BODY - len(MARKER) - 1
"""The size a preview's markdown is rendered to for a forge (the marker line comes first)."""
_CUT = "*(cut: the whole preview is in the CI job's output)*\n"


def _body(markdown: str) -> str:
    """The comment: the marker, then the preview (rendered to :data:`COMMENT_LIMIT`; cut at
    a line, fences closed, should it be longer)."""
    return f"{MARKER}\n{cut(markdown, COMMENT_LIMIT, _CUT)}"


_GITHUB_CONCLUSION = {0: "success", 1: "failure", 2: "failure"}
_GITHUB_STATE = {0: "success", 1: "failure", 2: "error"}
_GITLAB_STATE = {0: "success", 1: "failed", 2: "failed"}


class _GitHubPreview(GitHub):
    """The issue-comment, check-run and commit-status calls on top of the reviews client."""

    def comments(self, pull: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in range(1, MAX_PAGES + 1):
            batch = self._call(
                "GET", f"/issues/{pull}/comments", params={"per_page": PAGE, "page": page}
            )
            found += list(batch or [])
            if len(batch or []) < PAGE:
                break
        return found

    def upsert_comment(self, pull: int, body: str) -> tuple[str, bool]:
        mine = [c for c in self.comments(pull) if str(c.get("body", "")).startswith(MARKER)]
        if mine:
            item = self._call("PATCH", f"/issues/comments/{mine[0]['id']}", json={"body": body})
            return str(item["html_url"]), True
        item = self._call("POST", f"/issues/{pull}/comments", json={"body": body})
        return str(item["html_url"]), False

    def check(self, sha: str, status: int, title: str, summary: str, url: str) -> str:
        try:
            self._call(
                "POST",
                "/check-runs",
                json={
                    "name": CHECK_NAME,
                    "head_sha": sha,
                    "status": "completed",
                    "conclusion": _GITHUB_CONCLUSION[status],
                    "details_url": url,
                    "output": {"title": title[:255], "summary": cut(summary, MAX_BODY, _CUT)},
                },
            )
            return "check run"
        except ForgeError as error:
            if error.status not in (403, 404):
                raise
        self._call(
            "POST",
            f"/statuses/{sha}",
            json={
                "state": _GITHUB_STATE[status],
                "context": CHECK_NAME,
                "description": title[:140],
                "target_url": url,
            },
        )
        return "commit status"


def publish_github(
    repository: str,
    pull: int,
    sha: str,
    markdown: str,
    status: int,
    title: str,
    *,
    token: str,
    api_url: str = "https://api.github.com",
) -> Published:
    """Create or update the preview comment on pull request ``pull`` of ``repository``
    (OWNER/NAME), then a check run on commit ``sha`` (a commit status when the token may not
    create check runs)."""
    client = _GitHubPreview(repository, token, api_url)
    url, updated = client.upsert_comment(pull, _body(markdown))
    check = client.check(sha, status, title, markdown, url)
    return Published(url, updated, check)


class _GitLab:
    """The merge-request-note and commit-status calls of GitLab's REST API (v4)."""

    def __init__(self, project: str, token: str, api_url: str, timeout: float = 30.0) -> None:
        self.base = f"{api_url.rstrip('/')}/projects/{quote(project, safe='')}"
        self.timeout = timeout
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers.update({"PRIVATE-TOKEN": token, "User-Agent": "seshat"})

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.session.request(
                method, f"{self.base}{path}", timeout=self.timeout, **kwargs
            )
        except requests.RequestException as error:
            raise ForgeError(f"GitLab {method} {path}: {type(error).__name__}") from None
        if response.status_code >= 300:
            raise ForgeError(
                f"GitLab {method} {path}: HTTP {response.status_code}", response.status_code
            )
        return response.json() if response.content else None

    def upsert_note(self, merge_request: int, body: str) -> tuple[str, bool]:
        path = f"/merge_requests/{merge_request}/notes"
        for page in range(1, MAX_PAGES + 1):
            notes = self.call("GET", path, params={"per_page": PAGE, "page": page}) or []
            for note in notes:
                if str(note.get("body", "")).startswith(MARKER):
                    self.call("PUT", f"{path}/{note['id']}", json={"body": body})
                    return f"note {note['id']}", True
            if len(notes) < PAGE:
                break
        item = self.call("POST", path, json={"body": body})
        return f"note {item['id']}", False


def publish_gitlab(
    project: str,
    merge_request: int,
    sha: str,
    markdown: str,
    status: int,
    title: str,
    *,
    token: str,
    api_url: str = "https://gitlab.com/api/v4",
) -> Published:
    """Create or update the preview note on merge request ``merge_request`` of ``project``
    (an id or a path), then a commit status on ``sha``."""
    client = _GitLab(project, token, api_url)
    where, updated = client.upsert_note(merge_request, _body(markdown))
    client.call(
        "POST",
        f"/statuses/{sha}",
        json={"state": _GITLAB_STATE[status], "name": CHECK_NAME, "description": title[:255]},
    )
    return Published(where, updated, "commit status")
