"""The revision history and its verdict (what ``migrations status`` reports).

The six verdicts, in precedence order (the first that holds is reported):

1. ``dirty``: a row not fully applied (a file that failed or was interrupted midway);
2. ``checksum_modified``: an applied file's bytes changed since it was applied;
3. ``database_ahead``: applied versions the directory does not have;
4. ``out_of_order``: a pending version below the highest applied one (unless allowed);
5. ``nothing_pending``;
6. ``ready``: the pending files, listed explicitly (never a difference of counts).

Checkpoints (``<version>_<name>.checkpoint.sql``, the cumulative schema at a version): on a
fresh database (no rows at all) the newest checkpoint is pending instead of every file at or
below its version, which read as *covered*; once the database has rows, checkpoints are
never pending, and files below an applied checkpoint (the floor) read as covered. A
checkpoint never repairs a dirty history. This is why pending is an explicit list: on a
fresh database it is the checkpoint and the files above it, not every file.

The history fingerprint covers every row and every file (version and checksum), so a plan
bound to it is refused when either moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.digests import digest
from runner.migrations.files import MigrationFile
from runner.models import wire_fields
from runner.protocol.results import HistoryVerdict

__all__ = ["BLOCKING", "HistoryRow", "Verdict", "judge"]

BLOCKING = tuple(verdict for verdict in HistoryVerdict if verdict.blocking)


@dataclass(frozen=True, slots=True)
class HistoryRow:
    version: str
    description: str
    checksum: str
    algorithm: str
    state: str  # applied | running | failed
    statements_applied: int
    statements_total: int
    applied_at: str
    execution_ms: int
    runner_version: str
    operation_id: str

    def to_json(self) -> dict[str, object]:
        return wire_fields(self)


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: HistoryVerdict
    versions: tuple[str, ...]  # the versions involved (or the pending ones for ready)
    pending: tuple[str, ...]
    fingerprint: str
    current: str | None = None
    applied: int = 0
    detail: str = ""
    pending_files: tuple[MigrationFile, ...] = field(default=(), repr=False)
    checkpoint: str | None = None  # the applied floor, or the checkpoint a fresh database runs
    covered: tuple[str, ...] = ()  # files a checkpoint stands for (no row of their own)

    @property
    def blocking(self) -> bool:
        return self.kind.blocking

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.kind,
            "versions": list(self.versions),
            "pending": list(self.pending),
            "fingerprint": self.fingerprint,
            "currentVersion": self.current,
            "appliedCount": self.applied,
            "detail": self.detail,
            "checkpointVersion": self.checkpoint,
            "covered": list(self.covered),
        }


def fingerprint(rows: list[HistoryRow], files: list[MigrationFile]) -> str:
    return digest(
        "migration-history",
        {
            "rows": [r.to_json() | {"appliedAt": "", "executionMs": 0} for r in rows],
            "files": [
                {"version": f.version, "checksum": f.checksum}
                | ({"checkpoint": True} if f.checkpoint else {})
                for f in files
            ],
        },
    )


def judge(
    files: list[MigrationFile], rows: list[HistoryRow], *, allow_out_of_order: bool = False
) -> Verdict:
    by_number = {int(r.version): r for r in rows}
    print_ = fingerprint(rows, files)
    applied = [r for r in rows if r.state == "applied"]
    current = max(applied, key=lambda r: int(r.version)).version if applied else None

    covered: list[MigrationFile] = []
    checkpoint: MigrationFile | None = None

    def verdict(
        kind: HistoryVerdict,
        versions: list[str],
        detail: str,
        pending: list[MigrationFile] | None = None,
    ) -> Verdict:
        pend = pending or []
        return Verdict(
            kind,
            tuple(versions),
            tuple(f.version for f in pend),
            print_,
            current,
            len(applied),
            detail,
            tuple(pend),
            checkpoint.version if checkpoint is not None else None,
            tuple(f.version for f in covered),
        )

    dirty = [r.version for r in rows if r.state != "applied"]
    if dirty:
        return verdict(
            HistoryVerdict.DIRTY,
            dirty,
            "a migration did not finish: "
            + ", ".join(
                f"{r.version} ({r.state}, {r.statements_applied} of "
                f"{r.statements_total} statements)"
                for r in rows
                if r.state != "applied"
            ),
        )
    files_by_number = {f.number: f for f in files}
    modified = [
        r.version
        for r in applied
        if int(r.version) in files_by_number
        and (files_by_number[int(r.version)].checksum != r.checksum)
    ]
    if modified:
        return verdict(
            HistoryVerdict.CHECKSUM_MODIFIED,
            modified,
            "applied files changed since they were applied",
        )
    ahead = [r.version for r in applied if int(r.version) not in files_by_number]
    if ahead:
        return verdict(
            HistoryVerdict.DATABASE_AHEAD,
            ahead,
            "the database has applied versions the directory lacks",
        )
    regular = [f for f in files if not f.checkpoint]
    checkpoints = [f for f in files if f.checkpoint]
    if not rows and checkpoints:  # a fresh database starts from the newest checkpoint
        checkpoint = checkpoints[-1]
        covered = [f for f in regular if f.number <= checkpoint.number]
        pending = [checkpoint] + [f for f in regular if f.number > checkpoint.number]
    else:
        floors = [f for f in checkpoints if f.number in by_number]
        checkpoint = floors[-1] if floors else None
        covered = [
            f
            for f in regular
            if checkpoint is not None and f.number < checkpoint.number and f.number not in by_number
        ]
        pending = [f for f in regular if f.number not in by_number and f not in covered]
    highest = max((int(r.version) for r in applied), default=-1)
    below = [f.version for f in pending if f.number < highest]
    if below and not allow_out_of_order:
        return verdict(
            HistoryVerdict.OUT_OF_ORDER,
            below,
            f"pending versions below the highest applied one ({current})",
            pending,
        )
    if not pending:
        return verdict(HistoryVerdict.NOTHING_PENDING, [], "every file is applied")
    return verdict(HistoryVerdict.READY, [f.version for f in pending], "", pending)
