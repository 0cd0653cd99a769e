"""Safety records: what must never be forgotten, read from the status branch's history.

The status files say what a resource looks like now; anyone who can push to
``seshat/status`` can edit or delete them. What keeps an Apply from running twice must not
live only there, so every dispatch, its end and the settling of an uncertain run is also a
*record*: one ``Seshat-Record:`` trailer (canonical JSON) on the status commit that made
it. Records are read from the **history** of the branch, never from the current files, so
deleting a status file, or a commit that rewrites one, erases nothing:

* ``dispatched``: an Apply of ``planId`` started as ``operationId``, consuming ``approval``
  (the signed statement's identity, or none for ``apply: Always``); pushed before the runner
  starts;
* ``finished``: how that Apply ended (``Applied``, ``UpToDate``, ``Failed``, ``Partial``,
  ``Unknown``);
* ``settled``: an uncertain run was settled (a migration: a reading with nothing pending, or a
  signed acknowledgment; a schema Apply: a fresh Observe and Plan), ``outcome`` saying how
  it ended as far as that reading shows;
* ``recovered``: an interrupted write the uncertain run ``operationId`` left in the database
  (SQLite's hot journal) was recovered by the operation ``recovery``; what SQLite rolled
  back is that run's partial work, so the run stays uncertain until a reading settles it.

The controller also keeps, in its bare clone, a ref to every commit it pushed
(``refs/seshat/pushed``, and the old one under ``refs/seshat/rewritten/`` when the remote's
history no longer contains it), and reads records from those too: a force-push that drops
history drops nothing the controller has seen.

When ``commit.signing`` is configured, every record-bearing commit must carry a valid
signature by the controller's key (``git verify-commit`` against an allowed-signers list of
that key, plus the repository's ``commit.signing.verifyWith`` file for earlier keys). A
record in a commit without one is *tampering*: it is not honoured, and the resource it names
is Blocked (``StatusTampered``) until a person who may approve acknowledges that commit
(``seshat acknowledge NS/NAME --operation <commit>``). Without signing, records are honoured
as found (docs/security.md says why signing and a protected branch matter).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import git
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from gitops.writeback.bare import BareClone
from runner.digests import Sha256, canonical_json
from runner.errors import CanNotRunError
from runner.protocol.results import RunOutcome

__all__ = [
    "RECORD_TRAILER",
    "AnyRecord",
    "Dispatched",
    "Finished",
    "Ledger",
    "Record",
    "Recovered",
    "Settled",
    "Verifier",
    "read_ledger",
    "record_lines",
    "remember_push",
]

RECORD_TRAILER = "Seshat-Record"
PUSHED_REF = "refs/seshat/pushed"
REWRITTEN_REFS = "refs/seshat/rewritten/"
OperationId = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,128}$")]
ResourceName = Annotated[
    str,
    Field(
        pattern=r"^Database(Schema|Migration) [a-z0-9.-]+/[a-z0-9.-]+(/[a-z0-9-]+)?$",
        max_length=320,
    ),
]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel)

    resource: ResourceName  # "DatabaseMigration shop/ledger"
    operation_id: OperationId


class Dispatched(_Record):
    type: Literal["dispatched"] = "dispatched"
    uid: Annotated[str, Field(max_length=64)]
    plan_id: Sha256
    approval: Sha256 | None = None
    target_identity: Sha256 | None = None


class Finished(_Record):
    type: Literal["finished"] = "finished"
    outcome: RunOutcome


class Settled(_Record):
    type: Literal["settled"] = "settled"
    by: Annotated[str, Field(max_length=256)]
    outcome: RunOutcome | None = None  # how the reading shows the run ended (None: not said)


class Recovered(_Record):
    type: Literal["recovered"] = "recovered"
    recovery: OperationId  # the recover operation's id
    found: Literal["rollback_journal", "wal"]


AnyRecord = Dispatched | Finished | Settled | Recovered
Record = Annotated[AnyRecord, Field(discriminator="type")]
_RECORD: TypeAdapter[AnyRecord] = TypeAdapter(Record)


def record_lines(records: Iterable[AnyRecord]) -> list[str]:
    """The trailer lines of ``records``, in the order given."""
    return [
        f"{RECORD_TRAILER}: "
        + canonical_json(r.model_dump(mode="json", by_alias=True, exclude_none=True)).decode()
        for r in records
    ]


def _parse(line: str) -> AnyRecord | None:
    try:
        return _RECORD.validate_python(json.loads(line))
    except (ValueError, ValidationError, RecursionError):
        return None


@dataclass(frozen=True, slots=True)
class Verifier:
    """Who may sign records: an SSH allowed-signers text (or, for GPG, the keyring)."""

    format: Literal["ssh", "gpg"]
    allowed_signers: str = ""

    def check(self, clone: BareClone, commit: str) -> bool:
        """Whether ``commit`` carries a valid signature by an allowed key."""
        with tempfile.TemporaryDirectory(prefix="seshat-verify-") as folder:
            options: list[str] = []
            if self.format == "ssh":
                allowed = Path(folder) / "allowed_signers"
                allowed.write_text(self.allowed_signers, encoding="utf-8")
                options = ["-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}"]
            done = subprocess.run(
                ["git", "--git-dir", str(clone.path), *options, "verify-commit", commit],
                capture_output=True,
                env={**os.environ, **clone.environment},
                timeout=30,
                check=False,
            )
        return done.returncode == 0


@dataclass
class Ledger:
    """The records of a status branch's history, and what they mean."""

    records: list[tuple[str, AnyRecord]] = field(default_factory=list)
    tampered: dict[str, list[str]] = field(default_factory=dict)  # resource -> commits

    def add(self, commit: str, records: Sequence[AnyRecord]) -> None:
        self.records += [(commit, r) for r in records]

    def _of(self, resource: str) -> list[AnyRecord]:
        return [r for _, r in self.records if r.resource == resource]

    def dispatched(self, resource: str, plan_id: str) -> bool:
        """Whether an Apply of ``plan_id`` was ever started for ``resource``."""
        return any(isinstance(r, Dispatched) and r.plan_id == plan_id for r in self._of(resource))

    def consumed(self, approval: str) -> bool:
        """Whether the approval statement ``approval`` was spent on a dispatch."""
        return any(isinstance(r, Dispatched) and r.approval == approval for _, r in self.records)

    def settled(self, resource: str) -> set[str]:
        """The operation ids of ``resource`` a ``settled`` record settles."""
        return {r.operation_id for r in self._of(resource) if isinstance(r, Settled)}

    def unfinished(self, resource: str) -> list[Dispatched]:
        """Runs of ``resource`` dispatched with no ``finished`` or ``settled`` record: the
        controller that started them stopped before it read their end (oldest first)."""
        records = self._of(resource)
        ended = {r.operation_id for r in records if isinstance(r, (Finished, Settled))}
        return [r for r in records if isinstance(r, Dispatched) and r.operation_id not in ended]

    def unresolved(self, resource: str) -> list[tuple[Dispatched, str]]:
        """Runs of ``resource`` whose outcome is uncertain (no ``finished`` record, or one
        that says Partial or Unknown) and that no ``settled`` record settles, with the
        outcome to report, oldest first."""
        found: list[tuple[Dispatched, str]] = []
        records = self._of(resource)
        for record in records:
            if not isinstance(record, Dispatched):
                continue
            op = record.operation_id
            ends = [r for r in records if isinstance(r, Finished) and r.operation_id == op]
            settled = any(isinstance(r, Settled) and r.operation_id == op for r in records)
            outcome = ends[-1].outcome if ends else "Unknown"
            if not settled and outcome in ("Partial", "Unknown"):
                found.append((record, outcome))
        return found


