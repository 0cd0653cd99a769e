"""Reading what the status branch records, for people: a resource's status and its current
plan, checked against the plan's id before anything of it is shown.

Everything is read through a throwaway bare clone as Git blobs (never a checkout, so nothing
pushed there is followed). ``seshat status``, ``seshat plan show`` and ``seshat approve``
without ``--plan`` read here, so the plan a person approves is shown the way ``plan show``
shows it: the id recomputed from the plan's binding, which names the document's digest and
its summary.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops.repo.yamlfile import FileError, read_documents
from gitops.writeback.bare import BareClone
from gitops.writeback.status_files import binding_path, plan_paths, status_path
from runner.digests import Digest, digest, sha256_digest
from runner.engines.plan import PlanDocument, plan_bytes, plan_digest, plan_sql, read_plan
from runner.errors import CanNotRunError, SeshatError

__all__ = [
    "MIGRATION_PLAN_CONTRACT",
    "SCHEMA_PLAN_CONTRACT",
    "NotShown",
    "RecordedPlan",
    "checked_schema_plan",
    "current_plan",
    "status_document",
    "status_tree",
]

SCHEMA_PLAN_CONTRACT = "schema-plan-id"
"""The digest contract of a schema plan's binding (its id is ``digest(contract, binding)``)."""
MIGRATION_PLAN_CONTRACT = "migration-plan-id"
"""The digest contract of a migration plan document (its id)."""
FLEET_PLAN_CONTRACT = "fleet-plan"
"""The digest contract of a fleet plan id (:func:`fleet_plan_of`)."""
_FLEET_FIELDS = (
    "planDigest",
    "artifactDigest",
    "policy",
    "verificationPolicy",
    "executionBinding",
    "destructive",
    "privilegeChanges",
    "statements",
    "files",
)
"""What of a plan's binding (or a migration plan's document) is its content, shared by every
fleet member whose plan does the same: not the member's uid, coordination, target identity
or history fingerprint (the observed and desired schemas are inside ``planDigest``)."""


def fleet_plan_of(document: dict[str, Any]) -> Digest:
    """The fleet plan id of a member's plan, from the plan id's own document (a schema
    plan's binding, a migration plan's document): docs/fleets.md, "Approvals"."""
    kind = "DatabaseMigration" if document.get("kind") == "MigrationPlan" else "DatabaseSchema"
    content = {key: document[key] for key in _FLEET_FIELDS if key in document}
    return Digest(digest(FLEET_PLAN_CONTRACT, {"kind": kind, **content}))


class NotShown(SeshatError):
    """What the status branch holds cannot be shown as the plan its id names."""


def status_source(source: str, branch: str) -> str:
    """Where to read the status branch of ``source``: ``source`` itself when it is a URL or
    holds the branch, else the ``origin`` remote of a work tree that lacks it (a clone made
    to edit declarations has only ``origin/<branch>``, which may be stale; Seshat pushes to
    origin)."""
    folder = Path(source)
    if not folder.is_dir():
        return source

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, check=False
        )

    if git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").returncode == 0:
        return source
    origin = git("remote", "get-url", "origin")
    return origin.stdout.strip() if origin.returncode == 0 and origin.stdout.strip() else source


@contextmanager
def status_tree(source: str, branch: str) -> Iterator[tuple[BareClone, str]]:
    """The status branch's tip in a throwaway bare clone of ``source`` (a path or URL):
    files are read as Git blobs, so a symlink or a folder pushed in place of a file is never
    followed. Raises :class:`CanNotRunError` when the branch cannot be fetched or is absent."""
    with tempfile.TemporaryDirectory(prefix="seshat-status-") as folder:
        clone = BareClone(Path(folder) / "status.git", source)
        try:
            try:
                clone.fetch(branch)
            except SeshatError as error:
                raise CanNotRunError(str(error)) from None
            tip = clone.tip(branch)
            if tip is None:
                raise CanNotRunError(f"{source} has no branch {branch} yet (no pass has run?)")
            yield clone, tip
        finally:
            clone.close()


