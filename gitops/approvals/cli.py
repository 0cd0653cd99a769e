"""``seshat approve`` and ``seshat verify-approval``: signing and checking approvals.

Exit status of ``verify-approval``: 0 accepted, 1 refused (the reason is printed), 2 could
not run (a missing file, no ssh-keygen, an unreadable repository).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from datetime import timedelta
from pathlib import Path

import click

from gitops.approvals.ssh import ACKNOWLEDGMENT_NAMESPACE, APPROVAL_NAMESPACE
from gitops.approvals.verify import load_bundles, sigstore_path, verify_statement
from gitops.approvals.write import Signed, approval_path, signature_path
from gitops.approvals.write import approve as write_approval
from gitops.repo.files import (
    MAX_SIGNATURE_BYTES,
    MAX_STATEMENT_BYTES,
    UnreadableFile,
    read_regular,
)
from gitops.repo.loader import Repository, load_repository
from gitops.repo.options import repo_option
from gitops.repo.single import load_one
from gitops.repo.yamlfile import FileError, read_documents
from gitops.resources.approvals import Approval, ResourceRef, RunAcknowledgment
from gitops.resources.base import parse_duration
from gitops.resources.policies import ApprovalPolicy
from gitops.writeback.bare import BareClone
from gitops.writeback.recorded import current_plan, status_source, status_tree
from gitops.writeback.status_files import read_fleet_status, status_path
from runner.errors import SeshatError
from runner.options import format_option

__all__ = ["acknowledge", "approve", "verify_approval"]

EXIT_OK, EXIT_REFUSED, EXIT_CANNOT_RUN = 0, 1, 2
LIFECYCLE_KINDS = ("DatabaseSchema", "DatabaseMigration")


_repo_option = repo_option("The repository (a Git work tree) declaring the resource.")
_kind_option = click.option(
    "--kind", type=click.Choice(LIFECYCLE_KINDS), help="If both kinds use the name."
)
_KEY_HELP = "Your SSH private key (or its .pub when the private key is in ssh-agent)."


def _fail(message: str) -> None:
    click.echo(f"seshat: {message}", err=True)
    sys.exit(EXIT_CANNOT_RUN)


def _read(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most ``limit`` of them (empty when there is none)."""
    try:
        return read_regular(path, limit) or b""
    except UnreadableFile as error:
        _fail(str(error))
        raise


def _repository(repo: Path) -> Repository:
    try:
        return load_repository(repo)
    except SeshatError as error:
        _fail(str(error))
        raise


def _resource_ref(repository: Repository, target: str, kind: str | None) -> ResourceRef:
    """The resource ``NAMESPACE/NAME`` (a fleet member: ``NAMESPACE/FLEET/MEMBER``)."""
    namespace, slash, name = target.partition("/")
    if not slash or not namespace or not name:
        _fail(f"{target!r}: give the resource as NAMESPACE/NAME")
    kinds = (kind,) if kind else LIFECYCLE_KINDS
    found = [r for k in kinds if (r := repository.find(k, namespace, name)) is not None]
    if not found:
        hint = (
            f" ({len(repository.problems)} problems in the repository: run seshat validate)"
            if repository.problems
            else ""
        )
        _fail(f"no valid {' or '.join(kinds)} {namespace}/{name} in {repository.root}{hint}")
    if len(found) > 1:
        _fail(f"both a DatabaseSchema and a DatabaseMigration are named {target}; give --kind")
    resource = found[0].resource
    return ResourceRef(
        kind=resource.kind,
        namespace=namespace,
        name=name,
        uid=str(resource.metadata.uid),
    )


