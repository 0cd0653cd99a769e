"""``seshat status`` and ``seshat plan show``: reading the status branch, for people.

Both read the status branch of a repository (a path or URL) through a shallow clone into a
temporary directory, so they need only read access to Git and never a database.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import git
from rich.console import Console
from rich.table import Table

from gitops.repo.yamlfile import read_documents
from runner.digests import digest, sha256_digest
from runner.engines.plan import plan_bytes, plan_sql, read_plan

__all__ = ["plan_group", "status"]


@contextmanager
def _status_tree(source: str, branch: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="seshat-status-") as folder:
        try:
            git.Repo.clone_from(source, folder, branch=branch, depth=1, single_branch=True).close()
        except git.GitCommandError:
            click.echo(f"seshat: {source} has no branch {branch} yet (no pass has run?)", err=True)
            sys.exit(2)
        yield Path(folder)


def _statuses(tree: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted((tree / "status").glob("*/*.yaml")):
        data = read_documents(path.read_bytes())[0].data
        if isinstance(data, dict):
            found.append(data)
    return found


def _database(status: dict[str, Any]) -> str:
    """What the last reading of the database found: an unresolved run first, then the
    history verdict with its versions (migrations), or the drift total (schemas)."""
    history = status.get("history")
    unresolved = status.get("unresolvedRun")
    if unresolved:  # what blocks every Apply, and what to acknowledge (the history read
        # before that run is out of date)
        return f"unresolved {unresolved.get('outcome', '')} run {unresolved.get('operationId')}"
    if history:
        words = [str(history.get("verdict", ""))]
        if history.get("currentVersion"):
            words.append(f"at {history['currentVersion']}")
        involved = history.get("involvedVersions") or []
        if involved and words[0] not in ("ready", "nothing_pending"):
            words.append(f"({', '.join(involved)})")
        pending = history.get("pendingVersions") or []
        if pending:
            shown = ", ".join(pending[:5]) + (", ..." if len(pending) > 5 else "")
            words.append(f"pending {shown}")
        return " ".join(words)
    drift = status.get("drift")
    if drift:
        total = int(drift.get("total", 0))
        return "no drift" if total == 0 else f"drift {total} ({drift.get('highestSeverity')})"
    return ""


def _ready(status: dict[str, Any]) -> str:
    for condition in status.get("conditions", []):
        if condition.get("type") == "Ready":
            return str(condition.get("reason", ""))
    return ""


@click.command()
@click.argument("target", required=False, metavar="[NAMESPACE/NAME]")
@click.option(
    "--repo",
    "source",
    default=".",
    show_default=True,
    help="The repository (path or URL) whose status branch to read.",
)
@click.option("--status-branch", default="seshat/status", show_default=True)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
)
def status(target: str | None, source: str, status_branch: str, output_format: str) -> None:
    """Show each resource's phase, reason, what the database reading found (the migration
    history verdict, or schema drift), current plan and last applied plan."""
    with _status_tree(source, status_branch) as tree:
        documents = _statuses(tree)
    if target is not None:
        documents = [
            d
            for d in documents
            if f"{d['resource']['namespace']}/{d['resource']['name']}" == target
        ]
        if not documents:
            click.echo(f"seshat: no status for {target}", err=True)
            sys.exit(1)
    if output_format == "json":
        click.echo(json.dumps(documents, sort_keys=True, indent=2))
        return
    table = Table("resource", "kind", "phase", "reason", "database", "plan", "last applied")
    for document in documents:
        resource, state = document["resource"], document.get("status", {})
        plan = (state.get("plan") or {}).get("id", "")
        last = state.get("lastApplied") or {}
        applied = f"{last.get('planId', '')[:19]} {last.get('outcome', '')}".strip()
        table.add_row(
            f"{resource['namespace']}/{resource['name']}",
            resource["kind"],
            state.get("phase", ""),
            _ready(state),
            _database(state),
            plan[:19],
            applied,
        )
    Console(width=None if sys.stdout.isatty() else 200).print(table)


@click.group(name="plan")
def plan_group() -> None:
    """Plans recorded on the status branch."""


@plan_group.command(name="show")
@click.argument("target", metavar="NAMESPACE/NAME")
@click.option("--repo", "source", default=".", show_default=True)
@click.option("--status-branch", default="seshat/status", show_default=True)
def plan_show(target: str, source: str, status_branch: str) -> None:
    """Reconstruct the current plan from Git, check its bytes, print its SQL and hazards."""
    namespace, _, name = target.partition("/")
    with _status_tree(source, status_branch) as tree:
        status_file = tree / "status" / namespace / f"{name}.yaml"
        if not status_file.is_file():
            click.echo(f"seshat: no status for {target}", err=True)
            sys.exit(1)
        data = read_documents(status_file.read_bytes())[0].data
        assert isinstance(data, dict)
        plan = (data.get("status") or {}).get("plan")
        if not plan:
            click.echo(f"{target}: no current plan ({data['status'].get('phase')})")
            return
        raw = (tree / plan["path"]).read_bytes()
        if data.get("kind") == "DatabaseMigrationStatus":
            _show_migration_plan(target, plan["id"], raw)
            return
        document = read_plan(raw)
        if plan_bytes(document) != raw:
            click.echo(f"seshat: {plan['path']} is not a canonical plan document", err=True)
            sys.exit(1)
        sql_file = tree / plan["path"].replace(".json", ".sql")
        if sql_file.is_file() and sql_file.read_text(encoding="utf-8") != plan_sql(document):
            click.echo(f"seshat: {sql_file.name} does not match the plan document", err=True)
            sys.exit(1)
    click.echo(f"plan id      {plan['id']}")
    click.echo(f"plan digest  {sha256_digest(raw)} (verified)")
    hazards = ", ".join(f"{k}={v}" for k, v in document.summary.hazards.items()) or "none"
    click.echo(
        f"statements   {document.summary.statements}; destructive: "
        f"{document.summary.destructive}; hazards: {hazards}"
    )
    click.echo(f"approve with seshat approve {target} --plan {plan['id']} --key KEY\n")
    click.echo(plan_sql(document), nl=False)


def _show_migration_plan(target: str, plan_id: str, raw: bytes) -> None:
    """A migration plan: the files it applies, in order; its id recomputed from its bytes."""
    document = json.loads(raw)
    if not isinstance(document, dict) or digest("migration-plan-id", document) != plan_id:
        click.echo(f"seshat: the plan document does not hash to {plan_id}", err=True)
        sys.exit(1)
    click.echo(f"plan id      {plan_id} (verified)")
    click.echo(f"history      {document['historyFingerprint']}")
    click.echo(f"artifact     {document['artifactDigest']}")
    click.echo(f"approve with seshat approve {target} --plan {plan_id} --key KEY\n")
    click.echo("applies, in order (the SQL is in the artifact):")
    for entry in document["files"]:
        click.echo(f"  {entry['version']:>6}  {entry['name']}  {entry['checksum']}")
