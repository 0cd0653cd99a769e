"""One status commit per pass (gitops/writeback/batch.py) against real Git: what a commit
lists, when there is none, the dispatch marker, and safety records of several resources in
one signed commit."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from harness.gitrepo import GIT_ENV, GitRemote
from harness.sshkeys import SSHKeyFactory

from gitops.reconcile.conditions import summary_conditions
from gitops.resources.approvals import ResourceRef
from gitops.resources.config import CommitIdentity, CommitSettings, Signing
from gitops.resources.status import DatabaseSchemaStatus, PlanSummary, SchemaPhase
from gitops.writeback.batch import Batch, Change, change_lines, status_change
from gitops.writeback.commits import (
    ResourceTrailers,
    Trailers,
    is_own_commit,
    parse_trailers,
)
from gitops.writeback.ledger import Dispatched, Finished, read_ledger
from gitops.writeback.status_branch import PushRejected, StatusBranch
from gitops.writeback.status_files import status_bytes, status_path

BOT = CommitSettings(author=CommitIdentity(name="seshat-bot", email="bot@seshat.test"))
REVISION = "c" * 40
PLAN = "sha256:" + "ab" * 32
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _ref(name: str) -> ResourceRef:
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    return ResourceRef(kind="DatabaseSchema", namespace="shop", name=name, uid=uid)


def _status(phase: SchemaPhase, reason: str, plan: str | None = None) -> DatabaseSchemaStatus:
    return DatabaseSchemaStatus(
        phase=phase,
        conditions=summary_conditions(phase, reason, f"{phase} because {reason}", NOW),
        plan=PlanSummary(id=plan) if plan else None,
    )


def _change(
    name: str,
    before: DatabaseSchemaStatus | None,
    after: DatabaseSchemaStatus,
    records: tuple[Dispatched | Finished, ...] = (),
) -> Change:
    files = {status_path("shop", name): status_bytes(_ref(name), after)}
    return status_change(f"DatabaseSchema shop/{name}", before, after, files, records)


def _branch(tmp_path: Path, remote: GitRemote, settings: CommitSettings = BOT) -> StatusBranch:
    return StatusBranch(
        tmp_path / "status.git", remote.remote_url, "seshat/status", settings, GIT_ENV
    )


def _messages(branch: StatusBranch) -> list[str]:
    branch.sync()
    return [str(c.message) for c in branch.log()] if branch.tip else []


AWAITING = _status(SchemaPhase.AWAITING_APPROVAL, "AwaitingApproval", PLAN)
IN_SYNC = _status(SchemaPhase.IN_SYNC, "InSync")
BLOCKED = _status(SchemaPhase.BLOCKED, "ApplyDisabled", PLAN)


def test_one_commit_lists_every_change_and_nothing_changed_makes_none(
    git_remote: GitRemote, tmp_path: Path
) -> None:
    branch = _branch(tmp_path, git_remote)
    batch = Batch(branch, REVISION)
    batch.stage(_change("orders", None, AWAITING))
    batch.stage(_change("items", None, IN_SYNC))
    first = batch.commit()
    assert first.commit is not None and batch.staged == {}
    batch.stage(_change("orders", AWAITING, IN_SYNC))
    batch.stage(_change("items", IN_SYNC, BLOCKED))
    second = batch.commit()
    assert second.commit is not None
    [latest, earliest] = _messages(branch)
    # Lines and trailers are sorted by resource, whatever order the workers staged them in.
    assert change_lines(earliest) == ["shop/items: InSync", "shop/orders: AwaitingApproval"]
    assert latest.startswith("seshat: 2 resources changed\n\n")
    assert change_lines(latest) == [
        "shop/items: InSync -> Blocked (ApplyDisabled)",
        "shop/orders: AwaitingApproval -> InSync",
    ]
    assert parse_trailers(latest) == Trailers(
        (
            ResourceTrailers("DatabaseSchema shop/items", "Blocked", PLAN),
            ResourceTrailers("DatabaseSchema shop/orders", "InSync"),
        ),
        REVISION,
    )
    assert is_own_commit(branch.log(1)[0], BOT.author)

    # The same verdicts again (from a pass over a newer commit): no commit at all.
    again = Batch(branch, "d" * 40)
    again.stage(_change("orders", IN_SYNC, IN_SYNC))
    again.stage(_change("items", BLOCKED, BLOCKED))
    assert again.commit().commit is None
    assert len(_messages(branch)) == 2

    # One resource changed among unchanged ones: the commit names that one alone.
    one = Batch(branch, "e" * 40)
    one.stage(_change("orders", IN_SYNC, IN_SYNC))
    one.stage(_change("items", BLOCKED, AWAITING))
    assert one.commit().commit is not None
    text = _messages(branch)[0]
    assert text.splitlines()[0] == "shop/items: Blocked (ApplyDisabled) -> AwaitingApproval"
    assert [r.resource for r in parse_trailers(text).resources] == ["DatabaseSchema shop/items"]
    assert parse_trailers(text).source_revision == "e" * 40


def test_the_dispatch_marker_carries_what_was_staged_and_a_failed_push_keeps_it(
    git_remote: GitRemote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    branch = _branch(tmp_path, git_remote)
    batch = Batch(branch, REVISION)
    batch.stage(_change("items", None, IN_SYNC))
    dispatched = Dispatched.model_validate(
        {
            "resource": "DatabaseSchema shop/orders",
            "operationId": "apply-1",
            "uid": _ref("orders").uid,
            "planId": PLAN,
        }
    )
    applying = _status(SchemaPhase.APPLYING, "Applying", PLAN)
    marker = _change("orders", AWAITING, applying, (dispatched,))

    def rejected(*_: object, **__: object) -> None:
        raise PushRejected("rejected")

    with monkeypatch.context() as patch:
        patch.setattr(branch, "publish", rejected)
        with pytest.raises(PushRejected):
            batch.commit(marker)
    assert list(batch.staged) == ["DatabaseSchema shop/items"]  # the marker is not kept
    assert _messages(branch) == []

    written = batch.commit(marker)
    assert written.commit is not None and batch.staged == {}
    [text] = _messages(branch)
    assert change_lines(text) == ["shop/items: InSync", "shop/orders: AwaitingApproval -> Applying"]
    assert [r.phase for r in parse_trailers(text).resources] == ["InSync", "Applying"]
    assert branch.ledger.dispatched("DatabaseSchema shop/orders", PLAN)

    # A record is committed even when no file changes.
    finished = Finished.model_validate(
        {"resource": "DatabaseSchema shop/orders", "operationId": "apply-1", "outcome": "Applied"}
    )
    batch.stage(_change("orders", applying, applying, (finished,)))
    assert batch.commit().commit is not None
    assert change_lines(_messages(branch)[0]) == ["shop/orders: Applying"]


def test_records_of_several_resources_in_one_signed_commit(
    git_remote: GitRemote, tmp_path: Path, ssh_key_factory: SSHKeyFactory
) -> None:
    key = ssh_key_factory("bot@seshat.test")
    signed = CommitSettings(
        author=BOT.author, signing=Signing(format="ssh", key_file=str(key.private_key))
    )
    branch = _branch(tmp_path, git_remote, signed)
    records = tuple(
        Finished.model_validate(
            {"resource": f"DatabaseSchema shop/{n}", "operationId": f"apply-{n}", "outcome": o}
        )
        for n, o in (("orders", "Applied"), ("items", "Unknown"))
    )
    batch = Batch(branch, REVISION)
    batch.stage(_change("orders", None, IN_SYNC, records[:1]))
    batch.stage(_change("items", None, IN_SYNC, records[1:]))
    assert batch.commit().commit is not None
    verifier = branch.verifier()
    ledger = branch.load_ledger(verifier)
    # In the order of the resources (items before orders), as the commit lists them.
    assert [r for _, r in ledger.records] == [records[1], records[0]]
    assert ledger.tampered == {}

    # The same records in a commit the controller's key did not sign: both resources it
    # names are tampered with, and neither record is honoured.
    forger = StatusBranch(
        tmp_path / "forger.git", git_remote.remote_url, "seshat/status", BOT, GIT_ENV
    )
    forged = Batch(forger, REVISION)
    forged.stage(_change("orders", IN_SYNC, AWAITING, records[:1]))
    forged.stage(_change("items", IN_SYNC, AWAITING, records[1:]))
    commit = forged.commit().commit
    assert commit is not None
    branch.sync()
    ledger = read_ledger(branch.clone, branch.tip, verifier)
    assert ledger.tampered == {
        "DatabaseSchema shop/items": [commit],
        "DatabaseSchema shop/orders": [commit],
    }
    assert len(ledger.records) == 2  # only the signed commit's


def test_while_an_apply_runs_another_resource_s_verdict_waits_at_most_the_hold(
    git_remote: GitRemote, tmp_path: Path
) -> None:
    """Workers side by side: one resource's Apply is running (its marker is out) when
    another's verdict is staged. The verdict goes out with the next marker (one commit, not
    two), or on its own once it has waited ``hold`` seconds, never later; once the Apply's
    own verdict is staged the pass is back to one commit at its end."""
    branch = _branch(tmp_path, git_remote)
    now = [100.0]
    batch = Batch(branch, REVISION, clock=lambda: now[0])
    applying = _status(SchemaPhase.APPLYING, "Applying", PLAN)
    batch.commit(marker=_change("orders", AWAITING, applying))
    batch.stage(_change("items", None, IN_SYNC))  # another worker, mid-Apply
    assert list(batch.staged) == ["DatabaseSchema shop/items"]
    assert not batch.overdue()
    # That worker's next resource dispatches its Apply: one commit with both.
    batch.commit(marker=_change("users", AWAITING, applying))
    assert batch.staged == {}
    assert change_lines(_messages(branch)[0]) == [
        "shop/items: InSync",
        "shop/users: AwaitingApproval -> Applying",
    ]
    # No marker comes: the verdict waits the hold, no longer.
    batch.stage(_change("items", IN_SYNC, BLOCKED))
    now[0] += Batch.hold - 0.1
    batch.flush_overdue()
    assert list(batch.staged) == ["DatabaseSchema shop/items"]
    now[0] += 0.1
    assert batch.overdue()
    batch.flush_overdue()
    assert batch.staged == {}
    assert change_lines(_messages(branch)[0]) == ["shop/items: InSync -> Blocked (ApplyDisabled)"]
    # A verdict staged after the hold has passed for an earlier one goes out at once.
    batch.stage(_change("items", BLOCKED, IN_SYNC))
    now[0] += Batch.hold
    batch.stage(_change("carts", None, IN_SYNC))
    assert batch.staged == {}
    assert len(_messages(branch)) == 4
    # Both Applies end: their verdicts wait for the pass's own commit.
    batch.stage(_change("orders", applying, IN_SYNC))
    batch.stage(_change("users", applying, IN_SYNC))
    now[0] += 10 * Batch.hold
    batch.flush_overdue()
    assert list(batch.staged) == ["DatabaseSchema shop/orders", "DatabaseSchema shop/users"]
    assert batch.commit().commit is not None
    assert change_lines(_messages(branch)[0]) == [
        "shop/orders: Applying -> InSync",
        "shop/users: Applying -> InSync",
    ]


def test_a_commit_on_the_controller_s_own_last_push_fetches_nothing_and_loses_nothing(
    git_remote: GitRemote, tmp_path: Path
) -> None:
    """After its own push, the controller commits without fetching first. When someone else
    pushed in between, the push is refused and the commit is made again on their tip; when
    someone overwrote a status file with what differs from the controller's verdict, the
    verdict is written again even though it did not change since the controller's push."""
    ours = _branch(tmp_path, git_remote)
    theirs = StatusBranch(
        tmp_path / "theirs.git", git_remote.remote_url, "seshat/status", BOT, GIT_ENV
    )
    batch = Batch(ours, REVISION)
    fetches: list[str | None] = []
    original_sync = ours.sync

    def counted_sync() -> None:
        fetches.append(ours.tip)
        original_sync()

    ours.sync = counted_sync  # type: ignore[method-assign]
    batch.stage(_change("orders", None, AWAITING))
    batch.commit()
    assert len(fetches) == 1  # the first commit builds on a fetched tip
    batch.stage(_change("orders", AWAITING, IN_SYNC))
    first = batch.commit()
    assert first.commit is not None and len(fetches) == 1  # on its own push: no fetch

    # Someone else pushes another file: our push is refused, redone on their tip.
    theirs.publish({"status/shop/other.yaml": b"a: 1\n"}, "other", Trailers.one("X shop/o", "P"))
    batch.stage(_change("items", None, IN_SYNC))
    second = batch.commit()
    assert second.commit is not None and len(fetches) == 2
    # Someone overwrites orders' status; our verdict for it did not change since our push,
    # yet it is written again on the fetched tip.
    theirs.publish(
        {status_path("shop", "orders"): b"phase: Nonsense\n"}, "x", Trailers.one("X shop/o", "P")
    )
    batch.stage(_change("orders", IN_SYNC, IN_SYNC))
    third = batch.commit()
    assert third.commit is not None and len(fetches) == 3
    with git_remote.fresh_clone(tmp_path / "check") as clone:
        clone.git.checkout("seshat/status")
        assert (tmp_path / "check/status/shop/other.yaml").read_text() == "a: 1\n"
        orders = (tmp_path / "check" / status_path("shop", "orders")).read_bytes()
        assert orders == status_bytes(_ref("orders"), IN_SYNC)
        assert (tmp_path / "check" / status_path("shop", "items")).exists()
        assert clone.head.commit.hexsha == third.commit