@click.command()
@click.argument("target", metavar="NAMESPACE/NAME")
@click.option(
    "--plan",
    "plan_id",
    help="The plan id to approve (sha256:...). Without it: the current plan the resource's "
    "status records, shown first and confirmed on a terminal.",
)
@click.option(
    "--yes",
    is_flag=True,
    help="Without --plan: approve the current plan without asking (for scripts).",
)
@click.option(
    "--status-from",
    "status_source",
    help="Without --plan: the repository (path or URL) whose status branch to read "
    "[default: the work tree, or its origin remote when it has no local status branch].",
)
@_repo_option
@_kind_option
@click.option(
    "--key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=_KEY_HELP,
)
@click.option(
    "--sigstore-bundle",
    "bundle",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A Sigstore bundle signing the existing approval file's bytes (from 'sigstore sign').",
)
@click.option("--expires-in", help="Refuse the approval after this long (e.g. 2d, 12h).")
@click.option("--comment", default="", help="Why (kept in the approval file).")
@click.option(
    "--fresh",
    is_flag=True,
    help="Write a new statement even if one exists (its signatures are dropped): a plan id "
    "that comes back after its approval was consumed needs one. Implied when your key "
    "already signed the existing statement.",
)
def approve(
    target: str,
    plan_id: str | None,
    yes: bool,
    status_source: str | None,
    repo: Path,
    kind: str | None,
    key: Path | None,
    bundle: Path | None,
    expires_in: str | None,
    comment: str,
    fresh: bool,
) -> None:
    """Approve one plan of one resource: write the approval file and sign it with SSH.

    The file goes to approvals/<namespace>/<name>/<plan-id-hex>.yaml with the signature in
    <file>.sig (namespace seshat-approval). Another approver runs the same command to add
    their signature. Commit both files and open a pull request.

    With --sigstore-bundle instead of --key, a Sigstore bundle made elsewhere over the
    existing approval file's bytes is added to <file>.sigstore.json (a JSON list of bundles).

    Without --plan, the plan approved is the current plan the resource's status records on
    the status branch (the id seshat plan show, the status, the review and plan.sql's header
    show): its summary is printed and, on a terminal, confirmed; --yes skips the question.
    Without a terminal and without --yes nothing is written (exit 2).
    """
    if (key is None) == (bundle is None):
        _fail("give exactly one of --key or --sigstore-bundle")
    repository = _repository(repo)
    fleet = _fleet(repository, target)
    if fleet is not None:  # NAMESPACE/FLEET: the one distinct plan that waits
        resource = fleet
        if plan_id is None:
            plan_id = _confirmed_fleet_plan(repository, fleet, status_source, yes)
    else:
        resource = _resource_ref(repository, target, kind)
        member = _fleet_of_member(repository, resource)
        if member is not None:  # NAMESPACE/FLEET/MEMBER: its fleet plan, for all sharing it
            if plan_id is None:
                plan_id = _confirmed_current_plan(repository, resource, status_source, yes, True)
            resource = member
        elif plan_id is None:
            plan_id = _confirmed_current_plan(repository, resource, status_source, yes)
    if bundle is not None:
        _add_bundle(approval_path(repository.root, resource, plan_id), bundle, repository.root)
        return
    assert key is not None
    try:
        expires = timedelta(seconds=parse_duration(expires_in)) if expires_in else None
        signed = write_approval(
            repository.root,
            resource,
            plan_id,
            key,
            expires_in=expires,
            comment=comment,
            fresh=fresh,
        )
    except (SeshatError, ValueError) as error:
        _fail(str(error))
        return
    _echo_signed(signed, repository.root)


def _fleet(repository: Repository, target: str) -> ResourceRef | None:
    """The fleet ``NAMESPACE/FLEET`` names, if it names one."""
    namespace, _, name = target.partition("/")
    found = repository.find("DatabaseFleet", namespace, name) if "/" not in name else None
    if found is None:
        return None
    uid = str(found.resource.metadata.uid)
    return ResourceRef(kind="DatabaseFleet", namespace=namespace, name=name, uid=uid)


def _fleet_of_member(repository: Repository, resource: ResourceRef) -> ResourceRef | None:
    """The fleet of a member resource (None: not a member): what its approvals name."""
    found = repository.find(resource.kind, resource.namespace, resource.name)
    member = found.member if found is not None else None
    if member is None:
        return None
    return _fleet(repository, f"{resource.namespace}/{member.fleet}")


