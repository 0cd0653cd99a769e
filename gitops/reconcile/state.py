"""The local state file (SQLite): claims, dispatch markers, consumed approvals, leases.

Working state only: Git's status branch is the durable record, and this file can be lost.
What it cannot prove is treated as uncertain (an Apply whose dispatch marker is on the
status branch but whose result is not is never started again).

* claims: an operation about to be dispatched (type, id, input fingerprint); a claim whose
  input moved is discarded;
* dispatches: an Apply's dispatch-started marker, written (and pushed to Git) before the
  runner starts, with the dispatch's nonce: the secret its Kubernetes Job carries, by which
  a restarted controller tells that Job from one someone else labelled alike. The nonce
  lives here only, never on the status branch (docs/kubernetes.md, "Adoption by identity");
* consumed: approvals (by statement identity) spent on a dispatch;
* verified: status commits whose records' signature verified;
* schedule: when each resource is due again (``interval``, ``retryInterval`` after Failed);
* revisions: the last revision of each watched branch a pass read, so the next pass knows
  what a push changed (:mod:`gitops.reconcile.touched`);
* leases: one per coordination digest, with a random epoch per uninterrupted holding.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from pathlib import Path

from gitops.execution.leases import Lease

__all__ = ["Lease", "StateFile"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    resource TEXT NOT NULL, operation TEXT NOT NULL, op_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (resource, operation));
CREATE TABLE IF NOT EXISTS dispatches (
    op_id TEXT PRIMARY KEY, resource TEXT NOT NULL, plan_id TEXT NOT NULL,
    started REAL NOT NULL, finished REAL, nonce TEXT);
CREATE TABLE IF NOT EXISTS consumed (
    approval TEXT PRIMARY KEY, resource TEXT NOT NULL, op_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schedule (resource TEXT PRIMARY KEY, due REAL NOT NULL);
CREATE TABLE IF NOT EXISTS verified (commit_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS revisions (branch TEXT PRIMARY KEY, revision TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    coordination TEXT PRIMARY KEY, holder TEXT NOT NULL, epoch TEXT NOT NULL,
    acquired REAL NOT NULL);
"""


