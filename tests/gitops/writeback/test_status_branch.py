"""The status branch against real Git: bare remotes, concurrent pushers, SSH-signed commits."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import git
from harness.gitrepo import GIT_ENV, GitRemote
from harness.sshkeys import SSHKeyFactory

from gitops.resources.approvals import ResourceRef
from gitops.resources.config import CommitIdentity, CommitSettings, Signing
from gitops.resources.status import (
    Condition,
    ConditionType,
    DatabaseSchemaStatus,
    SchemaPhase,
)
from gitops.writeback.commits import (
    ResourceTrailers,
    Trailers,
    is_own_commit,
    message,
    parse_trailers,
)
from gitops.writeback.status_branch import StatusBranch
from gitops.writeback.status_files import plan_paths, status_bytes, status_path

BOT = CommitSettings(author=CommitIdentity(name="seshat-bot", email="bot@seshat.test"))
ORDERS = ResourceRef(
    kind="DatabaseSchema",
    namespace="shop",
    name="orders",
    uid="6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab",
)
PLAN = "sha256:" + "ab" * 32


def _status(phase: SchemaPhase, reason: str) -> bytes:
    status = DatabaseSchemaStatus(
        phase=phase,
        conditions=[
            Condition(
                type=ConditionType.READY,
                status="False",
                reason=reason,
                last_transition_time=datetime(2026, 12, 1, tzinfo=UTC),
            )
        ],
    )
    return status_bytes(ORDERS, status)


def _branch(tmp_path: Path, remote: GitRemote, name: str = "a", **kw: object) -> StatusBranch:
    settings = kw.get("settings", BOT)
    assert isinstance(settings, CommitSettings)
    return StatusBranch(tmp_path / name, remote.remote_url, "seshat/status", settings, GIT_ENV)


def _remote_log(remote: GitRemote) -> list[str]:
    out = subprocess.run(
        [
            "git",
            "--git-dir",
            str(remote.remote_path),
            "log",
            "--format=%H %an <%ae> %s",
            "refs/heads/seshat/status",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=GIT_ENV,
    )
    return out.stdout.splitlines()


def test_publish_commits_once_per_material_change(git_remote: GitRemote, tmp_path: Path) -> None:
    git_remote.write_file("databases/x.yaml", "# declarations\n")
    git_remote.commit_all("declarations")
    branch = _branch(tmp_path, git_remote)
    awaiting = _status(SchemaPhase.AWAITING_APPROVAL, "AwaitingApproval")
    files: dict[str, bytes | None] = {status_path("shop", "orders"): awaiting}
    json_path, sql_path = plan_paths("shop", "orders", PLAN)
    files[json_path], files[sql_path] = b'{"plan": 1}\n', b"CREATE TABLE t ();\n"
    trailers = Trailers.one("DatabaseSchema shop/orders", "AwaitingApproval", PLAN, "a" * 40)
    first = branch.publish(files, "shop/orders: AwaitingApproval", trailers)
    assert first.commit is not None and first.attempts == 1

    # The same status again: nothing material changed, no commit.
    again = branch.publish(files, "shop/orders: AwaitingApproval", trailers)
    assert again.commit is None
    log = _remote_log(git_remote)
    assert len(log) == 1 and "seshat-bot <bot@seshat.test>" in log[0]

    with git_remote.fresh_clone(tmp_path / "check") as clone:
        clone.git.checkout("seshat/status")
        head = clone.head.commit
        assert str(head.message).endswith(
            "\n\nSeshat-Resource: DatabaseSchema shop/orders\nSeshat-Phase: AwaitingApproval\n"
            f"Seshat-Plan: {PLAN}\nSeshat-Source-Revision: {'a' * 40}\n"
        )
        assert parse_trailers(str(head.message)) == Trailers(
            (ResourceTrailers("DatabaseSchema shop/orders", "AwaitingApproval", PLAN),), "a" * 40
        )
        assert is_own_commit(head, BOT.author)
        # The status branch holds only Seshat's files, never the declarations.
        tracked = sorted(clone.git.ls_files().splitlines())
        assert tracked == sorted([status_path("shop", "orders"), json_path, sql_path])
        assert (tmp_path / "check" / status_path("shop", "orders")).read_bytes() == awaiting
        assert not is_own_commit(clone.commit("main"), BOT.author)

    # A real change commits again, and a file can be removed.
    changed = {
        status_path("shop", "orders"): _status(SchemaPhase.IN_SYNC, "InSync"),
        sql_path: None,
    }
    third = branch.publish(
        changed, "shop/orders: InSync", Trailers.one("DatabaseSchema shop/orders", "InSync")
    )
    assert third.commit is not None and len(_remote_log(git_remote)) == 2
    assert branch.read(sql_path) is None


def test_a_rejected_push_is_replayed_on_the_new_tip_never_forced(
    git_remote: GitRemote, tmp_path: Path
) -> None:
    ours, theirs = _branch(tmp_path, git_remote, "ours"), _branch(tmp_path, git_remote, "theirs")
    theirs.publish(
        {"status/shop/other.yaml": b"a: 1\n"}, "other", Trailers.one("X shop/other", "P")
    )
    their_first = _remote_log(git_remote)[0].split()[0]

    original_sync = ours.sync
    raced: list[bool] = []

    def sync_then_someone_pushes() -> None:
        original_sync()
        if not raced:  # between our fetch and our push, another writer pushes
            raced.append(True)
            theirs.publish(
                {"status/shop/other.yaml": b"a: 2\n"}, "other 2", Trailers.one("X shop/other", "P")
            )

    ours.sync = sync_then_someone_pushes  # type: ignore[method-assign]
    written = ours.publish(
        {"status/shop/orders.yaml": b"b: 1\n"}, "orders", Trailers.one("X shop/orders", "P")
    )
    assert written.commit is not None and written.attempts == 2
    log = [line.split()[0] for line in _remote_log(git_remote)]
    assert len(log) == 3 and log[-1] == their_first  # nothing of theirs was lost
    with git_remote.fresh_clone(tmp_path / "check") as clone:
        clone.git.checkout("seshat/status")
        assert (tmp_path / "check/status/shop/other.yaml").read_text() == "a: 2\n"
        assert (tmp_path / "check/status/shop/orders.yaml").read_text() == "b: 1\n"
        assert clone.head.commit.hexsha == written.commit
        assert clone.head.commit.parents[0].hexsha == log[1]  # linear: ours on top of theirs


def test_commits_are_ssh_signed_when_configured(
    git_remote: GitRemote, tmp_path: Path, ssh_key_factory: SSHKeyFactory
) -> None:
    key = ssh_key_factory("bot@seshat.test")
    settings = CommitSettings(
        author=BOT.author, signing=Signing(format="ssh", key_file=str(key.private_key))
    )
    branch = StatusBranch(tmp_path / "a", git_remote.remote_url, "seshat/status", settings, GIT_ENV)
    written = branch.publish({"status/a/b.yaml": b"x: 1\n"}, "signed", Trailers.one("X a/b", "P"))
    assert written.commit is not None
    allowed = tmp_path / "allowed"
    allowed.write_text(f"bot@seshat.test {key.public_key_text}\n")
    repo = git.Repo(tmp_path / "a")
    repo.git.update_environment(**GIT_ENV)
    with repo.config_writer() as config:
        config.set_value("gpg.ssh", "allowedSignersFile", str(allowed))
    assert (
        'Good "git" signature'
        in repo.git.verify_commit("--raw", written.commit, with_extended_output=True)[2]
    )
    repo.close()


def test_trailers_group_by_resource_and_read_single_resource_commits() -> None:
    revision = "c" * 40
    trailers = Trailers(
        (
            ResourceTrailers("DatabaseSchema shop/orders", "AwaitingApproval", PLAN),
            ResourceTrailers("DatabaseMigration shop/ledger", "InSync"),
        ),
        revision,
    )
    text = message("seshat: 2 resources changed", "a\nb", trailers, ["Seshat-Record: {}"])
    assert text.endswith(
        "\n\nSeshat-Resource: DatabaseSchema shop/orders\nSeshat-Phase: AwaitingApproval\n"
        f"Seshat-Plan: {PLAN}\nSeshat-Resource: DatabaseMigration shop/ledger\n"
        f"Seshat-Phase: InSync\nSeshat-Source-Revision: {revision}\nSeshat-Record: {{}}\n"
    )
    assert parse_trailers(text) == trailers
    # A single-resource commit reads as before; a phase with no resource above it is not one.
    single = "x: Blocked\n\nSeshat-Resource: DatabaseSchema a/b\nSeshat-Phase: Blocked\n"
    assert parse_trailers(single) == Trailers.one("DatabaseSchema a/b", "Blocked")
    assert parse_trailers("x\n\nSeshat-Phase: InSync\nSeshat-Plan: p\n") == Trailers()
    # A body quoting a trailer cannot add a resource, even as the last paragraph.
    for around in (Trailers(), Trailers.one("DatabaseSchema a/b", "InSync")):
        quoted = message("s", "Seshat-Resource: DatabaseSchema evil/x", around)
        assert parse_trailers(quoted) == around
