"""``seshat preview --github-repo/--pull`` and ``--gitlab-project/--merge-request``: one
comment (or note) per pull request, found again by its hidden marker and its author (the
token's own identity, never a stranger who copied the marker) and edited, never duplicated;
a check run (a commit status with a token that may not create one) whose conclusion follows
the exit status, set even when the forge refuses the edit.

A forge's HTTP API is the one place a test double is allowed (DESIGN.md, Testing): GitHub
and GitLab cannot run here, so their REST (and GitHub's GraphQL ``viewer``) APIs are played
by ``responses`` with the documented payloads (gitops/preview/forges.py). The Git
repositories, artifacts, databases and the preview itself are real."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import responses
from click.testing import CliRunner
from harness.preview_pr import commit, declare_orders, open_branch
from harness.reconcile_world import World, schema_yaml
from requests import PreparedRequest

from gitops.cli import cli as seshat_main
from gitops.preview.forges import MARKER

TOKEN = "ghp_preview0000000000000000000000000000"
API = "https://api.github.com/repos/acme/shop"
GITLAB = "https://gitlab.example/api/v4/projects/acme%2Fshop"

Reply = tuple[int, dict[str, str], str]


SESHAT = {"login": "seshat-ci", "id": 4242, "type": "User"}
APP = {"login": "seshat-app[bot]", "id": 9090, "type": "Bot"}
MALLORY = {"login": "mallory", "id": 666, "type": "User"}
ALICE = {"login": "alice", "id": 7, "type": "User"}


@dataclass
class FakeForge:
    """What the forge holds: comments by id (and who wrote each), the checks and statuses
    created. ``token_user`` is who ``GET /user`` says the token is (None: it refuses, as for
    an App installation token), ``viewer`` who GraphQL's ``viewer`` says (None: an error);
    comments the token posts are written by whichever of them answers."""

    comments: dict[int, str] = field(default_factory=dict)
    authors: dict[int, dict[str, Any]] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    allow_check_runs: bool = True
    refuse_edits: bool = False
    token_user: dict[str, Any] | None = field(default_factory=lambda: dict(SESHAT))
    viewer: dict[str, Any] | None = None
    edited: list[int] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)

    def _seen(self, request: PreparedRequest) -> None:
        header = request.headers.get("Authorization") or request.headers.get("PRIVATE-TOKEN")
        self.tokens.add(str(header))

    def _poster(self) -> dict[str, Any]:
        return self.token_user or self.viewer or {"login": "someone[bot]", "id": 1}

    def user(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        if self.token_user is None:
            return 403, {}, json.dumps({"message": "Resource not accessible by integration"})
        return 200, {}, json.dumps(self.token_user)

    def graphql(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        assert "viewer" in json.loads(request.body or b"{}")["query"]
        if self.viewer is None:
            return 200, {}, json.dumps({"errors": [{"message": "Something went wrong"}]})
        viewer = {"login": self.viewer["login"], "databaseId": self.viewer["id"]}
        return 200, {}, json.dumps({"data": {"viewer": viewer}})

    def list_comments(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        items = [
            {
                "id": cid,
                "body": body,
                "user": self.authors.get(cid, ALICE),
                "html_url": f"https://github.com/acme/shop/pull/7#c{cid}",
            }
            for cid, body in sorted(self.comments.items())
        ]
        return 200, {}, json.dumps(items)

    def create_comment(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        cid = 100 + len(self.comments)
        self.comments[cid] = json.loads(request.body or b"{}")["body"]
        self.authors[cid] = self._poster()
        return (
            201,
            {},
            json.dumps({"id": cid, "html_url": f"https://github.com/acme/shop/pull/7#c{cid}"}),
        )

    def edit_comment(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        cid = int(str(request.url).rsplit("/", 1)[1])
        if self.refuse_edits or self.authors.get(cid) != self._poster():
            return 403, {}, json.dumps({"message": "Must have admin rights to Repository."})
        self.edited.append(cid)
        self.comments[cid] = json.loads(request.body or b"{}")["body"]
        return (
            200,
            {},
            json.dumps({"id": cid, "html_url": f"https://github.com/acme/shop/pull/7#c{cid}"}),
        )

    def check_run(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        if not self.allow_check_runs:
            return (
                403,
                {},
                json.dumps({"message": "Resource not accessible by personal access token"}),
            )
        body = json.loads(request.body or b"{}")
        self.checks.append(body)
        return 201, {}, json.dumps({"id": len(self.checks), **body})

    def status(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        body = json.loads(request.body or b"{}")
        self.statuses.append({"sha": str(request.url).rsplit("/", 1)[1], **body})
        return 201, {}, json.dumps({"id": len(self.statuses), **body})


@pytest.fixture
def github() -> Iterator[FakeForge]:
    forge = FakeForge()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as api:
        api.add_callback(responses.GET, "https://api.github.com/user", forge.user)
        api.add_callback(responses.POST, "https://api.github.com/graphql", forge.graphql)
        api.add_callback(
            responses.GET, re.compile(rf"{API}/issues/7/comments.*"), forge.list_comments
        )
        api.add_callback(responses.POST, f"{API}/issues/7/comments", forge.create_comment)
        api.add_callback(
            responses.PATCH, re.compile(rf"{API}/issues/comments/\d+"), forge.edit_comment
        )
        api.add_callback(responses.POST, f"{API}/check-runs", forge.check_run)
        api.add_callback(
            responses.POST, re.compile(rf"{API}/statuses/[0-9a-f]{{40}}"), forge.status
        )
        yield forge


def _pull_request(world: World) -> str:
    """orders on main; a pull request that sets apply: Never (a Blocked verdict)."""
    layout = declare_orders(world)
    open_branch(world)
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, apply="Never")
    )
    commit(world, "never apply orders")
    return str(world.remote.work.head.commit.hexsha)


def _run(world: World, *forge: str, env: dict[str, str]) -> tuple[int, str]:
    args = ["preview", "--repo", str(world.remote.work_dir), "--base", "main", "--head", "pr"]
    result = CliRunner().invoke(seshat_main, [*args, *forge], env=env)
    assert TOKEN not in result.output
    return result.exit_code, result.output


GITHUB = ("--github-repo", "acme/shop", "--pull", "7")


def _previews(forge: FakeForge) -> dict[int, str]:
    """The comments carrying the preview marker, whoever wrote them."""
    return {cid: body for cid, body in forge.comments.items() if body.startswith(MARKER)}


def test_the_comment_is_updated_not_duplicated_and_the_check_follows_the_exit(
    world: World, github: FakeForge
) -> None:
    first_head = _pull_request(world)
    github.comments[5] = "LGTM"  # a person's comment is left alone
    options = ("--github-repo", "acme/shop", "--pull", "7")

    first, output = _run(world, *options, env={"GITHUB_TOKEN": TOKEN})
    assert first == 1, output
    assert len(github.comments) == 2
    # The pull request is fixed: the same comment now says every resource would plan.
    layout = world.tmp / "orders-v1"
    text = schema_yaml("orders", layout, extra=", lockTimeout: 7s")
    world.remote.write_file("databases/orders/schema.yaml", text)
    commit(world, "apply on approval after all, with a longer lock timeout")
    head = str(world.remote.work.head.commit.hexsha)
    second, output = _run(world, *options, env={"GITHUB_TOKEN": TOKEN})

    assert second == 0, output
    assert github.comments[5] == "LGTM" and len(github.comments) == 2
    [preview] = [body for body in github.comments.values() if body.startswith(MARKER)]
    assert "every changed resource would plan or converge" in preview
    assert "AwaitingApproval" in preview and "ApplyDisabled" not in preview
    assert [c["conclusion"] for c in github.checks] == ["failure", "success"]
    assert github.checks[0]["head_sha"] == first_head
    assert github.checks[-1]["head_sha"] == head and github.checks[-1]["name"] == "seshat/preview"
    assert github.statuses == []
    assert github.tokens == {f"Bearer {TOKEN}"}


def test_a_token_that_may_not_create_check_runs_sets_a_commit_status(
    world: World, github: FakeForge
) -> None:
    head = _pull_request(world)
    github.allow_check_runs = False

    code, output = _run(
        world, "--github-repo", "acme/shop", "--pull", "7", env={"GITHUB_TOKEN": TOKEN}
    )

    assert code == 1, output
    assert github.checks == []
    [status] = github.statuses
    assert (status["sha"], status["state"], status["context"]) == (
        head,
        "failure",
        "seshat/preview",
    )


@dataclass
class FakeGitLab:
    """A merge request's notes (and who wrote each) and the commit statuses set; ``me`` is
    who ``GET /user`` says the token is (None: it refuses)."""

    notes: dict[int, str] = field(default_factory=dict)
    authors: dict[int, dict[str, Any]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    me: dict[str, Any] | None = field(
        default_factory=lambda: {"id": 31, "username": "project_3_bot_ab12"}
    )
    refuse_edits: bool = False
    edited: list[int] = field(default_factory=list)

    def user(self, request: PreparedRequest) -> Reply:
        assert request.headers["PRIVATE-TOKEN"] == TOKEN
        if self.me is None:
            return 403, {}, json.dumps({"message": "403 Forbidden"})
        return 200, {}, json.dumps(self.me)

    def list_notes(self, request: PreparedRequest) -> Reply:
        assert request.headers["PRIVATE-TOKEN"] == TOKEN
        items = [
            {"id": i, "body": b, "system": False, "author": self.authors[i]}
            for i, b in sorted(self.notes.items())
        ]
        return 200, {}, json.dumps(items)

    def create_note(self, request: PreparedRequest) -> Reply:
        nid = 300 + len(self.notes)
        self.notes[nid] = json.loads(request.body or b"{}")["body"]
        self.authors[nid] = self.me or {"id": 1, "username": "someone"}
        return 201, {}, json.dumps({"id": nid, "body": self.notes[nid]})

    def edit_note(self, request: PreparedRequest) -> Reply:
        nid = int(str(request.url).rsplit("/", 1)[1])
        if self.refuse_edits or self.authors[nid] != self.me:
            return 403, {}, json.dumps({"message": "403 Forbidden"})
        self.edited.append(nid)
        self.notes[nid] = json.loads(request.body or b"{}")["body"]
        return 200, {}, json.dumps({"id": nid, "body": self.notes[nid]})

    def status(self, request: PreparedRequest) -> Reply:
        self.statuses.append(
            {"sha": str(request.url).rsplit("/", 1)[1], **json.loads(request.body or b"{}")}
        )
        return 201, {}, json.dumps({"id": len(self.statuses), "status": "x"})


@pytest.fixture
def gitlab() -> Iterator[FakeGitLab]:
    forge = FakeGitLab()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as api:
        notes_url = f"{GITLAB}/merge_requests/3/notes"
        api.add_callback(responses.GET, "https://gitlab.example/api/v4/user", forge.user)
        api.add_callback(
            responses.GET, re.compile(re.escape(notes_url) + r"\?.*"), forge.list_notes
        )
        api.add_callback(responses.POST, notes_url, forge.create_note)
        api.add_callback(responses.PUT, re.compile(re.escape(notes_url) + r"/\d+"), forge.edit_note)
        api.add_callback(
            responses.POST, re.compile(re.escape(f"{GITLAB}/statuses/") + ".*"), forge.status
        )
        yield forge


GITLAB_OPTIONS = (
    "--gitlab-project",
    "acme/shop",
    "--merge-request",
    "3",
    "--gitlab-api-url",
    "https://gitlab.example/api/v4",
)


def test_gitlab_gets_one_note_and_a_commit_status(world: World, gitlab: FakeGitLab) -> None:
    head = _pull_request(world)
    # A stranger's note with the marker, before Seshat's: never edited.
    gitlab.notes[1] = f"{MARKER}\nSeshat preview: all good, merge away"
    gitlab.authors[1] = {"id": 666, "username": "mallory"}

    codes = [_run(world, *GITLAB_OPTIONS, env={"GITLAB_TOKEN": TOKEN})[0] for _ in range(2)]

    assert codes == [1, 1]
    assert gitlab.notes[1].endswith("all good, merge away")
    [own] = [n for n, who in gitlab.authors.items() if who == gitlab.me]
    assert gitlab.edited == [own] and gitlab.notes[own].startswith(MARKER)
    assert len(gitlab.notes) == 2
    assert [(s["sha"], s["state"], s["name"]) for s in gitlab.statuses] == [
        (head, "failed", "seshat/preview")
    ] * 2


def test_gitlab_without_the_token_user_or_with_a_refused_edit_posts_a_new_note(
    world: World, gitlab: FakeGitLab
) -> None:
    _pull_request(world)
    assert _run(world, *GITLAB_OPTIONS, env={"GITLAB_TOKEN": TOKEN})[0] == 1
    gitlab.refuse_edits = True

    refused, output = _run(world, *GITLAB_OPTIONS, env={"GITLAB_TOKEN": TOKEN})
    gitlab.me = None
    unknown, said = _run(world, *GITLAB_OPTIONS, env={"GITLAB_TOKEN": TOKEN})

    assert (refused, unknown) == (1, 1)  # the verdict's exit status, not 2
    assert "may not be edited" in output and "cannot be learned" in said
    assert gitlab.edited == [] and len(gitlab.notes) == 3
    assert len(gitlab.statuses) == 3  # the status is set every time


def test_a_missing_token_is_a_usage_error(world: World) -> None:
    _pull_request(world)

    code, output = _run(
        world, "--github-repo", "acme/shop", "--pull", "7", env={"GITHUB_TOKEN": ""}
    )

    assert code == 2 and "GITHUB_TOKEN" in output


def test_a_strangers_comment_with_the_marker_is_never_edited(
    world: World, github: FakeForge
) -> None:
    """Anyone can post a comment starting with the marker before Seshat does, to have it
    turned into the preview (and edit it back to a fake verdict later). Only the comment the
    token's identity wrote is edited."""
    _pull_request(world)
    fake = f"{MARKER}\n## Seshat plan preview\n\nEvery changed resource would plan. Merge!"
    github.comments[3] = fake
    github.authors[3] = MALLORY

    codes = [_run(world, *GITHUB, env={"GITHUB_TOKEN": TOKEN})[0] for _ in range(2)]

    assert codes == [1, 1]
    assert github.comments[3] == fake
    [own] = [c for c in _previews(github) if github.authors[c] == SESHAT]
    assert github.edited == [own] and set(_previews(github)) == {3, own}
    assert "ApplyDisabled" in github.comments[own]