def read_ledger(
    clone: BareClone,
    tip: str | None,
    verifier: Verifier | None,
    verified: set[str] | None = None,
) -> Ledger:
    """The records in the history of ``tip`` and of every commit the controller pushed.

    ``verified`` is a cache of commits whose signature already verified (commits are
    immutable, so once is enough); newly verified commits are added to it.
    """
    starts = [tip] if tip else []
    starts += _own_refs(clone)
    ledger = Ledger()
    if not starts:
        return ledger
    try:
        text = str(
            clone.repo.git.log(
                "--format=%H%x1f%B%x1e", "--grep", f"^{RECORD_TRAILER}: ", *starts, "--"
            )
        )
    except git.GitCommandError as error:
        raise CanNotRunError(f"cannot read the status branch's history: {error}") from None
    cache = verified if verified is not None else set()
    for entry in reversed(text.split("\x1e")):  # oldest first
        commit, _, body = entry.strip("\n").partition("\x1f")
        if not commit:
            continue
        records = []
        trailers = body.strip().split("\n\n")[-1]  # records are trailers: the last paragraph
        for line in trailers.splitlines():
            key, sep, value = line.partition(": ")
            if sep and key == RECORD_TRAILER:
                parsed = _parse(value)
                if parsed is not None:
                    records.append(parsed)
        if not records:
            continue
        if verifier is not None and commit not in cache:
            if not verifier.check(clone, commit):
                for name in sorted({r.resource for r in records}):
                    ledger.tampered.setdefault(name, []).append(commit)
                continue  # a record nobody trusted made is not honoured
            cache.add(commit)
        ledger.add(commit, records)
    return ledger


def _own_refs(clone: BareClone) -> list[str]:
    listed = str(clone.repo.git.for_each_ref("--format=%(objectname)", PUSHED_REF, REWRITTEN_REFS))
    return [line for line in listed.splitlines() if line]


def remember_push(clone: BareClone, commit: str, parent: str | None = None) -> None:
    """Keep ``commit`` (just pushed) among the controller's own refs. If the previous pushed
    commit is not in its history, the remote was rewritten: the old one is kept too.

    ``parent``: the commit ``commit`` was built on. When that is the previous pushed commit
    (a controller committing on its own last push), one ``update-ref`` that checks the old
    value does it all."""
    if parent is not None:
        try:
            clone.repo.git.update_ref(PUSHED_REF, commit, parent)
            return
        except git.GitCommandError:
            pass  # the ref held another commit (or none): the full check below
    previous = clone.resolve(PUSHED_REF)
    if previous and previous != commit:
        try:
            clone.repo.git.merge_base("--is-ancestor", previous, commit)
        except git.GitCommandError:
            clone.repo.git.update_ref(f"{REWRITTEN_REFS}{previous}", previous)
    clone.repo.git.update_ref(PUSHED_REF, commit)
