"""``seshat preview``: parse, preview, print, publish, and map the outcome to an exit status
(0 every changed resource would plan or converge, 1 one would be Blocked, 2 the preview
could not run)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from gitops.preview.forges import (
    COMMENT_LIMIT,
    GitHubPreview,
    GitLabPreview,
    Published,
    publish,
)
from gitops.preview.render import render_json, render_markdown, title
from gitops.preview.run import PreviewReport, run_preview
from gitops.repo.options import repo_option
from gitops.wiring import registry_options, registry_settings
from runner.errors import SeshatError

__all__ = ["preview"]

EXIT_CANNOT_RUN = 2


@click.command()
@repo_option("The Git work tree to preview (a clone with full history: uids come from it).")
@click.option("--base", required=True, metavar="REF", help="The branch the pull request targets.")
@click.option(
    "--head", default="HEAD", show_default=True, metavar="REF", help="The pull request's head."
)
@click.option(
    "--format",
    "output",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
)
@click.option(
    "--github-repo", metavar="OWNER/NAME", help="GitHub: publish on this repository's --pull."
)
@click.option("--pull", type=click.IntRange(min=1), metavar="N", help="GitHub: the pull request.")
@click.option(
    "--github-api-url",
    default=lambda: os.environ.get("GITHUB_API_URL", "https://api.github.com"),
    show_default="$GITHUB_API_URL or https://api.github.com",
)
@click.option(
    "--gitlab-project", metavar="ID", help="GitLab: publish on this project's --merge-request."
)
@click.option(
    "--merge-request", type=click.IntRange(min=1), metavar="N", help="GitLab: the merge request."
)
@click.option(
    "--gitlab-api-url",
    default=lambda: os.environ.get("CI_API_V4_URL", "https://gitlab.com/api/v4"),
    show_default="$CI_API_V4_URL or https://gitlab.com/api/v4",
)
@click.option(
    "--token-env",
    metavar="NAME",
    help="The environment variable holding the forge token [GITHUB_TOKEN or GITLAB_TOKEN].",
)
@registry_options
def preview(
    repo: Path,
    base: str,
    head: str,
    output: str,
    github_repo: str | None,
    pull: int | None,
    github_api_url: str,
    gitlab_project: str | None,
    merge_request: int | None,
    gitlab_api_url: str,
    token_env: str | None,
    registry_plain_http: tuple[str, ...],
    registry_ca: Path | None,
) -> None:
    """Preview what merging a pull request would plan (docs/preview.md).

    For each database resource the head changes relative to the base (its declaration, the
    artifact its reference resolves to, a policy it uses), resolve the head's artifact and
    verify it with the base's policies, observe the database read-only through the base's
    target (its previewUrl when set) and plan; print what changed, the verdict a merge would
    reach and the plan.
    Nothing is written: no status commit, no database change, no approval consumed.
    """
    if (github_repo is None) != (pull is None):
        raise click.UsageError("--github-repo and --pull go together")
    if (gitlab_project is None) != (merge_request is None):
        raise click.UsageError("--gitlab-project and --merge-request go together")
    if github_repo is not None and gitlab_project is not None:
        raise click.UsageError("one forge at a time: --github-repo or --gitlab-project")
    token = ""
    if github_repo is not None or gitlab_project is not None:
        name = token_env or ("GITHUB_TOKEN" if github_repo is not None else "GITLAB_TOKEN")
        token = os.environ.get(name, "")
        if not token:
            raise click.UsageError(f"the forge token is read from ${name}, which is not set")
    registry = registry_settings(registry_plain_http, registry_ca)
    try:
        report = run_preview(
            repo, base, head, registry=registry, log=lambda line: click.echo(line, err=True)
        )
    except SeshatError as error:
        click.echo(f"seshat preview: {error}", err=True)
        sys.exit(EXIT_CANNOT_RUN)
    click.echo(render_json(report) if output == "json" else render_markdown(report), nl=False)
    try:
        published = _publish(
            report,
            render_markdown(report, limit=COMMENT_LIMIT),  # cut so that what matters stays
            token,
            github=(github_repo, pull, github_api_url),
            gitlab=(gitlab_project, merge_request, gitlab_api_url),
        )
    except SeshatError as error:
        click.echo(f"seshat preview: the preview ran but was not published: {error}", err=True)
        sys.exit(EXIT_CANNOT_RUN)
    if published is not None:
        verb = "updated" if published.updated else "created"
        click.echo(
            f"seshat preview: {verb} {published.comment_url}; {published.check} set", err=True
        )
    sys.exit(report.exit_status)


def _publish(
    report: PreviewReport,
    markdown: str,
    token: str,
    *,
    github: tuple[str | None, int | None, str],
    gitlab: tuple[str | None, int | None, str],
) -> Published | None:
    """Publish on the forge whose place (a repository and pull request, or a project and
    merge request) is given; the options allow one at most."""
    forges = ((GitHubPreview, github), (GitLabPreview, gitlab))
    for forge, (place, number, api) in forges:
        if place is not None and number is not None:
            return publish(
                forge(place, token, api),
                number,
                report.head,
                markdown,
                report.exit_status,
                title(report),
                log=_say,
            )
    return None


def _say(line: str) -> None:
    click.echo(f"seshat preview: {line}", err=True)
