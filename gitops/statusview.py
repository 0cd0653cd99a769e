"""``seshat status`` and ``seshat plan show``: reading the status branch, for people.

Both read the status branch of a repository (a path or URL) through a bare clone in a
temporary directory, as Git blobs (never a checkout, so nothing pushed there is followed),
so they need only read access to Git and never a database.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.table import Table

from gitops.reconcile.identities import MIGRATION_PLAN_CONTRACT, SCHEMA_PLAN_CONTRACT
from gitops.repo.yamlfile import FileError, read_documents
from gitops.writeback.bare import BareClone
from gitops.writeback.status_files import binding_path, plan_paths, status_path
from runner.digests import Digest, digest, sha256_digest
from runner.engines.plan import PlanDocument, plan_bytes, plan_digest, plan_sql, read_plan
from runner.errors import SeshatError
from runner.options import format_option

__all__ = ["plan_group", "status"]


@contextmanager
def _status_tree(source: str, branch: str) -> Iterator[tuple[BareClone, str]]:
    """The status branch's tip in a throwaway bare clone: files are read as Git blobs, so a
    symlink or a folder pushed in place of a file is never followed."""
    with tempfile.TemporaryDirectory(prefix="seshat-status-") as folder:
        clone = BareClone(Path(folder) / "status.git", source)
        try:
            try:
                clone.fetch(branch)
            except SeshatError as error:
                click.echo(f"seshat: {error}", err=True)
                sys.exit(2)
            tip = clone.tip(branch)
            if tip is None:
                click.echo(
                    f"seshat: {source} has no branch {branch} yet (no pass has run?)", err=True
                )
                sys.exit(2)
            yield clone, tip
        finally:
            clone.close()


def _document(data: bytes) -> dict[str, Any] | None:
    try:
        found = read_documents(data)[0].data
    except (FileError, ValueError, IndexError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _statuses(clone: BareClone, tip: str) -> list[dict[str, Any]]:
    found = []
    for path in clone.files(tip, "status"):
        parts = path.split("/")
        if len(parts) != 3 or not parts[2].endswith(".yaml"):
            continue
        data = clone.read(tip, path)
        document = _document(data) if data is not None else None
        if document is not None and isinstance(document.get("resource"), dict):
            found.append(document)
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
@format_option("table", "json")
def status(target: str | None, source: str, status_branch: str, output_format: str) -> None:
    """Show each resource's phase, reason, what the database reading found (the migration
    history verdict, or schema drift), current plan and last applied plan."""
    with _status_tree(source, status_branch) as (clone, tip):
        documents = _statuses(clone, tip)
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
    """Print the current plan's SQL and hazards, after checking it against its id.

    The plan's files are found from its id alone, and the id is recomputed from the plan's
    binding (which names the plan document's digest): a plan shown is the plan that id
    approves, or nothing is shown and the exit status is 1.
    """
    namespace, _, name = target.partition("/")
    with _status_tree(source, status_branch) as (clone, tip):
        try:
            status_file = status_path(namespace, name)
            data = clone.read(tip, status_file)
        except ValueError:
            data = None
        document = _document(data) if data is not None else None
        if document is None:
            click.echo(f"seshat: no status for {target}", err=True)
            sys.exit(1)
        state = document.get("status") if isinstance(document.get("status"), dict) else {}
        assert isinstance(state, dict)
        plan = state.get("plan")
        if not plan:
            click.echo(f"{target}: no current plan ({state.get('phase')})")
            return
        try:
            plan_id = Digest(plan.get("id") if isinstance(plan, dict) else None)
            json_path, sql_path = plan_paths(namespace, name, plan_id)
        except ValueError:
            _refuse(f"the status of {target} names no valid plan id")
        raw = clone.read(tip, json_path)
        if raw is None:
            _refuse(f"the plan {plan_id} has no document on {status_branch}")
        if document.get("kind") == "DatabaseMigrationStatus":
            _show_migration_plan(target, plan_id, raw)
            return
        binding = clone.read(tip, binding_path(namespace, name, plan_id))
        sql = clone.read(tip, sql_path)
    shown = _checked_schema_plan(plan_id, raw, binding, sql)
    click.echo(f"plan id      {plan_id} (verified)")
    click.echo(f"plan digest  {sha256_digest(raw)} (named by the id's binding)")
    hazards = ", ".join(f"{k}={v}" for k, v in shown.summary.hazards.items()) or "none"
    click.echo(
        f"statements   {shown.summary.statements}; destructive: "
        f"{shown.summary.destructive}; hazards: {hazards}"
    )
    click.echo(f"approve with seshat approve {target} --plan {plan_id} --key KEY\n")
    click.echo(plan_sql(shown, plan_id), nl=False)


def _refuse(message: str) -> NoReturn:
    click.echo(f"seshat: {message}; nothing is shown", err=True)
    sys.exit(1)


def _json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        _refuse(f"{what} is not JSON")


def _checked_schema_plan(
    plan_id: Digest, raw: bytes, binding: bytes | None, sql: bytes | None
) -> PlanDocument:
    """The plan document, if its binding hashes to ``plan_id`` and names its bytes and its
    summary; else a refusal (exit 1)."""
    if binding is None:
        _refuse(
            f"plan {plan_id} has no binding on the status branch, so its document cannot be "
            "checked against its id (plans written before Seshat recorded bindings: the next "
            "pass records it)"
        )
    bound = _json(binding, "the plan's binding")
    if not isinstance(bound, dict) or digest(SCHEMA_PLAN_CONTRACT, bound) != plan_id:
        _refuse(f"the plan's binding does not hash to {plan_id}")
    if bound.get("planDigest") != sha256_digest(raw):
        _refuse(f"the plan document is not the one plan {plan_id} binds")
    try:
        document = read_plan(raw)
    except (ValueError, SeshatError):
        _refuse("the plan document cannot be read")
    summary = document.summary
    if plan_bytes(document) != raw or (
        bound.get("destructive"),
        bound.get("statements"),
        bound.get("privilegeChanges"),
    ) != (summary.destructive, summary.statements, sorted(summary.privilege_changes)):
        _refuse(f"the plan document does not match what plan {plan_id} binds")
    # Plans recorded before the header named the plan id carry the content digest there.
    written = (plan_sql(document, plan_id), plan_sql(document, plan_digest(document)))
    if sql is not None and sql.decode("utf-8", errors="replace") not in written:
        _refuse("the plan's SQL file does not match its document")
    return document


def _show_migration_plan(target: str, plan_id: str, raw: bytes) -> None:
    """A migration plan: the files it applies, in order; its id recomputed from its bytes."""
    document = _json(raw, "the plan document")
    if not isinstance(document, dict) or digest(MIGRATION_PLAN_CONTRACT, document) != plan_id:
        _refuse(f"the plan document does not hash to {plan_id}")
    click.echo(f"plan id      {plan_id} (verified)")
    click.echo(f"history      {document['historyFingerprint']}")
    click.echo(f"artifact     {document['artifactDigest']}")
    click.echo(f"approve with seshat approve {target} --plan {plan_id} --key KEY\n")
    click.echo("applies, in order (the SQL is in the artifact):")
    for entry in document["files"]:
        click.echo(f"  {entry['version']:>6}  {entry['name']}  {entry['checksum']}")
