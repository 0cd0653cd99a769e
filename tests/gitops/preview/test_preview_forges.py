"""``seshat preview --github-repo/--pull`` and ``--gitlab-project/--merge-request``: one
comment (or note) per pull request, found again by its hidden marker and edited, never
duplicated; a check run (a commit status with a token that may not create one) whose
conclusion follows the exit status. GitHub and GitLab cannot run here: their REST APIs are
played by ``responses`` with the documented payloads (gitops/preview/forges.py)."""

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


@dataclass
class FakeForge:
    """What the forge holds: comments by id, and the checks and statuses created."""

    comments: dict[int, str] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    allow_check_runs: bool = True
    tokens: set[str] = field(default_factory=set)

    def _seen(self, request: PreparedRequest) -> None:
        header = request.headers.get("Authorization") or request.headers.get("PRIVATE-TOKEN")
        self.tokens.add(str(header))

    def list_comments(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        items = [
            {"id": cid, "body": body, "html_url": f"https://github.com/acme/shop/pull/7#c{cid}"}
            for cid, body in sorted(self.comments.items())
        ]
        return 200, {}, json.dumps(items)

    def create_comment(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        cid = 100 + len(self.comments)
        self.comments[cid] = json.loads(request.body or b"{}")["body"]
        return (
            201,
            {},
            json.dumps({"id": cid, "html_url": f"https://github.com/acme/shop/pull/7#c{cid}"}),
        )

    def edit_comment(self, request: PreparedRequest) -> Reply:
        self._seen(request)
        cid = int(str(request.url).rsplit("/", 1)[1])
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


def test_gitlab_gets_one_note_and_a_commit_status(world: World) -> None:
    head = _pull_request(world)
    notes: dict[int, str] = {}
    statuses: list[dict[str, Any]] = []

    def list_notes(request: PreparedRequest) -> Reply:
        assert request.headers["PRIVATE-TOKEN"] == TOKEN
        items = [{"id": i, "body": b, "system": False} for i, b in sorted(notes.items())]
        return 200, {}, json.dumps(items)

    def create_note(request: PreparedRequest) -> Reply:
        nid = 300 + len(notes)
        notes[nid] = json.loads(request.body or b"{}")["body"]
        return 201, {}, json.dumps({"id": nid, "body": notes[nid]})

    def edit_note(request: PreparedRequest) -> Reply:
        nid = int(str(request.url).rsplit("/", 1)[1])
        notes[nid] = json.loads(request.body or b"{}")["body"]
        return 200, {}, json.dumps({"id": nid, "body": notes[nid]})

    def status(request: PreparedRequest) -> Reply:
        statuses.append(
            {"sha": str(request.url).rsplit("/", 1)[1], **json.loads(request.body or b"{}")}
        )
        return 201, {}, json.dumps({"id": len(statuses), "status": statuses[-1]["state"]})

    options = ["--gitlab-project", "acme/shop", "--merge-request", "3"]
    options += ["--gitlab-api-url", "https://gitlab.example/api/v4"]
    with responses.RequestsMock(assert_all_requests_are_fired=False) as api:
        notes_url = f"{GITLAB}/merge_requests/3/notes"
        api.add_callback(responses.GET, re.compile(re.escape(notes_url) + r"\?.*"), list_notes)
        api.add_callback(responses.POST, notes_url, create_note)
        api.add_callback(responses.PUT, re.compile(re.escape(notes_url) + r"/\d+"), edit_note)
        api.add_callback(
            responses.POST, re.compile(re.escape(f"{GITLAB}/statuses/") + ".*"), status
        )
        codes = [_run(world, *options, env={"GITLAB_TOKEN": TOKEN})[0] for _ in range(2)]

    assert codes == [1, 1]
    assert len(notes) == 1 and next(iter(notes.values())).startswith(MARKER)
    assert [(s["sha"], s["state"], s["name"]) for s in statuses] == [
        (head, "failed", "seshat/preview")
    ] * 2


def test_a_missing_token_is_a_usage_error(world: World) -> None:
    _pull_request(world)

    code, output = _run(
        world, "--github-repo", "acme/shop", "--pull", "7", env={"GITHUB_TOKEN": ""}
    )

    assert code == 2 and "GITHUB_TOKEN" in output