def _confirmed_fleet_plan(
    repository: Repository, fleet: ResourceRef, source: str | None, yes: bool
) -> str:
    """The one distinct plan of the fleet's members that waits for an approval, after
    showing it (and asking, unless ``yes``); several: each listed, nothing approved."""
    branch = repository.config.spec.status_branch
    where = source or status_source(str(repository.root), branch)
    try:
        with status_tree(where, branch) as (clone, tip):
            waiting = _listed_waiting(repository, clone, tip, fleet) or _members_waiting(
                repository, clone, tip, fleet
            )
    except SeshatError as error:
        _fail(f"{error}; nothing is approved (give --plan to approve a fleet plan by its id)")
    target = f"{fleet.namespace}/{fleet.name}"
    if not waiting:
        _fail(f"no member of fleet {target} waits for an approval on {branch}: nothing to approve")
    for fleet_plan, (count, names) in sorted(waiting.items()):
        shown = ", ".join(names[:10])
        more = f" and {count - 10} more" if count > 10 else ""
        click.echo(f"{target}: fleet plan {fleet_plan}: {count} member(s): {shown}{more}")
    if len(waiting) > 1:
        _fail(
            f"{len(waiting)} distinct plans wait: approve one with --plan FLEET-PLAN-ID, or "
            f"one member's with seshat approve {target}/MEMBER"
        )
    [(fleet_plan, _)] = waiting.items()
    return _confirmed(fleet_plan, yes)


Waiting = dict[str, tuple[int, list[str]]]
"""Fleet plan id -> how many members wait on it, and (the first of) their names."""


def _listed_waiting(
    repository: Repository, clone: BareClone, tip: str, fleet: ResourceRef
) -> Waiting:
    """The distinct plans waiting, as the fleet's own status file lists them: one read
    instead of one per member. Believed only when it lists every distinct plan and, for each
    waiting one, the first member it names is one the repository declares and does wait on
    it, its plan checked against its id (a status file is anybody's to write); else nothing,
    and the members are read one by one."""
    try:
        recorded = read_fleet_status(clone.read(tip, status_path(fleet.namespace, fleet.name)))
    except ValueError:
        return {}
    if recorded is None or recorded.distinct_plans > len(recorded.plans):
        return {}
    declared = {m.key.name for m in repository.members(fleet.namespace, fleet.name)}
    waiting: Waiting = {}
    for listed in recorded.plans:
        if listed.approved:
            continue
        first = f"{fleet.name}/{listed.names[0]}" if listed.names else None
        if first not in declared:
            return {}
        try:
            plan = current_plan(clone, tip, fleet.namespace, first)
        except SeshatError:
            return {}
        if plan is None or plan.fleet_plan != listed.id or plan.phase not in _WAITING:
            return {}
        waiting[listed.id] = (listed.members, list(listed.names))
    return waiting


def _members_waiting(
    repository: Repository, clone: BareClone, tip: str, fleet: ResourceRef
) -> Waiting:
    """The distinct plans waiting, from every member's own status and plan."""
    waiting: dict[str, list[str]] = {}
    for loaded in repository.members(fleet.namespace, fleet.name):
        try:
            plan = current_plan(clone, tip, fleet.namespace, loaded.key.name)
        except SeshatError:
            continue  # not reconciled yet
        if plan is not None and plan.fleet_plan is not None and plan.phase in _WAITING:
            waiting.setdefault(plan.fleet_plan, []).append(loaded.key.name.rpartition("/")[2])
    return {plan: (len(names), names) for plan, names in waiting.items()}


_WAITING = ("AwaitingApproval", "Pending")


def _confirmed(plan_id: str, yes: bool) -> str:
    """``plan_id`` once confirmed on the terminal (or ``yes``); else exit."""
    if yes:
        return plan_id
    if not sys.stdin.isatty():
        _fail(
            "stdin is not a terminal, so the plan cannot be confirmed: give --yes to approve "
            f"it without the question, or --plan {plan_id}"
        )
    if not click.confirm(f"Approve plan {plan_id}?", default=False):
        click.echo("seshat: not approved; nothing was written", err=True)
        sys.exit(EXIT_REFUSED)
    return plan_id


