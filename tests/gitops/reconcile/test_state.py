"""The local state file (gitops/reconcile/state.py): dispatch nonces, and state files made
before them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gitops.reconcile.state import StateFile

PLAN = "sha256:" + "ab" * 32


def test_a_dispatch_keeps_its_nonce_and_an_older_state_file_gains_the_column(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as old:  # the dispatches table as it was before nonces
        old.execute(
            "CREATE TABLE dispatches (op_id TEXT PRIMARY KEY, resource TEXT NOT NULL,"
            " plan_id TEXT NOT NULL, started REAL NOT NULL, finished REAL)"
        )
        old.execute("INSERT INTO dispatches VALUES ('apply-old', 'uid-1', ?, 1.0, NULL)", (PLAN,))
    old.close()

    state = StateFile(path)
    try:
        assert state.dispatch_nonce("apply-old") is None  # dispatched before nonces: unknown
        assert state.dispatched("uid-1", PLAN)
        state.mark_dispatched("apply-new", "uid-1", PLAN, "f00d" * 8)
        assert state.dispatch_nonce("apply-new") == "f00d" * 8
        assert state.dispatch_nonce("apply-never") is None
    finally:
        state.close()
    reopened = StateFile(path)  # the column is added once
    try:
        assert reopened.dispatch_nonce("apply-new") == "f00d" * 8
    finally:
        reopened.close()
