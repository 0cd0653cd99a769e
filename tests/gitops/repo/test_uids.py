"""Uids follow a resource's lifetime in real Git history (see ``gitops/repo/uids.py``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.gitrepo import GitRemote

from gitops.repo.loader import load_repository
from gitops.repo.problems import ResourceKey
from gitops.repo.uids import WORKTREE, uid_from

POLICY = """\
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {{name: {name}, namespace: shop}}
spec:
  artifactTypes: [application/vnd.seshat.schema.v1]
  signatures: {{mode: "off"}}
  requireDigestPin: {pin}
"""
KEY = ResourceKey("VerificationPolicy", "shop", "trusted")


def uid_of(root: Path, name: str = "trusted") -> str:
    repository = load_repository(root)
    found = repository.find("VerificationPolicy", "shop", name)
    assert found is not None, repository.problems
    uid = found.resource.metadata.uid
    assert uid is not None
    return uid


def test_uid_is_kept_across_edits_and_moves_and_renewed_after_deletion(
    git_remote: GitRemote,
) -> None:
    root = git_remote.work_dir
    git_remote.write_file("policies/a.yaml", POLICY.format(name="trusted", pin="false"))
    introduced = git_remote.commit_all("add policy")
    first = uid_of(root)
    assert first == uid_from(KEY, introduced)

    git_remote.write_file("policies/a.yaml", POLICY.format(name="trusted", pin="true"))
    git_remote.commit_all("edit policy")
    assert uid_of(root) == first

    (root / "policies/a.yaml").rename(root / "policies/b.yaml")
    git_remote.commit_all("move policy to another file")
    assert uid_of(root) == first

    (root / "policies/b.yaml").unlink()
    git_remote.write_file("policies/other.yaml", POLICY.format(name="other", pin="false"))
    git_remote.commit_all("delete policy")
    git_remote.write_file("policies/b.yaml", POLICY.format(name="trusted", pin="false"))
    readded = git_remote.commit_all("add it again")
    second = uid_of(root)
    assert second != first
    assert second == uid_from(KEY, readded)


def test_a_fresh_clone_computes_the_same_uids(git_remote: GitRemote, tmp_path: Path) -> None:
    git_remote.write_file("policies/a.yaml", POLICY.format(name="trusted", pin="false"))
    git_remote.commit_all("add policy")
    with git_remote.fresh_clone(tmp_path / "clone") as clone:
        assert uid_of(Path(clone.working_dir)) == uid_of(git_remote.work_dir)


def test_uncommitted_resources_get_a_preview_uid(git_remote: GitRemote, tmp_path: Path) -> None:
    git_remote.write_file("policies/a.yaml", POLICY.format(name="trusted", pin="false"))
    assert uid_of(git_remote.work_dir) == uid_from(KEY, WORKTREE)
    plain = tmp_path / "plain"
    (plain / "policies").mkdir(parents=True)
    (plain / "policies/a.yaml").write_text(POLICY.format(name="trusted", pin="false"))
    assert uid_of(plain) == uid_from(KEY, WORKTREE)
    subprocess.run(["git", "init", "-q", str(plain)], check=True)  # a work tree, no commit yet
    assert uid_of(plain) == uid_from(KEY, WORKTREE)


def test_uid_spelling_is_a_uuid_and_pinned() -> None:
    assert uid_from(KEY, WORKTREE) == uid_from(KEY, WORKTREE)
    assert uid_from(KEY, "0" * 40) != uid_from(KEY, "1" * 40)
    parts = uid_from(KEY, WORKTREE).split("-")
    assert [len(p) for p in parts] == [8, 4, 4, 4, 12]