def _confirmed_current_plan(
    repository: Repository,
    resource: ResourceRef,
    source: str | None,
    yes: bool,
    fleet: bool = False,
) -> str:
    """The id of the plan the resource's status records (a fleet member's: its fleet plan
    id), after showing its summary and (unless ``yes``) asking on the terminal."""
    target = f"{resource.namespace}/{resource.name}"
    branch = repository.config.spec.status_branch
    where = source or status_source(str(repository.root), branch)
    try:
        with status_tree(where, branch) as (clone, tip):
            plan = current_plan(clone, tip, resource.namespace, resource.name)
    except SeshatError as error:
        _fail(f"{error}; nothing is approved (give --plan to approve a plan by its id)")
        raise
    if plan is None:
        _fail(f"the status of {target} on {branch} names no current plan: nothing to approve")
        raise AssertionError
    if plan.kind != resource.kind:
        _fail(f"the status of {target} is a {plan.kind}'s; the repository has a {resource.kind}")
    click.echo(f"{target}: plan {plan.id} ({plan.phase or 'no phase'}; from {branch})")
    if plan.kind == "DatabaseMigration":
        click.echo(f"applies     {plan.statements} file(s): {', '.join(plan.files) or '-'}")
    else:
        hazards = ", ".join(f"{k}={v}" for k, v in sorted(plan.hazards.items())) or "none"
        click.echo(
            f"statements  {plan.statements}; destructive: {plan.destructive}; hazards: {hazards}"
        )
        if plan.privilege_changes:
            click.echo(f"privileges  {', '.join(plan.privilege_changes)}")
    click.echo(f"(the whole plan: seshat plan show {target})")
    if fleet:
        if plan.fleet_plan is None:
            _fail(f"the status of {target} names no fleet plan: nothing to approve")
            raise AssertionError
        click.echo(f"fleet plan  {plan.fleet_plan} (every member whose plan is the same)")
        return _confirmed(plan.fleet_plan, yes)
    return _confirmed(plan.id, yes)


def _echo_signed(signed: Signed, root: Path) -> None:
    """Say which statement file was written or signed, and how many signatures it has."""
    action = "wrote" if signed.created else "signed existing"
    click.echo(f"{action} {signed.path.relative_to(root)}")
    click.echo(f"{signed.signature_path.relative_to(root)}: {signed.signatures} signature(s)")