def test_an_app_token_knows_itself_by_its_bot_user(world: World, github: FakeForge) -> None:
    """An App installation token (and the workflow's GITHUB_TOKEN) may not read ``/user``:
    GraphQL's ``viewer`` names its bot user, whose comments are the ones edited; a person's
    comment under a similar name is not."""
    _pull_request(world)
    github.token_user, github.viewer = None, dict(APP)
    github.comments[3] = f"{MARKER}\nnot the app"
    github.authors[3] = {"login": "seshat-app", "id": 55, "type": "User"}

    codes = [_run(world, *GITHUB, env={"GITHUB_TOKEN": TOKEN})[0] for _ in range(2)]

    assert codes == [1, 1]
    [own] = [c for c in _previews(github) if github.authors[c] == APP]
    assert github.edited == [own] and github.comments[3] == f"{MARKER}\nnot the app"


def test_without_an_identity_a_new_comment_is_posted_and_none_edited(
    world: World, github: FakeForge
) -> None:
    _pull_request(world)
    github.token_user = None  # and GraphQL answers an error: nobody knows who the token is

    runs = [_run(world, *GITHUB, env={"GITHUB_TOKEN": TOKEN}) for _ in range(2)]

    assert [code for code, _ in runs] == [1, 1]
    assert all("identity cannot be learned" in output for _, output in runs)
    assert github.edited == [] and len(_previews(github)) == 2
    assert [c["conclusion"] for c in github.checks] == ["failure", "failure"]


def test_a_refused_edit_posts_anew_and_still_sets_the_check(
    world: World, github: FakeForge
) -> None:
    """The earlier comment may not be edited any more (deleted, the thread locked, its
    author's rights gone): a new comment, the check set, and the verdict's exit status."""
    _pull_request(world)
    assert _run(world, *GITHUB, env={"GITHUB_TOKEN": TOKEN})[0] == 1
    github.refuse_edits = True

    code, output = _run(world, *GITHUB, env={"GITHUB_TOKEN": TOKEN})

    assert code == 1, output  # Blocked, as the preview found; not 2
    assert "may not be edited" in output and "HTTP 403" in output
    assert github.edited == [] and len(_previews(github)) == 2
    assert [c["conclusion"] for c in github.checks] == ["failure", "failure"]