class StateFile:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # A pass's workers take turns with it (gitops/reconcile/workers.py), never at once.
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(_SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(dispatches)")}
        if "nonce" not in columns:  # a state file from before dispatch nonces
            self.db.execute("ALTER TABLE dispatches ADD COLUMN nonce TEXT")

    def close(self) -> None:
        self.db.close()

    # -- claims --------------------------------------------------------------------------

    def claim(self, resource: str, operation: str, op_id: str, fingerprint: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)",
            (resource, operation, op_id, fingerprint, time.time()),
        )

    def claimed(self, resource: str, operation: str) -> tuple[str, str] | None:
        row = self.db.execute(
            "SELECT op_id, fingerprint FROM claims WHERE resource = ? AND operation = ?",
            (resource, operation),
        ).fetchone()
        return (row[0], row[1]) if row else None

    def release_claim(self, resource: str, operation: str) -> None:
        self.db.execute(
            "DELETE FROM claims WHERE resource = ? AND operation = ?", (resource, operation)
        )

    # -- dispatches and approvals --------------------------------------------------------

    def mark_dispatched(
        self, op_id: str, resource: str, plan_id: str, nonce: str | None = None
    ) -> None:
        self.db.execute(
            "INSERT INTO dispatches (op_id, resource, plan_id, started, nonce)"
            " VALUES (?, ?, ?, ?, ?)",
            (op_id, resource, plan_id, time.time(), nonce),
        )

    def dispatch_nonce(self, op_id: str) -> str | None:
        """The nonce the dispatch ``op_id`` was given; None when this file has no record of
        it (it was lost, or the dispatch predates nonces)."""
        row = self.db.execute("SELECT nonce FROM dispatches WHERE op_id = ?", (op_id,)).fetchone()
        return str(row[0]) if row and row[0] else None

    def mark_finished(self, op_id: str) -> None:
        self.db.execute("UPDATE dispatches SET finished = ? WHERE op_id = ?", (time.time(), op_id))

    def dispatched(self, resource: str, plan_id: str) -> bool:
        """Whether an Apply of this plan was ever started for this resource."""
        row = self.db.execute(
            "SELECT 1 FROM dispatches WHERE resource = ? AND plan_id = ?", (resource, plan_id)
        ).fetchone()
        return row is not None

    def consume(self, approval: str, resource: str, op_id: str) -> None:
        self.db.execute("INSERT INTO consumed VALUES (?, ?, ?)", (approval, resource, op_id))

    def is_consumed(self, approval: str) -> bool:
        row = self.db.execute("SELECT 1 FROM consumed WHERE approval = ?", (approval,)).fetchone()
        return row is not None

    # -- status commits whose signature verified (commits never change) -----------------

    def verified_commits(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT commit_id FROM verified")}

    def remember_verified(self, commits: set[str]) -> None:
        self.db.executemany(
            "INSERT OR IGNORE INTO verified VALUES (?)", [(c,) for c in sorted(commits)]
        )

    # -- schedule ------------------------------------------------------------------------

    def due(self, resource: str, now: float) -> bool:
        row = self.db.execute("SELECT due FROM schedule WHERE resource = ?", (resource,)).fetchone()
        return row is None or float(row[0]) <= now

    def schedule(self, resource: str, due: float) -> None:
        self.db.execute("INSERT OR REPLACE INTO schedule VALUES (?, ?)", (resource, due))

    def due_now(self, resources: list[str]) -> None:
        """Make ``resources`` due at once (a push touched them), whatever their schedule."""
        self.db.executemany(
            "INSERT OR REPLACE INTO schedule VALUES (?, 0)", [(r,) for r in sorted(resources)]
        )

    # -- revisions -----------------------------------------------------------------------

    def last_revision(self, branch: str) -> str | None:
        row = self.db.execute(
            "SELECT revision FROM revisions WHERE branch = ?", (branch,)
        ).fetchone()
        return str(row[0]) if row else None

    def remember_revision(self, branch: str, revision: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO revisions VALUES (?, ?)", (branch, revision))

    # -- leases --------------------------------------------------------------------------

    def acquire(self, coordination: str, holder: str) -> Lease | None:
        """A new holding (new epoch) of the lease, or None if someone else holds it."""
        epoch = secrets.token_hex(16)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            row = self.db.execute(
                "SELECT holder FROM leases WHERE coordination = ?", (coordination,)
            ).fetchone()
            if row is not None and row[0] != holder:
                self.db.execute("ROLLBACK")
                return None
            self.db.execute(
                "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?)",
                (coordination, holder, epoch, time.time()),
            )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return Lease(coordination, holder, epoch)

    def holder_of(self, coordination: str) -> str | None:
        """Who holds the lease on ``coordination`` now (None: nobody)."""
        row = self.db.execute(
            "SELECT holder FROM leases WHERE coordination = ?", (coordination,)
        ).fetchone()
        return str(row[0]) if row else None

    def take_over(self, coordination: str, earlier: str, holder: str) -> Lease | None:
        """A new holding for ``holder`` of a lease ``earlier`` still holds: only for an
        earlier start of the same controller whose runners on the realm were followed to
        their end (:meth:`gitops.reconcile.lifecycle.ResourcePass.take_lease`); None if the
        lease moved meanwhile."""
        epoch = secrets.token_hex(16)
        done = self.db.execute(
            "UPDATE leases SET holder = ?, epoch = ?, acquired = ?"
            " WHERE coordination = ? AND holder = ?",
            (holder, epoch, time.time(), coordination, earlier),
        )
        return Lease(coordination, holder, epoch) if done.rowcount == 1 else None

    def holds(self, lease: Lease) -> bool:
        """Whether ``lease``'s holding is still uninterrupted (same epoch)."""
        row = self.db.execute(
            "SELECT holder, epoch FROM leases WHERE coordination = ?", (lease.coordination,)
        ).fetchone()
        return row is not None and (row[0], row[1]) == (lease.holder, lease.epoch)

    def release(self, lease: Lease) -> None:
        self.db.execute(
            "DELETE FROM leases WHERE coordination = ? AND holder = ? AND epoch = ?",
            (lease.coordination, lease.holder, lease.epoch),
        )