def _add_bundle(path: Path, bundle: Path, root: Path) -> None:
    """Append ``bundle`` to ``path``'s ``.sigstore.json`` if it signs ``path``'s bytes."""
    if not path.exists():
        _fail(
            f"{path.relative_to(root)} does not exist yet: a bundle signs an approval file's "
            "bytes, so the file is written first (seshat approve --key by the first approver)"
        )
    data = _read(path, MAX_STATEMENT_BYTES)
    raw = _read(bundle, MAX_SIGNATURE_BYTES)
    try:
        document = json.loads(raw)
        stated = document["messageSignature"]["messageDigest"]["digest"]
        signed = base64.b64decode(stated, validate=True)
    except (OSError, ValueError, KeyError, TypeError):
        _fail(f"{bundle}: not a Sigstore bundle with a message signature")
        return
    if signed != hashlib.sha256(data).digest():
        _fail(f"{bundle} signs other bytes than {path.relative_to(root)}")
    target = sigstore_path(path)
    try:
        text = _read(target, MAX_SIGNATURE_BYTES).decode("utf-8", errors="replace")
        existing = load_bundles(text)
    except SeshatError as error:
        _fail(str(error))
        return
    documents = [json.loads(item) for item in existing]
    if document not in documents:
        documents.append(document)
    target.write_text(json.dumps(documents, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    click.echo(f"{target.relative_to(root)}: {len(documents)} bundle(s)")


@click.command(name="verify-approval")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@repo_option("The repository holding the file and its ApprovalPolicy.")
@click.option("--plan", "current_plan", help="The current plan id; another one is refused.")
@click.option("--destructive", is_flag=True, help="The plan is destructive (higher quorum).")
@click.option("--privilege", is_flag=True, help="The plan changes privileges (higher quorum).")
@format_option("text", "json")
def verify_approval(
    file: Path,
    repo: Path,
    current_plan: str | None,
    destructive: bool,
    privilege: bool,
    output_format: str,
) -> None:
    """Say who signed an Approval (or RunAcknowledgment) file and whether the policy accepts it.

    Exit status: 0 accepted, 1 refused with the reason, 2 could not run.
    """
    repository = _repository(repo)
    data = _read(file, MAX_STATEMENT_BYTES)
    try:
        documents = read_documents(data)
    except FileError as error:
        _fail(f"{file}: {error.message}")
        return
    kind = (
        documents[0].data.get("kind") if documents and isinstance(documents[0].data, dict) else None
    )
    model: type[Approval] | type[RunAcknowledgment] = (
        RunAcknowledgment if kind == "RunAcknowledgment" else Approval
    )
    namespace = ACKNOWLEDGMENT_NAMESPACE if kind == "RunAcknowledgment" else APPROVAL_NAMESPACE
    try:
        statement = load_one(file, model)
        sig = signature_path(file)
        # Armor is ASCII: other bytes cannot be part of a signature, and are not an error.
        signatures = _read(sig, MAX_SIGNATURE_BYTES).decode("ascii", errors="replace")
        keyless = sigstore_path(file)
        keyless_text = _read(keyless, MAX_SIGNATURE_BYTES).decode("utf-8", errors="replace")
        bundles = load_bundles(keyless_text, str(keyless))
        named = statement.spec.resource
        loaded = repository.find(named.kind, named.namespace, named.name)
        expected = (
            ResourceRef(
                kind=named.kind,
                namespace=named.namespace,
                name=named.name,
                uid=str(loaded.resource.metadata.uid),
            )
            if loaded is not None
            else None
        )
        policies = [
            r.resource for r in repository.resources if isinstance(r.resource, ApprovalPolicy)
        ]
        verdict = verify_statement(
            statement,
            data,
            signatures,
            policies,
            repository.root,
            namespace=namespace,
            expected=expected,
            current_plan=current_plan,
            bundles=bundles,
            destructive=destructive,
            privilege=privilege,
        )
    except SeshatError as error:
        _fail(str(error))
        return
    if loaded is None and verdict.accepted:
        verdict = type(verdict)(
            False,
            "wrong_resource",
            f"the repository declares no {named.kind} {named.namespace}/{named.name}",
        )
    if output_format == "json":
        click.echo(json.dumps(verdict.to_json(), sort_keys=True))
    else:
        for signer in verdict.signers:
            click.echo(f"signed by {signer.principal} ({signer.fingerprint})")
        if verdict.accepted:
            click.echo(f"accepted: {verdict.message}")
        else:
            click.echo(f"refused: {verdict.reason}: {verdict.message}")
    sys.exit(EXIT_OK if verdict.accepted else EXIT_REFUSED)


@click.command()
@click.argument("target", metavar="NAMESPACE/NAME")
@click.option(
    "--operation",
    "operation_id",
    required=True,
    help="The operation id of the run you settled (from the status file).",
)
@_repo_option
@_kind_option
@click.option(
    "--key",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=_KEY_HELP,
)
@click.option("--comment", default="", help="What you found and did (kept in the file).")
def acknowledge(
    target: str, operation_id: str, repo: Path, kind: str | None, key: Path, comment: str
) -> None:
    """Acknowledge an uncertain run: write the RunAcknowledgment and sign it with SSH.

    Use it after a migration run ended Partial or Unknown (the status's unresolvedRun names
    the operation id) and you repaired the database: the reconciler then reads the history
    again and plans what is still pending, which needs a new approval (docs/migrations.md).

    The file goes to acknowledgments/<namespace>/<name>/<operation-id>.yaml with the
    signature in <file>.sig (namespace seshat-acknowledgment). Commit both files.
    """
    from gitops.approvals.write import acknowledge as write_acknowledgment

    repository = _repository(repo)
    resource = _resource_ref(repository, target, kind)
    try:
        signed = write_acknowledgment(repository.root, resource, operation_id, key, comment=comment)
    except (SeshatError, ValueError) as error:
        _fail(str(error))
        return
    _echo_signed(signed, repository.root)