def status_document(clone: BareClone, tip: str, namespace: str, name: str) -> dict[str, Any] | None:
    """The status file of ``namespace/name`` as a mapping, or None (absent or unreadable)."""
    try:
        data = clone.read(tip, status_path(namespace, name))
    except ValueError:
        return None
    if data is None:
        return None
    try:
        found = read_documents(data)[0].data
    except (FileError, ValueError, IndexError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


@dataclass(frozen=True, slots=True)
class RecordedPlan:
    """A resource's current plan as the status branch records it, checked against its id."""

    kind: str  # DatabaseSchema | DatabaseMigration
    id: Digest
    phase: str
    statements: int  # migration plans: the files they apply
    destructive: bool
    privilege_changes: tuple[str, ...]
    hazards: dict[str, int]  # hazard code -> statements (schema plans)
    files: tuple[str, ...] = ()  # migration plans: "version name", in order
    fleet_plan: Digest | None = None  # a fleet member's fleet plan id, from the checked plan


def current_plan(clone: BareClone, tip: str, namespace: str, name: str) -> RecordedPlan | None:
    """The current plan of ``namespace/name`` (None: the status names none), checked against
    its id; :class:`NotShown` when the status or the plan's files do not hold up."""
    document = status_document(clone, tip, namespace, name)
    if document is None:
        raise NotShown(f"no status for {namespace}/{name}")
    state = document.get("status")
    state = state if isinstance(state, dict) else {}
    plan = state.get("plan")
    if not plan:
        return None
    try:
        plan_id = Digest(plan.get("id") if isinstance(plan, dict) else None)
        json_path, sql_path = plan_paths(namespace, name, plan_id)
    except ValueError:
        raise NotShown(f"the status of {namespace}/{name} names no valid plan id") from None
    raw = clone.read(tip, json_path)
    if raw is None:
        raise NotShown(f"the plan {plan_id} has no document on the status branch")
    phase = str(state.get("phase", ""))
    if document.get("kind") == "DatabaseMigrationStatus":
        migration = checked_migration_plan(plan_id, raw)
        files = tuple(f"{entry['version']} {entry['name']}" for entry in migration["files"])
        return RecordedPlan(
            "DatabaseMigration",
            plan_id,
            phase,
            len(files),
            False,
            (),
            {},
            files=files,
            fleet_plan=fleet_plan_of(migration) if _member(name) else None,
        )
    binding = clone.read(tip, binding_path(namespace, name, plan_id))
    shown = checked_schema_plan(plan_id, raw, binding, clone.read(tip, sql_path))
    summary = shown.summary
    return RecordedPlan(
        "DatabaseSchema",
        plan_id,
        phase,
        summary.statements,
        summary.destructive,
        tuple(sorted(summary.privilege_changes)),
        dict(summary.hazards),
        fleet_plan=fleet_plan_of(_json(binding, "the binding"))
        if binding and _member(name)
        else None,
    )


def _member(name: str) -> bool:
    """Whether ``name`` is a fleet member's (``<fleet>/<member>``)."""
    return "/" in name


def _json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise NotShown(f"{what} is not JSON") from None


def checked_schema_plan(
    plan_id: Digest, raw: bytes, binding: bytes | None, sql: bytes | None
) -> PlanDocument:
    """The plan document, if its binding hashes to ``plan_id`` and names its bytes and its
    summary (and the SQL file, if given, is its rendering); else :class:`NotShown`."""
    if binding is None:
        raise NotShown(
            f"plan {plan_id} has no binding on the status branch, so its document cannot be "
            "checked against its id (plans written before Seshat recorded bindings: the next "
            "pass records it)"
        )
    bound = _json(binding, "the plan's binding")
    if not isinstance(bound, dict) or digest(SCHEMA_PLAN_CONTRACT, bound) != plan_id:
        raise NotShown(f"the plan's binding does not hash to {plan_id}")
    if bound.get("planDigest") != sha256_digest(raw):
        raise NotShown(f"the plan document is not the one plan {plan_id} binds")
    try:
        document = read_plan(raw)
    except (ValueError, SeshatError):
        raise NotShown("the plan document cannot be read") from None
    summary = document.summary
    if plan_bytes(document) != raw or (
        bound.get("destructive"),
        bound.get("statements"),
        bound.get("privilegeChanges"),
    ) != (summary.destructive, summary.statements, sorted(summary.privilege_changes)):
        raise NotShown(f"the plan document does not match what plan {plan_id} binds")
    # Plans recorded before the header named the plan id carry the content digest there.
    written = (plan_sql(document, plan_id), plan_sql(document, plan_digest(document)))
    if sql is not None and sql.decode("utf-8", errors="replace") not in written:
        raise NotShown("the plan's SQL file does not match its document")
    return document


def checked_migration_plan(plan_id: Digest, raw: bytes) -> dict[str, Any]:
    """A migration plan document, if it hashes to ``plan_id``; else :class:`NotShown`."""
    document = _json(raw, "the plan document")
    if not isinstance(document, dict) or digest(MIGRATION_PLAN_CONTRACT, document) != plan_id:
        raise NotShown(f"the plan document does not hash to {plan_id}")
    return document
