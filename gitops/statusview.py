"""``seshat status`` and ``seshat plan show``: reading the status branch, for people.

Both read the status branch of a repository (a path or URL) through a bare clone in a
temporary directory, as Git blobs (never a checkout, so nothing pushed there is followed),
so they need only read access to Git and never a database.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.table import Table

from gitops.repo.yamlfile import FileError, read_documents
from gitops.writeback.bare import BareClone
from gitops.writeback.recorded import (
    NotShown,
    checked_migration_plan,
    checked_schema_plan,
    fleet_plan_of,
    status_source,
    status_tree,
)
from gitops.writeback.status_files import (
    binding_path,
    impact_lines,
    impact_path,
    plan_paths,
    status_path,
)
from runner.digests import Digest, sha256_digest
from runner.engines.plan import PlanDocument, comment_text, plan_sql, sandbox_notes
from runner.errors import CanNotRunError
from runner.options import format_option

__all__ = ["plan_group", "status"]


@contextmanager
def _status_tree(source: str, branch: str) -> Iterator[tuple[BareClone, str]]:
    """The status branch's tip (:func:`gitops.writeback.recorded.status_tree`), or exit 2."""
    try:
        with status_tree(status_source(source, branch), branch) as found:
            yield found
    except CanNotRunError as error:
        click.echo(f"seshat: {error}", err=True)
        sys.exit(2)


def _document(data: bytes) -> dict[str, Any] | None:
    try:
        found = read_documents(data)[0].data
    except (FileError, ValueError, IndexError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _statuses(clone: BareClone, tip: str, folder: str = "status") -> list[dict[str, Any]]:
    """The status files directly in ``folder`` (``status/<ns>/<name>.yaml``; a fleet's
    members: ``status/<ns>/<fleet>/<member>.yaml``)."""
    found = []
    depth = 3 if folder == "status" else folder.count("/") + 2
    for path in clone.files(tip, folder):
        parts = path.split("/")
        if len(parts) != depth or not parts[-1].endswith(".yaml"):
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
    help="The repository (path or URL) whose status branch to read; a work tree without "
    "a local status branch is read through its origin remote.",
)
@click.option("--status-branch", default="seshat/status", show_default=True)
@format_option("table", "json")
def status(target: str | None, source: str, status_branch: str, output_format: str) -> None:
    """Show each resource's phase, reason, what the database reading found (the migration
    history verdict, or schema drift), current plan and last applied plan."""
    with _status_tree(source, status_branch) as (clone, tip):
        documents = _statuses(clone, tip)
        if target is not None and target.count("/") == 2:  # NAMESPACE/FLEET/MEMBER
            namespace, _, name = target.partition("/")
            data = clone.read(tip, status_path(namespace, name))
            documents = [d for d in [_document(data) if data else None] if d is not None]
        elif target is not None:
            documents = [d for d in documents if _named(d) == target]
            fleet = next((d for d in documents if d["resource"]["kind"] == "DatabaseFleet"), None)
            if fleet is not None:  # NAMESPACE/FLEET: its members, one row each
                documents = _statuses(clone, tip, f"status/{target}")
                if output_format == "json":
                    documents = [fleet, *documents]
                else:
                    _fleet_summary(fleet)
        if target is not None and not documents:
            click.echo(f"seshat: no status for {target}", err=True)
            sys.exit(1)
    if output_format == "json":
        click.echo(json.dumps(documents, sort_keys=True, indent=2))
        return
    table = Table("resource", "kind", "phase", "reason", "database", "plan", "last applied")
    for document in documents:
        resource, state = document["resource"], document.get("status", {})
        if resource["kind"] == "DatabaseFleet":
            table.add_row(_named(document), "DatabaseFleet", *_fleet_row(state))
            continue
        current = state.get("plan") or {}
        plan = current.get("id", "")[:19] + _plan_marks(current) + _impact_marks(current)
        last = state.get("lastApplied") or {}
        applied = f"{last.get('planId', '')[:19]} {last.get('outcome', '')}".strip()
        table.add_row(
            f"{resource['namespace']}/{resource['name']}",
            resource["kind"],
            state.get("phase", ""),
            _ready(state),
            _database(state),
            plan,
            applied,
        )
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    for document in documents:  # no approval file is skipped silently
        resource = document["resource"]
        for rejected in (document.get("status") or {}).get("rejectedApprovals") or []:
            said = (
                f"{resource['namespace']}/{resource['name']}: approval {rejected.get('file')} "
                f"not accepted: {rejected.get('reason')}: {rejected.get('detail', '')}"
            )
            click.echo(comment_text(said))  # repository text: no control characters


def _named(document: dict[str, Any]) -> str:
    return f"{document['resource']['namespace']}/{document['resource']['name']}"


def _progress(state: dict[str, Any], width: int = 10) -> str:
    """``[######----] 6/10 InSync``: how much of a fleet is converged."""
    members = int(state.get("members", 0))
    in_sync = int((state.get("phases") or {}).get("InSync", 0))
    filled = round(width * in_sync / members) if members else 0
    return f"[{'#' * filled}{'-' * (width - filled)}] {in_sync}/{members} InSync"


