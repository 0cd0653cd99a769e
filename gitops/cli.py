"""``seshat``: the control plane's command line.

Commands stay thin: parse the arguments, call one library function, print, and map the
outcome to an exit status (0 fine, 1 problems found or refused, 2 could not run).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gitops.repo.problems import MAX_PROBLEMS_PER_FILE, problem_lines
from runner.errors import SeshatError
from runner.options import format_option

if TYPE_CHECKING:
    from gitops.repo.loader import Repository

__all__ = ["main"]

EXIT_OK, EXIT_PROBLEMS, EXIT_CANNOT_RUN = 0, 1, 2


def _load(repo: Path) -> Repository:
    from gitops.repo.loader import load_repository

    try:
        return load_repository(repo)
    except SeshatError as error:
        click.echo(f"seshat: {error}", err=True)
        sys.exit(EXIT_CANNOT_RUN)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _rendered(repository: Repository) -> list[dict[str, Any]]:
    """The custom resources: a fleet as its one ``DatabaseFleet`` (its members are not
    objects of their own in a cluster)."""
    return [
        r.resource.model_dump(mode="json", by_alias=True, exclude_none=True)
        for r in repository.resources
        if r.member is None
    ]


# Commands that live in other modules, loaded when they are asked for: a `seshat` process
# imports only what its own command needs (the approval and preview commands pull in
# Sigstore, the controller the whole reconciler; importing all of them cost about 0.8 s of CPU
# at every start, docs/testing.md).
_LAZY_COMMANDS: dict[str, str] = {
    "acknowledge": "gitops.approvals.cli:acknowledge",
    "approve": "gitops.approvals.cli:approve",
    "artifact": "gitops.artifacts.cli:artifact",
    "plan": "gitops.statusview:plan_group",
    "preview": "gitops.preview.cli:preview",
    "reconcile": "gitops.controller:reconcile",
    "run": "gitops.controller:run",
    "status": "gitops.statusview:status",
    "verify-approval": "gitops.approvals.cli:verify_approval",
}


class _LazyGroup(click.Group):
    """A group whose commands in :data:`_LAZY_COMMANDS` are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _LAZY_COMMANDS and cmd_name not in self.commands:
            module_name, attribute = _LAZY_COMMANDS[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command) or command.name != cmd_name:
                raise RuntimeError(f"{_LAZY_COMMANDS[cmd_name]} is not the command {cmd_name}")
            self.add_command(command)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="seshat", prog_name="seshat")
def cli() -> None:
    """Seshat keeps databases converged with what a Git repository declares.

    It reads declarations (DatabaseSchema, DatabaseMigration and their policies) from a
    repository, plans and applies changes through the runner, and writes every verdict back
    to Git. Start with `seshat validate REPO` on a copy of examples/repo.
    """


@cli.command()
@click.argument("repo", type=click.Path(path_type=Path), default=".")
@format_option(
    "text",
    "json",
    help="text: one `path:line: field: message` line per problem (at most "
    f"{MAX_PROBLEMS_PER_FILE} per file); json: resources and every problem.",
)
def validate(repo: Path, output_format: str) -> None:
    """Check every declaration in REPO and report all problems at once.

    Text output shows at most 100 problems of one file, then `PATH: ... and N more
    problems in this file`; the count on stderr and --format json have them all.

    Exit status: 0 when everything is valid, 1 when problems were found, 2 when the check
    could not run. Meant for CI on pull requests.
    """
    repository = _load(repo)
    if output_format == "json":
        document = {
            "resources": _rendered(repository),
            "problems": [p.to_json() for p in repository.problems],
        }
        click.echo(json.dumps(document, indent=2, sort_keys=False))
    else:
        for line in problem_lines(repository.problems):
            click.echo(line)
        files = len({p.path for p in repository.problems})
        counted = f"{_count(len(repository.problems), 'problem')} in {_count(files, 'file')}"
        found = counted if repository.problems else "no problems"
        click.echo(f"{_count(len(repository.resources), 'valid resource')}, {found}", err=True)
    sys.exit(EXIT_PROBLEMS if repository.problems else EXIT_OK)


@cli.command()
@click.argument("repo", type=click.Path(path_type=Path), default=".")
@click.option(
    "--crds", "show_crds", is_flag=True, help="Print the CustomResourceDefinitions instead."
)
@click.option(
    "--write",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --crds: write one file per CRD into this folder (e.g. deploy/crds).",
)
def render(repo: Path, show_crds: bool, write: Path | None) -> None:
    """Print REPO's resources as Kubernetes custom resources (YAML), defaults applied.

    The output can be given to kubectl, Argo CD or Flux. Problems go to stderr and make the
    exit status 1; the valid resources are still printed.
    """
    from gitops.crds import crds
    from gitops.yamlout import dump_all

    if show_crds:
        definitions = crds()
        if write is None:
            click.echo(dump_all(definitions), nl=False)
            return
        write.mkdir(parents=True, exist_ok=True)
        for crd in definitions:
            target = write / f"{crd['metadata']['name']}.yaml"
            target.write_text(dump_all([crd]), encoding="utf-8")
            click.echo(f"wrote {target}", err=True)
        return
    if write is not None:
        raise click.UsageError("--write is only for --crds")
    repository = _load(repo)
    click.echo(dump_all(_rendered(repository)), nl=False)
    for line in problem_lines(repository.problems):
        click.echo(line, err=True)
    sys.exit(EXIT_PROBLEMS if repository.problems else EXIT_OK)


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the temporary directory for inspection.")
@click.option(
    "--fleet",
    is_flag=True,
    help="Show a fleet instead: three tenants, one approval, two waves (docs/fleets.md).",
)
def demo(keep: bool, fleet: bool) -> None:
    """Run the whole loop offline: plan, approve, apply, a destructive change refused.

    Uses a temporary Git repository, a local OCI layout, SQLite, fresh keys and the real
    reconciler and runner. Nothing outside the temporary directory is touched.
    """
    from gitops.demo import run_demo

    root = run_demo(click.echo, keep=keep, fleet=fleet)
    if keep:
        click.echo(f"kept {root}")


def main() -> None:
    """Entry point of the ``seshat`` console script."""
    cli()
