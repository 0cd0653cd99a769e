"""Publishing a preview on a forge: one comment (or note) per pull request, and a check.

The comment carries a hidden marker (:data:`MARKER`); a later preview of the same pull
request finds it and edits it in place, so a pull request never collects a pile of
previews. Only a comment the token's own identity wrote is ever edited
(:meth:`~gitops.reviews.github.GitHub.identity`; GitLab: the token's user): the marker is
public, and a stranger's comment that carries it is left alone. When the identity cannot be
learned a new comment is posted and none is edited; when the forge refuses the edit (403,
404: the comment was deleted, the thread locked) a new one is posted too, and the check is
set either way. The check follows the preview's exit status (0 success, 1 failure, 2 the
preview could not run).

GitHub: the comment is an issue comment; the check is a check run, which GitHub allows only
to the workflow's ``GITHUB_TOKEN`` or an App's token, so when the token may not create one
(a personal token: 403, or 404 on some hosts) a commit status is set instead. GitLab: a
merge request note and a commit status. Tokens are sent only in headers and never appear in
a message (:class:`~gitops.reviews.github.ForgeError` names the call, not the request).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import requests

from gitops.reviews.github import Author, ForgeError, GitHub, forge_json
from gitops.reviews.markdown import MAX_BODY, cut

__all__ = [
    "COMMENT_LIMIT",
    "MARKER",
    "Forge",
    "GitHubPreview",
    "GitLabPreview",
    "Published",
    "publish",
]

MARKER = "<!-- seshat-preview -->"
"""The hidden first line of a preview comment: how the next preview finds it."""

CHECK_NAME = "seshat/preview"
PAGE = 100
MAX_PAGES = 50  # 5,000 comments: past that, a pull request's thread is not read further
REFUSED_EDIT = (403, 404)  # the forge will not let this comment be edited: post anew


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


class Forge(Protocol):
    """Where a preview is published: its comment on a pull (or merge) request, then a check
    on the head commit (:func:`publish` runs the two)."""

    def upsert(self, number: int, body: str, log: Callable[[str], None]) -> tuple[str, bool]:
        """Edit the preview comment this token's identity posted before, else post one; the
        comment's address and whether it was edited."""
        ...

    def check(self, sha: str, status: int, title: str, summary: str, url: str) -> str:
        """Set the check of commit ``sha`` for exit status ``status``; what kind of check."""
        ...


def publish(
    forge: Forge,
    number: int,
    sha: str,
    markdown: str,
    status: int,
    title: str,
    *,
    log: Callable[[str], None] = lambda _: None,
) -> Published:
    """Create or update the preview comment on pull (or merge) request ``number``, then set
    the check on commit ``sha``."""
    url, updated = forge.upsert(number, _body(markdown), log)
    return Published(url, updated, forge.check(sha, status, title, markdown, url))


class GitHubPreview(GitHub):
    """GitHub (``repository`` is OWNER/NAME): the issue-comment, check-run and commit-status
    calls on top of the reviews client; a commit status when the token may not create check
    runs."""

    def upsert(self, number: int, body: str, log: Callable[[str], None]) -> tuple[str, bool]:
        if self.identity() is None:
            log("the token's identity cannot be learned: a new comment, none edited")
        earlier = [
            c
            for c in self.own_comments(number, MAX_PAGES)
            if str(c.get("body", "")).startswith(MARKER)
        ]
        if earlier:
            try:
                item = self._call(
                    "PATCH", f"/issues/comments/{earlier[0]['id']}", json={"body": body}
                )
                return str(item["html_url"]), True
            except ForgeError as error:
                if error.status not in REFUSED_EDIT:
                    raise
                log(f"the earlier preview comment may not be edited ({error}): a new one")
        item = self._call("POST", f"/issues/{number}/comments", json={"body": body})
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


class GitLabPreview:
    """GitLab (``project`` is an id or a path): the merge-request-note and commit-status
    calls of its REST API (v4)."""

    def __init__(self, project: str, token: str, api_url: str, timeout: float = 30.0) -> None:
        self.api = api_url.rstrip("/")
        self.base = f"{self.api}/projects/{quote(project, safe='')}"
        self.timeout = timeout
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers.update({"PRIVATE-TOKEN": token, "User-Agent": "seshat"})

    def call(self, method: str, path: str, *, root: bool = False, **kwargs: Any) -> Any:
        """One call on the project's API (``root``: on the API's root); its JSON."""
        url = f"{self.api if root else self.base}{path}"
        return forge_json(
            self.session, method, url, f"GitLab {method} {path}", self.timeout, **kwargs
        )

    def identity(self) -> Author | None:
        """The token's user (``GET /user``: a person, or a project access token's bot);
        None when it cannot be learned."""
        try:
            found = self.call("GET", "/user", root=True)
        except ForgeError:
            return None
        if not isinstance(found, dict) or not isinstance(found.get("username"), str):
            return None
        number = found.get("id")
        return Author(found["username"], number if isinstance(number, int) else None)

    def upsert(self, number: int, body: str, log: Callable[[str], None]) -> tuple[str, bool]:
        path = f"/merge_requests/{number}/notes"
        me = self.identity()
        if me is None:
            log("the token's user cannot be learned: a new note, none edited")
            return self._post(path, body)
        for page in range(1, MAX_PAGES + 1):
            notes = self.call("GET", path, params={"per_page": PAGE, "page": page}) or []
            for note in notes:
                if me.wrote(note.get("author")) and str(note.get("body", "")).startswith(MARKER):
                    try:
                        self.call("PUT", f"{path}/{note['id']}", json={"body": body})
                        return f"note {note['id']}", True
                    except ForgeError as error:
                        if error.status not in REFUSED_EDIT:
                            raise
                        log(f"the earlier preview note may not be edited ({error}): a new one")
                        return self._post(path, body)
            if len(notes) < PAGE:
                break
        return self._post(path, body)

    def _post(self, path: str, body: str) -> tuple[str, bool]:
        item = self.call("POST", path, json={"body": body})
        return f"note {item['id']}", False

    def check(self, sha: str, status: int, title: str, summary: str, url: str) -> str:
        self.call(
            "POST",
            f"/statuses/{sha}",
            json={"state": _GITLAB_STATE[status], "name": CHECK_NAME, "description": title[:255]},
        )
        return "commit status"