def _fleet_row(state: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """A fleet's row: its phase, what stops it (a halted member), progress, distinct plans."""
    plans = state.get("plans") or []
    waiting = sum(1 for p in plans if not p.get("approved"))
    said = f"{len(plans)} distinct plan(s)" + (f", {waiting} unapproved" if waiting else "")
    attention = state.get("attention") or []
    reason = f"{len(attention)} need attention" if attention else ""
    return str(state.get("phase", "")), reason, _progress(state), said if plans else "", ""


def _fleet_summary(document: dict[str, Any]) -> None:
    """What a fleet's status says before its members' table: phase, steps, plans, resume."""
    state = document.get("status") or {}
    lines = [f"fleet {_named(document)}: {state.get('phase', '')} {_progress(state)}"]
    if state.get("message"):
        lines.append(f"  {state['message']}")
    for step in state.get("steps") or []:
        match = ", ".join(f"{k}={v}" for k, v in (step.get("match") or {}).items()) or "*"
        lines.append(
            f"  step {step.get('index')} ({match}): {step.get('state')}, "
            f"{step.get('inSync', 0)}/{step.get('members', 0)} InSync"
        )
    for plan in state.get("plans") or []:
        names = ", ".join(plan.get("names") or [])
        approval = "approved" if plan.get("approved") else "awaiting approval"
        lines.append(
            f"  fleet plan {plan.get('id')}: {approval}, {plan.get('members')} member(s): {names}"
        )
    for name in state.get("left") or []:
        lines.append(f"  {name}: left the fleet (not reconciled)")
    for line in lines:
        click.echo(comment_text(line))


def _plan_marks(plan: dict[str, Any]) -> str:
    """How a plan's desired schema ran, when not as by default: ``procedural`` (the
    declaration let procedural statements run), ``no jail`` (the sandbox server ran without
    its OS jail, ``spec.dev.isolation: none``), ``N drops skipped`` (``drops: Skip`` left
    what only the database has alone)."""
    marks = ["procedural"] if plan.get("proceduralSchema") else []
    if plan.get("sandboxIsolation") == "none":
        marks.append("no jail")
    skipped = plan.get("skippedDrops")
    if isinstance(skipped, int):
        marks.append(f"{skipped} drops skipped")
    return f" ({', '.join(marks)})" if marks else ""


def _impact_marks(plan: dict[str, Any]) -> str:
    """The plan's impact aggregates: how many figures counted something, how many are
    unknown (``seshat plan show`` words each one)."""
    impact = plan.get("impact")
    if not isinstance(impact, dict):
        return ""
    said = [f"{impact.get(k, 0)} {k}" for k in ("counted", "unknown") if impact.get(k)]
    return f" impact: {', '.join(said) or 'none'}"


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
        impact = impact_lines(clone.read(tip, impact_path(namespace, name, plan_id)))
    shown = _checked_schema_plan(plan_id, raw, binding, sql)
    click.echo(f"plan id      {plan_id} (verified)")
    click.echo(f"plan digest  {sha256_digest(raw)} (named by the id's binding)")
    hazards = ", ".join(f"{k}={v}" for k, v in shown.summary.hazards.items()) or "none"
    click.echo(
        f"statements   {shown.summary.statements}; destructive: "
        f"{shown.summary.destructive}; hazards: {hazards}"
    )
    for note in sandbox_notes(shown):
        click.echo(f"ran as       {note.removeprefix('-- ')}")
    for line in impact:  # observations beside the plan: its id does not cover them
        click.echo(f"impact       {comment_text(line)}")
    _approve_with(target, plan_id, binding)
    click.echo(plan_sql(shown, plan_id), nl=False)


def _approve_with(target: str, plan_id: str, binding: bytes | None) -> None:
    """The approve command: a fleet member's names its fleet plan (recomputed from the
    checked binding), which approves every member sharing it."""
    if target.count("/") == 2 and binding is not None:
        fleet_plan = fleet_plan_of(json.loads(binding))
        click.echo(f"fleet plan   {fleet_plan} (every member of the fleet with this plan)")
        click.echo(f"approve with seshat approve {target} --key KEY\n")
        return
    click.echo(f"approve with seshat approve {target} --plan {plan_id} --key KEY\n")


def _refuse(message: str) -> NoReturn:
    click.echo(f"seshat: {message}; nothing is shown", err=True)
    sys.exit(1)


def _checked_schema_plan(
    plan_id: Digest, raw: bytes, binding: bytes | None, sql: bytes | None
) -> PlanDocument:
    """The plan document checked against ``plan_id`` (:func:`checked_schema_plan`), or a
    refusal (exit 1)."""
    try:
        return checked_schema_plan(plan_id, raw, binding, sql)
    except NotShown as error:
        _refuse(str(error))


def _show_migration_plan(target: str, plan_id: str, raw: bytes) -> None:
    """A migration plan: the files it applies, in order; its id recomputed from its bytes."""
    try:
        document = checked_migration_plan(Digest(plan_id), raw)
    except NotShown as error:
        _refuse(str(error))
    click.echo(f"plan id      {plan_id} (verified)")
    click.echo(f"history      {document['historyFingerprint']}")
    click.echo(f"artifact     {document['artifactDigest']}")
    _approve_with(target, plan_id, raw)
    click.echo("applies, in order (the SQL is in the artifact):")
    for entry in document["files"]:
        click.echo(f"  {entry['version']:>6}  {entry['name']}  {entry['checksum']}")
